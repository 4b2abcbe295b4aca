"""The segment container: owns a set of segments; wires the parts that serve them.

Pravega's ``StreamSegmentContainer``. It implements the segment store's service surface
(:class:`~pravega_ray.contracts.segment_store_service.SegmentStoreService`); only
:func:`~pravega_ray.segmentstore.builder.build_container` builds it. Its parts, each in a file
named by its Pravega role (map in docs/design.md): ``container_metadata``, ``durable_log``
with its ``operation_processor``, ``read_index`` with each segment's ``chunk_layout``,
``attribute_cache``, ``storage_writer``, ``table_segment``, ``auto_scale`` (if built so).

How an operation goes (docs/design.md, "The append path"):

* **Validate, then log, then apply.** A caller's operation is validated against the *pending*
  metadata view, which it then updates, so pipelined appends of one writer chain correctly.
  The durable log writes it in a group commit and, once durable, applies it to the *durable*
  view and the read index and completes its caller. Readers only see durable data.
* **Conditional appends.** An append carries ``(writer_id, expected, last, event_count)``: it
  succeeds only if the writer's attribute (16-byte key = writer id, 8-byte value = last event
  number) equals ``expected``; it then sets it to ``last`` and accumulates the segment's event
  count, atomically with the data. If ``expected`` is *ahead* of the attribute, the writer's
  previous block has not arrived yet (actor calls may be reordered), so the append waits up to
  ``append_reorder_wait_s`` for it before failing its condition.
* **Failures.** An operation that fails validation fails alone. A durable log failure (I/O
  error, fenced) leaves the pending view ahead of the durable one, so the container stops:
  every queued caller fails, ``on_fatal`` is called (the actor shell exits so Ray restarts it)
  and recovery rebuilds from the log. Nothing unacknowledged was ever visible; nothing
  acknowledged is lost.
* **Recovery** (:meth:`SegmentContainer.recover`, synchronous): take the log over (new epoch,
  fencing older owners), claim Tier-2 for that epoch, replay every record.

Not thread-safe: all methods run on one asyncio event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from pravega_ray.constants import (
    ATTRIBUTE_UPDATES_MAX,
    NO_EVENT_NUMBER,
    TRAFFIC_TIME_CONSTANT_S,
)
from pravega_ray.contracts.arguments import (
    INT64_MAX,
    UINT32_MAX,
    check_append,
    check_attribute_updates,
    check_attribute_values,
    check_count,
    check_data,
    check_int,
    check_offset,
    check_wait,
)
from pravega_ray.contracts.attributes import (
    NULL_VALUE,
    AttributeUpdate,
    apply_updates,
    check_key,
)
from pravega_ray.contracts.segment_store import (
    AppendResult,
    ReadResult,
    SegmentInfo,
    SegmentRole,
    SegmentTraffic,
    TableEntry,
    TableUpdate,
    TableUpdateResult,
)
from pravega_ray.errors import (
    ConditionalAppendFailedError,
    ConditionalUpdateError,
    ContainerNotReadyError,
    DataCorruptionError,
    FencedError,
    InvalidArgumentError,
    PravegaError,
    SegmentExistsError,
    SegmentNotFoundError,
)
from pravega_ray.invariant import invariant
from pravega_ray.logs.durable_data_log import DurableDataLog
from pravega_ray.naming import validate_segment_name
from pravega_ray.segmentstore import operations as ops
from pravega_ray.segmentstore.attribute_cache import AttributeCache
from pravega_ray.segmentstore.attribute_index import AttributeIndex
from pravega_ray.segmentstore.auto_scale import NO_AUTO_SCALER, ContainerPart
from pravega_ray.segmentstore.config import ContainerConfig
from pravega_ray.segmentstore.container_metadata import (
    ContainerMetadata,
    SegmentMetadata,
    wait_on,
    wake_all,
)
from pravega_ray.segmentstore.durable_log import DurableLog, RecoveryStats
from pravega_ray.segmentstore.read_index import ReadIndex
from pravega_ray.segmentstore.segment_merger import SegmentMerger, check_merge_jobs
from pravega_ray.segmentstore.storage_writer import FlushPolicy, StorageWriter
from pravega_ray.segmentstore.table_compactor import TableCompactor
from pravega_ray.segmentstore.table_segment import TableSegments
from pravega_ray.segmentstore.table_watches import WATCH_WAIT_S_MAX, TableWatches, check_holder
from pravega_ray.segmentstore.throttle import Tier1Throttle
from pravega_ray.segmentstore.time_index import (
    TimeIndex,
    TimeIndexCalls,
    index_entries,
    index_keys,
)
from pravega_ray.segmentstore.traffic import RateTracker
from pravega_ray.segmentstore.transient_segments import TransientSegments
from pravega_ray.storage.fenced import FencedChunkStorage
from pravega_ray.timing import Clock, Scheduler

__all__ = ["RecoveryStats", "SegmentContainer"]

log = logging.getLogger(__name__)


class SegmentContainer(TimeIndexCalls):
    """One container's segments. Built by ``builder.build_container``; see the module docstring."""

    def __init__(
        self,
        config: ContainerConfig,
        data_log: DurableDataLog,
        storage: FencedChunkStorage,
        attribute_index: AttributeIndex,
        *,
        clock: Clock,
        scheduler: Scheduler,
        on_fatal: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self._storage = storage
        self._on_fatal = on_fatal
        self._recovered = False
        self._closed = False
        self._damage: DataCorruptionError | None = None  # why recover() could not finish
        self._failure: BaseException | None = None
        self._creates = 0  # segments this owner created (their incarnations)
        self.metadata = ContainerMetadata(config.container_id)
        cache_bytes = config.read_cache_bytes_max
        self._read_index = ReadIndex(cache_bytes, storage, scheduler, read_ahead=True)
        self._attributes = AttributeCache(
            attribute_index,
            self.metadata,
            entries_max=config.attribute_cache_entries_max,
            flush_interval_s=config.storage_flush_interval_s,
            clock=clock,
            check_running=self._ensure_running,
            fenced=self.fenced,
            record_root=self._record_attribute_root,
        )
        self._durable_log = DurableLog(
            config,
            data_log,
            self.metadata,
            self._read_index,
            self._attributes,
            clock=clock,
            scheduler=scheduler,
            on_failure=self._fail,
        )
        self._storage_writer = StorageWriter(
            config.container_id,
            self.metadata,
            self._read_index,
            storage,
            self._durable_log,
            self._attributes,
            FlushPolicy(config.storage_flush_bytes, config.storage_flush_interval_s),
            tick_s=config.storage_writer_tick_s,
            clock=clock,
            scheduler=scheduler,
            fenced=self.fenced,
            after_round=lambda: self.throttle.measured(),
        )
        self.throttle = Tier1Throttle(
            config.container_id,
            config.tier1_unflushed_bytes_max,
            self.metadata.tier2_lag,
            clock,
            config.tier1_throttle_wait_s,
        )
        self._tables = TableSegments(self, scheduler)
        self._watches = TableWatches(config.table_watch_lease_s, clock.monotonic)
        self.transients = TransientSegments(self, clock=clock, scheduler=scheduler)
        parts = (self.metadata, self._attributes, self._storage_writer, self._read_index)
        self._merger = SegmentMerger(*parts, self._add, clock)
        self._time_index = TimeIndex(self.metadata, self._attributes, self._read_index)
        self.auto_scaler: ContainerPart = NO_AUTO_SCALER  # build_container sets one if asked

    # --- lifecycle -----------------------------------------------------------------------------
    def recover(self) -> RecoveryStats:
        """Take over the durable log and rebuild every segment from it. Synchronous.

        Raises DataCorruptionError if the log is damaged (a record that fails its checks
        with acknowledged records after it, a damaged epoch file, a state that disagrees
        with a checkpoint) or lost (empty, while Tier-2's fences show that an owner had
        it); the container then stays down and every later call raises
        that error again, naming the damage, so it is never mistaken for a restart.
        """
        invariant(not self._recovered, "recover() called twice")
        try:
            # Tier-2's fences show whether an owner had the log: then it must not be empty.
            had_owner = self._storage.owned_before()
            epoch = self._durable_log.initialize(must_exist=had_owner)
            self._storage.claim(epoch)  # before any Tier-2 write of this owner
            if had_owner:  # it may have granted leases on table segments
                self._watches.begin_grace()
            stats = self._durable_log.replay()
        except DataCorruptionError as e:
            self._damage = e
            raise
        self._recovered = True
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
        if not self._durable_log.started:
            self._durable_log.start()
            self._storage_writer.start()
            self.auto_scaler.start()
            self.transients.start()

    async def close(self) -> None:
        """Stop the pipeline and the storage writer. Queued operations fail; the log stays."""
        self._closed = True
        self._storage_writer.stop()
        self.auto_scaler.stop()
        self.transients.stop()
        self._tables.stop()
        self.metadata.wake_all_waiters()  # waiters re-check and find the container closed
        await self._durable_log.stop()
        self._durable_log.fail_all(ContainerNotReadyError("container closed"))
        await self._attributes.close()
        self._durable_log.close()

    def _fail(self, error: BaseException) -> None:
        """The durable log failed: stop, fail every queued caller, tell ``on_fatal``."""
        log.error("container %d: durable log failed, stopping: %r", self.config.container_id, error)
        self._failure = error
        self._durable_log.fail_all(ContainerNotReadyError(f"durable log failed: {error!r}"))
        self._storage_writer.stop()
        self.auto_scaler.stop()
        self.transients.stop()
        self._tables.stop()
        if self._on_fatal is not None:
            self._on_fatal(error)

    def fenced(self, error: FencedError) -> ContainerNotReadyError:
        """A newer owner took over (Tier-1 or Tier-2): stop as a failed log does.

        Returns the error to raise to the caller: outcome unknown, retry on the successor.
        """
        if self._failure is None:
            self._fail(error)
        return ContainerNotReadyError(f"container {self.config.container_id} was fenced: {error}")

    async def _add(self, operation: ops.Operation) -> None:
        # A caller may reach here after awaiting something while the container closed or
        # failed: its operation would never be written, so it fails now instead of hanging.
        self._ensure_running()
        await self._durable_log.add(operation)

    async def _barrier(self) -> None:
        self._ensure_running()
        await self._durable_log.barrier()

    async def durable_barrier(self) -> None:
        """Return once every operation accepted so far is durable (or failed)."""
        await self._barrier()

    async def _record_attribute_root(self, segment: str, root: int) -> None:
        await self._add(ops.AttributeIndexUpdated(segment, root))

    # --- segments ------------------------------------------------------------------------------
    async def create_segment(self, segment: str, role: SegmentRole = SegmentRole.NORMAL) -> None:
        """Durably create an empty segment. Raises SegmentExistsError if it exists."""
        self._ensure_running()
        validate_segment_name(segment)
        try:
            role = SegmentRole(role)
        except ValueError:
            raise InvalidArgumentError(f"unknown segment role {role!r}") from None
        if segment in self.metadata:
            raise SegmentExistsError(f"segment {segment} exists")
        now = self._clock.wall_time_ms()
        # Unique without randomness: log epochs only grow, and this owner counts its creates.
        incarnation = f"{self._durable_log.epoch}-{self._creates}"
        self._creates += 1
        self.metadata.add(
            SegmentMetadata(
                segment,
                now,
                role=role.value,
                durable=False,
                incarnation=incarnation,
                traffic=RateTracker(TRAFFIC_TIME_CONSTANT_S, self._clock.monotonic()),
                last_used_s=self._clock.monotonic(),
            )
        )
        self._read_index.add_segment(segment)
        await self._add(ops.CreateSegment(segment, now, role.value, incarnation))

    async def create_transient_segment(self, parent: str) -> str:
        """Durably create a transient segment of ``parent``; see TransientSegments.create."""
        self._ensure_running()
        return await self.transients.create(parent)

    async def setup_append(self, segment: str, writer_id: bytes) -> int:
        """The writer's last durable event number on ``segment`` (NO_EVENT_NUMBER if none),
        once every operation queued before it is durable (all the writer has in flight)."""
        self._ensure_running()
        check_key(writer_id)
        self.metadata.get(segment)  # SegmentNotFoundError before waiting
        await self._barrier()
        # Read after the barrier, in one step with its prefetch: a value prefetched before
        # it could be evicted (clean) while it waited, and read as absent (seen once).
        found = await self._attributes.get(segment, [writer_id])
        return found.get(writer_id, NO_EVENT_NUMBER)

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
        data = check_append(
            writer_id, data, event_count, expected_last_event_number, last_event_number
        )
        await self.throttle.admit(len(data))
        self._ensure_running()
        deadline = self._clock.monotonic() + self.config.append_reorder_wait_s
        while True:
            state = self.metadata.get(segment)
            await self._attributes.prefetch(state, [writer_id, *index_keys(state)])
            state = self.metadata.get(segment)
            state.check_not_sealed()
            state.check_attribute_keys((writer_id,))
            current = state.pending_attributes.get(writer_id, NO_EVENT_NUMBER)
            if current == expected_last_event_number:
                break
            remaining = deadline - self._clock.monotonic()
            if current > expected_last_event_number or remaining <= 0:
                raise ConditionalAppendFailedError(
                    f"writer {writer_id.hex()} on {segment}: expected last event number "
                    f"{expected_last_event_number}, actual {current}",
                    expected=expected_last_event_number,
                    actual=current,
                )
            # A predecessor block has not arrived yet: wait for the attribute to move.
            await wait_on(state.attribute_waiters, remaining)
            self._ensure_running()
        # The time and boundary index entries go in the same log operation (time_index.py).
        changed = index_entries(state, state.pending_length, self._clock.wall_time_ms())
        changed[writer_id] = last_event_number
        offset = state.reserve(len(data), changed, event_count)
        await self._add(ops.Append(segment, offset, data, tuple(changed.items()), event_count))
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
        ``expected_offset`` (when given); on a transient segment an offset ahead of its
        length first waits for the slices before it (TransientSegments.wait_for_length).
        """
        self._ensure_running()
        data = check_data(data, allow_empty=True)
        attribute_updates = check_attribute_updates(attribute_updates)
        check_int("event_count", event_count, 0, UINT32_MAX)
        if expected_offset is not None:
            check_offset("expected_offset", expected_offset)
        await self.throttle.admit(len(data))
        self._ensure_running()
        state = self.metadata.get(segment)
        if expected_offset is not None and expected_offset > state.pending_length:
            state = await self.transients.wait_for_length(segment, expected_offset)
        keys = [u.key for u in attribute_updates]
        await self._attributes.prefetch(state, [*keys, *index_keys(state)])
        state = self.metadata.get(segment)
        state.check_not_sealed()
        state.check_attribute_keys(u.key for u in attribute_updates)
        if expected_offset is not None and expected_offset != state.pending_length:
            raise ConditionalUpdateError(
                f"{segment}: expected offset {expected_offset}, length is {state.pending_length}",
                expected=expected_offset,
                actual=state.pending_length,
            )
        changed = apply_updates(state.pending_attributes, attribute_updates)
        if data:
            changed.update(index_entries(state, state.pending_length, self._clock.wall_time_ms()))
        offset = state.reserve(len(data), changed, event_count)
        await self._add(ops.Append(segment, offset, data, tuple(changed.items()), event_count))
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
        In-process only (``compose`` is a callable), so not part of the service surface.
        """
        self._ensure_running()
        check_count("attribute keys", keys)
        for key in keys:
            check_key(key)
        await self.throttle.admit(0)
        self._ensure_running()
        await self._attributes.prefetch(self.metadata.get(segment), keys)
        state = self.metadata.get(segment)
        state.check_not_sealed()
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
        state.check_attribute_keys(changed)
        if not data and not changed:
            return AppendResult(offset, offset)
        state.reserve(len(data), changed, 0)
        await self._add(ops.Append(segment, offset, data, tuple(changed.items()), 0))
        return AppendResult(offset, offset + len(data))

    async def truncate(self, segment: str, offset: int) -> None:
        """Durably drop the bytes below ``offset`` (reads there: SegmentTruncatedError).
        Idempotent at or below the start; InvalidArgumentError beyond the length.

        Then, for a stream segment, durably removes the time and boundary index entries no
        lookup can need any more (``time_index.py``, *cleanup*), also when the call changed
        nothing else (so a retry removes what a killed predecessor left). That removal is
        best effort past the truncation: a damaged attribute index or the segment's
        deletion meanwhile stops it (logged) without failing the call."""
        self._ensure_running()
        check_offset("offset", offset)
        state = self.metadata.get(segment)
        if offset > state.pending_length:
            raise InvalidArgumentError(
                f"cannot truncate {segment} at {offset}: its length is {state.pending_length}"
            )
        if offset <= state.pending_start_offset:
            await self._barrier()
        else:
            state.pending_start_offset = offset
            await self._add(ops.TruncateSegment(segment, offset))
        if state.role == SegmentRole.NORMAL.value:
            await self._remove_stale_index_entries(segment)

    async def _remove_stale_index_entries(self, segment: str) -> None:
        """Remove the segment's stale time and boundary index entries, one log operation
        per batch of at most ATTRIBUTE_UPDATES_MAX (each durable before the next is read)."""
        removed = 0
        try:
            stale = self._time_index.stale_entries(segment, ATTRIBUTE_UPDATES_MAX)
            async with contextlib.aclosing(stale):
                async for keys in stale:
                    state = self.metadata.get(segment)
                    removals = dict.fromkeys(keys, NULL_VALUE)
                    state.reserve(0, removals, 0)
                    await self._add(ops.UpdateAttributes(segment, tuple(removals.items())))
                    removed += len(removals)
        except SegmentNotFoundError:
            return  # deleted meanwhile: its index goes with it
        except DataCorruptionError as e:
            log.warning(
                "container %d: stale index entries of %s not removed: %r",
                self.config.container_id,
                segment,
                e,
            )
        if removed:
            log.debug(
                "container %d: removed %d stale index entries of %s",
                self.config.container_id,
                removed,
                segment,
            )

    async def merge(
        self, target: str, source: str, attributes: tuple[AttributeUpdate, ...] = ()
    ) -> int:
        """Atomically move sealed ``source``'s bytes to the end of ``target``; returns its length.

        ``attributes`` are applied to the target in the same log operation, all or none
        (ConditionalUpdateError merges nothing); see ``segment_merger.py``. Raises
        IllegalStateError if the source is not sealed or is truncated, SegmentSealedError
        if the target is sealed, SegmentNotFoundError, InvalidArgumentError for merging a
        segment into itself.
        """
        self._ensure_running()
        return await self._merger.merge(target, source, attributes)

    async def seal_and_merge(
        self, target: str, sources: Sequence[str], more: Sequence[tuple[str, Sequence[str]]] = ()
    ) -> list[PravegaError | None]:
        """Seal each of ``sources`` and merge them into ``target`` in order; likewise each
        ``(target, sources)`` of ``more``; the contract of
        :meth:`SegmentStoreService.seal_and_merge`.

        Every seal starts first (a seal marks its segment sealed as it starts, and its log
        operation goes before the merges'), then each target's merges run in order, the
        targets side by side: one log round for the seals and one per merge of a target,
        not a call each."""
        self._ensure_running()
        jobs = check_merge_jobs(target, sources, more)
        seals = [asyncio.ensure_future(self.seal(source)) for _, srcs in jobs for source in srcs]
        await asyncio.sleep(0)  # each seal runs to its log operation, in order

        async def merge_all(job_target: str, job_sources: list[str]) -> PravegaError | None:
            for source in job_sources:
                try:
                    await self.merge(job_target, source)
                except SegmentNotFoundError:
                    continue  # merged already
                except PravegaError as e:
                    return e
            return None

        try:
            return list(await asyncio.gather(*(merge_all(t, s) for t, s in jobs)))
        finally:
            # A seal's own failure (gone: merged already) is its merge's to report.
            await asyncio.gather(*seals, return_exceptions=True)

    async def delete_segment(self, segment: str) -> None:
        """Durably delete the segment and, in the background, its Tier-2 chunks."""
        self._ensure_running()
        state = self.metadata.get(segment)
        state.pending_deleted = True  # later operations find it gone; the log removes it
        wake_all(state.attribute_waiters)
        await self._add(ops.DeleteSegment(segment))

    async def seal(self, segment: str) -> int:
        """Durably seal ``segment``; returns its final length. Idempotent."""
        self._ensure_running()
        state = self.metadata.get(segment)
        if not state.pending_sealed:
            state.pending_sealed = True
            wake_all(state.attribute_waiters)
            await self._add(ops.Seal(segment, state.pending_length))
        else:
            await self._barrier()
        return state.length

    # --- reads ---------------------------------------------------------------------------------
    async def read(self, segment: str, offset: int, max_bytes: int, wait_s: float) -> ReadResult:
        """Read durable bytes from ``offset``, waiting up to ``wait_s`` at the tail.

        Contract (what returns when, end of segment, errors): :meth:`ReadIndex.read`.
        """
        self._ensure_running()
        check_offset("offset", offset)
        check_int("max_bytes", max_bytes, 1, INT64_MAX)
        wait_s = check_wait("wait_s", wait_s)
        return await self._read_index.read(self.metadata.get(segment), offset, max_bytes, wait_s)

    async def read_range(self, segment: str, offset: int, length: int) -> bytes:
        """Exactly the durable bytes ``[offset, offset + length)``; see ReadIndex.read_range."""
        self._ensure_running()
        check_offset("offset", offset)
        check_offset("length", length)
        return await self._read_index.read_range(self.metadata.get(segment), offset, length)

    async def get_info(self, segment: str) -> SegmentInfo:
        self._ensure_running()
        return self.metadata.get(segment).info()

    def segment_role(self, segment: str) -> str:
        """The role ``segment`` was created with (a SegmentRole value)."""
        self._ensure_running()
        return self.metadata.get(segment).role

    # --- attributes ----------------------------------------------------------------------------
    async def get_attributes(self, segment: str, keys: list[bytes]) -> dict[bytes, int]:
        """Durable values of ``keys`` (absent ones are left out); core keys included."""
        self._ensure_running()
        check_count("attribute keys", keys)
        for key in keys:
            check_key(key, allow_core=True)
        return await self._attributes.get(segment, keys)

    async def update_attributes(self, segment: str, updates: tuple[AttributeUpdate, ...]) -> None:
        """Durably apply attribute updates, atomically (ConditionalUpdateError changes nothing)."""
        self._ensure_running()
        updates = check_attribute_updates(updates)
        await self._attributes.prefetch(self.metadata.get(segment), [u.key for u in updates])
        state = self.metadata.get(segment)
        state.check_attribute_keys(u.key for u in updates)
        changed = apply_updates(state.pending_attributes, updates)
        if not changed:
            return
        state.reserve(0, changed, 0)
        await self._add(ops.UpdateAttributes(segment, tuple(changed.items())))

    async def iterate_attributes(
        self, segment: str, after: bytes | None, limit: int
    ) -> tuple[list[tuple[bytes, int]], bytes | None]:
        """A page of the segment's durable extended attributes in key order: ``(items,
        cursor)`` (cursor None when done), per AttributeCache.iterate's contract; a page may
        hold fewer than ``limit`` items (even none) before the end."""
        self._ensure_running()
        return await self._attributes.iterate(segment, after, limit)

    # --- table segments (the TableSegments extension) ------------------------------------------
    async def table_create(self, segment: str) -> None:
        await self._tables.create(segment)

    async def table_update(
        self,
        segment: str,
        updates: Sequence[TableUpdate],
        client_id: bytes | None = None,
        client_last: int = NULL_VALUE,
        watcher: bytes | None = None,
    ) -> TableUpdateResult:
        """See :meth:`TableSegments.update`; an update of a watched segment returns once its
        watchers read it (``table_watches.py``), but for ``watcher``'s lease (the writer's
        own, when it watches the segment: it applies its update itself). InvalidArgumentError
        (nothing changed) for a ``watcher`` that is not a watcher's id."""
        check_holder(watcher, optional=True)
        result = await self._tables.update(segment, updates, client_id, client_last)
        await self._watches.settle(segment, lambda: self.metadata.get(segment).length, skip=watcher)
        return result

    @property
    def table_compactor(self) -> TableCompactor:
        """The compactor of this container's table segments (``table_compactor.py``)."""
        return self._tables.compactor

    async def table_get(self, segment: str, keys: Sequence[bytes]) -> list[TableEntry | None]:
        return await self._tables.get(segment, keys)

    async def table_iterate(
        self,
        segment: str,
        cursor: bytes | None,
        limit: int,
        with_values: bool = True,
        key_prefix: bytes | None = None,
    ) -> tuple[list[TableEntry], bytes | None]:
        return await self._tables.iterate(segment, cursor, limit, with_values, key_prefix)

    async def table_read_changes(
        self, segment: str, from_offset: int, max_bytes: int
    ) -> tuple[list[TableEntry], int]:
        return await self._tables.read_changes(segment, from_offset, max_bytes)

    async def table_changes(
        self, segment: str, from_offset: int | None, max_bytes: int
    ) -> tuple[list[TableEntry], int, int]:
        """:meth:`table_read_changes` and this container's log epoch, which grows at every
        recovery (values read before may have been re-read from Tier-2 since: a cache of
        them starts afresh). ``from_offset=None``: no entries, the segment's length."""
        if from_offset is None:
            from_offset = (await self.get_info(segment)).length
        entries, offset = await self._tables.read_changes(segment, from_offset, max_bytes)
        return entries, offset, self._durable_log.epoch

    async def table_watch(
        self, segment: str, holder: bytes, from_offset: int | None, wait_s: float, max_bytes: int
    ) -> tuple[list[TableEntry], int, int, float]:
        """Renew ``holder``'s lease on ``segment`` (a system table segment), acknowledging
        every change before ``from_offset``, and answer :meth:`table_changes` from there
        once there is one, or none after ``wait_s``; plus the lease's length in seconds
        (``table_watches.py``). ``from_offset=None``: no entries, the segment's length (the
        holder starts there)."""
        self._ensure_running()
        if isinstance(wait_s, bool) or not isinstance(wait_s, int | float):
            raise InvalidArgumentError(f"wait_s must be a number, got {wait_s!r}")
        if not 0 <= wait_s <= WATCH_WAIT_S_MAX:
            raise InvalidArgumentError(f"wait_s must be in [0, {WATCH_WAIT_S_MAX}], got {wait_s}")
        length = (await self.get_info(segment)).length
        if from_offset is not None and (
            isinstance(from_offset, bool)
            or not isinstance(from_offset, int)
            or not 0 <= from_offset <= length
        ):
            raise InvalidArgumentError(f"from_offset {from_offset!r} is outside {segment}")
        start = length if from_offset is None else from_offset
        self._watches.renew(segment, holder, start)
        if from_offset is not None and from_offset >= length and wait_s > 0:
            await self._watches.wait_for_change(segment, wait_s)
        entries, offset, epoch = await self.table_changes(segment, start, max_bytes)
        return entries, offset, epoch, self._watches.lease_s

    async def table_unwatch(self, segment: str, holder: bytes) -> None:
        """Drop ``holder``'s lease on ``segment``: updates no longer wait for it."""
        self._watches.release(segment, holder)

    # --- the whole container -------------------------------------------------------------------
    async def list_segments(self) -> list[str]:
        self._ensure_running()
        return self.metadata.names()

    async def flush_to_storage(self) -> None:
        """Flush every segment's durable data to Tier-2 now (tests, shutdown)."""
        self._ensure_running()
        await self._storage_writer.flush_all()

    async def checkpoint(self) -> int:
        """Flush everything to Tier-2, write a checkpoint and truncate the log (tests, shutdown).

        Returns the log's truncation point.
        """
        self._ensure_running()
        await self._storage_writer.flush_all(checkpoint=True)
        return self._durable_log.truncated_upto

    async def get_traffic(self) -> list[SegmentTraffic]:
        """Smoothed events/s and bytes/s of every segment (for auto-scaling)."""
        return self.metadata.traffic(self._clock.monotonic())

    @property
    def truncated_upto(self) -> int:
        return self._durable_log.truncated_upto
