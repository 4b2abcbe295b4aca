"""Stream workflows run by the request event processor (Pravega's controller design, "Request
Processing Flow"; docs/design.md "The controller"): scale, update, seal, delete, and auto-scale
reports.

Each request names its stream; the processor runs one request per stream at a time. Every
workflow is **idempotent**: it reads what is stored, does the next step that is not done,
and can be killed between any two steps (``step`` names each, for tests) and run again
from the start with the same end result, exactly once.

Scale (temporary property ``transition/``): SCALING; create the new segments; add the new
epoch's history row (partial) and its index row; wait (:data:`WAIT`, no expiry) until the
old epoch has no active transaction (:meth:`StreamWorkflows.old_epoch_done`); seal the old
segments and record their sizes; one compare-and-set makes the new epoch current and the
stream ACTIVE; mark the row complete; drop the property. Update (``update/``): UPDATING, store the
configuration, hand the scaling policy to the active segments, ACTIVE, drop the property.
Seal: finish a scale under way, SEALING, abort the open transactions and wait for the
committing ones, seal every active segment, record sizes, SEALED.
Delete (sealed streams only): delete every segment of every epoch, remember the numbers the
name used, then the records, the stream record last; a seal request with ``then_delete``
(a scope's recursive delete) deletes the stream once sealed. ``delete_scope`` requests go to
``scopes`` (``scope_workflows.py``).

Auto-scale reports (from containers, ``scale_report``): a hot segment is split into the
report's number of equal key ranges at once; a cold one is marked, and two neighbouring
cold ones are merged, never below ``min_segments``; after any scale the stream ignores
reports for ``AUTO_SCALE_STREAM_COOLDOWN_S``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable
from typing import Any, Protocol

from pravega_ray.constants import AUTO_SCALE_COLD_MARK_S, AUTO_SCALE_STREAM_COOLDOWN_S
from pravega_ray.contracts.records import StreamState
from pravega_ray.controller.epochs import EpochRecord, ScaleRecord
from pravega_ray.controller.event_processor import DONE, POSTPONE, WAIT
from pravega_ray.controller.segment_helper import run_each
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.controller.transaction_workflows import TransactionSegments, TransactionWorkflows
from pravega_ray.errors import (
    ScaleConflictError,
    SegmentExistsError,
    SegmentNotFoundError,
    StreamNotFoundError,
    StreamSealedError,
)
from pravega_ray.naming import parse_segment_name, stream_segment_name
from pravega_ray.stream_configuration import ScalingPolicy, StreamConfiguration
from pravega_ray.timing import DAEMON_THREADS, SYSTEM_CLOCK, Clock, ThreadScheduler

__all__ = ["StreamWorkflows", "WorkflowSegments"]

log = logging.getLogger(__name__)


class WorkflowSegments(TransactionSegments, Protocol):
    """The segment calls workflows make (``SegmentHelper``): create, seal, delete and
    truncate segments, and their transaction steps' calls."""

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
    ) -> None:
        self._store = store
        self._scopes = scopes
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
        """Run (or finish) the scale of temporary property ``t``; idempotent."""
        value = self._records.get(scope, stream)[0]
        if value["epoch"] >= t.epoch:  # done but for the clean-up
            self._records.set_epoch_complete(scope, stream, t.epoch)
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

        def create(sid: int) -> None:
            name = stream_segment_name(scope, stream, sid)
            with contextlib.suppress(SegmentExistsError):
                self._segments.create_segment(name)
            self._set_policy(name, config.scaling)

        run_each(create, [sid for sid, _, _ in t.segments])  # side by side: independent
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
            return WAIT  # for the old epoch's transactions: longer than a request's expiry
        sizes = self._seal_all(scope, stream, list(t.sealed))
        self._records.add_sealed_sizes(scope, stream, sizes)
        self._step("old segments sealed")
        numbers = [sid & 0xFFFFFFFF for sid, _, _ in t.segments]

        def complete(v: dict[str, Any]) -> dict[str, Any]:
            return {
                **v,
                "state": StreamState.ACTIVE.value,
                "epoch": t.epoch,
                "next_number": max(int(v["next_number"]), max(numbers) + 1),
                "cold": [c for c in v.get("cold", []) if c[0] not in t.sealed],
                "scaled_ms": self._clock.wall_time_ms(),
            }

        self._records.update(scope, stream, complete)
        self._step("epoch current")
        self._records.set_epoch_complete(scope, stream, t.epoch)
        self._records.end_scale(scope, stream)
        return DONE

    def old_epoch_done(self, scope: str, stream: str, epoch: int) -> bool:
        """Whether epoch ``epoch``'s segments may be sealed: no transaction of it is OPEN,
        COMMITTING or ABORTING. Closes the epoch to new transactions first (a creation racing
        with this moves to the new epoch: ``stream_transaction_metadata_tasks.py``)."""
        return self._txns.close_and_count(scope, stream, epoch, abort_open=False) == 0

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
        before = self._records.before_cut(scope, stream, cut)
        for sid in before:
            with contextlib.suppress(SegmentNotFoundError):
                self._segments.delete_segment(stream_segment_name(scope, stream, sid))
        self._step("segments deleted")
        for sid, offset in cut.items():
            with contextlib.suppress(SegmentNotFoundError):
                self._segments.truncate_segment(stream_segment_name(scope, stream, sid), offset)
        self._step("segments truncated")
        deleted = set(self._records.truncation(scope, stream)["deleted"]) | set(before)
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
        self._records.transition(scope, stream, StreamState.SEALING)
        self._step("sealing")
        # As Pravega's seal: open transactions are aborted, committing ones finish first.
        epoch = self._records.highest_epoch(scope, stream)
        if self._txns.close_and_count(scope, stream, epoch, abort_open=True):
            return WAIT
        self._step("transactions ended")
        segments = self._records.info(scope, stream).segments
        sizes = self._seal_all(scope, stream, [s.segment_id for s in segments])
        self._records.add_sealed_sizes(scope, stream, sizes)
        self._step("segments sealed")
        self._records.transition(scope, stream, StreamState.SEALED)
        return self._sealed(scope, stream, body)

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
