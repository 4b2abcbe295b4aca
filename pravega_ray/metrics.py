"""Metrics: named counters, gauges and histograms the core records into a pluggable sink.

The core never imports Ray (docs/design.md "Layers"), so it records through this facade.
Every metric is declared once, below, in :data:`CATALOG` (docs/metrics.md lists them all):
a name prefixed ``pravega_``, a kind, a unit, a description and the tag keys every recording
must give, exactly. Tags have bounded cardinality (container, scope, stream, group, workflow;
segment only for the auto-scale rates).

* **Sinks.** :class:`InMemorySink` (the default in every process) aggregates values in memory,
  so unit tests and the in-process cluster can read them (:meth:`InMemorySink.value`,
  :meth:`InMemorySink.histogram`). It holds at most :data:`SERIES_PER_METRIC_MAX` tag sets per
  metric; recordings for more are dropped and counted (``dropped``). ``actors/ray_metrics.py``
  installs a Ray-backed sink (``ray.util.metrics``) in the actor processes and, through
  ``start_local``/``connect``, in the driver; Ray's metrics agent exports it to Prometheus.
* **Cost.** Recording is a dict lookup plus the sink's work (a Ray call in actors). Hot paths
  record once per group commit, per append operation (a block of events) or per read call,
  never once per event.
* **Errors.** Declaring a name twice with another definition, a name or tag key that is not
  ``[a-z][a-z0-9_]*``, or recording with other tag keys than declared raises
  :class:`~pravega_ray.errors.InvalidArgumentError`. A sink's own failure while recording is
  the sink's to handle: metrics never fail the operation they describe.

Thread-safe: :func:`install_sink` swaps the sink atomically; :class:`InMemorySink` locks.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal, Protocol

from pravega_ray.errors import InvalidArgumentError

__all__ = [
    "CATALOG",
    "GAUGE_INTERVAL_S",
    "SERIES_PER_METRIC_MAX",
    "WORKFLOW_NAMES",
    "Counter",
    "Gauge",
    "Histogram",
    "HistogramValue",
    "InMemorySink",
    "MetricDefinition",
    "MetricsSink",
    "Recorder",
    "counter",
    "current_sink",
    "declared",
    "gauge",
    "histogram",
    "install_sink",
    "segment_tags",
    "stream_tags",
    "tag_values",
    "using_sink",
    "workflow_tag",
]

Kind = Literal["counter", "gauge", "histogram"]
Tags = Mapping[str, str]

GAUGE_INTERVAL_S = 1.0
"""Periodic recordings (log size, lags, cache hits) happen at most this often per container."""

SERIES_PER_METRIC_MAX = 10_000
"""Tag sets one metric keeps in an :class:`InMemorySink`; recordings for more are dropped."""

_NAME_RE = re.compile(r"pravega_[a-z0-9_]+")
_TAG_RE = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True, slots=True)
class MetricDefinition:
    """What a metric is: ``boundaries`` (ascending, positive) only for histograms."""

    name: str
    kind: Kind
    unit: str
    description: str
    tag_keys: tuple[str, ...]
    boundaries: tuple[float, ...] = ()


class Recorder(Protocol):
    """A sink's handle for one metric: ``record`` adds (counter), sets (gauge) or observes
    (histogram) ``value`` under ``tags``."""

    def record(self, value: float, tags: Tags) -> None: ...


class MetricsSink(Protocol):
    """Where recordings go: one :class:`Recorder` per metric definition."""

    def bind(self, definition: MetricDefinition) -> Recorder: ...


# --- the current sink ----------------------------------------------------------------------------
class _Current:
    __slots__ = ("generation", "sink")

    def __init__(self) -> None:
        self.sink: MetricsSink = InMemorySink()
        self.generation = 0


_lock = threading.Lock()


def install_sink(sink: MetricsSink) -> MetricsSink:
    """Make ``sink`` this process's sink for every metric; returns the previous one."""
    if not callable(getattr(sink, "bind", None)):
        raise InvalidArgumentError(f"a metrics sink needs a bind(definition) method: {sink!r}")
    with _lock:
        previous = _current.sink
        _current.sink = sink
        _current.generation += 1
    return previous


