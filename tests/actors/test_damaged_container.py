"""A container whose log was damaged while the cluster was down names it; the others serve."""

from __future__ import annotations

from pathlib import Path

import pytest

import pravega_ray as pr
from pravega_ray.naming import container_for_segment
from pravega_ray_actors.ray_calls import call_with_unwrap

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]


def test_damaged_log_of_one_container_is_named_and_the_others_serve(
    ray_session: None, tmp_path: Path
) -> None:
    namespace = "pravega-damage-test"
    cluster = pr.start_local(data_dir=tmp_path, container_count=2, namespace=namespace)
    try:
        mgr = cluster.stream_manager()
        mgr.create_scope("sc")
        mgr.create_stream("sc", "st", pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(4)))
        with cluster.create_writer("sc", "st") as writer:
            for i in range(40):  # one group commit each: many log records
                writer.write_event(f"event-{i}".encode(), routing_key=f"key-{i}").result(30)
        segments = [s.name for s in mgr.get_stream_info("sc", "st").segments]
    finally:
        cluster.shutdown()
    on = {s: container_for_segment(s, 2) for s in segments}
    assert set(on.values()) == {0, 1}, "the 4 segments should span both containers"
    log_file = sorted((tmp_path / "tier1" / "container-0").glob("log-*.dat"))[-1]
    data = bytearray(log_file.read_bytes())
    data[len(data) // 2] ^= 0x10
    log_file.write_bytes(bytes(data))

    cluster = pr.start_local(data_dir=tmp_path, container_count=2, namespace=namespace)
    try:
        for segment in segments:
            call = cluster.container_handle(segment).read.remote(segment, 0, 1 << 20, 0.0)
            if on[segment] == 0:
                with pytest.raises(pr.DataCorruptionError, match=str(log_file)):
                    call_with_unwrap(call, 60)
            else:
                assert call_with_unwrap(call, 60).data  # the other container serves its data
        assert cluster.stream_manager().create_scope("still-works")
    finally:
        cluster.shutdown()
