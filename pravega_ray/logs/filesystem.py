"""Filesystem durable log: append + fsync, rotated files, fenced by an epoch file.

Layout of a log directory::

    epoch                                  decimal epoch of the current owner
    truncation                             decimal sequence number: records below it are gone
    log-<first sequence, 20>-<epoch, 10>.dat   records, in sequence order across files

*format* A record is ``[magic "PRL1"][epoch u64][sequence u64][length u32]
[crc32 u32 of payload][payload]``, big-endian. Reading a file stops at its
first frame that is short or fails its checksum: a tail torn by a crash, never
acknowledged (``append`` returns only after ``fdatasync``).

Rotation: a new file is started by every new owner and whenever the current
one reaches ``file_bytes_max``. Truncation writes the ``truncation`` file
(atomic rename) and then deletes files all of whose records are below it; a
file that holds the truncation point stays, and ``read_all`` skips its records
below the point.

Fencing: ``initialize`` writes ``epoch + 1`` to the ``epoch`` file (atomic
rename) and starts a new file. Before each append an owner re-reads the epoch
file and raises :class:`FencedError` if a newer owner exists. This leaves a
window of one group commit in flight at the moment of takeover; the S3 log
(``logs/s3.py``) fences with conditional PUTs instead.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from pravega_ray.constants import LOG_FILE_BYTES_MAX, LOG_FRAME_BYTES_MAX
from pravega_ray.errors import DataCorruptionError, FencedError, IllegalStateError
from pravega_ray.storage.filesystem import fsync_directory

_MAGIC = b"PRL1"
_HEADER = struct.Struct(">4sQQII")
_EPOCH_FILE = "epoch"
_TRUNCATION_FILE = "truncation"


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_directory(path.parent)


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().strip() or 0)
    except FileNotFoundError:
        return 0


def _frames(path: Path) -> Iterator[tuple[int, bytes]]:
    """The valid records of one log file, in order, up to its first torn frame."""
    data = path.read_bytes()
    position = 0
    while len(data) - position >= _HEADER.size:
        magic, _epoch, sequence, length, crc = _HEADER.unpack_from(data, position)
        start = position + _HEADER.size
        end = start + length
        if magic != _MAGIC or end > len(data):
            return  # torn tail
        payload = data[start:end]
        if zlib.crc32(payload) != crc:
            return  # torn tail
        position = end
        yield sequence, payload


class FileSystemDurableLog:
    def __init__(
        self, directory: str | os.PathLike[str], *, file_bytes_max: int = LOG_FILE_BYTES_MAX
    ) -> None:
        self._dir = Path(directory)
        self._file_bytes_max = file_bytes_max
        self._epoch = 0
        self._fd: int | None = None
        self._file_bytes = 0
        self._next_sequence = 0

    @property
    def epoch(self) -> int:
        return self._epoch

    def initialize(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        new_epoch = _read_int(self._dir / _EPOCH_FILE) + 1
        _write_atomically(self._dir / _EPOCH_FILE, str(new_epoch))
        self._epoch = new_epoch
        # Sequence numbers run on across files, so the newest file holding a record tells
        # the next one; recovery's read_all is the only full pass over the log.
        last = -1
        for path in reversed(self._files()):
            for sequence, _payload in _frames(path):
                last = sequence
            if last >= 0:
                break
        self._next_sequence = max(last + 1, _read_int(self._dir / _TRUNCATION_FILE))
        self._open_file()

    def _open_file(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        name = f"log-{self._next_sequence:020d}-{self._epoch:010d}.dat"
        self._fd = os.open(self._dir / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._file_bytes = os.fstat(self._fd).st_size
        fsync_directory(self._dir)

    def _files(self) -> list[Path]:
        return sorted(self._dir.glob("log-*.dat"))

    def read_all(self) -> Iterator[tuple[int, bytes]]:
        truncation = _read_int(self._dir / _TRUNCATION_FILE)
        expected = None
        for path in self._files():
            for sequence, payload in _frames(path):
                if sequence < truncation:
                    continue
                if expected is not None and sequence != expected:
                    raise DataCorruptionError(
                        f"{path}: sequence {sequence} where {expected} was expected"
                    )
                expected = sequence + 1
                yield sequence, payload

    def append(self, payload: bytes) -> int:
        if self._fd is None:
            raise IllegalStateError("durable log is not initialized")
        if len(payload) > LOG_FRAME_BYTES_MAX:
            raise IllegalStateError(f"log record of {len(payload)} bytes exceeds the limit")
        current = _read_int(self._dir / _EPOCH_FILE)
        if current != self._epoch:
            raise FencedError(f"log {self._dir} taken over by epoch {current} (ours {self._epoch})")
        if self._file_bytes >= self._file_bytes_max:
            self._open_file()
        sequence = self._next_sequence
        header = _HEADER.pack(_MAGIC, self._epoch, sequence, len(payload), zlib.crc32(payload))
        total = len(header) + len(payload)
        written = os.writev(self._fd, [header, payload])  # type: ignore[arg-type]
        if written != total:  # a short write: finish it byte-exactly
            rest = (header + payload)[written:]
            while rest:
                rest = rest[os.write(self._fd, rest) :]  # type: ignore[arg-type]
        os.fdatasync(self._fd)  # type: ignore[arg-type]
        self._file_bytes += total
        self._next_sequence = sequence + 1
        return sequence

    def truncate(self, upto_sequence: int) -> None:
        """Drop every record below ``upto_sequence`` (durably; idempotent; never the tail)."""
        if upto_sequence > self._next_sequence:
            raise IllegalStateError("cannot truncate beyond the end of the log")
        if upto_sequence <= _read_int(self._dir / _TRUNCATION_FILE):
            return
        _write_atomically(self._dir / _TRUNCATION_FILE, str(upto_sequence))
        files = self._files()
        for path, following in itertools.pairwise(files):
            if int(following.name.split("-")[1]) <= upto_sequence:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        fsync_directory(self._dir)

    def size_bytes(self) -> int:
        """Bytes the log holds on disk (for tests and benchmarks)."""
        return sum(p.stat().st_size for p in self._files())

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
