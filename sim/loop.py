"""An asyncio event loop on the simulation's virtual clock, stepped one callback at a time.

:class:`SimLoop` is a real ``asyncio.BaseEventLoop`` (tasks, futures, locks, ``wait_for``
behave as usual) with three changes, so a container's asyncio code runs in the
simulator's thread, in an order the seed sets:

* ``time()`` is the simulation's :class:`~pravega_ray.timing.ManualClock`: ``asyncio.sleep``
  and every timeout wait for virtual time, which moves only when the simulator moves it
  (to the next timer of some part, when it chooses a *tick*);
* nothing runs on its own: the simulator calls :meth:`SimLoop.run_one` to run the oldest
  ready callback (after moving the timers that are due to the ready queue);
* ``run_in_executor`` (hence ``asyncio.to_thread`` and ``Scheduler.run_blocking``: the
  durable log's appends, Tier-2 chunk I/O, the attribute index's calls) starts no thread:
  the call is handed to ``submit_io``, which queues it as a pending *I/O* of the simulated
  node. The simulator runs it later, in its own step, or drops it in a crash.

It relies on two attributes of CPython's ``BaseEventLoop`` (``_ready`` and ``_scheduled``,
checked at import), as asyncio's own test loop does.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import heapq
from collections.abc import Callable
from typing import Any

from pravega_ray.timing import ManualClock

__all__ = ["IoSubmit", "SimLoop"]

IoSubmit = Callable[[Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any]"], None]
"""``submit(function, args, future)``: queue a blocking call whose outcome sets ``future``."""

_PROBE = asyncio.new_event_loop()
for _attribute in ("_ready", "_scheduled"):
    if not hasattr(_PROBE, _attribute):  # pragma: no cover - another Python's asyncio
        raise ImportError(f"sim.loop needs asyncio.BaseEventLoop.{_attribute}")
_PROBE.close()


class _NoSelector:
    """The loop never waits for file descriptors: it has none."""

    def select(self, timeout: float | None = None) -> list[Any]:
        return []

    def close(self) -> None:
        pass


class SimLoop(asyncio.BaseEventLoop):
    """A node's event loop on virtual time; see the module docstring.

    ``clock``: the simulation's clock (shared by every node and client). ``submit_io``:
    where blocking calls go (each must eventually set its future, or be dropped with the
    node). ``errors``: unexpected exceptions that reached the loop's exception handler
    are appended here (the simulator reports them).
    """

    def __init__(self, clock: ManualClock, submit_io: IoSubmit, errors: list[str]) -> None:
        super().__init__()
        self._sim_clock = clock
        self._submit_io = submit_io
        self._errors = errors
        self._selector = _NoSelector()
        # asyncio's own queues (checked at import): ready callbacks, and the timers' heap.
        self._sim_ready: collections.deque[asyncio.Handle] = getattr(self, "_ready")  # noqa: B009
        self._sim_scheduled: list[asyncio.TimerHandle] = getattr(self, "_scheduled")  # noqa: B009

    @property
    def ready(self) -> collections.deque[asyncio.Handle]:
        """The callbacks ready to run, oldest first (asyncio's own queue)."""
        return self._sim_ready

    # --- asyncio's hooks -----------------------------------------------------------------------
    def time(self) -> float:
        return self._sim_clock.monotonic()

    def _write_to_self(self) -> None:
        pass  # nothing sleeps in a selector: the simulator steps the loop

    def _process_events(self, event_list: list[Any]) -> None:
        pass

    def run_in_executor(  # type: ignore[override]
        self, executor: concurrent.futures.Executor | None, func: Callable[..., Any], *args: Any
    ) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = self.create_future()
        self._submit_io(func, args, future)
        return future

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        error = context.get("exception")
        message = str(context.get("message", ""))
        if isinstance(error, asyncio.CancelledError):
            return
        self._errors.append(f"{message}: {error!r}" if error is not None else message)

    # --- stepping (the simulator) --------------------------------------------------------------
    def _move_due_timers(self) -> None:
        now = self.time()
        scheduled = self._sim_scheduled
        while scheduled and (scheduled[0].cancelled() or scheduled[0].when() <= now):
            handle = heapq.heappop(scheduled)
            if not handle.cancelled():
                self._sim_ready.append(handle)
        # (asyncio's count of cancelled timers only tunes _run_once, which never runs here)

    def has_ready(self) -> bool:
        """Whether :meth:`run_one` has a callback to run now (a due timer counts)."""
        if self._sim_ready:
            return True
        self._move_due_timers()
        return bool(self._sim_ready)

    def next_timer(self) -> float | None:
        """When the earliest pending timer is due (virtual seconds), or None if none is."""
        scheduled = self._sim_scheduled
        while scheduled and scheduled[0].cancelled():
            heapq.heappop(scheduled)
        return scheduled[0].when() if scheduled else None

    def run_one(self) -> bool:
        """Run the oldest ready callback, as the running loop; False if none was ready."""
        self._move_due_timers()
        ready = self._sim_ready
        while ready:
            handle = ready.popleft()
            if handle.cancelled():
                continue
            asyncio.events._set_running_loop(self)
            try:
                handle._run()
            finally:
                asyncio.events._set_running_loop(None)
            return True
        return False
