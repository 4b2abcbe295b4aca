"""AttributeCache on its own, over a real BTreeAttributeIndex on InMemoryChunkStorage.

The index is wrapped (Pravega's TestDurableDataLog idea): it records every call, can hold a
call on the index thread until the test releases it, and can raise a chosen error.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from pravega_ray.constants import ATTRIBUTE_FLUSH_ENTRIES
from pravega_ray.contracts.attributes import CREATION_TIME, EVENT_COUNT, NULL_VALUE
from pravega_ray.errors import (
    ContainerNotReadyError,
    DataCorruptionError,
    FencedError,
    InvalidArgumentError,
    SegmentNotFoundError,
)
from pravega_ray.segmentstore.attribute_cache import AttributeCache
from pravega_ray.segmentstore.btree_attribute_index import CHUNK_PREFIX, BTreeAttributeIndex
from pravega_ray.segmentstore.container_metadata import ContainerMetadata, SegmentMetadata
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.timing import ManualClock

pytestmark = pytest.mark.timeout(30)

A = "sc/st/0.#epoch.0"
B = "sc/st/1.#epoch.0"
INTERVAL_S = 10.0


def key(i: int) -> bytes:
    return i.to_bytes(16, "big")


K1, K2, K3, K4, K5 = (key(i) for i in range(1, 6))


class RecordingIndex:
    """The real index, recording calls; ``gate`` holds calls, ``fail`` raises per method."""

    def __init__(self, inner: BTreeAttributeIndex) -> None:
        self.inner = inner
        self.calls: list[tuple[str, str, Any]] = []
        self.roots: list[int | None] = []
        self.entered = threading.Event()
        self.gate: threading.Event | None = None
        self.fail: dict[str, BaseException] = {}

    def _enter(self, method: str, segment: str, argument: Any) -> None:
        self.calls.append((method, segment, argument))
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(10), "the test never released the index call"
        if method in self.fail:
            raise self.fail[method]

    def get(self, segment: str, keys: Iterable[bytes]) -> dict[bytes, int]:
        keys = list(keys)
        self._enter("get", segment, keys)
        return self.inner.get(segment, keys)

    def update(self, segment: str, values: dict[bytes, int]) -> int | None:
        self._enter("update", segment, dict(values))
        root = self.inner.update(segment, values)
        self.roots.append(root)
        return root

    def expect_root(self, segment: str, root: int) -> None:
        self.inner.expect_root(segment, root)

    def iterate(self, segment: str, after: bytes | None, limit: int) -> list[tuple[bytes, int]]:
        self._enter("iterate", segment, (after, limit))
        return self.inner.iterate(segment, after, limit)

    def delete(self, segment: str) -> None:
        self._enter("delete", segment, None)
        self.inner.delete(segment)

    def methods(self) -> list[str]:
        return [method for method, _, _ in self.calls]


@dataclass
class Harness:
    storage: InMemoryChunkStorage
    index: RecordingIndex
    metadata: ContainerMetadata
    clock: ManualClock
    cache: AttributeCache = field(init=False)
    recorded_roots: list[tuple[str, int]] = field(default_factory=list)
    fenced_errors: list[FencedError] = field(default_factory=list)
    closed: bool = False
    entries_max: int = 1000

    def __post_init__(self) -> None:
        self.cache = AttributeCache(
            self.index,
            self.metadata,
            entries_max=self.entries_max,
            flush_interval_s=INTERVAL_S,
            clock=self.clock,
            check_running=self.check_running,
            fenced=self.fenced,
            record_root=self.record_root,
        )

    def check_running(self) -> None:
        if self.closed:
            raise ContainerNotReadyError("closed")

    def fenced(self, error: FencedError) -> BaseException:
        self.fenced_errors.append(error)
        return ContainerNotReadyError(f"fenced: {error}")

    async def record_root(self, segment: str, root: int) -> None:
        self.recorded_roots.append((segment, root))

    def segment(
        self,
        name: str,
        clean: dict[bytes, int] | None = None,
        dirty: dict[bytes, int] | None = None,
        complete: bool = True,
        incarnation: str | None = None,
    ) -> SegmentMetadata:
        """A segment whose durable attributes are ``clean`` (in the index too) and ``dirty``."""
        state = SegmentMetadata(name, 1234, event_count=42, incarnation=incarnation)
        if clean:
            self.index.inner.update(state.storage_name, clean)
        state.attributes = {**(clean or {}), **(dirty or {})}
        state.pending_attributes = dict(state.attributes)
        state.dirty_attributes = dict(dirty or {})
        state.attributes_complete = complete
        self.metadata.add(state)
        return state

    def stored(self, name: str, *keys: bytes) -> dict[bytes, int]:
        return self.index.inner.get(name, keys)


def harness(entries_max: int = 1000) -> Harness:
    storage = InMemoryChunkStorage()
    return Harness(
        storage,
        RecordingIndex(BTreeAttributeIndex(storage)),
        ContainerMetadata(0),
        ManualClock(100.0),
        entries_max=entries_max,
    )


def run(body: Coroutine[Any, Any, None]) -> None:
    asyncio.run(body)


async def until_entered(index: RecordingIndex) -> None:
    while not index.entered.is_set():
        await asyncio.sleep(0.001)


# --- prefetch and get -----------------------------------------------------------------------------
def test_prefetch_of_a_complete_segment_asks_the_index_nothing() -> None:
    async def body() -> None:
        h = harness()
        state = h.segment(A)
        await h.cache.prefetch(state, [K1, K2])
        assert h.index.calls == []
        assert K1 not in state.pending_attributes  # absent: nothing lives only in the index

    run(body())


def test_prefetch_fills_only_missing_keys() -> None:
    async def body() -> None:
        h = harness()
        state = h.segment(A, clean={K1: 1, K2: 2}, complete=False)
        state.pending_attributes.pop(K2)  # evicted earlier
        state.attributes.pop(K2)
        state.reserve(0, {K1: 10}, 0)  # a queued operation's value
        await h.cache.prefetch(state, [K1, K2, K3])
        assert h.index.calls == [("get", A, [K2, K3])]
        assert state.pending_attributes == {K1: 10, K2: 2, K3: NULL_VALUE}
        assert state.attributes == {K1: 1, K2: 2, K3: NULL_VALUE}
        await h.cache.prefetch(state, [K1, K2, K3])
        assert len(h.index.calls) == 1  # all in memory now

    run(body())


def test_prefetch_keeps_a_value_set_concurrently() -> None:
    async def body() -> None:
        h = harness()
        state = h.segment(A, clean={K1: 1}, complete=False)
        state.pending_attributes.clear()
        state.attributes.clear()
        h.index.gate = threading.Event()
        prefetching = asyncio.create_task(h.cache.prefetch(state, [K1]))
        await until_entered(h.index)
        state.reserve(0, {K1: 99}, 0)  # an operation validated meanwhile: newer
        h.index.gate.set()
        await prefetching
        assert state.pending_attributes == {K1: 99}

    run(body())


def test_get_returns_durable_values_and_core_attributes() -> None:
    async def body() -> None:
        h = harness()
        state = h.segment(A, clean={K1: 1, K2: NULL_VALUE}, complete=False)
        state.reserve(0, {K3: 3}, 0)  # queued, not durable
        result = await h.cache.get(A, [K1, K2, K3, K4, EVENT_COUNT, CREATION_TIME])
        assert result == {K1: 1, EVENT_COUNT: 42, CREATION_TIME: 1234}
        with pytest.raises(SegmentNotFoundError):
            await h.cache.get(B, [K1])

    run(body())


def test_expect_root_makes_an_older_index_state_data_corruption() -> None:
    async def body() -> None:
        h = harness()
        state = h.segment(A, clean={K1: 1}, complete=False)
        state.pending_attributes.clear()
        h.index.inner.clear_cache()
        h.cache.expect_root(A, 10**9)
        with pytest.raises(DataCorruptionError, match="older than the one recorded"):
            await h.cache.prefetch(state, [K1])

    run(body())


# --- flush pacing ---------------------------------------------------------------------------------
def test_flush_of_a_few_young_values_waits_for_the_interval() -> None:
    async def body() -> None:
        h = harness()
        state = h.segment(A, dirty={K1: 1})
        await h.cache.flush()
        assert "update" not in h.index.methods()
        assert state.attributes_dirty_since == 100.0  # first seen dirty now
        h.clock.advance(INTERVAL_S - 0.1)
        await h.cache.flush()
        assert "update" not in h.index.methods()
        h.clock.advance(0.1)
        await h.cache.flush()
        assert h.stored(A, K1) == {K1: 1}
        assert state.dirty_attributes == {} and state.attributes_dirty_since is None
        assert state.attributes == {K1: 1}  # still cached, now clean

    run(body())


def test_flush_of_attribute_flush_entries_values_writes_at_once() -> None:
    async def body() -> None:
        h = harness(entries_max=2 * ATTRIBUTE_FLUSH_ENTRIES)
        few = h.segment(A, dirty={K1: 1})
        many = h.segment(B, dirty={key(i): i for i in range(ATTRIBUTE_FLUSH_ENTRIES)})
        await h.cache.flush()
        assert [(m, s) for m, s, _ in h.index.calls] == [("update", B)]
        assert many.dirty_attributes == {} and few.dirty_attributes == {K1: 1}

    run(body())


def test_flush_forced_writes_young_values_and_records_the_index_root() -> None:
    async def body() -> None:
        h = harness()
        h.segment(A, dirty={K1: 1, K2: NULL_VALUE})
        h.segment(B, dirty={K3: 3})
        await h.cache.flush(force=True)
        assert h.stored(A, K1, K2) == {K1: 1}
        assert h.stored(B, K3) == {K3: 3}
        assert h.recorded_roots == list(zip([A, B], h.index.roots, strict=True))
        assert all(root is not None for root in h.index.roots)

    run(body())


def test_flush_keeps_values_changed_while_it_wrote() -> None:
    async def body() -> None:
        h = harness()
        state = h.segment(A, dirty={K1: 1, K2: 2})
        h.index.gate = threading.Event()
        flushing = asyncio.create_task(h.cache.flush(force=True))
        await until_entered(h.index)
        state.attributes[K1] = state.dirty_attributes[K1] = 5  # an append applied meanwhile
        h.index.gate.set()
        await flushing
        assert h.stored(A, K1, K2) == {K1: 1, K2: 2}
        assert state.dirty_attributes == {K1: 5}
        assert state.attributes_dirty_since == 100.0

    run(body())


def test_flush_skips_a_segment_being_deleted() -> None:
    async def body() -> None:
        h = harness()
        state = h.segment(A, dirty={K1: 1})
        state.pending_deleted = True
        await h.cache.flush(force=True)
        assert h.index.calls == []
        assert state.attributes_dirty_since is None

    run(body())


# --- eviction -------------------------------------------------------------------------------------
def test_eviction_keeps_dirty_values_and_marks_the_segment_incomplete() -> None:
    async def body() -> None:
        h = harness(entries_max=3)
        state = h.segment(A, clean={K1: 1, K2: 2, K3: 3}, dirty={K4: 4})
        state.reserve(0, {K5: 5}, 0)  # queued, not durable: pending differs from durable
        await h.cache.flush()  # K4 is young: not flushed; 5 cached, 3 allowed
        assert state.pending_attributes == {K3: 3, K4: 4, K5: 5}
        assert state.attributes == {K3: 3, K4: 4}
        assert state.attributes_complete is False
        await h.cache.prefetch(state, [K1])  # an evicted value comes back from the index
        assert state.pending_attributes[K1] == 1

    run(body())


def test_eviction_under_the_bound_changes_nothing() -> None:
    async def body() -> None:
        h = harness(entries_max=3)
        state = h.segment(A, clean={K1: 1, K2: 2, K3: 3})
        await h.cache.flush()
        assert state.pending_attributes == {K1: 1, K2: 2, K3: 3}
        assert state.attributes_complete is True

    run(body())


def test_eviction_counts_the_cached_values_only_when_they_may_exceed_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counting visits every segment: after a count, flushes that saw no value applied or
    prefetched do not count again; values applied (the durable log's count) or prefetched
    past the bound make the next flush count, and evict."""
    counts = []
    maps = ContainerMetadata.pending_attribute_maps

    def counted(self: ContainerMetadata) -> Any:
        counts.append(1)
        return maps(self)

    monkeypatch.setattr(ContainerMetadata, "pending_attribute_maps", counted)

    async def body() -> None:
        h = harness(entries_max=4)
        state = h.segment(A, clean={K1: 1, K2: 2})
        await h.cache.flush()
        assert len(counts) == 1  # the first flush counts (nothing known yet)
        for _ in range(5):
            await h.cache.flush()
        assert len(counts) == 1  # nothing cached since
        state.reserve(0, {K3: 3, K4: 4}, 0)
        state.attributes.update({K3: 3, K4: 4})
        h.metadata.touch(state, 2)  # applied, as the durable log counts it: 4 cached <= 4
        await h.cache.flush()
        assert len(counts) == 1 and len(state.pending_attributes) == 4
        state.reserve(0, {K5: 5}, 0)
        state.attributes[K5] = 5
        h.metadata.touch(state, 1)  # 5 > 4: counted and evicted
        await h.cache.flush()
        assert len(counts) == 2 and len(state.pending_attributes) == 4
        assert state.attributes_complete is False
        await h.cache.prefetch(state, [K1, K2])  # evicted ones come back: counted again
        await h.cache.flush()
        assert len(counts) == 3 and len(state.pending_attributes) <= 4
        await h.cache.flush(force=True)  # a forced flush always counts
        assert len(counts) == 4

    run(body())


