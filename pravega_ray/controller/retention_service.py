"""The retention cycle of one stream, and of many (Pravega's retention design, "Retention
Service"; docs/design.md "Retention").

No Ray: the stream bucket actors (``actors/stream_bucket_actor.py``) run
:meth:`RetentionService.run_streams` every ``retention_period_s`` for their streams, and
``InProcessCluster.retention_service()`` gives tests one with a manual clock. Every time a
cycle reads (record times, the truncation request's ``posted_ms``, its duration) is the
``clock``'s.

One cycle of a stream with a retention policy (a stream without one is left alone,
subscribers or not: consumption-based retention needs a policy, as Pravega's):

1. Skip it while it is not ACTIVE, SCALING or TRUNCATING (being created, sealed) or a
   truncation is pending (the temporary ``truncate/`` property): one truncation at a time.
2. The *head*: the stream's truncation record (its cut, its size computed from the
   segments wholly before it, and its time: the retention set's stored ``head`` time if it
   names the same cut, else the newest record at or behind it, else the stream's creation).
3. The *tail cut*: the current epoch's segments at their lengths (asked of the segment
   store) with the time now and its size; appended to the retention set unless it equals
   the newest record (no new data). Records at or behind the head (a truncation that
   completed) are dropped; the set is bounded to ``set_max`` records and ``set_bytes_max``
   bytes of them (``retention.bound``: the inner records closest in time go first). Stored with one
   compare-and-set: a concurrent cycle of the same stream makes this one stop.
4. The subscribers' acknowledgement cuts, their lower bound and its size.
5. ``retention.choose_truncation``; if it picks a cut, the truncation is requested exactly
   as ``Controller.truncate_stream`` does (the request posted, then the temporary
   ``truncate/`` property stored; ConflictingUpdateError means another truncation is
   under way: skip), then records at or behind the cut are dropped from the set and the
   cut's time and size stored as the set's ``head``.

Idempotent: a cycle cut short at any step (``step`` names them, for tests) and run again
never truncates twice (a pending or completed truncation moves the head, and only cuts
strictly ahead of the head are chosen) nor past a subscriber's cut (the lower bound is
read afresh each cycle; only the max limit, seed case iii/v, goes past it).
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pravega_ray import metrics
from pravega_ray.constants import SYSTEM_SCOPE
from pravega_ray.contracts.cut_order import Cut, Ranges, cut_le, lower_bound
from pravega_ray.contracts.records import StreamState
from pravega_ray.controller.request_stream import RequestSegments, RequestStream
from pravega_ray.controller.retention import (
    Case,
    Choice,
    RetentionRecord,
    bound,
    choose_truncation,
    purge,
)
from pravega_ray.controller.stream_metadata_store import MetadataStore, StreamMetadataStore
from pravega_ray.controller.subscriber_tasks import subscriber_cuts
from pravega_ray.errors import ConflictingUpdateError, DataCorruptionError, PravegaError
from pravega_ray.naming import stream_segment_name
from pravega_ray.stream_configuration import StreamConfiguration
from pravega_ray.timing import DAEMON_THREADS, SYSTEM_CLOCK, Clock, ThreadScheduler

__all__ = ["RETENTION_SET_BYTES_MAX", "RETENTION_SET_MAX", "CycleResult", "RetentionService"]

log = logging.getLogger(__name__)

RETENTION_SET_MAX = 1000
"""Most records a stream's retention set keeps (about 3 weeks of 30-minute cycles)."""

RETENTION_SET_BYTES_MAX = 512 * 1024
"""Most bytes a stream's retention records take encoded (``retention.bound``): the set is one
controller record, at most ``TABLE_VALUE_BYTES_MAX`` (1 MiB), which also holds the head mark
(one more cut). A record's cut names every segment of its epoch, about 30 bytes each, so a
stream of many segments keeps fewer records than RETENTION_SET_MAX: 512 KiB / (30 bytes x
segments), about 17 records at 1,000 segments. Past about 8,000 segments only the tail fits,
and retention can no longer choose a cut behind it (nor can the set fail to save)."""

KIND = "retention"
RUNNABLE = (StreamState.ACTIVE, StreamState.SCALING, StreamState.TRUNCATING)


class RetentionSegments(RequestSegments, Protocol):
    """What a cycle asks of the segment store (``SegmentHelper``): the tail's segment
    lengths, and posting to the request stream."""

    def segment_length(self, segment: str) -> int: ...


NO_POLICY = "no retention policy"
"""``CycleResult.why`` of a stream without a retention policy (not counted in the metrics)."""


