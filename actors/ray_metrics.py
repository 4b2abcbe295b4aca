"""The Ray-backed metrics sink: pravega-ray's metrics as ``ray.util.metrics``.

The core records through :mod:`pravega_ray.metrics` (no Ray there). Each actor process
calls :func:`install_ray_metrics` in its constructor, and ``start_local``/``connect`` call
it in the driver; from then on every recording of the process goes to a
``ray.util.metrics`` Counter, Gauge or Histogram of the same name, tags and description,
which Ray's metrics agent exports on each node's Prometheus endpoint
(``http://<node ip>:<MetricsExportPort>/metrics``, names prefixed ``ray_`` by Ray).

A recording that Ray refuses (e.g. the process is shutting down) is logged once per metric
and dropped: metrics never fail the operation they describe.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from pravega_ray import metrics
from pravega_ray.logging_setup import ACTOR_LOG_LEVEL_VARIABLE
from pravega_ray.metrics import MetricDefinition, Recorder, Tags

__all__ = ["RaySink", "install_ray_metrics", "setup_actor_process"]

log = logging.getLogger(__name__)


class _RayRecorder:
    __slots__ = ("_failed", "_method", "_name")

    def __init__(self, name: str, method: Any) -> None:
        self._name = name
        self._method = method
        self._failed = False

    def record(self, value: float, tags: Tags) -> None:
        try:
            self._method(value, tags=dict(tags) if tags else None)
        except Exception as e:  # never fail the operation being measured
            if not self._failed:
                self._failed = True
                log.warning("metric %s not recorded: %r", self._name, e)


class RaySink:
    """A :class:`~pravega_ray.metrics.MetricsSink` over ``ray.util.metrics`` (one Ray metric
    object per name, made on first use in this process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recorders: dict[str, _RayRecorder] = {}

    def bind(self, definition: MetricDefinition) -> Recorder:
        with self._lock:
            recorder = self._recorders.get(definition.name)
            if recorder is None:
                recorder = _RayRecorder(definition.name, _ray_method(definition))
                self._recorders[definition.name] = recorder
            return recorder


def _ray_method(definition: MetricDefinition) -> Any:
    from ray.util import metrics as ray_metrics

    description = f"{definition.description} Unit: {definition.unit}."
    keys = definition.tag_keys
    if definition.kind == "counter":
        return ray_metrics.Counter(definition.name, description, tag_keys=keys).inc
    if definition.kind == "gauge":
        return ray_metrics.Gauge(definition.name, description, tag_keys=keys).set
    return ray_metrics.Histogram(
        definition.name, description, boundaries=list(definition.boundaries), tag_keys=keys
    ).observe


def install_ray_metrics() -> None:
    """Send this process's metrics to Ray from now on (idempotent). Ray must be initialized
    (an actor's process always is)."""
    if not isinstance(metrics.current_sink(), RaySink):
        metrics.install_sink(RaySink())


def setup_actor_process() -> None:
    """What every pravega-ray actor's constructor does first.

    Logs of the actor go to its stderr, which Ray forwards to the driver's terminal, at the
    level of :data:`~pravega_ray.logging_setup.ACTOR_LOG_LEVEL_VARIABLE` (``INFO`` if unset
    or not a level name): ``start_local``/``connect`` set it from
    :func:`~pravega_ray.logging_setup.verbose_logging` in the job's runtime environment, so a
    quiet program shows only the actors' warnings and errors. Metrics go to Ray
    (:func:`install_ray_metrics`).
    """
    name = os.environ.get(ACTOR_LOG_LEVEL_VARIABLE, "INFO").upper()
    level = logging.getLevelName(name)
    logging.basicConfig(
        level=level if isinstance(level, int) else logging.INFO,
        format="%(asctime)s %(name)s %(message)s",
    )
    install_ray_metrics()
