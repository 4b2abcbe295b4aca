"""The segment container: owns a set of segments and their ingestion pipeline.

Design (Pravega's ``StreamSegmentContainer`` and ``OperationProcessor``, seed 000):

* **Validate, then log, then apply.** A caller's operation is validated against
  the *pending* metadata view (which includes operations queued but not yet
  durable), which it then updates, so pipelined appends of one writer chain
  correctly. The operation is queued; the pump drains the queue into one
  durable log record per group commit (many operations, one fsync) and, once
  the record is durable, applies each operation to the *durable* view and the
  read index, in order, and completes its caller. Readers only see durable data.
* **Conditional appends.** An append carries ``(writer_id, expected, last,
  event_count)``: it succeeds only if the writer's attribute (16-byte key =
  writer id, 8-byte value = last event number) equals ``expected``; it then sets
  it to ``last`` and accumulates the segment's event count, atomically with the
  data. If ``expected`` is *ahead* of the attribute, the writer's previous block
  has not arrived yet (actor calls may be reordered), so the append waits up to
  ``append_reorder_wait_s`` for it before failing its condition.
* **Failures.** An operation that fails validation fails alone. A durable log
  failure (I/O error, fenced) leaves the pending view ahead of the durable one,
  so the container stops: every queued caller fails, ``on_fatal`` is called
  (the actor shell exits so Ray restarts it) and recovery rebuilds from the log.
  Nothing unacknowledged was ever visible; nothing acknowledged is lost.
* **Recovery** (:meth:`recover`, synchronous): take over the log (new epoch,
  fencing older owners), replay every record through the same ``_apply`` used
  live. The storage writer's ``ChunkAdded`` records tell which data is in Tier-2.

The container is not thread-safe: all methods run on one asyncio event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

from pravega_ray.constants import (
    ATTRIBUTE_FLUSH_ENTRIES,
    ATTRIBUTE_UPDATES_MAX,
    NO_EVENT_NUMBER,
    READ_BYTES_MAX,
    READ_WAIT_S_MAX,
    TRAFFIC_TIME_CONSTANT_S,
)
from pravega_ray.errors import (
    ConditionalAppendFailedError,
    ConditionalUpdateError,
    ContainerNotReadyError,
    DataCorruptionError,
    FencedError,
    IllegalStateError,
    InvalidArgumentError,
    NotFoundError,
    SegmentExistsError,
    SegmentNotFoundError,
    SegmentSealedError,
    SegmentTruncatedError,
)
from pravega_ray.invariant import invariant
from pravega_ray.logs.durable_data_log import DurableDataLog
from pravega_ray.naming import validate_segment_name
from pravega_ray.segmentstore import operations as ops
from pravega_ray.segmentstore.arguments import (
    INT64_MAX,
    UINT32_MAX,
    check_attribute_updates,
    check_attribute_values,
    check_count,
    check_data,
    check_int,
    check_offset,
    check_wait,
)
from pravega_ray.segmentstore.attribute_index import AttributeIndex
from pravega_ray.segmentstore.attributes import (
    CREATION_TIME,
    EVENT_COUNT,
    NULL_VALUE,
    AttributeUpdate,
    apply_updates,
    check_key,
    is_core_key,
)
from pravega_ray.segmentstore.btree_attribute_index import BTreeAttributeIndex
from pravega_ray.segmentstore.config import ContainerConfig
from pravega_ray.segmentstore.contracts import AppendResult, ReadResult, SegmentInfo
from pravega_ray.segmentstore.read_index import ChunkRef, ReadIndex
from pravega_ray.segmentstore.storage_writer import StorageWriter
from pravega_ray.segmentstore.traffic import RateTracker, SegmentTraffic
from pravega_ray.storage.chunk_storage import ChunkStorage
from pravega_ray.storage.fenced import FencedChunkStorage

log = logging.getLogger(__name__)
R = TypeVar("R")

ATTRIBUTE_KEY_BYTES = 16


@dataclass(slots=True)
class SegmentState:
    """Metadata of one segment. ``pending_*`` include queued, not yet durable operations."""

    name: str
    creation_time_ms: int
    role: str = "normal"
    start_offset: int = 0
    length: int = 0
    sealed: bool = False
    event_count: int = 0
    attributes: dict[bytes, int] = field(default_factory=dict)
    storage_length: int = 0
    pending_length: int = 0
    pending_sealed: bool = False
    pending_attributes: dict[bytes, int] = field(default_factory=dict)
    # Extended attributes are a cache over the attribute index: values applied but not yet
    # flushed to it are "dirty" (never evicted); "complete" means nothing is only in the index.
    dirty_attributes: dict[bytes, int] = field(default_factory=dict)
    attributes_complete: bool = True
    pending_event_count: int = 0
    pending_start_offset: int = 0
    pending_deleted: bool = False
    unflushed_since: float | None = None
    attributes_dirty_since: float | None = None  # when the storage writer first saw them dirty
    # Root of the newest attribute-index state known durable (-1: none recorded); recovery
    # hands it to the index, which refuses to serve an older state (lost or cut chunks).
    attribute_root: int = -1
    attribute_index_damaged: bool = False  # reported once; its flushes are skipped
    # (offset, log sequence) of each durable append not yet in Tier-2, oldest first: the log
    # may be truncated only below the oldest sequence over all segments.
    unflushed_appends: deque[tuple[int, int]] = field(default_factory=deque)
    traffic: RateTracker | None = None
    # Futures resolved whenever durable data or a seal is applied (tail reads wait on them).
    data_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    # Future resolved whenever a pending attribute changes (reordered appends wait on it).
    attribute_waiters: list[asyncio.Future[None]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RecoveryStats:
    records: int
    operations: int
    segments: int
    seconds: float


_BARRIER = object()


class SegmentRole(str, Enum):
    """What a segment is for; stored with it (table and transient behaviour build on it)."""

    NORMAL = "normal"
    TABLE = "table"
    TRANSACTION = "transaction"
    TRANSIENT = "transient"
    ATTRIBUTE = "attribute"


class SegmentContainer:
    def __init__(
        self,
        config: ContainerConfig,
        durable_log: DurableDataLog,
        storage: ChunkStorage,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        on_fatal: Callable[[BaseException], None] | None = None,
        attribute_index: AttributeIndex | None = None,
    ) -> None:
        self.config = config
        self._log = durable_log
        # Tier-2 creates and deletes stop once a successor claimed Tier-2 (storage/fenced.py).
        self._storage = FencedChunkStorage(storage, f"container-{config.container_id}")
        self._attribute_index = (
            attribute_index if attribute_index is not None else BTreeAttributeIndex(self._storage)
        )
        self._attribute_index_lock = asyncio.Lock()
        # One thread for attribute-index IO, drained by close(): a cancelled caller must not
        # leave a write running when a successor container opens the same attribute segments.
        self._index_executor = ThreadPoolExecutor(1, thread_name_prefix="attribute-index")
        self._monotonic = monotonic
        self._wall_clock_ms = wall_clock_ms
        self._on_fatal = on_fatal
        self._segments: dict[str, SegmentState] = {}
        self._read_index = ReadIndex(config.read_cache_bytes_max)
        self._queue: list[tuple[Any, asyncio.Future[Any]]] = []
        self._wake: asyncio.Event | None = None
        self._pump_task: asyncio.Task[None] | None = None
        self._storage_writer = StorageWriter(self)
        self._flushed_chunk_data: dict[str, bytes] = {}
        # The group commit being written; failed with the queue if the pump is stopped mid-write.
        self._batch: list[tuple[Any, asyncio.Future[Any]]] = []
        self._recovered = False
        self._damage: DataCorruptionError | None = None  # why recover() could not finish
        self._failure: BaseException | None = None
        self._closed = False
        # Checkpoints and truncation of the durable log.
        self._checkpoint_sequences: list[int] = []
        # Tier-2 chunks no longer referenced (truncated, deleted): the storage writer deletes them.
        self._dead_chunks: list[str] = []
        self._dead_attribute_segments: list[str] = []
        self._truncated_upto = 0
        self._log_bytes_since_checkpoint = 0
        self._last_checkpoint_time = monotonic()

    # --- lifecycle ---------------------------------------------------------------------------
    def recover(self) -> RecoveryStats:
        """Take over the durable log and rebuild every segment from it. Synchronous.

        Raises DataCorruptionError if the log is damaged (a record that fails its checks
        with acknowledged records after it, a damaged epoch file, a state that disagrees
        with a checkpoint); the container then stays down and every later call raises
        that error again, naming the damage, so it is never mistaken for a restart.
        """
        invariant(not self._recovered, "recover() called twice")
        try:
            return self._recover()
        except DataCorruptionError as e:
            self._damage = e
            raise

    def _recover(self) -> RecoveryStats:
        started = time.monotonic()
        self._log.initialize()
        self._storage.claim(self._log.epoch)  # before any Tier-2 write of this owner
        records = operations = 0
        for sequence, payload in self._log.read_all():
            decoded = list(ops.decode(payload))
            if records == 0:
                self._truncated_upto = sequence
                if sequence > 0 and not (
                    len(decoded) == 1 and isinstance(decoded[0], ops.MetadataCheckpoint)
                ):
                    raise DataCorruptionError(
                        f"container {self.config.container_id}: the log was truncated at "
                        f"{sequence} but does not start with a metadata checkpoint"
                    )
            records += 1
            for op in decoded:
                operations += 1
                self._apply(op, sequence, chunk_data=None)
        now = self._monotonic()
        for state in self._segments.values():
            state.pending_length = state.length
            state.pending_sealed = state.sealed
            state.pending_attributes = dict(state.attributes)
            state.attributes_complete = False  # the attribute index may hold more
            state.pending_event_count = state.event_count
            state.pending_start_offset = state.start_offset
            state.traffic = RateTracker(TRAFFIC_TIME_CONSTANT_S, now)
            if state.attribute_root >= 0:
                self._attribute_index.expect_root(state.name, state.attribute_root)
            # Paired check: every byte is in memory or in Tier-2 after replay.
            first_unflushed = self._read_index.first_unflushed_offset(state.name)
            invariant(
                state.storage_length
                == (first_unflushed if first_unflushed is not None else state.length),
                f"recovery of {state.name}: bytes [{state.storage_length}, "
                f"{first_unflushed if first_unflushed is not None else state.length}) are neither "
                "in Tier-2 nor in the log",
            )
        self._recovered = True
        stats = RecoveryStats(records, operations, len(self._segments), time.monotonic() - started)
        log.info(
            "container %d recovered: %d records, %d operations, %d segments in %.3fs (epoch %d)",
            self.config.container_id,
            records,
            operations,
            len(self._segments),
            stats.seconds,
            self._log.epoch,
        )
        return stats

    def _ensure_running(self) -> None:
        if self._damage is not None:
            raise DataCorruptionError(
                f"container {self.config.container_id} cannot start: {self._damage}",
                **{"container_id": self.config.container_id, **vars(self._damage)},
            )
        if self._failure is not None:
            raise ContainerNotReadyError(
                f"container {self.config.container_id} has failed: {self._failure!r}"
            )
        if not self._recovered or self._closed:
            raise ContainerNotReadyError(f"container {self.config.container_id} is not running")
        if self._pump_task is None:
            self._wake = asyncio.Event()
            self._pump_task = asyncio.get_running_loop().create_task(self._pump())
            self._storage_writer.start()

    async def close(self) -> None:
        """Stop the pump and the storage writer. Queued operations fail; the log stays."""
        self._closed = True
        self._storage_writer.stop()
        for state in self._segments.values():  # waiters re-check and find the container closed
            _wake_all(state.attribute_waiters)
            _wake_all(state.data_waiters)
        if self._pump_task is not None:
            self._pump_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump_task
        self._fail_queue(ContainerNotReadyError("container closed"))
        await asyncio.to_thread(self._index_executor.shutdown, wait=True)
        self._log.close()

    # --- public operations -------------------------------------------------------------------
    async def create_segment(self, segment: str, role: SegmentRole = SegmentRole.NORMAL) -> None:
        """Durably create an empty segment. Raises SegmentExistsError if it exists."""
        self._ensure_running()
        validate_segment_name(segment)
        try:
            role = SegmentRole(role)
        except ValueError:
            raise InvalidArgumentError(f"unknown segment role {role!r}") from None
        if segment in self._segments:
            raise SegmentExistsError(f"segment {segment} exists")
        now = self._wall_clock_ms()
        self._segments[segment] = SegmentState(
            segment,
            now,
            role=role.value,
            traffic=RateTracker(TRAFFIC_TIME_CONSTANT_S, self._monotonic()),
        )
        self._read_index.add_segment(segment)
        await self._submit(ops.CreateSegment(segment, now, role.value))

    async def setup_append(self, segment: str, writer_id: bytes) -> int:
        """The writer's last durable event number on ``segment`` (NO_EVENT_NUMBER if none).

        Waits until every operation queued before it is durable, so the answer
        covers all appends the writer has in flight to this container.
        """
        self._ensure_running()
        check_key(writer_id)
        await self._prefetch(self._segment(segment), [writer_id])
        await self._submit(_BARRIER)
        return self._segment(segment).attributes.get(writer_id, NO_EVENT_NUMBER)

    async def append(
        self,
        segment: str,
        writer_id: bytes,
        expected_last_event_number: int,
        last_event_number: int,
        event_count: int,
        data: bytes,
    ) -> AppendResult:
        """Durably append ``data`` if the writer's last event number is as expected.

        Returns once the block is in the durable log. Raises
        ConditionalAppendFailedError (nothing appended) if the condition does not
        hold, SegmentSealedError, SegmentNotFoundError, InvalidArgumentError.
        """
        self._ensure_running()
        check_key(writer_id)
        data = check_data(data, allow_empty=False)
        check_int("event_count", event_count, 1, UINT32_MAX)
        check_int("expected last event number", expected_last_event_number, NULL_VALUE, INT64_MAX)
        check_int("last event number", last_event_number, NULL_VALUE + 1, INT64_MAX)
        if last_event_number <= expected_last_event_number:
            raise InvalidArgumentError("an append block's last event number must exceed expected")
        deadline = self._monotonic() + self.config.append_reorder_wait_s
        while True:
            await self._prefetch(self._segment(segment), [writer_id])
            state = self._segment(segment)
            if state.pending_sealed:
                raise SegmentSealedError(f"segment {segment} is sealed")
            current = state.pending_attributes.get(writer_id, NO_EVENT_NUMBER)
            if current == expected_last_event_number:
                break
            remaining = deadline - self._monotonic()
            if current > expected_last_event_number or remaining <= 0:
                raise ConditionalAppendFailedError(
                    f"writer {writer_id.hex()} on {segment}: expected last event number "
                    f"{expected_last_event_number}, actual {current}",
                    expected=expected_last_event_number,
                    actual=current,
                )
            # A predecessor block has not arrived yet: wait for the attribute to move.
            waiter = asyncio.get_running_loop().create_future()
            state.attribute_waiters.append(waiter)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(waiter, remaining)
            self._ensure_running()
        offset = state.pending_length
        state.pending_length += len(data)
        state.pending_attributes[writer_id] = last_event_number
        state.pending_event_count += event_count
        _wake_all(state.attribute_waiters)
        await self._submit(
            ops.Append(segment, offset, data, ((writer_id, last_event_number),), event_count)
        )
        return AppendResult(offset, offset + len(data))

    async def append_conditional(
        self,
        segment: str,
        data: bytes,
        attribute_updates: tuple[AttributeUpdate, ...] = (),
        expected_offset: int | None = None,
        event_count: int = 0,
    ) -> AppendResult:
        """Durably append ``data`` and apply ``attribute_updates``, atomically.

        Fails alone, changing nothing, with ConditionalUpdateError if an
        attribute condition does not hold or the segment's length is not
        ``expected_offset`` (when given). Used by table segments and
        state synchronizers; event writers use :meth:`append`.
        """
        self._ensure_running()
        data = check_data(data, allow_empty=True)
        attribute_updates = check_attribute_updates(attribute_updates)
        check_int("event_count", event_count, 0, UINT32_MAX)
        if expected_offset is not None:
            check_offset("expected_offset", expected_offset)
        await self._prefetch(self._segment(segment), [u.key for u in attribute_updates])
        state = self._segment(segment)
        if state.pending_sealed:
            raise SegmentSealedError(f"segment {segment} is sealed")
        if expected_offset is not None and expected_offset != state.pending_length:
            raise ConditionalUpdateError(
                f"{segment}: expected offset {expected_offset}, length is {state.pending_length}",
                expected=expected_offset,
                actual=state.pending_length,
            )
        changed = apply_updates(state.pending_attributes, attribute_updates)
        offset = state.pending_length
        state.pending_length += len(data)
        state.pending_attributes.update(changed)
        state.pending_event_count += event_count
        _wake_all(state.attribute_waiters)
        await self._submit(ops.Append(segment, offset, data, tuple(changed.items()), event_count))
        return AppendResult(offset, offset + len(data))

    async def append_composed(
        self,
        segment: str,
        keys: list[bytes],
        compose: Callable[[int, Callable[[bytes], int]], tuple[bytes, dict[bytes, int]]],
    ) -> AppendResult:
        """Append bytes and set attributes that ``compose`` derives from the current state.

        The atomic read-modify-append that table segments build on. ``keys`` are
        prefetched; then, with nothing else running in between, ``compose(offset,
        current)`` is called with the offset the append will land at and a function
        giving an attribute's current (pending) value (``NULL_VALUE`` if absent; only
        ``keys`` may be asked for). It returns the data to append and the new
        attribute values (``NULL_VALUE`` removes); or raises, and then nothing
        changes and the error reaches the caller. Empty data with no attributes
        appends nothing and returns at once. Durable when it returns.
        In-process only (``compose`` is a callable).
        """
        self._ensure_running()
        check_count("attribute keys", keys)
        for key in keys:
            check_key(key)
        await self._prefetch(self._segment(segment), keys)
        state = self._segment(segment)
        if state.pending_sealed:
            raise SegmentSealedError(f"segment {segment} is sealed")
        allowed = set(keys)

        def current(key: bytes) -> int:
            invariant(key in allowed, "compose asked for an attribute it did not name")
            return state.pending_attributes.get(key, NULL_VALUE)

        offset = state.pending_length
        data, changed = compose(offset, current)
        data = check_data(data, allow_empty=True)
        check_attribute_values(changed)
        for key in changed:
            check_key(key)
        if not data and not changed:
            return AppendResult(offset, offset)
        state.pending_length += len(data)
        state.pending_attributes.update(changed)
        _wake_all(state.attribute_waiters)
        await self._submit(ops.Append(segment, offset, data, tuple(changed.items()), 0))
        return AppendResult(offset, offset + len(data))

    async def iterate_attributes(
        self, segment: str, after: bytes | None, limit: int
    ) -> tuple[list[tuple[bytes, int]], bytes | None]:
        """A page of the segment's durable extended attributes in key order.

        Returns ``(items, cursor)``: up to ``limit`` ``(key, value)`` pairs with
        ``after < key`` (from the first key if ``after`` is None), and the cursor to
        pass as ``after`` for the next page, or None when the iteration is done. A
        page may hold fewer than ``limit`` items (even none) before the end.
        Values not yet flushed to the attribute index come from memory, so the
        result is what :meth:`get_attributes` would return for those keys.
        """
        self._ensure_running()
        if after is not None:
            check_key(after, allow_core=True)
        check_int("limit", limit, 1, ATTRIBUTE_UPDATES_MAX)
        self._segment(segment)  # SegmentNotFoundError before any index IO
        async with self._attribute_index_lock:
            stored = await self._index_call(self._attribute_index.iterate, segment, after, limit)
        state = self._segment(segment)  # again: it may have been deleted meanwhile
        high = stored[-1][0] if len(stored) == limit else None  # memory may not go past it
        merged = dict(stored)
        for key, value in state.attributes.items():
            if (after is None or key > after) and (high is None or key <= high):
                merged[key] = value
        items = sorted((k, v) for k, v in merged.items() if v != NULL_VALUE and not is_core_key(k))
        if high is None:
            return items[:limit], (items[limit - 1][0] if len(items) > limit else None)
        return items[:limit], (items[limit - 1][0] if len(items) >= limit else high)

    async def update_attributes(self, segment: str, updates: tuple[AttributeUpdate, ...]) -> None:
        """Durably apply attribute updates, atomically (ConditionalUpdateError changes nothing)."""
        self._ensure_running()
        updates = check_attribute_updates(updates)
        await self._prefetch(self._segment(segment), [u.key for u in updates])
        state = self._segment(segment)
        changed = apply_updates(state.pending_attributes, updates)
        if not changed:
            return
        state.pending_attributes.update(changed)
        _wake_all(state.attribute_waiters)
        await self._submit(ops.UpdateAttributes(segment, tuple(changed.items())))

    async def get_attributes(self, segment: str, keys: list[bytes]) -> dict[bytes, int]:
        """Durable values of ``keys`` (absent ones are left out); core keys included."""
        self._ensure_running()
        check_count("attribute keys", keys)
        for key in keys:
            check_key(key, allow_core=True)
        core_keys = (EVENT_COUNT, CREATION_TIME)
        await self._prefetch(self._segment(segment), [k for k in keys if k not in core_keys])
        state = self._segment(segment)
        core = {EVENT_COUNT: state.event_count, CREATION_TIME: state.creation_time_ms}
        result = {}
        for key in keys:
            value = core.get(key, state.attributes.get(key))
            if value is not None and value != NULL_VALUE:
                result[key] = value
        return result

    async def _index_call(self, function: Callable[..., R], *args: Any) -> R:
        """Run an attribute-index call on the index thread (callers hold the index lock)."""
        self._ensure_running()  # close() shuts the thread down
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._index_executor, function, *args)
        except FencedError as e:
            raise self.fenced(e) from e

    async def _prefetch(self, state: SegmentState, keys: list[bytes]) -> None:
        """Load the durable values of ``keys`` missing from memory from the attribute index.

        Runs before validation (seed 000: the pipeline never waits on Tier-2). A
        value loaded concurrently by an operation of the pipeline wins: it is newer.
        On return every key is in ``pending_attributes`` (callers must not await
        before using them): the storage writer may evict clean values while this
        waits for the index, so it loops until none is missing.
        """
        while not state.attributes_complete:
            missing = [k for k in keys if k not in state.pending_attributes]
            if not missing:
                return
            async with self._attribute_index_lock:
                found = await self._index_call(self._attribute_index.get, state.name, missing)
            for key in missing:
                if key not in state.pending_attributes:
                    value = found.get(key, NULL_VALUE)
                    state.pending_attributes[key] = value
                    state.attributes.setdefault(key, value)

    async def truncate(self, segment: str, offset: int) -> None:
        """Durably drop the bytes below ``offset``; reads below it then raise SegmentTruncatedError.

        Idempotent for an offset at or below the current start. Raises
        InvalidArgumentError for an offset beyond the segment's length.
        """
        self._ensure_running()
        check_offset("offset", offset)
        state = self._segment(segment)
        if offset > state.pending_length:
            raise InvalidArgumentError(
                f"cannot truncate {segment} at {offset}: its length is {state.pending_length}"
            )
        if offset <= state.pending_start_offset:
            await self._submit(_BARRIER)
            return
        state.pending_start_offset = offset
        await self._submit(ops.TruncateSegment(segment, offset))

    async def merge(self, target: str, source: str) -> int:
        """Atomically move sealed ``source``'s bytes to the end of ``target``; returns its length.

        Metadata only (the source's Tier-2 chunks join the target's) when both
        are wholly in Tier-2 after a flush; otherwise the source's bytes are
        logged with the merge. Raises IllegalStateError if the source is not
        sealed or is truncated, SegmentSealedError if the target is sealed,
        SegmentNotFoundError, InvalidArgumentError for merging a segment into itself.
        """
        self._ensure_running()
        if target == source:
            raise InvalidArgumentError("a segment cannot be merged into itself")
        self._merge_states(target, source)
        try:
            await self._storage_writer.flush_all()  # most merges then need no copying
        except ContainerNotReadyError:
            raise  # fenced or closed meanwhile
        except Exception as e:  # Tier-2 trouble must not block a merge: copy instead
            log.warning("flush before merging %s failed (%r); merging by copy", source, e)
        t, s = self._merge_states(target, source)
        data: bytes | None = None
        if not (
            s.storage_length == s.length == s.pending_length
            and t.storage_length == t.length == t.pending_length
        ):
            data = await self._read_range(s, 0, s.pending_length)
            t, s = self._merge_states(target, source)  # re-check after the await
        offset, length = t.pending_length, s.pending_length
        t.pending_length += length
        t.pending_event_count += s.pending_event_count
        s.pending_deleted = True
        _wake_all(s.attribute_waiters)
        await self._submit(ops.MergeSegment(target, source, offset, length, data))
        return offset + length

    def _merge_states(self, target: str, source: str) -> tuple[SegmentState, SegmentState]:
        t, s = self._segment(target), self._segment(source)
        if not s.pending_sealed:
            raise IllegalStateError(f"cannot merge {source}: it is not sealed")
        if s.pending_start_offset > 0:
            raise IllegalStateError(f"cannot merge {source}: it is truncated")
        if t.pending_sealed:
            raise SegmentSealedError(f"cannot merge into {target}: it is sealed")
        return t, s

    async def read_range(self, segment: str, offset: int, length: int) -> bytes:
        """Exactly the durable bytes ``[offset, offset + length)`` of ``segment``.

        Raises SegmentTruncatedError below the start offset and InvalidArgumentError
        for a range past the durable length.
        """
        self._ensure_running()
        check_offset("offset", offset)
        check_offset("length", length)
        state = self._segment(segment)
        if offset + length > state.length:
            raise InvalidArgumentError(
                f"range [{offset}, {offset + length}) is outside {segment} (length {state.length})"
            )
        _check_not_truncated(state, offset)
        return await self._read_range(state, offset, offset + length)

    def segment_role(self, segment: str) -> str:
        """The role ``segment`` was created with (a SegmentRole value)."""
        self._ensure_running()
        return self._segment(segment).role

    async def _read_range(self, state: SegmentState, offset: int, end: int) -> bytes:
        parts = []
        while offset < end:
            piece = await self._read_available(state, offset, end - offset)
            invariant(piece, f"no bytes readable at {offset} of {state.name}")
            parts.append(piece)
            offset += len(piece)
        return b"".join(parts)

    async def delete_segment(self, segment: str) -> None:
        """Durably delete the segment and, in the background, its Tier-2 chunks."""
        self._ensure_running()
        state = self._segment(segment)
        state.pending_deleted = True  # later operations find it gone; _apply removes it
        _wake_all(state.attribute_waiters)
        await self._submit(ops.DeleteSegment(segment))

    async def seal(self, segment: str) -> int:
        """Durably seal ``segment``; returns its final length. Idempotent."""
        self._ensure_running()
        state = self._segment(segment)
        if not state.pending_sealed:
            state.pending_sealed = True
            _wake_all(state.attribute_waiters)
            await self._submit(ops.Seal(segment, state.pending_length))
        else:
            await self._submit(_BARRIER)
        return state.length

    async def read(self, segment: str, offset: int, max_bytes: int, wait_s: float) -> ReadResult:
        """Read durable bytes from ``offset``.

        Returns at once when data is available (up to ``max_bytes``, possibly
        fewer, e.g. at a chunk boundary). At the tail it waits up to ``wait_s``
        for data or a seal; then it returns empty data. ``end_of_segment`` is set
        when the segment is sealed and the read reaches its end. Raises
        InvalidArgumentError for an offset beyond the segment's length.
        """
        self._ensure_running()
        check_offset("offset", offset)
        check_int("max_bytes", max_bytes, 1, INT64_MAX)
        wait_s = check_wait("wait_s", wait_s)
        state = self._segment(segment)
        max_bytes = min(max_bytes, READ_BYTES_MAX)
        if offset > state.length:
            raise InvalidArgumentError(
                f"read of {segment} at {offset} is past its length {state.length}"
            )
        _check_not_truncated(state, offset)
        if offset == state.length and not state.sealed and wait_s > 0:
            waiter = asyncio.get_running_loop().create_future()
            state.data_waiters.append(waiter)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(waiter, min(wait_s, READ_WAIT_S_MAX))
        if offset == state.length:
            return ReadResult(offset, b"", state.sealed, state.length)
        data = await self._read_available(state, offset, max_bytes)
        end = offset + len(data)
        return ReadResult(offset, data, state.sealed and end == state.length, state.length)

    async def get_info(self, segment: str) -> SegmentInfo:
        self._ensure_running()
        s = self._segment(segment)
        return SegmentInfo(
            s.name,
            s.length,
            s.start_offset,
            s.sealed,
            s.event_count,
            s.storage_length,
            s.creation_time_ms,
        )

    async def list_segments(self) -> list[str]:
        self._ensure_running()
        return sorted(self._segments)

    async def flush_to_storage(self) -> None:
        """Flush every segment's durable data to Tier-2 now (tests, shutdown)."""
        self._ensure_running()
        await self._storage_writer.flush_all()

    # --- internals ---------------------------------------------------------------------------
    def _segment(self, segment: str) -> SegmentState:
        state = self._segments.get(segment)
        if state is None or state.pending_deleted:
            validate_segment_name(segment)
            raise SegmentNotFoundError(f"segment {segment} does not exist")
        return state

    async def _read_available(self, state: SegmentState, offset: int, max_bytes: int) -> bytes:
        chunk = self._read_index.chunk_for(state.name, offset)
        if chunk is None:
            return self._read_index.read_unflushed(state.name, offset, max_bytes)
        data = self._read_index.cached_chunk(chunk.name)
        if data is None:
            data = await asyncio.to_thread(_read_chunk, self._storage, state.name, chunk)
            self._read_index.put_chunk(chunk.name, data)
        start = offset - chunk.offset
        return data[start : start + max_bytes]

    async def _submit(self, op: Any) -> Any:
        # A caller may reach here after awaiting something while the container closed or
        # failed: its operation would never be written, so it fails now instead of hanging.
        self._ensure_running()
        invariant(self._wake is not None, "pump not started")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((op, future))
        self._wake.set()  # type: ignore[union-attr]
        return await future

    async def _pump(self) -> None:
        """Drain the queue into group commits; apply and complete in order once durable.

        Any error here (log write, encoding, a failed invariant while applying)
        leaves the durable state unknown or suspect, so the container stops.
        """
        assert self._wake is not None
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._queue:
                    if self.config.group_commit_delay_s and not self._group_commit_full():
                        await asyncio.sleep(self.config.group_commit_delay_s)
                    await self._commit(self._take_batch())
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            self._fail(e, self._batch)

    async def _commit(self, batch: list[tuple[Any, asyncio.Future[Any]]]) -> None:
        """One group commit: one durable log record, then apply and complete in order."""
        self._batch = batch
        to_log = [op for op, _ in batch if op is not _BARRIER]
        sequence = -1
        if to_log:
            payload = ops.encode(to_log)
            self._log_bytes_since_checkpoint += len(payload)
            sequence = await asyncio.to_thread(self._log.append, payload)
        for op, _ in batch:
            if op is not _BARRIER:
                chunk_data = self._flushed_chunk_data.get(getattr(op, "chunk", ""))
                self._apply(op, sequence, chunk_data)
        for _, future in batch:
            if not future.done():
                future.set_result(None)
        self._batch = []

    def _group_commit_full(self) -> bool:
        total = sum(0 if op is _BARRIER else ops.encoded_size(op) for op, _ in self._queue)
        return (
            total >= self.config.group_commit_bytes_max
            or len(self._queue) >= self.config.group_commit_operations_max
        )

    def _take_batch(self) -> list[tuple[Any, asyncio.Future[Any]]]:
        total = 0
        count = 0
        for op, _ in self._queue:
            # A checkpoint travels alone in its record, so the log can be truncated right at it.
            if isinstance(op, ops.MetadataCheckpoint):
                count = count or 1
                break
            size = 0 if op is _BARRIER else ops.encoded_size(op)
            if count and (
                total + size > self.config.group_commit_bytes_max
                or count >= self.config.group_commit_operations_max
            ):
                break
            total += size
            count += 1
        batch, self._queue = self._queue[:count], self._queue[count:]
        return batch

    def _fail(self, error: BaseException, batch: list[tuple[Any, asyncio.Future[Any]]]) -> None:
        log.error("container %d: durable log failed, stopping: %r", self.config.container_id, error)
        self._failure = error
        unavailable = ContainerNotReadyError(f"durable log failed: {error!r}")
        for _, future in batch:
            if not future.done():
                future.set_exception(unavailable)
        self._fail_queue(unavailable)
        self._storage_writer.stop()
        if self._on_fatal is not None:
            self._on_fatal(error)

    def fenced(self, error: FencedError) -> ContainerNotReadyError:
        """A newer owner took over (Tier-1 or Tier-2): stop as a failed log does.

        Returns the error to raise to the caller: outcome unknown, retry on the successor.
        """
        if self._failure is None:
            self._fail(error, [])
        return ContainerNotReadyError(f"container {self.config.container_id} was fenced: {error}")

    def _fail_queue(self, error: BaseException) -> None:
        queue, self._queue = self._batch + self._queue, []
        self._batch = []
        for _, future in queue:
            if not future.done():
                future.set_exception(error)

    def _apply(self, op: ops.Operation, sequence: int, chunk_data: bytes | None) -> None:
        """Apply a durable operation (in log record ``sequence``) to the durable view.

        Shared by live commits and recovery, so both build the same state.
        """
        if isinstance(op, ops.Append):
            state = self._segments[op.segment]
            invariant(
                op.offset == state.length,
                f"append to {op.segment} at {op.offset} but its length is {state.length}",
            )
            if op.data:
                self._read_index.append(op.segment, op.offset, op.data)
            state.length += len(op.data)
            state.event_count += op.event_count
            state.attributes.update(op.attributes)
            state.dirty_attributes.update(op.attributes)
            if op.data:
                state.unflushed_appends.append((op.offset, sequence))
            if op.data and state.unflushed_since is None:
                state.unflushed_since = self._monotonic()
            if state.traffic is not None:
                state.traffic.record(op.event_count, len(op.data), self._monotonic())
            _wake_all(state.data_waiters)
        elif isinstance(op, ops.CreateSegment):
            if op.segment not in self._segments:  # live creates made the state already
                self._segments[op.segment] = SegmentState(
                    op.segment, op.creation_time_ms, role=op.role
                )
                self._read_index.add_segment(op.segment)
        elif isinstance(op, ops.MergeSegment):
            self._apply_merge(op, sequence)
        elif isinstance(op, ops.Seal):
            state = self._segments[op.segment]
            invariant(op.length == state.length, f"seal of {op.segment} at a wrong length")
            state.sealed = True
            _wake_all(state.data_waiters)
        elif isinstance(op, ops.ChunkAdded):
            state = self._segments[op.segment]
            invariant(op.offset == state.storage_length, f"chunk gap in {op.segment}")
            self._read_index.chunk_added(
                op.segment, ChunkRef(op.offset, op.length, op.chunk, op.crc), chunk_data
            )
            state.storage_length = op.offset + op.length
            while state.unflushed_appends and state.unflushed_appends[0][0] < state.storage_length:
                state.unflushed_appends.popleft()
            state.unflushed_since = (
                None if state.storage_length == state.length else self._monotonic()
            )
        elif isinstance(op, ops.MetadataCheckpoint):
            self._apply_checkpoint(op, sequence)
        elif isinstance(op, ops.UpdateAttributes):
            state = self._segments[op.segment]
            state.attributes.update(op.attributes)
            state.dirty_attributes.update(op.attributes)
        elif isinstance(op, ops.TruncateSegment):
            state = self._segments[op.segment]
            invariant(op.offset <= state.length, f"truncation of {op.segment} past its end")
            state.start_offset = max(state.start_offset, op.offset)
            self._dead_chunks += self._read_index.truncate(op.segment, state.start_offset)
            _wake_all(state.data_waiters)
        elif isinstance(op, ops.AttributeIndexUpdated):
            state = self._segments.get(op.segment)  # a delete may have been applied first
            if state is not None:
                state.attribute_root = max(state.attribute_root, op.root)
        elif isinstance(op, ops.DeleteSegment):
            state = self._segments.pop(op.segment)
            self._dead_chunks += self._read_index.remove_segment(op.segment)
            self._dead_attribute_segments.append(op.segment)
            _wake_all(state.data_waiters)
            _wake_all(state.attribute_waiters)
        else:  # pragma: no cover
            raise TypeError(f"unknown operation {op!r}")

    def _apply_merge(self, op: ops.MergeSegment, sequence: int) -> None:
        target = self._segments[op.target]
        source = self._segments.pop(op.source)
        self._dead_attribute_segments.append(op.source)
        invariant(op.offset == target.length, f"merge into {op.target} at a wrong offset")
        invariant(op.length == source.length, f"merge of {op.source} with a wrong length")
        if op.data is None:
            invariant(
                target.storage_length == target.length and source.storage_length == source.length,
                f"metadata-only merge of {op.source} with data outside Tier-2",
            )
            for chunk in self._read_index.chunks(op.source):
                moved = ChunkRef(op.offset + chunk.offset, chunk.length, chunk.name, chunk.crc)
                self._read_index.chunk_added(op.target, moved, None)
            self._read_index.remove_segment(op.source)  # its chunks now belong to the target
            target.storage_length += op.length
        else:
            invariant(len(op.data) == op.length, "merge data of a wrong length")
            if op.data:
                self._read_index.append(op.target, op.offset, op.data)
                target.unflushed_appends.append((op.offset, sequence))
                if target.unflushed_since is None:
                    target.unflushed_since = self._monotonic()
            self._dead_chunks += self._read_index.remove_segment(op.source)
        target.length += op.length
        target.event_count += source.event_count
        _wake_all(target.data_waiters)
        _wake_all(source.data_waiters)
        _wake_all(source.attribute_waiters)

    # --- checkpoints and log truncation ------------------------------------------------------
    def _snapshot(self) -> tuple[dict[str, Any], ...]:
        """The metadata as it will be once everything queued so far is applied.

        Valid only while no ChunkAdded is queued (the storage writer calls it
        under its lock, after its flushes completed).
        """
        return tuple(
            {
                "n": s.name,
                "t": s.creation_time_ms,
                "so": s.pending_start_offset,
                "r": s.role,
                "l": s.pending_length,
                "s": s.pending_sealed,
                "e": s.pending_event_count,
                # Only values the attribute index may lack; the rest it serves after recovery.
                "a": {
                    k.hex(): v
                    for k, v in s.pending_attributes.items()
                    if k in s.dirty_attributes or s.attributes.get(k) != v
                },
                "sl": s.storage_length,
                "ar": s.attribute_root,
                "c": [
                    [c.offset, c.length, c.name, c.crc] for c in self._read_index.chunks(s.name)
                ],
            }
            for s in self._segments.values()
            if not s.pending_deleted
        )

    def _apply_checkpoint(self, op: ops.MetadataCheckpoint, sequence: int) -> None:
        if not self._recovered and not self._segments and sequence == self._truncated_upto:
            # Recovery of a truncated log starts here.
            for entry in op.segments:
                state = SegmentState(
                    entry["n"],
                    entry["t"],
                    role=entry["r"],
                    start_offset=entry["so"],
                    length=entry["l"],
                    sealed=entry["s"],
                    event_count=entry["e"],
                    storage_length=entry["sl"],
                    attribute_root=entry.get("ar", -1),
                )
                state.attributes = {bytes.fromhex(k): v for k, v in entry["a"].items()}
                state.dirty_attributes = dict(state.attributes)
                self._segments[state.name] = state
                self._read_index.add_segment(state.name)
                for offset, length, name, *crc in entry["c"]:
                    chunk = ChunkRef(offset, length, name, crc[0] if crc else None)
                    self._read_index.chunk_added(state.name, chunk, None)
                if state.storage_length < state.length:
                    # Flushed by ChunkAdded records after this checkpoint (else no truncation).
                    state.unflushed_appends.append((state.storage_length, sequence))
        else:
            # Paired check: the state built by replay equals what the checkpoint recorded.
            for entry in op.segments:
                state = self._segments.get(entry["n"])
                invariant(
                    state is not None
                    and (state.length, state.sealed, state.event_count, state.storage_length)
                    == (entry["l"], entry["s"], entry["e"], entry["sl"]),
                    f"container {self.config.container_id}: state of {entry['n']} differs from "
                    f"its checkpoint at {sequence}",
                )
        self._checkpoint_sequences.append(sequence)
        self._log_bytes_since_checkpoint = 0
        self._last_checkpoint_time = self._monotonic()

    def _truncation_point(self) -> int:
        """Highest checkpoint below which every append is in Tier-2 (0 if none)."""
        oldest_unflushed = min(
            (s.unflushed_appends[0][1] for s in self._segments.values() if s.unflushed_appends),
            default=None,
        )
        candidates = [
            c
            for c in self._checkpoint_sequences
            if oldest_unflushed is None or c <= oldest_unflushed
        ]
        return max(candidates, default=0)

    async def _checkpoint_and_truncate(self, force: bool) -> None:
        """Write a checkpoint if due, then truncate the log as far as Tier-2 allows."""
        due = self._log_bytes_since_checkpoint >= self.config.checkpoint_log_bytes or (
            self._log_bytes_since_checkpoint > 0
            and self._monotonic() - self._last_checkpoint_time >= self.config.checkpoint_interval_s
        )
        if force or due:
            await self._submit(ops.MetadataCheckpoint(self._snapshot()))
        point = self._truncation_point()
        if point > self._truncated_upto:
            await asyncio.to_thread(self._log.truncate, point)
            self._truncated_upto = point
            self._checkpoint_sequences = [c for c in self._checkpoint_sequences if c >= point]

    async def checkpoint(self) -> int:
        """Flush everything to Tier-2, write a checkpoint and truncate the log (tests, shutdown).

        Returns the log's truncation point.
        """
        self._ensure_running()
        await self._storage_writer.flush_all(checkpoint=True)
        return self._truncated_upto

    def get_traffic(self) -> list[SegmentTraffic]:
        """Smoothed events/s and bytes/s of every segment (for auto-scaling)."""
        now = self._monotonic()
        result = []
        for state in self._segments.values():
            events, size = state.traffic.rates(now) if state.traffic else (0.0, 0.0)
            result.append(SegmentTraffic(state.name, events, size))
        return result

    @property
    def truncated_upto(self) -> int:
        return self._truncated_upto

    # --- hooks for the storage writer --------------------------------------------------------
    async def _flush_attributes(self, force: bool = False) -> None:
        """Persist dirty attribute values (coalesced: latest wins), then evict clean ones.

        A segment's batch goes to the index when ``force``, when it holds
        ``ATTRIBUTE_FLUSH_ENTRIES`` values, or when its oldest is
        ``storage_flush_interval_s`` old: a busy writer's event number changes on
        every append but costs one index update per interval. The log needs no
        flush to be truncated (checkpoints carry dirty values).
        """
        now = self._monotonic()
        for state in list(self._segments.values()):
            if not state.dirty_attributes or state.pending_deleted:
                state.attributes_dirty_since = None
                continue
            if state.attributes_dirty_since is None:
                state.attributes_dirty_since = now
            due = (
                force
                or len(state.dirty_attributes) >= ATTRIBUTE_FLUSH_ENTRIES
                or now - state.attributes_dirty_since >= self.config.storage_flush_interval_s
            )
            if not due:
                continue
            if state.attribute_index_damaged:
                continue  # reported once; the values stay in memory and in checkpoints
            values = dict(state.dirty_attributes)
            try:
                async with self._attribute_index_lock:
                    root = await self._index_call(self._attribute_index.update, state.name, values)
            except DataCorruptionError as e:  # that segment only: the others go on
                state.attribute_index_damaged = True
                log.error("container %d: %s", self.config.container_id, e)
                continue
            if root is not None:
                await self._submit(ops.AttributeIndexUpdated(state.name, root))
            for key, value in values.items():
                if state.dirty_attributes.get(key) == value:
                    del state.dirty_attributes[key]
            state.attributes_dirty_since = now if state.dirty_attributes else None
        dead, self._dead_attribute_segments = self._dead_attribute_segments, []
        for segment in dead:
            async with self._attribute_index_lock:
                await self._index_call(self._attribute_index.delete, segment)
        self._evict_attributes()

    def _evict_attributes(self) -> None:
        """Drop clean cached attributes once the container holds more than the bound."""
        cached = sum(len(s.pending_attributes) for s in self._segments.values())
        excess = cached - self.config.attribute_cache_entries_max
        for state in self._segments.values():
            if excess <= 0:
                return
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
            excess -= len(clean)

    def _flush_candidates(self, force: bool) -> list[SegmentState]:
        now = self._monotonic()
        due = []
        for state in self._segments.values():
            pending = state.length - state.storage_length
            if pending <= 0:
                continue
            old = (
                state.unflushed_since is not None
                and now - state.unflushed_since >= self.config.storage_flush_interval_s
            )
            if force or old or state.sealed or pending >= self.config.storage_flush_bytes:
                due.append(state)
        return due

    async def _submit_chunk_added(self, op: ops.ChunkAdded, data: bytes) -> None:
        # The bytes are not logged; they wait here so the read cache keeps them after the flush.
        self._flushed_chunk_data[op.chunk] = data
        try:
            await self._submit(op)
        finally:
            self._flushed_chunk_data.pop(op.chunk, None)


