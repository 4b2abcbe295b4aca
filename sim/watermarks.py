"""Event time in the simulation (the ``watermarks`` feature): writers' times, the controller's
watermark workflow, and a reader's time window checked against every event it reads.

Semantics: ``pravega_ray/contracts/watermarks.py``. In a seed that draws the feature:

* **Event times.** Each event written gets an event time (kept by :class:`EventTime`, keyed
  by the event's ``(key, seq)``): the virtual monotonic clock in ms, and never below the
  writer's last noted time (an *honest* writer). The wall clock is not used: it jumps.
* **Notes.** While the writer has events to write or pending, noting a time is an action
  (of a weight the seed draws, 0.02 to 0.1): the writer's clock plus 0 to 20 ms ahead, with
  the real ``EventStreamWriter.note_time``. The simulation's writer starts no thread
  (``SimThreadScheduler``), so its ``MarkSender`` holds the mark; once every event it
  awaits (the writer's blocks pending at the note) is settled, sending it is an action of
  the seed's choosing (:meth:`EventTime.send_mark`): the real ``MarkSender._send``, which
  asks the writer's ``_position`` (a ``get_info`` through the network where a reconnect
  left a length unknown) and calls the controller's ``note_writer_mark`` through the
  simulated controller (ControllerUnavailableError while it is down: the mark is dropped,
  as the real sender drops it, and the next note tries again).
* **Watermark runs.** At 10 to 30 steps the seed draws (the step's action, while the
  controller is up; steps that came while the clients were blocked make one run), and in
  the settling phase as a weighted action while the writer is at work,
  ``PeriodicWatermarking.run`` runs on the simulated controller's records and segments
  (:meth:`~sim.controller.SimController.watermark`), on the virtual clock; the
  ``controller_crash`` fault strikes between its steps (``step=``), as mid-scale.
* **The window.** The reader's side keeps a :class:`WindowTracker`: the mark segment is
  read through the containers (a lossless read, from where the last one ended, every
  ``FETCH_S``), and before each event is handed out the tracker advances to the reader's
  position (every segment read at its next offset, the event's own at the event's offset;
  key ranges from the controller: the stream's first segments, and the successors the
  reader asks for). Violations: an event whose time is below the window's lower bound, a
  lower bound that moves back.
* **The final check** (once settled): the mark segment, read whole, holds watermarks whose
  lower bounds strictly increase and whose cuts never go back (``cut_le``): each emitted
  once, however the runs were killed.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING

from pravega_ray.contracts.cut_order import cut_le
from pravega_ray.contracts.records import SegmentRange
from pravega_ray.contracts.segment_store import ReadResult
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.contracts.watermarks import (
    Watermark,
    WindowTracker,
    decode_watermarks,
    mark_segment_name,
)
from pravega_ray.errors import PravegaError, RetriableError, SegmentNotFoundError
from pravega_ray.naming import parse_segment_name
from sim.clients import SCOPE, STREAM, SuccessorSource
from sim.controller import ControllerCrash
from sim.disk import sanitize

if TYPE_CHECKING:
    from pravega_ray.controller.controller import Controller
    from sim.world import World

__all__ = ["FETCH_S", "STEP_MAX", "EventTime"]

STEP_MAX = 1500
"""Watermark runs are drawn at steps from 1 to this (``DEFAULT_STEPS``)."""
FETCH_S = 0.2
"""The reader reads the mark segment at most this often (virtual seconds)."""
_READ_BYTES = 4096
_RETRY_S = 0.5
_AHEAD_MS = 20
_SETTLE_RUN_WEIGHT = 0.03


class _Ranges:
    """The reader's controller, recording the key ranges of the successors it is told of."""

    def __init__(self, controller: SuccessorSource, ranges: dict[int, tuple[float, float]]):
        self._controller = controller
        self._ranges = ranges

    def get_successors(
        self, scope: str, stream: str, segment_id: int
    ) -> dict[SegmentRange, list[int]]:
        found = self._controller.get_successors(scope, stream, segment_id)
        for r in found:
            self._ranges[r.segment_id] = (r.key_low, r.key_high)
        return found


