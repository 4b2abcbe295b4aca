"""Auto-scaling detection in a segment container: hot and cold segments, reported.

Pravega's ``AutoScaleProcessor`` and ``SegmentStatsRecorder`` (segment store host, ``stat``),
rebuilt on the container's smoothed rates (:mod:`~pravega_ray.segmentstore.traffic`). The
segment store only *detects*; the controller decides (it splits a hot segment, merges
neighbouring cold ones, keeps ``min_segments``) from the reports it receives.

**How a segment's policy reaches it.** Through attributes, so the service surface does not
change. Right after creating a stream segment the controller calls
``update_attributes(segment, policy_updates(kind, target_rate, scale_factor))``. The keys are
*settable core attributes* (``attributes.SETTABLE_CORE_IDS``), which appends refuse as writer
ids and attribute iteration hides, so no writer or table key can clash with them:

=================================  ========  ================================================
key                                core id   value
=================================  ========  ================================================
:data:`SCALE_POLICY_KIND`          16        1: events per second, 2: bytes per second
:data:`SCALE_POLICY_RATE`          17        target rate per segment, in thousandths
:data:`SCALE_POLICY_FACTOR`        18        most segments a hot one splits into (>= 2)
=================================  ========  ================================================

A segment without all three (or with values that do not decode) is never reported; setting
each key to ``NULL_VALUE`` (:func:`policy_removal_updates`) removes the policy. Byte rates are
bytes per second: the controller converts ``ScalingPolicy``'s KiB/s. Being attributes, the
policy is durable and survives recovery like any attribute.

**When a segment is reported** (:meth:`AutoScaleMonitor.check`, a pure decision over rates):

* only segments of role ``normal`` with a policy, not sealed (nor being sealed or deleted);
* not before ``warmup_s`` after the monitor first saw it (a new segment, or every segment
  after a recovery, whose rate tracker restarts at zero), nor within ``cooldown_s`` of
  that, nor within ``cooldown_s`` of its last delivered report;
* **up** when its rate (events or bytes, per the policy) exceeds ``target_rate``, with
  ``splits = min(scale_factor, max(2, ceil(rate / target_rate)))``: enough pieces to bring
  each under target, capped by the policy (Pravega truncates; ceiling reaches target in one
  step). Not again within ``mute_s`` of a delivered "up";
* **down** when its rate stayed below ``target_rate * cold_fraction`` for a whole period
  after warm-up (``splits`` 0). Not again within ``mute_s`` of a delivered "up" or "down";
* a NaN, infinite or negative rate is never reported (and breaks a cold run).

Pravega's cache expiry (a silent "down" for a segment without traffic) needs no counterpart:
an idle segment's smoothed rate decays to zero, so it turns cold on its own. The monitor
forgets a segment once it is sealed, deleted or loses its policy, so its memory is bounded
by the container's segments.

**Delivery** is at least once: due reports go to the :class:`ScaleReporter` one by one, off
the event loop (``Scheduler.run_blocking``), each within ``report_timeout_s``. A report that
raises or times out is logged, the round stops, and every report not delivered is still
due next period. Nothing here can fail the container.

**The container's part** (:class:`AutoScaler`, built by ``builder.build_container`` when given
a reporter) runs a round every ``period_s`` on the container's scheduler, from the
container's first call until it closes or fails. It reads each segment's policy from the
attributes in memory (decoded once per segment and cached by value); only after a recovery
or an eviction does it read them from the attribute index, at most
``policy_reads_per_period_max`` segments per round.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, cast

from pravega_ray import constants, metrics
from pravega_ray.contracts.attributes import (
    NULL_VALUE,
    AttributeUpdate,
    AttributeUpdateType,
    core_key,
)
from pravega_ray.contracts.segment_store import SegmentRole, SegmentTraffic
from pravega_ray.errors import ContainerNotReadyError, InvalidArgumentError, SegmentNotFoundError
from pravega_ray.segmentstore.container_metadata import ContainerMetadata
from pravega_ray.timing import Clock, Scheduler

__all__ = [
    "NO_AUTO_SCALER",
    "POLICY_KEYS",
    "SCALE_POLICY_FACTOR",
    "SCALE_POLICY_KIND",
    "SCALE_POLICY_RATE",
    "AutoScaleConfig",
    "AutoScaleMonitor",
    "AutoScaler",
    "ContainerPart",
    "ScalePolicy",
    "ScaleReport",
    "ScaleReporter",
    "check_reporter",
    "policy_attributes",
    "policy_from_attributes",
    "policy_removal_updates",
    "policy_updates",
]

log = logging.getLogger(__name__)

Kind = Literal["events", "bytes"]
Direction = Literal["up", "down"]

SCALE_POLICY_KIND = core_key(16)
SCALE_POLICY_RATE = core_key(17)
SCALE_POLICY_FACTOR = core_key(18)
POLICY_KEYS = (SCALE_POLICY_KIND, SCALE_POLICY_RATE, SCALE_POLICY_FACTOR)
"""The attribute keys of a segment's scaling policy, in the order the monitor reads them."""

