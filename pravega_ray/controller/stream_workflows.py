"""Stream workflows run by the request event processor (Pravega's controller design, "Request
Processing Flow"; docs/design.md "The controller"): scale, update, seal, delete, and auto-scale
reports.

Each request names its stream; the processor runs one request per stream at a time. Every
workflow is **idempotent**: it reads what is stored, does the next step that is not done,
and can be killed between any two steps (``step`` names each, for tests) and run again
from the start with the same end result, exactly once.

Scale (temporary property ``transition/``): SCALING; create the new segments; add the new
epoch's history row (partial) and its index row; wait (:data:`WAIT`, no expiry) while a
commit may be merging into the old epoch (:meth:`StreamWorkflows.old_epoch_done`; open
transactions stay in their epoch and commit later by rolling); seal the old
segments and record their sizes; one compare-and-set makes the new epoch current and the
stream ACTIVE; mark the row complete; drop the property. Update (``update/``): UPDATING, store the
configuration, hand the scaling policy to the active segments, ACTIVE, drop the property.
Seal: finish a scale under way, SEALING, abort the open transactions and wait for the
committing ones, seal every active segment, record sizes, SEALED.
Delete (sealed streams only): delete every segment of every epoch, remember the numbers the
name used, then the records, the stream record last; a seal request with ``then_delete``
(a scope's recursive delete) deletes the stream once sealed. ``delete_scope`` requests go to
``scopes`` (``scope_workflows.py``).

Rolling transactions (``roll`` requests, posted by the commit processor for a transaction
whose epoch a scale sealed; :meth:`StreamWorkflows.run_roll`): the transactions are merged
into duplicates of their epoch's segments in a new epoch ``a + 1``, and ``a + 2`` duplicates
the current epoch ``a`` and becomes current; docs/design.md "The controller".

Auto-scale reports (from containers, ``scale_report``): a hot segment is split into the
report's number of equal key ranges at once; a cold one is marked, and two neighbouring
cold ones are merged, never below ``min_segments``; after any scale the stream ignores
reports for ``AUTO_SCALE_STREAM_COOLDOWN_S``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pravega_ray.constants import AUTO_SCALE_COLD_MARK_S, AUTO_SCALE_STREAM_COOLDOWN_S
from pravega_ray.contracts.records import StreamState, TxnStatus
from pravega_ray.contracts.watermarks import mark_segment_name
from pravega_ray.controller.epochs import EpochRecord, RollPlan, ScaleRecord
from pravega_ray.controller.event_processor import DONE, POSTPONE, WAIT
from pravega_ray.controller.segment_helper import run_each
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.controller.stream_records import truncated_away
from pravega_ray.controller.transaction_workflows import (
    COMMIT_NOTICES,
    TransactionSegments,
    TransactionWorkflows,
)
from pravega_ray.errors import (
    ScaleConflictError,
    SegmentNotFoundError,
    StreamNotFoundError,
    StreamSealedError,
)
from pravega_ray.invariant import InvariantViolation
from pravega_ray.naming import (
    container_for_segment,
    parse_segment_name,
    segment_id,
    stream_segment_name,
    transaction_segment_name,
)
from pravega_ray.stream_configuration import ScalingPolicy, StreamConfiguration
from pravega_ray.timing import DAEMON_THREADS, SYSTEM_CLOCK, Clock, ThreadScheduler

__all__ = ["StreamWorkflows", "WorkflowSegments"]

log = logging.getLogger(__name__)


class WorkflowSegments(TransactionSegments, Protocol):
    """The segment calls workflows make (``SegmentHelper``): create, seal, delete and
    truncate segments, and their transaction steps' calls."""

    def create_segments(self, segments: Sequence[str]) -> None: ...

    def seal_segment(self, segment: str) -> int: ...

    def delete_segment(self, segment: str) -> None: ...


