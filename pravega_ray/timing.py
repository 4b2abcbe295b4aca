"""Time and scheduling seams, so a whole cluster can later run on a virtual clock.

The container's pipeline, its storage writer, the event writer's pump and the
reader never call ``time.monotonic``, ``time.time``, ``asyncio.sleep`` or
``asyncio.to_thread`` directly: they take a :class:`Clock` and (the asyncio
parts) a :class:`Scheduler`. Production uses :data:`SYSTEM_CLOCK` and
:class:`AsyncioScheduler`; tests use :class:`ManualClock` to move time by hand,
and the deterministic simulation (a later issue, after TigerBeetle's and
FoundationDB's simulators) supplies a seeded scheduler with a virtual clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

R = TypeVar("R")

__all__ = [
    "SYSTEM_CLOCK",
    "AsyncioScheduler",
    "Clock",
    "ManualClock",
    "Scheduler",
    "SystemClock",
]


class Clock(Protocol):
    """Where a component reads the time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (intervals, deadlines, rates)."""
        ...

    def wall_time_ms(self) -> int:
        """Milliseconds since the Unix epoch (creation times stored with data)."""
        ...


class SystemClock:
    """The real clocks: ``time.monotonic`` and ``time.time``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall_time_ms(self) -> int:
        return int(time.time() * 1000)


SYSTEM_CLOCK: Clock = SystemClock()


class ManualClock:
    """A clock that moves only when told to (tests, the simulation).

    ``wall_time_ms`` moves with ``monotonic``, from ``wall_start_ms``.
    """

    def __init__(self, start_s: float = 0.0, wall_start_ms: int = 1_700_000_000_000) -> None:
        self._now = float(start_s)
        self._start = float(start_s)
        self._wall_start_ms = wall_start_ms

    def monotonic(self) -> float:
        return self._now

    def wall_time_ms(self) -> int:
        return self._wall_start_ms + int((self._now - self._start) * 1000)

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` (ValueError if negative)."""
        if seconds < 0:
            raise ValueError("a monotonic clock cannot go back")
        self._now += seconds

    def set(self, monotonic_s: float) -> None:
        """Move the clock to ``monotonic_s`` (ValueError if that is in the past)."""
        self.advance(monotonic_s - self._now)


class Scheduler(Protocol):
    """How an asyncio component waits, runs blocking I/O and starts background work."""

    async def sleep(self, seconds: float) -> None:
        """Return after ``seconds`` of this scheduler's time."""
        ...

    async def run_blocking(self, function: Callable[..., R], *args: Any) -> R:
        """Run a blocking call (file or S3 I/O) without blocking the event loop."""
        ...

    def start(self, coroutine: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Start ``coroutine`` as a background task of the running loop."""
        ...


class AsyncioScheduler:
    """The real scheduler: ``asyncio.sleep``, ``asyncio.to_thread``, ``create_task``."""

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def run_blocking(self, function: Callable[..., R], *args: Any) -> R:
        return await asyncio.to_thread(function, *args)

    def start(self, coroutine: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(coroutine, name=name)