def _read_chunk(storage: ChunkStorage, segment: str, chunk: ChunkRef) -> bytes:
    """A whole Tier-2 chunk of ``segment``, checked against its recorded length and CRC.

    Raises DataCorruptionError naming the chunk and the bytes of the segment it holds if
    the chunk is missing, shorter or longer than recorded, or fails its checksum.
    """
    where = f"Tier-2 chunk {chunk.name!r} (bytes [{chunk.offset}, {chunk.end}) of {segment})"
    try:
        data = storage.read(chunk.name, 0, chunk.length + 1)
    except NotFoundError:
        raise DataCorruptionError(
            f"{where} is missing", segment=segment, chunk=chunk.name, offset=chunk.offset
        ) from None
    if len(data) != chunk.length:
        raise DataCorruptionError(
            f"{where} holds {len(data)}{'+' if len(data) > chunk.length else ''} bytes, "
            f"{chunk.length} were written",
            segment=segment,
            chunk=chunk.name,
            offset=chunk.offset,
        )
    if chunk.crc is not None and zlib.crc32(data) != chunk.crc:
        raise DataCorruptionError(
            f"{where} fails its checksum", segment=segment, chunk=chunk.name, offset=chunk.offset
        )
    return data


def _wake_all(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)
    waiters.clear()


def _check_not_truncated(state: SegmentState, offset: int) -> None:
    if offset < state.start_offset:
        raise SegmentTruncatedError(
            f"{state.name} is truncated at {state.start_offset}; cannot read at {offset}",
            start_offset=state.start_offset,
        )
