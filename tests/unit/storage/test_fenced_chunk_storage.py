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


def test_claim_fences_every_skipped_epoch_and_stops_at_the_newest_fence(storage) -> None:
    FencedChunkStorage(storage, "container-3").claim(2)  # epochs 2 and 1 (a legacy directory)
    assert storage.list("fences/container-3/") == [f"fences/container-3/{e:020d}" for e in (1, 2)]
    zombie_at_4 = FencedChunkStorage(storage, "container-3")
    zombie_at_4.claim(4)  # 4 and 3, stops at 2
    FencedChunkStorage(storage, "container-3").claim(7)
    assert len(storage.list("fences/container-3/")) == 7
    with pytest.raises(FencedError):
        zombie_at_4.create("x", b"")
    assert storage.list("fences/container-9/") == []  # owners are separate


def test_the_lower_of_two_racing_claims_stops_in_claim(storage) -> None:
    FencedChunkStorage(storage, "container-0").claim(1)
    higher = FencedChunkStorage(storage, "container-0")
    higher.claim(3)  # creates 3 and 2 before the lower one gets to its own fence
    lower = FencedChunkStorage(storage, "container-0")
    with pytest.raises(FencedError):
        lower.claim(2)
    higher.create("ok", b"")


def test_writing_before_claim_is_a_bug() -> None:
    with pytest.raises(InvariantViolation):
        FencedChunkStorage(InMemoryChunkStorage(), "container-0").create("x", b"")


def test_owned_before_says_whether_any_owner_claimed(storage) -> None:
    fenced = FencedChunkStorage(storage, "container-0")
    assert not fenced.owned_before()
    fenced.claim(3)
    assert FencedChunkStorage(storage, "container-0").owned_before()
    assert not FencedChunkStorage(storage, "container-1").owned_before()
