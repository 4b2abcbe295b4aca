"""A load writer for benchmarks: a thread writing event batches to one stream, recording
when each batch is acknowledged, robust to its segments being sealed under it.

Used by ``benchmarks.controller``; importing it starts nothing.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pravega_ray as pr
from benchmarks.common import log
from pravega_ray.errors import PravegaError, SegmentSealedError, StreamSealedError

KEYS = [f"key-{i}" for i in range(16)]
"""Routing keys the batches cycle through, so every segment of a stream gets events."""
STALL_S = 1.0
"""A load writer whose outstanding events got no answer for this long is replaced."""
OUTSTANDING_EVENTS_MAX = 200_000
"""A load writer waits (for acks) once this many of its events are unanswered."""
NEW_WRITER_WAIT_S = 30.0
"""A load writer that cannot get a new writer for this long gives up (``fatal``)."""


@dataclass
class _Generation:
    """One EventStreamWriter of a load writer and the events it was handed."""

    writer: Any
    written: int = 0
    settled: int = 0
    last_settled_at: float = field(default_factory=time.monotonic)
    sealed: bool = False


class LoadWriter:
    """A thread writing batches to one stream, recording when each batch is acknowledged.

    ``events_per_s`` None: as fast as it can (at most OUTSTANDING_EVENTS_MAX unanswered);
    otherwise paced on an absolute schedule of one batch per ``batch_events / events_per_s``.
    A failed batch is counted by error type; after a ``SegmentSealedError``, or once its
    events stay unanswered for STALL_S, the writer is dropped (not closed: its flush could
    wait forever) and a new one, made from the stream's current segments, writes on. Any
    other error raised by ``write_events`` (e.g. EventTooLargeError), or no new writer for
    NEW_WRITER_WAIT_S, stops the thread with that error in ``fatal``; :meth:`stop` raises it.
    """

    def __init__(
        self,
        cluster: Any,
        scope: str,
        stream: str,
        batch_events: int,
        event_bytes: int,
        events_per_s: float | None = None,
    ) -> None:
        self._cluster = cluster
        self._scope, self._stream = scope, stream
        self._batch = [os.urandom(event_bytes) for _ in range(batch_events)]
        self._interval_s = None if events_per_s is None else batch_events / events_per_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.acks: list[float] = []
        self.acked = self.failed = self.renewals = 0
        self.errors: dict[str, int] = {}
        self.generations: list[_Generation] = []
        self.started = self.stopped = 0.0
        self.fatal: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="load-writer", daemon=True)

    def start(self) -> None:
        self.started = time.monotonic()
        self._thread.start()

    def stop(self, drain_s: float = 5.0) -> None:
        """Stop writing; wait up to ``drain_s`` for the current writer's outstanding events.

        Raises RuntimeError (from ``fatal``) if the thread stopped on an error of its own.
        """
        self._stop.set()
        self._thread.join()
        self.stopped = time.monotonic()
        if self.fatal is not None:
            raise RuntimeError(f"load writer failed: {self.fatal!r}") from self.fatal
        deadline = time.monotonic() + drain_s
        while time.monotonic() < deadline:
            with self._lock:
                current = self.generations[-1] if self.generations else None
                if current is None or current.settled >= current.written:
                    break
            time.sleep(0.01)

    @property
    def written(self) -> int:
        return sum(g.written for g in self.generations)

    @property
    def unanswered(self) -> int:
        """Events handed to a writer and neither acknowledged nor failed (so far)."""
        with self._lock:
            return sum(g.written - g.settled for g in self.generations)

    def ack_rate(self) -> float:
        """Events acknowledged per second of writing."""
        return self.acked / max(1e-9, (self.stopped or time.monotonic()) - self.started)

    def _new_generation(self) -> _Generation:
        deadline = time.monotonic() + NEW_WRITER_WAIT_S
        while not self._stop.is_set():
            try:
                writer = self._cluster.create_writer(
                    self._scope, self._stream, pr.BytesSerializer()
                )
            except PravegaError as e:
                if time.monotonic() > deadline:
                    raise
                log(f"load writer: new writer failed ({e!r}); retrying")
                time.sleep(0.05)
                continue
            generation = _Generation(writer)
            with self._lock:
                self.generations.append(generation)
            return generation
        raise _Stopped

    def _run(self) -> None:
        try:
            with contextlib.suppress(_Stopped):
                self._write_until_stopped()
        except BaseException as e:
            self.fatal = e
            log(f"load writer stopped: {e!r}")

    def _write_until_stopped(self) -> None:
        generation = self._new_generation()
        batch, n = self._batch, len(self._batch)
        due = time.monotonic()
        i = 0
        while not self._stop.is_set():
            if self._must_renew(generation):
                self.renewals += 1
                generation = self._new_generation()
            if self._interval_s is not None:
                due += self._interval_s
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            try:
                future = generation.writer.write_events(batch, KEYS[i % len(KEYS)])
            except (SegmentSealedError, StreamSealedError) as e:
                self._count_failure(generation, e, n, written=False)
                generation.sealed = True  # the writer refuses writes: replace it
                continue
            i += 1
            with self._lock:
                generation.written += n
            future.add_done_callback(lambda f, g=generation: self._on_done(g, f, n))

    def _must_renew(self, generation: _Generation) -> bool:
        """Wait while too much is unanswered; True if the writer should be replaced."""
        while not self._stop.is_set():
            with self._lock:
                if generation.sealed:
                    return True
                unanswered = generation.written - generation.settled
                quiet_s = time.monotonic() - generation.last_settled_at
            if unanswered and quiet_s > STALL_S:
                return True
            if unanswered < OUTSTANDING_EVENTS_MAX:
                return False
            time.sleep(0.001)
        return False

    def _on_done(self, generation: _Generation, future: Any, n: int) -> None:
        error = future.exception()
        now = time.monotonic()
        with self._lock:
            generation.settled += n
            generation.last_settled_at = now
            if error is None:
                self.acked += n
                self.acks.append(now)
                return
        self._count_failure(generation, error, n, written=True)

    def _count_failure(
        self, generation: _Generation, error: BaseException, n: int, written: bool
    ) -> None:
        with self._lock:
            if written:
                self.failed += n
            name = type(error).__name__ + ("" if written else " (raised)")
            self.errors[name] = self.errors.get(name, 0) + n
            if isinstance(error, SegmentSealedError):
                generation.sealed = True

    def gaps_during(self, windows: Sequence[tuple[float, float]]) -> list[float]:
        """For each window, the longest gap between consecutive acks that overlaps it (a gap
        that starts before the window or ends after it counts whole)."""
        acks = sorted(self.acks)
        out = []
        for start, end in windows:
            first = max(0, bisect.bisect_right(acks, start) - 1)
            last = min(len(acks) - 1, bisect.bisect_left(acks, end))
            span = acks[first : last + 1]
            out.append(max((b - a for a, b in itertools.pairwise(span)), default=end - start))
        return out

    def longest_gap_within(self, windows: Sequence[tuple[float, float]]) -> float:
        """The longest gap between consecutive acks both inside one of ``windows``."""
        acks = sorted(self.acks)
        longest = 0.0
        for start, end in windows:
            span = acks[bisect.bisect_left(acks, start) : bisect.bisect_right(acks, end)]
            longest = max([longest, *(b - a for a, b in itertools.pairwise(span))])
        return longest


class _Stopped(Exception):
    """The load writer was stopped while it waited for a new writer."""
