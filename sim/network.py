"""The simulated connection between clients and containers: calls and replies are messages.

:class:`Network` is the clients' ``ServiceInvoker`` (``SegmentStoreClient(network)``): a call
becomes a :class:`Call` waiting in :attr:`Network.calls` until the simulator *delivers* it
to the container that owns the segment (or drops it); the container's answer becomes a
:class:`Reply` in :attr:`Network.replies` until the simulator delivers it to the caller's
future (or drops it). Nothing is delivered on its own, so the seed orders every call and
reply, may hold one back for any number of steps (a delay) and may lose one (a drop).

A client that blocks on an unanswered call (the writer's reconnect waits for
``setup_append``) holds a :class:`SimFuture`: its ``result(timeout)`` lets the rest of the
world run (``wait``, the simulator's) until the answer arrives or ``timeout`` virtual
seconds pass, in the simulator's one thread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from pravega_ray.naming import container_for_segment

__all__ = ["Call", "LosslessInvoker", "Network", "Reply", "SimFuture", "Waiter"]

Waiter = Callable[[Future[Any], "float | None"], None]
"""``wait(future, timeout)``: run the world until ``future`` is done or the timeout passes."""

Latency = Callable[[], float]
"""When a message just sent may be delivered: the virtual time it arrives."""


class SimFuture(Future[Any]):
    """A call's future whose blocking waits run the simulated world (module docstring)."""

    def __init__(self, wait: Waiter) -> None:
        super().__init__()
        self._wait = wait

    def result(self, timeout: float | None = None) -> Any:
        if not self.done():
            self._wait(self, timeout)
        return super().result(0)  # TimeoutError if the wait ran out

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self.done():
            self._wait(self, timeout)
        return super().exception(0)


@dataclass(slots=True)
class Call:
    """One call of a client: ``container.<method>(segment, *args)``."""

    number: int
    container: int
    method: str
    segment: str
    args: tuple[Any, ...]
    future: SimFuture
    due: float = 0.0  # it may be delivered from then on (virtual seconds)
    lossless: bool = False  # the controller's: never lost (sim/controller.py), nor its reply

    def describe(self) -> str:
        return f"#{self.number} {self.method}({self.segment}) to c{self.container}"


@dataclass(slots=True)
class Reply:
    """A container's answer to ``call``: ``result``, or ``error`` if it failed."""

    call: Call
    result: Any
    error: BaseException | None
    due: float = 0.0

    def describe(self) -> str:
        outcome = "ok" if self.error is None else type(self.error).__name__
        return f"#{self.call.number} {self.call.method} {outcome}"


class Network:
    """Calls and replies in flight between clients and ``container_count`` containers."""

    def __init__(self, container_count: int, wait: Waiter, arrival: Latency) -> None:
        """``arrival()``: when a message sent now arrives (the seed draws its latency)."""
        self.container_count = container_count
        self._arrival = arrival
        self.calls: list[Call] = []
        self.replies: list[Reply] = []
        self._wait = wait
        self._numbers = 0

    def container_of(self, segment: str) -> int:
        """The container that owns ``segment``."""
        return container_for_segment(segment, self.container_count)

    def invoke(self, method: Callable[..., Awaitable[Any]], segment: str, *args: Any) -> Any:
        """The ``ServiceInvoker`` call: queue the call; its future completes on delivery."""
        return self.send(method, segment, args, lossless=False)

    def send(
        self,
        method: Callable[..., Awaitable[Any]],
        segment: str,
        args: tuple[Any, ...],
        lossless: bool,
    ) -> SimFuture:
        """Queue a call of ``method``; a ``lossless`` one and its reply are never dropped."""
        self._numbers += 1
        owner = container_for_segment(segment, self.container_count)
        call = Call(self._numbers, owner, method.__name__, segment, args, SimFuture(self._wait))
        call.due = self._arrival()
        call.lossless = lossless
        self.calls.append(call)
        return call.future

    def lossless(self) -> LosslessInvoker:
        """A ``ServiceInvoker`` whose calls and replies are never lost (the controller's)."""
        return LosslessInvoker(self)

    def reply(self, call: Call, result: Any, error: BaseException | None) -> None:
        """Queue a container's answer to ``call`` (delivered later, or dropped)."""
        self.replies.append(Reply(call, result, error, self._arrival()))

    def lossy(self, messages: Sequence[Call | Reply]) -> list[int]:
        """The indexes of ``messages`` (calls or replies) that may be lost."""
        return [
            i
            for i, m in enumerate(messages)
            if not (m.lossless if isinstance(m, Call) else m.call.lossless)
        ]

    def take_call(self, index: int) -> Call:
        return self.calls.pop(index)

    def deliver_reply(self, index: int) -> Reply:
        """Complete the caller's future with reply ``index`` (its callbacks run now)."""
        reply = self.replies.pop(index)
        future = reply.call.future
        if not future.done():
            if reply.error is None:
                future.set_result(reply.result)
            else:
                future.set_exception(reply.error)
        return reply


class LosslessInvoker:
    """The controller's ``ServiceInvoker``: calls that the network never loses."""

    def __init__(self, network: Network) -> None:
        self._network = network

    def invoke(self, method: Callable[..., Awaitable[Any]], segment: str, *args: Any) -> Any:
        return self._network.send(method, segment, args, lossless=True)
