"""How the threaded client starts background work and sleeps: a seam for the simulation.

The event writer runs a pump thread and sleeps between reconnect attempts; the reader
sleeps while it has no read outstanding. Neither calls ``threading.Thread`` or
``time.sleep`` directly: they take a :class:`ThreadScheduler` (the threaded
counterpart of :class:`pravega_ray.timing.Scheduler`, which serves asyncio code).
Production uses :data:`DAEMON_THREADS`; a test or the deterministic simulation uses
:class:`ManualThreadScheduler`, which starts no thread (the caller then drives the
writer's pump with ``EventStreamWriter.pump_round()``) and turns sleeps into moves
of a :class:`~pravega_ray.timing.ManualClock`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from pravega_ray.timing import ManualClock

__all__ = [
    "DAEMON_THREADS",
    "DaemonThreadScheduler",
    "Joinable",
    "ManualThreadScheduler",
    "ThreadScheduler",
]


class Joinable(Protocol):
    """A started background worker that can be waited for (a ``threading.Thread``)."""

    def join(self, timeout: float | None = None) -> None: ...


class ThreadScheduler(Protocol):
    """Where a threaded client component starts its background loop and sleeps."""

    def start(self, run: Callable[[], None], name: str) -> Joinable | None:
        """Run ``run`` in the background; return a handle to join, or None if nothing runs.

        None means the caller drives the component itself (a simulation stepping the
        writer's pump), so ``run`` is never called.
        """
        ...

    def sleep(self, seconds: float) -> None:
        """Return after ``seconds`` of this scheduler's time."""
        ...


class DaemonThreadScheduler:
    """The real scheduler: a daemon ``threading.Thread`` per loop, ``time.sleep``."""

    def start(self, run: Callable[[], None], name: str) -> threading.Thread:
        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        return thread

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


DAEMON_THREADS: ThreadScheduler = DaemonThreadScheduler()


class ManualThreadScheduler:
    """Starts nothing; a sleep moves ``clock`` (if given) instead of waiting.

    ``slept_s`` records every sleep, so a test can check a backoff without waiting for it.
    """

    def __init__(self, clock: ManualClock | None = None) -> None:
        self.clock = clock
        self.slept_s: list[float] = []

    def start(self, run: Callable[[], None], name: str) -> None:
        return None

    def sleep(self, seconds: float) -> None:
        self.slept_s.append(seconds)
        if self.clock is not None:
            self.clock.advance(seconds)
