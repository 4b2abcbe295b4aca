"""Values a segment container returns. Plain frozen dataclasses: they pickle across Ray."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AppendResult:
    """A durably added append block.

    ``offset`` is where the block starts in the segment; ``length`` is the
    segment's length right after it.
    """

    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Bytes read from a segment.

    ``data`` starts at ``offset`` and is at most the bytes asked for; it is empty
    only if the wait ran out or the read is at the end of a sealed segment.
    ``end_of_segment`` is true when the segment is sealed and this read reaches
    its end (nothing more will ever be appended).
    """

    offset: int
    data: bytes
    end_of_segment: bool
    segment_length: int


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What a container knows of one segment (durable values only)."""

    name: str
    length: int
    start_offset: int
    sealed: bool
    event_count: int
    storage_length: int
    creation_time_ms: int
