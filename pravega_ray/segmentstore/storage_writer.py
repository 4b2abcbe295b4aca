"""Storage writer: moves durable data from the read index into Tier-2 chunks.

Pravega's ``StorageWriter``. Every ``storage_writer_tick_s`` it runs one round:

1. **Flush policy** (:meth:`StorageWriter.flush_candidates`): a segment is due when
   its bytes not yet in Tier-2 reach ``storage_flush_bytes``, when its oldest such
   byte is ``storage_flush_interval_s`` old, when it is sealed with data pending, or
   always when forced.
2. For each due segment, its leading unflushed entries (up to
   ``storage_flush_bytes``) become one new chunk, named by the segment and its start
   offset (:func:`~pravega_ray.segmentstore.chunk_layout.chunk_name`), and a
   ``ChunkAdded`` operation carrying the chunk's CRC-32 is logged. Only once that
   record is durable does the read index drop the in-memory entries, so a crash
   between the chunk write and the record leaves an unreferenced chunk (replaced on
   the next flush), never a hole.
3. Chunks no longer referenced (truncated or deleted segments) are deleted; a delete that
   fails is tried again by the next round.
4. Due attribute values are flushed to the attribute index.
5. The durable log writes a checkpoint if due and truncates itself as far as
   Tier-2 allows, so Tier-1 stays bounded under sustained load.

A round visits only the container's *busy* segments (``ContainerMetadata.busy``: those
that may hold data or attribute values not in Tier-2) and forgets the clean ones at its end,
so its cost follows the segments written to, not all the container holds. Every
``REVISIT_ALL_S`` a round visits every segment once (``revisit_all``) and logs any it
finds not clean that was not busy.

It talks to its container only through the narrow interfaces below, never through the
container's members. A :class:`FencedError` from Tier-2 (a newer owner took over)
stops the container; any other error of a timed round is logged and the next round
tries again (the data is safe in Tier-1).
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections import deque
from collections.abc import Callable, Collection
from typing import Protocol

from pravega_ray.errors import AlreadyExistsError, ContainerNotReadyError, FencedError
from pravega_ray.invariant import invariant
from pravega_ray.segmentstore import operations as ops
from pravega_ray.segmentstore.chunk_layout import chunk_name
from pravega_ray.segmentstore.container_metadata import ContainerMetadata, SegmentMetadata
from pravega_ray.storage.chunk_storage import ChunkStorage
from pravega_ray.timing import Clock, Scheduler

__all__ = ["AttributeFlusher", "FlushPolicy", "OperationLog", "StorageWriter", "UnflushedData"]

log = logging.getLogger(__name__)

REVISIT_ALL_S = 10.0
"""How often a round visits every segment, not only the busy ones (module docstring)."""


class UnflushedData(Protocol):
    """Where the durable bytes not yet in Tier-2 are (the read index)."""

    def has_segment(self, segment: str) -> bool: ...

    def unflushed(self, segment: str, bytes_max: int) -> tuple[int, list[bytes]]: ...


class OperationLog(Protocol):
    """What the storage writer needs of the durable log."""

    async def add(self, operation: ops.Operation, chunk_data: bytes | None = None) -> None: ...

    def take_dead_chunks(self) -> list[str]: ...

    async def checkpoint_and_truncate(self, force: bool) -> None: ...


class AttributeFlusher(Protocol):
    """What the storage writer needs of the attribute cache."""

    async def flush(self, force: bool = False) -> None: ...


class FlushPolicy:
    """When a segment's durable bytes go to Tier-2 (thresholds from the container's config)."""

    def __init__(self, flush_bytes: int, flush_interval_s: float) -> None:
        self.flush_bytes = flush_bytes
        self.flush_interval_s = flush_interval_s

    def is_due(self, state: SegmentMetadata, now: float, force: bool) -> bool:
        pending = state.length - state.storage_length
        if pending <= 0:
            return False
        old = (
            state.unflushed_since is not None
            and now - state.unflushed_since >= self.flush_interval_s
        )
        return force or old or state.sealed or pending >= self.flush_bytes


class StorageWriter:
    def __init__(
        self,
        container_id: int,
        segments: ContainerMetadata,
        data: UnflushedData,
        storage: ChunkStorage,
        operations: OperationLog,
        attributes: AttributeFlusher,
        policy: FlushPolicy,
        *,
        tick_s: float,
        clock: Clock,
        scheduler: Scheduler,
        fenced: Callable[[FencedError], BaseException],
        after_round: Callable[[], None] = lambda: None,
    ) -> None:
        """``after_round``: called after each timed round, whether it succeeded or not
        (the container's backpressure measures the lag then, ``throttle.py``)."""
        self._container_id = container_id
        self._after_round = after_round
        self._segments = segments
        self._data = data
        self._storage = storage
        self._operations = operations
        self._attributes = attributes
        self._policy = policy
        self._tick_s = tick_s
        self._clock = clock
        self._scheduler = scheduler
        self._fenced = fenced
        self._task: asyncio.Task[None] | None = None
        self._lock: asyncio.Lock | None = None
        # Chunks no longer referenced, taken from the durable log, not yet deleted: a delete
        # that fails leaves its chunk (and those after it) here for the next round.
        self._dead_chunks: deque[str] = deque()
        self._revisit_at = clock.monotonic() + REVISIT_ALL_S

    def start(self) -> None:
        """Start the timed rounds on the running event loop."""
        self._lock = asyncio.Lock()
        self._task = self._scheduler.start(self._run(), "storage-writer")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def flush_candidates(self, force: bool) -> list[SegmentMetadata]:
        """The segments due for a flush now."""
        now = self._clock.monotonic()
        return [s for s in self._segments.busy() if self._policy.is_due(s, now, force)]

    async def _run(self) -> None:
        while True:
            await self._scheduler.sleep(self._tick_s)
            try:
                await self._flush(force=False)
            except asyncio.CancelledError:
                raise
            except ContainerNotReadyError:
                return  # fenced or failed: the container has stopped
            except Exception:  # keep going; the data is safe in Tier-1
                log.exception("storage writer of container %d", self._container_id)
            finally:
                self._after_round()

    async def flush_all(self, checkpoint: bool = False) -> None:
        """Flush to Tier-2 every byte durable when called, delete dead chunks, and
        checkpoint if asked.

        Bytes appended meanwhile are not waited for (the timed rounds take them): a
        container written continuously is never clean, and a flush that waited for that
        never returned (a large event's merge waited for as long as the load lasted).
        """
        await self._flush_upto(None)
        # One more pass, always: deletes dead chunks and, if asked, checkpoints.
        await self._flush(force=True, checkpoint=checkpoint)

    async def flush_segments(self, names: Collection[str]) -> None:
        """Flush to Tier-2 the bytes of the segments ``names`` durable when called, and
        nothing else (a big merge: its source and target). A name not busy is skipped."""
        await self._flush_upto(set(names))

    async def _flush_upto(self, names: set[str] | None) -> None:
        """Forced rounds until each busy segment (of ``names``; None: all) holds in Tier-2
        the length it had when called; only those segments when ``names`` is given."""
        goal = {s.name: s.length for s in self._segments.busy() if names is None or s.name in names}
        while True:
            due = [
                s
                for s in self.flush_candidates(force=True)
                if s.storage_length < goal.get(s.name, -1)
            ]
            if not due:
                return
            before = [s.storage_length for s in due]
            await self._flush(force=True, only=None if names is None else due)
            if [s.storage_length for s in due] == before:
                return  # nothing moved (a segment left meanwhile): no busy loop

    async def _flush(
        self, force: bool, checkpoint: bool = False, only: list[SegmentMetadata] | None = None
    ) -> None:
        """One round (of the segments ``only``, when given: nothing else is done); a
        FencedError (a newer owner took Tier-2 over) stops the container."""
        try:
            if only is None:
                await self._flush_round(force, checkpoint)
            else:
                assert self._lock is not None
                async with self._lock:
                    for state in only:
                        await self._flush_segment(state)
        except FencedError as e:
            raise self._fenced(e) from e

    async def _flush_round(self, force: bool, checkpoint: bool) -> None:
        assert self._lock is not None
        async with self._lock:
            self._revisit_if_due()
            for state in self.flush_candidates(force):
                await self._flush_segment(state)
            await self._delete_dead_chunks()
            await self._attributes.flush(force)
            # Under the lock: no ChunkAdded is queued, so the checkpoint's snapshot is exact.
            await self._operations.checkpoint_and_truncate(force=checkpoint)
            self._segments.drop_clean()

    def _revisit_if_due(self) -> None:
        """Every REVISIT_ALL_S: this round visits every segment (module docstring)."""
        now = self._clock.monotonic()
        if now < self._revisit_at:
            return
        self._revisit_at = now + REVISIT_ALL_S
        escaped = self._segments.revisit_all()
        if escaped:  # a change applied without touch(): a defect, made harmless here
            log.warning(
                "container %d: %d segments had work for Tier-2 but were not busy, e.g. %s",
                self._container_id,
                len(escaped),
                escaped[:3],
            )

    async def _delete_dead_chunks(self) -> None:
        """Delete the chunks no longer referenced (idempotent); failures wait for a later round."""
        self._dead_chunks.extend(self._operations.take_dead_chunks())
        while self._dead_chunks:
            await self._scheduler.run_blocking(self._storage.delete, self._dead_chunks[0])
            self._dead_chunks.popleft()

    async def _flush_segment(self, state: SegmentMetadata) -> None:
        if not self._data.has_segment(state.name):
            return  # deleted or merged away since the round listed it (an await ago)
        offset, entries = self._data.unflushed(state.name, self._policy.flush_bytes)
        if not entries:
            return
        invariant(offset == state.storage_length, f"unflushed data of {state.name} has a gap")
        data = entries[0] if len(entries) == 1 else b"".join(entries)
        name = chunk_name(state.storage_name, offset)
        try:
            await self._scheduler.run_blocking(self._storage.create, name, data)
        except AlreadyExistsError:
            # Left by a flush whose ChunkAdded never became durable: not referenced, replace it.
            await self._scheduler.run_blocking(self._storage.delete, name)
            await self._scheduler.run_blocking(self._storage.create, name, data)
        await self._operations.add(
            ops.ChunkAdded(state.name, name, offset, len(data), zlib.crc32(data)), data
        )
