"""The batch client: a stream's segment ranges between two cuts, each readable on its own.

Pravega's ``BatchClient`` (``getSegments(stream, fromCut, toCut)``, ``readSegment``). A
:class:`SegmentReadRange` is a frozen, picklable value naming one segment and the byte
range of it between the cuts, so ranges can be handed to other processes (Ray tasks,
Spark executors) and read there in parallel, each by its own client of the same cluster
(``pr.connect().batch_client()``); together they hold every event between the two cuts
exactly once (a segment wholly before the start cut or wholly after the end cut is left
out; a segment in both cuts is read from the start cut's offset to the end cut's).

:meth:`BatchClient.next_stream_cut` is Pravega's ``getNextStreamCut(start, approxBytes)``: a cut
about a given number of bytes after a start cut, at event boundaries (the segment store's
``locate_offset``); the Spark micro-batch source sizes its batches with it.

Ranges are event boundaries at both ends (cuts always are, and so are a segment's start
offset and its length), so :meth:`BatchClient.read_segment` parses whole frames from the
first byte and stops exactly at the last; large events come out whole.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.client.event_framing import FrameAssembler
from pravega_ray.client.event_pointers import EventPointer, fetch_event
from pravega_ray.client.serializers import BytesSerializer, Serializer, check_serializer
from pravega_ray.client.time_windows import window_at_cut
from pravega_ray.constants import CONTAINER_CALL_ATTEMPTS_MAX, READ_BYTES_MAX, READER_READ_BYTES
from pravega_ray.contracts.watermarks import TimeWindow
from pravega_ray.errors import DataCorruptionError, InvalidArgumentError, RetriableError
from pravega_ray.naming import stream_segment_name, validate_stream_name
from pravega_ray.retry import repeat_while
from pravega_ray.stream_cut import StreamCut
from pravega_ray.timing import DAEMON_THREADS, ThreadScheduler

__all__ = ["BatchClient", "SegmentReadRange"]

log = logging.getLogger(__name__)
RETRY_PAUSE_S = 0.5
CALL_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class SegmentReadRange:
    """Bytes ``[start_offset, end_offset)`` of one segment of ``scope/stream``.

    Both offsets are event boundaries. Frozen and picklable: hand it to another process.
    """

    scope: str
    stream: str
    segment_id: int
    start_offset: int
    end_offset: int

    def __post_init__(self) -> None:
        for name in ("segment_id", "start_offset", "end_offset"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(f"{name} must be an int >= 0, got {value!r}")
        if self.end_offset < self.start_offset:
            raise InvalidArgumentError(
                f"end_offset {self.end_offset} is below start_offset {self.start_offset}"
            )

    @property
    def segment(self) -> str:
        """The segment's qualified name."""
        return stream_segment_name(self.scope, self.stream, self.segment_id)

    @property
    def length(self) -> int:
        """Bytes in the range (frames included)."""
        return self.end_offset - self.start_offset


def _cut_positions(cut: StreamCut | None, scope: str, stream: str, what: str) -> dict[int, int]:
    """The cut's positions; empty for None or UNBOUNDED. InvalidArgumentError otherwise."""
    if cut is None or (isinstance(cut, StreamCut) and cut.is_unbounded):
        return {}
    if not isinstance(cut, StreamCut):
        raise InvalidArgumentError(f"{what} must be a StreamCut or None, got {type(cut).__name__}")
    if (cut.scope, cut.stream) != (scope, stream):
        raise InvalidArgumentError(f"{what} is a cut of {cut.scoped_stream}, not {scope}/{stream}")
    return cut.positions


