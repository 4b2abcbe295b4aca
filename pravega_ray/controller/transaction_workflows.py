"""Transaction workflows (Pravega's controller design, "Transaction Manager"; docs/design.md
"The controller"): the commit and abort event processors' handlers, and the steps the
controller API, the timer and the stream workflows share.

**Commit.** The API moves the active record OPEN -> COMMITTING (compare-and-set), then posts a
commit event to the internal commit stream (``_system/_commitstream``). The *commit event
processor* (:func:`commit_processor`; one stream's requests one batch at a time, in the order
posted) runs :meth:`handle_commit`:

1. the record is gone or not COMMITTING: done (a repeat);
2. the transaction's epoch is not active yet (created against the partial epoch of a scale
   under way): :data:`WAIT`, tried again later, never expiring;
3. seal every transaction segment (idempotent; gone = merged already) and
4. merge each into its parent (one atomic merge per parent; SegmentNotFoundError for the
   source = merged already by an earlier, interrupted run). Steps 3 and 4 are one call per
   container for all its parents (``SegmentStoreService.seal_and_merge``: the container
   starts every seal, then each parent's merges in order, the parents side by side), the
   containers called side by side: each parent's merges are independent of the others';
5. record COMMITTED: the completed record, then the active one removed.

Each step is idempotent, so a processor killed after any step and run again from its
checkpoint finishes the commit exactly once: a transaction segment is merged at most once
because the merge deletes it.

**Abort.** OPEN -> ABORTING (by the API, the timer, or a seal), then an abort event on
``_system/_abortstream``; the *abort event processor* (concurrent, :func:`abort_processor`)
deletes the transaction segments (gone = done) and records ABORTED.

**Scale interplay (rolling transactions).** A scale no longer waits for open transactions:
it stores its new epoch's row, closes the old epoch to new transactions
(:meth:`TransactionWorkflows.close_and_count` is what a seal calls), and waits only while
:meth:`TransactionWorkflows.merging` counts a COMMITTING transaction of the old epoch that a
commit round may be merging. A commit round that finds its transaction's epoch old, or a row
after it stored, posts a ``roll`` request to the request stream, marks the record
``rolling`` and answers WAIT; the request processor's rolling commit
(``stream_workflows.py``) merges it into duplicates of its epoch's segments and records it
COMMITTED. docs/design.md "The controller", Transactions.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pravega_ray.constants import REQUEST_CONCURRENCY, SYSTEM_SCOPE
from pravega_ray.contracts.records import TxnStatus
from pravega_ray.contracts.segment_store import ReadResult
from pravega_ray.controller.epochs import EpochRecord
from pravega_ray.controller.event_processor import DONE, WAIT, RequestEventProcessor
from pravega_ray.controller.request_stream import RequestStream
from pravega_ray.controller.segment_helper import SegmentHelper, run_each
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.controller.transactions import TxnRecord
from pravega_ray.errors import (
    ConflictingUpdateError,
    StreamNotFoundError,
)
from pravega_ray.naming import segment_id, stream_segment_name, transaction_segment_name
from pravega_ray.timing import DAEMON_THREADS, SYSTEM_CLOCK, Clock, ThreadScheduler

__all__ = [
    "ABORT_SEGMENT",
    "COMMIT_NOTICES",
    "COMMIT_SEGMENT",
    "CommitNotices",
    "TransactionSegments",
    "TransactionWorkflows",
    "abort_processor",
    "commit_processor",
]

log = logging.getLogger(__name__)

COMMIT_SEGMENT = stream_segment_name(SYSTEM_SCOPE, "_commitstream", segment_id(0, 0))
ABORT_SEGMENT = stream_segment_name(SYSTEM_SCOPE, "_abortstream", segment_id(0, 0))
CAS_ATTEMPTS_MAX = 20
"""Compare-and-set attempts on one transaction record before ConflictingUpdateError."""
COMMIT_BATCH_MAX = 64
"""Commit requests of one stream the commit processor takes in one round at most."""
COMMIT_THREADS = 2
"""Threads of the commit processor. One stream's batches still run one at a time, in order
(the event processor serializes per stream); the second thread lets another stream's batch,
or the next batch of the same stream, start while a thread stores the checkpoint of the
batch it finished (a table write)."""
NOTICES_REMEMBERED = 10_000
"""Commits a process's :class:`CommitNotices` remembers, for a waiter that comes late."""