class StreamWorkflows:
    """The request handler of the controller's request event processor. ``clock`` stamps
    epochs, scales and cold marks; ``scheduler`` paces the repeats of an abort event
    posted by a seal whose outcome is unknown."""

    def __init__(
        self,
        store: StreamMetadataStore,
        segments: WorkflowSegments,
        *,
        clock: Clock = SYSTEM_CLOCK,
        scheduler: ThreadScheduler = DAEMON_THREADS,
        step: Callable[[str], None] = lambda name: None,
        set_policy: Callable[[str, ScalingPolicy], None] = lambda segment, policy: None,
        scopes: Callable[[str, dict[str, Any]], str] | None = None,
        container_count: int | None = None,
    ) -> None:
        self._store = store
        self._scopes = scopes
        self._container_count = container_count
        self._records = store.streams
        self._segments = segments
        self._clock = clock
        self._step = step
        self._set_policy = set_policy
        self._txns = TransactionWorkflows(store, segments, clock=clock, scheduler=scheduler)

    def handle(self, body: dict[str, Any]) -> str:
        """Run the request ``body``; DONE or POSTPONE."""
        kind = body.get("type")
        scope, stream = str(body.get("scope")), str(body.get("stream"))
        handlers: dict[str, Callable[[str, str, dict[str, Any]], str]] = {
            "scale": self._on_scale,
            "update": self._on_update,
            "seal": self._on_seal,
            "delete": self._on_delete,
            "scale_report": self._on_report,
            "merge_sweep": self._on_sweep,
            "truncate": self._on_truncate,
            "delete_scope": self._on_delete_scope,
            "roll": self._on_roll,
            "wake": lambda scope, stream, body: DONE,  # ControllerSteps.wake: its arrival is all
        }
        handler = handlers.get(kind) if isinstance(kind, str) else None
        if handler is None:
            log.error("request of unknown type dropped: %s", body)
            return DONE
        try:
            return handler(scope, stream, body)
        except StreamNotFoundError:
            return DONE  # deleted meanwhile: nothing left to do

    # --- scale -----------------------------------------------------------------------------------
    def _on_scale(self, scope: str, stream: str, body: dict[str, Any]) -> str:
        record = self._records.scale_record(scope, stream)
        if record is None:
            epoch = self._records.get(scope, stream)[0]["epoch"]
            return DONE if epoch >= int(body.get("epoch", 0)) else POSTPONE
        return self.run_scale(scope, stream, record)

    def run_scale(self, scope: str, stream: str, t: ScaleRecord) -> str:
        """Run (or finish) the scale of temporary property ``t`` (or the rolling commit it
        is); idempotent."""
        if t.rolling is not None:
            return self.run_roll(scope, stream, t)
        value = self._records.get(scope, stream)[0]
        if value["epoch"] >= t.epoch:  # done but for the clean-up
            self._records.set_epoch_complete(scope, stream, t.epoch)
            self._txns.txns.forget_closed_below(scope, stream, int(value["epoch"]))
            self._records.end_scale(scope, stream)
            return DONE
        state = StreamState(value["state"])
        if state in (StreamState.SEALING, StreamState.SEALED):
            self._records.end_scale(scope, stream)  # a sealed stream does not scale
            return DONE
        if state not in (StreamState.ACTIVE, StreamState.SCALING):
            return POSTPONE
        self._records.transition(scope, stream, StreamState.SCALING)
        self._step("scaling")
        config = StreamConfiguration.from_dict(value["config"])

        names = [stream_segment_name(scope, stream, sid) for sid, _, _ in t.segments]
        self._segments.create_segments(names)  # all sent at once; made already is fine
        run_each(lambda name: self._set_policy(name, config.scaling), names)
        self._step("segments created")
        current = self._records.epoch(scope, stream, value["epoch"])
        assert current is not None
        kept = [r for r in current.segments if r[0] not in t.sealed]
        row = EpochRecord(
            t.epoch,
            max(self._clock.wall_time_ms(), current.created_ms),
            tuple(sorted(kept + list(t.segments), key=lambda r: r[1])),
            t.sealed,
            True,
        )
        self._records.put_epoch(scope, stream, row)
        self._step("epoch added")
        if not self.old_epoch_done(scope, stream, value["epoch"]):
            return WAIT  # for commits merging into the old epoch (soon done; no expiry)
        sizes = self._seal_all(scope, stream, list(t.sealed))
        self._records.add_sealed_sizes(scope, stream, sizes)
        self._step("old segments sealed")
        numbers = [sid & 0xFFFFFFFF for sid, _, _ in t.segments]
        low = self._txn_low_epoch(scope, stream, value, t.epoch)

        def complete(v: dict[str, Any]) -> dict[str, Any]:
            return {
                **v,
                "state": StreamState.ACTIVE.value,
                "epoch": t.epoch,
                "next_number": max(int(v["next_number"]), max(numbers) + 1),
                "cold": [c for c in v.get("cold", []) if c[0] not in t.sealed],
                "scaled_ms": self._clock.wall_time_ms(),
                "txn_low_epoch": low,
            }

        self._records.update(scope, stream, complete)
        self._step("epoch current")
        self._records.set_epoch_complete(scope, stream, t.epoch)
        self._txns.txns.forget_closed_below(scope, stream, t.epoch)  # after it is current
        self._records.end_scale(scope, stream)
        return DONE

    def old_epoch_done(self, scope: str, stream: str, epoch: int) -> bool:
        """Whether epoch ``epoch``'s segments may be sealed: no commit may be merging into
        them (every COMMITTING transaction of it is handed to a rolling commit; OPEN ones
        stay, and are rolled if they commit). Closes the epoch to new transactions first (a
        creation racing with this moves to the new epoch:
        ``stream_transaction_metadata_tasks.py``). Called once the new epoch's row is
        stored: a commit round that reads the epochs after that rolls
        (``transaction_workflows.py``)."""
        self._txns.txns.close_epoch(scope, stream, epoch)
        return self._txns.merging(scope, stream, epoch) == 0

    def _txn_low_epoch(self, scope: str, stream: str, value: dict[str, Any], current: int) -> int:
        """The stream's new ``txn_low_epoch`` once ``current`` is its epoch: its old one
        raised past every epoch that holds no active transaction any more (epochs below
        ``current`` are closed to new ones, so an empty one stays empty)."""
        low = self._records.txn_low_epoch(value)
        while low < current and not self._txns.txns.list_epoch(scope, stream, low):
            low += 1
        return low

    # --- rolling transactions --------------------------------------------------------------------
    def _on_roll(
        self, scope: str, stream: str, body: dict[str, Any], *, sealing: bool = False
    ) -> str:
        """Commit the COMMITTING transactions of old epoch ``body["epoch"]`` by a rolling
        commit (Pravega's rolling transactions; module docstring). WAIT while a scale runs
        or the epoch is still current (a scale past it has begun, not ended); DONE once
        none is left. ``sealing``: called by a seal, which rolls before it seals."""
        running = self._records.scale_record(scope, stream)
        if running is not None:
            if running.rolling is None:
                return WAIT
            outcome = self.run_roll(scope, stream, running)
            if outcome != DONE:
                return outcome
            # That roll may be another epoch's, or planned before this request's
            # transactions were asked to commit: this request still rolls them (each is
            # marked ``rolling`` and never handed over again).
        try:
            epoch = int(body.get("epoch", -1))
        except (TypeError, ValueError):
            epoch = -1
        if epoch < 0:
            log.error("roll request dropped: %s", body)
            return DONE
        value = self._records.get(scope, stream)[0]
        state = StreamState(value["state"])
        current = int(value["epoch"])
        if epoch >= current:
            return WAIT  # the scale past the epoch has not ended yet
        if state is not StreamState.ACTIVE and not (sealing and state is StreamState.SEALING):
            return WAIT  # a seal rolls them itself first; another workflow ends soon
        committing = self._committing(scope, stream, epoch)
        if not committing:
            return DONE  # rolled already (a repeated request)
        plan = self._plan_roll(scope, stream, value, epoch, committing)
        if not self._records.start_roll(scope, stream, plan):
            return WAIT  # a scale took the stream first
        self._step("roll planned")
        return self.run_roll(scope, stream, plan)

    def _committing(self, scope: str, stream: str, epoch: int) -> list[str]:
        """Ids (hex) of ``epoch``'s COMMITTING transactions, in the order they were asked
        to commit (then by id)."""
        found = self._txns.committing(scope, stream, epoch)
        return [r.txn_id.hex for r in sorted(found, key=lambda r: (r.status_ms, r.txn_id.hex))]

    def _plan_roll(
        self, scope: str, stream: str, value: dict[str, Any], epoch: int, txns: list[str]
    ) -> ScaleRecord:
        """The rolling commit of ``txns`` of ``epoch``: epoch ``a + 1`` (``a`` the current)
        of duplicates of ``epoch``'s segments, each on the container of the one it
        duplicates, where the transaction segments to merge are; epoch ``a + 2`` of
        duplicates of ``a``'s segments, which becomes current."""
        if not self._container_count:
            raise InvariantViolation("a rolling commit needs the cluster's container count")
        count = self._container_count
        a = int(value["epoch"])
        old = self._records.epoch(scope, stream, epoch)
        current = self._records.epoch(scope, stream, a)
        if old is None or current is None:
            raise StreamNotFoundError(f"stream {scope}/{stream} lost epoch {epoch} or {a}")
        number = int(value["next_number"])
        duplicates = []
        for sid, lo, hi in old.segments:
            home = container_for_segment(stream_segment_name(scope, stream, sid), count)
            while (
                container_for_segment(
                    stream_segment_name(scope, stream, segment_id(a + 1, number)), count
                )
                != home
            ):
                number += 1
            duplicates.append((segment_id(a + 1, number), lo, hi))
            number += 1
        fresh = []
        for _, lo, hi in current.segments:
            fresh.append((segment_id(a + 2, number), lo, hi))
            number += 1
        return ScaleRecord(
            a + 2,
            tuple(sorted(current.ids())),
            tuple(fresh),
            self._clock.wall_time_ms(),
            RollPlan(epoch, tuple(txns), tuple(duplicates)),
        )

    def run_roll(self, scope: str, stream: str, t: ScaleRecord) -> str:
        """Run (or finish) the rolling commit of temporary property ``t``; idempotent.

        Closes epoch ``a + 1`` to new transactions; creates the duplicates and the new
        segments; stores the rows of ``a + 2`` then ``a + 1`` (a transaction created meanwhile
        goes to ``a + 2``, which becomes current); closes ``a``; waits until no commit merges
        into ``a``; merges each transaction's segments into the duplicates, in commit
        order; seals ``a``'s segments, then the duplicates (a reader reads ``a`` to its end,
        then the transactions, then ``a + 2``; a writer moves on to ``a + 2``); records the
        transactions COMMITTED; makes ``a + 2`` current."""
        plan = t.rolling
        assert plan is not None
        a = t.epoch - 2
        value = self._records.get(scope, stream)[0]
        if int(value["epoch"]) >= t.epoch:  # done but for the clean-up
            self._records.set_epoch_complete(scope, stream, a + 1)
            self._records.set_epoch_complete(scope, stream, t.epoch)
            self._txns.txns.forget_closed_below(scope, stream, int(value["epoch"]))
            self._records.end_scale(scope, stream)
            return DONE
        state = StreamState(value["state"])
        if state is StreamState.SEALED:
            log.error("rolling commit of %s/%s dropped: the stream is sealed", scope, stream)
            self._records.end_scale(scope, stream)
            return DONE
        if state is StreamState.ACTIVE:
            self._records.transition(scope, stream, StreamState.SCALING)
        elif state not in (StreamState.SCALING, StreamState.SEALING):
            return WAIT
        txns = self._txns.txns
        txns.close_epoch(scope, stream, a + 1)  # before its row: nothing is created there
        config = StreamConfiguration.from_dict(value["config"])

        names = [stream_segment_name(scope, stream, r[0]) for r in t.segments]
        duplicates = [stream_segment_name(scope, stream, r[0]) for r in plan.duplicates]
        self._segments.create_segments([*duplicates, *names])  # made already is fine
        run_each(lambda name: self._set_policy(name, config.scaling), names)  # not duplicates'
        self._step("roll segments created")
        row_a = self._records.epoch(scope, stream, a)
        now = max(self._clock.wall_time_ms(), row_a.created_ms if row_a else 0)
        dup_ids = tuple(sorted(r[0] for r in plan.duplicates))
        self._records.put_epoch(scope, stream, EpochRecord(t.epoch, now, t.segments, dup_ids, True))
        self._records.put_epoch(
            scope, stream, EpochRecord(a + 1, now, plan.duplicates, t.sealed, True)
        )
        # After the rows: a creation that finds ``a`` closed retries at once and must find
        # ``a + 2`` then (closed earlier, its retries could run out while segments are made).
        txns.close_epoch(scope, stream, a)
        self._step("roll epochs added")
        if self._txns.merging(scope, stream, a) > 0:
            return WAIT  # a commit round merging into a's segments: they are sealed next
        old = self._records.epoch(scope, stream, plan.txn_epoch)
        if old is None:
            raise StreamNotFoundError(f"stream {scope}/{stream} lost epoch {plan.txn_epoch}")
        sources: dict[str, list[str]] = {}
        for (sid, _, _), (dup, _, _) in zip(old.segments, plan.duplicates, strict=True):
            parent = stream_segment_name(scope, stream, sid)
            sources[stream_segment_name(scope, stream, dup)] = [
                transaction_segment_name(parent, uuid.UUID(hex=h).bytes) for h in plan.txns
            ]
        self._segments.seal_and_merge(sources)
        self._step("rolled transactions merged")
        sizes = self._seal_all(scope, stream, list(t.sealed))
        sizes.update(self._seal_all(scope, stream, list(dup_ids)))
        self._records.add_sealed_sizes(scope, stream, sizes)
        self._step("roll segments sealed")
        ended = self._clock.wall_time_ms()
        for hex_id in plan.txns:
            txn_id = uuid.UUID(hex=hex_id)
            record = txns.active(scope, stream, plan.txn_epoch, txn_id)
            if record is not None and record.status is TxnStatus.COMMITTING:
                txns.complete(record, TxnStatus.COMMITTED, ended)
            COMMIT_NOTICES.notify(txn_id)
        self._step("rolled transactions committed")
        low = self._txn_low_epoch(scope, stream, value, t.epoch)
        numbers = [sid & 0xFFFFFFFF for sid, _, _ in t.segments]

        def complete(v: dict[str, Any]) -> dict[str, Any]:
            sealing = v["state"] == StreamState.SEALING.value
            return {
                **v,
                "state": StreamState.SEALING.value if sealing else StreamState.ACTIVE.value,
                "epoch": t.epoch,
                "next_number": max(int(v["next_number"]), max(numbers) + 1),
                "cold": [],
                "txn_low_epoch": low,
            }

        self._records.update(scope, stream, complete)
        self._step("roll epoch current")
        self._records.set_epoch_complete(scope, stream, a + 1)
        self._records.set_epoch_complete(scope, stream, t.epoch)
        self._txns.txns.forget_closed_below(scope, stream, t.epoch)  # after it is current
        self._records.end_scale(scope, stream)
        return DONE

    def _seal(self, segment: str) -> int:
        try:
            return self._segments.seal_segment(segment)
        except SegmentNotFoundError:
            return 0

    def _seal_all(self, scope: str, stream: str, sids: list[int]) -> dict[int, int]:
        """Seal the stream's segments ``sids`` side by side; their sealed sizes by id."""
        sizes: dict[int, int] = {}

        def seal(sid: int) -> None:
            sizes[sid] = self._seal(stream_segment_name(scope, stream, sid))

        run_each(seal, sids)
        return {sid: sizes[sid] for sid in sids}

    # --- update ----------------------------------------------------------------------------------
    def _on_update(self, scope: str, stream: str, body: dict[str, Any]) -> str:
        pending = self._records.pending_update(scope, stream)
        value = self._records.get(scope, stream)[0]
        state = StreamState(value["state"])
        if pending is None:
            if state is StreamState.UPDATING:  # done but for the last step
                return self._end_update(scope, stream)
            if body.get("request") in (None, value.get("updated_by")):
                return DONE  # this update is done (a repeat of its request)
            return POSTPONE  # its property is not written yet
        config, request = pending
        if state in (StreamState.SEALING, StreamState.SEALED):
            self._records.end_update(scope, stream)
            return DONE
        if state not in (StreamState.ACTIVE, StreamState.UPDATING):
            return POSTPONE
        self._records.transition(scope, stream, StreamState.UPDATING)
        self._step("updating")
        self._records.update(
            scope, stream, lambda v: {**v, "config": config, "updated_by": request}
        )
        self._step("configuration stored")
        scaling = StreamConfiguration.from_dict(config).scaling
        for segment in self._records.info(scope, stream).segments:
            self._set_policy(segment.name, scaling)
        return self._end_update(scope, stream)

    def _end_update(self, scope: str, stream: str) -> str:
        self._records.transition(scope, stream, StreamState.ACTIVE)
        self._records.end_update(scope, stream)
        return DONE

    # --- truncate ---
    def _on_truncate(self, scope: str, stream: str, body: dict[str, Any]) -> str:
        pending = self._records.pending_truncate(scope, stream)
        value = self._records.get(scope, stream)[0]
        state = StreamState(value["state"])
        if pending is None:
            if state is StreamState.TRUNCATING:  # done but for the last step
                self._records.transition(scope, stream, StreamState.ACTIVE)
                return DONE
            return DONE if body.get("request") == value.get("truncated_by") else POSTPONE
        cut, request = pending
        if state in (StreamState.SEALING, StreamState.SEALED):
            self._records.end_truncate(scope, stream)
            return DONE
        if state not in (StreamState.ACTIVE, StreamState.TRUNCATING):
            return POSTPONE
        self._records.transition(scope, stream, StreamState.TRUNCATING)
        self._step("truncating")
        # Those an earlier truncation deleted (and recorded) are not asked again: the
        # epochs below its floor are not even read.
        truncation = self._records.truncation(scope, stream)
        floor = int(truncation.get("floor", 0))
        before = [
            sid
            for sid in self._records.before_cut(scope, stream, cut, floor)
            if not truncated_away(truncation, sid)
        ]
        for sid in before:
            with contextlib.suppress(SegmentNotFoundError):
                self._segments.delete_segment(stream_segment_name(scope, stream, sid))
        self._step("segments deleted")
        for sid, offset in cut.items():
            with contextlib.suppress(SegmentNotFoundError):
                self._segments.truncate_segment(stream_segment_name(scope, stream, sid), offset)
        self._step("segments truncated")
        deleted = set(truncation["deleted"]) | set(before)
        self._records.set_truncation(scope, stream, cut, sorted(deleted))

        def done(v: dict[str, Any]) -> dict[str, Any]:
            return {**v, "state": StreamState.ACTIVE.value, "truncated_by": request}

        self._records.update(scope, stream, done)
        self._records.end_truncate(scope, stream)
        return DONE

    # --- seal and delete -------------------------------------------------------------------------
    def _on_delete_scope(self, scope: str, stream: str, body: dict[str, Any]) -> str:
        if self._scopes is None:
            log.error("delete of scope %s dropped: this processor has no scope workflows", scope)
            return DONE
        return self._scopes(scope, body)

    def _sealed(self, scope: str, stream: str, body: dict[str, Any]) -> str:
        """The stream is SEALED: delete it too if the request says so (a scope's
        recursive delete asks so)."""
        if body.get("then_delete"):
            self.finish_delete(scope, stream)
        return DONE

    def _on_seal(self, scope: str, stream: str, body: dict[str, Any]) -> str:
        state = self._records.state(scope, stream)
        if state is StreamState.SEALED:
            return self._sealed(scope, stream, body)
        running = self._records.scale_record(scope, stream)
        if running is not None:
            outcome = self.run_scale(scope, stream, running)
            if outcome == WAIT:  # for the old epoch's transactions: abort the open ones
                old = running.epoch - 1
                self._txns.close_and_count(scope, stream, old, abort_open=True)
            if outcome in (POSTPONE, WAIT):
                return outcome
        state = self._records.state(scope, stream)
        if state is StreamState.CREATING:
            return POSTPONE  # the create task finishes it first
        if state is StreamState.UPDATING:
            self._on_update(scope, stream, body)
        # Commits asked of transactions of old epochs land first: rolled, before the seal.
        rolled = self._roll_old_commits(scope, stream)
        if rolled != DONE:
            return rolled
        self._records.transition(scope, stream, StreamState.SEALING)
        self._step("sealing")
        # As Pravega's seal: open transactions are aborted, committing ones finish first
        # (in every epoch that may hold one: a scale leaves open ones in their epoch).
        value = self._records.get(scope, stream)[0]
        low = self._records.txn_low_epoch(value)
        highest = self._records.highest_epoch(scope, stream)
        active = 0
        for epoch in range(low, highest + 1):
            active += self._txns.close_and_count(scope, stream, epoch, abort_open=True)
        if active:
            return WAIT
        self._step("transactions ended")
        segments = self._records.info(scope, stream).segments
        sizes = self._seal_all(scope, stream, [s.segment_id for s in segments])
        self._records.add_sealed_sizes(scope, stream, sizes)
        self._step("segments sealed")
        self._records.transition(scope, stream, StreamState.SEALED)
        return self._sealed(scope, stream, body)

    def _roll_old_commits(self, scope: str, stream: str) -> str:
        """For a seal: roll the COMMITTING transactions of epochs before the current one;
        DONE if there were none, else the roll's outcome (WAIT after a roll that ended, so
        the seal reads the stream again)."""
        value = self._records.get(scope, stream)[0]
        for epoch in range(self._records.txn_low_epoch(value), int(value["epoch"])):
            if self._committing(scope, stream, epoch):
                outcome = self._on_roll(scope, stream, {"epoch": epoch}, sealing=True)
                return WAIT if outcome == DONE else outcome
        return DONE

    def _on_delete(self, scope: str, stream: str, body: dict[str, Any]) -> str:
        value = self._records.get(scope, stream)[0]
        if value["state"] != StreamState.SEALED.value:
            log.warning("delete of %s/%s dropped: the stream is not sealed", scope, stream)
            return DONE
        self.finish_delete(scope, stream)
        return DONE

    def finish_delete(self, scope: str, stream: str) -> None:
        """Delete every segment of every epoch, remember the name's numbers, then the records."""
        value = self._records.get(scope, stream)[0]
        next_number = int(value["next_number"])
        if self._store.safe_start("streams", scope, stream, 0) < next_number:
            self._store.remember_deleted("streams", scope, stream, next_number)
        self._step("numbers remembered")

        def delete(sid: int) -> None:
            with contextlib.suppress(SegmentNotFoundError):
                self._segments.delete_segment(stream_segment_name(scope, stream, sid))

        run_each(delete, self._records.all_segment_ids(scope, stream))
        with contextlib.suppress(SegmentNotFoundError):  # its watermarks (watermark_tasks.py)
            self._segments.delete_segment(
                mark_segment_name(scope, stream, int(value["created_ms"]))
            )
        self._step("segments deleted")
        self._txns.txns.delete_stream(scope, stream, self._records.highest_epoch(scope, stream))
        self._records.delete(scope, stream)

    # --- auto-scale ------------------------------------------------------------------------------
    def _on_report(self, scope: str, stream: str, body: dict[str, Any]) -> str:
        name = parse_segment_name(str(body.get("segment")))
        scope, stream, sid = name.scope, name.stream, name.segment_id
        running = self._records.scale_record(scope, stream)
        if running is not None:
            return self.run_scale(scope, stream, running)
        value = self._records.get(scope, stream)[0]
        if value["state"] != StreamState.ACTIVE.value:
            return DONE
        now = self._clock.wall_time_ms()
        if now - int(value.get("scaled_ms", 0)) < AUTO_SCALE_STREAM_COOLDOWN_S * 1000:
            return DONE
        current = self._records.epoch(scope, stream, value["epoch"])
        assert current is not None
        row = next((r for r in current.segments if r[0] == sid), None)
        if row is None:
            return DONE  # scaled away since the report
        if body.get("direction") == "up":
            splits = max(2, min(int(body.get("splits", 2)), 10_000 - len(current.segments) + 1))
            lo, hi = row[1], row[2]
            ranges = [
                (
                    lo + (hi - lo) * i / splits,
                    hi if i + 1 == splits else lo + (hi - lo) * (i + 1) / splits,
                )
                for i in range(splits)
            ]
            return self._auto_scale(scope, stream, [sid], ranges)
        cold = {
            c[0]: c[1] for c in value.get("cold", []) if now - c[1] < AUTO_SCALE_COLD_MARK_S * 1000
        }
        cold[sid] = now
        self._records.update(
            scope, stream, lambda v: {**v, "cold": sorted([k, t] for k, t in cold.items())}
        )
        return self._merge_cold(scope, stream)

    def _on_sweep(self, scope: str, stream: str, body: dict[str, Any]) -> str:
        if self._records.scale_record(scope, stream) is not None:
            return DONE
        return self._merge_cold(scope, stream)

    def _merge_cold(self, scope: str, stream: str) -> str:
        """Merge the first two neighbouring cold segments, if the stream may lose one."""
        value = self._records.get(scope, stream)[0]
        if value["state"] != StreamState.ACTIVE.value:
            return DONE
        now = self._clock.wall_time_ms()
        cold = set(_cold_marks(value, now))
        current = self._records.epoch(scope, stream, value["epoch"])
        assert current is not None
        minimum = StreamConfiguration.from_dict(value["config"]).scaling.min_segments
        if len(current.segments) <= minimum:
            return DONE
        rows = current.segments
        for a, b in itertools.pairwise(rows):
            if a[0] in cold and b[0] in cold and a[2] == b[1]:
                return self._auto_scale(scope, stream, [a[0], b[0]], [(a[1], b[2])])
        return DONE

    def _auto_scale(
        self, scope: str, stream: str, sealed: list[int], ranges: list[tuple[float, float]]
    ) -> str:
        try:
            record = self._records.start_scale(
                scope, stream, sealed, ranges, self._clock.wall_time_ms()
            )
        except (ScaleConflictError, StreamSealedError) as e:
            log.info("auto-scale of %s/%s skipped: %s", scope, stream, e)
            return DONE
        log.info("auto-scale of %s/%s: %s -> %s", scope, stream, sealed, ranges)
        return self.run_scale(scope, stream, record)


def _cold_marks(value: dict[str, Any], now: int) -> dict[int, int]:
    """The stream record's cold marks still fresh at ``now``: segment id -> when marked."""
    limit = AUTO_SCALE_COLD_MARK_S * 1000
    return {int(c[0]): int(c[1]) for c in value.get("cold", []) if now - c[1] < limit}
