"""Filesystem durable log: append + fsync, rotated files, fenced by an epoch file.

Layout of a log directory::

    epoch                                  decimal epoch of the current owner
    truncation                             decimal sequence number: records below it are gone
    log-<first sequence, 20>-<epoch, 10>.dat   records, in sequence order across files

*format* A record is ``[magic "PRL2"][epoch u64][sequence u64][length u32]
[crc32 u32][payload]``, big-endian; the CRC covers the header fields before it and the
payload. Records of data format 3 (magic ``"PRL1"``, CRC of the payload only) are still
read. Within a file, sequence numbers run on by one.

Torn tails and damage. ``append`` returns only after ``fdatasync``, so a crash can
leave at most the last frame of the file being written incomplete (short, zero-filled,
or with a bad checksum): a *torn tail*, never acknowledged, which reading cuts off. A
frame that fails its checks with a valid frame anywhere after it in the same file is
not a torn tail: records after it were acknowledged, so reading raises
:class:`DataCorruptionError` naming the file and byte offset (the S3 log does the
same). Only the newest file can end in a torn write: a newer file's name is the next
sequence number its owner counted, so an older file ending (cut, damaged or short) before
that number lost acknowledged records, which is DataCorruptionError naming the file and
offset too. One limit is inherent to a single copy: a damaged *last* frame of the newest
file cannot be told from a torn write; it is cut with a warning naming the file and offset.

Missing files. A log always keeps its newest file, and truncation keeps the file that
holds the truncation point, so ``initialize`` raises DataCorruptionError when no log file
is left while the epoch or truncation file says an owner had the log, or when the oldest
file starts above the truncation point. A new log creates its first file before its epoch
file, so a crash between the two is not mistaken for a lost log. Each file's name carries
its owner's epoch, so a lost epoch file costs nothing: the next epoch is above them all.

Rotation: a new file is started by every new owner and whenever the current
one reaches ``file_bytes_max``. A file's records are those with a sequence number
below the first sequence of the next file (by name): a run of records at or above it at
the end of an older file was written by an owner after it lost the log (see fencing),
and is ignored; any other break in the numbering is DataCorruptionError. Truncation
writes the ``truncation`` file (atomic rename) and then deletes
files all of whose records are below it; a file that holds the truncation point stays,
and ``read_all`` skips its records below the point.

Fencing: ``initialize`` writes ``epoch + 1`` to the ``epoch`` file (atomic rename),
then reads the log and starts a new file named with the next sequence number. An
owner re-reads the epoch file before each append (an early stop) *and after its
fdatasync, before acknowledging*: an append is acknowledged only if no newer owner
existed once it was on disk, and then that owner, which wrote the epoch file before
reading the log, replays it. A record written after a takeover fails with
:class:`FencedError` (outcome unknown to the caller); the new owner either replayed it
or starts its file at that sequence number, which hides it for ever. So nothing an
owner acknowledged is lost and a zombie's late record never reappears.

The ``epoch`` and ``truncation`` files hold one decimal number; anything else in them
is :class:`DataCorruptionError` naming the file. A file's records must start at the
sequence number in its name and run on by one; anything else is DataCorruptionError.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from pravega_ray.constants import LOG_FILE_BYTES_MAX, LOG_FRAME_BYTES_MAX
from pravega_ray.errors import DataCorruptionError, FencedError, IllegalStateError
from pravega_ray.storage.filesystem import fsync_directory

log = logging.getLogger(__name__)

_MAGIC = b"PRL2"
_MAGIC_V1 = b"PRL1"  # data format 3: the CRC covers the payload only
_MAGICS = (_MAGIC, _MAGIC_V1)
_HEADER = struct.Struct(">4sQQII")
_CRC_COVERED = struct.Struct(">4sQQI")  # the header up to the CRC
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
    """The decimal number in ``path`` (0 if it does not exist); DataCorruptionError otherwise."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return 0
    text = raw.strip()
    if not (text.isdigit() and len(text) <= 20):  # written atomically: never empty
        raise DataCorruptionError(
            f"{path}: expected a decimal number, found {raw[:40]!r}", path=str(path)
        )
    return int(text)