_KIND_CODES: dict[Kind, int] = {"events": 1, "bytes": 2}
_KINDS_BY_CODE: dict[int, Kind] = {code: kind for kind, code in _KIND_CODES.items()}
_MILLI = 1000
_INT64_MAX = 2**63 - 1


# --- policies --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ScalePolicy:
    """A segment's scaling policy: which rate, its target per segment, the largest split.

    ``kind``: ``"events"`` (events/s) or ``"bytes"`` (bytes/s); ``target_rate``: finite and
    positive, stored to a thousandth (so at least 0.001, at most about 9.2e15);
    ``scale_factor``: an int in [2, ``STREAM_SEGMENTS_MAX``]. InvalidArgumentError otherwise.
    """

    kind: Kind
    target_rate: float
    scale_factor: int

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or self.kind not in _KIND_CODES:
            raise InvalidArgumentError(
                f"scale policy kind must be 'events' or 'bytes': {self.kind!r}"
            )
        rate = self.target_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate):
            raise InvalidArgumentError(
                f"scale policy target rate must be a finite number: {rate!r}"
            )
        if not 1 <= round(rate * _MILLI) <= _INT64_MAX:
            raise InvalidArgumentError(f"scale policy target rate out of range: {rate!r}")
        factor = self.scale_factor
        if isinstance(factor, bool) or not isinstance(factor, int):
            raise InvalidArgumentError(f"scale factor must be an int: {factor!r}")
        if not 2 <= factor <= constants.STREAM_SEGMENTS_MAX:
            raise InvalidArgumentError(
                f"scale factor must be in [2, {constants.STREAM_SEGMENTS_MAX}]: {factor}"
            )
        object.__setattr__(self, "target_rate", round(rate * _MILLI) / _MILLI)

    def rate_of(self, traffic: SegmentTraffic) -> float:
        """The rate of ``traffic`` this policy judges (events/s or bytes/s)."""
        return traffic.events_per_s if self.kind == "events" else traffic.bytes_per_s

    def splits_for(self, rate: float) -> int:
        """Pieces a segment at ``rate`` (over target) splits into: enough to bring each under
        target, at least 2, at most ``scale_factor``."""
        return min(self.scale_factor, max(2, math.ceil(rate / self.target_rate)))


def policy_attributes(kind: Kind, target_rate: float, scale_factor: int) -> dict[bytes, int]:
    """The attribute values that give a segment this policy (InvalidArgumentError if bad)."""
    policy = ScalePolicy(kind, target_rate, scale_factor)
    return {
        SCALE_POLICY_KIND: _KIND_CODES[policy.kind],
        SCALE_POLICY_RATE: round(policy.target_rate * _MILLI),
        SCALE_POLICY_FACTOR: policy.scale_factor,
    }


def policy_updates(
    kind: Kind, target_rate: float, scale_factor: int
) -> tuple[AttributeUpdate, ...]:
    """:func:`policy_attributes` as the updates ``update_attributes`` takes (replacing any)."""
    return tuple(
        AttributeUpdate(key, AttributeUpdateType.REPLACE, value)
        for key, value in policy_attributes(kind, target_rate, scale_factor).items()
    )


