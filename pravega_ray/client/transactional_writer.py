"""Transactions: events that become visible all at once, or never.

``tw = cluster.create_transactional_writer(scope, stream, serializer=..., lease_s=30.0)``
hands out :class:`Transaction` objects (``tw.begin_txn()``, ``tw.get_txn(txn_id)``).

*design* (the controller's side: docs/design.md, "The controller", Transactions)
A transaction is created by the controller: a UUID, the stream's current epoch,
and one *transaction segment* on each active segment of that epoch
(``naming.transaction_segment_name(parent.name, txn_id.bytes)``). The client writes a
transaction's events with an ordinary :class:`~pravega_ray.client.writer.EventStreamWriter`
whose controller is a small adapter (:class:`_TransactionSegments`) presenting the
transaction segments as the stream's segments: routing by key, batching, pipelining,
reconnects and the conditional appends that rule out duplicates after a container restart
are all the writer's. The writer is made on the first ``write_event`` (a transaction of no
events, or one resumed only to commit it, costs no writer).

``commit()`` flushes, then makes one controller call, ``commit_transaction_and_wait``: the
controller moves the transaction to COMMITTING (the commit event processor merges every
transaction segment into its parent, behind everything the parent acknowledged before) and
answers once it is COMMITTED; the client does not poll. A call waits at most
``COMMIT_CALL_WAIT_S``; one that answers COMMITTING (still committing) is made again, up to
``WORKFLOW_WAIT_S`` in all, then TimeoutError (the commit still completes later). A call
whose outcome is unknown (the controller instance died mid-wait) is repeated by the
controller client: a repeat answers the status reached. ``commit(wait=False)`` makes the
one ``commit_transaction`` call. ``abort()`` asks for ABORTING (the abort event processor
deletes the transaction segments) and returns.

Leases: the controller aborts a transaction whose lease ran out (the transaction timer).
The transactional writer pings each of its open transactions from one thread (started
through its scheduler; a ``ManualThreadScheduler`` starts none, and the caller pings with
``ping_all()``), every ``lease_s / 3``. A ping answered with TxnFailedError
(LeaseExpiredError included) or TxnNotFoundError marks that transaction failed: its later
calls raise that error, unless a commit was asked of it: once ``commit()`` made its call,
whatever came of it (an outcome left unknown may have landed), a refused ping is no failure
of the handle, and the next ``commit()`` asks the controller, whose answer it reports
(COMMITTED, or TxnFailedError if the transaction was aborted). A ping whose outcome is
unknown (ControllerUnavailableError) is tried again on the next round.

Thread-safety: a :class:`Transaction` may be used from several threads (its state changes
under its own lock); the ping thread only reads and marks state.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Iterable
from typing import Any, Generic, TypeVar, cast

from pravega_ray import constants
from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.client.serializers import Serializer, check_serializer
from pravega_ray.client.writer import EventStreamWriter, WriteFuture
from pravega_ray.client.writer_config import WriterConfig, check_timeout
from pravega_ray.contracts.arguments import check_seconds
from pravega_ray.contracts.records import (
    KeyHash,
    SegmentRange,
    StreamInfo,
    StreamState,
    TxnInfo,
    TxnStatus,
)
from pravega_ray.errors import (
    ClientClosedError,
    InvalidArgumentError,
    PravegaError,
    RetriableError,
    TxnFailedError,
    TxnNotFoundError,
)
from pravega_ray.naming import transaction_segment_name, validate_stream_name
from pravega_ray.stream_configuration import StreamConfiguration
from pravega_ray.timing import DAEMON_THREADS, SYSTEM_CLOCK, Clock, Joinable, ThreadScheduler

log = logging.getLogger(__name__)

T = TypeVar("T")

PING_FRACTION = 3
"""A writer pings each open transaction every ``lease_s / PING_FRACTION`` seconds, so two
pings may be lost before a lease runs out."""

COMMIT_CALL_WAIT_S = 10.0
"""The longest one ``commit_transaction_and_wait`` call of ``commit()`` waits in the
controller; ``commit()`` calls again until ``WORKFLOW_WAIT_S`` in all."""


class _TransactionSegments:
    """The controller as a transaction's event writer sees it: the transaction segments are
    the stream's segments, and a sealed one has no successor (TxnFailedError).

    Only the calls :class:`EventStreamWriter` makes are here (``get_stream_info``,
    ``get_successors``); anything else is a bug and raises AttributeError.
    """

    def __init__(self, info: TxnInfo) -> None:
        self._info = info
        self._segments = tuple(
            dataclasses.replace(
                parent, name=transaction_segment_name(parent.name, info.txn_id.bytes)
            )
            for parent in info.segments
        )

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        return StreamInfo(
            scope=scope,
            stream=stream,
            state=StreamState.ACTIVE,
            configuration=StreamConfiguration(),
            epoch=self._info.epoch,
            segments=self._segments,
            creation_time_ms=0,
            key_hash=self._info.key_hash,  # the stream's rule: keys land as on the stream
        )

    def get_successors(
        self, scope: str, stream: str, segment_id: int
    ) -> dict[SegmentRange, list[int]]:
        raise TxnFailedError(
            f"transaction {self._info.txn_id} of {scope}/{stream}: its segment of "
            f"{segment_id} is sealed (the transaction is committing or aborted)"
        )


class Transaction(Generic[T]):
    """One transaction; from :meth:`TransactionalEventStreamWriter.begin_txn` or ``get_txn``.

    ``with tw.begin_txn() as txn:`` commits on a clean exit and aborts on an exception (the
    exception propagates; an abort failing then is logged, not raised over it).
    """

    def __init__(self, owner: TransactionalEventStreamWriter[T], info: TxnInfo) -> None:
        self._owner = owner
        self._info = info
        self.txn_id: uuid.UUID = info.txn_id
        self._lock = threading.Lock()
        self._writer: EventStreamWriter[T] | None = None
        # What this handle asked for: None (open), COMMITTING, ABORTING; or the error a
        # ping or the controller answered that makes the transaction unusable.
        self._requested: TxnStatus | None = None
        self._failure: TxnFailedError | TxnNotFoundError | None = None
        # True while a commit() call is under way: a ping answered "not open" then is the
        # commit's own doing (the commit call reports the outcome), not a failure.
        self._committing = False
        # True once a commit was asked, whatever came of the call: a commit whose outcome
        # stayed unknown may have landed, so a ping answered "not open" afterwards is no
        # failure of this handle either; the next commit() asks the controller, which knows.
        self._commit_asked = False
        if info.status is TxnStatus.COMMITTING or info.status is TxnStatus.COMMITTED:
            self._requested = TxnStatus.COMMITTING
        elif info.status is TxnStatus.ABORTING or info.status is TxnStatus.ABORTED:
            self._requested = TxnStatus.ABORTING

    def __repr__(self) -> str:
        return f"Transaction({self._info.scope}/{self._info.stream}, {self.txn_id})"

    @property
    def open(self) -> bool:
        """True while this handle may still write: not committed, aborted or failed."""
        return self._requested is None and self._failure is None

    # --- writing -------------------------------------------------------------------------------
    def write_event(self, event: T, routing_key: str | None = None) -> WriteFuture:
        """Queue ``event`` in the transaction; its future completes once the event is durably
        in the transaction segment (not yet visible to readers).

        Raises what :meth:`EventStreamWriter.write_event` raises for a bad event or key
        (nothing is queued), TxnFailedError once the transaction is committing, committed,
        aborting, aborted or its lease ran out, TxnNotFoundError if the controller forgot it,
        ClientClosedError once the transactional writer is closed.
        """
        return self._usable_writer().write_event(event, routing_key)

    def write_events(self, events: Iterable[T], routing_key: str | None = None) -> WriteFuture:
        """Queue several events for one routing key in the transaction, in order, with one
        future for all: one append block, as :meth:`EventStreamWriter.write_events` (whose
        errors it raises, nothing queued then), and the errors of :meth:`write_event`.
        """
        return self._usable_writer().write_events(events, routing_key)

    def _usable_writer(self) -> EventStreamWriter[T]:
        """The writer of this transaction's segments (made on first use), after checking the
        transaction still takes events (the errors of :meth:`write_event`)."""
        with self._lock:
            self._check_usable()
            writer = self._writer
            if writer is None:
                writer = self._writer = self._owner._new_writer(self._info)
        return writer

    def flush(self, timeout: float | None = None) -> None:
        """Block until every event written so far is durable in the transaction.

        TimeoutError after ``timeout`` seconds (InvalidArgumentError if not None or a
        finite number >= 0); TxnFailedError if the transaction can no longer take them
        (it was aborted, its lease ran out, its segments are gone); the writer's error
        otherwise.
        """
        timeout = check_timeout("timeout", timeout)
        with self._lock:
            writer = self._writer
        if writer is None:
            return
        try:
            writer.flush(timeout)
        except TimeoutError:
            raise
        except PravegaError as e:
            raise self._explain(e) from e

    # --- completing ----------------------------------------------------------------------------
    def commit(self, wait: bool = True) -> None:
        """Flush, then commit: every event of the transaction becomes visible at once.

        With ``wait`` (the default) returns once the transaction is COMMITTED (its events
        are in the stream, after everything acknowledged on their segments before this
        call); without, once the controller has it COMMITTING (it will commit whatever
        happens to the caller). Committing a committed transaction does nothing. Raises
        TxnFailedError if the transaction is aborting, aborted or its lease ran out (its
        events never appear), TxnNotFoundError, TimeoutError if it is not COMMITTED within
        ``WORKFLOW_WAIT_S`` (it still commits later), InvalidArgumentError for a ``wait``
        that is not a bool.
        """
        if not isinstance(wait, bool):
            raise InvalidArgumentError(f"wait must be a bool, got {wait!r}")
        with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._requested is TxnStatus.ABORTING:
                raise TxnFailedError(f"{self!r} was aborted; it cannot commit")
            writer = self._writer
        if writer is not None:
            try:
                writer.close()  # flushes: every event is in the transaction segments
            except PravegaError as e:
                raise self._explain(e) from e
        controller = self._owner._controller
        info = self._info
        # Bounded by the time each call may wait, not a clock: the controller waits for real.
        left = constants.WORKFLOW_WAIT_S if wait else 0.0
        self._committing = self._commit_asked = True
        try:
            if not wait:
                status = controller.commit_transaction(info.scope, info.stream, self.txn_id)
            else:
                share = min(left, COMMIT_CALL_WAIT_S)
                left -= share
                status = controller.commit_transaction_and_wait(
                    info.scope, info.stream, self.txn_id, share
                )
        except (TxnFailedError, TxnNotFoundError) as e:
            self._fail(e)
            raise
        except BaseException:
            self._committing = False  # outcome unknown: it may still be open; keep pinging
            raise
        with self._lock:
            self._requested = TxnStatus.COMMITTING
        self._owner._forget(self)
        while status is not TxnStatus.COMMITTED and wait:
            if left <= 0:
                raise TimeoutError(
                    f"{self!r} not committed within {constants.WORKFLOW_WAIT_S:.0f} s "
                    f"(it is {status.value}; it still commits)"
                )
            share = min(left, COMMIT_CALL_WAIT_S)
            left -= share
            status = controller.commit_transaction_and_wait(
                info.scope, info.stream, self.txn_id, share
            )

    def abort(self) -> None:
        """Abort: none of the transaction's events will ever be visible.

        Returns once the controller has it ABORTING (the abort processor deletes its
        segments). Aborting an aborted transaction does nothing. Raises TxnFailedError if it
        is committing or committed, TxnNotFoundError if the controller does not know it.
        Events queued and not yet written are dropped.
        """
        with self._lock:
            if self._requested is TxnStatus.COMMITTING:
                raise TxnFailedError(f"{self!r} is committing; it cannot be aborted")
            writer, self._writer = self._writer, None
        info = self._info
        self._owner._controller.abort_transaction(info.scope, info.stream, self.txn_id)
        with self._lock:
            self._requested = TxnStatus.ABORTING
        self._owner._forget(self)
        if writer is not None:
            self._owner._close_quietly(writer)

    def check_status(self) -> TxnStatus:
        """The transaction's status as the controller has it now (TxnNotFoundError once it
        completed long enough ago to be forgotten)."""
        info = self._info
        return self._owner._controller.check_transaction_status(
            info.scope, info.stream, self.txn_id
        )

    def __enter__(self) -> Transaction[T]:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
            return
        if self._requested is not None:
            return
        try:
            self.abort()
        except PravegaError as e:  # the original exception matters more
            log.warning("%r: abort after %r failed: %r", self, exc, e)

    # --- internals -----------------------------------------------------------------------------
    def _check_usable(self) -> None:
        """Under the lock: raise unless this handle may write."""
        if self._failure is not None:
            raise self._failure
        if self._requested is TxnStatus.COMMITTING:
            raise TxnFailedError(f"{self!r} is committing or committed; it takes no more events")
        if self._requested is TxnStatus.ABORTING:
            raise TxnFailedError(f"{self!r} was aborted")
        if self._owner._closed:
            raise ClientClosedError("the transactional writer is closed")

    def _fail(self, error: TxnFailedError | TxnNotFoundError) -> None:
        """Mark the transaction unusable (a ping or a call found it failed)."""
        with self._lock:
            if self._failure is None:
                self._failure = error
            writer, self._writer = self._writer, None
        self._owner._forget(self)
        if writer is not None:
            self._owner._close_quietly(writer)

    def _explain(self, error: PravegaError) -> PravegaError:
        """The error to raise for a failed write: TxnFailedError if the transaction is no
        longer open (its segments were sealed or deleted under the writer), else ``error``."""
        if isinstance(error, (TxnFailedError, TxnNotFoundError)):
            return error
        try:
            status = self.check_status()
        except PravegaError:
            return error
        if status is TxnStatus.OPEN:
            return error
        failure = TxnFailedError(f"{self!r} is {status.value}: its events were refused")
        self._fail(failure)
        return failure


class TransactionalEventStreamWriter(Generic[T]):
    """Begins and resumes transactions on one stream, and keeps their leases alive.

    From ``cluster.create_transactional_writer``. The constructor checks its arguments
    and starts nothing but the ping thread: InvalidNameError for a bad scope or stream,
    InvalidArgumentError for a bad serializer, ``config`` (a WriterConfig or None) or
    ``lease_s`` (finite, above 0, at most ``TXN_LEASE_S_MAX``); ``ping_interval_s``
    defaults to ``lease_s / 3``. ``close()`` (or leaving ``with``) stops pinging and
    waits for the transactions' pending events; it aborts nothing (a transaction not
    committed is aborted by the controller once its lease runs out). ``clock`` and
    ``scheduler`` (keyword-only) time the commit waits, start the ping thread and are
    handed to each transaction's event writer.
    """

    def __init__(
        self,
        scope: str,
        stream: str,
        serializer: Serializer[T],
        controller: ControllerConnection,
        segments: SegmentStoreConnection,
        lease_s: float = constants.TXN_LEASE_S_DEFAULT,
        config: WriterConfig | None = None,
        *,
        ping_interval_s: float | None = None,
        clock: Clock = SYSTEM_CLOCK,
        scheduler: ThreadScheduler = DAEMON_THREADS,
    ) -> None:
        validate_stream_name(scope, stream)
        check_serializer(serializer)
        if config is not None and not isinstance(config, WriterConfig):
            raise InvalidArgumentError(
                f"config must be a WriterConfig or None, got {type(config).__name__}"
            )
        self.lease_s = check_seconds("lease_s", lease_s, constants.TXN_LEASE_S_MAX, positive=True)
        self.ping_interval_s = (
            self.lease_s / PING_FRACTION
            if ping_interval_s is None
            else check_seconds(
                "ping_interval_s", ping_interval_s, constants.TXN_LEASE_S_MAX, positive=True
            )
        )
        self.scope = scope
        self.stream = stream
        self._serializer = serializer
        self._controller = controller
        self._segments = segments
        self._config = config
        self._clock = clock
        self._scheduler = scheduler
        self._lock = threading.Lock()
        self._open: dict[uuid.UUID, Transaction[T]] = {}
        self._closed = False
        self._stop = threading.Event()
        self._pinger: Joinable | None = scheduler.start(
            self._ping_loop, f"pravega-txn-ping-{stream}"
        )

    # --- public API ----------------------------------------------------------------------------
    def begin_txn(self) -> Transaction[T]:
        """Create a transaction (OPEN, on the stream's current epoch) and start pinging it.

        Raises StreamNotFoundError, ScopeNotFoundError, StreamSealedError (a sealed stream
        takes no transactions), ClientClosedError after close().
        """
        self._check_open()
        info = self._controller.create_transaction(self.scope, self.stream, self.lease_s)
        return self._track(Transaction(self, info))

    def get_txn(self, txn_id: uuid.UUID) -> Transaction[T]:
        """A handle on transaction ``txn_id`` of this stream, created by any writer.

        An open one can be written to, committed and aborted through it, and this writer
        pings it from now on. One that ended answers ``check_status``; committing a
        committed one does nothing, anything else raises TxnFailedError.
        InvalidArgumentError if ``txn_id`` is not a uuid.UUID; TxnNotFoundError if the
        controller does not know it; ClientClosedError after close().
        """
        if not isinstance(txn_id, uuid.UUID):
            raise InvalidArgumentError(f"txn_id must be a uuid.UUID, got {type(txn_id).__name__}")
        self._check_open()
        try:
            info = self._controller.get_transaction(self.scope, self.stream, txn_id)
        except TxnFailedError:
            # It ended (committing, committed, aborting, aborted): a handle that knows so,
            # so that committing a committed one is a no-op and the rest raise.
            status = self._controller.check_transaction_status(self.scope, self.stream, txn_id)
            # No segments, so never written to: the routing rule is never used.
            info = TxnInfo(self.scope, self.stream, txn_id, -1, (), status, 0, 0, KeyHash.LEGACY)
        txn = Transaction(self, info)
        return self._track(txn) if txn.open else txn

    def close(self) -> None:
        """Stop pinging and wait for every open transaction's pending events. Idempotent.

        Aborts nothing. The transactions' handles can still commit, abort and check their
        status; writing to them raises ClientClosedError.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            txns = list(self._open.values())
            self._open.clear()
        self._stop.set()
        for txn in txns:
            with txn._lock:
                writer = txn._writer
            if writer is not None:
                self._close_quietly(writer)
        if self._pinger is not None:
            self._pinger.join(timeout=10)

    def __enter__(self) -> TransactionalEventStreamWriter[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals -----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the transactional writer is closed")

    def _track(self, txn: Transaction[T]) -> Transaction[T]:
        with self._lock:
            if not self._closed:
                self._open[txn.txn_id] = txn
        return txn

    def _forget(self, txn: Transaction[T]) -> None:
        with self._lock:
            self._open.pop(txn.txn_id, None)

    def _new_writer(self, info: TxnInfo) -> EventStreamWriter[T]:
        """An event writer over the transaction's segments (see the module docstring)."""
        adapter = cast(ControllerConnection, _TransactionSegments(info))
        return EventStreamWriter(
            self.scope,
            self.stream,
            self._serializer,
            adapter,
            self._segments,
            self._config,
            clock=self._clock,
            scheduler=self._scheduler,
        )

    @staticmethod
    def _close_quietly(writer: EventStreamWriter[Any]) -> None:
        try:
            writer.close()
        except PravegaError as e:
            log.info("transaction writer closed with %r", e)

    def _ping_loop(self) -> None:
        while not self._stop.wait(self.ping_interval_s):
            try:
                self.ping_all()
            except Exception:  # pragma: no cover - a bug; keep pinging the others
                log.exception("transaction ping round failed")

    def ping_all(self) -> int:
        """Ping every open transaction once now; returns how many pings succeeded.

        The ping thread calls this every ``ping_interval_s``; a transaction whose ping
        answers TxnFailedError, LeaseExpiredError or TxnNotFoundError is marked failed.
        """
        with self._lock:
            txns = list(self._open.values())
        renewed = 0
        for txn in txns:
            if self._stop.is_set():
                break
            try:
                self._controller.ping_transaction(self.scope, self.stream, txn.txn_id, self.lease_s)
                renewed += 1
            except (TxnFailedError, TxnNotFoundError) as e:
                if txn._committing or txn._commit_asked:
                    # Committing, or a commit whose outcome stayed unknown may have landed:
                    # commit() reports the outcome (the controller's), not this ping.
                    log.debug("%r: ping answered %r after a commit was asked", txn, e)
                    continue
                log.warning("%r: ping refused, the transaction failed: %r", txn, e)
                txn._fail(e)
            except RetriableError as e:
                log.info("%r: ping outcome unknown, next round: %r", txn, e)
            except PravegaError as e:
                log.warning("%r: ping failed: %r", txn, e)
        return renewed