def _frame_at(data: bytes, position: int) -> tuple[int, bytes, int] | None:
    """``(sequence, payload, end)`` of a valid frame at ``position``, else None."""
    if len(data) - position < _HEADER.size:
        return None
    magic, _epoch, sequence, length, crc = _HEADER.unpack_from(data, position)
    start = position + _HEADER.size
    end = start + length
    if magic not in _MAGICS or length > LOG_FRAME_BYTES_MAX or end > len(data):
        return None
    payload = data[start:end]
    seed = 0 if magic == _MAGIC_V1 else zlib.crc32(data[position : position + _CRC_COVERED.size])
    if zlib.crc32(payload, seed) != crc:
        return None
    return sequence, payload, end


def _valid_frame_after(data: bytes, position: int) -> int | None:
    """The offset of the first valid frame starting after ``position``, if any."""
    at = data.find(b"PRL", position + 1)
    while at >= 0:
        if _frame_at(data, at) is not None:
            return at
        at = data.find(b"PRL", at + 1)
    return None


def _frames(path: Path, limit: int | None) -> Iterator[tuple[int, bytes]]:
    """The records of one log file, in order, up to a torn tail.

    ``limit`` is the first sequence of the next file (None for the newest file). Raises
    DataCorruptionError naming the file and byte offset if a frame fails its checks and a
    valid frame follows it; if sequence numbers break within the file; or if the file
    ends (torn or not) before ``limit``: the next file's owner counted those records,
    so they were complete. Only the newest file's last record may be a torn write.
    """
    data = path.read_bytes()
    position = 0
    expected = _first_sequence(path)  # the sequence the next record must have
    while position < len(data):
        frame = _frame_at(data, position)
        if frame is None:
            following = _valid_frame_after(data, position)
            if following is not None:
                raise DataCorruptionError(
                    f"durable log file {path}: damaged record at byte {position} "
                    f"(a valid record follows at byte {following}; acknowledged data after "
                    "it cannot be replayed)",
                    path=str(path),
                    offset=position,
                )
            break
        sequence, payload, end = frame
        if sequence != expected:
            raise DataCorruptionError(
                f"durable log file {path}: record {sequence} at byte {position} where record "
                f"{expected} was expected",
                path=str(path),
                offset=position,
            )
        expected = sequence + 1
        yield sequence, payload
        position = end
    if limit is not None and expected < limit:
        raise DataCorruptionError(
            f"durable log file {path}: record {expected} at byte {position} is "
            f"{'damaged' if position < len(data) else 'missing'} (the next log file starts "
            f"at record {limit}, so it was complete; acknowledged data cannot be replayed)",
            path=str(path),
            offset=position,
        )
    if position < len(data) and any(data[position:]):
        log.warning(
            "durable log file %s: cutting %d bytes of an incomplete last record at byte %d "
            "(a write torn by a crash, or a damaged last record)",
            path,
            len(data) - position,
            position,
        )


def _first_sequence(path: Path) -> int:
    return int(path.name.split("-")[1])


def _file_epoch(path: Path) -> int:
    return int(path.name.split("-")[2].removesuffix(".dat"))


