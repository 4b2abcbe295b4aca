"""Filesystem durable log: append + fsync, one file per epoch, fenced by an epoch file.

Layout of a log directory::

    epoch                    decimal epoch of the current owner (atomic rename)
    log-0000000001.dat       records written by the owner of epoch 1
    log-0000000002.dat       ...

*format* A record is ``[magic "PRL1"][epoch u64][sequence u64][length u32]
[crc32 u32 of payload][payload]``, big-endian. Reading stops at the first frame
of a file that is short or fails its checksum: that is a tail torn by a crash,
never acknowledged (``append`` returns only after ``fdatasync``).

Fencing: ``initialize`` reads the epoch file, writes ``epoch + 1`` atomically,
and opens a new file for that epoch. Before each append an owner re-reads the
epoch file and raises :class:`FencedError` if a newer owner exists. This closes
the window only to one group commit in flight at the moment of takeover; the
S3 log (a later issue) fences with conditional PUTs instead. Records of all
epoch files are replayed in epoch order, so nothing an older owner
acknowledged is lost.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from pravega_ray.constants import LOG_FRAME_BYTES_MAX
from pravega_ray.errors import DataCorruptionError, FencedError, IllegalStateError
from pravega_ray.storage.filesystem import fsync_directory

_MAGIC = b"PRL1"
_HEADER = struct.Struct(">4sQQII")
_EPOCH_FILE = "epoch"


def _log_file_name(epoch: int) -> str:
    return f"log-{epoch:010d}.dat"


class FileSystemDurableLog:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._dir = Path(directory)
        self._epoch = 0
        self._fd: int | None = None
        self._next_sequence = 0
        self._epoch_fd: int | None = None

    @property
    def epoch(self) -> int:
        return self._epoch

    def _read_epoch(self) -> int:
        try:
            return int((self._dir / _EPOCH_FILE).read_text().strip() or 0)
        except FileNotFoundError:
            return 0

    def initialize(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        new_epoch = self._read_epoch() + 1
        tmp = self._dir / f"{_EPOCH_FILE}.tmp"
        with open(tmp, "w") as f:
            f.write(str(new_epoch))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._dir / _EPOCH_FILE)
        fsync_directory(self._dir)
        self._epoch = new_epoch
        # Find the next sequence number from what is already there.
        last = -1
        for sequence, _payload in self.read_all():
            last = sequence
        self._next_sequence = last + 1
        self._fd = os.open(
            self._dir / _log_file_name(new_epoch), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644
        )
        fsync_directory(self._dir)

    def _files(self) -> list[Path]:
        return sorted(self._dir.glob("log-*.dat"))

    def read_all(self) -> Iterator[tuple[int, bytes]]:
        expected = None
        for path in self._files():
            data = path.read_bytes()
            position = 0
            while len(data) - position >= _HEADER.size:
                magic, _epoch, sequence, length, crc = _HEADER.unpack_from(data, position)
                start = position + _HEADER.size
                end = start + length
                if magic != _MAGIC or end > len(data):
                    break  # torn tail
                payload = data[start:end]
                if zlib.crc32(payload) != crc:
                    break  # torn tail
                if expected is not None and sequence != expected:
                    raise DataCorruptionError(
                        f"{path}: sequence {sequence} where {expected} was expected"
                    )
                expected = sequence + 1
                yield sequence, payload
                position = end

    def append(self, payload: bytes) -> int:
        if self._fd is None:
            raise IllegalStateError("durable log is not initialized")
        if len(payload) > LOG_FRAME_BYTES_MAX:
            raise IllegalStateError(f"log record of {len(payload)} bytes exceeds the limit")
        current = self._read_epoch()
        if current != self._epoch:
            raise FencedError(f"log {self._dir} taken over by epoch {current} (ours {self._epoch})")
        sequence = self._next_sequence
        header = _HEADER.pack(_MAGIC, self._epoch, sequence, len(payload), zlib.crc32(payload))
        total = len(header) + len(payload)
        written = os.writev(self._fd, [header, payload])
        if written != total:  # a short write: finish it byte-exactly
            rest = (header + payload)[written:]
            while rest:
                n = os.write(self._fd, rest)
                rest = rest[n:]
        os.fdatasync(self._fd)
        self._next_sequence = sequence + 1
        return sequence

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
