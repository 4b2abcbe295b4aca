"""A private stream bucket actor for tests that drive its periodic work themselves.

The cluster's own buckets run their loops on their periods; a test that kills a bucket mid
cycle (or mid watermark run) starts one of its own with :func:`private_bucket`: one bucket
owning every stream, its loops idle for an hour, pausing where the test says.
"""

from __future__ import annotations

from typing import Any

import ray

from pravega_ray_actors.options import CONTROLLER_NAME
from pravega_ray_actors.stream_bucket_actor import StreamBucketActor

IDLE_S = 3600.0


def private_bucket(
    cluster: Any,
    *,
    retention_pause: tuple[str, float] | None = None,
    watermark_pause: tuple[str, float] | None = None,
) -> Any:
    """A ``StreamBucketActor`` handle on ``cluster``'s storage (``*_pause``: ``(step,
    seconds)`` it sleeps after that step of each retention cycle or watermark run)."""
    controller = ray.get_actor(CONTROLLER_NAME, namespace=cluster.namespace)
    tiers = ray.get(controller.describe.remote())
    return (
        ray.remote(StreamBucketActor)
        .options(namespace=cluster.namespace, num_cpus=0, max_concurrency=4)
        .remote(
            tiers["tier1"],
            tiers["tier2"],
            cluster.container_count,
            cluster.namespace,
            0,
            1,
            IDLE_S,
            IDLE_S,
            retention_pause,
            watermark_period_s=IDLE_S,
            watermark_pause=watermark_pause,
        )
    )
