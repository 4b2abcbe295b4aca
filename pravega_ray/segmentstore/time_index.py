"""The per-segment time index and the event-boundary check (Pravega has neither).

*format* Both indexes are core attributes of a stream segment (role NORMAL), set by the
container itself in the same log operation as the append or merge they describe, so they
persist, recover, checkpoint and flush to the attribute index like any other attribute,
and no user update can forge them (they are outside the settable core ids):

* **time index**: core id ``TIME_INDEX_BASE + slot`` -> the offset of the first append (or
  merge) whose wall-clock time fell in ``slot`` (``slot = time_ms // TIME_INDEX_RESOLUTION_MS``).
  At most one entry per slot: the first append of a new slot adds one, later appends of
  the same slot add nothing. Core id 3 (``TIME_SLOT_LAST``) holds the newest slot indexed,
  so a recovered container never writes a second entry for a slot.
* **boundary index**: core id ``BOUNDARY_INDEX_BASE + bucket`` -> the offset of the first
  append starting in ``bucket`` (``offset // BOUNDARY_BUCKET_BYTES``); core id 4
  (``BOUNDARY_BUCKET_LAST``) holds the newest bucket indexed. A bucket crossed by one big
  append or merge has no entry.

Appends (and merged segments) always start at an event boundary, so every entry's offset
is one. Keys sort by slot / bucket (big-endian ids), so "the first entry at or after a
time" is one ordered step of the attribute index. Entries below a segment's start offset
(after a truncation) are never served: an answer is never below the start offset.
A clock that goes back indexes nothing until it passes the newest slot again.

*cleanup* Offsets only grow with slots and buckets, so the entries a truncation leaves
behind are a prefix of each index, and :meth:`TimeIndex.stale_entries` finds the ones no
lookup can need any more:

* a boundary entry whose offset is below the start offset (a walk starts at the start's
  bucket and skips values below the start);
* a time entry whose *next* entry's offset is at or below the start offset. The last entry
  at or below the start stays: a lookup of a time before its slot answers the start
  either way (``max(offset, start)``), but one in the slots after it would otherwise find
  the next entry above the start and skip the events between the start and it. Removing
  any subset of these entries leaves every answer unchanged, so a partial cleanup is safe.

The markers ``TIME_SLOT_LAST`` and ``BOUNDARY_BUCKET_LAST`` always stay. Every truncate
call of a stream segment (``SegmentContainer.truncate``, even one at or below the start
that changes nothing else) removes the stale entries it finds, in log operations of at
most ``ATTRIBUTE_UPDATES_MAX`` removals (``NULL_VALUE``), after the truncation is durable.
The rule for a container killed between a truncation and its removals (or during them):
the entries left are removed by the segment's next truncate call (a caller retrying the
truncation whose outcome it did not see makes one) or go with the segment; until then
they cost space only, never a wrong answer.
"""

from __future__ import annotations

import struct
from collections.abc import AsyncGenerator

from pravega_ray.constants import (
    EVENT_HEADER_BYTES,
    EVENT_TYPE_PLAIN,
    LARGE_EVENT_BYTES_MAX,
    TIME_INDEX_RESOLUTION_MS,
)
from pravega_ray.contracts.arguments import INT64_MAX, check_int, check_offset
from pravega_ray.contracts.attributes import NULL_VALUE, core_key
from pravega_ray.contracts.segment_store import SegmentRole
from pravega_ray.errors import DataCorruptionError, InvalidArgumentError
from pravega_ray.segmentstore.attribute_cache import AttributeCache
from pravega_ray.segmentstore.container_metadata import ContainerMetadata, SegmentMetadata
from pravega_ray.segmentstore.read_index import ReadIndex

__all__ = [
    "BOUNDARY_BUCKET_BYTES",
    "BOUNDARY_INDEX_BASE",
    "INDEX_KEYS",
    "TIME_INDEX_BASE",
    "TimeIndex",
    "TimeIndexCalls",
    "boundary_key",
    "index_entries",
    "index_keys",
    "time_key",
]

