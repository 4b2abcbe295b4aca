"""ContainerMetadata, SegmentMetadata, wake_all on their own: both views, checkpoints, traffic."""

from __future__ import annotations

import asyncio
import math

import pytest

from pravega_ray.constants import TRAFFIC_TIME_CONSTANT_S
from pravega_ray.errors import (
    IllegalStateError,
    InvalidNameError,
    SegmentNotFoundError,
    SegmentSealedError,
    SegmentTruncatedError,
)
from pravega_ray.invariant import InvariantViolation
from pravega_ray.segmentstore import operations as ops
from pravega_ray.segmentstore.chunk_layout import ChunkLayout, ChunkRef, chunk_name
from pravega_ray.segmentstore.container_metadata import (
    ContainerMetadata,
    SegmentMetadata,
    wake_all,
)
from pravega_ray.segmentstore.traffic import RateTracker
from pravega_ray.timing import ManualClock

pytestmark = pytest.mark.timeout(30)

A = "sc/st/0.#epoch.0"
B = "sc/st/1.#epoch.0"
C = "sc/st/2.#epoch.0"
K1, K2, K3, K4 = (bytes([i]) * 16 for i in range(1, 5))


def metadata_with(*names: str) -> ContainerMetadata:
    metadata = ContainerMetadata(7)
    for name in names:
        metadata.add(SegmentMetadata(name, 1000))
    return metadata


def sealed(state: SegmentMetadata) -> SegmentMetadata:
    state.pending_sealed = True
    return state


# --- get and find ---------------------------------------------------------------------------------
def test_get_and_find_of_a_live_segment_return_it() -> None:
    metadata = metadata_with(A)
    assert metadata.get(A) is metadata.find(A)
    assert metadata.get(A).name == A
    assert A in metadata and len(metadata) == 1


def test_get_of_a_missing_segment_raises_not_found_and_find_is_none() -> None:
    metadata = metadata_with(A)
    with pytest.raises(SegmentNotFoundError, match=B):
        metadata.get(B)
    assert metadata.find(B) is None


def test_get_of_a_pending_deleted_segment_raises_not_found_but_find_returns_it() -> None:
    metadata = metadata_with(A)
    metadata.get(A).pending_deleted = True
    with pytest.raises(SegmentNotFoundError):
        metadata.get(A)
    assert metadata.find(A) is not None  # the log still has to apply the delete


@pytest.mark.parametrize("name", ["not a segment", "", "sc/st", "../x/0.#epoch.0"])
def test_get_of_an_invalid_name_raises_invalid_name(name: str) -> None:
    metadata = metadata_with(A)
    with pytest.raises(InvalidNameError):
        metadata.get(name)
    assert metadata.find(name) is None


def test_add_twice_trips_the_invariant() -> None:
    metadata = metadata_with(A)
    with pytest.raises(InvariantViolation, match="added twice"):
        metadata.add(SegmentMetadata(A, 0))


def test_remove_and_names() -> None:
    metadata = metadata_with(B, A)
    assert metadata.names() == [A, B]
    assert metadata.remove(A).name == A
    assert metadata.names() == [B]
    assert [s.name for s in metadata] == [B]


# --- the pending view -----------------------------------------------------------------------------
def test_reserve_moves_only_the_pending_view() -> None:
    state = SegmentMetadata(A, 0, length=10, pending_length=10, event_count=2)
    state.pending_event_count = 2
    state.attributes = {K1: 1}
    state.pending_attributes = {K1: 1}
    assert state.reserve(5, {K1: 2, K2: 3}, 4) == 10
    assert state.reserve(0, {}, 0) == 15
    assert (state.pending_length, state.pending_event_count) == (15, 6)
    assert state.pending_attributes == {K1: 2, K2: 3}
    # The durable view waits for the log.
    assert (state.length, state.event_count, state.attributes) == (10, 2, {K1: 1})
    assert state.dirty_attributes == {}


def test_reserve_wakes_attribute_waiters_only() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        state = SegmentMetadata(A, 0)
        attribute_waiter = loop.create_future()
        data_waiter = loop.create_future()
        state.attribute_waiters.append(attribute_waiter)
        state.data_waiters.append(data_waiter)
        state.reserve(1, {K1: 1}, 1)
        assert attribute_waiter.done() and state.attribute_waiters == []
        assert not data_waiter.done() and state.data_waiters == [data_waiter]

    asyncio.run(run())


