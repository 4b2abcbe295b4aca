"""The simulation's clients: the project's real writer, and a reader of the segments.

* :class:`SimWriter` drives the real :class:`~pravega_ray.client.writer.EventStreamWriter`
  (its pump started on no thread: the simulator calls ``pump_round``), on the virtual
  clock, with a seeded writer id, through the simulated network. Its reconnect backoff
  sleeps through :class:`SimThreadScheduler`, which lets the world run meanwhile.
  Its controller is the simulation's real one (``sim/controller.py``): a sealed segment
  makes it ask ``get_successors`` and re-route its pending events, as on a cluster.
* :class:`SimReader` reads every segment of the stream from its start through the network,
  one read per segment outstanding, framing events with the project's
  :class:`~pravega_ray.client.event_framing.FrameAssembler`, as the real reader's
  ``_issue_read``/``_collect_reads`` do, and follows scales by the reader group's rule (a
  successor only once all its predecessors are read to their ends). It is one reader
  without a group (the real reader's group state is not simulated). A read unanswered for
  ``READ_TIMEOUT_S`` is abandoned and sent again (a dropped reply).

Events are ``b"<key>:<seq>"``: their routing key and their number within the key.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from pravega_ray.client.event_framing import FrameAssembler
from pravega_ray.client.serializers import BytesSerializer
from pravega_ray.client.writer import EventStreamWriter, WriteFuture
from pravega_ray.client.writer_config import WriterConfig
from pravega_ray.contracts.records import SegmentRange
from pravega_ray.contracts.segment_store import ReadResult
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.errors import PravegaError, RetriableError
from pravega_ray.naming import parse_segment_name, stream_segment_name
from pravega_ray.timing import ManualClock

__all__ = [
    "READ_TIMEOUT_S",
    "SCOPE",
    "STREAM",
    "SimReader",
    "SimThreadScheduler",
    "SimWriter",
    "SuccessorSource",
]

SCOPE = "sim"
STREAM = "s"
READ_BYTES = 256
"""Bytes a read asks for: small, so events are cut between reads."""
READ_WAIT_S = 0.5
"""How long a read waits at the tail of a segment (virtual seconds)."""
READ_TIMEOUT_S = 5.0
"""A read unanswered this long (virtual seconds) is sent again."""


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
        controller: Any,
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
            controller,  # the calls the writer makes: get_stream_info, get_successors
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
    ended: bool = False  # a read reached the end of the sealed segment

    def done(self) -> bool:
        """Read to its end (sealed) and every event of it handed out."""
        return (
            self.ended
            and not self.events
            and self.frames.buffered_bytes == 0
            and self.next_offset == self.fetch_offset
        )


class SuccessorSource(Protocol):
    """The controller call the reader makes (``SimController`` provides it)."""

    def get_successors(
        self, scope: str, stream: str, segment_id: int
    ) -> dict[SegmentRange, list[int]]: ...


class SimReader:
    """Reads the stream's segments, epoch after epoch; see the module docstring.

    Across epochs it follows the reader group's rule (``contracts/reader_group_state.py``,
    Pravega's ``segmentCompleted``/``futureSegments``): a segment read to its end with
    every event handed out is *completed*; its successors, asked of the controller, wait
    as *future* segments until every one of their predecessors is completed
    (:meth:`release`), and only then are read, from offset 0. So per routing key, events
    come in the order written across scales.

    ``on_event(segment, offset, payload)`` gets each event handed out; ``on_error``
    each error a real reader would raise to its application.
    """

    def __init__(
        self,
        segments: tuple[str, ...],
        connection: SegmentStoreClient,
        controller: SuccessorSource,
        clock: ManualClock,
        on_event: Callable[[str, int, bytes], None],
        on_error: Callable[[str, BaseException], None],
    ) -> None:
        self.reading: dict[str, _Segment] = {name: _Segment(name) for name in segments}
        self.completed: set[str] = set()
        self.future: dict[str, list[str]] = {}  # successor -> all its predecessors
        self._connection = connection
        self._controller = controller
        self._clock = clock
        self._on_event = on_event
        self._on_error = on_error
        self._turn = 0  # where the round robin of handing out events starts

    @property
    def segments(self) -> list[_Segment]:
        """The segments being read, in the order they were started."""
        return list(self.reading.values())

    def due(self) -> bool:
        """Whether :meth:`step` has something to do now."""
        now = self._clock.monotonic()
        for s in self.reading.values():
            if s.events or s.done():
                return True
            if not s.ended and (s.pending is None or s.pending.done()):
                return True
            if s.pending is not None and now - s.sent_at >= READ_TIMEOUT_S:
                return True
        return False

    def next_timeout(self) -> float | None:
        """When the earliest outstanding read times out (virtual seconds)."""
        times = [s.sent_at + READ_TIMEOUT_S for s in self.reading.values() if s.pending is not None]
        return min(times) if times else None

    def step(self, events_max: int) -> int:
        """Collect answers, hand out up to ``events_max`` events, complete the segments
        read to their ends (asking the controller for their successors: the world runs
        meanwhile), start the successors released, send reads; events out."""
        now = self._clock.monotonic()
        for s in self.segments:
            if s.pending is not None and s.pending.done():
                self._collect(s, s.pending)
            elif s.pending is not None and now - s.sent_at >= READ_TIMEOUT_S:
                s.pending = None
                self.retry(s)
        out = 0
        segments = self.segments
        if segments:  # round robin, one event a segment at a time, as the real reader
            self._turn = (self._turn + 1) % len(segments)
            segments = segments[self._turn :] + segments[: self._turn]
        while out < events_max and any(s.events for s in segments):
            for s in segments:
                if s.events and out < events_max:
                    offset, payload = s.events.popleft()
                    s.next_offset = offset + 8 + len(payload)
                    self._on_event(s.name, offset, payload)
                    out += 1
        for s in self.segments:
            if s.done():
                self._complete(s)
        for name in self.release():
            del self.future[name]
            self.reading[name] = _Segment(name)
        for s in self.segments:
            if s.pending is None and not s.events and not s.ended:
                self._issue(s)
        return out

    def _complete(self, s: _Segment) -> None:
        """Ask for ``s``'s successors; once known, ``s`` is completed (a controller that
        cannot answer now is asked again at the next step)."""
        name = parse_segment_name(s.name)
        try:
            found = self._controller.get_successors(name.scope, name.stream, name.segment_id)
        except RetriableError:
            return
        except PravegaError as e:  # a real reader raises it to its application
            self._on_error(s.name, e)
            return
        for successor, predecessors in found.items():
            known = successor.name in self.reading or successor.name in self.completed
            if not known and successor.name not in self.future:
                self.future[successor.name] = sorted(
                    stream_segment_name(name.scope, name.stream, p) for p in predecessors
                )
        del self.reading[s.name]
        self.completed.add(s.name)

    def release(self) -> list[str]:
        """The future segments whose predecessors are all completed (Pravega's rule), in
        name order."""
        return sorted(
            successor
            for successor, predecessors in self.future.items()
            if all(p in self.completed for p in predecessors)
        )

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
        if result.end_of_segment:
            s.ended = True
        elif result.data:  # read ahead while these events are handed out, as the reader does
            self._issue(s)

    def retry(self, s: _Segment) -> None:
        """A read failed or was abandoned: the next one starts where this one did."""

    def caught_up(self, segments: dict[str, tuple[int, bool]]) -> bool:
        """Every segment of ``segments`` (name -> durable length, sealed) read: a sealed one
        completed, an open one read to its length with every event handed out; and no
        successor waiting."""
        if self.future:
            return False
        for name, (length, sealed) in segments.items():
            if name in self.completed:
                continue
            s = self.reading.get(name)
            if s is None or sealed:
                return False
            if not (
                s.fetch_offset >= length
                and not s.events
                and s.frames.buffered_bytes == 0
                and s.next_offset == s.fetch_offset
            ):
                return False
        return True