# --- damage and fencing ---------------------------------------------------------------------------
def test_damaged_index_stops_only_that_segments_flushes() -> None:
    async def body() -> None:
        h = harness()
        damaged = h.segment(A, dirty={K1: 1})
        healthy = h.segment(B, dirty={K2: 2})
        h.cache.expect_root(A, 10**9)  # A's index lost its newest state
        await h.cache.flush(force=True)
        assert damaged.attribute_index_damaged is True
        assert damaged.dirty_attributes == {K1: 1}  # the value stays in memory
        assert healthy.dirty_attributes == {} and h.stored(B, K2) == {K2: 2}
        assert [segment for segment, _ in h.recorded_roots] == [B]
        calls = len(h.index.calls)
        await h.cache.flush(force=True)
        assert len(h.index.calls) == calls  # reported once, then skipped

    run(body())


def test_fenced_error_from_the_index_goes_through_fenced() -> None:
    async def body() -> None:
        h = harness()
        state = h.segment(A, dirty={K1: 1})
        h.index.fail["update"] = FencedError("a newer owner")
        with pytest.raises(ContainerNotReadyError, match="fenced"):
            await h.cache.flush(force=True)
        assert [str(e) for e in h.fenced_errors] == ["a newer owner"]
        assert state.dirty_attributes == {K1: 1}

    run(body())