def test_check_not_sealed_raises_once_a_seal_is_queued() -> None:
    state = SegmentMetadata(A, 0)
    state.check_not_sealed()
    state.pending_sealed = True  # queued, not yet durable
    assert not state.sealed
    with pytest.raises(SegmentSealedError, match=A):
        state.check_not_sealed()


def test_check_not_truncated_raises_below_the_durable_start() -> None:
    state = SegmentMetadata(A, 0, start_offset=10, length=20)
    state.check_not_truncated(10)
    with pytest.raises(SegmentTruncatedError) as raised:
        state.check_not_truncated(9)
    assert raised.value.start_offset == 10  # type: ignore[attr-defined]


def test_start_pending_view_copies_the_durable_view() -> None:
    state = SegmentMetadata(A, 5, start_offset=3, length=10, sealed=True, event_count=4)
    state.attributes = {K1: 1}
    state.start_pending_view(now=100.0)
    assert (
        state.pending_length,
        state.pending_sealed,
        state.pending_event_count,
        state.pending_start_offset,
    ) == (10, True, 4, 3)
    assert state.pending_attributes == {K1: 1}
    assert state.pending_attributes is not state.attributes
    assert state.attributes_complete is False  # the attribute index may hold more
    assert state.traffic is not None and state.traffic.rates(100.0) == (0.0, 0.0)


def test_info_reports_the_durable_view() -> None:
    state = SegmentMetadata(A, 1234, start_offset=2, length=10, event_count=3, storage_length=4)
    state.reserve(100, {}, 100)
    state.pending_sealed = True
    info = state.info()
    assert (info.name, info.length, info.start_offset, info.sealed) == (A, 10, 2, False)
    assert (info.event_count, info.storage_length, info.creation_time_ms) == (3, 4, 1234)


# --- merge_pair -----------------------------------------------------------------------------------
def test_merge_pair_returns_target_and_source() -> None:
    metadata = metadata_with(A, B)
    sealed(metadata.get(B))
    assert metadata.merge_pair(A, B) == (metadata.get(A), metadata.get(B))


def test_merge_pair_of_an_unsealed_source_raises_illegal_state() -> None:
    metadata = metadata_with(A, B)
    with pytest.raises(IllegalStateError, match="not sealed") as raised:
        metadata.merge_pair(A, B)
    assert not isinstance(raised.value, SegmentSealedError)


def test_merge_pair_of_a_truncated_source_raises_illegal_state() -> None:
    metadata = metadata_with(A, B)
    sealed(metadata.get(B)).pending_start_offset = 1
    with pytest.raises(IllegalStateError, match="truncated"):
        metadata.merge_pair(A, B)


def test_merge_pair_into_a_sealed_target_raises_segment_sealed() -> None:
    metadata = metadata_with(A, B)
    sealed(metadata.get(A))
    sealed(metadata.get(B))
    with pytest.raises(SegmentSealedError, match=A):
        metadata.merge_pair(A, B)


@pytest.mark.parametrize("missing", ["target", "source", "deleted source", "deleted target"])
def test_merge_pair_with_a_missing_segment_raises_not_found(missing: str) -> None:
    metadata = metadata_with(A, B)
    sealed(metadata.get(B))
    if missing == "target":
        metadata.remove(A)
    elif missing == "source":
        metadata.remove(B)
    elif missing == "deleted source":
        metadata.get(B).pending_deleted = True
    else:
        metadata.get(A).pending_deleted = True
    with pytest.raises(SegmentNotFoundError):
        metadata.merge_pair(A, B)


# --- busy segments ---------------------------------------------------------------------------
def test_a_segment_is_busy_from_its_add_until_a_drop_finds_it_clean() -> None:
    metadata = metadata_with(A, B)
    assert [s.name for s in metadata.busy()] == [A, B]
    metadata.get(B).length = 5  # durable bytes not in Tier-2
    metadata.drop_clean()
    assert [s.name for s in metadata.busy()] == [B]
    metadata.get(B).storage_length = 5
    metadata.get(B).dirty_attributes[K1] = 1  # but a dirty attribute value
    metadata.drop_clean()
    assert [s.name for s in metadata.busy()] == [B]
    metadata.get(B).dirty_attributes.clear()
    metadata.get(B).unflushed_appends.append((5, 9))  # a log position not released
    metadata.drop_clean()
    assert [s.name for s in metadata.busy()] == [B]
    metadata.get(B).unflushed_appends.clear()
    metadata.drop_clean()
    assert metadata.busy() == []


