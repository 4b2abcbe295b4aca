"""The transaction timer (Pravega's controller design, "Transaction Timeout
Management"; docs/design.md "The controller").

A heap of *due times*, one entry per transaction record the timer knows:

* an OPEN transaction is due at its deadline (its lease's end, at most its maximum
  execution time): then it is aborted (compare-and-set OPEN -> ABORTING, only if the
  *stored* deadline really passed, so a ping that landed meanwhile wins; then the abort
  event is posted) or, if pinged, pushed again at its new deadline;
* a COMMITTING or ABORTING one is due ``STUCK_REPOST_S`` after its status last changed:
  its event is posted again (the poster may have died between marking and posting; the
  handlers are idempotent) and the time noted;
* a completed record is due ``TXN_COMPLETED_KEEP_S`` after it ended: then it is deleted.

The heap is rebuilt from the records when the timer starts (so a restarted timer loses
nothing) and again every ``RESCAN_S``, which is how it learns of transactions created or
pinged through a controller in another process (a rescan reads the active records again;
of the completed ones, only those it has not read before): a lease is enforced at most ``RESCAN_S``
(plus a period) late, never early. :meth:`TransactionTimer.run_once` is steppable with an
explicit time (tests); :meth:`~TransactionTimer.start` runs it every
``TXN_TIMER_PERIOD_S`` on a thread started through the ``scheduler``.
"""

from __future__ import annotations

import heapq
import logging
import threading
import uuid
from typing import Any

from pravega_ray.constants import TXN_COMPLETED_KEEP_S, TXN_TIMER_PERIOD_S
from pravega_ray.contracts.records import TxnStatus
from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.controller.transaction_workflows import TransactionSegments, TransactionWorkflows
from pravega_ray.errors import DataCorruptionError, PravegaError
from pravega_ray.timing import DAEMON_THREADS, SYSTEM_CLOCK, Clock, Joinable, ThreadScheduler

__all__ = ["RESCAN_S", "STUCK_REPOST_S", "TransactionTimer", "transaction_timer"]

log = logging.getLogger(__name__)

STUCK_REPOST_S = 10.0
"""A transaction COMMITTING or ABORTING this long has its event posted again."""
RESCAN_S = 2.0
"""How often the timer reads every transaction record again."""

# (due ms, kind, scope, stream, epoch, txn hex); kind "active" or "completed"
_Entry = tuple[int, str, str, str, int, str]


