"""Known defects to plant, one at a time, to show the simulation finds them.

Each is a context manager that swaps one function of the system for a copy with the
defect, and restores the original on exit (tests only; never nested in threads):

* ``writer-resends-acked`` (client, ``SegmentOutputStream._resolve``): after a reconnect the
  writer resends every block that was in flight, persisted or not, renumbered after the
  writer's last persisted event (as its handshake does), so the conditional append
  accepts them again: events written twice.
* ``reader-rewinds-buffered`` (the simulated reader's retry): after a failed or lost read
  the reader starts again at its position (just past the last event handed out) but
  keeps the events it had buffered past it: events read twice.
* ``container-acks-early`` (container, ``OperationProcessor._commit``): a group commit's
  callers are acknowledged before the log record is durable, so a crash in between
  loses acknowledged events.
* ``chunk-before-write`` (container, ``StorageWriter._flush_segment``): the storage writer
  logs a chunk's ``ChunkAdded`` before the chunk is in Tier-2, so a crash (or failed
  write) in between leaves the segment's bytes in a chunk that does not exist.
* ``log-skips-checksum`` (file-system log, ``filesystem._frame_at``): reading the log
  trusts a frame's header and skips its checksum, so a torn record whose size reached the
  disk but whose bytes did not (zeros, garbage) is replayed: found by ``torn_tail``.
* ``time-index-follows-clock`` (container, ``time_index.index_entries`` as the container
  calls it): a new time-index entry is written whenever the slot differs from the newest
  one, not only when it is later, so after the wall clock jumps back a later time can
  answer an earlier offset: found by ``clock_jump``.
* ``reader-takes-successor-early`` (the simulated reader's ``SimReader.release``): a
  successor is read as soon as *one* of its predecessors is completed, not all of them;
  after a merge, the events its keys got after the scale can be read before those still
  unread in the other predecessor: per routing key order breaks across epochs. Found with
  scaling (the stream scales in most seeds).
* ``delete-keeps-segments`` (controller, ``StreamWorkflows.finish_delete``): deleting a
  sealed stream removes its records and remembers its numbers but deletes none of its
  segments: found by the recursive delete of a scope (``scope_delete``), whose streams'
  segments stay in the containers.
* ``note-skips-pending`` (client, ``EventStreamWriter._awaited``): a noted time awaits none
  of the writer's pending events, so its mark reports a position before events written
  before the note (with earlier times): a reader past that watermark's cut reads events
  older than its window's lower bound. Found by ``watermarks`` (``sim/watermarks.py``).
* ``watermark-forgets-last`` (controller, ``PeriodicWatermarking._last``): the workflow
  forgets the last watermark (it still appends at the segment's end), so a run after no
  new note emits the same lower bound again: the final check of the mark segment finds
  lower bounds that do not increase. Found by ``watermarks``.
* ``commit-skips-a-segment`` (controller, ``SegmentHelper.seal_and_merge`` as the commit
  handler and the rolling commit call it): of a commit's transaction segments, those of one
  parent (the last by name) are neither sealed nor merged, and the transaction is recorded
  COMMITTED all the same: an acknowledged commit whose events of that parent are never
  read, or a transaction segment left behind. Found by ``transactions``
  (``sim/transactions.py``).
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pravega_ray.client.segment_output_stream import SegmentOutputStream
from pravega_ray.client.writer import EventStreamWriter
from pravega_ray.constants import TIME_INDEX_RESOLUTION_MS
from pravega_ray.contracts.attributes import NULL_VALUE
from pravega_ray.contracts.watermarks import Watermark
from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.controller.stream_workflows import StreamWorkflows
from pravega_ray.controller.watermark_tasks import PeriodicWatermarking
from pravega_ray.logs import filesystem
from pravega_ray.segmentstore import container as container_module
from pravega_ray.segmentstore import operations as ops
from pravega_ray.segmentstore.chunk_layout import chunk_name
from pravega_ray.segmentstore.container_metadata import SegmentMetadata
from pravega_ray.segmentstore.operation_processor import (
    BARRIER,
    CHECKPOINT,
    OperationProcessor,
    _Queued,
)
from pravega_ray.segmentstore.storage_writer import StorageWriter
from pravega_ray.segmentstore.time_index import TIME_SLOT_LAST, index_entries, time_key
from sim.clients import SimReader, _Segment

__all__ = ["BUGS", "planted"]


def _resolve_resending_all(
    self: SegmentOutputStream, last: int | None, error: BaseException | None, sealed: Any
) -> None:
    blocks = [block for block, _ in self.blocks.inflight]
    if last is None or sealed is not None or any(b.rejection for b in blocks):
        _ORIGINALS["writer-resends-acked"](self, last, error, sealed)
        return
    self.blocks.inflight.clear()
    self.blocks.requeue(blocks)  # BUG: the persisted ones too
    self.blocks.renumber_after(last)
    self.sent_last = last
    self.reconnecting = False
    self.handshake = False
    self._context.wake.notify()


def _release_early(self: SimReader) -> list[str]:
    return sorted(  # BUG: any predecessor, not all
        successor
        for successor, predecessors in self.future.items()
        if any(p in self.completed for p in predecessors)
    )


def _retry_rewinding(self: SimReader, s: _Segment) -> None:
    s.fetch_offset = s.next_offset  # BUG: s.events still holds the events past it
    s.frames.reset()


async def _commit_acking_early(self: OperationProcessor, batch: list[_Queued]) -> None:
    self._batch = batch
    if batch[0].operation is CHECKPOINT:
        assert self._checkpoint is not None
        batch[0].operation = self._checkpoint()
    for item in batch:  # BUG: acknowledged before the record is durable
        if not item.future.done():
            item.future.set_result(None)
    to_log = [item.operation for item in batch if item.operation is not BARRIER]
    sequence = -1
    if to_log:
        payload = ops.encode(to_log)
        self.logged_bytes += len(payload)
        sequence = await self._scheduler.run_blocking(self._log.append, payload)
        if self._on_logged is not None:
            self._on_logged(sequence, len(payload))
    for item in batch:
        if item.operation is not BARRIER:
            self._apply(item.operation, sequence, item.chunk_data)
    self._batch = []


async def _flush_logging_first(self: StorageWriter, state: SegmentMetadata) -> None:
    if not self._data.has_segment(state.name):
        return
    offset, entries = self._data.unflushed(state.name, self._policy.flush_bytes)
    if not entries:
        return
    data = b"".join(entries)
    name = chunk_name(state.storage_name, offset)
    chunk = ops.ChunkAdded(state.name, name, offset, len(data), zlib.crc32(data))
    await self._operations.add(chunk, data)  # BUG: logged before the chunk exists
    await self._scheduler.run_blocking(self._storage.create, name, data)


def _frame_at_unchecked(data: bytes, position: int) -> tuple[int, bytes, int] | None:
    header = filesystem._HEADER
    if len(data) - position < header.size:
        return None
    magic, _epoch, sequence, length, _crc = header.unpack_from(data, position)
    start = position + header.size
    end = start + length
    if magic not in filesystem._MAGICS or end > len(data):
        return None
    return sequence, data[start:end], end  # BUG: the checksum is not checked


def _index_entries_following_clock(state: Any, offset: int, now_ms: int) -> dict[bytes, int]:
    entries = index_entries(state, offset, now_ms)
    slot = now_ms // TIME_INDEX_RESOLUTION_MS
    last = state.pending_attributes.get(TIME_SLOT_LAST, NULL_VALUE)
    if last != NULL_VALUE and slot < last:  # BUG: an earlier slot is indexed too
        entries[time_key(slot)] = offset
        entries[TIME_SLOT_LAST] = slot
    return entries


def _finish_delete_keeping_segments(self: StreamWorkflows, scope: str, stream: str) -> None:
    value = self._records.get(scope, stream)[0]
    next_number = int(value["next_number"])
    if self._store.safe_start("streams", scope, stream, 0) < next_number:
        self._store.remember_deleted("streams", scope, stream, next_number)
    self._step("numbers remembered")
    # BUG: the segments of every epoch are not deleted
    self._step("segments deleted")
    self._txns.txns.delete_stream(scope, stream, self._records.highest_epoch(scope, stream))
    self._records.delete(scope, stream)


def _awaiting_nothing(self: EventStreamWriter[Any]) -> list[Any]:
    return []  # BUG: the events pending now are not awaited


def _last_forgetting(
    self: PeriodicWatermarking, scope: str, stream: str, segment: str
) -> tuple[Watermark | None, int, int | None, int]:
    _, length, version, keep_from = _ORIGINALS["watermark-forgets-last"](
        self, scope, stream, segment
    )
    return None, length, version, keep_from  # BUG: the last watermark is forgotten


def _seal_and_merge_skipping(self: SegmentHelper, sources: Mapping[str, Sequence[str]]) -> None:
    parents = sorted(sources)
    if len(parents) > 1:  # BUG: the last parent's transaction segments are left as they are
        sources = {parent: sources[parent] for parent in parents[:-1]}
    _ORIGINALS["commit-skips-a-segment"](self, sources)


_PATCHES: dict[str, tuple[Any, str, Callable[..., Any]]] = {
    "writer-resends-acked": (SegmentOutputStream, "_resolve", _resolve_resending_all),
    "reader-rewinds-buffered": (SimReader, "retry", _retry_rewinding),
    "container-acks-early": (OperationProcessor, "_commit", _commit_acking_early),
    "chunk-before-write": (StorageWriter, "_flush_segment", _flush_logging_first),
    "log-skips-checksum": (filesystem, "_frame_at", _frame_at_unchecked),
    "time-index-follows-clock": (container_module, "index_entries", _index_entries_following_clock),
    "reader-takes-successor-early": (SimReader, "release", _release_early),
    "delete-keeps-segments": (StreamWorkflows, "finish_delete", _finish_delete_keeping_segments),
    "note-skips-pending": (EventStreamWriter, "_awaited", _awaiting_nothing),
    "watermark-forgets-last": (PeriodicWatermarking, "_last", _last_forgetting),
    "commit-skips-a-segment": (SegmentHelper, "seal_and_merge", _seal_and_merge_skipping),
}
_ORIGINALS: dict[str, Callable[..., Any]] = {
    name: getattr(owner, attribute) for name, (owner, attribute, _) in _PATCHES.items()
}

BUGS: tuple[str, ...] = tuple(_PATCHES)
"""The names of the defects :func:`planted` knows."""


@contextlib.contextmanager
def planted(name: str) -> Iterator[None]:
    """Plant defect ``name`` (one of BUGS) for the ``with`` block; KeyError for another."""
    owner, attribute, buggy = _PATCHES[name]
    setattr(owner, attribute, buggy)
    try:
        yield
    finally:
        setattr(owner, attribute, _ORIGINALS[name])
