"""A writer's noted times on their way to the controller (``EventStreamWriter.note_time``).

Semantics in ``contracts/watermarks.py``. ``note_time(t)`` returns at once: the mark is sent
by a thread of the writer once every event written before the call is acknowledged (so
the position it reports lies at or after the end of each of them: a reader past the
watermark's cut never meets one of those events), and only the latest noted time waiting is
sent, at most one per ``SEND_INTERVAL_S`` (a writer noting often sends fewer marks, never
stale ones). A time behind one noted before is ignored with a WARNING, as Pravega's writer does;
so is a mark the controller refuses as behind its stored one (another process with this
writer's id). A failure to reach the controller is logged and the next noted time tries
again: a mark is advice, the events are what must not be lost.

On close the writer's last mark is sent, then the controller is told the writer closed, with
its position after its last event (acknowledged by then): its time stops holding the
stream's watermarks back, and that position bounds the next watermark's cut, so the events it
wrote after its last noted time are never behind a window they contradict.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError

from pravega_ray.client.connection import ControllerConnection
from pravega_ray.constants import WATERMARK_WRITER_TIMEOUT_S
from pravega_ray.contracts.watermarks import check_time_ms
from pravega_ray.errors import PravegaError
from pravega_ray.timing import ThreadScheduler, wait_futures

__all__ = ["MarkSender"]

log = logging.getLogger(__name__)

CLOSE_WAIT_S = 10.0
"""How long a writer's close waits for its last mark to reach the controller."""
KEEPALIVE_S = WATERMARK_WRITER_TIMEOUT_S / 4
"""While a mark waits for acknowledgements, the last stored mark is stored again this often,
so the controller does not time a live writer out."""
SEND_INTERVAL_S = 0.1
"""A writer sends at most one mark per this many seconds (the latest noted then): watermarks
are emitted every few seconds, and each mark is a controller call."""