def policy_removal_updates() -> tuple[AttributeUpdate, ...]:
    """The updates that remove a segment's policy (it is then never reported)."""
    return tuple(AttributeUpdate(k, AttributeUpdateType.REPLACE, NULL_VALUE) for k in POLICY_KEYS)


def policy_from_attributes(values: Mapping[bytes, int]) -> ScalePolicy | None:
    """The policy ``values`` (attribute key -> value) hold; None if they hold none.

    A key mapped to ``NULL_VALUE`` counts as absent. InvalidArgumentError if only some of
    the keys are present or a value does not decode.
    """
    raw = [values.get(key, NULL_VALUE) for key in POLICY_KEYS]
    present = [v != NULL_VALUE for v in raw]
    if not any(present):
        return None
    if not all(present):
        raise InvalidArgumentError("a scale policy needs all three attributes")
    kind, rate, factor = raw
    if kind not in _KINDS_BY_CODE:
        raise InvalidArgumentError(f"unknown scale policy kind code {kind}")
    if rate <= 0:
        raise InvalidArgumentError(f"scale policy target rate must be positive: {rate}")
    return ScalePolicy(_KINDS_BY_CODE[kind], rate / _MILLI, factor)


# --- reports ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ScaleReport:
    """A segment found hot (``"up"``: split into ``splits``) or cold (``"down"``, splits 0).

    ``rate`` and ``target_rate`` are in the policy's unit; ``at_ms`` is wall time.
    """

    segment: str
    direction: Direction
    splits: int
    rate: float
    target_rate: float
    at_ms: int


class ScaleReporter(Protocol):
    """Where a container sends its reports (the controller's side posts them to its stream)."""

    def report(self, report: ScaleReport) -> None:
        """Deliver ``report``; raise if it was not delivered (it is then sent again later).

        Called off the container's event loop, in a worker thread, one report at a time per
        container (several containers of one process may call one reporter at once: be
        thread-safe), and given up after ``report_timeout_s`` (outcome unknown: it may be
        sent again). A report may thus arrive more than once; the controller's cooldown
        absorbs repeats. It may block, but only for a bounded time.
        """
        ...


def check_reporter(reporter: object) -> ScaleReporter:
    """``reporter`` if it has a callable, synchronous ``report``; InvalidArgumentError otherwise.

    An ``async def report`` is refused: called off the loop, its coroutine would never run
    and every report would look delivered.
    """
    report = getattr(reporter, "report", None)
    if isinstance(reporter, type) or not callable(report):
        raise InvalidArgumentError(
            f"scale_reporter must have a report(report) method, got {type(reporter).__name__}"
        )
    if inspect.iscoroutinefunction(report):
        raise InvalidArgumentError(
            "scale_reporter.report must be synchronous (it runs off the loop)"
        )
    return cast(ScaleReporter, reporter)


