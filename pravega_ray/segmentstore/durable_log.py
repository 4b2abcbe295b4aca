"""Durable log: a container's operations made durable, applied in order, recovered, truncated.

Pravega's ``DurableLog`` (with its ``MemoryStateUpdater``). Everything a container
changes goes through here as an :mod:`operation <pravega_ray.segmentstore.operations>`:

* **add** (:meth:`DurableLog.add`): the :class:`OperationProcessor` group-commits the
  operation into the Tier-1 :class:`~pravega_ray.logs.durable_data_log.DurableDataLog`
  and, once durable, hands it to :meth:`DurableLog.apply`.
* **apply**: one small method per operation updates the durable view of the
  :class:`ContainerMetadata`, the read index and the segment's chunk layout. Live
  commits and recovery share it, so both build the same state; invariants check
  that every operation lands where the metadata says (an append at the segment's
  length, a chunk right after the last, a checkpoint equal to the replayed state).
* **recover** (:meth:`DurableLog.initialize`, then :meth:`DurableLog.replay`): take the
  log over (new epoch, fencing older owners), then replay every record. A truncated
  log starts with a metadata checkpoint, which recreates the segments whose earlier
  operations were truncated. Afterwards every byte of every segment is either in
  Tier-2 or in memory (checked).
* **checkpoint and truncate** (:meth:`DurableLog.checkpoint_and_truncate`, called by
  the storage writer after each round): write a metadata checkpoint when
  ``checkpoint_log_bytes`` were logged since the last one or ``checkpoint_interval_s``
  passed, then truncate the log up to the newest checkpoint below the oldest append
  not yet in Tier-2, so Tier-1 stays bounded under sustained load.

Truncated and deleted segments leave Tier-2 chunks no longer referenced; the storage
writer deletes them (:meth:`DurableLog.take_dead_chunks`).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pravega_ray import metrics
from pravega_ray.errors import DataCorruptionError
from pravega_ray.invariant import invariant
from pravega_ray.logs.durable_data_log import DurableDataLog
from pravega_ray.segmentstore import operations as ops
from pravega_ray.segmentstore.attribute_cache import AttributeCache
from pravega_ray.segmentstore.chunk_layout import ChunkRef
from pravega_ray.segmentstore.config import ContainerConfig
from pravega_ray.segmentstore.container_metadata import (
    ContainerMetadata,
    SegmentMetadata,
    wake_all,
)
from pravega_ray.segmentstore.operation_processor import BARRIER, CHECKPOINT, OperationProcessor
from pravega_ray.segmentstore.read_index import ReadIndex
from pravega_ray.timing import Clock, Scheduler

__all__ = ["DurableLog", "RecoveryStats"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RecoveryStats:
    records: int
    operations: int
    segments: int
    seconds: float


class DurableLog:
    def __init__(
        self,
        config: ContainerConfig,
        data_log: DurableDataLog,
        metadata: ContainerMetadata,
        read_index: ReadIndex,
        attributes: AttributeCache,
        *,
        clock: Clock,
        scheduler: Scheduler,
        on_failure: Callable[[BaseException], None],
    ) -> None:
        self._config = config
        self._log = data_log
        self._metadata = metadata
        self._read_index = read_index
        self._attributes = attributes
        self._clock = clock
        self._scheduler = scheduler
        self._processor = OperationProcessor(
            data_log,
            self.apply,
            bytes_max=config.group_commit_bytes_max,
            operations_max=config.group_commit_operations_max,
            delay_s=config.group_commit_delay_s,
            scheduler=scheduler,
            on_failure=on_failure,
            checkpoint=metadata.snapshot,
            container=str(config.container_id),
            on_logged=self._logged,
        )
        # (sequence, bytes) of every record above the truncation point: the log's size metrics.
        self._records: deque[tuple[int, int]] = deque()
        self._log_bytes = 0
        self._metric_tags = {"container": str(config.container_id)}
        self._metrics_at = float("-inf")  # when _record_log_metrics last recorded
        self._reads_counted = (0, 0)  # read index (hits, misses) already counted
        self._recovered = False
        self._truncated_upto = 0
        self._checkpoint_sequences: list[int] = []
        self._logged_at_checkpoint = 0
        self._last_checkpoint_time = clock.monotonic()
        self._dead_chunks: list[str] = []
        self._appliers: dict[type, Callable[[Any, int, bytes | None], None]] = {
            ops.Append: self._apply_append,
            ops.CreateSegment: self._apply_create,
            ops.MergeSegment: self._apply_merge,
            ops.Seal: self._apply_seal,
            ops.ChunkAdded: self._apply_chunk_added,
            ops.MetadataCheckpoint: self._apply_checkpoint,
            ops.UpdateAttributes: self._apply_update_attributes,
            ops.TruncateSegment: self._apply_truncate,
            ops.AttributeIndexUpdated: self._apply_attribute_root,
            ops.DeleteSegment: self._apply_delete,
        }

    # --- lifecycle -----------------------------------------------------------------------------
    def initialize(self, *, must_exist: bool = False) -> int:
        """Take the log over (fencing older owners); returns the new epoch. Synchronous.

        ``must_exist``: an owner had the log, so an empty one is DataCorruptionError."""
        self._log.initialize(must_exist=must_exist)
        return self._log.epoch

    def replay(self) -> RecoveryStats:
        """Rebuild the metadata and read index from every record of the log. Synchronous.

        Raises DataCorruptionError if the log is damaged: a record that fails its checks
        with records after it, a truncated log that does not start with a checkpoint, a
        state that disagrees with a checkpoint.
        """
        started = self._clock.monotonic()
        records = operations = 0
        for sequence, payload in self._log.read_all():
            self._logged(sequence, len(payload))
            decoded = list(ops.decode(payload))
            if records == 0:
                self._truncated_upto = sequence
                if sequence > 0 and not (
                    len(decoded) == 1 and isinstance(decoded[0], ops.MetadataCheckpoint)
                ):
                    raise DataCorruptionError(
                        f"container {self._config.container_id}: the log was truncated at "
                        f"{sequence} but does not start with a metadata checkpoint"
                    )
            records += 1
            for op in decoded:
                operations += 1
                self.apply(op, sequence, None)
        now = self._clock.monotonic()
        for state in self._metadata:
            state.start_pending_view(now)
            if state.attribute_root >= 0:
                self._attributes.expect_root(state.storage_name, state.attribute_root)
            # Paired check: every byte is in memory or in Tier-2 after replay.
            first_unflushed = self._read_index.first_unflushed_offset(state.name)
            in_memory_from = first_unflushed if first_unflushed is not None else state.length
            if state.storage_length != in_memory_from:
                raise DataCorruptionError(
                    f"container {self._config.container_id}: bytes [{state.storage_length}, "
                    f"{in_memory_from}) of {state.name} are neither in Tier-2 nor in the log",
                    segment=state.name,
                    offset=state.storage_length,
                )
        self._recovered = True
        stats = RecoveryStats(
            records, operations, len(self._metadata), self._clock.monotonic() - started
        )
        log.info(
            "container %d recovered: %d records, %d operations, %d segments in %.3fs (epoch %d)",
            self._config.container_id,
            records,
            operations,
            stats.segments,
            stats.seconds,
            self._log.epoch,
        )
        return stats

    @property
    def epoch(self) -> int:
        return self._log.epoch

    @property
    def truncated_upto(self) -> int:
        return self._truncated_upto

    @property
    def started(self) -> bool:
        return self._processor.started

    def start(self) -> None:
        """Start accepting operations (on the running event loop)."""
        self._processor.start()

    async def stop(self) -> None:
        """Stop writing; queued operations wait for :meth:`fail_all`."""
        await self._processor.stop()

    def fail_all(self, error: BaseException) -> None:
        """Fail every queued or unwritten operation with ``error``."""
        self._processor.fail_all(error)

    def close(self) -> None:
        self._log.close()

    # --- adding operations ---------------------------------------------------------------------
    async def add(self, operation: ops.Operation, chunk_data: bytes | None = None) -> None:
        """Durably log ``operation`` and apply it; returns once both are done."""
        await self._processor.submit(operation, chunk_data)

    async def barrier(self) -> None:
        """Return once every operation added before is durable and applied."""
        await self._processor.submit(BARRIER)

    # --- checkpoints and truncation ------------------------------------------------------------
    async def checkpoint_and_truncate(self, force: bool) -> None:
        """Write a checkpoint if due (or ``force``), then truncate the log as far as Tier-2 allows.

        The checkpoint's content is taken when its record is written (``CHECKPOINT``), so
        it is exact whatever else is queued.
        """
        since = self._processor.logged_bytes - self._logged_at_checkpoint
        due = since >= self._config.checkpoint_log_bytes or (
            since > 0
            and self._clock.monotonic() - self._last_checkpoint_time
            >= self._config.checkpoint_interval_s
        )
        if force or due:
            await self._processor.submit(CHECKPOINT)
        point = self._truncation_point()
        if point > self._truncated_upto:
            await self._scheduler.run_blocking(self._log.truncate, point)
            self._truncated_upto = point
            self._checkpoint_sequences = [c for c in self._checkpoint_sequences if c >= point]
            while self._records and self._records[0][0] < point:
                self._log_bytes -= self._records.popleft()[1]
        self._record_log_metrics()

    def _logged(self, sequence: int, size_bytes: int) -> None:
        """A record is durable (or replayed): count it in the log's size."""
        self._records.append((sequence, size_bytes))
        self._log_bytes += size_bytes

    def _record_log_metrics(self) -> None:
        """Log size, truncation lag, Tier-2 lag and the read cache's hits and misses: at
        most once per ``metrics.GAUGE_INTERVAL_S``, from the storage writer's rounds."""
        now = self._clock.monotonic()
        if now - self._metrics_at < metrics.GAUGE_INTERVAL_S:
            return
        self._metrics_at = now
        tags = self._metric_tags
        metrics.LOG_BYTES.set(self._log_bytes, tags)
        metrics.LOG_RECORDS.set(len(self._records), tags)
        metrics.STORAGE_WRITER_LAG.set(self._metadata.tier2_lag(), tags)
        hits, misses = self._read_index.hits, self._read_index.misses
        counted_hits, counted_misses = self._reads_counted
        if hits > counted_hits:
            metrics.READ_CACHE_HITS.inc(hits - counted_hits, tags)
        if misses > counted_misses:
            metrics.READ_CACHE_MISSES.inc(misses - counted_misses, tags)
        self._reads_counted = (hits, misses)

    def _truncation_point(self) -> int:
        """Highest checkpoint below which every append is in Tier-2 (0 if none)."""
        oldest_unflushed = self._metadata.oldest_unflushed_sequence()
        candidates = [
            c
            for c in self._checkpoint_sequences
            if oldest_unflushed is None or c <= oldest_unflushed
        ]
        return max(candidates, default=0)

    def take_dead_chunks(self) -> list[str]:
        """Tier-2 chunks no longer referenced (truncated, deleted), to delete; forgets them."""
        dead, self._dead_chunks = self._dead_chunks, []
        return dead

    # --- applying durable operations -----------------------------------------------------------
    def apply(self, op: ops.Operation, sequence: int, chunk_data: bytes | None) -> None:
        """Apply a durable operation (in log record ``sequence``) to the durable view."""
        applier = self._appliers.get(type(op))
        if applier is None:  # pragma: no cover
            raise TypeError(f"unknown operation {op!r}")
        applier(op, sequence, chunk_data)

    def _mark_unflushed(self, state: SegmentMetadata, offset: int, sequence: int) -> None:
        state.unflushed_appends.append((offset, sequence))
        if state.unflushed_since is None:
            state.unflushed_since = self._clock.monotonic()
        self._metadata.touch(state)

    def _apply_append(self, op: ops.Append, sequence: int, _: bytes | None) -> None:
        state = self._metadata.find(op.segment)
        assert state is not None
        invariant(
            op.offset == state.length,
            f"append to {op.segment} at {op.offset} but its length is {state.length}",
        )
        if op.data:
            self._read_index.append(op.segment, op.offset, op.data)
            self._mark_unflushed(state, op.offset, sequence)
        state.length += len(op.data)
        state.event_count += op.event_count
        state.attributes.update(op.attributes)
        state.dirty_attributes.update(op.attributes)
        if op.attributes:
            self._metadata.touch(state, len(op.attributes))
        if state.traffic is not None:  # live, not replayed: recovery leaves it "long ago"
            now = self._clock.monotonic()
            state.traffic.record(op.event_count, len(op.data), now)
            state.last_used_s = now
        wake_all(state.data_waiters)

    def _apply_create(self, op: ops.CreateSegment, _: int, __: bytes | None) -> None:
        state = self._metadata.find(op.segment)
        if state is not None:  # a live create made the metadata already
            state.durable = True
        else:
            self._metadata.add(
                SegmentMetadata(
                    op.segment, op.creation_time_ms, role=op.role, incarnation=op.incarnation
                )
            )
            self._read_index.add_segment(op.segment)

    def _apply_seal(self, op: ops.Seal, _: int, __: bytes | None) -> None:
        state = self._metadata.find(op.segment)
        assert state is not None
        invariant(op.length == state.length, f"seal of {op.segment} at a wrong length")
        state.sealed = True
        wake_all(state.data_waiters)

    def _apply_chunk_added(self, op: ops.ChunkAdded, _: int, chunk_data: bytes | None) -> None:
        state = self._metadata.find(op.segment)
        if state is None:
            # Deleted or merged while the storage writer wrote this chunk (a delete does not
            # wait for a flush round): nothing references the chunk, so it is dead.
            self._dead_chunks.append(op.chunk)
            return
        invariant(op.offset == state.storage_length, f"chunk gap in {op.segment}")
        chunk = ChunkRef(op.offset, op.length, op.chunk, op.crc)
        state.chunks.add(chunk, op.segment)
        self._read_index.chunk_flushed(op.segment, chunk, chunk_data)
        state.storage_length = chunk.end
        self._drop_chunks_below_start(state)  # its bytes may have been truncated meanwhile
        while state.unflushed_appends and state.unflushed_appends[0][0] < state.storage_length:
            state.unflushed_appends.popleft()
        state.unflushed_since = (
            None if state.storage_length == state.length else self._clock.monotonic()
        )

    def _drop_chunks_below_start(self, state: SegmentMetadata) -> None:
        """Chunks wholly below the start offset are dead: the storage writer deletes them."""
        dead = state.chunks.truncate(state.start_offset)
        if dead:
            self._read_index.evict(dead)
            self._dead_chunks += dead

    def _apply_update_attributes(self, op: ops.UpdateAttributes, _: int, __: bytes | None) -> None:
        state = self._metadata.find(op.segment)
        assert state is not None
        state.attributes.update(op.attributes)
        state.dirty_attributes.update(op.attributes)
        self._metadata.touch(state, len(op.attributes))

    def _apply_truncate(self, op: ops.TruncateSegment, _: int, __: bytes | None) -> None:
        state = self._metadata.find(op.segment)
        assert state is not None
        invariant(op.offset <= state.length, f"truncation of {op.segment} past its end")
        state.start_offset = max(state.start_offset, op.offset)
        self._drop_chunks_below_start(state)
        wake_all(state.data_waiters)

    def _apply_attribute_root(
        self, op: ops.AttributeIndexUpdated, _: int, __: bytes | None
    ) -> None:
        state = self._metadata.find(op.segment)  # a delete may have been applied first
        if state is not None:
            state.attribute_root = max(state.attribute_root, op.root)

    def _apply_delete(self, op: ops.DeleteSegment, _: int, __: bytes | None) -> None:
        state = self._metadata.remove(op.segment)
        dead = state.chunks.names()
        self._read_index.evict(dead)
        self._read_index.remove_segment(op.segment)
        self._dead_chunks += dead
        self._attributes.segment_deleted(state.storage_name)
        wake_all(state.data_waiters)
        wake_all(state.attribute_waiters)

    def _apply_merge(self, op: ops.MergeSegment, sequence: int, _: bytes | None) -> None:
        target = self._metadata.find(op.target)
        assert target is not None
        source = self._metadata.remove(op.source)
        self._attributes.segment_deleted(source.storage_name)
        invariant(op.offset == target.length, f"merge into {op.target} at a wrong offset")
        invariant(op.length == source.length, f"merge of {op.source} with a wrong length")
        source_chunks = source.chunks.names()
        self._read_index.evict(source_chunks)
        self._read_index.remove_segment(op.source)
        if op.data is None:
            invariant(
                target.storage_length == target.length and source.storage_length == source.length,
                f"metadata-only merge of {op.source} with data outside Tier-2",
            )
            for chunk in source.chunks.shifted(op.offset):  # they now belong to the target
                target.chunks.add(chunk, op.target)
            target.storage_length += op.length
        else:
            invariant(len(op.data) == op.length, "merge data of a wrong length")
            if op.data:
                self._read_index.append(op.target, op.offset, op.data)
                self._mark_unflushed(target, op.offset, sequence)
            self._dead_chunks += source_chunks
        target.length += op.length
        target.event_count += source.event_count
        target.attributes.update(op.attributes)
        target.dirty_attributes.update(op.attributes)
        self._metadata.touch(target, len(op.attributes))
        wake_all(target.data_waiters)
        wake_all(source.data_waiters)
        wake_all(source.attribute_waiters)

    def _apply_checkpoint(self, op: ops.MetadataCheckpoint, sequence: int, _: bytes | None) -> None:
        if not self._recovered and not len(self._metadata) and sequence == self._truncated_upto:
            # Recovery of a truncated log starts here.
            for entry in op.segments:
                state = SegmentMetadata.from_snapshot(entry, sequence)
                self._metadata.add(state)
                self._read_index.add_segment(state.name)
                self._drop_chunks_below_start(state)  # older checkpoints could record them
        else:
            # Paired check: the state built by replay equals what the checkpoint recorded.
            # During replay a difference is damage in the log; live, it would be a bug here.
            for entry in op.segments:
                found = self._metadata.find(entry["n"])
                if found is None or not found.matches_snapshot(entry):
                    message = (
                        f"container {self._config.container_id}: state of {entry['n']} "
                        f"differs from its checkpoint in log record {sequence}"
                    )
                    invariant(not self._recovered, message)
                    raise DataCorruptionError(message, segment=entry["n"], sequence=sequence)
        self._checkpoint_sequences.append(sequence)
        self._logged_at_checkpoint = self._processor.logged_bytes
        self._last_checkpoint_time = self._clock.monotonic()