class BatchClient:
    """Segment ranges between cuts, and reads of one range (see the module docstring); a
    call repeated while its container restarts pauses through ``scheduler``."""

    def __init__(
        self,
        controller: ControllerConnection,
        segments: SegmentStoreConnection,
        *,
        scheduler: ThreadScheduler = DAEMON_THREADS,
    ) -> None:
        self._controller = controller
        self._segments = segments
        self._scheduler = scheduler

    def _call(self, what: str, call: Any) -> Any:
        return repeat_while(
            RetriableError,
            lambda: call().result(CALL_TIMEOUT_S),
            what=what,
            log=log,
            attempts_max=CONTAINER_CALL_ATTEMPTS_MAX,
            pause_s=RETRY_PAUSE_S,
            scheduler=self._scheduler,
        )

    def _info(self, segment: str) -> Any:
        return self._call(f"get_info of {segment}", lambda: self._segments.get_info(segment))

    def segment_ranges(
        self,
        scope: str,
        stream: str,
        start_cut: StreamCut | None = None,
        end_cut: StreamCut | None = None,
    ) -> list[SegmentReadRange]:
        """Every segment range between ``start_cut`` and ``end_cut``, across epochs, in
        segment creation order.

        ``start_cut`` None or UNBOUNDED: the head; ``end_cut`` None or UNBOUNDED: the tail
        now (each segment's length when asked). A range starts at the start cut's offset for
        its segment, else at the segment's start offset; it ends at the end cut's offset,
        else at the segment's length now. Raises InvalidArgumentError (a cut of another
        stream, not a StreamCut, an end cut behind the start cut), StreamNotFoundError,
        ScopeNotFoundError, InvalidNameError.
        """
        validate_stream_name(scope, stream)
        start = _cut_positions(start_cut, scope, stream, "start_cut")
        end = _cut_positions(end_cut, scope, stream, "end_cut") or None
        if not start:  # the head: so a truncation since cannot leave a range below it
            start = self._controller.get_head_cut(scope, stream).positions
        segments = self._controller.get_segments_between(scope, stream, start, end)
        out = []
        for s in segments:
            first = start.get(s.segment_id)
            last = None if end is None else end.get(s.segment_id)
            if first is None or last is None:
                info = self._call(
                    f"get_info of {s.name}", lambda n=s.name: self._segments.get_info(n)
                )
                first = info.start_offset if first is None else max(first, info.start_offset)
                last = info.length if last is None else last
            out.append(SegmentReadRange(scope, stream, s.segment_id, first, max(first, last)))
        return out

    def read_segment(
        self, segment_range: SegmentReadRange, serializer: Serializer[Any] | None = None
    ) -> Iterator[Any]:
        """The events of ``segment_range``, in order, deserialized (raw bytes by default).

        Reads lazily, ``READER_READ_BYTES`` at a time (a large event's missing bytes at
        once). Raises SegmentTruncatedError if the range starts below the segment's start
        now, SegmentNotFoundError if the segment is gone, DataCorruptionError if the bytes
        are not whole frames ending exactly at the range's end.
        """
        if not isinstance(segment_range, SegmentReadRange):
            raise InvalidArgumentError("read_segment takes a SegmentReadRange")
        serializer = BytesSerializer() if serializer is None else serializer
        check_serializer(serializer)
        name, offset, end = (
            segment_range.segment,
            segment_range.start_offset,
            segment_range.end_offset,
        )
        assembler = FrameAssembler()
        while offset < end:
            want = min(
                end - offset, max(READER_READ_BYTES, assembler.missing_bytes), READ_BYTES_MAX
            )
            result = self._call(
                f"read of {name}",
                lambda at=offset, n=want: self._segments.read(name, at, n, 0.0),
            )
            data = result.data[: end - offset]
            if not data:
                raise DataCorruptionError(
                    f"{name} ends at {result.segment_length}, before the range's end {end}",
                    segment=name,
                )
            for _, payload in assembler.feed(data, offset):
                yield serializer.deserialize(payload)
            offset += len(data)
        if assembler.buffered_bytes:
            raise DataCorruptionError(
                f"{name}: the range [{segment_range.start_offset}, {end}) ends inside an event",
                segment=name,
            )

    def fetch_event(self, pointer: EventPointer, serializer: Serializer[Any] | None = None) -> Any:
        """The one event ``pointer`` points at (``EventRead.event_pointer``), deserialized
        (raw bytes by default). Raises NoSuchEventError (its segment is gone, the pointer
        goes past the segment's end, or no event of its length starts at its offset),
        SegmentTruncatedError (truncated since), InvalidArgumentError (not an
        EventPointer), DataCorruptionError for damaged bytes (``client/event_pointers.py``)."""
        serializer = BytesSerializer() if serializer is None else serializer
        check_serializer(serializer)
        return serializer.deserialize(fetch_event(self._segments, self._call, pointer))

    def time_window(self, cut: StreamCut) -> TimeWindow:
        """Where a batch ending at ``cut`` stands in event time (``docs/api.md``, "Event
        time"): every event of the stream after ``cut`` has a time of at least
        ``lower_ms``, given writers that note their times honestly; None while unknown. So
        an event-time window ending at or below ``lower_ms`` can be closed once the batch
        is processed. InvalidArgumentError (not a bounded StreamCut), StreamNotFoundError,
        DataCorruptionError (a damaged watermark)."""
        return window_at_cut(self._controller, self._segments, cut)

    def next_stream_cut(self, start_cut: StreamCut, approx_bytes: int) -> StreamCut:
        """A cut about ``approx_bytes`` bytes (frames included) after ``start_cut``.

        First the start cut rolls forward over scale events: a sealed segment read to its
        end gives way to its successors (at their start offsets) once every predecessor of
        a successor is in the cut and read to its end, as a reader would. Then the bytes
        are shared out over the cut's segments, none taking more than it holds (a share a
        short segment leaves goes to the others), and each segment's end is the first event
        boundary at or after its share (``locate_offset``), so the cut is valid. Slack: when
        the segments hold at least ``approx_bytes``, the cut covers at least that many and
        at most one more event per segment beyond it (each share ends inside at most one
        event); when they hold less, it is every segment at its length (the bytes of
        successors not yet entered come in later cuts). A cut equal in position to the
        rolled start means no new data. Raises InvalidArgumentError (``approx_bytes`` not an
        int >= 1, ``start_cut`` not a bounded cut of a stream), StreamNotFoundError,
        SegmentNotFoundError (a segment truncated or deleted away).
        """
        if isinstance(approx_bytes, bool) or not isinstance(approx_bytes, int) or approx_bytes < 1:
            raise InvalidArgumentError(f"approx_bytes must be an int >= 1, got {approx_bytes!r}")
        if not isinstance(start_cut, StreamCut) or start_cut.is_unbounded:
            raise InvalidArgumentError("start_cut must be a bounded StreamCut")
        scope, stream = start_cut.scope, start_cut.stream
        positions, infos = self._roll_forward(scope, stream, start_cut.positions)
        remaining = {sid: infos[sid].length - offset for sid, offset in positions.items()}
        ends = dict(positions)
        budget = approx_bytes
        # Water-filling: smallest remainder first, each taking at most an equal share.
        order = sorted(positions, key=lambda sid: (remaining[sid], sid))
        for index, sid in enumerate(order):
            share = -(-budget // (len(order) - index))  # ceil: every segment moves if it can
            take = min(remaining[sid], share)
            budget = max(0, budget - take)
            if take == remaining[sid]:
                ends[sid] = infos[sid].length
            elif take > 0:
                name = stream_segment_name(scope, stream, sid)
                ends[sid] = self._call(
                    f"locate_offset of {name}",
                    lambda n=name, at=positions[sid] + take: self._segments.locate_offset(n, at),
                )
        return StreamCut(scope, stream, ends)

    def _roll_forward(
        self, scope: str, stream: str, positions: dict[int, int]
    ) -> tuple[dict[int, int], dict[int, Any]]:
        """``positions`` with finished sealed segments replaced by their successors, and the
        segment info of every segment of the result."""
        infos: dict[int, Any] = {}

        def info(sid: int) -> Any:
            if sid not in infos:
                infos[sid] = self._info(stream_segment_name(scope, stream, sid))
            return infos[sid]

        def finished(sid: int) -> bool:
            return sid in positions and info(sid).sealed and positions[sid] >= info(sid).length

        changed = True
        while changed:
            changed = False
            for sid in sorted(positions):
                if sid not in positions or not finished(sid):
                    continue
                successors = self._controller.get_successors(scope, stream, sid)
                ready = [
                    (successor, predecessors)
                    for successor, predecessors in successors.items()
                    if successor.segment_id not in positions
                    and all(finished(p) for p in predecessors)
                ]
                for successor, predecessors in ready:
                    for p in predecessors:
                        positions.pop(p, None)
                    positions[successor.segment_id] = info(successor.segment_id).start_offset
                    changed = True
        for sid in positions:
            info(sid)
        return positions, {sid: infos[sid] for sid in positions}