def _owned_frames(files: list[Path], index: int) -> Iterator[tuple[int, bytes]]:
    """Records of ``files[index]`` below the first sequence of the next file (see fencing)."""
    limit = _first_sequence(files[index + 1]) if index + 1 < len(files) else None
    for sequence, payload in _frames(files[index], limit):
        if limit is not None and sequence >= limit:
            continue  # a late write of an owner that had lost the log: never acknowledged
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

    def initialize(self, *, must_exist: bool = False) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        epoch = _read_int(self._dir / _EPOCH_FILE)
        truncation = _read_int(self._dir / _TRUNCATION_FILE)
        files = self._files()
        self._check_files(files, epoch, truncation)
        if not files and must_exist:
            raise DataCorruptionError(
                f"durable log {self._dir}: no log, epoch or truncation file, but the log "
                "must exist (an owner had it): it was lost with every record it held",
                path=str(self._dir),
            )
        if not files:  # a new log: its first file before its epoch file (checked above)
            self._epoch, self._next_sequence = 1, 0
            self._open_file()
            _write_atomically(self._dir / _EPOCH_FILE, "1")
            return
        # Files are named with their owner's epoch, so a lost epoch file costs nothing.
        self._epoch = max(epoch, *(_file_epoch(path) for path in files)) + 1
        _write_atomically(self._dir / _EPOCH_FILE, str(self._epoch))
        # Sequence numbers run on across files, so the newest file holding a record tells
        # the next one (no lower than where the newest file starts); recovery's read_all is
        # the only full pass over the log. Listed again: the files as of the new epoch,
        # after which no older owner acknowledges anything (fencing, module docstring).
        files = self._files()
        last = -1
        for index in reversed(range(len(files))):
            for sequence, _payload in _owned_frames(files, index):
                last = sequence
            if last >= 0:
                break
        start = _first_sequence(files[-1]) if files else 0
        self._next_sequence = max(last + 1, truncation, start)
        self._open_file()

    def _check_files(self, files: list[Path], epoch: int, truncation: int) -> None:
        """DataCorruptionError if log files are missing: none at all though an owner had
        the log (a log always keeps its newest file), or the oldest starting above the
        truncation point (truncation keeps the file that holds the point)."""
        if not files and (epoch or truncation):
            raise DataCorruptionError(
                f"durable log {self._dir}: no log file, but the epoch file says an owner of "
                f"epoch {epoch} had the log (truncated below record {truncation}): every "
                "record it held is lost, acknowledged data included",
                path=str(self._dir),
            )
        if files and _first_sequence(files[0]) > truncation:
            raise DataCorruptionError(
                f"durable log {self._dir}: records {truncation} to "
                f"{_first_sequence(files[0]) - 1} are missing (the log is truncated below "
                f"record {truncation}, but its oldest file {files[0].name} starts later)",
                path=str(self._dir),
            )

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
        files = self._files()
        for index, path in enumerate(files):
            for sequence, payload in _owned_frames(files, index):
                if sequence < truncation:
                    continue
                if expected is not None and sequence != expected:
                    raise DataCorruptionError(
                        f"durable log file {path}: starts at record {sequence} where record "
                        f"{expected} was expected (records between are missing)",
                        path=str(path),
                    )
                expected = sequence + 1
                yield sequence, payload

    def append(self, payload: bytes) -> int:
        if self._fd is None:
            raise IllegalStateError("durable log is not initialized")
        if len(payload) > LOG_FRAME_BYTES_MAX:
            raise IllegalStateError(f"log record of {len(payload)} bytes exceeds the limit")
        self._check_epoch()
        if self._file_bytes >= self._file_bytes_max:
            self._open_file()
        sequence = self._next_sequence
        covered = _CRC_COVERED.pack(_MAGIC, self._epoch, sequence, len(payload))
        header = covered + struct.pack(">I", zlib.crc32(payload, zlib.crc32(covered)))
        total = len(header) + len(payload)
        written = os.writev(self._fd, [header, payload])
        if written != total:  # a short write: finish it byte-exactly
            rest = (header + payload)[written:]
            while rest:
                rest = rest[os.write(self._fd, rest) :]
        os.fdatasync(self._fd)
        self._file_bytes += total
        self._next_sequence = sequence + 1
        # Acknowledge only if no newer owner existed once the record was on disk: that
        # owner then reads the log after this point and replays the record (module docstring).
        self._check_epoch()
        return sequence

    def _check_epoch(self) -> None:
        current = _read_int(self._dir / _EPOCH_FILE)
        if current != self._epoch:
            raise FencedError(f"log {self._dir} taken over by epoch {current} (ours {self._epoch})")

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
