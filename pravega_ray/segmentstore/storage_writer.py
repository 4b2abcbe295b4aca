"""Storage writer: moves durable data from the read index into Tier-2 chunks.

Every ``STORAGE_WRITER_TICK_S`` it picks the segments due for a flush (pending
bytes over ``storage_flush_bytes``, oldest unflushed byte older than
``storage_flush_interval_s``, or sealed with data pending), writes their
leading unflushed entries as one new chunk per segment, and then records a
``ChunkAdded`` operation through the ingestion pipeline. Only once that
operation is durable does the read index drop the in-memory entries, so a crash
between the chunk write and the record leaves an unreferenced chunk (replaced on
the next flush), never a hole.

After each round it lets the container write a metadata checkpoint (when
``CHECKPOINT_LOG_BYTES`` were logged since the last one, or
``CHECKPOINT_INTERVAL_S`` passed) and truncate the durable log up to the
newest checkpoint below the oldest append not yet in Tier-2, so Tier-1 stays
bounded under sustained load.

Chunk names: ``segments/<segment name>/<start offset, 20 digits>``. Each ``ChunkAdded``
carries the chunk's CRC-32, computed from the bytes written; every read of the chunk
checks its length and CRC (``container._read_chunk``), so damage in Tier-2 is a
:class:`DataCorruptionError` naming the chunk, never wrong bytes.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from typing import TYPE_CHECKING

from pravega_ray.errors import AlreadyExistsError, ContainerNotReadyError, FencedError
from pravega_ray.invariant import invariant
from pravega_ray.segmentstore import operations as ops

if TYPE_CHECKING:
    from pravega_ray.segmentstore.container import SegmentContainer, SegmentState

log = logging.getLogger(__name__)


def chunk_name(segment: str, offset: int) -> str:
    return f"segments/{segment}/{offset:020d}"


class StorageWriter:
    def __init__(self, container: SegmentContainer) -> None:
        self._container = container
        self._task: asyncio.Task[None] | None = None
        self._lock: asyncio.Lock | None = None

    def start(self) -> None:
        self._lock = asyncio.Lock()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._container.config.storage_writer_tick_s)
            try:
                await self._flush(force=False)
            except asyncio.CancelledError:
                raise
            except ContainerNotReadyError:
                return  # fenced or failed: the container has stopped
            except Exception:  # keep going; the data is safe in Tier-1
                log.exception("storage writer of container %d", self._container.config.container_id)

    async def flush_all(self, checkpoint: bool = False) -> None:
        """Flush all durable data to Tier-2, delete dead chunks, and checkpoint if asked."""
        while self._container._flush_candidates(force=True):
            await self._flush(force=True)
        # One more pass, always: deletes dead chunks and, if asked, checkpoints.
        await self._flush(force=True, checkpoint=checkpoint)

    async def _flush(self, force: bool, checkpoint: bool = False) -> None:
        """One round; a FencedError (a newer owner took Tier-2 over) stops the container."""
        try:
            await self._flush_round(force, checkpoint)
        except FencedError as e:
            raise self._container.fenced(e) from e

    async def _flush_round(self, force: bool, checkpoint: bool) -> None:
        assert self._lock is not None
        async with self._lock:
            for state in self._container._flush_candidates(force):
                await self._flush_segment(state)
            await self._delete_dead_chunks()
            await self._container._flush_attributes(force)
            # Under the lock: no ChunkAdded is queued, so the checkpoint's snapshot is exact.
            await self._container._checkpoint_and_truncate(force=checkpoint)

    async def _delete_dead_chunks(self) -> None:
        """Delete Tier-2 chunks of truncated or deleted segments (idempotent)."""
        dead, self._container._dead_chunks = self._container._dead_chunks, []
        for name in dead:
            await asyncio.to_thread(self._container._storage.delete, name)

    async def _flush_segment(self, state: SegmentState) -> None:
        container = self._container
        offset, entries = container._read_index.unflushed(
            state.name, container.config.storage_flush_bytes
        )
        if not entries:
            return
        invariant(offset == state.storage_length, f"unflushed data of {state.name} has a gap")
        data = entries[0] if len(entries) == 1 else b"".join(entries)
        name = chunk_name(state.name, offset)
        storage = container._storage
        try:
            await asyncio.to_thread(storage.create, name, data)
        except AlreadyExistsError:
            # Left by a flush whose ChunkAdded never became durable: not referenced, replace it.
            await asyncio.to_thread(storage.delete, name)
            await asyncio.to_thread(storage.create, name, data)
        await container._submit_chunk_added(
            ops.ChunkAdded(state.name, name, offset, len(data), zlib.crc32(data)), data
        )
