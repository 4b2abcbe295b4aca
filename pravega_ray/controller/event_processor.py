"""The request event processor (Pravega's controller design, "Event Processor Framework";
docs/design.md "The controller").

Reads the request stream (``request_stream.py``) from its last checkpoint and hands each
request to a handler, as Pravega's concurrent event processor with a serialized request
handler does:

* **Per stream serialized, concurrent across streams.** Requests about one stream run one
  at a time in the order read; requests about different streams run side by side on a
  pool of ``concurrency`` threads.
* **At least once, periodic checkpoints.** The checkpoint (stored in the controller's
  metadata under ``eventprocessors/<name>``) is the offset of the oldest request not yet
  finished. It is stored after a request finishes, at most every ``checkpoint_interval_s``
  (Pravega's periodic checkpoint): at once if the last one is that old, else by the reading
  loop once it is (and by :meth:`drain` when all is done). A processor that dies starts again
  there, so a request may run twice (every workflow is idempotent: up to an interval's worth
  of finished requests run again) and none is lost. Handled requests below the checkpoint
  are truncated from the stream now and then.
* **Postponement.** A handler answers :data:`POSTPONE` when a request cannot run yet (its
  temporary property is not written yet, or another workflow holds the stream): the
  request goes to the back of its stream's queue and is tried again later, until it is
  ``expiry_s`` old; then it is dropped (logged), as Pravega's controller design says.
* **Waiting.** A handler answers :data:`WAIT` when a request must wait for something that
  may take longer than ``expiry_s`` but will come (a scale or seal waiting for its old
  epoch's transactions; a commit waiting for its epoch to become active): like a
  postponement, but it never expires.
* **Batches.** With a ``batch_handler``, the requests of one stream queued when its turn
  comes (at most ``batch_max``, in order) are handed to it together, and it answers an
  outcome for each (the commit processor commits them in one round). If it fails with an
  error that is not an unknown outcome, each request of the batch is handled alone by
  ``handler`` (so one bad request still costs only itself).
* A handler error whose outcome is unknown (:class:`RetriableError`) is retried like a
  postponement, without expiry; any other error is logged and the request dropped, so one
  bad request never stops the others.
* **Waiting costs nothing, and no stream waits for another.** A pool thread handles one
  request and gives itself back: the streams with requests take turns on the pool, so one
  stream's retries never hold up another's requests, even on one thread (the commit
  processor's). Once every queued request of a stream has been postponed in a row, the
  stream rests: its queue is tried again ``postpone_s`` later, then twice as late each
  time it rests again, up to ``postpone_max_s``; one request done starts the count over.
  The reading loop (:meth:`run_once`) hands the rested streams back to the pool when
  their time comes, so there are no timers and no thread waits.

:meth:`RequestEventProcessor.run_once` is steppable (tests drive it on a manual clock);
:meth:`start` runs it on a thread started through the ``scheduler`` until :meth:`stop`
(a ``ManualThreadScheduler`` starts none: the caller steps it). Rests, expiry and the
workflows' durations are read from the ``clock``.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pravega_ray import metrics
from pravega_ray.constants import (
    REQUEST_CHECKPOINT_INTERVAL_S,
    REQUEST_CONCURRENCY,
    REQUEST_EXPIRY_S,
    REQUEST_POLL_S,
    REQUEST_POSTPONE_MAX_S,
    REQUEST_POSTPONE_S,
    REQUEST_READ_WAIT_S,
    REQUEST_TRUNCATE_BYTES,
)
from pravega_ray.controller.request_stream import Request, RequestStream
from pravega_ray.errors import ConflictingUpdateError, RetriableError
from pravega_ray.timing import DAEMON_THREADS, SYSTEM_CLOCK, Clock, ThreadScheduler

__all__ = ["DONE", "POSTPONE", "WAIT", "RequestEventProcessor"]

log = logging.getLogger(__name__)

DONE = "done"
POSTPONE = "postpone"
WAIT = "wait"

Handler = Callable[[dict[str, Any]], str]
BatchHandler = Callable[[list[dict[str, Any]]], list[str]]


@dataclass(slots=True)
class _StreamQueue:
    """The requests of one stream not yet done, and how long they have been stuck.

    A stream has a ``_StreamQueue`` exactly while it has requests; then exactly one of
    these holds: a pool task for it is queued or running, or it rests until ``rest_until``.
    """

    requests: deque[Request] = field(default_factory=deque)
    postponed: int = 0  # requests postponed in a row since one was done
    rests: int = 0  # times the whole queue was postponed in a row
    rest_until: float | None = None  # monotonic time its rest ends, while it rests


class RequestEventProcessor:
    """Runs ``handler`` on every request of ``stream``; see the module docstring.

    ``checkpoints`` is a :class:`MetadataStore`; ``clock`` gives rests their ends and
    the time compared with the one requests carry (``posted_ms``) for expiry;
    ``scheduler`` starts the reading loop and paces :meth:`drain`. ``batch_handler``
    (optional) handles up to ``batch_max`` queued requests of one stream at once (module
    docstring, "Batches"). ``checkpoint_interval_s``: how often at most the checkpoint is
    stored (0: after every request).
    """

    def __init__(
        self,
        stream: RequestStream,
        handler: Handler,
        checkpoints: Any,
        *,
        name: str = "requests",
        concurrency: int = REQUEST_CONCURRENCY,
        postpone_s: float = REQUEST_POSTPONE_S,
        postpone_max_s: float = REQUEST_POSTPONE_MAX_S,
        expiry_s: float = REQUEST_EXPIRY_S,
        clock: Clock = SYSTEM_CLOCK,
        scheduler: ThreadScheduler = DAEMON_THREADS,
        batch_handler: BatchHandler | None = None,
        batch_max: int = 1,
        checkpoint_interval_s: float = REQUEST_CHECKPOINT_INTERVAL_S,
    ) -> None:
        self._stream = stream
        self._handler = handler
        self._batch_handler = batch_handler
        self._batch_max = max(1, batch_max) if batch_handler is not None else 1
        self._checkpoints = checkpoints
        self._key = f"eventprocessors/{name}"
        self._name = name
        self._postpone_s = postpone_s
        self._postpone_max_s = max(postpone_max_s, postpone_s)
        self._expiry_s = expiry_s
        self._clock = clock
        self._scheduler = scheduler
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix=f"pravega-{name}")
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._settled = threading.Condition(self._lock)
        self._tasks = 0  # pool tasks queued or running
        self._queues: dict[str, _StreamQueue] = {}
        self._pending: dict[int, Request] = {}  # offset -> request not finished
        self._read_at: dict[int, float] = {}  # offset -> monotonic time it was read
        self._position = -1  # next offset to read; -1 until the checkpoint is loaded
        self._checkpointed = -1
        self._checkpoint_interval_s = max(0.0, checkpoint_interval_s)
        self._checkpoint_next = float("-inf")  # monotonic time the next one may be stored
        self._truncated = 0
        self._stopping = threading.Event()
        self.handled = 0

    # --- reading ---------------------------------------------------------------------------------
    def _load_checkpoint(self) -> None:
        record = self._checkpoints.get(self._key)
        self._position = int(record.value["offset"]) if record else 0
        self._checkpointed = self._truncated = self._position

    def run_once(self, wait_s: float = 0.0) -> int:
        """Hand the streams whose rest is over back to the pool, read the requests
        available (waiting up to ``wait_s`` for one) and dispatch them; returns how many
        were read."""
        if self._position < 0:
            self._stream.ensure_created()
            self._load_checkpoint()
        if self._clock.monotonic() >= self._checkpoint_next and self._checkpoint_owed():
            self._store_checkpoint()
        self._wake_rested()
        with self._lock:
            if len(self._pending) >= 10_000:  # enough in flight: let them finish first
                self._idle.wait(wait_s)
                return 0
        requests, after = self._stream.read(self._position, wait_s)
        with self._lock:
            now = self._clock.monotonic()
            for request in requests:
                self._pending[request.offset] = request
                self._read_at[request.offset] = now
                self._enqueue(request)
            self._position = after
        return len(requests)

    def _enqueue(self, request: Request) -> None:
        queue = self._queues.get(request.key)
        if queue is None:
            queue = self._queues[request.key] = _StreamQueue(deque([request]))
            self._submit(request.key)
            return
        queue.requests.append(request)
        queue.postponed = 0  # a new request: the stream has something new to try
        if queue.rest_until is not None:  # it may run now: end the rest
            queue.rest_until = None
            self._submit(request.key)

    def read_wait_s(self) -> float:
        """How long the reading loop may wait at the tail of the request stream.

        :data:`REQUEST_READ_WAIT_S` while no request is being handled and no stream rests:
        a new request wakes the read anyway, and only a running handler can start a rest.
        Less while a stream rests (until its rest ends) or a checkpoint is owed (until it may
        be stored), and :data:`REQUEST_POLL_S` while handlers run (one of them may start a
        rest meanwhile, which the read must not outlast by much)."""
        now = self._clock.monotonic()
        with self._lock:
            if self._tasks:
                return REQUEST_POLL_S
            ends = [q.rest_until for q in self._queues.values() if q.rest_until is not None]
            if self._checkpoint_owed_locked():
                ends.append(self._checkpoint_next)
        if not ends:
            return REQUEST_READ_WAIT_S
        return max(0.005, min(REQUEST_READ_WAIT_S, min(ends) - now))

    def _wake_rested(self) -> None:
        now = self._clock.monotonic()
        with self._lock:
            for key, queue in self._queues.items():
                if queue.rest_until is not None and queue.rest_until <= now:
                    queue.rest_until = None
                    self._submit(key)

    def _submit(self, key: str) -> None:
        """Hand ``key``'s queue to the pool (the caller holds the lock)."""
        self._tasks += 1
        try:
            self._pool.submit(self._run_task, key)
        except RuntimeError:  # shut down meanwhile
            self._tasks -= 1

    def _run_task(self, key: str) -> None:
        try:
            self._handle_next(key)
        finally:
            with self._lock:
                self._tasks -= 1
                if self._tasks == 0:
                    self._settled.notify_all()

    # --- handling --------------------------------------------------------------------------------
    def _handle_next(self, key: str) -> None:
        """Handle the first request of ``key``'s queue (or the first ``batch_max``, with a
        batch handler), then give the thread back: the stream goes to the back of the
        pool's queue, or rests (module docstring)."""
        if self._stopping.is_set():
            return
        with self._lock:
            queue = self._queues[key]
            # Only this task takes from the front of the queue; others only append.
            batch = [queue.requests[i] for i in range(min(self._batch_max, len(queue.requests)))]
        outcomes = self._handle_batch(batch) if self._batch_handler else [self._handle(batch[0])]
        with self._lock:
            done = 0
            for request, outcome in zip(batch, outcomes, strict=True):
                queue.requests.popleft()
                if outcome == POSTPONE:
                    queue.requests.append(request)
                    queue.postponed += 1
                else:
                    del self._pending[request.offset]
                    self._read_at.pop(request.offset, None)
                    self.handled += 1
                    done += 1
            if done:
                queue.postponed = queue.rests = 0
            if not queue.requests:
                del self._queues[key]
            elif queue.postponed >= len(queue.requests):  # none of them can run now
                queue.postponed = 0
                queue.rest_until = self._clock.monotonic() + min(
                    self._postpone_s * 2**queue.rests, self._postpone_max_s
                )
                queue.rests += 1
            else:
                self._submit(key)
        if done:
            self._store_checkpoint()

    def _handle(self, request: Request) -> str:
        """Run one request; records its workflow's count (by outcome) and duration."""
        started = self._clock.monotonic()
        outcome, recorded = self._run_handler(request)
        self._record(request, recorded, self._clock.monotonic() - started)
        return outcome

    @staticmethod
    def _record(request: Request, recorded: str, elapsed: float) -> None:
        workflow = metrics.workflow_tag(request.body.get("type"))
        metrics.WORKFLOWS.inc(1, {"workflow": workflow, "outcome": recorded})
        metrics.WORKFLOW_DURATION.observe(elapsed, {"workflow": workflow})

    def _handle_batch(self, batch: list[Request]) -> list[str]:
        """Run the batch handler on ``batch``; each request's outcome (DONE or POSTPONE)."""
        assert self._batch_handler is not None
        started = self._clock.monotonic()
        try:
            answers = self._batch_handler([r.body for r in batch])
            if len(answers) != len(batch):
                raise ValueError(f"{len(answers)} outcomes for {len(batch)} requests")
        except (RetriableError, ConflictingUpdateError) as e:
            log.warning("requests %d..%d: %r; will retry", batch[0].offset, batch[-1].offset, e)
            elapsed = self._clock.monotonic() - started
            for request in batch:
                self._record(request, "retried", elapsed)
            return [POSTPONE] * len(batch)
        except Exception:
            if len(batch) == 1:
                log.exception("request %s at %d failed; dropped", batch[0].body, batch[0].offset)
                self._record(batch[0], "failed", self._clock.monotonic() - started)
                return [DONE]
            log.exception("a batch of %d requests failed; handling each alone", len(batch))
            return [self._handle(request) for request in batch]
        elapsed = self._clock.monotonic() - started
        out = []
        for request, answer in zip(batch, answers, strict=True):
            outcome, recorded = self._classify(request, answer)
            self._record(request, recorded, elapsed)
            out.append(outcome)
        return out

    def _run_handler(self, request: Request) -> tuple[str, str]:
        """``(DONE or POSTPONE, the outcome the metrics record)``."""
        body = request.body
        try:
            answer = self._handler(body)
        except (RetriableError, ConflictingUpdateError) as e:
            log.warning("request %s at %d: %r; will retry", body, request.offset, e)
            return POSTPONE, "retried"
        except Exception:  # one bad request never stops the others
            log.exception("request %s at %d failed; dropped", body, request.offset)
            return DONE, "failed"
        return self._classify(request, answer)

    def _classify(self, request: Request, answer: str) -> tuple[str, str]:
        """A handler's answer for ``request`` as ``(DONE or POSTPONE, metrics outcome)``:
        WAIT never expires, POSTPONE does after ``expiry_s``: since it was posted, by the
        wall clock (``posted_ms``, which another controller instance stamped), or since
        this processor read it, by the monotonic clock, whichever is first. So a wall
        clock set back (NTP, a VM restored) cannot keep an orphaned request, one whose
        property was never written, postponed for as long as it went back: found by the
        simulation (seed 1493602092: the clock went back 17 hours, and a scale request
        whose property a controller crash had left unwritten held the stream)."""
        if answer == WAIT:
            return POSTPONE, "postponed"  # never expires
        if answer == POSTPONE:
            body = request.body
            age_s = (self._clock.wall_time_ms() - int(body.get("posted_ms", 0))) / 1000
            read_at = self._read_at.get(request.offset)
            if read_at is not None:
                age_s = max(age_s, self._clock.monotonic() - read_at)
            if age_s > self._expiry_s:
                log.warning("request %s expired after %.0f s; dropped", body, age_s)
                return DONE, "expired"
            return POSTPONE, "postponed"
        return answer, "done"

    def _checkpoint_offset_locked(self) -> int:
        """Under the lock: the checkpoint as it stands, the offset of the oldest request not
        finished (or where reading goes on)."""
        return min(self._pending) if self._pending else self._position

    def _checkpoint_owed_locked(self) -> bool:
        """Under the lock: a request finished since the checkpoint was last stored (a failed
        store gives its offset back, so it stays owed)."""
        return self._checkpoint_offset_locked() > self._checkpointed

    def _checkpoint_owed(self) -> bool:
        with self._lock:
            return self._checkpoint_owed_locked()

    def _store_checkpoint(self, *, now: bool = False) -> None:
        """Store the checkpoint if the last one is ``checkpoint_interval_s`` old (or ``now``),
        else leave it owed to the reading loop."""
        with self._lock:
            at = self._clock.monotonic()
            if not now and at < self._checkpoint_next:
                return
            self._checkpoint_next = at + self._checkpoint_interval_s
        try:
            self._checkpoint()
        except Exception:  # the metadata's container restarting: the reading loop tries again
            log.exception("%s: storing the checkpoint failed; will try again", self._name)

    def _checkpoint(self) -> None:
        with self._lock:
            offset = self._checkpoint_offset_locked()
            if offset <= self._checkpointed:
                return
            previous, self._checkpointed = self._checkpointed, offset
            self._idle.notify_all()
        try:
            record = self._checkpoints.get(self._key)
            stored = int(record.value["offset"]) if record else 0
            if offset > stored:
                self._checkpoints.put(
                    self._key, {"offset": offset}, None if record is None else record.version
                )
        except ConflictingUpdateError:  # another thread stored a later one meanwhile
            return
        except Exception:
            with self._lock:  # not stored: the next try stores this offset again
                if self._checkpointed == offset:
                    self._checkpointed = previous
            raise
        if offset - self._truncated >= REQUEST_TRUNCATE_BYTES:
            self._stream.truncate(offset)
            self._truncated = offset

    # --- lifecycle -------------------------------------------------------------------------------
    def drain(self, timeout_s: float = 30.0) -> bool:
        """Run until every request posted so far is handled; True if done within
        ``timeout_s`` of the clock (tests)."""
        deadline = self._clock.monotonic() + timeout_s
        while self._clock.monotonic() < deadline:
            self.run_once(0.0)
            with self._lock:
                done = not self._pending
            if done:
                self._store_checkpoint(now=True)
                return True
            self._scheduler.sleep(0.005)
        return False

    def wait_settled(self, timeout_s: float = 30.0) -> bool:
        """Wait until no pool task is queued or running: every stream with requests rests
        (or none has any), so nothing changes until :meth:`run_once` reads new requests or
        ends a rest. True if so within ``timeout_s`` real seconds (a wait on the pool's
        threads); for tests stepping the processor on a manual clock."""
        with self._lock:
            return self._settled.wait_for(lambda: self._tasks == 0, timeout_s)

    def start(self) -> None:
        """Run :meth:`run_once` in a loop started through the scheduler, until :meth:`stop`."""

        def loop() -> None:
            while not self._stopping.is_set():
                try:
                    self.run_once(self.read_wait_s())
                except Exception:  # the stream's container restarting, say: try again
                    if self._stopping.is_set():
                        return  # stopped meanwhile: what the read brought is dropped anyway
                    log.exception("request event processor: reading failed; retrying")
                    self._stopping.wait(0.5)  # a pause that stop() cuts short

        self._scheduler.start(loop, f"pravega-{self._name}")

    def request_stop(self) -> None:
        """Ask the processor to stop, without waiting (several stop side by side)."""
        self._stopping.set()

    def stop(self) -> None:
        """Stop reading and handling; returns once no handler runs any more.

        Queued handlers are cancelled and running ones finish. The reading thread is not
        waited for: it ends after the read it is in (at most ``REQUEST_READ_WAIT_S``), and
        whatever that read brings finds the pool shut down and is dropped (a successor reads
        it again from the checkpoint), so nothing of this processor acts after ``stop``
        returns.
        """
        self._stopping.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