@dataclass(frozen=True, slots=True)
class AutoScaleConfig:
    """Thresholds and periods of the monitor (defaults in ``constants.py``; tests shorten them).

    Durations are finite seconds (``period_s`` and ``report_timeout_s`` positive, the rest at
    least 0); ``cold_fraction`` is in [0, 1); the two bounds are positive ints.
    """

    period_s: float = constants.AUTO_SCALE_PERIOD_S
    cooldown_s: float = constants.AUTO_SCALE_COOLDOWN_S
    mute_s: float = constants.AUTO_SCALE_MUTE_S
    cold_fraction: float = constants.AUTO_SCALE_COLD_FRACTION
    warmup_s: float = constants.AUTO_SCALE_WARMUP_S
    reports_per_period_max: int = constants.AUTO_SCALE_REPORTS_PER_PERIOD_MAX
    policy_reads_per_period_max: int = constants.AUTO_SCALE_POLICY_READS_PER_PERIOD_MAX
    report_timeout_s: float = constants.AUTO_SCALE_REPORT_TIMEOUT_S

    def __post_init__(self) -> None:
        for name in ("period_s", "cooldown_s", "mute_s", "cold_fraction", "warmup_s"):
            _check_number(name, getattr(self, name), 0.0)
        _check_number("report_timeout_s", self.report_timeout_s, 0.0)
        if self.period_s <= 0 or self.report_timeout_s <= 0:
            raise InvalidArgumentError("period_s and report_timeout_s must be positive")
        if self.cold_fraction >= 1:
            raise InvalidArgumentError(f"cold_fraction must be below 1: {self.cold_fraction}")
        for name in ("reports_per_period_max", "policy_reads_per_period_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"{name} must be a positive int: {value!r}")


def _check_number(name: str, value: object, low: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentError(f"{name} must be a number: {value!r}")
    if not math.isfinite(value) or value < low:
        raise InvalidArgumentError(f"{name} must be finite and at least {low}: {value!r}")


# --- the decision ----------------------------------------------------------------------------
@dataclass(slots=True)
class _Watched:
    """What the monitor remembers of one segment (monotonic seconds)."""

    seen_at: float
    cold_since: float | None = None
    reported_at: float | None = None
    up_at: float | None = None
    down_at: float | None = None  # an "up" sets it too: an "up" mutes both directions


class AutoScaleMonitor:
    """Decides which segments to report (:meth:`check`) and delivers them (:meth:`report`).

    Semantics in the module docstring. Not thread-safe: one container's loop drives it.
    """

    def __init__(
        self, clock: Clock, reporter: ScaleReporter, config: AutoScaleConfig | None = None
    ) -> None:
        self.config = config if config is not None else AutoScaleConfig()
        self._clock = clock
        self._reporter = check_reporter(reporter)
        self._watched: dict[str, _Watched] = {}

    def check(
        self,
        traffic: Iterable[SegmentTraffic],
        policies: Mapping[str, ScalePolicy],
        now: float,
        *,
        sealed: Collection[str] = (),
    ) -> list[ScaleReport]:
        """The reports due at ``now`` (monotonic seconds), at most ``reports_per_period_max``.

        ``traffic``: each segment's rates at ``now``; ``policies``: the policy of each segment
        that has one; ``sealed``: segments sealed or being sealed. No I/O; the only state it
        changes is what it observed (when it first saw a segment, since when it is cold, and
        forgetting segments gone, sealed or without a policy). A report is recorded only once
        delivered (:meth:`record_delivered`), so an undelivered one is due again next time.
        """
        config = self.config
        due: list[ScaleReport] = []
        watched: dict[str, _Watched] = {}
        at_ms: int | None = None
        for segment_traffic in traffic:
            segment = segment_traffic.segment
            policy = policies.get(segment)
            if policy is None or segment in sealed:
                continue  # forgotten: not carried over into ``watched``
            state = self._watched.get(segment) or _Watched(seen_at=now)
            watched[segment] = state
            rate = policy.rate_of(segment_traffic)
            if not math.isfinite(rate) or rate < 0:
                state.cold_since = None  # an unknown rate breaks a cold run
                continue
            age = now - state.seen_at
            if age < config.warmup_s:
                continue  # the rate is not meaningful yet
            cold = rate < policy.target_rate * config.cold_fraction
            if not cold:
                state.cold_since = None
            elif state.cold_since is None:
                state.cold_since = now
            direction = self._direction(state, policy, rate, now)
            if direction is None or len(due) >= config.reports_per_period_max:
                continue
            if at_ms is None:
                at_ms = self._clock.wall_time_ms()
            splits = policy.splits_for(rate) if direction == "up" else 0
            due.append(ScaleReport(segment, direction, splits, rate, policy.target_rate, at_ms))
        self._watched = watched
        return due

    def _direction(
        self, state: _Watched, policy: ScalePolicy, rate: float, now: float
    ) -> Direction | None:
        config = self.config

        def within(since: float | None, window_s: float) -> bool:
            return since is not None and now - since < window_s

        if now - state.seen_at < config.cooldown_s or within(state.reported_at, config.cooldown_s):
            return None
        if rate > policy.target_rate:
            return None if within(state.up_at, config.mute_s) else "up"
        cold_long = state.cold_since is not None and now - state.cold_since >= config.period_s
        if cold_long and not within(state.down_at, config.mute_s):
            return "down"
        return None

    def record_delivered(self, report: ScaleReport, now: float) -> None:
        """``report`` reached the reporter at ``now``: start its cooldown and mute."""
        state = self._watched.get(report.segment)
        if state is None:
            return  # forgotten meanwhile (sealed, deleted): nothing more to report for it
        state.reported_at = state.down_at = now
        if report.direction == "up":
            state.up_at = now

    async def report(
        self, reports: Iterable[ScaleReport], now: float, scheduler: Scheduler
    ) -> list[ScaleReport]:
        """Deliver ``reports`` in order, off the loop; returns those delivered.

        The first report that raises or times out is logged and ends the round: the rest
        stay due (the reporter or the path to the controller is likely down).
        """
        delivered: list[ScaleReport] = []
        for report in reports:
            try:
                await asyncio.wait_for(
                    scheduler.run_blocking(self._reporter.report, report),
                    self.config.report_timeout_s,
                )
            except asyncio.CancelledError:
                raise
            except Exception as e:  # never fail the container: try again next period
                log.warning("scale report for %s not delivered (%r); retried later", report, e)
                break
            self.record_delivered(report, now)
            delivered.append(report)
        return delivered

    def watched(self) -> list[str]:
        """The segments the monitor currently judges (tests, diagnostics)."""
        return sorted(self._watched)


# --- the container's part --------------------------------------------------------------------
class ContainerPart(Protocol):
    """A container part that runs on its own: started with the pipeline, stopped on close."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class _NoPart:
    """A part that does nothing (a container without auto-scaling)."""

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None


NO_AUTO_SCALER: ContainerPart = _NoPart()
"""The container's auto-scaler unless ``build_container`` was given a reporter."""

ReadAttributes = Callable[[str, list[bytes]], Awaitable[dict[bytes, int]]]


class AutoScaler:
    """Runs an :class:`AutoScaleMonitor` over one container's segments every period.

    ``metadata``: the container's segments (read, never changed); ``read_attributes``: the
    container's ``get_attributes`` (durable values; raises ContainerNotReadyError once the
    container stopped, which ends the loop). Every other error of a round is logged and
    the next round tries again.
    """

    def __init__(
        self,
        monitor: AutoScaleMonitor,
        metadata: ContainerMetadata,
        read_attributes: ReadAttributes,
        *,
        clock: Clock,
        scheduler: Scheduler,
    ) -> None:
        self.monitor = monitor
        self._metadata = metadata
        self._read_attributes = read_attributes
        self._clock = clock
        self._scheduler = scheduler
        self._task: asyncio.Task[None] | None = None
        # segment -> (incarnation, raw policy values, decoded policy): decoded once per value.
        self._policies: dict[str, tuple[str | None, tuple[int, ...], ScalePolicy | None]] = {}
        self._rate_tags: dict[str, dict[str, str]] = {}  # segments whose rates were recorded

    def start(self) -> None:
        """Start the rounds on the running event loop (idempotent)."""
        if self._task is None:
            self._task = self._scheduler.start(self._run(), "auto-scaler")

    def stop(self) -> None:
        """Stop the rounds (idempotent); a report being delivered is abandoned."""
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while True:
            await self._scheduler.sleep(self.monitor.config.period_s)
            try:
                await self.run_round()
            except asyncio.CancelledError:
                raise
            except ContainerNotReadyError:
                return  # closed, failed or fenced: nothing of ours to report any more
            except Exception:
                log.exception("auto-scaler of container %d", self._metadata.container_id)

    async def run_round(self) -> list[ScaleReport]:
        """One round now: observe, decide, deliver. Returns the reports delivered."""
        now = self._clock.monotonic()
        traffic, policies, sealed = await self._observe(now)
        self._record_rates(traffic, policies)
        due = self.monitor.check(traffic, policies, now, sealed=sealed)
        return await self.monitor.report(due, now, self._scheduler)

    def _record_rates(
        self, traffic: list[SegmentTraffic], policies: Mapping[str, ScalePolicy]
    ) -> None:
        """The rate gauges of the segments with a scale policy (bounded: segment tags only
        here); a segment no longer watched is set to 0 once and forgotten."""
        seen: dict[str, dict[str, str]] = {}
        for t in traffic:
            if t.segment not in policies:
                continue
            tags = self._rate_tags.get(t.segment) or metrics.segment_tags(t.segment)
            seen[t.segment] = tags
            metrics.SEGMENT_EVENT_RATE.set(t.events_per_s, tags)
            metrics.SEGMENT_BYTE_RATE.set(t.bytes_per_s, tags)
        for segment, tags in self._rate_tags.items():
            if segment not in seen:
                metrics.SEGMENT_EVENT_RATE.set(0.0, tags)
                metrics.SEGMENT_BYTE_RATE.set(0.0, tags)
        self._rate_tags = seen

    async def _observe(
        self, now: float
    ) -> tuple[list[SegmentTraffic], dict[str, ScalePolicy], set[str]]:
        # Rates are worked out only for segments with a policy: the monitor looks at no other.
        policies: dict[str, ScalePolicy] = {}
        sealed: set[str] = set()
        unread: list[str] = []
        live: set[str] = set()
        normal = SegmentRole.NORMAL.value
        kind, rate, factor = POLICY_KEYS
        for state in list(self._metadata):
            if state.role != normal or not state.durable:
                continue
            if state.pending_deleted or state.traffic is None:
                continue
            live.add(state.name)
            if state.sealed or state.pending_sealed:
                sealed.add(state.name)
                continue
            attributes = state.attributes
            if state.attributes_complete and not (
                kind in attributes or rate in attributes or factor in attributes
            ):
                continue  # all its attributes are in memory, no key of a policy among them
            raw = self._in_memory(attributes, state.attributes_complete)
            if raw is None:
                unread.append(state.name)  # evicted, or not loaded since recovery
            else:
                self._decode(state.name, state.incarnation, raw, policies)
        for segment in unread[: self.monitor.config.policy_reads_per_period_max]:
            try:
                values = await self._read_attributes(segment, list(POLICY_KEYS))
            except SegmentNotFoundError:
                continue  # deleted meanwhile
            found = self._metadata.find(segment)
            if found is not None and not found.pending_sealed:
                raw = tuple(values.get(key, NULL_VALUE) for key in POLICY_KEYS)
                self._decode(segment, found.incarnation, raw, policies)
        traffic = []
        for name in policies:
            found = self._metadata.find(name)  # (after the reads' awaits: as it is now)
            if found is not None and found.traffic is not None:
                traffic.append(SegmentTraffic(name, *found.traffic.rates(now)))
        self._policies = {k: v for k, v in self._policies.items() if k in live}
        return traffic, policies, sealed

    @staticmethod
    def _in_memory(attributes: Mapping[bytes, int], complete: bool) -> tuple[int, ...] | None:
        """The policy's raw values from memory; None if the attribute index must be read."""
        raw = []
        for key in POLICY_KEYS:
            value = attributes.get(key)
            if value is None:
                if not complete:
                    return None
                value = NULL_VALUE  # everything of the segment is in memory: absent
            raw.append(value)
        return tuple(raw)

    def _decode(
        self,
        segment: str,
        incarnation: str | None,
        raw: tuple[int, ...],
        policies: dict[str, ScalePolicy],
    ) -> None:
        cached = self._policies.get(segment)
        if cached is not None and cached[0] == incarnation and cached[1] == raw:
            policy = cached[2]
        else:
            try:
                policy = policy_from_attributes(dict(zip(POLICY_KEYS, raw, strict=True)))
            except InvalidArgumentError as e:  # logged once per value; never reported
                log.warning("segment %s has an invalid scale policy %s: %s", segment, raw, e)
                policy = None
            self._policies[segment] = (incarnation, raw, policy)
        if policy is not None:
            policies[segment] = policy
