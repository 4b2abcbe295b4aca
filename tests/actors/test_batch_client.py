"""The batch client through Ray: segment ranges read in parallel Ray tasks, each connecting
to the cluster on its own (shared local Ray, filesystem tiers)."""

from __future__ import annotations

from collections import Counter

import pytest
import ray

import pravega_ray as pr

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


@ray.remote(num_cpus=0)
def _read_range(namespace: str, rng: pr.SegmentReadRange) -> list[bytes]:
    """Runs in a Ray worker: a client of its own, reading one range."""
    return list(pr.connect(namespace=namespace).batch_client().read_segment(rng))


def test_ranges_read_in_parallel_ray_tasks(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    mgr.create_scope(unique_name)
    mgr.create_stream(unique_name, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(3)))
    written = [f"event-{i}".encode() for i in range(300)]
    with cluster.create_writer(unique_name, "st") as w:
        for i, event in enumerate(written[:150]):
            w.write_event(event, routing_key=f"k{i % 17}")
        w.flush()
        start = mgr.get_tail_cut(unique_name, "st")
        for i, event in enumerate(written[150:]):
            w.write_event(event, routing_key=f"k{i % 17}")
    bc = cluster.batch_client()
    ranges = bc.segment_ranges(unique_name, "st", start)
    assert len(ranges) == 3 and sum(r.length for r in ranges) > 0
    parts = ray.get([_read_range.remote(cluster.namespace, r) for r in ranges])
    assert Counter(e for part in parts for e in part) == Counter(written[150:])