TIME_INDEX_BASE = 1 << 62
"""Core id of slot 0 of the time index (slots up to 2**62 - 1: far past any wall clock)."""
BOUNDARY_INDEX_BASE = 1 << 61
"""Core id of bucket 0 of the boundary index."""
BOUNDARY_BUCKET_BYTES = 1 << 20
"""The boundary index keeps one event boundary per this many bytes: a check walks at most
about this far (plus a single append or merge crossing buckets)."""
TIME_SLOT_LAST = core_key(3)
BOUNDARY_BUCKET_LAST = core_key(4)
INDEX_KEYS = (TIME_SLOT_LAST, BOUNDARY_BUCKET_LAST)
_SLOT_MAX = (1 << 62) - 1
_BOUNDARY_LOOKUP_BATCH = 64
_WALK_WINDOW_BYTES = BOUNDARY_BUCKET_BYTES
_STALE_PAGE_KEYS_MIN = 64
"""The first index page the cleanup reads (pages double up to the batch): a truncation
that leaves one or two stale entries reads little."""
_HEADER = struct.Struct(">II")
_NORMAL = SegmentRole.NORMAL.value


def time_key(slot: int) -> bytes:
    """The attribute key of time slot ``slot``."""
    return core_key(TIME_INDEX_BASE + slot)


def boundary_key(bucket: int) -> bytes:
    """The attribute key of boundary bucket ``bucket``."""
    return core_key(BOUNDARY_INDEX_BASE + bucket)


def index_keys(state: SegmentMetadata) -> tuple[bytes, ...]:
    """The keys an append to ``state`` must have prefetched (none unless a stream segment)."""
    return INDEX_KEYS if state.role == _NORMAL else ()


def index_entries(state: SegmentMetadata, offset: int, now_ms: int) -> dict[bytes, int]:
    """The index entries an append or merge landing at ``offset`` now adds (pending view).

    Empty for a segment that is not a stream segment, or when neither a new slot nor a new
    bucket starts. The caller has prefetched :func:`index_keys` with nothing awaited since.
    """
    if state.role != _NORMAL:
        return {}
    attributes = state.pending_attributes
    entries: dict[bytes, int] = {}
    slot = now_ms // TIME_INDEX_RESOLUTION_MS
    if slot > attributes.get(TIME_SLOT_LAST, NULL_VALUE) and slot <= _SLOT_MAX:
        entries[time_key(slot)] = offset
        entries[TIME_SLOT_LAST] = slot
    bucket = offset // BOUNDARY_BUCKET_BYTES
    if bucket > attributes.get(BOUNDARY_BUCKET_LAST, NULL_VALUE):
        entries[boundary_key(bucket)] = offset
        entries[BOUNDARY_BUCKET_LAST] = bucket
    return entries


