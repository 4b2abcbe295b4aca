"""Read index: where each byte of each segment can be read from.

Per segment it keeps

* *unflushed entries*: durable appends not yet in Tier-2, in offset order,
  always in memory (the storage writer bounds them by flushing);
* *chunks*: ``(offset, length, chunk name)`` of the segment's Tier-2 chunks;
* a container-wide LRU *cache* of chunk contents, bounded by
  ``cache_bytes_max``; a chunk's bytes enter it when the storage writer flushes
  them or when a read fetches the chunk from Tier-2, and leave it first.

It holds no locks: the container calls it from its event loop only. Tier-2
reads are done by the caller (:meth:`chunk_to_fetch` / :meth:`put_chunk`), so
this class has no I/O and no awaits.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from dataclasses import dataclass, field

from pravega_ray.invariant import invariant


@dataclass(frozen=True, slots=True)
class ChunkRef:
    """Bytes ``[offset, offset + length)`` of a segment, in Tier-2 chunk ``name``.

    ``crc``: CRC-32 of the chunk's bytes (None for chunks from before data format 4).
    """

    offset: int
    length: int
    name: str
    crc: int | None = None

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass(slots=True)
class _SegmentIndex:
    entry_offsets: list[int] = field(default_factory=list)
    entries: list[bytes] = field(default_factory=list)
    chunk_offsets: list[int] = field(default_factory=list)
    chunks: list[ChunkRef] = field(default_factory=list)


class ReadIndex:
    def __init__(self, cache_bytes_max: int) -> None:
        self._segments: dict[str, _SegmentIndex] = {}
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cache_bytes = 0
        self._cache_bytes_max = cache_bytes_max

    # --- updates (called as operations become durable) -------------------------------------
    def add_segment(self, segment: str) -> None:
        self._segments.setdefault(segment, _SegmentIndex())

    def append(self, segment: str, offset: int, data: bytes) -> None:
        index = self._segments[segment]
        if index.entries:
            invariant(
                index.entry_offsets[-1] + len(index.entries[-1]) == offset,
                f"read index gap in {segment} at {offset}",
            )
        index.entry_offsets.append(offset)
        index.entries.append(data)

    def chunk_added(self, segment: str, chunk: ChunkRef, data: bytes | None) -> None:
        """Record a Tier-2 chunk; drop the unflushed entries it covers; cache ``data`` if given."""
        index = self._segments[segment]
        if index.chunks:
            invariant(index.chunks[-1].end == chunk.offset, f"chunk gap in {segment}")
        index.chunk_offsets.append(chunk.offset)
        index.chunks.append(chunk)
        # Entries wholly inside the chunk: find how many with a bisect, drop them at once.
        covered = bisect.bisect_right(index.entry_offsets, chunk.end) - 1
        if covered >= 0 and index.entry_offsets[covered] + len(index.entries[covered]) > chunk.end:
            covered -= 1
        del index.entry_offsets[: covered + 1]
        del index.entries[: covered + 1]
        if index.entries:
            # Equal in steady state; above only while recovery from a checkpoint replays the
            # chunks of data whose appends were truncated from the log.
            invariant(index.entry_offsets[0] >= chunk.end, f"chunk splits an entry in {segment}")
        if data is not None:
            self.put_chunk(chunk.name, data)

    def truncate(self, segment: str, offset: int) -> list[str]:
        """Forget Tier-2 chunks wholly below ``offset``; returns their names (to delete)."""
        index = self._segments[segment]
        dead = []
        count = 0
        while count < len(index.chunks) and index.chunks[count].end <= offset:
            self._evict(index.chunks[count].name)
            dead.append(index.chunks[count].name)
            count += 1
        del index.chunks[:count]
        del index.chunk_offsets[:count]
        return dead

    def remove_segment(self, segment: str) -> list[str]:
        """Forget a deleted segment; returns the names of its chunks (to delete)."""
        index = self._segments.pop(segment)
        for chunk in index.chunks:
            self._evict(chunk.name)
        return [c.name for c in index.chunks]

    def _evict(self, name: str) -> None:
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
        return index.entry_offsets[0], taken

    def first_unflushed_offset(self, segment: str) -> int | None:
        index = self._segments[segment]
        return index.entry_offsets[0] if index.entries else None

    def chunks(self, segment: str) -> list[ChunkRef]:
        return list(self._segments[segment].chunks)

    # --- reads ------------------------------------------------------------------------------
    def chunk_for(self, segment: str, offset: int) -> ChunkRef | None:
        """The Tier-2 chunk holding ``offset``, if it is below the unflushed entries."""
        index = self._segments[segment]
        i = bisect.bisect_right(index.chunk_offsets, offset) - 1
        if i >= 0 and index.chunks[i].offset <= offset < index.chunks[i].end:
            return index.chunks[i]
        return None

    def cached_chunk(self, name: str) -> bytes | None:
        data = self._cache.get(name)
        if data is not None:
            self._cache.move_to_end(name)
        return data

    def put_chunk(self, name: str, data: bytes) -> None:
        if name in self._cache:
            return
        self._cache[name] = data
        self._cache_bytes += len(data)
        while self._cache_bytes > self._cache_bytes_max and len(self._cache) > 1:
            _, evicted = self._cache.popitem(last=False)
            self._cache_bytes -= len(evicted)

    def read_unflushed(self, segment: str, offset: int, max_bytes: int) -> bytes:
        """Contiguous bytes from memory starting at ``offset`` (which must not be in Tier-2)."""
        index = self._segments[segment]
        i = bisect.bisect_right(index.entry_offsets, offset) - 1
        if i < 0:
            return b""
        parts: list[bytes] = []
        remaining = max_bytes
        skip = offset - index.entry_offsets[i]
        while i < len(index.entries) and remaining > 0:
            entry = index.entries[i]
            piece = entry[skip : skip + remaining] if (skip or len(entry) > remaining) else entry
            parts.append(piece)
            remaining -= len(piece)
            skip = 0
            i += 1
        return parts[0] if len(parts) == 1 else b"".join(parts)

    @property
    def cache_bytes(self) -> int:
        return self._cache_bytes