class MarkSender:
    """The noted times of one writer (``writer_id``, hex) on ``scope/stream``; thread-safe.
    ``position`` is called on the sending thread once the awaited events are acknowledged,
    and returns the writer's position (``{segment id: offset}``); ``unacknowledged`` says
    whether the writer has events not acknowledged yet (its last mark is kept alive while it
    has, every ``keepalive_s``)."""

    def __init__(
        self,
        scope: str,
        stream: str,
        writer_id: str,
        controller: ControllerConnection,
        position: Callable[[], dict[int, int]],
        scheduler: ThreadScheduler,
        keepalive_s: float = KEEPALIVE_S,
        unacknowledged: Callable[[], bool] = lambda: True,
    ) -> None:
        self._scope, self._stream, self._writer_id = scope, stream, writer_id
        self._controller = controller
        self._position = position
        self._scheduler = scheduler
        self._keepalive_s = keepalive_s
        self._unacknowledged = unacknowledged
        self._cond = threading.Condition()
        self._pending: tuple[int, Sequence[Future[None]]] | None = None
        self._sending = False
        self._noted_ms = -1
        self._sent_any = False
        self._stored: tuple[int, dict[int, int]] | None = None  # the last mark stored
        self._stopped = False
        self._closing = False
        self._started = False
        self._inline = False  # a scheduler that starts no thread: sent at close only
        self.sent = 0
        """Marks the controller stored (tests and benchmarks read it)."""

    def note(self, time_ms: int, awaited: Sequence[Future[None]]) -> None:
        """Queue ``time_ms`` to be sent once ``awaited`` (the writer's pending events) are
        done. InvalidArgumentError for a time that is not an int in [0, 2**63)."""
        check_time_ms(time_ms)
        with self._cond:
            if time_ms < self._noted_ms:
                log.warning(
                    "writer %s on %s/%s: noted time %d is behind %d noted before: ignored",
                    self._writer_id,
                    self._scope,
                    self._stream,
                    time_ms,
                    self._noted_ms,
                )
                return
            self._noted_ms = time_ms
            self._pending = (time_ms, awaited)
            if not self._started:
                self._started = True
                thread = self._scheduler.start(self._run, f"pravega-marks-{self._stream}")
                self._inline = thread is None
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._stopped:
                    if not self._cond.wait(self._keepalive_s):
                        self._cond.release()  # no lock held across a controller call
                        try:
                            self._keep_alive()
                        finally:
                            self._cond.acquire()
                if self._pending is None:
                    return
                (time_ms, awaited), self._pending = self._pending, None
                self._sending = True
            try:
                self._send(time_ms, awaited)
            finally:
                with self._cond:
                    self._sending = False
                    self._cond.notify_all()
                    # The next mark waits out the interval, unless the writer is closing.
                    self._cond.wait_for(lambda: self._stopped or self._closing, SEND_INTERVAL_S)

    def _send(self, time_ms: int, awaited: Sequence[Future[None]]) -> None:
        self._await(list(awaited))
        try:
            position = self._position()
            stored = self._controller.note_writer_mark(
                self._scope, self._stream, self._writer_id, time_ms, position
            )
        except (PravegaError, FutureTimeoutError) as e:
            # FutureTimeoutError: the writer's get_info of a segment went unanswered (the
            # simulation's seed 24); the thread must live on for the next mark.
            log.warning(
                "writer %s on %s/%s: noted time %d not stored (%r); the next one tries again",
                self._writer_id,
                self._scope,
                self._stream,
                time_ms,
                e,
            )
            return
        if not stored:
            log.warning(
                "writer %s on %s/%s: the controller has a later time than %d: ignored",
                self._writer_id,
                self._scope,
                self._stream,
                time_ms,
            )
            return
        with self._cond:
            self._sent_any = True
            self._stored = (time_ms, position)
            self.sent += 1

    def _await(self, futures: list[Future[None]]) -> None:
        """Wait for ``futures`` (failed events are not in the stream: no bound to wait for);
        every ``keepalive_s`` (``KEEPALIVE_S``) meanwhile, store the last stored mark again:
        a writer whose events wait on a container that is down is alive, and must keep
        holding the watermark back rather than time out (its pending events, older than the time it
        noted since, may land beyond the watermark's cut later)."""
        while True:
            try:
                wait_futures(futures, self._keepalive_s)
                return
            except FutureTimeoutError:
                self._keep_alive(force=True)
            except Exception:
                return

    def _keep_alive(self, force: bool = False) -> None:
        """Store the last stored mark again if the writer has events not yet acknowledged
        (``force``: known to have): they may land beyond the next cut later, so the writer
        must not time out meanwhile, even when it notes no new time (blocked, say)."""
        stored = self._stored
        if stored is None or not (force or self._unacknowledged()):
            return
        try:
            self._controller.note_writer_mark(
                self._scope, self._stream, self._writer_id, stored[0], stored[1]
            )
        except (PravegaError, FutureTimeoutError) as e:
            log.info("writer %s: keep-alive mark not stored (%r)", self._writer_id, e)

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until no mark is waiting or being sent; False if ``timeout_s`` ran out."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._pending is None and not self._sending, timeout_s
            )

    def close(self, flushed: bool = True) -> None:
        """Send the last mark (waiting at most CLOSE_WAIT_S), stop the thread, and, if the
        writer ``flushed`` (every event it wrote acknowledged) and ever stored a mark, tell
        the controller it closed at its position now. A writer whose flush failed says
        nothing: events whose outcome is unknown may still be somewhere, so its mark holds
        the watermark back until it times out. Idempotent."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            pending, self._pending = (self._pending, None) if self._inline else (None, None)
        if pending is not None:  # the writer flushed: what it awaits is done
            self._send(*pending)
        if not self.flush(CLOSE_WAIT_S):
            log.warning("writer %s: its last noted time was not sent in time", self._writer_id)
        with self._cond:
            if self._stopped:
                return
            self._stopped = True
            self._cond.notify_all()
            sent_any = self._sent_any
        if sent_any and flushed:
            try:
                self._controller.writer_closed(
                    self._scope, self._stream, self._writer_id, self._position()
                )
            except (PravegaError, FutureTimeoutError) as e:
                log.warning("writer %s: close not recorded (%r): it times out", self._writer_id, e)
