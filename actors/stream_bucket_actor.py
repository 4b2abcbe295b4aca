"""Ray shell of a stream bucket (``stream-bucket-<i>``): the periodic work of its streams.

Streams are hashed (their ``scope/stream`` name, stably) into ``buckets`` buckets; bucket
``i``'s detached actor owns the periodic per-stream work of the streams in it (Pravega's
"Stream Buckets"; docs/design.md, "The controller"):

* the auto-scale merge sweep, every ``period_s``: a stream with segments marked cold gets a
  ``merge_sweep`` request, so two cold neighbours are merged even when no new cold report
  arrives;
* the retention cycle (``controller/retention_service.py``, docs/design.md "Retention"), every
  ``retention_period_s`` (``start_local(retention_period_s=...)``, default 30 minutes):
  each stream of the bucket with a retention policy gets a tail cut in its retention set
  and, if the policy (and its subscribers) allow, a truncation request;
* the watermark workflow (``controller/watermark_tasks.py``), every ``watermark_period_s``
  (``start_local(watermark_period_s=...)``, default 10 s): each stream of the bucket with
  writers' noted times gets its next watermark, if every writer's time moved on.

Each runs on a thread of its own; they hold no state but what is stored, so a bucket actor
killed at any moment (Ray restarts it) loses nothing: the next period does the work again,
and a retention cycle cut short truncates nothing twice.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from pravega_ray.constants import (
    AUTO_SCALE_COLD_MARK_S,
    BUCKET_PERIOD_S,
    RETENTION_PERIOD_S_DEFAULT,
    WATERMARK_PERIOD_S_DEFAULT,
)
from pravega_ray.controller.request_stream import RequestStream
from pravega_ray.controller.retention_service import CycleResult, RetentionService
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.controller.watermark_tasks import PeriodicWatermarking
from pravega_ray.errors import InvalidArgumentError, PravegaError
from pravega_ray.naming import stable_hash64
from pravega_ray.timing import DAEMON_THREADS, SYSTEM_CLOCK
from pravega_ray_actors.controller_parts import controller_parts
from pravega_ray_actors.ray_metrics import setup_actor_process

log = logging.getLogger(__name__)


def bucket_of(scope: str, stream: str, buckets: int) -> int:
    """The bucket stream ``scope/stream`` belongs to (stable across processes)."""
    return stable_hash64(f"{scope}/{stream}") % buckets


class StreamBucketActor:
    """Runs the periodic work of bucket ``bucket`` of ``buckets``; see the module docstring."""

    def __init__(
        self,
        tier1: str,
        tier2: str,
        container_count: int,
        namespace: str,
        bucket: int,
        buckets: int,
        period_s: float = BUCKET_PERIOD_S,
        retention_period_s: float = RETENTION_PERIOD_S_DEFAULT,
        retention_pause: tuple[str, float] | None = None,
        watermark_period_s: float = WATERMARK_PERIOD_S_DEFAULT,
        watermark_pause: tuple[str, float] | None = None,
    ) -> None:
        """``retention_pause`` and ``watermark_pause`` (tests only): ``(step, seconds)``
        sleeps that long after that step of every retention cycle (watermark run), so a test
        can kill the actor mid-cycle."""
        setup_actor_process()
        if not (isinstance(buckets, int) and buckets >= 1 and 0 <= bucket < buckets):
            raise InvalidArgumentError("bucket must be an int in [0, buckets)")
        self._tiers = {"tier1": tier1, "tier2": tier2}
        self._bucket, self._buckets, self._period_s = bucket, buckets, period_s
        parts = controller_parts(tier2, container_count, namespace)
        self._metadata = parts.metadata
        self._requests = RequestStream(parts.segments)
        self._retention_period_s = retention_period_s
        self._retention = RetentionService(
            parts.metadata, parts.segments, step=_pause_at(retention_pause)
        )
        self._watermark_period_s = watermark_period_s
        self._watermarks = PeriodicWatermarking(
            StreamMetadataStore(parts.metadata),
            parts.metadata,
            parts.segments,
            step=_pause_at(watermark_pause),
        )
        self.watermarks = 0
        self.sweeps = 0
        self.passes = 0
        self.cycles = 0
        self.truncations = 0
        DAEMON_THREADS.start(self._loop, "pravega-bucket")
        DAEMON_THREADS.start(self._retention_loop, "pravega-retention")
        DAEMON_THREADS.start(self._watermark_loop, "pravega-watermarks")

    def _loop(self) -> None:
        while True:
            DAEMON_THREADS.sleep(self._period_s)
            try:
                self.run_once()
            except PravegaError as e:  # a container restarting, say: next period
                log.warning("stream bucket %d: pass failed: %r", self._bucket, e)

    def _retention_loop(self) -> None:
        while True:
            DAEMON_THREADS.sleep(self._retention_period_s)
            try:
                self.run_retention_once()
            except PravegaError as e:  # listing the streams failed: next period
                log.warning("stream bucket %d: retention pass failed: %r", self._bucket, e)

    def _watermark_loop(self) -> None:
        while True:
            DAEMON_THREADS.sleep(self._watermark_period_s)
            try:
                self.run_watermarks_once()
            except PravegaError as e:  # listing the streams failed: next period
                log.warning("stream bucket %d: watermark pass failed: %r", self._bucket, e)

    def run_watermarks_once(self) -> int:
        """One watermark iteration of each of the bucket's streams with writers' marks
        (``controller/watermark_tasks.py``); how many watermarks it emitted."""
        emitted = self._watermarks.run_streams(
            lambda scope, stream: bucket_of(scope, stream, self._buckets) == self._bucket
        )
        self.watermarks += emitted
        return emitted

    def run_retention_once(self) -> list[CycleResult]:
        """One retention cycle of each of the bucket's streams (a stream whose cycle fails
        is logged and left to the next period)."""
        results = self._retention.run_streams(
            lambda scope, stream: bucket_of(scope, stream, self._buckets) == self._bucket
        )
        self.cycles += len(results)
        self.truncations += sum(r.requested for r in results)
        return results

    def run_once(self) -> int:
        """One pass over the bucket's streams; returns how many sweeps it asked for."""
        now = SYSTEM_CLOCK.wall_time_ms()
        posted = 0
        for scope_key in self._metadata.list_keys("scopes"):
            scope = scope_key.rsplit("/", 1)[1]
            for key in self._metadata.list_keys(f"streams/{scope}"):
                stream = key.rsplit("/", 1)[1]
                if bucket_of(scope, stream, self._buckets) != self._bucket:
                    continue
                record = self._metadata.get(key)
                cold = record.value.get("cold", []) if record else []
                fresh = [c for c in cold if now - c[1] < AUTO_SCALE_COLD_MARK_S * 1000]
                if len(fresh) >= 2:
                    body = {"type": "merge_sweep", "scope": scope, "stream": stream}
                    self._requests.post({**body, "posted_ms": now})
                    posted += 1
        self.sweeps += posted
        self.passes += 1
        return posted

    def describe(self) -> dict[str, object]:
        return {
            **self._tiers,
            "pid": os.getpid(),
            "bucket": self._bucket,
            "buckets": self._buckets,
            "passes": self.passes,
            "sweeps": self.sweeps,
            "retention_period_s": self._retention_period_s,
            "retention_cycles": self.cycles,
            "retention_truncations": self.truncations,
            "watermark_period_s": self._watermark_period_s,
            "watermarks": self.watermarks,
        }


def _pause_at(pause: tuple[str, float] | None) -> Callable[[str], None]:
    def step(name: str) -> None:
        if pause is not None and name == pause[0]:
            DAEMON_THREADS.sleep(pause[1])

    return step