def current_sink() -> MetricsSink:
    """This process's sink (an :class:`InMemorySink` unless :func:`install_sink` changed it)."""
    return _current.sink


@contextmanager
def using_sink(sink: MetricsSink) -> Iterator[MetricsSink]:
    """Install ``sink`` for the ``with`` block (tests), then restore the previous one."""
    previous = install_sink(sink)
    try:
        yield sink
    finally:
        install_sink(previous)


# --- metrics -------------------------------------------------------------------------------------
class _Metric:
    __slots__ = ("_generation", "_recorder", "definition")

    def __init__(self, definition: MetricDefinition) -> None:
        self.definition = definition
        self._recorder: Recorder | None = None
        self._generation = -1

    @property
    def name(self) -> str:
        return self.definition.name

    def _record(self, value: float, tags: Tags | None) -> None:
        recorder = self._recorder
        if self._generation != _current.generation or recorder is None:
            generation = _current.generation
            recorder = _current.sink.bind(self.definition)
            self._recorder, self._generation = recorder, generation
        recorder.record(value, tags if tags is not None else _NO_TAGS)


_NO_TAGS: Tags = {}


class Counter(_Metric):
    __slots__ = ()

    def inc(self, value: float = 1.0, tags: Tags | None = None) -> None:
        """Add ``value`` (>= 0; 0 records nothing) under ``tags`` (exactly the declared keys)."""
        if value < 0:
            raise InvalidArgumentError(f"{self.name}: a counter only grows, got {value}")
        if value:  # adding 0 changes nothing (and Ray's Counter refuses it)
            self._record(value, tags)


class Gauge(_Metric):
    __slots__ = ()

    def set(self, value: float, tags: Tags | None = None) -> None:
        """Set the value under ``tags`` (exactly the declared keys)."""
        self._record(value, tags)


class Histogram(_Metric):
    __slots__ = ()

    def observe(self, value: float, tags: Tags | None = None) -> None:
        """Count one observation of ``value`` under ``tags`` (exactly the declared keys)."""
        self._record(value, tags)


_registry: dict[str, _Metric] = {}


def _declare(definition: MetricDefinition, cls: type[_Metric]) -> _Metric:
    if not isinstance(definition.name, str) or not _NAME_RE.fullmatch(definition.name):
        raise InvalidArgumentError(f"metric name must be pravega_[a-z0-9_]+: {definition.name!r}")
    for key in definition.tag_keys:
        if not isinstance(key, str) or not _TAG_RE.fullmatch(key):
            raise InvalidArgumentError(f"{definition.name}: bad tag key {key!r}")
    if len(set(definition.tag_keys)) != len(definition.tag_keys):
        raise InvalidArgumentError(f"{definition.name}: repeated tag keys {definition.tag_keys}")
    if definition.kind == "histogram":
        bounds = definition.boundaries
        if not bounds or any(b <= 0 for b in bounds) or list(bounds) != sorted(set(bounds)):
            raise InvalidArgumentError(
                f"{definition.name}: histogram boundaries must be ascending and positive"
            )
    with _lock:
        existing = _registry.get(definition.name)
        if existing is not None:
            if existing.definition != definition:
                raise InvalidArgumentError(f"metric {definition.name} is declared differently")
            return existing
        metric = cls(definition)
        _registry[definition.name] = metric
        return metric


def counter(name: str, unit: str, description: str, tag_keys: tuple[str, ...] = ()) -> Counter:
    """Declare (or get, if declared the same) the counter ``name``."""
    metric = _declare(MetricDefinition(name, "counter", unit, description, tag_keys), Counter)
    assert isinstance(metric, Counter)
    return metric


def gauge(name: str, unit: str, description: str, tag_keys: tuple[str, ...] = ()) -> Gauge:
    """Declare (or get, if declared the same) the gauge ``name``."""
    metric = _declare(MetricDefinition(name, "gauge", unit, description, tag_keys), Gauge)
    assert isinstance(metric, Gauge)
    return metric


