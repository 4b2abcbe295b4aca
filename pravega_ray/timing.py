"""Time and scheduling seams, so a whole cluster can later run on a virtual clock.

**One way.** A component that reads the time takes a :class:`Clock` (``monotonic()`` for
intervals, deadlines, rates and durations; ``wall_time_ms()`` for times stored with data or
carried by requests). A component that sleeps or starts a background loop takes a
scheduler: a :class:`ThreadScheduler` (``sleep``, ``start``) for threaded code (the
client, the controller's services and workers), a :class:`Scheduler` for the container's
asyncio code. Each defaults to the real one (:data:`SYSTEM_CLOCK`,
:data:`DAEMON_THREADS`, :class:`AsyncioScheduler`), so the wiring (``cluster.py``,
``actors/``, ``inprocess.py``) relies on the defaults, and a test passes
:class:`ManualClock` and :class:`ManualThreadScheduler`, which starts no thread (the
caller steps the component: ``EventStreamWriter.pump_round()``,
``RequestEventProcessor.run_once()``, ``TransactionTimer.run_once()``) and turns each
sleep into a move of the manual clock. Repeats of a call whose outcome is unknown
(``retry.repeat_while``) pause through the caller's scheduler.

Two kinds of wait stay in real time on purpose, as they wait for other threads rather
than for time: a wait for a future's result or a condition with a timeout (a simulated
connection completes its futures itself; :func:`wait_futures` waits for several), and a
background loop's pause on its stop event (``stop()`` cuts it short; a manual scheduler
starts no loop).

What still reads real time directly, outside this module: the Ray wiring waiting for
actors (``cluster.py``, the cluster manager and container actors), the in-process
cluster's event-loop thread, ``spark/``, ``data/`` and ``cli/``; and, not moved yet, the
S3 backends' backoff between conflicting conditional PUTs (``storage/s3.py``) and the
container's ack-latency metric (``time.perf_counter``). The deterministic simulation of the
data path (``sim/``, after TigerBeetle's and FoundationDB's simulators; docs/chaos.md) runs
containers and the writer on these seams: a virtual clock, and asyncio loops it steps itself.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar, cast

from pravega_ray.errors import InvalidArgumentError

R = TypeVar("R")

__all__ = [
    "DAEMON_THREADS",
    "SYSTEM_CLOCK",
    "AsyncioScheduler",
    "Clock",
    "DaemonThreadScheduler",
    "Joinable",
    "ManualClock",
    "ManualThreadScheduler",
    "Scheduler",
    "SystemClock",
    "ThreadScheduler",
    "check_clock",
    "check_rng",
    "check_scheduler",
    "check_thread_scheduler",
    "wait_futures",
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

    # The builtin itself (no Python frame per call: readers and writers ask per event).
    monotonic = staticmethod(time.monotonic)

    def wall_time_ms(self) -> int:
        return int(time.time() * 1000)


SYSTEM_CLOCK: Clock = SystemClock()


class ManualClock:
    """A clock that moves only when told to (tests).

    ``wall_time_ms`` moves with ``monotonic``, from ``wall_start_ms`` (to the nearest
    millisecond, so ten moves of 0.001 s read 10 ms later, float sums notwithstanding).
    """

    def __init__(self, start_s: float = 0.0, wall_start_ms: int = 1_700_000_000_000) -> None:
        self._now = float(start_s)
        self._start = float(start_s)
        self._wall_start_ms = wall_start_ms

    def monotonic(self) -> float:
        return self._now

    def wall_time_ms(self) -> int:
        return self._wall_start_ms + round((self._now - self._start) * 1000)

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


def wait_futures(futures: Iterable[Future[Any]], timeout_s: float | None) -> None:
    """Wait for each of ``futures`` in turn, ``timeout_s`` real seconds in all (None: no
    limit): a wait for other threads' answers, in real time whatever clock the caller has.

    Raises the error of the first future (in order) that failed, once those before it
    succeeded; ``concurrent.futures.TimeoutError`` once the time is up.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    for future in futures:
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        future.result(remaining)


def _check_methods(value: object, names: tuple[str, ...], what: str, kind: str) -> None:
    if isinstance(value, type) or not all(callable(getattr(value, n, None)) for n in names):
        methods = ", ".join(f"{n}()" for n in names)
        raise InvalidArgumentError(
            f"{what} must be a {kind} instance (with {methods}), got {type(value).__name__}"
        )


def check_clock(clock: object, what: str = "clock") -> Clock:
    """``clock`` if it is a :class:`Clock`; InvalidArgumentError otherwise."""
    _check_methods(clock, ("monotonic", "wall_time_ms"), what, "Clock")
    return cast(Clock, clock)


def check_scheduler(scheduler: object, what: str = "scheduler") -> Scheduler:
    """``scheduler`` if it is a :class:`Scheduler`; InvalidArgumentError otherwise."""
    _check_methods(scheduler, ("sleep", "run_blocking", "start"), what, "Scheduler")
    return cast(Scheduler, scheduler)


def check_thread_scheduler(scheduler: object, what: str = "scheduler") -> ThreadScheduler:
    """``scheduler`` if it is a :class:`ThreadScheduler`; InvalidArgumentError otherwise."""
    _check_methods(scheduler, ("start", "sleep"), what, "ThreadScheduler")
    return cast(ThreadScheduler, scheduler)


def check_rng(rng: object, what: str = "rng") -> random.Random | None:
    """``rng`` if it is None or a ``random.Random``; InvalidArgumentError otherwise."""
    if rng is not None and not isinstance(rng, random.Random):
        raise InvalidArgumentError(
            f"{what} must be a random.Random or None, got {type(rng).__name__}"
        )
    return rng
