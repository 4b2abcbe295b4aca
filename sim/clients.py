"""The simulation's clients: the project's real writer, and a reader of the segments.

* :class:`SimWriter` drives the real :class:`~pravega_ray.client.writer.EventStreamWriter`
  (its pump started on no thread: the simulator calls ``pump_round``), on the virtual
  clock, with a seeded writer id, through the simulated network. Its reconnect backoff
  sleeps through :class:`SimThreadScheduler`, which lets the world run meanwhile.
* :class:`SimReader` reads every segment of the stream from its start through the network,
  one read per segment outstanding, framing events with the project's
  :class:`~pravega_ray.client.event_framing.FrameAssembler`, as the real reader's
  ``_issue_read``/``_collect_reads`` do (the real reader needs a reader group, hence the
  controller's table segments: not part of this slice). A read unanswered for
  ``READ_TIMEOUT_S`` is abandoned and sent again (a dropped reply).

Events are ``b"<key>:<seq>"``: their routing key and their number within the key.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from pravega_ray.client.event_framing import FrameAssembler
from pravega_ray.client.serializers import BytesSerializer
from pravega_ray.client.writer import EventStreamWriter, WriteFuture
from pravega_ray.client.writer_config import WriterConfig
from pravega_ray.contracts.records import SegmentRange, StreamInfo, StreamState
from pravega_ray.contracts.segment_store import ReadResult
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.errors import RetriableError
from pravega_ray.naming import stream_segment_name
from pravega_ray.stream_configuration import StreamConfiguration
from pravega_ray.timing import ManualClock

__all__ = [
    "READ_TIMEOUT_S",
    "FixedStreamController",
    "SimReader",
    "SimThreadScheduler",
    "SimWriter",
    "stream_segments",
]

SCOPE = "sim"
STREAM = "s"
READ_BYTES = 256
"""Bytes a read asks for: small, so events are cut between reads."""
READ_WAIT_S = 0.5
"""How long a read waits at the tail of a segment (virtual seconds)."""
READ_TIMEOUT_S = 5.0
"""A read unanswered this long (virtual seconds) is sent again."""


def stream_segments(count: int) -> tuple[SegmentRange, ...]:
    """``count`` segments splitting the key space [0, 1) evenly."""
    return tuple(
        SegmentRange(
            SCOPE, STREAM, i, stream_segment_name(SCOPE, STREAM, i), i / count, (i + 1) / count
        )
        for i in range(count)
    )


class FixedStreamController:
    """The controller as the writer sees it: one active stream whose segments never change."""

    def __init__(self, segments: tuple[SegmentRange, ...]) -> None:
        self._info = StreamInfo(
            SCOPE, STREAM, StreamState.ACTIVE, StreamConfiguration(), 0, segments, 0
        )

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        return self._info

    def get_successors(self, scope: str, stream: str, segment_id: int) -> dict[Any, Any]:
        return {}  # no segment is ever sealed in this slice


class SimThreadScheduler:
    """The writer's ThreadScheduler: starts no pump; a sleep lets the world run that long."""

    def __init__(self, sleep: Callable[[float], None]) -> None:
        self._sleep = sleep

    def start(self, run: Callable[[], None], name: str) -> None:
        return None

    def sleep(self, seconds: float) -> None:
        self._sleep(seconds)


class SimWriter:
    """The real writer of ``b"<key>:<seq>"`` events; reports each event's outcome."""

    def __init__(
        self,
        controller: FixedStreamController,
        connection: SegmentStoreClient,
        config: WriterConfig,
        clock: ManualClock,
        rng: Any,
        scheduler: SimThreadScheduler,
        on_outcome: Callable[[str, int, BaseException | None], None],
    ) -> None:
        self.writer: EventStreamWriter[bytes] = EventStreamWriter(
            SCOPE,
            STREAM,
            BytesSerializer(),
            controller,  # type: ignore[arg-type]  # the calls the writer makes
            connection,
            config,
            clock=clock,
            rng=rng,
            scheduler=scheduler,
        )
        self._clock = clock
        self._on_outcome = on_outcome
        self.next_pump_at = 0.0  # the pump has work from then on (0: at once)
        self.pending: dict[tuple[str, int], WriteFuture] = {}

    def write(self, key: str, seq: int) -> None:
        future = self.writer.write_event(f"{key}:{seq}".encode(), key)
        self.pending[(key, seq)] = future
        future.add_done_callback(lambda f: self._done(key, seq, f))
        self.wake()

    def _done(self, key: str, seq: int, future: WriteFuture) -> None:
        self.pending.pop((key, seq), None)
        self._on_outcome(key, seq, future.exception())

    def wake(self) -> None:
        """Something arrived (an answer, an event): the pump has work now."""
        self.next_pump_at = min(self.next_pump_at, self._clock.monotonic())

    def pump(self) -> None:
        """One round of the writer's pump (its reconnects may let the world run meanwhile)."""
        wait_s = self.writer.pump_round()
        now = self._clock.monotonic()
        self.next_pump_at = float("inf") if wait_s is None else now + wait_s


