"""Retention through Ray (short): the stream buckets' retention settings, and a bucket
actor killed in the middle of a retention cycle truncates nothing twice and nothing past
a subscriber's cut."""

from __future__ import annotations

import time

import pytest
import ray

import pravega_ray as pr
from pravega_ray.client.event_framing import frame_events
from pravega_ray.constants import RETENTION_PERIOD_S_DEFAULT
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray_actors.options import stream_bucket_name
from tests.buckets import private_bucket

pytestmark = [pytest.mark.ray, pytest.mark.timeout(180)]


@pytest.mark.parametrize("period", [0, -1, float("nan"), float("inf"), True, "60", 8 * 86400])
def test_start_local_refuses_a_bad_retention_period(period: object) -> None:
    with pytest.raises(pr.InvalidArgumentError):  # checked before anything starts
        pr.start_local(retention_period_s=period)  # type: ignore[arg-type]


def test_buckets_run_retention_every_retention_period(cluster) -> None:  # type: ignore[no-untyped-def]
    handle = ray.get_actor(stream_bucket_name(0), namespace=cluster.namespace)
    described = ray.get(handle.describe.remote())
    assert described["retention_period_s"] == RETENTION_PERIOD_S_DEFAULT


def test_bucket_killed_mid_cycle_truncates_once_and_never_past_a_subscriber(
    cluster, unique_name
) -> None:  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    mgr.create_scope(unique_name)
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(1), pr.RetentionPolicy.by_size(0, 10**9))
    assert mgr.create_stream(unique_name, "st", config)
    (segment,) = mgr.get_stream_info(unique_name, "st").segments
    segments = SegmentStoreClient(cluster._invoker)
    # Ten framed events of 10 bytes: cuts at multiples of 10 are event boundaries.
    segments.append_conditional(segment.name, frame_events([b"xy"] * 10)).result(30)
    controller = cluster._controller
    assert controller.add_subscriber(unique_name, "st", f"{unique_name}/rg", 0)
    cut = pr.StreamCut(unique_name, "st", {segment.segment_id: 30})
    assert controller.update_subscriber_stream_cut(unique_name, "st", f"{unique_name}/rg", 0, cut)

    victim = private_bucket(cluster, retention_pause=("truncation requested", 60.0))
    ray.get(victim.describe.remote())
    running = victim.run_retention_once.remote()  # pauses right after requesting
    deadline = time.monotonic() + 60
    while not controller.check_truncate(unique_name, "st") or _start(segments, segment) != 30:
        assert time.monotonic() < deadline, "the truncation was never requested"
        time.sleep(0.1)
    ray.kill(victim, no_restart=True)
    with pytest.raises(ray.exceptions.RayError):
        ray.get(running, timeout=30)

    survivor = private_bucket(cluster)
    for _ in range(2):
        results = ray.get(survivor.run_retention_once.remote(), timeout=60)
        mine = [r for r in results if (r.scope, r.stream) == (unique_name, "st")]
        assert len(mine) == 1 and not mine[0].requested
    assert _start(segments, segment) == 30  # exactly the subscriber's cut, once
    # The subscriber moves on: the next cycle follows it, and no further.
    ahead = pr.StreamCut(unique_name, "st", {segment.segment_id: 70})
    assert controller.update_subscriber_stream_cut(unique_name, "st", f"{unique_name}/rg", 0, ahead)
    results = ray.get(survivor.run_retention_once.remote(), timeout=60)
    assert [r.requested for r in results if r.stream == "st" and r.scope == unique_name] == [True]
    deadline = time.monotonic() + 60
    while _start(segments, segment) != 70:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    ray.kill(survivor, no_restart=True)


def _start(segments: SegmentStoreClient, segment: pr.SegmentRange) -> int:
    return segments.get_info(segment.name).result(30).start_offset