class TransactionTimer:
    """Aborts transactions whose lease ran out (module docstring). Thread-safe: sweeps
    (its own thread's, a caller's :meth:`run_once`) run one at a time."""

    def __init__(
        self,
        metadata: Any,
        segments: TransactionSegments,
        *,
        clock: Clock = SYSTEM_CLOCK,
        scheduler: ThreadScheduler = DAEMON_THREADS,
        period_s: float = TXN_TIMER_PERIOD_S,
        rescan_s: float = RESCAN_S,
    ) -> None:
        self._store = StreamMetadataStore(metadata)
        self._workflows = TransactionWorkflows(
            self._store, segments, clock=clock, scheduler=scheduler
        )
        self._txns = self._store.txns
        self._clock = clock
        self._scheduler = scheduler
        self._period_s = period_s
        self._rescan_ms = int(rescan_s * 1000)
        self._heap: list[_Entry] = []
        self._completed_due: dict[tuple[str, str, str], int] = {}
        self._scanned_ms: int | None = None
        self._stopping = threading.Event()
        self._thread: Joinable | None = None
        self._sweeping = threading.Lock()
        self.aborted = 0

    # --- the heap --------------------------------------------------------------------------------
    def rebuild(self, now_ms: int) -> None:
        """Read every active transaction record again, and the completed records not read
        before (a completed record never changes: its due time is kept, so a rescan costs a
        key listing per stream, not a read per transaction of the last
        ``TXN_COMPLETED_KEEP_S``), and rebuild the heap of due times. Abandoned, the heap as
        it was, when :meth:`stop` is called meanwhile."""
        heap: list[_Entry] = []
        known: dict[tuple[str, str, str], int] = {}
        for scope in self._store.list_scopes():
            for stream in self._store.list_names("streams", scope):
                if self._stopping.is_set():
                    return
                try:
                    heap.extend(self._stream_entries(scope, stream, known))
                except PravegaError as e:  # a damaged or vanishing record: the others go on
                    log.warning("transaction timer: %s/%s skipped: %r", scope, stream, e)
        if self._stopping.is_set():  # the last stream's entries may be cut short
            return
        heapq.heapify(heap)
        self._heap = heap
        self._completed_due = known
        self._scanned_ms = now_ms

    def _stream_entries(
        self, scope: str, stream: str, known: dict[tuple[str, str, str], int]
    ) -> list[_Entry]:
        """The heap entries of ``stream``'s records; the due time of each completed one
        is added to ``known``."""
        out: list[_Entry] = []
        for epoch in self._workflows.candidate_epochs(scope, stream):
            for txn_id in self._txns.list_epoch(scope, stream, epoch):
                try:
                    record = self._txns.active(scope, stream, epoch, txn_id)
                except DataCorruptionError as e:  # quarantined; the others go on
                    log.error("transaction timer: %s", e)
                    continue
                if record is not None:
                    out.append(self._active_entry(scope, stream, epoch, txn_id, record))
        keep_ms = int(TXN_COMPLETED_KEEP_S * 1000)
        for txn_id in self._txns.list_completed(scope, stream):
            where = (scope, stream, txn_id.hex)
            due = self._completed_due.get(where)
            if due is None:
                if self._stopping.is_set():
                    return out
                try:
                    completed = self._txns.completed(scope, stream, txn_id)
                except DataCorruptionError as e:
                    log.error("transaction timer: %s", e)
                    continue
                if completed is None:
                    continue
                due = completed.status_ms + keep_ms
            known[where] = due
            out.append((due, "completed", scope, stream, -1, txn_id.hex))
        return out

    @staticmethod
    def _active_entry(
        scope: str, stream: str, epoch: int, txn_id: uuid.UUID, record: Any
    ) -> _Entry:
        if record.status is TxnStatus.OPEN:
            due = record.deadline_ms
        else:
            due = record.status_ms + int(STUCK_REPOST_S * 1000)
        return (due, "active", scope, stream, epoch, txn_id.hex)

    # --- one sweep -------------------------------------------------------------------------------
    def run_once(self, now_ms: int | None = None) -> int:
        """Handle every entry due by ``now_ms`` (default: the clock's wall time), rebuilding
        the heap first when it is older than ``RESCAN_S``; returns how many transactions it
        aborted."""
        with self._sweeping:
            return self._sweep(self._clock.wall_time_ms() if now_ms is None else now_ms)

    def _sweep(self, now: int) -> int:
        # Rebuilt when old, and when time went back (a caller's sweep "in the future").
        if self._scanned_ms is None or not 0 <= now - self._scanned_ms < self._rescan_ms:
            self.rebuild(now)
        aborted = 0
        while self._heap and self._heap[0][0] <= now:
            entry = heapq.heappop(self._heap)
            try:
                aborted += self._handle(entry, now)
            except PravegaError as e:  # a container restarting, say: the next rescan retries
                log.warning("transaction timer: %s not handled: %r", entry, e)
        self.aborted += aborted
        return aborted

    def _handle(self, entry: _Entry, now: int) -> int:
        _, kind, scope, stream, epoch, hex_id = entry
        txn_id = uuid.UUID(hex=hex_id)
        if kind == "completed":
            completed = self._txns.completed(scope, stream, txn_id)
            if completed is not None and completed.status_ms + TXN_COMPLETED_KEEP_S * 1000 <= now:
                self._txns.forget(scope, stream, txn_id)
                self._completed_due.pop((scope, stream, hex_id), None)
            return 0
        record = self._txns.active(scope, stream, epoch, txn_id)
        if record is None:
            return 0  # ended meanwhile
        if record.status is TxnStatus.OPEN:
            if self._workflows.begin_abort(record, only_expired_at=now):
                log.info("transaction %s of %s/%s: lease ran out; aborting", txn_id, scope, stream)
                return 1
        elif record.status_ms + STUCK_REPOST_S * 1000 <= now:
            kind_of = "commit" if record.status is TxnStatus.COMMITTING else "abort"
            stored = self._workflows.change(
                record, lambda r: {"status_ms": now} if r.status is record.status else None
            )
            if stored is not None and stored.status is record.status:
                log.info("transaction %s of %s/%s: %s posted again", txn_id, scope, stream, kind_of)
                self._workflows.post(stored, kind_of)
        fresh = self._txns.active(scope, stream, epoch, txn_id)
        if fresh is not None:  # again later (never at once: each sweep ends)
            entry = self._active_entry(scope, stream, epoch, txn_id, fresh)
            heapq.heappush(self._heap, (max(entry[0], now + 1), *entry[1:]))
        return 0

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Run :meth:`run_once` every period, on a thread started through the scheduler,
        until :meth:`stop`."""

        def loop() -> None:
            while not self._stopping.is_set():
                try:
                    self.run_once()
                except Exception:  # the metadata's container restarting, say: next period
                    log.exception("transaction timer: sweep failed; retrying")
                self._stopping.wait(self._period_s)  # a pause that stop() cuts short

        self._thread = self._scheduler.start(loop, "pravega-txn-timer")

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)


def transaction_timer(
    metadata: Any,
    segments: SegmentHelper,
    *,
    clock: Clock = SYSTEM_CLOCK,
    scheduler: ThreadScheduler = DAEMON_THREADS,
) -> TransactionTimer:
    """The transaction timer over the controller's MetadataStore ``metadata``."""
    return TransactionTimer(metadata, segments, clock=clock, scheduler=scheduler)