@dataclass(frozen=True, slots=True)
class CycleResult:
    """What one cycle of ``scope/stream`` did: ``choice`` (None: skipped, and ``why``) and
    whether a truncation was ``requested``."""

    scope: str
    stream: str
    choice: Choice | None
    requested: bool = False
    why: str = ""


class RetentionService:
    """Runs retention cycles over the records in ``store`` (module docstring); ``scheduler``
    paces the repeats of a truncation request whose post's outcome is unknown."""

    def __init__(
        self,
        store: MetadataStore,
        segments: RetentionSegments,
        *,
        clock: Clock = SYSTEM_CLOCK,
        scheduler: ThreadScheduler = DAEMON_THREADS,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        step: Callable[[str], None] = lambda name: None,
        set_max: int = RETENTION_SET_MAX,
        set_bytes_max: int = RETENTION_SET_BYTES_MAX,
    ) -> None:
        self._store = StreamMetadataStore(store)
        self._records = self._store.streams
        self._segments = segments
        self._requests = RequestStream(segments, scheduler=scheduler)
        self._clock = clock
        self._new_id = new_id
        self._step = step
        self._set_max = set_max
        self._set_bytes_max = set_bytes_max

    # --- many streams ----------------------------------------------------------------------------
    def streams(self) -> Iterator[tuple[str, str]]:
        """Every user stream (not those of the system scope)."""
        for scope in self._store.list_scopes():
            if scope == SYSTEM_SCOPE:
                continue
            for stream in self._store.list_names("streams", scope):
                yield scope, stream

    def run_streams(
        self, which: Callable[[str, str], bool] = lambda sc, st: True
    ) -> list[CycleResult]:
        """One cycle of every stream ``which`` selects; a stream whose cycle fails (its
        container restarting, a damaged record) is logged and left to the next period."""
        out = []
        for scope, stream in self.streams():
            if not which(scope, stream):
                continue
            started = self._clock.monotonic()
            try:
                result = self.run(scope, stream)
                outcome = "truncated" if result.requested else "skipped"
            except PravegaError as e:
                log.warning("retention of %s/%s failed (%r); next period", scope, stream, e)
                result = CycleResult(scope, stream, None, why=f"failed: {e!r}")
                outcome = "failed"
            out.append(result)
            if result.why == NO_POLICY:
                continue  # not a retention workflow: nothing to count
            metrics.WORKFLOWS.inc(1, {"workflow": "retention", "outcome": outcome})
            elapsed = self._clock.monotonic() - started
            metrics.WORKFLOW_DURATION.observe(elapsed, {"workflow": "retention"})
        return out

    # --- one stream ------------------------------------------------------------------------------
    def run(self, scope: str, stream: str) -> CycleResult:
        """One retention cycle of ``scope/stream`` (module docstring)."""
        value, _ = self._records.get(scope, stream)
        policy = StreamConfiguration.from_dict(value["config"]).retention
        if policy is None:
            return CycleResult(scope, stream, None, why=NO_POLICY)
        if StreamState(value["state"]) not in RUNNABLE:
            return CycleResult(scope, stream, None, why=f"stream is {value['state']}")
        if self._records.pending_truncate(scope, stream) is not None:
            return CycleResult(scope, stream, None, why="a truncation is under way")
        stored, version = self._records.versioned(KIND, scope, stream)
        try:
            records = [RetentionRecord.from_dict(r) for r in (stored or {}).get("records", [])]
            stored_records = list(records)
            head_mark = (stored or {}).get("head")
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise DataCorruptionError(f"retention set of {scope}/{stream} is damaged: {e!r}") from e
        head_cut = {
            int(k): int(v) for k, v in self._records.truncation(scope, stream)["cut"].items()
        }
        tail = self._tail(scope, stream, value)
        ranges = self._ranges(scope, stream, [head_cut, tail.cut, *(r.cut for r in records)])
        head = RetentionRecord(
            self._head_time(head_cut, head_mark, records, ranges, int(value["created_ms"])),
            self._size_of(scope, stream, head_cut),
            head_cut,
        )
        if head_cut:  # a truncation completed: its records are done with
            records = [r for r in records if not cut_le(r.cut, head_cut, ranges)]
        before = len(records)
        if not records or dict(records[-1].cut) != dict(tail.cut):
            if records and (tail.time_ms < records[-1].time_ms or tail.size < records[-1].size):
                tail = RetentionRecord(
                    records[-1].time_ms, max(tail.size, records[-1].size), tail.cut
                )
            records.append(tail)
        records = bound(records, self._set_max, self._set_bytes_max)
        if stored is None or len(records) != before or records != stored_records:
            try:
                version = self._save(scope, stream, records, head_mark, version)
            except ConflictingUpdateError:
                return CycleResult(scope, stream, None, why="another cycle of the stream ran")
        self._step("tail added")
        lower = self._lower_bound(scope, stream, ranges)
        choice = choose_truncation(policy, records, head, tail.time_ms, lower[1], lower[0])
        if choice.cut is None:
            return CycleResult(scope, stream, choice)
        request = self._new_id()
        posted = self._clock.wall_time_ms()
        body = {"type": "truncate", "scope": scope, "stream": stream, "posted_ms": posted}
        self._requests.post({**body, "request": request})
        self._step("request posted")
        try:
            self._records.put_truncate(scope, stream, dict(choice.cut), request)
        except ConflictingUpdateError:
            return CycleResult(scope, stream, choice, why="a truncation is under way")
        self._step("truncation requested")
        ranges = {**ranges, **self._ranges(scope, stream, [choice.cut])}
        left = purge(records, choice.cut, ranges)
        mark = {"time_ms": choice.time_ms, "cut": {str(k): v for k, v in choice.cut.items()}}
        with contextlib.suppress(ConflictingUpdateError):  # the next cycle drops them
            self._save(scope, stream, left, mark, version)
        return CycleResult(scope, stream, choice, requested=True)

    # --- helpers ---------------------------------------------------------------------------------
    def _save(
        self,
        scope: str,
        stream: str,
        records: list[RetentionRecord],
        head: dict[str, Any] | None,
        version: int | None,
    ) -> int:
        value = {"records": [r.to_dict() for r in records], "head": head}
        self._records.put_versioned(KIND, scope, stream, value, version)
        return self._records.versioned(KIND, scope, stream)[1] or 0

    def _tail(self, scope: str, stream: str, value: dict[str, Any]) -> RetentionRecord:
        row = self._records.epoch(scope, stream, int(value["epoch"]))
        assert row is not None
        cut = {
            sid: self._segments.segment_length(stream_segment_name(scope, stream, sid))
            for sid in sorted(row.ids())
        }
        return RetentionRecord(self._clock.wall_time_ms(), self._size_of(scope, stream, cut), cut)

    def _size_of(self, scope: str, stream: str, cut: Cut) -> int:
        """Bytes from the stream's beginning to ``cut``: every segment wholly before it (its
        sealed length) plus the cut's offsets."""
        if not cut:
            return 0
        before = self._records.before_cut(scope, stream, dict(cut))
        sealed = self._records.sealed_sizes(scope, stream, before) if before else {}
        return sum(sealed.get(s, 0) for s in before) + sum(cut.values())

    def _ranges(
        self, scope: str, stream: str, cuts: Sequence[Cut]
    ) -> dict[int, tuple[float, float]]:
        out: dict[int, tuple[float, float]] = {}
        for cut in cuts:
            for sid in cut:
                if sid not in out:
                    row = self._records.segment_row(scope, stream, sid)
                    if row is None:
                        raise DataCorruptionError(
                            f"segment {sid} of a cut is not in {scope}/{stream}"
                        )
                    out[sid] = (row[0][1], row[0][2])
        return out

    @staticmethod
    def _head_time(
        head_cut: Cut,
        mark: dict[str, Any] | None,
        records: list[RetentionRecord],
        ranges: Ranges,
        created_ms: int,
    ) -> int:
        if mark and {int(k): int(v) for k, v in mark["cut"].items()} == dict(head_cut):
            return int(mark["time_ms"])
        if not head_cut:
            return created_ms
        behind = [r.time_ms for r in records if cut_le(r.cut, head_cut, ranges)]
        return max(behind, default=created_ms)

    def _lower_bound(
        self, scope: str, stream: str, ranges: dict[int, tuple[float, float]]
    ) -> tuple[RetentionRecord | None, Ranges]:
        cuts = [c for c in subscriber_cuts(self._store, scope, stream).values() if c]
        if not cuts:
            return None, ranges
        ranges = {**ranges, **self._ranges(scope, stream, cuts)}

        def epoch_segments(epoch: int) -> list[int]:
            row = self._records.epoch(scope, stream, epoch)
            return sorted(row.ids()) if row is not None else []

        lb = lower_bound(cuts, ranges, epoch_segments)
        ranges = {**ranges, **self._ranges(scope, stream, [lb])}
        return RetentionRecord(0, self._size_of(scope, stream, lb), lb), ranges


def cases_of(results: list[CycleResult]) -> dict[Case | None, int]:
    """How many cycles ended in each case (None: skipped), for logs and benchmarks."""
    out: dict[Case | None, int] = {}
    for r in results:
        key = r.choice.case if r.choice is not None else None
        out[key] = out.get(key, 0) + 1
    return out