def test_touch_makes_a_segment_busy_again_but_not_one_removed_or_replaced() -> None:
    metadata = metadata_with(A, B)
    metadata.drop_clean()
    old_a = metadata.get(A)
    metadata.touch(old_a)
    assert metadata.busy() == [old_a]
    metadata.remove(A)
    assert metadata.busy() == []
    metadata.touch(old_a)  # gone: not brought back
    metadata.add(SegmentMetadata(A, 2000))  # a new incarnation of the name
    metadata.drop_clean()
    metadata.touch(old_a)  # the old object does not stand for the new segment
    assert metadata.busy() == []


def test_revisit_all_makes_every_segment_busy_and_names_those_that_escaped() -> None:
    metadata = metadata_with(A, B, C)
    metadata.drop_clean()
    metadata.get(B).length = 3  # changed without touch(): a defect the check names
    assert metadata.revisit_all() == [B]
    assert [s.name for s in metadata.busy()] == [A, B, C]
    assert metadata.revisit_all() == []


def test_the_oldest_unflushed_sequence_is_found_among_busy_segments() -> None:
    metadata = metadata_with(A, B)
    metadata.get(A).length = 10
    metadata.get(A).unflushed_appends.append((0, 7))
    metadata.get(B).length = 10
    metadata.get(B).unflushed_appends.append((0, 4))
    metadata.drop_clean()
    assert metadata.oldest_unflushed_sequence() == 4


# --- checkpoints ----------------------------------------------------------------------------------
def busy_segment() -> SegmentMetadata:
    """A segment with durable data in Tier-2 and in memory, attributes and queued operations."""
    chunks = ChunkLayout()
    chunks.add(ChunkRef(0, 10, chunk_name(A, 0), 99), A)
    chunks.add(ChunkRef(10, 5, chunk_name(A, 10), None), A)
    state = SegmentMetadata(
        A,
        1000,
        role="table",
        length=20,
        event_count=3,
        storage_length=15,
        chunks=chunks,
        attribute_root=128,
    )
    state.attributes = {K1: 1, K2: 2, K4: 4}
    state.dirty_attributes = {K1: 1}
    state.start_pending_view(0.0)
    state.reserve(7, {K2: 20, K3: 3}, 2)  # queued, not yet durable
    return state


def test_snapshot_records_the_durable_view_and_only_attributes_the_index_may_lack() -> None:
    entry = busy_segment().snapshot()
    assert entry == {
        "n": A,
        "t": 1000,
        "so": 0,
        "r": "table",
        "l": 20,  # the queued 7 bytes come after the checkpoint in the log
        "s": False,
        "e": 3,
        # K1 is dirty; K2 and K4 are clean (the index has them); K2's and K3's queued values
        # come after the checkpoint.
        "a": {K1.hex(): 1},
        "sl": 15,
        "ar": 128,
        "c": [[0, 10, chunk_name(A, 0), 99], [10, 5, chunk_name(A, 10), None]],
    }


def test_from_snapshot_rebuilds_the_segment_as_recorded() -> None:
    entry = busy_segment().snapshot()
    state = SegmentMetadata.from_snapshot(entry, sequence=42)
    assert (state.name, state.creation_time_ms, state.role) == (A, 1000, "table")
    assert (state.start_offset, state.length, state.sealed, state.event_count) == (0, 20, False, 3)
    assert (state.storage_length, state.attribute_root) == (15, 128)
    assert list(state.chunks) == list(busy_segment().chunks)
    assert state.attributes == {K1: 1}
    assert state.dirty_attributes == state.attributes  # the index may lack every one
    # Bytes [15, 20) are flushed by ChunkAdded records after the checkpoint.
    assert list(state.unflushed_appends) == [(15, 42)]
    assert state.matches_snapshot(entry)
    assert state.snapshot()["c"] == entry["c"]


