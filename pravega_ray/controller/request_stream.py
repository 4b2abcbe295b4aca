"""The controller's internal request stream (Pravega's controller design, "Event Processor
Framework"; docs/design.md "The controller").

Workflow requests (scale, update, seal, delete, auto-scale reports) are events of the
stream ``_system/_requeststream``: the caller posts one, the request event processor
(``event_processor.py``) reads them in order and runs each workflow. The stream has one
segment, written with plain appends (one append per request, so a request is never torn)
and read by the processor's one reader; the processor's concurrency comes from handling
different streams' requests side by side, not from segments.

Frame of one request (big-endian)::

    offset  size  field
    0       2     magic b"RQ"
    2       4     body length (1 .. REQUEST_BYTES_MAX)
    6       4     crc32 of the body
    10      ...   body: a JSON object, e.g. {"type": "scale", "scope": .., "stream": .., ..}

Posting is at least once: a post whose outcome is unknown (the container restarted) is
repeated, so a request may appear twice; every workflow is idempotent. A frame that fails
its checks is :class:`DataCorruptionError`-logged and skipped by scanning to the next
valid frame: one bad request never stops the rest.
"""

from __future__ import annotations

import contextlib
import json
import logging
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Protocol

from pravega_ray.constants import SYSTEM_SCOPE
from pravega_ray.contracts.segment_store import ReadResult
from pravega_ray.errors import InvalidArgumentError, RetriableError, SegmentExistsError
from pravega_ray.naming import parse_segment_name, segment_id, stream_segment_name
from pravega_ray.retry import repeat_while
from pravega_ray.segmentstore.auto_scale import ScaleReport
from pravega_ray.timing import DAEMON_THREADS, SYSTEM_CLOCK, Clock, ThreadScheduler

__all__ = ["REQUEST_SEGMENT", "Request", "RequestReporter", "RequestSegments", "RequestStream"]

log = logging.getLogger(__name__)

REQUEST_STREAM = "_requeststream"
REQUEST_SEGMENT = stream_segment_name(SYSTEM_SCOPE, REQUEST_STREAM, segment_id(0, 0))
REQUEST_BYTES_MAX = 64 * 1024
POST_ATTEMPTS_MAX = 20
POST_PAUSE_S = 0.05
READ_BYTES_MAX = 1024 * 1024

_MAGIC = b"RQ"
_HEADER = struct.Struct(">2sII")


class RequestSegments(Protocol):
    """The segment calls the request stream needs (``SegmentHelper`` provides them)."""

    def create_segment(self, segment: str) -> None: ...

    def append_plain(self, segment: str, data: bytes) -> int: ...

    def read(self, segment: str, offset: int, max_bytes: int, wait_s: float) -> ReadResult: ...

    def truncate_segment(self, segment: str, offset: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Request:
    """A request read back: its body and where it is (``offset``, ``next_offset``)."""

    offset: int
    next_offset: int
    body: dict[str, Any]

    @property
    def key(self) -> str:
        """What serializes requests: the ``scope/stream`` they are about."""
        return f"{self.body.get('scope')}/{self.body.get('stream')}"


def encode(body: dict[str, Any]) -> bytes:
    data = json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8")
    if not 0 < len(data) <= REQUEST_BYTES_MAX:
        raise InvalidArgumentError(f"a request is 1 to {REQUEST_BYTES_MAX} bytes of JSON")
    return _HEADER.pack(_MAGIC, len(data), zlib.crc32(data)) + data


def decode_frames(data: bytes, base: int) -> tuple[list[Request], int]:
    """The whole frames in ``data`` (read at segment offset ``base``) and the offset after
    the last one; damaged frames are logged and skipped."""
    out: list[Request] = []
    at = 0
    while at + _HEADER.size <= len(data):
        magic, length, crc = _HEADER.unpack_from(data, at)
        end = at + _HEADER.size + length
        valid_header = magic == _MAGIC and 0 < length <= REQUEST_BYTES_MAX
        if valid_header and end > len(data):
            break  # a frame not read whole yet
        body = data[at + _HEADER.size : end] if valid_header else b""
        parsed = _parse(body) if valid_header and zlib.crc32(body) == crc else None
        if parsed is None:
            log.error(
                "request stream: damaged request at offset %d (DataCorruptionError); skipped",
                base + at,
            )
            at = _next_frame(data, at + 1)
            continue
        out.append(Request(base + at, base + end, parsed))
        at = end
    return out, base + at


def _parse(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _next_frame(data: bytes, start: int) -> int:
    found = data.find(_MAGIC, start)
    return len(data) if found < 0 else found


class RequestStream:
    """Posts requests to, and reads them from, the request stream's segment; ``scheduler``
    paces the repeats of a post whose outcome is unknown."""

    def __init__(
        self,
        segments: RequestSegments,
        segment: str = REQUEST_SEGMENT,
        *,
        scheduler: ThreadScheduler = DAEMON_THREADS,
    ) -> None:
        self._segments = segments
        self.segment = segment
        self._scheduler = scheduler
        self._created = False

    def ensure_created(self) -> None:
        if not self._created:
            with contextlib.suppress(SegmentExistsError):
                self._segments.create_segment(self.segment)
            self._created = True

    def post(self, body: dict[str, Any]) -> int:
        """Append one request durably; returns its offset. At least once (see module): an
        append whose outcome is unknown (the stream's container restarting) is repeated, up
        to ``POST_ATTEMPTS_MAX`` times ``POST_PAUSE_S`` apart, on top of what ``segments``
        repeats itself."""
        frame = encode(body)

        def append() -> int:
            self.ensure_created()
            return self._segments.append_plain(self.segment, frame)

        return repeat_while(
            RetriableError,
            append,
            what=f"posting a {body.get('type')} request",
            log=log,
            attempts_max=POST_ATTEMPTS_MAX,
            pause_s=POST_PAUSE_S,
            scheduler=self._scheduler,
        )

    def read(self, offset: int, wait_s: float) -> tuple[list[Request], int]:
        """Requests from ``offset`` (waiting up to ``wait_s`` at the tail) and the offset
        to read from next."""
        self.ensure_created()
        result = self._segments.read(self.segment, offset, READ_BYTES_MAX, wait_s)
        requests, after = decode_frames(result.data, result.offset)
        return requests, after

    def truncate(self, offset: int) -> None:
        """Drop the requests below ``offset`` (all handled and checkpointed)."""
        self._segments.truncate_segment(self.segment, offset)


class RequestReporter:
    """A container's auto-scale reporter (``segmentstore/auto_scale.ScaleReporter``): posts
    each report to the request stream, where the request event processor acts on it.

    Thread-safe (one append per report); raises if the post failed, so the container sends
    the report again next period. Reports are stamped with ``clock``'s wall time.
    """

    def __init__(self, stream: RequestStream, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._stream = stream
        self._clock = clock

    def report(self, report: ScaleReport) -> None:
        name = parse_segment_name(report.segment)
        self._stream.post(
            {
                "type": "scale_report",
                "scope": name.scope,
                "stream": name.stream,
                "segment": report.segment,
                "direction": report.direction,
                "splits": report.splits,
                "posted_ms": self._clock.wall_time_ms(),
            }
        )
