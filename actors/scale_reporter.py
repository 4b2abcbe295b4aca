"""A segment container's auto-scale reporter on Ray: posts reports to the request stream.

The container's auto-scale monitor (``segmentstore/auto_scale.py``) calls :meth:`report`
off its event loop; the reporter finds the containers by name on first use (the request
stream's segment lives on one of them, maybe this one) and appends the report to the
controller's request stream, where the request event processor acts on it.
"""

from __future__ import annotations

import threading

import ray

from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.controller.request_stream import RequestReporter, RequestStream
from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.segmentstore.auto_scale import ScaleReport
from pravega_ray_actors.options import CONTROLLER_NAME, container_name
from pravega_ray_actors.ray_calls import RayServiceInvoker

CALL_TIMEOUT_S = 10.0


class RayScaleReporter:
    """See the module docstring. Thread-safe; raises when a report was not posted (the
    monitor sends it again next period)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reporter: RequestReporter | None = None

    def _connect(self) -> RequestReporter:
        namespace = ray.get_runtime_context().namespace
        controller = ray.get_actor(CONTROLLER_NAME, namespace=namespace)
        # A future, not ray.get: this runs on a worker thread of an async actor.
        config = controller.get_cluster_config.remote().future().result(CALL_TIMEOUT_S)
        handles = [
            ray.get_actor(container_name(i), namespace=namespace)
            for i in range(config["container_count"])
        ]
        client = SegmentStoreClient(RayServiceInvoker(handles, namespace))
        helper = SegmentHelper(client, attempts_max=3, call_timeout_s=CALL_TIMEOUT_S)
        return RequestReporter(RequestStream(helper))

    def report(self, report: ScaleReport) -> None:
        with self._lock:
            if self._reporter is None:
                self._reporter = self._connect()
            reporter = self._reporter
        reporter.report(report)