class TimeIndex:
    """Lookups over a container's time and boundary indexes (see the module docstring)."""

    def __init__(
        self, metadata: ContainerMetadata, attributes: AttributeCache, read_index: ReadIndex
    ) -> None:
        self._metadata = metadata
        self._attributes = attributes
        self._read_index = read_index

    async def offset_at_time(self, segment: str, time_ms: int) -> int:
        """The offset of the first event appended in the first slot at or after ``time_ms``'s.

        The segment's durable length if no event was appended since; never below its start
        offset. InvalidArgumentError for a time that is not an int >= 0 or a segment that is
        not a stream segment; DataCorruptionError (naming the segment) for a damaged entry.
        """
        check_int("time_ms", time_ms, 0, INT64_MAX)
        state = self._stream_segment(segment)
        slot = min(time_ms // TIME_INDEX_RESOLUTION_MS, _SLOT_MAX)
        found = await self._attributes.first_in_range(segment, time_key(slot), time_key(_SLOT_MAX))
        state = self._stream_segment(segment)  # again, after the index I/O
        if found is None:
            return state.length
        offset = found[1]
        if not 0 <= offset <= state.length:
            raise DataCorruptionError(
                f"time index entry {found[0].hex()} of {segment} holds offset {offset}, "
                f"outside [0, {state.length}]",
                segment=segment,
            )
        return max(offset, state.start_offset)

    async def stale_entries(self, segment: str, batch: int) -> AsyncGenerator[list[bytes], None]:
        """The keys of the segment's index entries no lookup can need any more (see the
        module docstring, *cleanup*), in lists of 1 to ``batch`` keys, boundary index first.

        Judged against the start offset when the walk starts (a later truncation only makes
        more entries stale). The caller may remove each list before asking for the next.
        InvalidArgumentError if the segment is not a stream segment, SegmentNotFoundError
        if it is (or goes) missing.
        """
        check_int("batch", batch, 1, INT64_MAX)
        start = self._stream_segment(segment).start_offset
        keys: list[bytes] = []
        # Boundary entries up to the start's bucket: those below the start.
        low, high = boundary_key(0), boundary_key(start // BOUNDARY_BUCKET_BYTES)
        after: bytes | None = None
        page = min(_STALE_PAGE_KEYS_MIN, batch)
        while True:
            items, after = await self._attributes.iterate_range(segment, low, high, after, page)
            for key, offset in items:
                if offset < start:
                    keys.append(key)
                if len(keys) >= batch:
                    yield keys
                    keys = []
            if after is None:
                break
            page = min(page * 2, batch)
        # Time entries: every one followed by another at or below the start.
        low, high = time_key(0), time_key(_SLOT_MAX)
        after, last = None, None
        page = min(_STALE_PAGE_KEYS_MIN, batch)
        while True:
            items, after = await self._attributes.iterate_range(segment, low, high, after, page)
            for key, offset in items:
                if offset > start:
                    after = None  # offsets grow with slots: nothing further is stale
                    break
                if last is not None:
                    keys.append(last)
                    if len(keys) >= batch:
                        yield keys
                        keys = []
                last = key
            if after is None:
                break
            page = min(page * 2, batch)
        if keys:
            yield keys

    async def check_event_boundary(self, segment: str, offset: int) -> None:
        """InvalidArgumentError unless ``offset`` is the segment's start offset, its durable
        length or the start of an event frame between them.

        Walks frame headers in memory from the nearest indexed boundary at or below
        ``offset`` (the start offset if none), so the walk is bounded by the boundary
        index's bucket size (plus one append or merge crossing buckets). DataCorruptionError
        naming the segment for a damaged index entry or a frame header that cannot be one.
        """
        check_offset("offset", offset)
        state = self._stream_segment(segment)
        if offset in (state.start_offset, state.length):
            return
        if not state.start_offset < offset < state.length:
            raise InvalidArgumentError(
                f"offset {offset} is outside {segment} ([{state.start_offset}, {state.length}])"
            )
        position = await self._walk_frames(segment, offset)
        if position != offset:
            raise InvalidArgumentError(f"offset {offset} of {segment} is not at an event boundary")

    async def locate_offset(self, segment: str, offset: int) -> int:
        """The first event boundary at or after ``offset``: the start of the first event frame
        that starts there or later, else the segment's durable length.

        Clamped into ``[start offset, durable length]`` (an offset below the start answers
        the start, one past the length the length), so the answer is always a valid stream
        cut offset. The walk is bounded as :meth:`check_event_boundary`'s. InvalidArgumentError
        for an offset that is not an int >= 0 or a segment that is not a stream segment;
        DataCorruptionError naming the segment for a damaged index entry or frame header.
        """
        check_offset("offset", offset)
        state = self._stream_segment(segment)
        if offset <= state.start_offset:
            return state.start_offset
        if offset >= state.length:
            return state.length
        position = await self._walk_frames(segment, offset)
        length = self._stream_segment(segment).length  # again, after the walk's I/O
        if not offset <= position <= length:
            raise DataCorruptionError(
                f"{segment}: the event frames walked towards {offset} end at {position}, "
                f"not at a boundary in [{offset}, {length}]",
                segment=segment,
            )
        return position

    async def _walk_frames(self, segment: str, offset: int) -> int:
        """Walk frame headers from the nearest indexed boundary at or below ``offset`` to the
        first frame start at or after it; below ``offset`` if the bytes end first (fewer
        than a header left). DataCorruptionError for a header that cannot be a frame's."""
        position = await self._boundary_at_or_below(segment, offset)
        while position < offset:
            state = self._stream_segment(segment)
            window_end = min(state.length, position + _WALK_WINDOW_BYTES)
            if window_end <= position:
                break
            data = await self._read_index.read_range(state, position, window_end - position)
            view = memoryview(data)
            at = 0
            before = position
            while position < offset and len(view) - at >= EVENT_HEADER_BYTES:
                frame_type, length = _HEADER.unpack_from(view, at)
                if frame_type != EVENT_TYPE_PLAIN or length > LARGE_EVENT_BYTES_MAX:
                    raise DataCorruptionError(
                        f"{segment}: no event frame at {position} (type {frame_type}, "
                        f"length {length}) while walking to offset {offset}",
                        segment=segment,
                    )
                position += EVENT_HEADER_BYTES + length
                at += EVENT_HEADER_BYTES + length
            if position == before:
                break  # fewer bytes than a header left before the length: not a boundary
        return position

    async def _boundary_at_or_below(self, segment: str, offset: int) -> int:
        """The greatest indexed boundary in ``[start offset, offset]`` (the start if none)."""
        state = self._stream_segment(segment)
        start = state.start_offset
        low_bucket = start // BOUNDARY_BUCKET_BYTES
        bucket = offset // BOUNDARY_BUCKET_BYTES
        while bucket >= low_bucket:
            buckets = range(bucket, max(low_bucket, bucket - _BOUNDARY_LOOKUP_BATCH + 1) - 1, -1)
            keys = [boundary_key(b) for b in buckets]
            found = await self._attributes.get(segment, keys)
            for b, key in zip(buckets, keys, strict=True):
                value = found.get(key)
                if value is None:
                    continue
                if not b * BOUNDARY_BUCKET_BYTES <= value < (b + 1) * BOUNDARY_BUCKET_BYTES:
                    raise DataCorruptionError(
                        f"boundary index entry of bucket {b} of {segment} holds {value}, "
                        "outside its bucket",
                        segment=segment,
                    )
                if start <= value <= offset:
                    return value
            bucket = buckets[-1] - 1
        return start

    def _stream_segment(self, segment: str) -> SegmentMetadata:
        state = self._metadata.get(segment)
        if state.role != _NORMAL:
            raise InvalidArgumentError(
                f"{segment} is a {state.role} segment; only stream segments have a time index"
            )
        return state


class TimeIndexCalls:
    """The service calls a container answers from its time index (stream segments only)."""

    _time_index: TimeIndex

    def _ensure_running(self) -> None:
        raise NotImplementedError

    async def get_offset_at_time(self, segment: str, time_ms: int) -> int:
        """See TimeIndex.offset_at_time."""
        self._ensure_running()
        return await self._time_index.offset_at_time(segment, time_ms)

    async def check_event_boundary(self, segment: str, offset: int) -> None:
        """See TimeIndex.check_event_boundary."""
        self._ensure_running()
        await self._time_index.check_event_boundary(segment, offset)

    async def locate_offset(self, segment: str, offset: int) -> int:
        """See TimeIndex.locate_offset."""
        self._ensure_running()
        return await self._time_index.locate_offset(segment, offset)
