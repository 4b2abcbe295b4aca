"""Read index: serves a segment's durable bytes from memory or from Tier-2.

Pravega's ``ReadIndex``. Per segment it keeps the *unflushed entries*: durable
appends not yet in Tier-2, in offset order, always in memory (the storage writer
bounds them by flushing). Bytes below them are in Tier-2 chunks, whose places
the segment's :class:`~pravega_ray.segmentstore.chunk_layout.ChunkLayout` knows;
a container-wide LRU *cache* of chunk contents, bounded by ``cache_bytes_max``,
holds recently flushed or read chunks. A chunk's bytes enter the cache when the
storage writer flushes them or a read fetches them, and leave it first.

*Read-ahead* (``read_ahead=True``, what containers use): a read of a Tier-2 chunk starts
loading the segment's next ``READ_AHEAD_CHUNKS`` chunks in the background (Pravega's read index
does the same with its storage read-ahead), so a reader catching up from Tier-2 finds them in
the cache instead of waiting a Tier-2 round trip per chunk. A load, started by a read or by
read-ahead, is shared: a read of a chunk being loaded waits for that load, so no chunk is read
twice at once. Loaded chunks go through the same bounded cache, and no read-ahead starts while
loads of more than a quarter of ``cache_bytes_max`` are under way (so read-ahead cannot flush
the cache by itself). A failed read-ahead is dropped (the read that needs the chunk loads it
again and raises); a chunk evicted (truncated, deleted) while loading is not cached.

Every Tier-2 read is checked (length and CRC, :func:`chunk_layout.read_chunk`), so
damage is a :class:`DataCorruptionError` naming the chunk. Tier-2 I/O runs through
the container's :class:`~pravega_ray.timing.Scheduler`; everything else is plain
memory work. Not thread-safe: the container's event loop owns it.
"""

from __future__ import annotations

import asyncio
import bisect
from collections import OrderedDict
from dataclasses import dataclass, field

from pravega_ray.constants import READ_BYTES_MAX, READ_WAIT_S_MAX
from pravega_ray.contracts.segment_store import ReadResult
from pravega_ray.errors import DataCorruptionError, InvalidArgumentError
from pravega_ray.invariant import invariant
from pravega_ray.segmentstore.chunk_layout import ChunkRef, read_chunk
from pravega_ray.segmentstore.container_metadata import SegmentMetadata, wait_on
from pravega_ray.storage.chunk_storage import ChunkStorage
from pravega_ray.timing import Scheduler

__all__ = ["ReadIndex"]

READ_AHEAD_CHUNKS = 2
"""Chunks a read of a Tier-2 chunk has loaded ahead of it (read-ahead), at most."""


@dataclass(slots=True)
class _UnflushedEntries:
    offsets: list[int] = field(default_factory=list)
    entries: list[bytes] = field(default_factory=list)