# --- iterate --------------------------------------------------------------------------------------
def test_iterate_merges_memory_over_the_index() -> None:
    async def body() -> None:
        h = harness()
        h.segment(
            A,
            clean={K1: 1, K2: 2, K3: 3},
            dirty={K2: 20, K3: NULL_VALUE, K4: 4, EVENT_COUNT: 9},
            complete=False,
        )
        assert await h.cache.iterate(A, None, 10) == ([(K1, 1), (K2, 20), (K4, 4)], None)
        page, cursor = await h.cache.iterate(A, None, 2)
        assert (page, cursor) == ([(K1, 1), (K2, 20)], K2)
        page, cursor = await h.cache.iterate(A, cursor, 2)
        assert (page, cursor) == ([(K4, 4)], None)  # K3 was removed in memory

    run(body())


def test_iterate_pages_never_skip_a_key_only_in_memory() -> None:
    async def body() -> None:
        h = harness()
        h.segment(A, clean={key(i): i for i in range(0, 20, 2)}, dirty={key(7): 7, key(30): 30})
        expected = sorted([(key(i), i) for i in range(0, 20, 2)] + [(key(7), 7), (key(30), 30)])
        found: list[tuple[bytes, int]] = []
        cursor: bytes | None = None
        for _ in range(20):
            page, cursor = await h.cache.iterate(A, cursor, 3)
            assert len(page) <= 3
            found += page
            if cursor is None:
                break
        assert found == expected

    run(body())


