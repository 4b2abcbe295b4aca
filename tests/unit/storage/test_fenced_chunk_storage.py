"""FencedChunkStorage: an older owner's creates and deletes fail once a newer one claimed Tier-2."""

from __future__ import annotations

import pytest

from pravega_ray.errors import FencedError
from pravega_ray.invariant import InvariantViolation
from pravega_ray.storage.fenced import FencedChunkStorage
from pravega_ray.storage.memory import InMemoryChunkStorage

pytestmark = pytest.mark.timeout(30)


def test_older_owner_cannot_create_or_delete_after_a_newer_claim(storage) -> None:
    old = FencedChunkStorage(storage, "container-0")
    old.claim(1)
    old.create("segments/a/0", b"by old")
    new = FencedChunkStorage(storage, "container-0")
    new.claim(2)
    with pytest.raises(FencedError):
        old.create("segments/a/1", b"zombie")
    with pytest.raises(FencedError):
        old.delete("segments/a/0")
    assert not storage.exists("segments/a/1")
    assert old.read("segments/a/0", 0, 100) == b"by old"  # reads are not fenced
    new.create("segments/a/1", b"by new")
    new.delete("segments/a/0")
    assert storage.list("segments/") == ["segments/a/1"]


def _fences(storage, owner: str = "container-3") -> list[str]:  # type: ignore[no-untyped-def]
    return storage.list(f"fences/{owner}/")  # type: ignore[no-any-return]


def test_claim_deletes_the_lower_fences_and_every_older_zombie_stays_refused(storage) -> None:
    owners = []
    for epoch in (1, 2, 4, 5, 9):  # skipped epochs: initializers that died before claim()
        owner = FencedChunkStorage(storage, "container-3")
        owner.claim(epoch)
        owner.create(f"chunks/{epoch}", b"")
        owners.append(owner)
        assert _fences(storage) == [f"fences/container-3/{epoch:020d}"]  # one fence: its own
    newest = owners.pop()
    for zombie in owners:  # each of their fences is gone, the highest stops them all
        with pytest.raises(FencedError):
            zombie.create("chunks/zombie", b"")
        with pytest.raises(FencedError):
            zombie.delete("chunks/9")
    assert not storage.exists("chunks/zombie") and storage.exists("chunks/9")
    newest.create("chunks/newest", b"")
    assert newest.fence_epochs() == [9]
    assert _fences(storage, "container-9") == []  # owners are separate


def test_a_claim_of_an_old_layout_keeps_only_its_own_fence(storage) -> None:
    for epoch in range(1, 8):  # the former layout: every epoch's fence, gaps filled
        storage.create(f"fences/container-3/{epoch:020d}", b"")
    zombie_at_7 = FencedChunkStorage(storage, "container-3")
    zombie_at_7._epoch = 7  # type: ignore[attr-defined]  # it claimed under that layout
    zombie_at_7.create("chunks/by-7", b"")
    FencedChunkStorage(storage, "container-3").claim(8)
    assert _fences(storage) == ["fences/container-3/00000000000000000008"]
    with pytest.raises(FencedError):
        zombie_at_7.create("chunks/zombie", b"")


def test_leftover_lower_fences_are_harmless_and_go_at_the_next_claim(storage) -> None:
    FencedChunkStorage(storage, "container-3").claim(5)
    storage.create("fences/container-3/00000000000000000002", b"")  # a late loser's fence
    late = FencedChunkStorage(storage, "container-3")
    with pytest.raises(FencedError):
        late.claim(3)  # it lost: a fence above its epoch exists
    with pytest.raises(FencedError):
        late.create("chunks/late", b"")
    assert FencedChunkStorage(storage, "container-3").fence_epochs() == [2, 3, 5]
    zombie_at_2 = FencedChunkStorage(storage, "container-3")
    zombie_at_2._epoch = 2  # type: ignore[attr-defined]
    with pytest.raises(FencedError):  # its own fence back does not let it through
        zombie_at_2.create("chunks/zombie", b"")
    FencedChunkStorage(storage, "container-3").claim(6)
    assert FencedChunkStorage(storage, "container-3").fence_epochs() == [6]
    assert storage.list("chunks/") == []


def test_a_claim_killed_before_its_cleanup_leaves_fences_the_next_claim_deletes(
    storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    FencedChunkStorage(storage, "container-3").claim(1)
    killed = FencedChunkStorage(storage, "container-3")
    with monkeypatch.context() as m:
        m.setattr(storage, "delete", lambda name: (_ for _ in ()).throw(OSError("killed")))
        with pytest.raises(OSError):
            killed.claim(2)
    assert FencedChunkStorage(storage, "container-3").fence_epochs() == [1, 2]
    old = FencedChunkStorage(storage, "container-3")
    old._epoch = 1  # type: ignore[attr-defined]
    with pytest.raises(FencedError):
        old.create("chunks/zombie", b"")
    FencedChunkStorage(storage, "container-3").claim(3)
    assert FencedChunkStorage(storage, "container-3").fence_epochs() == [3]


def test_writing_before_claim_is_a_bug() -> None:
    with pytest.raises(InvariantViolation):
        FencedChunkStorage(InMemoryChunkStorage(), "container-0").create("x", b"")


def test_owned_before_says_whether_any_owner_claimed(storage) -> None:
    fenced = FencedChunkStorage(storage, "container-0")
    assert not fenced.owned_before()
    fenced.claim(3)
    assert FencedChunkStorage(storage, "container-0").owned_before()
    assert not FencedChunkStorage(storage, "container-1").owned_before()
