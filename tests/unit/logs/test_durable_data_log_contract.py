"""The DurableDataLog contract, run against every backend; plus filesystem specifics."""

from __future__ import annotations

from pathlib import Path

import pytest

from pravega_ray.errors import FencedError, IllegalStateError
from pravega_ray.logs.filesystem import FileSystemDurableLog
from pravega_ray.logs.memory import InMemoryDurableLog, InMemoryLogStore

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=["memory", "filesystem"])
def make_log(request, tmp_path: Path):
    """A factory of log instances sharing one backing store (a 'restart' is a new instance)."""
    if request.param == "memory":
        store = InMemoryLogStore()
        return lambda: InMemoryDurableLog(store)
    return lambda: FileSystemDurableLog(tmp_path / "log")


def test_append_returns_consecutive_sequence_numbers_and_replays_in_order(make_log) -> None:
    log = make_log()
    log.initialize()
    assert list(log.read_all()) == []
    assert [log.append(f"r{i}".encode()) for i in range(5)] == [0, 1, 2, 3, 4]
    log.close()
    again = make_log()
    again.initialize()
    assert list(again.read_all()) == [(i, f"r{i}".encode()) for i in range(5)]
    assert again.append(b"r5") == 5
    assert [p for _, p in again.read_all()][-1] == b"r5"


def test_append_before_initialize_is_an_illegal_state(make_log) -> None:
    with pytest.raises(IllegalStateError):
        make_log().append(b"x")


def test_new_owner_fences_the_old_one_and_keeps_its_acknowledged_records(make_log) -> None:
    old = make_log()
    old.initialize()
    old.append(b"acked-by-old")
    new = make_log()
    new.initialize()
    assert new.epoch > old.epoch
    with pytest.raises(FencedError):
        old.append(b"zombie write")
    assert [p for _, p in new.read_all()] == [b"acked-by-old"]
    new.append(b"by-new")
    assert [p for _, p in new.read_all()] == [b"acked-by-old", b"by-new"]


def test_filesystem_log_ignores_a_torn_tail(tmp_path: Path) -> None:
    log = FileSystemDurableLog(tmp_path)
    log.initialize()
    log.append(b"complete")
    log.append(b"also complete")
    log.close()
    data_file = sorted(tmp_path.glob("log-*.dat"))[-1]
    raw = data_file.read_bytes()
    data_file.write_bytes(raw[:-3])  # a crash mid-write of the last record
    recovered = FileSystemDurableLog(tmp_path)
    recovered.initialize()
    assert [p for _, p in recovered.read_all()] == [b"complete"]
    assert recovered.append(b"next") == 1
    assert [p for _, p in recovered.read_all()] == [b"complete", b"next"]