def histogram(
    name: str,
    unit: str,
    description: str,
    tag_keys: tuple[str, ...] = (),
    *,
    boundaries: tuple[float, ...],
) -> Histogram:
    """Declare (or get, if declared the same) the histogram ``name`` with bucket ``boundaries``."""
    definition = MetricDefinition(name, "histogram", unit, description, tag_keys, boundaries)
    metric = _declare(definition, Histogram)
    assert isinstance(metric, Histogram)
    return metric


def declared() -> list[MetricDefinition]:
    """Every metric declared in this process, by name."""
    with _lock:
        return [m.definition for _, m in sorted(_registry.items())]


def tag_values(definition: MetricDefinition, tags: Tags) -> tuple[str, ...]:
    """The values of ``tags`` in declared key order; InvalidArgumentError unless the keys match."""
    if len(tags) != len(definition.tag_keys):
        raise InvalidArgumentError(
            f"{definition.name} takes tags {definition.tag_keys}, got {sorted(tags)}"
        )
    try:
        return tuple(str(tags[key]) for key in definition.tag_keys)
    except KeyError:
        raise InvalidArgumentError(
            f"{definition.name} takes tags {definition.tag_keys}, got {sorted(tags)}"
        ) from None


# --- the in-memory sink --------------------------------------------------------------------------
@dataclass(slots=True)
class HistogramValue:
    """Observations of one histogram series: ``buckets[i]`` counts values <= ``boundaries[i]``
    (and above the boundary before); the last bucket counts values above every boundary."""

    boundaries: tuple[float, ...]
    count: int = 0
    sum: float = 0.0
    buckets: list[int] = field(default_factory=list)


class _MemoryRecorder:
    __slots__ = ("_definition", "_sink")

    def __init__(self, sink: InMemorySink, definition: MetricDefinition) -> None:
        self._sink = sink
        self._definition = definition

    def record(self, value: float, tags: Tags) -> None:
        self._sink._record(self._definition, tag_values(self._definition, tags), value)


class InMemorySink:
    """Aggregates recordings in memory (counter sums, last gauge values, histogram buckets)."""

    def __init__(self, series_per_metric_max: int = SERIES_PER_METRIC_MAX) -> None:
        if isinstance(series_per_metric_max, bool) or not isinstance(series_per_metric_max, int):
            raise InvalidArgumentError("series_per_metric_max must be an int >= 1")
        if series_per_metric_max < 1:
            raise InvalidArgumentError("series_per_metric_max must be an int >= 1")
        self._series_max = series_per_metric_max
        self._lock = threading.Lock()
        self._definitions: dict[str, MetricDefinition] = {}
        self._values: dict[str, dict[tuple[str, ...], float | HistogramValue]] = {}
        self.dropped = 0
        """Recordings dropped because their metric had ``series_per_metric_max`` tag sets."""

    def bind(self, definition: MetricDefinition) -> Recorder:
        with self._lock:
            self._definitions[definition.name] = definition
            self._values.setdefault(definition.name, {})
        return _MemoryRecorder(self, definition)

    def _record(self, definition: MetricDefinition, key: tuple[str, ...], value: float) -> None:
        with self._lock:
            series = self._values[definition.name]
            current = series.get(key)
            if current is None and len(series) >= self._series_max:
                self.dropped += 1
                return
            if definition.kind == "counter":
                counted = current if isinstance(current, float) else 0.0
                series[key] = counted + value
            elif definition.kind == "gauge":
                series[key] = float(value)
            else:
                if current is None:
                    bounds = definition.boundaries
                    current = HistogramValue(bounds, buckets=[0] * (len(bounds) + 1))
                    series[key] = current
                assert isinstance(current, HistogramValue)
                current.count += 1
                current.sum += value
                current.buckets[bisect.bisect_left(current.boundaries, value)] += 1

    def _series(self, name: str, tags: Mapping[str, str]) -> float | HistogramValue | None:
        with self._lock:
            definition = self._definitions.get(name)
            if definition is None:
                return None
            return self._values[name].get(tag_values(definition, tags))

    def value(self, name: str, **tags: str) -> float | None:
        """A counter's sum or a gauge's last value under exactly ``tags`` (None: never)."""
        found = self._series(name, tags)
        if isinstance(found, HistogramValue):
            raise InvalidArgumentError(f"{name} is a histogram: use histogram()")
        return found

    def histogram(self, name: str, **tags: str) -> HistogramValue | None:
        """A histogram's observations under exactly ``tags``; None if never observed."""
        found = self._series(name, tags)
        if found is not None and not isinstance(found, HistogramValue):
            raise InvalidArgumentError(f"{name} is not a histogram: use value()")
        return found

    def total(self, name: str, **tags: str) -> float:
        """Sum of a counter or gauge over every series whose tags include ``tags``
        (a histogram: its observation count)."""
        with self._lock:
            definition = self._definitions.get(name)
            if definition is None:
                return 0.0
            unknown = set(tags) - set(definition.tag_keys)
            if unknown:
                raise InvalidArgumentError(f"{name} has no tags {sorted(unknown)}")
            index = {k: definition.tag_keys.index(k) for k in tags}
            total = 0.0
            for key, found in self._values[name].items():
                if all(key[i] == tags[k] for k, i in index.items()):
                    total += found.count if isinstance(found, HistogramValue) else found
            return total

    def series(self, name: str) -> dict[tuple[str, ...], float | HistogramValue]:
        """Every series of ``name``: tag values (in declared order) -> value (a copy)."""
        with self._lock:
            return dict(self._values.get(name, {}))