@dataclass
class _Segment:
    name: str
    next_offset: int = 0  # just past the last event handed out
    fetch_offset: int = 0  # where the next read starts
    events: deque[tuple[int, bytes]] = field(default_factory=deque)
    frames: FrameAssembler = field(default_factory=FrameAssembler)
    pending: Future[ReadResult] | None = None
    sent_at: float = 0.0


class SimReader:
    """Reads every segment from its start; see the module docstring.

    ``on_event(segment, offset, payload)`` gets each event handed out; ``on_error``
    each error a real reader would raise to its application.
    """

    def __init__(
        self,
        segments: tuple[SegmentRange, ...],
        connection: SegmentStoreClient,
        clock: ManualClock,
        on_event: Callable[[str, int, bytes], None],
        on_error: Callable[[str, BaseException], None],
    ) -> None:
        self.segments = [_Segment(s.name) for s in segments]
        self._connection = connection
        self._clock = clock
        self._on_event = on_event
        self._on_error = on_error

    def due(self) -> bool:
        """Whether :meth:`step` has something to do now."""
        now = self._clock.monotonic()
        for s in self.segments:
            if s.events or s.pending is None or s.pending.done():
                return True
            if now - s.sent_at >= READ_TIMEOUT_S:
                return True
        return False

    def next_timeout(self) -> float | None:
        """When the earliest outstanding read times out (virtual seconds)."""
        times = [s.sent_at + READ_TIMEOUT_S for s in self.segments if s.pending is not None]
        return min(times) if times else None

    def step(self, events_max: int) -> int:
        """Collect answers, hand out up to ``events_max`` events, send reads; events out."""
        now = self._clock.monotonic()
        for s in self.segments:
            if s.pending is not None and s.pending.done():
                self._collect(s, s.pending)
            elif s.pending is not None and now - s.sent_at >= READ_TIMEOUT_S:
                s.pending = None
                self.retry(s)
        out = 0
        for s in self.segments:
            while s.events and out < events_max:
                offset, payload = s.events.popleft()
                s.next_offset = offset + 8 + len(payload)
                self._on_event(s.name, offset, payload)
                out += 1
        for s in self.segments:
            if s.pending is None and not s.events:
                self._issue(s)
        return out

    def _issue(self, s: _Segment) -> None:
        s.pending = self._connection.read(s.name, s.fetch_offset, READ_BYTES, READ_WAIT_S)
        s.sent_at = self._clock.monotonic()

    def _collect(self, s: _Segment, future: Future[ReadResult]) -> None:
        s.pending = None
        error = future.exception()
        if error is not None:
            if isinstance(error, RetriableError):
                self.retry(s)
            else:
                self._on_error(s.name, error)
            return
        result = future.result()
        if result.offset != s.fetch_offset:
            return  # a stale answer
        s.events.extend(s.frames.feed(result.data, result.offset))
        s.fetch_offset = result.offset + len(result.data)
        if result.data:  # read ahead while these events are handed out, as the reader does
            self._issue(s)

    def retry(self, s: _Segment) -> None:
        """A read failed or was abandoned: the next one starts where this one did."""

    def caught_up(self, lengths: dict[str, int]) -> bool:
        """Every segment read to ``lengths`` (durable lengths) and every event handed out."""
        return all(
            s.fetch_offset >= lengths[s.name]
            and not s.events
            and s.frames.buffered_bytes == 0
            and s.next_offset == s.fetch_offset
            for s in self.segments
        )
