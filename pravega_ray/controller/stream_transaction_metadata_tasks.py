"""The controller's transaction calls (Pravega's ``StreamTransactionMetadataTasks``).

A service of :class:`~pravega_ray.controller.controller.Controller`. Records are in
``transactions.py``, the commit/abort workflows in ``transaction_workflows.py``.

* **Create**: a new UUID; the stream's newest epoch (the partial one of a scale under way,
  so a transaction created during a scale uses the new epoch); the active record (OPEN);
  then the epoch's "closed" mark is checked (closed: the record is removed and the creation
  tried again on the next epoch); then one transaction segment per segment of the epoch,
  role TRANSACTION, in its parent's container. A creation cut short leaves an OPEN record
  whose lease runs out: the timer aborts it (deleting whatever segments exist).
* **Ping**: the lease is renewed to ``now + lease_s``, *clamped* to the transaction's
  maximum deadline (``created + TXN_MAX_EXECUTION_S``); LeaseExpiredError only when the
  lease already ran out or the maximum is already reached (then the transaction is
  aborted).
* **Commit** / **abort**: a compare-and-set of the status, then the event posted (see
  ``transaction_workflows.py``); repeats are no-ops answering the status.
* **Commit and wait**: the commit asked as above, then the call waits, here, until the
  transaction is COMMITTED or ``timeout_s`` passed (it answers the status reached then:
  COMMITTING means "still committing; it will"). It waits through a :data:`CommitWaiter`:
  by default on this process's ``COMMIT_NOTICES`` (the commit handler of an in-process
  cluster notifies them), re-reading the record at least every ``COMMIT_RECHECK_S``; a
  Ray controller instance waits for its own store's watcher to apply the completed record
  (:class:`WatchedCommitWaiter`), and asks the commit processor actor, which notifies from
  its own process, while it holds no lease. A waiter is only a hint: the answer is always
  read from the record.

Every argument is checked before anything is stored: ``txn_id`` must be a ``uuid.UUID``,
``lease_s`` a finite number (not a bool) in ``(0, TXN_LEASE_S_MAX]``.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from pravega_ray.constants import TXN_LEASE_S_MAX, TXN_MAX_EXECUTION_S
from pravega_ray.contracts.arguments import check_seconds
from pravega_ray.contracts.records import KeyHash, StreamState, TxnInfo, TxnStatus
from pravega_ray.controller.controller_steps import ControllerSteps
from pravega_ray.controller.epochs import EpochRecord, to_range
from pravega_ray.controller.segment_helper import run_each
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.controller.stream_records import KEY_HASH_UNRECORDED, key_hash_of
from pravega_ray.controller.transaction_workflows import (
    COMMIT_NOTICES,
    TransactionSegments,
    TransactionWorkflows,
)
from pravega_ray.controller.transactions import TxnRecord, TxnRecords
from pravega_ray.errors import (
    DataCorruptionError,
    InvalidArgumentError,
    LeaseExpiredError,
    PravegaError,
    StreamNotFoundError,
    StreamSealedError,
    TxnFailedError,
    TxnNotFoundError,
)
from pravega_ray.timing import Clock, ThreadScheduler

log = logging.getLogger(__name__)

__all__ = [
    "COMMIT_WAIT_S_MAX",
    "CommitWaiter",
    "RecordSubscriptions",
    "StreamTransactionMetadataTasks",
    "WatchedCommitWaiter",
    "check_lease",
    "check_txn_id",
    "local_commit_waiter",
    "new_transaction_id",
]

CREATE_ATTEMPTS_MAX = 5
"""Epochs a creation moves on (each closed by a scale meanwhile) before giving up."""
COMMIT_WAIT_S_MAX = 60.0
"""The longest ``commit_transaction_and_wait`` waits in one call (well within a controller
call's timeout); a client waiting longer calls again."""
COMMIT_RECHECK_S = 1.0
"""A waiting commit reads its record at least this often (a waiter's notice is a hint)."""

CommitWaiter = Callable[[str, str, uuid.UUID, float], bool]
"""``wait(scope, stream, txn_id, timeout_s)``: return once the transaction may be committed
(True: a notice came) or after about ``timeout_s`` seconds (False). Never raises for an
unknown outcome: it returns, and the caller reads the record."""


def local_commit_waiter(scope: str, stream: str, txn_id: uuid.UUID, timeout_s: float) -> bool:
    """Wait on this process's ``COMMIT_NOTICES`` (the in-process cluster's commit handler
    runs here)."""
    return COMMIT_NOTICES.wait(txn_id, timeout_s)


class RecordSubscriptions(Protocol):
    """A store that announces the changes its watcher applies
    (:meth:`~pravega_ray.controller.table_metadata_store.TableMetadataStore.subscribe`)."""

    def subscribe(self, key: str, callback: Callable[[], None]) -> Callable[[], None] | None: ...

    def get(self, key: str) -> Any: ...


class WatchedCommitWaiter:
    """The ``CommitWaiter`` of a controller instance whose store watches its records: it
    waits for this process's watcher to apply the transaction's completed record (the
    commit processor's write of it is acknowledged only once every watcher applied it, so
    the wait ends before that write returns, and costs no call). While the record's
    partition is not under a lease it asks ``fallback`` (the commit processor) instead.
    Thread-safe."""

    def __init__(self, store: RecordSubscriptions, fallback: CommitWaiter) -> None:
        self._store = store
        self._fallback = fallback

    def __call__(self, scope: str, stream: str, txn_id: uuid.UUID, timeout_s: float) -> bool:
        key = TxnRecords.completed_key(scope, stream, txn_id)
        changed = threading.Event()
        cancel = self._store.subscribe(key, changed.set)
        if cancel is None:
            return self._fallback(scope, stream, txn_id, timeout_s)
        try:
            try:
                if self._store.get(key) is not None:  # completed before the subscription
                    return True
            except PravegaError:
                return True  # the caller reads it again, and reports what it finds
            return changed.wait(timeout_s)
        finally:
            cancel()


def check_lease(lease_s: object) -> float:
    """``lease_s`` as a float; InvalidArgumentError unless a finite number in (0, max]."""
    return check_seconds("lease_s", lease_s, TXN_LEASE_S_MAX, positive=True)


def check_txn_id(txn_id: object) -> uuid.UUID:
    if not isinstance(txn_id, uuid.UUID):
        raise InvalidArgumentError(f"txn_id must be a uuid.UUID, got {type(txn_id).__name__}")
    return txn_id


class StreamTransactionMetadataTasks:
    """Transaction calls over the records of ``store`` (module docstring); the steps they
    share with the timer and the event processors are ``TransactionWorkflows``' (which
    posts commit and abort events, paced by ``scheduler``)."""

    def __init__(
        self,
        store: StreamMetadataStore,
        segments: TransactionSegments,
        steps: ControllerSteps,
        clock: Clock,
        scheduler: ThreadScheduler,
        commit_waiter: CommitWaiter = local_commit_waiter,
    ) -> None:
        self._store = store
        self._commit_waiter = commit_waiter
        self._segments = segments
        self._steps = steps
        self._clock = clock
        self._workflows = TransactionWorkflows(store, segments, clock=clock, scheduler=scheduler)

    def _txn_args(self, scope: str, stream: str, txn_id: object) -> uuid.UUID:
        self._steps.ready()
        # Names and scope only: a transaction of a stream deleted since is not found
        # (TxnNotFoundError), which ends its writer's pings.
        self._steps.check_stream_names(scope, stream)
        return check_txn_id(txn_id)

    def _txn_info(self, record: TxnRecord) -> TxnInfo:
        row = self._store.streams.epoch(record.scope, record.stream, record.epoch)
        try:
            key_hash = key_hash_of(self._store.streams.get(record.scope, record.stream)[0])
        except StreamNotFoundError:
            # The stream is gone, and with it the transaction's segments: no event can be
            # written to it whatever the rule.
            key_hash = KEY_HASH_UNRECORDED
        return self._info_of(record, row, key_hash)

    @staticmethod
    def _info_of(record: TxnRecord, row: EpochRecord | None, key_hash: KeyHash) -> TxnInfo:
        """``record`` as TxnInfo, its segments those of ``row`` (its epoch; None: gone),
        routed by the stream's rule ``key_hash``."""
        rows = row.segments if row is not None else ()
        return TxnInfo(
            scope=record.scope,
            stream=record.stream,
            txn_id=record.txn_id,
            epoch=record.epoch,
            segments=tuple(to_range(record.scope, record.stream, r) for r in rows),
            status=record.status,
            lease_deadline_ms=record.lease_deadline_ms,
            max_deadline_ms=record.max_deadline_ms,
            key_hash=key_hash,
        )

    # --- create ----------------------------------------------------------------------------------
    def create_transaction(self, scope: str, stream: str, lease_s: float) -> TxnInfo:
        """Create a transaction with a lease of ``lease_s`` seconds (module docstring).

        Raises InvalidArgumentError (bad lease), StreamSealedError, StreamNotFoundError,
        ScopeNotFoundError, InvalidNameError; nothing is stored then.
        """
        self._steps.ready()
        self._steps.check_stream_names(scope, stream)
        lease = check_lease(lease_s)
        for _ in range(CREATE_ATTEMPTS_MAX):
            info = self._create_once(scope, stream, lease)
            if info is not None:
                return info
        raise TxnFailedError(
            f"no epoch of {scope}/{stream} stayed open to new transactions; try again"
        )

    def _create_once(self, scope: str, stream: str, lease: float) -> TxnInfo | None:
        """One creation attempt; None if the epoch was closed meanwhile (try the next)."""
        streams, txns = self._store.streams, self._store.txns
        value = streams.get(scope, stream)[0]  # StreamNotFoundError
        state = StreamState(value["state"])
        if state in (StreamState.SEALING, StreamState.SEALED):
            raise StreamSealedError(f"stream {scope}/{stream} is sealed")
        if state is StreamState.CREATING:
            raise StreamNotFoundError(f"stream {scope}/{stream} is still being created")
        epoch, row = self._newest_epoch(scope, stream, int(value["epoch"]))
        now = self._clock.wall_time_ms()
        max_deadline = now + int(TXN_MAX_EXECUTION_S * 1000)
        txn_id = new_transaction_id(epoch)
        record = txns.create(
            scope,
            stream,
            txn_id,
            epoch,
            min(now + int(lease * 1000), max_deadline),
            max_deadline,
            now,
        )
        pairs = self._workflows.pairs_of(row, scope, stream, txn_id)
        closed = False

        def check_mark() -> None:  # checked after the record was written
            nonlocal closed
            closed = self._store.txn_epoch_closed(scope, stream, epoch)

        def create() -> None:  # every parent's, sent together: one round trip
            self._segments.create_transaction_segments([source for _, source in pairs])

        run_each(lambda step: step(), [check_mark, create])  # side by side
        if closed:  # a scale or seal closed the epoch meanwhile: the next one
            txns.remove(scope, stream, epoch, txn_id)
            self._delete_segments(pairs)
            return None
        if txns.active(scope, stream, epoch, txn_id) != record:
            # Aborted meanwhile (a seal, or a lease shorter than the creation): its abort
            # may have run before these creates.
            self._delete_segments(pairs)
            if streams.state(scope, stream) in (StreamState.SEALING, StreamState.SEALED):
                raise StreamSealedError(f"stream {scope}/{stream} is being sealed")
            raise TxnFailedError(f"transaction {txn_id} was aborted while being created")
        return self._info_of(record, row, key_hash_of(value))

    def _newest_epoch(
        self, scope: str, stream: str, current: int
    ) -> tuple[int, EpochRecord | None]:
        """The epoch a new transaction goes to and its row: a running scale's new one once
        its row exists (a rolling commit's second new one, which becomes current), else
        ``current`` (the rows read side by side). A rolling commit closes its first new
        epoch before it stores the rows: a transaction created there moves on."""
        streams = self._store.streams
        rows: dict[int, EpochRecord | None] = {}

        def read_row(e: int) -> None:
            rows[e] = streams.epoch(scope, stream, e)

        run_each(read_row, (current, current + 1, current + 2))
        epoch = max(e for e, row in rows.items() if row is not None or e == current)
        return epoch, rows[epoch]

    def _delete_segments(self, pairs: list[tuple[str, str]]) -> None:
        self._segments.delete_segments([source for _, source in pairs])  # gone = done

    # --- reads -----------------------------------------------------------------------------------
    def _lookup(
        self, scope: str, stream: str, txn_id: uuid.UUID
    ) -> tuple[TxnRecord | None, TxnStatus]:
        """The active record (None once ended) and the status; TxnNotFoundError if unknown.

        A transaction ends with its completed record written first and its active record
        removed after: a COMMITTING or ABORTING active record whose completed record exists
        has ended (its commit was answered COMMITTED from that record already), so the
        completed record answers."""
        record = self._workflows.find(scope, stream, txn_id)
        if record is not None:
            ended = self._ended(record)
            if ended is not None:
                return None, ended.status
            return record, record.status
        return None, self._completed(scope, stream, txn_id).status

    def _ended(self, record: TxnRecord) -> TxnRecord | None:
        """The completed record of an active record that is COMMITTING or ABORTING, if it is
        written (the transaction has ended, its active record not removed yet); else None."""
        if record.status not in (TxnStatus.COMMITTING, TxnStatus.ABORTING):
            return None
        return self._store.txns.completed(record.scope, record.stream, record.txn_id)

    def _completed(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnRecord:
        # Read after the active record: an ending transaction writes this one first.
        completed = self._store.txns.completed(scope, stream, txn_id)
        if completed is None:
            raise TxnNotFoundError(f"no transaction {txn_id} on {scope}/{stream}")
        return completed

    def check_transaction_status(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        """The transaction's status. Raises TxnNotFoundError, InvalidArgumentError."""
        txn_id = self._txn_args(scope, stream, txn_id)
        return self._lookup(scope, stream, txn_id)[1]

    def get_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnInfo:
        """The transaction's info (to resume it elsewhere). For an ended one (COMMITTED or
        ABORTED) both deadlines are the time it ended. TxnNotFoundError if unknown."""
        txn_id = self._txn_args(scope, stream, txn_id)
        record = self._lookup(scope, stream, txn_id)[0]
        return self._txn_info(record or self._completed(scope, stream, txn_id))

    def list_transactions(self, scope: str, stream: str) -> dict[uuid.UUID, TxnStatus]:
        """The stream's active transactions (OPEN, COMMITTING, ABORTING) and their status.
        A transaction whose completed record is written has ended, though its active record
        may not be removed yet: it is not listed (as :meth:`check_transaction_status`
        answers COMMITTED or ABORTED for it)."""
        self._steps.ready()
        self._steps.check_stream(scope, stream)
        workflows, txns = self._workflows, self._store.txns
        out: dict[uuid.UUID, TxnStatus] = {}
        for epoch in workflows.candidate_epochs(scope, stream):
            for txn_id in txns.list_epoch(scope, stream, epoch):
                record = txns.active(scope, stream, epoch, txn_id)
                if record is not None and self._ended(record) is None:
                    out[txn_id] = record.status
        return out

    def list_completed_transactions(self, scope: str, stream: str) -> dict[uuid.UUID, TxnStatus]:
        """The stream's transactions that ended (COMMITTED or ABORTED) and are still
        remembered (``TXN_COMPLETED_KEEP_S`` after they ended), and their status. A damaged
        record is left out and logged (the others are listed)."""
        self._steps.ready()
        self._steps.check_stream(scope, stream)
        txns = self._store.txns
        out: dict[uuid.UUID, TxnStatus] = {}
        for txn_id in txns.list_completed(scope, stream):
            try:
                record = txns.completed(scope, stream, txn_id)
            except DataCorruptionError as e:
                log.error("completed transactions of %s/%s: %s", scope, stream, e)
                continue
            if record is not None:
                out[txn_id] = record.status
        return out

    # --- ping, commit, abort ---------------------------------------------------------------------
    def ping_transaction(self, scope: str, stream: str, txn_id: uuid.UUID, lease_s: float) -> int:
        """Renew the lease to ``now + lease_s`` (clamped to the maximum deadline); returns the
        new lease deadline (ms). LeaseExpiredError if the lease already ran out or the maximum
        is reached (the transaction is aborted then); TxnFailedError if it is not OPEN;
        TxnNotFoundError; InvalidArgumentError."""
        txn_id = self._txn_args(scope, stream, txn_id)
        lease = check_lease(lease_s)
        record, status = self._lookup(scope, stream, txn_id)
        if record is None or status is not TxnStatus.OPEN:
            raise TxnFailedError(f"transaction {txn_id} is {status.value}")
        now = self._clock.wall_time_ms()
        expired = False

        def decide(current: TxnRecord) -> dict[str, Any] | None:
            nonlocal expired
            if current.status is not TxnStatus.OPEN:
                raise TxnFailedError(f"transaction {txn_id} is {current.status.value}")
            expired = now > current.deadline_ms or now >= current.max_deadline_ms
            if expired:
                return None
            return {"lease_deadline_ms": min(now + int(lease * 1000), current.max_deadline_ms)}

        stored = self._workflows.change(record, decide)
        if stored is None:
            raise TxnFailedError(f"transaction {txn_id} has ended")
        if expired:
            self._workflows.begin_abort(stored, only_expired_at=now)
            raise LeaseExpiredError(f"transaction {txn_id}'s lease ran out; it is aborted")
        return stored.lease_deadline_ms

    def commit_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        """OPEN -> COMMITTING and the commit event posted; returns the status (COMMITTING or,
        for a repeat, COMMITTED). TxnFailedError if aborting or aborted; LeaseExpiredError
        if its lease already ran out (it is aborted); TxnNotFoundError."""
        txn_id = self._txn_args(scope, stream, txn_id)
        record, status = self._lookup(scope, stream, txn_id)
        if status in (TxnStatus.COMMITTING, TxnStatus.COMMITTED):
            return status
        if record is None or status is not TxnStatus.OPEN:
            raise TxnFailedError(f"transaction {txn_id} is {status.value}; it cannot commit")
        now = self._clock.wall_time_ms()
        expired = False

        def decide(current: TxnRecord) -> dict[str, Any] | None:
            nonlocal expired
            if current.status is not TxnStatus.OPEN:
                return None
            expired = now > current.deadline_ms
            if expired:
                return None
            return {"status": TxnStatus.COMMITTING, "status_ms": now}

        workflows = self._workflows
        stored = workflows.change(record, decide)
        if expired and stored is not None:
            workflows.begin_abort(stored, only_expired_at=now)
            raise LeaseExpiredError(f"transaction {txn_id}'s lease ran out; it is aborted")
        if stored is None:  # ended meanwhile
            return self.commit_transaction(scope, stream, txn_id)
        if stored.status is TxnStatus.COMMITTING:
            workflows.post(stored, "commit")
            return TxnStatus.COMMITTING
        raise TxnFailedError(f"transaction {txn_id} is {stored.status.value}; it cannot commit")

    def commit_transaction_and_wait(
        self, scope: str, stream: str, txn_id: uuid.UUID, timeout_s: float
    ) -> TxnStatus:
        """:meth:`commit_transaction`, then wait until COMMITTED, at most ``timeout_s``
        seconds (module docstring); returns COMMITTED, or COMMITTING if the time ran out
        first (the commit still completes). Raises what ``commit_transaction`` raises, and
        InvalidArgumentError unless ``timeout_s`` is a finite number in
        [0, ``COMMIT_WAIT_S_MAX``] (checked before anything changes)."""
        txn_id = self._txn_args(scope, stream, txn_id)
        timeout = check_seconds("timeout_s", timeout_s, COMMIT_WAIT_S_MAX)
        status = self.commit_transaction(scope, stream, txn_id)
        # Bounded by the shares waited, not a clock: each waits (at most) for real.
        left = timeout
        while status is TxnStatus.COMMITTING and left > 0:
            share = min(left, COMMIT_RECHECK_S)
            left -= share
            self._commit_waiter(scope, stream, txn_id, share)
            # A committing transaction only ever becomes COMMITTED: its completed record
            # answers in one read; without one, the whole lookup.
            completed = self._store.txns.completed(scope, stream, txn_id)
            status = completed.status if completed else self._lookup(scope, stream, txn_id)[1]
        if status in (TxnStatus.ABORTING, TxnStatus.ABORTED):  # pragma: no cover - a bug
            raise TxnFailedError(f"transaction {txn_id} is {status.value}; it did not commit")
        return status

    def abort_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        """OPEN -> ABORTING and the abort event posted; returns the status (ABORTING or, for
        a repeat, ABORTED). TxnFailedError if committing or committed; TxnNotFoundError."""
        txn_id = self._txn_args(scope, stream, txn_id)
        record, status = self._lookup(scope, stream, txn_id)
        if status in (TxnStatus.ABORTING, TxnStatus.ABORTED):
            return status
        if record is None or status is not TxnStatus.OPEN:
            raise TxnFailedError(f"transaction {txn_id} is {status.value}; it cannot abort")
        workflows = self._workflows
        workflows.begin_abort(record)
        return self._abort_status(scope, stream, txn_id)

    def _abort_status(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        status = self._lookup(scope, stream, txn_id)[1]
        if status in (TxnStatus.COMMITTING, TxnStatus.COMMITTED):
            raise TxnFailedError(f"transaction {txn_id} is {status.value}; it cannot abort")
        return status


def new_transaction_id(epoch: int) -> uuid.UUID:
    """A new transaction's id: its epoch in the top 32 bits, as Pravega's are (its clients
    read the epoch back from there: ``get_txn`` asks for that epoch's segments), then 32
    random bits, then 63 random bits under a clear bit 63. Pravega's controller numbers the
    low half from a counter, so it is never negative as a signed 64-bit ``lowBits``, and the
    Rust client (the official Python client's core) sign-extends a negative one into the
    high half, naming transaction segments that do not exist."""
    if not 0 <= epoch < 2**32:
        raise InvalidArgumentError(f"an epoch of a transaction id is in [0, 2**32), got {epoch}")
    random_bits = int.from_bytes(os.urandom(12), "big")
    high = (epoch << 32) | (random_bits >> 64)
    low = random_bits & ((1 << 63) - 1)
    return uuid.UUID(int=(high << 64) | low)