def test_from_snapshot_of_a_flushed_segment_has_nothing_unflushed() -> None:
    entry = SegmentMetadata(A, 0, length=10, pending_length=10, storage_length=10).snapshot()
    del entry["ar"]  # checkpoints from before the attribute root was recorded
    state = SegmentMetadata.from_snapshot(entry, sequence=3)
    assert list(state.unflushed_appends) == []
    assert state.attribute_root == -1


@pytest.mark.parametrize(("field", "value"), [("l", 28), ("s", True), ("e", 6), ("sl", 16)])
def test_matches_snapshot_is_false_when_a_checked_field_differs(field: str, value: object) -> None:
    entry = busy_segment().snapshot()
    state = SegmentMetadata.from_snapshot(entry, sequence=1)
    assert not state.matches_snapshot({**entry, field: value})


def test_container_snapshot_leaves_out_creations_not_yet_durable_and_survives_encoding() -> None:
    metadata = ContainerMetadata(7)
    metadata.add(busy_segment())
    metadata.add(SegmentMetadata(B, 0))
    metadata.get(B).pending_deleted = True  # its delete comes after the checkpoint: still in
    metadata.add(SegmentMetadata(C, 0, durable=False))  # its create comes after: not in
    checkpoint = metadata.snapshot()
    assert isinstance(checkpoint, ops.MetadataCheckpoint)
    assert [entry["n"] for entry in checkpoint.segments] == [A, B]
    (decoded,) = ops.decode(ops.encode([checkpoint]))
    assert decoded == checkpoint  # plain JSON: what the log stores is what replay reads


def test_oldest_unflushed_sequence_is_the_minimum_over_segments() -> None:
    metadata = metadata_with(A, B)
    assert metadata.oldest_unflushed_sequence() is None
    metadata.get(A).unflushed_appends.extend([(0, 9), (5, 12)])
    assert metadata.oldest_unflushed_sequence() == 9
    metadata.get(B).unflushed_appends.append((0, 4))
    assert metadata.oldest_unflushed_sequence() == 4
    metadata.get(B).unflushed_appends.popleft()
    assert metadata.oldest_unflushed_sequence() == 9


# --- traffic and waiters --------------------------------------------------------------------------
def test_traffic_reports_smoothed_rates_from_the_clock() -> None:
    clock = ManualClock(start_s=50.0)
    metadata = metadata_with(A, B)
    metadata.get(A).traffic = RateTracker(TRAFFIC_TIME_CONSTANT_S, clock.monotonic())
    metadata.get(A).traffic.record(100, 10_000, clock.monotonic())  # type: ignore[union-attr]
    now = {t.segment: t for t in metadata.traffic(clock.monotonic())}
    assert now[A].events_per_s == pytest.approx(100 / TRAFFIC_TIME_CONSTANT_S)
    assert now[A].bytes_per_s == pytest.approx(10_000 / TRAFFIC_TIME_CONSTANT_S)
    assert (now[B].events_per_s, now[B].bytes_per_s) == (0.0, 0.0)  # no tracker yet
    clock.advance(TRAFFIC_TIME_CONSTANT_S)
    (later,) = [t for t in metadata.traffic(clock.monotonic()) if t.segment == A]
    assert later.events_per_s == pytest.approx(100 / TRAFFIC_TIME_CONSTANT_S / math.e)


def test_wake_all_resolves_pending_waiters_and_skips_done_ones() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        pending, cancelled, failed = (
            loop.create_future(),
            loop.create_future(),
            loop.create_future(),
        )
        cancelled.cancel()
        failed.set_exception(RuntimeError("x"))
        waiters = [pending, cancelled, failed]
        wake_all(waiters)
        assert waiters == []
        assert pending.result() is None
        assert cancelled.cancelled()
        assert isinstance(failed.exception(), RuntimeError)

    asyncio.run(run())


def test_wake_all_waiters_wakes_every_segment() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        metadata = metadata_with(A, B)
        waiters = []
        for state in metadata:
            for waiting in (state.data_waiters, state.attribute_waiters):
                waiter = loop.create_future()
                waiting.append(waiter)
                waiters.append(waiter)
        metadata.wake_all_waiters()
        assert all(w.done() for w in waiters)
        assert all(not s.data_waiters and not s.attribute_waiters for s in metadata)

    asyncio.run(run())
