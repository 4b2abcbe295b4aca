"""The ChunkStorage contract, run against every backend."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pravega_ray.errors import AlreadyExistsError, InvalidNameError, NotFoundError
from pravega_ray.storage.filesystem import FileSystemChunkStorage
from pravega_ray.storage.memory import InMemoryChunkStorage

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=["memory", "filesystem"])
def storage(request, tmp_path: Path):
    if request.param == "memory":
        return InMemoryChunkStorage()
    return FileSystemChunkStorage(tmp_path / "tier2")


def test_create_then_read_ranges(storage) -> None:
    storage.create("a/b/c", b"0123456789")
    assert storage.read("a/b/c", 0, 10) == b"0123456789"
    assert storage.read("a/b/c", 3, 4) == b"3456"
    assert storage.read("a/b/c", 8, 100) == b"89"
    assert storage.length("a/b/c") == 10
    assert storage.exists("a/b/c")


def test_create_existing_fails_and_keeps_the_original(storage) -> None:
    storage.create("x", b"first")
    with pytest.raises(AlreadyExistsError):
        storage.create("x", b"second")
    assert storage.read("x", 0, 100) == b"first"


def test_concurrent_creates_of_one_name_have_one_winner(storage) -> None:
    wins = []

    def racer(i: int) -> None:
        try:
            storage.create("race", str(i).encode())
            wins.append(i)
        except AlreadyExistsError:
            pass

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert storage.read("race", 0, 10) == str(wins[0]).encode()


def test_missing_chunk_raises_not_found(storage) -> None:
    with pytest.raises(NotFoundError):
        storage.read("nope", 0, 1)
    with pytest.raises(NotFoundError):
        storage.length("nope")
    assert not storage.exists("nope")
    storage.delete("nope")  # idempotent


def test_list_is_sorted_and_prefix_bounded(storage) -> None:
    for name in ["s/b/2", "s/b/1", "s/a/1", "t/1", "s/bb/1"]:
        storage.create(name, b"x")
    assert storage.list("s/b/") == ["s/b/1", "s/b/2"]
    assert storage.list("s/") == ["s/a/1", "s/b/1", "s/b/2", "s/bb/1"]
    storage.delete("s/b/1")
    assert storage.list("s/b/") == ["s/b/2"]


@pytest.mark.parametrize(
    "bad", ["", "/abs", "../up", "a/../../b", "a//b", "a/./b", "a\\b", "a\x00"]
)
def test_unsafe_names_are_rejected(storage, bad: str) -> None:
    with pytest.raises(InvalidNameError):
        storage.create(bad, b"x")
    with pytest.raises(InvalidNameError):
        storage.read(bad, 0, 1)


def test_filesystem_never_writes_outside_its_root(tmp_path: Path) -> None:
    storage = FileSystemChunkStorage(tmp_path / "root")
    with pytest.raises(InvalidNameError):
        storage.create("../escaped", b"x")
    assert not (tmp_path / "escaped").exists()
    storage.create("inside", b"x")
    assert [p.name for p in (tmp_path / "root").iterdir()] == ["inside"]