class ReadIndex:
    def __init__(
        self,
        cache_bytes_max: int,
        storage: ChunkStorage,
        scheduler: Scheduler,
        *,
        read_ahead: bool = False,
    ) -> None:
        self._segments: dict[str, _UnflushedEntries] = {}
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cache_bytes = 0
        self._cache_bytes_max = cache_bytes_max
        self._storage = storage
        self._scheduler = scheduler
        self._read_ahead = read_ahead
        # Chunk name -> its load under way (by a read or read-ahead); at most one per chunk.
        self._loading: dict[str, asyncio.Future[bytes]] = {}
        self._loading_bytes = 0
        # Reads served from memory / that waited for Tier-2 (the read cache metrics).
        self.hits = 0
        self.misses = 0

    # --- updates (called as operations become durable) -------------------------------------
    def add_segment(self, segment: str) -> None:
        self._segments.setdefault(segment, _UnflushedEntries())

    def append(self, segment: str, offset: int, data: bytes) -> None:
        index = self._segments[segment]
        if index.entries:
            invariant(
                index.offsets[-1] + len(index.entries[-1]) == offset,
                f"read index gap in {segment} at {offset}",
            )
        index.offsets.append(offset)
        index.entries.append(data)

    def chunk_flushed(self, segment: str, chunk: ChunkRef, data: bytes | None) -> None:
        """Drop the unflushed entries ``chunk`` now holds in Tier-2; cache ``data`` if given."""
        index = self._segments[segment]
        # Entries wholly inside the chunk: find how many with a bisect, drop them at once.
        covered = bisect.bisect_right(index.offsets, chunk.end) - 1
        if covered >= 0 and index.offsets[covered] + len(index.entries[covered]) > chunk.end:
            covered -= 1
        del index.offsets[: covered + 1]
        del index.entries[: covered + 1]
        if index.entries:
            # Equal in steady state; above only while recovery from a checkpoint replays the
            # chunks of data whose appends were truncated from the log.
            invariant(index.offsets[0] >= chunk.end, f"chunk splits an entry in {segment}")
        if data is not None:
            self._put_chunk(chunk.name, data)

    def has_segment(self, segment: str) -> bool:
        """Whether ``segment`` is indexed (False once it was deleted or merged away)."""
        return segment in self._segments

    def remove_segment(self, segment: str) -> None:
        """Forget a deleted or merged segment's unflushed entries."""
        self._segments.pop(segment)

    def evict(self, chunk_names: list[str]) -> None:
        """Drop these chunks from the cache (truncated or deleted)."""
        for name in chunk_names:
            self._loading.pop(name, None)  # a load under way is not cached when it ends
            data = self._cache.pop(name, None)
            if data is not None:
                self._cache_bytes -= len(data)

    # --- flush support ----------------------------------------------------------------------
    def unflushed(self, segment: str, bytes_max: int) -> tuple[int, list[bytes]]:
        """Leading unflushed entries totalling at most ``bytes_max`` (at least one if any)."""
        index = self._segments[segment]
        if not index.entries:
            return 0, []
        taken: list[bytes] = []
        total = 0
        for entry in index.entries:
            if taken and total + len(entry) > bytes_max:
                break
            taken.append(entry)
            total += len(entry)
        return index.offsets[0], taken

    def first_unflushed_offset(self, segment: str) -> int | None:
        index = self._segments[segment]
        return index.offsets[0] if index.entries else None

    # --- reads ------------------------------------------------------------------------------
    async def read(
        self, state: SegmentMetadata, offset: int, max_bytes: int, wait_s: float
    ) -> ReadResult:
        """Read durable bytes from ``offset`` (Pravega's read index, future reads included).

        Returns at once when data is available (up to ``max_bytes``, possibly fewer,
        e.g. at a chunk boundary). At the tail it waits up to ``wait_s`` (capped at
        ``READ_WAIT_S_MAX``) for data or a seal; then it returns empty data.
        ``end_of_segment`` is set when the segment is sealed and the read reaches its
        end. Raises InvalidArgumentError for an offset beyond the segment's length and
        SegmentTruncatedError below its start. Arguments were type-checked by the caller.
        """
        max_bytes = min(max_bytes, READ_BYTES_MAX)
        if offset > state.length:
            raise InvalidArgumentError(
                f"read of {state.name} at {offset} is past its length {state.length}"
            )
        state.check_not_truncated(offset)
        if offset == state.length and not state.sealed and wait_s > 0:
            await wait_on(state.data_waiters, min(wait_s, READ_WAIT_S_MAX))
        if offset == state.length:
            return ReadResult(offset, b"", state.sealed, state.length)
        data = await self._read_available(state, offset, max_bytes)
        end = offset + len(data)
        return ReadResult(offset, data, state.sealed and end == state.length, state.length)

    async def read_range(self, state: SegmentMetadata, offset: int, length: int) -> bytes:
        """Exactly the durable bytes ``[offset, offset + length)``.

        Raises InvalidArgumentError for a range past the durable length and
        SegmentTruncatedError below the start offset.
        """
        if offset + length > state.length:
            raise InvalidArgumentError(
                f"range [{offset}, {offset + length}) is outside {state.name} "
                f"(length {state.length})"
            )
        state.check_not_truncated(offset)
        return await self.read_bytes(state, offset, offset + length)

    async def _read_available(self, state: SegmentMetadata, offset: int, max_bytes: int) -> bytes:
        """Durable bytes of the segment from ``offset``: at least one, at most ``max_bytes``.

        Stops at a chunk's end or at the end of the unflushed entries. The caller has
        checked that ``offset`` is below the durable length and not truncated.
        """
        chunk = state.chunks.chunk_at(offset)
        if chunk is None:
            self.hits += 1
            return self._read_unflushed(state.name, offset, max_bytes)
        data = self._cache.get(chunk.name)
        if data is not None:
            self.hits += 1
            self._cache.move_to_end(chunk.name)
        else:
            self.misses += 1
            loading = self._loading.get(chunk.name)
            if loading is None:
                loading = self._start_load(state.name, chunk)
            try:
                # Shielded: a cancelled read (its caller gone) does not cancel a shared load.
                data = await asyncio.shield(loading)
            except DataCorruptionError:
                # The segment was truncated past this chunk while it loaded, and the chunk
                # deleted: the bytes are gone by the user's wish, not damaged.
                state.check_not_truncated(offset)
                raise
        start = offset - chunk.offset
        if self._read_ahead:
            self._load_ahead(state, chunk)
        return data[start : start + max_bytes]

    def _load_ahead(self, state: SegmentMetadata, chunk: ChunkRef) -> None:
        """Start loading those of the ``READ_AHEAD_CHUNKS`` chunks after ``chunk`` neither
        cached nor loading (stopping at the first not in Tier-2 yet, or at the bound on
        bytes loading)."""
        end = chunk.end
        for _ in range(READ_AHEAD_CHUNKS):
            following = state.chunks.chunk_at(end)
            if following is None:
                return
            if self._loading_bytes + following.length > self._cache_bytes_max // 4:
                return
            if following.name not in self._cache and following.name not in self._loading:
                self._start_load(state.name, following)
            end = following.end

    def _start_load(self, segment: str, chunk: ChunkRef) -> asyncio.Future[bytes]:
        """Load ``chunk`` in the background into the cache; the future has its bytes."""
        loading: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        # A read-ahead's failure nobody waits for is not an "exception never retrieved".
        loading.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._loading[chunk.name] = loading
        self._loading_bytes += chunk.length
        self._scheduler.start(self._load(segment, chunk, loading), f"load {chunk.name}")
        return loading

    async def _load(self, segment: str, chunk: ChunkRef, loading: asyncio.Future[bytes]) -> None:
        try:
            data = await self._scheduler.run_blocking(read_chunk, self._storage, segment, chunk)
        except asyncio.CancelledError:  # the loop is closing: so are its readers
            loading.cancel()
            raise
        except Exception as e:  # handed to the readers waiting for it (none: dropped)
            if not loading.done():
                loading.set_exception(e)
        else:
            if self._loading.get(chunk.name) is loading:  # not evicted meanwhile
                self._put_chunk(chunk.name, data)
            if not loading.done():
                loading.set_result(data)
        finally:
            self._loading_bytes -= chunk.length
            if self._loading.get(chunk.name) is loading:
                del self._loading[chunk.name]

    async def read_bytes(self, state: SegmentMetadata, offset: int, end: int) -> bytes:
        """Exactly the bytes ``[offset, end)``, unchecked (merges copy a sealed source)."""
        parts = []
        while offset < end:
            # Each piece may await a chunk's load, meanwhile retention may truncate past the
            # next: then the bytes are gone by the user's wish (found by the chaos run).
            state.check_not_truncated(offset)
            piece = await self._read_available(state, offset, end - offset)
            invariant(piece, f"no bytes readable at {offset} of {state.name}")
            parts.append(piece)
            offset += len(piece)
        return b"".join(parts)

    def _read_unflushed(self, segment: str, offset: int, max_bytes: int) -> bytes:
        """Contiguous bytes from memory starting at ``offset`` (which must not be in Tier-2)."""
        index = self._segments[segment]
        i = bisect.bisect_right(index.offsets, offset) - 1
        if i < 0:
            return b""
        parts: list[bytes] = []
        remaining = max_bytes
        skip = offset - index.offsets[i]
        while i < len(index.entries) and remaining > 0:
            entry = index.entries[i]
            piece = entry[skip : skip + remaining] if (skip or len(entry) > remaining) else entry
            parts.append(piece)
            remaining -= len(piece)
            skip = 0
            i += 1
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _put_chunk(self, name: str, data: bytes) -> None:
        if name in self._cache:
            return
        self._cache[name] = data
        self._cache_bytes += len(data)
        while self._cache_bytes > self._cache_bytes_max and len(self._cache) > 1:
            _, evicted = self._cache.popitem(last=False)
            self._cache_bytes -= len(evicted)

    @property
    def cache_bytes(self) -> int:
        return self._cache_bytes
