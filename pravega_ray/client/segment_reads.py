"""A reader's state in each segment it owns, how it goes on past truncated bytes, and the
successors of a segment it finished.

Split from :mod:`reader` (which uses both); nothing here is public.
"""

from __future__ import annotations

import logging
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field

from pravega_ray.client.connection import ControllerConnection
from pravega_ray.client.event_framing import FrameAssembler
from pravega_ray.contracts.segment_store import ReadResult
from pravega_ray.errors import (
    PravegaError,
    SegmentNotFoundError,
    StreamNotFoundError,
    TruncatedDataError,
)
from pravega_ray.naming import parse_segment_name, stream_segment_name

log = logging.getLogger("pravega_ray.client.reader")


@dataclass
class SegmentReadState:
    """A reader's state in one segment it owns (the reader's to change, from one thread)."""

    name: str
    next_offset: int  # offset just past the last event handed out
    fetch_offset: int  # where the next read starts
    events: deque[tuple[int, bytes]] = field(default_factory=deque)
    # A frame cut by a read's end; a large event is assembled in place.
    frames: FrameAssembler = field(default_factory=FrameAssembler)
    pending: Future[ReadResult] | None = None
    end_of_segment: bool = False
    end_offset: int | None = None  # the group's end cut in this segment, if any


def skip_truncated(
    segment: SegmentReadState,
    error: PravegaError,
    controller: ControllerConnection,
    reader_id: str,
) -> TruncatedDataError:
    """The next bytes of ``segment`` were truncated away (``error``, a SegmentTruncatedError
    or SegmentNotFoundError): move ``segment`` on to its start offset (a segment deleted by
    a truncation: as read to its end, so its successors follow), drop what was buffered,
    log what was skipped, and return the TruncatedDataError that describes it (the reader
    raises it if its group says so).

    A segment gone because its stream was deleted: StreamNotFoundError (from the
    controller), and ``segment`` is left as it was.
    """
    if isinstance(error, SegmentNotFoundError):
        name = parse_segment_name(segment.name)
        controller.get_stream_info(name.scope, name.stream)  # StreamNotFoundError
        start = None
    else:
        start = int(getattr(error, "start_offset", segment.fetch_offset))
    log.warning(
        "reader %s: %s was truncated; skipping from offset %d to %s",
        reader_id,
        segment.name,
        segment.next_offset,
        "its end (deleted)" if start is None else start,
    )
    truncation = TruncatedDataError(
        f"events of {segment.name} from offset {segment.next_offset} were truncated "
        "away; reading goes on from the segment's start",
        segment=segment.name,
        offset=segment.next_offset,
        start_offset=start,
        reader_id=reader_id,
    )
    segment.events.clear()
    segment.frames = FrameAssembler()
    if start is None:
        segment.end_of_segment = True
    else:
        segment.next_offset = segment.fetch_offset = max(start, segment.next_offset)
    return truncation


def successors_by_name(controller: ControllerConnection, segment: str) -> dict[str, list[str]]:
    """Successors of ``segment`` (a segment name; read to its end), each with all its
    predecessors, by name, as the controller has them (none if the stream was deleted)."""
    name = parse_segment_name(segment)
    try:
        found = controller.get_successors(name.scope, name.stream, name.segment_id)
    except StreamNotFoundError:  # deleted since: nothing follows it
        found = {}
    return {
        successor.name: [stream_segment_name(name.scope, name.stream, p) for p in predecessors]
        for successor, predecessors in found.items()
    }