def test_iterate_checks_its_arguments_and_the_segment_before_any_index_call() -> None:
    async def body() -> None:
        h = harness()
        h.segment(A)
        with pytest.raises(SegmentNotFoundError):
            await h.cache.iterate(B, None, 10)
        with pytest.raises(InvalidArgumentError):
            await h.cache.iterate(A, None, 0)
        with pytest.raises(InvalidArgumentError):
            await h.cache.iterate(A, b"short", 10)
        assert h.index.calls == []

    run(body())


# --- deleted segments and close -------------------------------------------------------------------
def test_segment_deleted_deletes_the_index_on_the_next_flush() -> None:
    async def body() -> None:
        h = harness()
        h.segment(A, clean={K1: 1})
        h.metadata.remove(A)
        h.cache.segment_deleted(A)
        assert h.storage.list(f"{CHUNK_PREFIX}{A}/") != []
        await h.cache.flush()
        assert h.storage.list(f"{CHUNK_PREFIX}{A}/") == []
        assert h.index.calls == [("delete", A, None)]
        await h.cache.flush()
        assert len(h.index.calls) == 1  # once

    run(body())


def test_flush_after_a_segment_was_deleted_and_created_again_keeps_the_new_values() -> None:
    async def body() -> None:
        h = harness()
        old = h.segment(A, clean={K1: 1}, incarnation="1-0")
        h.metadata.remove(A)
        h.cache.segment_deleted(old.storage_name)  # the old incarnation is gone
        new = h.segment(A, dirty={K2: 2}, incarnation="1-1")  # e.g. a stream created again
        await h.cache.flush(force=True)
        assert h.stored(new.storage_name, K1, K2) == {K2: 2}
        assert h.stored(old.storage_name, K1, K2) == {}

    run(body())


def test_close_waits_for_the_running_index_call() -> None:
    async def body() -> None:
        h = harness()
        h.segment(A, dirty={K1: 1})
        h.index.gate = threading.Event()
        flushing = asyncio.create_task(h.cache.flush(force=True))
        await until_entered(h.index)
        closing = asyncio.create_task(h.cache.close())
        await asyncio.sleep(0.05)
        assert not closing.done()  # the index write is still running
        h.index.gate.set()
        await asyncio.wait_for(asyncio.gather(flushing, closing), 5)
        assert h.stored(A, K1) == {K1: 1}
        h.closed = True  # what the container's check reports once it closed
        with pytest.raises(ContainerNotReadyError):
            await h.cache.iterate(A, None, 1)

    run(body())