_current = _Current()


# --- the catalog: every metric pravega-ray records (docs/metrics.md) ----------------------------
_LATENCY_S = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
_DURATION_S = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
_COUNTS = (1, 2, 4, 8, 16, 64, 256, 1024, 4096, 16384, 65536)
_BYTES = (1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)
_STREAM = ("container", "scope", "stream")

APPENDED_EVENTS = counter(
    "pravega_segmentstore_appended_events",
    "events",
    "Events durably appended (acknowledged), by the stream they went to.",
    _STREAM,
)
APPENDED_BYTES = counter(
    "pravega_segmentstore_appended_bytes",
    "bytes",
    "Bytes (framed events) durably appended, by the stream they went to.",
    _STREAM,
)
APPEND_LATENCY = histogram(
    "pravega_segmentstore_append_latency_seconds",
    "seconds",
    "Ack latency in the container: an append operation (a writer's block of events) from "
    "its arrival at the durable log to its acknowledgment (queue, log write, apply).",
    ("container",),
    boundaries=_LATENCY_S,
)
GROUP_COMMIT_EVENTS = histogram(
    "pravega_durable_log_group_commit_events",
    "events",
    "Events in one Tier-1 log write (a group commit).",
    ("container",),
    boundaries=_COUNTS,
)
GROUP_COMMIT_OPERATIONS = histogram(
    "pravega_durable_log_group_commit_operations",
    "operations",
    "Operations (appends, seals, chunk records, ...) in one Tier-1 log write.",
    ("container",),
    boundaries=_COUNTS,
)
GROUP_COMMIT_BYTES = histogram(
    "pravega_durable_log_group_commit_bytes",
    "bytes",
    "Bytes of one Tier-1 log write (the encoded record).",
    ("container",),
    boundaries=_BYTES,
)
LOG_BYTES = gauge(
    "pravega_durable_log_bytes",
    "bytes",
    "Size of the container's Tier-1 log: bytes of the records not truncated yet.",
    ("container",),
)
LOG_RECORDS = gauge(
    "pravega_durable_log_truncation_lag_records",
    "records",
    "Records in the Tier-1 log above its truncation point: what a recovery now replays.",
    ("container",),
)
STORAGE_WRITER_LAG = gauge(
    "pravega_storage_writer_lag_bytes",
    "bytes",
    "Durable segment bytes not yet in Tier-2; the log cannot be truncated past them.",
    ("container",),
)
TIER1_THROTTLED_APPENDS = gauge(
    "pravega_tier1_throttled_appends",
    "appends",
    "Appends waiting because Tier-1 holds more bytes not yet in Tier-2 than allowed "
    "(segmentstore/throttle.py).",
    ("container",),
)
TIER2_WRITTEN_BYTES = counter(
    "pravega_tier2_written_bytes",
    "bytes",
    "Bytes a container wrote to Tier-2 (segment chunks, attribute index pages).",
    ("container",),
)
TIER2_READ_BYTES = counter(
    "pravega_tier2_read_bytes",
    "bytes",
    "Bytes a container read from Tier-2 (cache misses, read-ahead, index pages).",
    ("container",),
)
READ_CACHE_HITS = counter(
    "pravega_read_cache_hits",
    "reads",
    "Reads of durable bytes served from memory (unflushed entries or a cached chunk).",
    ("container",),
)
READ_CACHE_MISSES = counter(
    "pravega_read_cache_misses",
    "reads",
    "Reads of durable bytes that waited for a Tier-2 chunk load.",
    ("container",),
)
READER_GROUP_UNREAD_BYTES = gauge(
    "pravega_reader_group_unread_bytes",
    "bytes",
    "Reader lag: bytes between the group's positions and its streams' tails (or end cuts), "
    "as of the latest ReaderGroup.unread_bytes() call in the process.",
    ("scope", "group"),
)
WORKFLOWS = counter(
    "pravega_controller_workflows",
    "workflows",
    "Controller workflow runs by outcome: done, postponed (tried again later), retried "
    "(outcome unknown), failed (dropped), expired, truncated/skipped (retention).",
    ("workflow", "outcome"),
)
WORKFLOW_DURATION = histogram(
    "pravega_controller_workflow_duration_seconds",
    "seconds",
    "Time of one run of a controller workflow (a postponed run counts as its own run).",
    ("workflow",),
    boundaries=_DURATION_S,
)
SEGMENT_EVENT_RATE = gauge(
    "pravega_segment_event_rate",
    "events per second",
    "Smoothed event rate of an auto-scaled stream's segment, as its container's auto-scaler "
    "last saw it (what scale decisions compare to the policy's target).",
    ("scope", "stream", "segment"),
)
SEGMENT_BYTE_RATE = gauge(
    "pravega_segment_byte_rate",
    "bytes per second",
    "Smoothed byte rate of an auto-scaled stream's segment, as its auto-scaler last saw it.",
    ("scope", "stream", "segment"),
)

