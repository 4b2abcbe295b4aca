"""What the parts of one event writer share: its lock, conditions, settled futures.

Split from ``segment_output_stream.py``; see that module and ``writer.py`` for the design.
:class:`WriterContext` is handed to every :class:`~pravega_ray.client.segment_output_stream.
SegmentOutputStream` of a writer and to its large-event sender (``large_events.py``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import InvalidStateError
from typing import TYPE_CHECKING

from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.client.event_accumulator import Block
from pravega_ray.contracts.records import SegmentRange
from pravega_ray.errors import PravegaError, StreamSealedError
from pravega_ray.timing import ThreadScheduler

if TYPE_CHECKING:
    from pravega_ray.client.segment_output_stream import SegmentOutputStream
    from pravega_ray.client.writer_config import WriterConfig

__all__ = ["SegmentSealedHandler", "Successors", "WriterContext", "refused_earlier"]

# Set on a thread while it completes any writer's futures (runs user callbacks), so that
# a callback writing to a writer whose queue is full does not wait for room. The one
# piece of module state of the writer, on purpose: it describes the thread, not a
# writer, and it must span writers, because the thread that completes one writer's
# futures (Ray's callback thread, the in-process cluster's loop) also delivers the
# acks of every other writer in the process. Were it per writer, a callback of one
# writer waiting for room in another would wait for acks its own thread must deliver
# (tests/unit/client/test_writer_pump.py checks that this does not happen).
_completing = threading.local()

Successors = dict[SegmentRange, list[int]]
"""A sealed segment's successors, each with all its predecessors' ids (the controller's
``get_successors``)."""

SegmentSealedHandler = Callable[["SegmentOutputStream", Successors, list[Block]], None]
"""Called under the writer's lock with a sealed segment's stream, its successors and
its unacknowledged blocks in order; re-routes them (``EventStreamWriter``)."""


class WriterContext:
    """What the output streams of one writer share.

    The connections and the stream's name, the writer's id and tuning, its scheduler
    (the times come from the pump, which reads the writer's clock); its lock, with two
    conditions on it (``wake``: the pump has work; ``space``: a segment's queue shrank),
    and the blocks settled under the lock whose futures complete once it is released.
    ``on_stream_sealed`` is called under the lock when a reconnect finds the stream
    sealed, so the writer refuses new events; ``on_segment_sealed`` when it finds its
    segment sealed and successors in its place (:data:`SegmentSealedHandler`).
    """

    __slots__ = (
        "_settled",
        "config",
        "connection",
        "controller",
        "lock",
        "on_segment_sealed",
        "on_stream_sealed",
        "pump_is_caller",
        "pump_thread_ident",
        "scheduler",
        "scope",
        "space",
        "stream",
        "wake",
        "writer_id",
    )

    def __init__(
        self,
        *,
        scope: str,
        stream: str,
        writer_id: bytes,
        connection: SegmentStoreConnection,
        controller: ControllerConnection,
        config: WriterConfig,
        scheduler: ThreadScheduler,
        on_stream_sealed: Callable[[StreamSealedError], None],
        on_segment_sealed: SegmentSealedHandler,
    ) -> None:
        self.scope = scope
        self.stream = stream
        self.writer_id = writer_id
        self.connection = connection
        self.controller = controller
        self.config = config
        self.scheduler = scheduler
        self.on_stream_sealed = on_stream_sealed
        self.on_segment_sealed = on_segment_sealed
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.space = threading.Condition(self.lock)
        self.pump_thread_ident: int | None = None  # set by the pump thread, if one runs
        # No pump thread: whoever writes also drives the pump (EventStreamWriter.pump_round).
        self.pump_is_caller = False
        self._settled: list[tuple[Block, BaseException | None]] = []

    def settle(self, block: Block, error: BaseException | None = None) -> None:
        """Under the lock: note that ``block`` is done; its future completes later.

        Futures are completed only after the lock is released (:meth:`complete_settled`),
        because their callbacks run user code, which may call the writer again. A block
        holding re-routed events settles its parents too: a parent fails with the first
        error of a child and completes once its last child has.
        """
        self._settled.append((block, error))
        parents = block.parents
        if parents is None:
            return
        block.parents = None  # settled twice: the parents count it once
        for parent in parents:
            if error is not None:
                self.settle(parent, error)
            else:
                parent.waiting -= 1
                if parent.waiting == 0:
                    self.settle(parent)

    def has_settled(self) -> bool:
        """Under the lock: whether some settled block's future waits to be completed."""
        return bool(self._settled)

    def complete_settled(self) -> None:
        """Not under the lock: complete the futures of settled blocks (first outcome wins)."""
        with self.lock:
            items, self._settled = self._settled, []
        if not items:
            return
        _completing.active = True
        try:
            for block, error in items:
                with contextlib.suppress(InvalidStateError):  # settled twice: first wins
                    if error is None:
                        block.future.set_result(None)
                    else:
                        block.future.set_exception(error)
        finally:
            _completing.active = False

    def may_block(self) -> bool:
        """Whether this thread may wait for room: not the pump, not inside a callback.

        Either may be the thread that delivers the acknowledgements that would make room.
        Nor may any thread when the writer's caller drives the pump: it would wait for
        itself.
        """
        return (
            not self.pump_is_caller
            and not getattr(_completing, "active", False)
            and threading.get_ident() != self.pump_thread_ident
        )


def refused_earlier(rejection: PravegaError, segment: str) -> PravegaError:
    """The error of a block behind one the store refused: same type, saying so."""
    message = f"not written: an earlier event on segment {segment} was refused: {rejection}"
    try:
        error = type(rejection)(message)
    except TypeError:  # a subclass with another constructor
        error = PravegaError(message)
    error.__cause__ = rejection
    return error
