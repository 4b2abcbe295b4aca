"""Large events (docs/design.md) through the container actors: a 100 MiB event written through a
transient segment and read back whole (shared local Ray, filesystem tiers)."""

from __future__ import annotations

import hashlib
import os

import pytest
import ray

import pravega_ray as pr
from pravega_ray.constants import MIB

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


def test_a_100_mib_event_round_trips_through_ray(cluster, unique_name) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope(unique_name)
    mgr.create_stream(unique_name, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    event = os.urandom(MIB) * 100
    digest = hashlib.sha256(event).digest()
    with cluster.create_writer(unique_name, "st") as w:
        w.write_event(b"before", routing_key="k")
        w.write_event(event, routing_key="k").result(240)
        w.write_event(b"after", routing_key="k")
    del event
    cluster.create_reader_group(
        unique_name, "rg", pr.ReaderGroupConfig.for_streams(f"{unique_name}/st")
    )
    with cluster.create_reader("r", unique_name, "rg") as r:
        first, large, last = (r.read_next_event(60) for _ in range(3))
    assert first is not None and large is not None and last is not None
    assert (first.event, last.event) == (b"before", b"after")
    assert len(large.event) == 100 * MIB and hashlib.sha256(large.event).digest() == digest
    segments = mgr.get_stream_info(unique_name, "st").segments
    handle = cluster.container_handle(segments[0].name)
    listed = ray.get(handle.list_segments.remote())
    assert not [n for n in listed if "#transient." in n]  # merged, none left behind