WORKFLOW_NAMES = frozenset(
    {"scale", "update", "seal", "delete", "truncate", "scale_report", "merge_sweep"}
    | {"commit", "abort", "retention"}
)
"""The ``workflow`` tag's values; anything else is recorded as ``other`` (bounded tags)."""

CATALOG: tuple[MetricDefinition, ...] = tuple(
    m.definition
    for m in (
        APPENDED_EVENTS,
        APPENDED_BYTES,
        APPEND_LATENCY,
        GROUP_COMMIT_EVENTS,
        GROUP_COMMIT_OPERATIONS,
        GROUP_COMMIT_BYTES,
        LOG_BYTES,
        LOG_RECORDS,
        STORAGE_WRITER_LAG,
        TIER1_THROTTLED_APPENDS,
        TIER2_WRITTEN_BYTES,
        TIER2_READ_BYTES,
        READ_CACHE_HITS,
        READ_CACHE_MISSES,
        READER_GROUP_UNREAD_BYTES,
        WORKFLOWS,
        WORKFLOW_DURATION,
        SEGMENT_EVENT_RATE,
        SEGMENT_BYTE_RATE,
    )
)
"""Every metric pravega-ray records, in docs/metrics.md's order."""


def workflow_tag(name: object) -> str:
    """``name`` if it is one of :data:`WORKFLOW_NAMES`, else ``"other"``."""
    return name if isinstance(name, str) and name in WORKFLOW_NAMES else "other"


def stream_tags(container: str, segment: str) -> dict[str, str]:
    """Tags ``container``/``scope``/``stream`` of a segment name (``scope/stream/...``)."""
    scope, _, rest = segment.partition("/")
    return {"container": container, "scope": scope, "stream": rest.partition("/")[0]}


def segment_tags(segment: str) -> dict[str, str]:
    """Tags ``scope``/``stream``/``segment`` (``<number>.#epoch.<epoch>``) of a segment name."""
    scope, stream, name = [*segment.split("/", 2), "", ""][:3]
    return {"scope": scope, "stream": stream, "segment": name}