class CommitNotices:
    """Who waits for which transaction's commit in this process, and the recent commits.

    The commit handler :meth:`notify` s each transaction it commits (after its completed
    record is stored); a waiter :meth:`subscribe` s a callback (or blocks in :meth:`wait`).
    The last ``remembered`` commits are kept, so a waiter that subscribes just after the
    commit is answered at once. A notice is a hint: a waiter reads the record to know the
    status (a processor that restarted remembers nothing, so waits are bounded).
    Thread-safe; callbacks run on the notifying thread (or the subscriber's, if remembered)
    and must not block.
    """

    def __init__(self, remembered: int = NOTICES_REMEMBERED) -> None:
        self._lock = threading.Lock()
        self._remembered = remembered
        self._recent: OrderedDict[uuid.UUID, None] = OrderedDict()
        self._waiters: dict[uuid.UUID, list[Callable[[], None]]] = {}

    def notify(self, txn_id: uuid.UUID) -> None:
        """``txn_id`` is committed: run its waiters' callbacks, remember it."""
        with self._lock:
            self._recent[txn_id] = None
            self._recent.move_to_end(txn_id)
            while len(self._recent) > self._remembered:
                self._recent.popitem(last=False)
            callbacks = self._waiters.pop(txn_id, [])
        for callback in callbacks:
            callback()

    def subscribe(self, txn_id: uuid.UUID, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` once ``txn_id`` is committed (now, if it is remembered so);
        returns the call that cancels the subscription (harmless after it fired)."""
        with self._lock:
            done = txn_id in self._recent
            if not done:
                self._waiters.setdefault(txn_id, []).append(callback)
        if done:
            callback()

        def cancel() -> None:
            with self._lock:
                callbacks = self._waiters.get(txn_id)
                if callbacks is not None and callback in callbacks:
                    callbacks.remove(callback)
                    if not callbacks:
                        del self._waiters[txn_id]

        return cancel

    def wait(self, txn_id: uuid.UUID, timeout_s: float) -> bool:
        """Block until ``txn_id`` is committed (True) or ``timeout_s`` passed (False)."""
        event = threading.Event()
        cancel = self.subscribe(txn_id, event.set)
        try:
            return event.wait(timeout_s)
        finally:
            cancel()

    def waiting(self) -> int:
        """How many subscriptions are pending (tests)."""
        with self._lock:
            return sum(len(c) for c in self._waiters.values())


COMMIT_NOTICES = CommitNotices()
"""This process's notices: every commit handler of the process notifies them."""


class TransactionSegments(Protocol):
    """The segment calls transaction workflows make (``SegmentHelper`` provides them)."""

    def create_segment(self, segment: str) -> None: ...

    def create_transaction_segments(self, segments: Sequence[str]) -> None: ...

    def delete_segments(self, segments: Sequence[str]) -> None: ...

    def seal_and_merge(self, sources: Mapping[str, Sequence[str]]) -> None: ...

    def append_plain(self, segment: str, data: bytes) -> int: ...

    def read(self, segment: str, offset: int, max_bytes: int, wait_s: float) -> ReadResult: ...

    def truncate_segment(self, segment: str, offset: int) -> None: ...


class TransactionWorkflows:
    """Transaction steps over the records of ``store`` and the segments of ``segments``.

    Thread-safe as far as its store and segments are (every record change is one
    compare-and-set). ``clock`` stamps status changes and events; ``scheduler`` paces the
    repeats of a post whose outcome is unknown. ``step`` is called between the handlers'
    steps (tests kill there).
    """

    def __init__(
        self,
        store: StreamMetadataStore,
        segments: TransactionSegments,
        *,
        clock: Clock = SYSTEM_CLOCK,
        scheduler: ThreadScheduler = DAEMON_THREADS,
        step: Callable[[str], None] = lambda name: None,
    ) -> None:
        self._streams = store.streams
        self.txns = store.txns
        self._segments = segments
        self._clock = clock
        self._step = step
        self.commits = RequestStream(segments, COMMIT_SEGMENT, scheduler=scheduler)
        self.aborts = RequestStream(segments, ABORT_SEGMENT, scheduler=scheduler)
        self.requests = RequestStream(segments, scheduler=scheduler)  # rolling commits

    # --- lookups ---------------------------------------------------------------------------------
    def candidate_epochs(self, scope: str, stream: str) -> list[int]:
        """The epochs where an active transaction of the stream can be: the current one
        first (where nearly all are), then a running scale's new one (a rolling commit's
        two), then the older ones down to the stream's ``txn_low_epoch`` (a scale no longer
        waits for open transactions: they stay in their epoch until they end)."""
        value = self._streams.get(scope, stream)[0]
        current = int(value["epoch"])
        low = self._streams.txn_low_epoch(value)
        return [current, current + 1, current + 2, *range(current - 1, low - 1, -1)]

    def find(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnRecord | None:
        """The active record of ``txn_id``, None if it has none (ended, or never was). The
        epoch in the id's top 32 bits (``new_transaction_id``) is looked at first."""
        record = self.txns.active(scope, stream, txn_id.int >> 96, txn_id)
        if record is not None:
            return record
        for epoch in self.candidate_epochs(scope, stream):
            if epoch != txn_id.int >> 96:
                record = self.txns.active(scope, stream, epoch, txn_id)
                if record is not None:
                    return record
        return None

    def merging(self, scope: str, stream: str, epoch: int) -> int:
        """How many COMMITTING transactions of ``epoch`` are not handed to a rolling commit:
        a commit round may be merging them into the epoch's segments right now, so a scale
        (or a rolling commit) seals those segments only once this is 0 (module docstring,
        "Scale interplay")."""
        return sum(not r.rolling for r in self.committing(scope, stream, epoch))

    def committing(self, scope: str, stream: str, epoch: int) -> list[TxnRecord]:
        """The COMMITTING transactions of ``epoch`` (their active records)."""
        found = []
        for txn_id in self.txns.list_epoch(scope, stream, epoch):
            record = self.txns.active(scope, stream, epoch, txn_id)
            if record is not None and record.status is TxnStatus.COMMITTING:
                found.append(record)
        return found

    def segment_pairs(
        self, scope: str, stream: str, epoch: int, txn_id: uuid.UUID
    ) -> list[tuple[str, str]]:
        """``(parent, transaction segment)`` for every segment of ``epoch`` (empty if the
        stream has no such epoch any more)."""
        return self.pairs_of(self._streams.epoch(scope, stream, epoch), scope, stream, txn_id)

    @staticmethod
    def pairs_of(
        row: EpochRecord | None, scope: str, stream: str, txn_id: uuid.UUID
    ) -> list[tuple[str, str]]:
        """:meth:`segment_pairs` of an epoch ``row`` read already (None: no such epoch)."""
        if row is None:
            return []
        out = []
        for sid, _, _ in row.segments:
            parent = stream_segment_name(scope, stream, sid)
            out.append((parent, transaction_segment_name(parent, txn_id.bytes)))
        return out

    # --- record changes --------------------------------------------------------------------------
    def change(
        self,
        record: TxnRecord,
        decide: Callable[[TxnRecord], dict[str, Any] | None],
    ) -> TxnRecord | None:
        """Compare-and-set ``record`` with ``decide(current)`` (None: leave it), re-reading on
        a conflict; returns the record as stored, None if it is no longer active. ``decide``
        may raise to refuse."""
        current: TxnRecord | None = record
        for _ in range(CAS_ATTEMPTS_MAX):
            if current is None:
                return None
            changes = decide(current)
            if changes is None:
                return current
            try:
                return self.txns.update(current, **changes)
            except ConflictingUpdateError:
                current = self.txns.active(record.scope, record.stream, record.epoch, record.txn_id)
        raise ConflictingUpdateError(f"transaction {record.txn_id} keeps changing concurrently")

    def post(self, record: TxnRecord, kind: str) -> None:
        """Post ``record``'s commit or abort event (at least once; handlers are idempotent)."""
        body = {
            "type": kind,
            "scope": record.scope,
            "stream": record.stream,
            "txn": record.txn_id.hex,
            "epoch": record.epoch,
            "posted_ms": self._clock.wall_time_ms(),
        }
        (self.commits if kind == "commit" else self.aborts).post(body)

    def begin_abort(self, record: TxnRecord, *, only_expired_at: int | None = None) -> bool:
        """OPEN -> ABORTING and post the abort event; True if this call moved it.

        With ``only_expired_at``, only if the *stored* deadline really passed by then (a
        ping that landed meanwhile wins). A transaction in another state is left alone.
        """

        moved = False

        def decide(current: TxnRecord) -> dict[str, Any] | None:
            nonlocal moved
            moved = False
            if current.status is not TxnStatus.OPEN:
                return None
            if only_expired_at is not None and current.deadline_ms > only_expired_at:
                return None
            moved = True
            return {"status": TxnStatus.ABORTING, "status_ms": self._clock.wall_time_ms()}

        stored = self.change(record, decide)
        if stored is None or not moved:
            return False
        self.post(stored, "abort")
        return True

    def close_and_count(self, scope: str, stream: str, epoch: int, *, abort_open: bool) -> int:
        """Close ``epoch`` to new transactions, then count its active ones (the scale's and
        the seal's gate: 0 means the epoch's segments may be sealed). With ``abort_open``
        (a seal), OPEN ones are moved to ABORTING and their aborts posted first."""
        self.txns.close_epoch(scope, stream, epoch)
        ids = self.txns.list_epoch(scope, stream, epoch)
        if abort_open:
            for txn_id in ids:
                record = self.txns.active(scope, stream, epoch, txn_id)
                if record is not None:
                    self.begin_abort(record)
        return len(ids)

    # --- the handlers ----------------------------------------------------------------------------
    def _event(self, body: dict[str, Any]) -> TxnRecord | None:
        scope, stream = str(body.get("scope")), str(body.get("stream"))
        try:
            txn_id = uuid.UUID(hex=str(body.get("txn")))
            epoch = int(body.get("epoch", -1))
        except (TypeError, ValueError):
            log.error("transaction event dropped: %s", body)
            return None
        return self.txns.active(scope, stream, epoch, txn_id) if epoch >= 0 else None

    def handle_commit(self, body: dict[str, Any]) -> str:
        """The commit event processor's handler for one request (module docstring)."""
        return self.handle_commits([body])[0]

    def handle_commits(self, bodies: Sequence[dict[str, Any]]) -> list[str]:
        """The commit event processor's handler for the requests of one stream queued
        together, in the order posted: one round of merges for all of them (module
        docstring, "Commit batching"). One outcome per request, DONE or WAIT."""
        try:
            return self._commit(bodies)
        except StreamNotFoundError:
            return [DONE] * len(bodies)  # deleted meanwhile

    def _commit(self, bodies: Sequence[dict[str, Any]]) -> list[str]:
        outcomes = [DONE] * len(bodies)
        records: list[TxnRecord | None] = [None] * len(bodies)
        scope, stream = str(bodies[0].get("scope")), str(bodies[0].get("stream"))
        # One round of reads: the records, the stream record (its current epoch) and the
        # rows of the epochs the requests name (a record's epoch is its request's), and of
        # the epochs after them (a scale past the epoch has begun: roll).
        named = {e for e in (_epoch_of(b) for b in bodies) if e is not None}
        epochs = sorted(named | {e + 1 for e in named})
        rows: dict[int, EpochRecord | None] = {}
        current = [-1]

        def read(item: tuple[str, int]) -> None:
            kind, n = item
            if kind == "record":
                records[n] = self._event(bodies[n])
            elif kind == "row":
                rows[n] = self._streams.epoch(scope, stream, n)
            else:
                current[0] = int(self._streams.get(scope, stream)[0]["epoch"])

        reads = [("record", i) for i in range(len(bodies))] + [("row", e) for e in epochs]
        run_each(read, [*reads, ("stream", 0)])
        # Each transaction once (a request may be posted twice), in the order posted; the
        # rest ended already (a repeat), or are not ours to commit: done.
        committing: dict[uuid.UUID, TxnRecord] = {}
        for record in records:
            if record is not None and record.status is TxnStatus.COMMITTING:
                committing.setdefault(record.txn_id, record)
        if not committing:
            return outcomes
        for i, record in enumerate(records):
            if record is not None and record.txn_id in committing and record.epoch > current[0]:
                outcomes[i] = WAIT  # created against a scale's new epoch: merged once active
        ready = [r for r in committing.values() if r.epoch <= current[0]]
        rolled = {r.txn_id for r in ready if r.epoch < current[0] or rows[r.epoch + 1] is not None}
        if rolled:
            # A scale past their epoch began: its segments are (being) sealed, so these
            # are merged by a rolling commit (stream_workflows.py); WAIT until it ends.
            for i, record in enumerate(records):
                if record is not None and record.txn_id in rolled:
                    outcomes[i] = WAIT
            self._hand_to_roll([r for r in ready if r.txn_id in rolled])
            ready = [r for r in ready if r.txn_id not in rolled]
        if not ready:
            return outcomes
        pairs = [
            pair
            for record in ready
            for pair in self.pairs_of(rows[record.epoch], scope, stream, record.txn_id)
        ]
        sources: dict[str, list[str]] = {}  # parent -> its transaction segments, in order
        for parent, source in pairs:
            sources.setdefault(parent, []).append(source)

        # Sealed and merged in the order posted, one call per container, the parents side by
        # side (a merged source is gone: skipped); a failure stops that parent's later
        # merges (they must not overtake it), and the request is tried again.
        self._segments.seal_and_merge(sources)
        self._step("txn segments merged")
        now = self._clock.wall_time_ms()
        run_each(lambda record: self.txns.complete(record, TxnStatus.COMMITTED, now), ready)
        for record in ready:
            COMMIT_NOTICES.notify(record.txn_id)
        self._step("committed")
        return outcomes

    def _hand_to_roll(self, records: Sequence[TxnRecord]) -> None:
        """Mark each record ``rolling`` (once) and post a ``roll`` request for its epoch to
        the request stream, where the stream's scales run: the roll waits for any scale
        under way, then merges them (``StreamWorkflows.run_roll``)."""
        posted: set[int] = set()
        for record in records:
            if record.rolling:
                continue  # handed over already: its roll request is posted
            if record.epoch not in posted:  # posted first: a crash before the mark posts again
                posted.add(record.epoch)
                body = {
                    "type": "roll",
                    "scope": record.scope,
                    "stream": record.stream,
                    "epoch": record.epoch,
                    "posted_ms": self._clock.wall_time_ms(),
                }
                self.requests.post(body)

            def decide(current: TxnRecord) -> dict[str, Any] | None:
                if current.status is not TxnStatus.COMMITTING or current.rolling:
                    return None
                return {"rolling": True}

            self.change(record, decide)
            self._step("handed to a rolling commit")

    def handle_abort(self, body: dict[str, Any]) -> str:
        """The abort event processor's handler: delete the segments, record ABORTED."""
        record = self._event(body)
        if record is None or record.status is not TxnStatus.ABORTING:
            return DONE
        try:
            pairs = self.segment_pairs(record.scope, record.stream, record.epoch, record.txn_id)
        except StreamNotFoundError:
            pairs = []

        self._segments.delete_segments([source for _, source in pairs])  # gone = done
        self._step("txn segments deleted")
        self.txns.complete(record, TxnStatus.ABORTED, self._clock.wall_time_ms())
        self._step("aborted")
        return DONE


def _epoch_of(body: dict[str, Any]) -> int | None:
    try:
        epoch = int(body.get("epoch", -1))
    except (TypeError, ValueError):
        return None
    return epoch if epoch >= 0 else None


def commit_processor(
    metadata: Any,
    segments: SegmentHelper,
    *,
    clock: Clock = SYSTEM_CLOCK,
    scheduler: ThreadScheduler = DAEMON_THREADS,
    step: Callable[[str], None] = lambda name: None,
) -> RequestEventProcessor:
    """The commit event processor over ``metadata`` (the controller's MetadataStore):
    one batch of a stream at a time on :data:`COMMIT_THREADS` threads, checkpointed under
    ``eventprocessors/commits``."""
    workflows = TransactionWorkflows(
        StreamMetadataStore(metadata), segments, clock=clock, scheduler=scheduler, step=step
    )
    return RequestEventProcessor(
        workflows.commits,
        workflows.handle_commit,
        metadata,
        name="commits",
        concurrency=COMMIT_THREADS,
        batch_handler=workflows.handle_commits,
        batch_max=COMMIT_BATCH_MAX,
        clock=clock,
        scheduler=scheduler,
    )


def abort_processor(
    metadata: Any,
    segments: SegmentHelper,
    *,
    clock: Clock = SYSTEM_CLOCK,
    scheduler: ThreadScheduler = DAEMON_THREADS,
    step: Callable[[str], None] = lambda name: None,
) -> RequestEventProcessor:
    """The abort event processor: ``REQUEST_CONCURRENCY`` streams' aborts side by side."""
    workflows = TransactionWorkflows(
        StreamMetadataStore(metadata), segments, clock=clock, scheduler=scheduler, step=step
    )
    return RequestEventProcessor(
        workflows.aborts,
        workflows.handle_abort,
        metadata,
        name="aborts",
        concurrency=REQUEST_CONCURRENCY,
        clock=clock,
        scheduler=scheduler,
    )
