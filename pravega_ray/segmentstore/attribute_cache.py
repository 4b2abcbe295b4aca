"""Attribute cache: a container's extended attributes in memory, over the attribute index.

As in Pravega (docs/attribute-index.md), the ingestion pipeline never waits on Tier-2 for
an attribute it validates against. Before an operation is validated, the keys
it names are *prefetched* from the attribute index into the segment's pending
view; the storage writer later *flushes* applied values (coalesced: latest
wins) into the index and *evicts* clean ones once the container holds more than
``attribute_cache_entries_max``. Flushes visit only the container's busy segments
(``ContainerMetadata.busy``: a segment with dirty values is busy); eviction counts the
cached values of every segment only when they may exceed the bound (the count known since
the last one grows by the values prefetched and applied: nothing else caches values).
Values are kept in
:class:`~pravega_ray.segmentstore.container_metadata.SegmentMetadata`
(``attributes``, ``pending_attributes``, ``dirty_attributes``); this class owns
the policy and the index I/O.

Flushes are paced: a segment's batch goes to the index when forced, when it holds
``ATTRIBUTE_FLUSH_ENTRIES`` values, or when its oldest dirty value is
``storage_flush_interval_s`` old, so a busy writer's event number, which changes on
every append, costs one index update per interval. Each update's new root is
logged (``AttributeIndexUpdated``) so recovery refuses an index that lost its
newest state. A damaged index stops only its own segment's flushes (the values
stay in memory and in checkpoints).

All index calls run on one dedicated thread, one at a time (the index is not
thread-safe), and :meth:`close` drains it: a cancelled caller must not leave a
write running when a successor container opens the same attribute segments.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pravega_ray.constants import ATTRIBUTE_FLUSH_ENTRIES, ATTRIBUTE_UPDATES_MAX
from pravega_ray.contracts.arguments import check_int
from pravega_ray.contracts.attributes import (
    CREATION_TIME,
    EVENT_COUNT,
    NULL_VALUE,
    check_key,
    is_core_key,
)
from pravega_ray.errors import DataCorruptionError, FencedError, SegmentNotFoundError
from pravega_ray.segmentstore.attribute_index import AttributeIndex
from pravega_ray.segmentstore.container_metadata import (
    ContainerMetadata,
    SegmentMetadata,
    segment_of_storage_name,
)
from pravega_ray.timing import Clock

__all__ = ["AttributeCache"]

log = logging.getLogger(__name__)
R = TypeVar("R")


class AttributeCache:
    """Prefetch, iteration, flushes and eviction of one container's extended attributes.

    ``check_running`` raises if the container has stopped (called before each index call);
    ``fenced`` turns a FencedError from the index into the error to raise (and stops the
    container); ``record_root`` durably logs an index update's new root.
    """

    def __init__(
        self,
        index: AttributeIndex,
        metadata: ContainerMetadata,
        *,
        entries_max: int,
        flush_interval_s: float,
        clock: Clock,
        check_running: Callable[[], None],
        fenced: Callable[[FencedError], BaseException],
        record_root: Callable[[str, int], Awaitable[None]],
    ) -> None:
        self._index = index
        self._metadata = metadata
        self._entries_max = entries_max
        self._flush_interval_s = flush_interval_s
        self._clock = clock
        self._check_running = check_running
        self._fenced = fenced
        self._record_root = record_root
        self._lock = asyncio.Lock()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="attribute-index")
        self._deleted: list[str] = []  # segments whose index awaits deletion
        # An upper bound of the values cached (None: unknown, count them), and what it
        # knows of: the durable log's count of values applied, and values prefetched since.
        self._cached_max: int | None = None
        self._applied_seen = 0
        self._loaded = 0

    def expect_root(self, storage_name: str, root: int) -> None:
        """Recovery: the log recorded that the segment's index reached ``root``."""
        self._index.expect_root(storage_name, root)

    def segment_deleted(self, storage_name: str) -> None:
        """The segment is gone (deleted or merged): delete its index on the next flush.

        ``storage_name``: the segment incarnation's (``SegmentMetadata.storage_name``), so a
        segment created again under the same name keeps its own index.
        """
        self._deleted.append(storage_name)

    async def close(self) -> None:
        """Wait for the running index call, if any, and stop the index thread."""
        await asyncio.to_thread(self._executor.shutdown, wait=True)

    async def _call(self, function: Callable[..., R], *args: Any) -> R:
        """Run an index call on the index thread, under the lock."""
        async with self._lock:
            self._check_running()  # close() shuts the thread down
            loop = asyncio.get_running_loop()
            try:
                return await loop.run_in_executor(self._executor, function, *args)
            except FencedError as e:
                raise self._fenced(e) from e
            except DataCorruptionError as e:
                # The index names the segment by its Tier-2 name; callers know the segment.
                named = getattr(e, "segment", None)
                if isinstance(named, str):
                    vars(e)["segment"] = segment_of_storage_name(named)
                raise

    # --- the pipeline's side -------------------------------------------------------------------
    async def prefetch(self, state: SegmentMetadata, keys: list[bytes]) -> None:
        """Load the durable values of ``keys`` missing from memory from the attribute index.

        A value loaded concurrently by an operation of the pipeline wins: it is newer.
        On return every key is in ``pending_attributes`` (callers must not await
        before using them): a flush may evict clean values while this waits for the
        index, so it loops until none is missing.
        """
        while not state.attributes_complete:
            missing = [k for k in keys if k not in state.pending_attributes]
            if not missing:
                return
            found = await self._call(self._index.get, state.storage_name, missing)
            for key in missing:
                if key not in state.pending_attributes:
                    value = found.get(key, NULL_VALUE)
                    state.pending_attributes[key] = value
                    state.attributes.setdefault(key, value)
                    self._loaded += 1

    async def get(self, segment: str, keys: list[bytes]) -> dict[bytes, int]:
        """Durable values of ``keys`` (absent ones left out), core keys (event count,
        creation time) included. The keys were checked by the caller."""
        core_keys = (EVENT_COUNT, CREATION_TIME)
        await self.prefetch(self._metadata.get(segment), [k for k in keys if k not in core_keys])
        state = self._metadata.get(segment)
        core = {EVENT_COUNT: state.event_count, CREATION_TIME: state.creation_time_ms}
        result = {}
        for key in keys:
            value = core.get(key, state.attributes.get(key))
            if value is not None and value != NULL_VALUE:
                result[key] = value
        return result

    async def iterate(
        self, segment: str, after: bytes | None, limit: int
    ) -> tuple[list[tuple[bytes, int]], bytes | None]:
        """A page of the segment's durable extended attributes in key order.

        Returns up to ``limit`` ``(key, value)`` pairs with ``after < key`` and the
        cursor for the next page (None when done). Values not yet in the index come
        from memory, so a page agrees with what a get would return for its keys.
        SegmentNotFoundError if the segment is missing, before any index I/O;
        InvalidArgumentError for a bad cursor or limit.
        """
        if after is not None:
            check_key(after, allow_core=True)
        check_int("limit", limit, 1, ATTRIBUTE_UPDATES_MAX)
        storage_name = self._metadata.get(segment).storage_name
        stored = await self._call(self._index.iterate, storage_name, after, limit)
        state = self._metadata.get(segment)  # again: it may have been deleted meanwhile
        if state.storage_name != storage_name:  # ... and created again: not the one read
            raise SegmentNotFoundError(f"segment {segment} was deleted during the iteration")
        high = stored[-1][0] if len(stored) == limit else None  # memory may not go past it
        merged = dict(stored)
        for key, value in state.attributes.items():
            if (after is None or key > after) and (high is None or key <= high):
                merged[key] = value
        items = sorted((k, v) for k, v in merged.items() if v != NULL_VALUE and not is_core_key(k))
        if high is None:
            return items[:limit], (items[limit - 1][0] if len(items) > limit else None)
        return items[:limit], (items[limit - 1][0] if len(items) >= limit else high)

    async def iterate_range(
        self, segment: str, low: bytes, high: bytes, after: bytes | None, limit: int
    ) -> tuple[list[tuple[bytes, int]], bytes | None]:
        """A page of the segment's durable attributes with keys in ``[low, high]`` (and above
        ``after``, a cursor, when given), core keys included, in key order.

        Returns the page and the cursor of the next one (None once ``high`` is reached).
        One index step reads at most ``limit`` keys; values not yet in the index (or removed
        in memory) come from memory, which wins for the same key, so a page holds removed
        keys never and may hold fewer items than ``limit`` (even none) before the end, or a
        few more. For the time index's cleanup (``time_index.py``). The keys are the
        caller's (not checked); SegmentNotFoundError if the segment is (or goes) missing.
        """
        if after is None or after < low:
            value = int.from_bytes(low, "big")
            after = (value - 1).to_bytes(len(low), "big") if value > 0 else None
        storage_name = self._metadata.get(segment).storage_name
        stored = await self._call(self._index.iterate, storage_name, after, limit)
        state = self._metadata.get(segment)
        if state.storage_name != storage_name:
            raise SegmentNotFoundError(f"segment {segment} was deleted during the iteration")
        full = len(stored) == limit
        page_high = stored[-1][0] if full and stored[-1][0] < high else high
        merged = {k: v for k, v in stored if k <= page_high}
        for key, value in state.attributes.items():
            if (after is None or key > after) and low <= key <= page_high:
                merged[key] = value
        items = sorted((k, v) for k, v in merged.items() if v != NULL_VALUE)
        return items, (page_high if page_high < high else None)

    async def first_in_range(
        self, segment: str, low: bytes, high: bytes
    ) -> tuple[bytes, int] | None:
        """The durable attribute with the smallest key in ``[low, high]``, core keys included.

        None if there is none. Memory (values not yet in the index, or removals) wins over
        the index for the same key. For the time index (``time_index.py``): one ordered
        index step per call, plus a scan of the segment's cached values.
        """
        after = (int.from_bytes(low, "big") - 1).to_bytes(len(low), "big")
        while True:
            storage_name = self._metadata.get(segment).storage_name
            stored = await self._call(self._index.iterate, storage_name, after, 1)
            state = self._metadata.get(segment)
            if state.storage_name != storage_name:
                raise SegmentNotFoundError(f"segment {segment} was deleted during the lookup")
            candidates = [(k, v) for k, v in state.attributes.items() if low <= k <= high]
            indexed = stored[0] if stored and stored[0][0] <= high else None
            if indexed is not None and indexed[0] not in state.attributes:
                candidates.append(indexed)
            live = [(k, v) for k, v in candidates if v != NULL_VALUE]
            if live and (indexed is None or min(live)[0] <= indexed[0]):
                return min(live)
            if indexed is None:
                return None
            after = indexed[0]  # the index's first key was removed in memory: look past it

    # --- the storage writer's side -------------------------------------------------------------
    async def flush(self, force: bool = False) -> None:
        """Persist the segments' due dirty values, delete dead indexes, then evict clean values.

        The log needs no flush to be truncated: checkpoints carry dirty values.
        """
        now = self._clock.monotonic()
        for state in self._metadata.busy():  # the others have no dirty value
            await self._flush_segment(state, now, force)
        deleted, self._deleted = self._deleted, []
        for segment in deleted:
            await self._call(self._index.delete, segment)
        self._evict(force)

    async def _flush_segment(self, state: SegmentMetadata, now: float, force: bool) -> None:
        if not state.dirty_attributes or state.pending_deleted:
            state.attributes_dirty_since = None
            return
        if state.attributes_dirty_since is None:
            state.attributes_dirty_since = now
        due = (
            force
            or len(state.dirty_attributes) >= ATTRIBUTE_FLUSH_ENTRIES
            or now - state.attributes_dirty_since >= self._flush_interval_s
        )
        if not due or state.attribute_index_damaged:
            return  # a damaged index was reported once; its values stay in memory
        values = dict(state.dirty_attributes)
        try:
            root = await self._call(self._index.update, state.storage_name, values)
        except DataCorruptionError as e:  # that segment only: the others go on
            state.attribute_index_damaged = True
            log.error("container %d: %s", self._metadata.container_id, e)
            return
        if root is not None:
            await self._record_root(state.name, root)
        for key, value in values.items():
            if state.dirty_attributes.get(key) == value:
                del state.dirty_attributes[key]
        state.attributes_dirty_since = now if state.dirty_attributes else None

    def _evict(self, count: bool = False) -> None:
        """Drop clean cached attributes once the container holds more than the bound.

        Counting the cached values visits every segment, so it is done only when they may
        exceed the bound (or ``count``): values are cached by prefetches and by the changes
        the durable log applies, and the bound known after a count grows by both."""
        applied = self._metadata.values_applied
        if self._cached_max is not None and not count:
            self._cached_max += applied - self._applied_seen + self._loaded
            self._applied_seen, self._loaded = applied, 0
            if self._cached_max <= self._entries_max:
                return
        cached = sum(map(len, self._metadata.pending_attribute_maps()))
        self._applied_seen, self._loaded = applied, 0
        for state in self._metadata:
            excess = cached - self._entries_max
            if excess <= 0:
                break
            clean = [
                k
                for k, v in state.pending_attributes.items()
                if k not in state.dirty_attributes and state.attributes.get(k) == v
            ][:excess]
            for key in clean:
                del state.pending_attributes[key]
                state.attributes.pop(key, None)
            if clean:
                state.attributes_complete = False
            cached -= len(clean)
        self._cached_max = cached