class EventTime:
    """The ``watermarks`` feature of one run (module docstring); off if ``runs`` is 0.

    ``runs``: how many watermark runs the seed asks for (at steps drawn here, from a
    generator of the feature's own: the seed's other draws are untouched)."""

    def __init__(self, seed: int, runs: int) -> None:
        self.on = runs > 0
        rng = random.Random(f"sim-watermarks:{seed}")
        self.note_weight = rng.uniform(0.02, 0.1)
        self.run_steps = sorted(rng.randint(1, STEP_MAX) for _ in range(runs))
        self._rng = rng
        self.noted_ms = 0  # the writer's last noted time: its events' times are at least this
        self.times: dict[tuple[str, int], int] = {}
        self.ranges: dict[int, tuple[float, float]] = {}
        self.segment = ""  # the stream's mark segment (set up)
        self.tracker = WindowTracker()
        self.lower: int | None = None  # the window's lower bound at the last event read
        self._sids: dict[str, int] = {}
        self._fetch: Future[ReadResult] | None = None
        self._fetch_sent = 0.0
        self._fetch_offset = 0
        self.fetch_at = 0.0
        self.run_due_at = 0.0

    # --- setup -------------------------------------------------------------------------------
    def set_up(self, controller: Controller) -> None:
        """The mark segment's name and the stream's first segments' ranges (setup)."""
        info = controller.get_stream_info(SCOPE, STREAM)
        self.segment = mark_segment_name(SCOPE, STREAM, info.creation_time_ms)
        for r in info.segments:
            self.ranges[r.segment_id] = (r.key_low, r.key_high)

    def successors(self, controller: SuccessorSource) -> SuccessorSource:
        """The reader's controller: recording successors' ranges when the feature is on."""
        return _Ranges(controller, self.ranges) if self.on else controller

    # --- the writer --------------------------------------------------------------------------
    def on_write(self, key: str, seq: int, now_s: float) -> None:
        """Event ``key:seq`` is written now: its time (honest: at least the last noted)."""
        if self.on:
            self.times[(key, seq)] = max(self.noted_ms, int(now_s * 1000))

    def due(self, world: World) -> bool:
        """Whether a watermark run is this step's action (its step came)."""
        return self.on and _came(world, self.run_steps) and self.run_ready(world)

    def run_ready(self, world: World) -> bool:
        """The controller is up, and a run refused for now is not to be asked yet."""
        return world.controller.up and world.clock.monotonic() >= self.run_due_at

    def act(self, world: World) -> str:
        """The step's action: the watermark run whose step came (the trace's line); every
        step that came meanwhile (the clients blocked) is this one run."""
        while _came(world, self.run_steps):
            self.run_steps.pop(0)
        return self.run(world)

    def actions(self, world: World) -> list[tuple[float, Callable[[], str]]]:
        """The feature's weighted actions now (``sim/actions.py``; clients' steps only): a
        note while the writer has events to write or pending, the mark waiting sent once
        ready, the reader's mark-segment read, and in the settling phase (no drawn steps
        there) a watermark run, while the writer is at work."""
        found: list[tuple[float, Callable[[], str]]] = []
        writing = bool(world.to_write or world.writer.pending)
        if writing:
            found.append((self.note_weight, partial(self.note, world)))
        if self.mark_ready(world):
            found.append((1.0, partial(self.send_mark, world)))
        if self.fetch_due(world):
            found.append((1.0, partial(self.fetch, world)))
        if writing and not world.faulty and self.run_ready(world):
            found.append((_SETTLE_RUN_WEIGHT, partial(self.run, world)))
        return found

    def note(self, world: World) -> str:
        """The writer notes a time: its clock plus up to ``_AHEAD_MS``, never back."""
        now_ms = int(world.clock.monotonic() * 1000)
        time_ms = max(self.noted_ms, now_ms) + self._rng.randint(0, _AHEAD_MS)
        try:
            world.writer.writer.note_time(time_ms)
        except PravegaError as e:  # the writer failed: it notes nothing more
            return f"note time {time_ms}: {type(e).__name__}"
        self.noted_ms = time_ms
        world._count("notes")
        return f"note time {time_ms}"

    def mark_ready(self, world: World) -> bool:
        """A noted time waits to be sent and every event it awaits is settled."""
        marks = world.writer.writer._marks
        pending = None if marks is None else marks._pending
        return pending is not None and all(f.done() for f in pending[1])

    def send_mark(self, world: World) -> str:
        """The writer's mark thread, once: the real ``MarkSender._send`` of the mark waiting
        (its calls let the world run). An error other than a PravegaError escapes the real
        sender, whose thread would end there (seed 24: the writer's ``_position`` waits for a
        lost ``get_info`` and raises TimeoutError); it is counted (``mark_send_errors``), not
        a violation (watermarks would stall, never go wrong), and the simulated thread goes
        on."""
        marks = world.writer.writer._marks
        assert marks is not None
        with marks._cond:
            pending, marks._pending = marks._pending, None
        assert pending is not None
        sent = marks.sent
        try:
            marks._send(*pending)
        except Exception as e:  # escapes the real sender (its thread would end)
            world._count("mark_send_errors")
            return f"send mark {pending[0]}: escapes the sender ({type(e).__name__})"
        stored = marks.sent > sent
        world._count("marks_stored" if stored else "marks_dropped")
        return f"send mark {pending[0]}: {'stored' if stored else 'not stored'}"

    # --- the controller ----------------------------------------------------------------------
    def run(self, world: World) -> str:
        """One watermark run (the controller's calls let the world run); one cut short by a
        controller crash or a restarting container is the next run's to finish."""
        try:
            mark = world.controller.watermark(SCOPE, STREAM)
        except ControllerCrash as e:
            return "watermark run: " + world.crash_controller(f"at {e}")
        except RetriableError as e:  # its records' or the mark segment's container restarts
            self.run_due_at = world.clock.monotonic() + _RETRY_S
            return f"watermark run: {type(e).__name__}, again in {_RETRY_S} s"
        except PravegaError as e:
            world._violate(f"the watermark workflow failed: {sanitize(repr(e), world.root)}")
            return "watermark run fails"
        if mark is None:
            return "watermark run: none"
        world._count("watermarks")
        return f"watermark run: [{mark.lower_ms}, {mark.upper_ms}] at {_show(mark.cut)}"

    # --- the reader --------------------------------------------------------------------------
    def fetch_due(self, world: World) -> bool:
        """Whether the reader's mark-segment read is to be sent or collected now."""
        if not self.on or not (world.steps >= world.reader_from_step or not world.faulty):
            return False
        if self._fetch is not None:
            return self._fetch.done() or world.clock.monotonic() - self._fetch_sent >= 5.0
        return world.clock.monotonic() >= self.fetch_at

    def fetch(self, world: World) -> str:
        """Collect the mark segment's read (its watermarks go to the tracker), or send one."""
        now = world.clock.monotonic()
        future = self._fetch
        if future is None:
            client = SegmentStoreClient(world.network.lossless())
            self._fetch = client.read(self.segment, self._fetch_offset, _READ_BYTES, 0.0)
            self._fetch_sent = now
            return f"read marks at {self._fetch_offset}"
        self._fetch = None
        if not future.done():
            self.fetch_at = now
            return "read marks: abandoned"
        error = future.exception()
        if error is not None:
            self.fetch_at = now + FETCH_S
            if not isinstance(error, RetriableError | SegmentNotFoundError):
                world._violate(f"the mark segment cannot be read: {error!r}")
            return f"read marks: {type(error).__name__}"
        read = future.result()
        try:
            found, self._fetch_offset = decode_watermarks(
                self.segment, read.offset, read.data, read.segment_length
            )
        except PravegaError as e:
            world._violate(f"the mark segment is damaged: {e}")
            return "read marks: damaged"
        self.tracker.add(mark for _, mark in found)
        more = bool(found) and self._fetch_offset < read.segment_length
        self.fetch_at = now if more else now + FETCH_S
        return f"read {len(found)} watermarks"

    def on_event(self, world: World, segment: str, offset: int, payload: bytes) -> str | None:
        """Check one event handed out at ``segment@offset`` against the window: advanced to
        the reader's position just before it, its lower bound never back, never above the
        event's time."""
        key, _, seq = payload.decode().rpartition(":")
        time_ms = self.times.get((key, int(seq)))
        position = {self._sid(s.name): s.next_offset for s in world.reader.reading.values()}
        position[self._sid(segment)] = offset
        if self.tracker.waiting and all(sid in self.ranges for sid in position):
            try:
                self.tracker.advance(position, self.ranges)
            except KeyError:  # a segment of the stream whose range is not known (yet)
                world._count("window_unknown_ranges")
        lower = self.tracker.window().lower_ms
        if self.lower is not None and (lower is None or lower < self.lower):
            return f"the time window's lower bound moved back from {self.lower} to {lower}"
        self.lower = lower
        if lower is None or time_ms is None:
            return None
        world._count("window_checked")
        if time_ms < lower:
            return (
                f"read {key}:{seq} (event time {time_ms}) at {segment}@{offset} after the time "
                f"window's lower bound reached {lower}"
            )
        return None

    def _sid(self, name: str) -> int:
        sid = self._sids.get(name)
        if sid is None:
            sid = self._sids[name] = parse_segment_name(name).segment_id
        return sid

    def wake_times(self) -> list[float]:
        """When the feature's next timed action is due (the tick goes there)."""
        if not self.on:
            return []
        times = [self.run_due_at]
        if self._fetch is None:
            times.append(self.fetch_at)
        else:
            times.append(self._fetch_sent + 5.0)
        return times

    # --- the final check ---------------------------------------------------------------------
    def check(self, world: World) -> str | None:
        """The mark segment read whole (outside the trace, once settled): lower bounds
        strictly increase, cuts never go back (module docstring)."""
        if not self.on:
            return None
        node = world.nodes[world.network.container_of(self.segment)]
        try:
            state = node.container.metadata.get(self.segment)
        except SegmentNotFoundError:
            return None  # no run got as far as creating it
        try:
            data = world._local(node, node.container.read_range(self.segment, 0, state.length))
            found, end = decode_watermarks(self.segment, 0, data, state.length)
        except Exception as e:
            return f"the mark segment cannot be read again: {sanitize(repr(e), world.root)}"
        if end != state.length:
            return f"the mark segment ends in {state.length - end} bytes of no watermark"
        marks = [mark for _, mark in found]
        world.counts["watermarks_in_segment"] = len(marks)
        for before, after in itertools.pairwise(marks):
            problem = _ordered(before, after)
            if problem is not None:
                return problem
        return None


def _ordered(before: Watermark, after: Watermark) -> str | None:
    if after.lower_ms <= before.lower_ms:
        return (
            f"watermark lower bounds do not increase: {before.lower_ms} then {after.lower_ms} "
            f"(cuts {_show(before.cut)}, {_show(after.cut)})"
        )
    try:
        behind = not cut_le(before.cut, after.cut, {**before.ranges, **after.ranges})
    except KeyError as e:
        return f"a watermark's cut lacks the range of segment {e}"
    if behind:
        return f"a watermark's cut goes back: {_show(before.cut)} then {_show(after.cut)}"
    return None


def _show(cut: dict[int, int]) -> str:
    return (
        "{"
        + ", ".join(f"{sid >> 32}.{sid & 0xFFFFFFFF}:{o}" for sid, o in sorted(cut.items()))
        + "}"
    )


def _came(world: World, steps: list[int]) -> bool:
    """Whether the first of ``steps`` came (in the faulty phase; a step the clients spent
    blocked is made up for after it, even once the run settles)."""
    return bool(steps) and steps[0] <= world.fault_steps and world.steps + 1 >= steps[0]
