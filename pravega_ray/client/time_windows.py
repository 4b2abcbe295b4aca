"""A reader's time windows (``reader.get_current_time_window``; Pravega's
``WatermarkReaderImpl``, semantics in ``contracts/watermarks.py``).

Per stream of the group: the watermarks read from the stream's mark segment (from where the
last read ended, at most every ``MARKS_REFRESH_S``), and the group's position, made of the
offsets in the group's state as this reader last synced it (every reader's segments, as
each last reported them: behind or at where they are, so the window errs late, never
early) with this reader's own next offsets over them. A watermark is passed once that
position is nowhere behind its cut; the window is the last passed one's lower bound and
the newest unpassed one's upper bound.

Key ranges of the group's segments are asked of the controller once per epoch; the mark
segment's name once per stream (it depends on the stream's creation time). A mark segment
not there yet (no watermark emitted) is a window of (None, None). A damaged watermark is a
DataCorruptionError naming the mark segment and offset; the reader itself reads on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.contracts.reader_group_state import ReaderGroupState
from pravega_ray.contracts.watermarks import (
    TimeWindow,
    WindowTracker,
    mark_segment_name,
    read_watermarks,
)
from pravega_ray.errors import InvalidArgumentError, SegmentNotFoundError
from pravega_ray.naming import (
    parse_scoped_stream,
    parse_segment_name,
    segment_epoch,
)
from pravega_ray.stream_cut import StreamCut
from pravega_ray.timing import Clock

__all__ = ["MARKS_REFRESH_S", "TimeWindows", "window_at_cut"]

log = logging.getLogger(__name__)

MARKS_REFRESH_S = 0.1
"""A reader reads a stream's mark segment at most this often (its windows move no faster)."""
_READ_BYTES = 1 << 20
_CALL_TIMEOUT_S = 60.0


class _Stream:
    def __init__(self, scope: str, stream: str) -> None:
        self.scope, self.stream = scope, stream
        self.tracker = WindowTracker()
        self.segment: str | None = None
        self.offset = 0
        self.fetched = float("-inf")
        self.ranges: dict[int, tuple[float, float]] = {}
        self.epochs: set[int] = set()


class TimeWindows:
    """The time windows of one reader (not thread-safe: the reader's thread calls it)."""

    def __init__(
        self, controller: ControllerConnection, segments: SegmentStoreConnection, clock: Clock
    ) -> None:
        self._controller = controller
        self._segments = segments
        self._clock = clock
        self._streams: dict[str, _Stream] = {}
        self._group_streams: frozenset[str] = frozenset()
        self._group_offsets: dict[str, int] = {}

    def capture(self, state: ReaderGroupState) -> None:
        """Keep the group's streams and positions from ``state`` (inside the reader's sync:
        the state as stored by, or read for, that sync)."""
        offsets = dict(state.unassigned)
        for owned in state.assigned.values():
            offsets.update(owned)
        self._group_offsets = offsets
        self._group_streams = frozenset(state.streams)

    def reset(self) -> None:
        """Forget every window (the group was reset: its positions may have moved back)."""
        self._streams.clear()

    def window(self, scoped_stream: object, own: Iterable[tuple[str, int]]) -> TimeWindow:
        """The reader's window on ``scoped_stream`` ("scope/stream", a stream of the group);
        ``own``: this reader's (segment, next offset) pairs. InvalidArgumentError for a
        stream the group does not read."""
        if not isinstance(scoped_stream, str):
            raise InvalidArgumentError(f"a stream is named 'scope/stream', not {scoped_stream!r}")
        scope, stream = parse_scoped_stream(scoped_stream)
        if scoped_stream not in self._group_streams:
            raise InvalidArgumentError(f"the reader group does not read {scoped_stream}")
        entry = self._streams.get(scoped_stream)
        if entry is None:
            entry = self._streams[scoped_stream] = _Stream(scope, stream)
        now = self._clock.monotonic()
        if now - entry.fetched >= MARKS_REFRESH_S:
            entry.fetched = now
            _fetch(self._controller, self._segments, entry)
        if entry.tracker.waiting:
            position = self._position(entry, own)
            if position:
                entry.tracker.advance(position, entry.ranges)
        return entry.tracker.window()

    def _position(self, entry: _Stream, own: Iterable[tuple[str, int]]) -> dict[int, int]:
        """The group's position on the stream as ``{segment id: offset}`` (this reader's
        own offsets over the group's), with the key ranges of its segments loaded."""
        position: dict[int, int] = {}
        for name, offset in {**self._group_offsets, **dict(own)}.items():
            try:
                parsed = parse_segment_name(name)
            except InvalidArgumentError:
                continue
            if (parsed.scope, parsed.stream) == (entry.scope, entry.stream):
                position[parsed.segment_id] = offset
        return _with_ranges(self._controller, entry, position)


def _fetch(
    controller: ControllerConnection, segments: SegmentStoreConnection, entry: _Stream
) -> None:
    """Add the watermarks appended to the stream's mark segment since the last fetch."""
    if entry.segment is None:
        info = controller.get_stream_info(entry.scope, entry.stream)
        entry.segment = mark_segment_name(entry.scope, entry.stream, info.creation_time_ms)
    segment = entry.segment
    try:
        # The controller keeps the newest watermarks only (WATERMARK_SEGMENT_KEEP_BYTES): from
        # an offset it truncated, the read goes on at the start, and those dropped unseen here
        # leave the window without a lower bound until one kept is passed.
        for found, after in read_watermarks(
            lambda at: segments.read(segment, at, _READ_BYTES, 0.0).result(_CALL_TIMEOUT_S),
            segment,
            entry.offset,
        ):
            entry.tracker.add(found)
            entry.offset = after
    except SegmentNotFoundError:
        return  # no watermark emitted yet


def _with_ranges(
    controller: ControllerConnection, entry: _Stream, position: dict[int, int]
) -> dict[int, int]:
    """``position`` without segments whose key range stays unknown, the ranges of the others
    loaded into ``entry.ranges`` (asked of the controller once per epoch)."""
    for sid in position:
        epoch = segment_epoch(sid)
        if sid not in entry.ranges and epoch not in entry.epochs:
            entry.epochs.add(epoch)
            for r in controller.get_epoch_segments(entry.scope, entry.stream, epoch):
                entry.ranges[r.segment_id] = (r.key_low, r.key_high)
    return {sid: off for sid, off in position.items() if sid in entry.ranges}


def window_at_cut(
    controller: ControllerConnection, segments: SegmentStoreConnection, cut: StreamCut
) -> TimeWindow:
    """The window of a reader that has read everything before ``cut`` and nothing after it
    (a batch ending at ``cut``): every event after ``cut`` has a time of at least
    ``lower_ms``. Reads the stream's whole mark segment. InvalidArgumentError for a cut that
    is not a bounded StreamCut; DataCorruptionError for a damaged watermark."""
    if not isinstance(cut, StreamCut) or cut.is_unbounded:
        raise InvalidArgumentError("a time window is asked at a bounded StreamCut")
    entry = _Stream(cut.scope, cut.stream)
    _fetch(controller, segments, entry)
    entry.tracker.advance(_with_ranges(controller, entry, dict(cut.positions)), entry.ranges)
    return entry.tracker.window()
