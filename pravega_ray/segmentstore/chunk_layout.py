"""Chunk layout: which Tier-2 chunks hold which bytes of one segment.

Pravega's chunked segment storage keeps, per segment, the ordered list of its
chunks. Here that list is part of the segment's metadata
(:class:`~pravega_ray.segmentstore.container_metadata.SegmentMetadata.chunks`):
the storage writer adds a chunk when its ``ChunkAdded`` record is durable,
truncation drops the chunks wholly below the new start, a metadata-only merge
moves a sealed source's chunks behind its target's, and checkpoints record the
list. The read index asks it where an offset lives.

Invariants: chunks are contiguous (each starts where the previous ended) and
sorted by offset. Each chunk carries the CRC-32 of its bytes (None for chunks
written before data format 4), checked with its length by :func:`read_chunk`
on every read, so damage in Tier-2 is a :class:`DataCorruptionError` naming the
chunk, never wrong bytes.
"""

from __future__ import annotations

import bisect
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pravega_ray.errors import DataCorruptionError, NotFoundError
from pravega_ray.invariant import invariant
from pravega_ray.storage.chunk_storage import ChunkStorage

__all__ = ["ChunkLayout", "ChunkRef", "chunk_name", "read_chunk"]


def chunk_name(segment: str, offset: int) -> str:
    """The Tier-2 name of the chunk of ``segment`` that starts at ``offset``."""
    return f"segments/{segment}/{offset:020d}"


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


class ChunkLayout:
    """The ordered, contiguous Tier-2 chunks of one segment."""

    __slots__ = ("_chunks", "_offsets")

    def __init__(self) -> None:
        self._offsets: list[int] = []
        self._chunks: list[ChunkRef] = []

    def __iter__(self) -> Iterator[ChunkRef]:
        return iter(self._chunks)

    def __len__(self) -> int:
        return len(self._chunks)

    def add(self, chunk: ChunkRef, segment: str) -> None:
        """Append ``chunk``, which must start where the last one ends."""
        if self._chunks:
            invariant(self._chunks[-1].end == chunk.offset, f"chunk gap in {segment}")
        self._offsets.append(chunk.offset)
        self._chunks.append(chunk)

    def chunk_at(self, offset: int) -> ChunkRef | None:
        """The chunk holding byte ``offset``, or None if no chunk does."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        if i >= 0 and self._chunks[i].offset <= offset < self._chunks[i].end:
            return self._chunks[i]
        return None

    def truncate(self, offset: int) -> list[str]:
        """Forget the chunks wholly below ``offset``; returns their names (to delete)."""
        count = 0
        while count < len(self._chunks) and self._chunks[count].end <= offset:
            count += 1
        dead = [c.name for c in self._chunks[:count]]
        del self._chunks[:count]
        del self._offsets[:count]
        return dead

    def names(self) -> list[str]:
        return [c.name for c in self._chunks]

    def shifted(self, base_offset: int) -> list[ChunkRef]:
        """The chunks as they sit once this segment's bytes start at ``base_offset`` (merges)."""
        return [ChunkRef(base_offset + c.offset, c.length, c.name, c.crc) for c in self._chunks]

    def to_records(self) -> list[list[object]]:
        """``[[offset, length, name, crc], ...]``, as checkpoints store them."""
        return [[c.offset, c.length, c.name, c.crc] for c in self._chunks]

    @classmethod
    def from_records(cls, records: list[list[Any]], segment: str) -> ChunkLayout:
        """The layout a checkpoint recorded (``crc`` null or absent before data format 4)."""
        layout = cls()
        for offset, length, name, *crc in records:
            layout.add(ChunkRef(offset, length, name, crc[0] if crc else None), segment)
        return layout


def read_chunk(storage: ChunkStorage, segment: str, chunk: ChunkRef) -> bytes:
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
