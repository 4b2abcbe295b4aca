"""Filesystem durable log: torn tails versus damage, damaged control files, late zombie writes."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pravega_ray.errors import DataCorruptionError, FencedError
from pravega_ray.logs.filesystem import FileSystemDurableLog

pytestmark = pytest.mark.timeout(30)

_HEADER_BYTES = struct.calcsize(">4sQQII")


def _write(directory: Path, count: int) -> list[bytes]:
    log = FileSystemDurableLog(directory)
    log.initialize()
    payloads = [f"record-{i:03d}".encode() * 4 for i in range(count)]
    for payload in payloads:
        log.append(payload)
    log.close()
    return payloads


def _newest_file(directory: Path) -> Path:
    return sorted(directory.glob("log-*.dat"))[-1]


def _record_start(data: bytes, index: int) -> int:
    """Byte offset of the ``index``-th frame of a log file (all frames valid)."""
    position = 0
    for _ in range(index):
        (length,) = struct.unpack_from(">I", data, position + 4 + 8 + 8)
        position += _HEADER_BYTES + length
    return position


@pytest.mark.parametrize("where", ["payload", "length", "magic", "checksum", "sequence", "epoch"])
def test_damaged_record_in_the_middle_of_the_newest_file_is_corruption(
    tmp_path: Path, where: str
) -> None:
    _write(tmp_path, 20)
    path = _newest_file(tmp_path)
    data = bytearray(path.read_bytes())
    start = _record_start(bytes(data), 9)
    at = {
        "magic": start,
        "epoch": start + 4 + 7,
        "sequence": start + 4 + 8 + 6,
        "length": start + 4 + 8 + 8 + 3,
        "checksum": start + 4 + 8 + 8 + 4 + 1,
        "payload": start + _HEADER_BYTES + 5,
    }[where]
    data[at] ^= 0x20
    path.write_bytes(bytes(data))
    for _ in range(2):  # and still so after another attempt
        log = FileSystemDurableLog(tmp_path)
        with pytest.raises(DataCorruptionError) as raised:
            log.initialize()
            list(log.read_all())
        assert str(path) in str(raised.value)
        assert raised.value.offset == start  # type: ignore[attr-defined]
        log.close()


def test_damaged_record_in_an_older_file_is_corruption(tmp_path: Path) -> None:
    _write(tmp_path, 5)
    _write(tmp_path, 5)  # a second owner: a second file
    oldest = sorted(tmp_path.glob("log-*.dat"))[0]
    data = bytearray(oldest.read_bytes())
    data[_record_start(bytes(data), 2) + _HEADER_BYTES] ^= 1
    oldest.write_bytes(bytes(data))
    log = FileSystemDurableLog(tmp_path)
    log.initialize()
    with pytest.raises(DataCorruptionError, match="damaged record"):
        list(log.read_all())


@pytest.mark.parametrize("tail", ["cut", "zeros", "garbage"])
def test_torn_last_record_is_cut_and_the_rest_replays(tmp_path: Path, tail: str) -> None:
    payloads = _write(tmp_path, 6)
    path = _newest_file(tmp_path)
    data = path.read_bytes()
    last = _record_start(data, 5)
    if tail == "cut":
        path.write_bytes(data[:-3])
    elif tail == "zeros":  # the file grew but the last record never reached the disk
        path.write_bytes(data[:last] + bytes(len(data) - last))
    else:
        body = last + _HEADER_BYTES
        path.write_bytes(data[:body] + b"\xee" * (len(data) - body))
    log = FileSystemDurableLog(tmp_path)
    log.initialize()
    assert [p for _, p in log.read_all()] == payloads[:5]
    assert log.append(b"next") == 5
    log.close()
    again = FileSystemDurableLog(tmp_path)
    again.initialize()
    assert [p for _, p in again.read_all()] == [*payloads[:5], b"next"]


@pytest.mark.parametrize("name", ["epoch", "truncation"])
@pytest.mark.parametrize("content", [b"not a number\n", b"\xff\xfe", b"12abc"])
def test_damaged_control_file_is_corruption_naming_it(
    tmp_path: Path, name: str, content: bytes
) -> None:
    _write(tmp_path, 3)
    (tmp_path / name).write_bytes(content)
    log = FileSystemDurableLog(tmp_path)
    with pytest.raises(DataCorruptionError) as raised:
        log.initialize()
        list(log.read_all())
    assert str(tmp_path / name) in str(raised.value)


class _TakenOverMidAppend(FileSystemDurableLog):
    """A log whose owner loses it between the pre-write epoch check and the write."""

    successor: FileSystemDurableLog | None = None

    def _check_epoch(self) -> None:
        super()._check_epoch()
        if self.successor is not None and self.successor.epoch == 0:
            self.successor.initialize()  # the takeover lands right after our check


def test_zombie_record_written_after_a_takeover_is_not_acknowledged_nor_replayed(
    tmp_path: Path,
) -> None:
    zombie = _TakenOverMidAppend(tmp_path)
    zombie.initialize()
    assert zombie.append(b"acked") == 0
    successor = FileSystemDurableLog(tmp_path)
    zombie.successor = successor
    with pytest.raises(FencedError):  # written after the takeover: never acknowledged
        zombie.append(b"late")
    assert [p for _, p in successor.read_all()] == [b"acked"]
    assert successor.append(b"by-successor") == 1
    successor.close()
    expected = [b"acked", b"by-successor"]
    for round_ in range(2):  # the late record stays hidden through later recoveries
        again = FileSystemDurableLog(tmp_path)
        again.initialize()
        assert [p for _, p in again.read_all()] == expected
        assert again.append(f"more-{round_}".encode()) == len(expected)
        expected.append(f"more-{round_}".encode())
        again.close()


def test_records_of_data_format_3_are_still_read(tmp_path: Path) -> None:
    """Format-3 frames (magic PRL1, CRC of the payload only) replay; new ones follow them."""
    import zlib

    old = [f"old-{i}".encode() for i in range(3)]
    frames = b"".join(
        struct.pack(">4sQQII", b"PRL1", 1, i, len(p), zlib.crc32(p)) + p for i, p in enumerate(old)
    )
    (tmp_path / "epoch").write_text("1")
    (tmp_path / f"log-{0:020d}-{1:010d}.dat").write_bytes(frames)
    log = FileSystemDurableLog(tmp_path)
    log.initialize()
    assert [p for _, p in log.read_all()] == old
    assert log.append(b"new") == 3
    log.close()
    again = FileSystemDurableLog(tmp_path)
    again.initialize()
    assert [p for _, p in again.read_all()] == [*old, b"new"]


def _reopen(directory: Path) -> None:
    """An owner that takes the log over and stops: a newer, empty file now exists."""
    log = FileSystemDurableLog(directory)
    log.initialize()
    log.close()


def _recover(directory: Path) -> list[bytes]:
    log = FileSystemDurableLog(directory)
    try:
        log.initialize()
        return [p for _, p in log.read_all()]
    finally:
        log.close()


@pytest.mark.parametrize("newer", ["empty", "holding records"])
@pytest.mark.parametrize("where", ["payload", "header"])
def test_damaged_last_record_of_an_older_file_is_corruption_naming_it(
    tmp_path: Path, newer: str, where: str
) -> None:
    # The newer file's name is the next record number its owner counted: the older file's
    # last record was complete, and acknowledged. It is not a torn write (probe defect 2).
    _write(tmp_path, 5)
    if newer == "empty":
        _reopen(tmp_path)
    else:
        _write(tmp_path, 3)
    older = sorted(tmp_path.glob("log-*.dat"))[0]
    data = bytearray(older.read_bytes())
    last = _record_start(bytes(data), 4)
    data[len(data) - 3 if where == "payload" else last + 2] ^= 0x08
    older.write_bytes(bytes(data))
    for _ in range(2):  # and still so after another attempt
        with pytest.raises(DataCorruptionError) as raised:
            _recover(tmp_path)
        assert raised.value.path == str(older)  # type: ignore[attr-defined]
        assert raised.value.offset == last  # type: ignore[attr-defined]
        assert "record 4" in str(raised.value)


def test_older_file_cut_short_at_a_record_boundary_is_corruption(tmp_path: Path) -> None:
    _write(tmp_path, 5)
    _write(tmp_path, 2)
    older = sorted(tmp_path.glob("log-*.dat"))[0]
    data = older.read_bytes()
    older.write_bytes(data[: _record_start(data, 3)])  # records 3 and 4 gone
    with pytest.raises(DataCorruptionError, match=r"record 3 .* is missing") as raised:
        _recover(tmp_path)
    assert raised.value.path == str(older)  # type: ignore[attr-defined]


def test_a_torn_write_in_a_file_that_is_no_longer_the_newest_is_still_cut(
    tmp_path: Path,
) -> None:
    # A crash tore record 5; the next owner started its file at 5 (it never counted the torn
    # one), so every later recovery cuts it again and loses nothing.
    payloads = _write(tmp_path, 6)
    path = _newest_file(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-7])
    log = FileSystemDurableLog(tmp_path)
    log.initialize()
    assert [p for _, p in log.read_all()] == payloads[:5]
    assert log.append(b"after") == 5
    log.close()
    for _ in range(2):
        assert _recover(tmp_path) == [*payloads[:5], b"after"]


def test_losing_every_log_file_is_corruption_and_changes_nothing(tmp_path: Path) -> None:
    _write(tmp_path, 5)
    _reopen(tmp_path)
    for path in tmp_path.glob("log-*.dat"):
        path.unlink()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for _ in range(2):
        with pytest.raises(DataCorruptionError, match="no log file") as raised:
            _recover(tmp_path)
        assert raised.value.path == str(tmp_path)  # type: ignore[attr-defined]
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_losing_the_oldest_log_file_is_corruption(tmp_path: Path) -> None:
    _write(tmp_path, 4)
    _write(tmp_path, 4)
    sorted(tmp_path.glob("log-*.dat"))[0].unlink()
    with pytest.raises(DataCorruptionError, match="records 0 to 3 are missing"):
        _recover(tmp_path)


def test_a_lost_epoch_file_loses_nothing_and_the_next_epoch_is_above_every_file(
    tmp_path: Path,
) -> None:
    payloads = _write(tmp_path, 3)
    _reopen(tmp_path)
    _reopen(tmp_path)  # epoch 3 had the log last
    (tmp_path / "epoch").unlink()
    log = FileSystemDurableLog(tmp_path)
    log.initialize()
    assert log.epoch == 4
    assert [p for _, p in log.read_all()] == payloads
    log.close()


def test_a_new_log_cut_short_before_its_epoch_file_starts_again(tmp_path: Path) -> None:
    # A new log creates its first file before its epoch file: a crash between the two
    # leaves a file and no epoch, which is a new log, not a lost one.
    (tmp_path / f"log-{0:020d}-{1:010d}.dat").write_bytes(b"")
    log = FileSystemDurableLog(tmp_path)
    log.initialize()
    assert log.append(b"first") == 0
    log.close()
    assert _recover(tmp_path) == [b"first"]
