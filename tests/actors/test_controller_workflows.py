"""Controller workflows on the shared local Ray: one detached actor per controller function,
each killed mid-workflow; scales, updates, seals and deletes still end exactly once."""

from __future__ import annotations

import threading
import time

import pytest
import ray

import pravega_ray as pr
from pravega_ray.constants import RETENTION_BUCKETS_DEFAULT
from pravega_ray.naming import segment_id
from pravega_ray_actors.options import CONTROLLER_NAME, REQUEST_PROCESSOR_NAME, stream_bucket_name
from pravega_ray_actors.stream_bucket_actor import bucket_of

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]


def _stream(cluster, scope: str, segments: int, config=None) -> pr.StreamManager:  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    config = config or pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments))
    assert mgr.create_stream(scope, "st", config)
    return mgr


def _pid(name: str, namespace: str) -> int:
    return ray.get(ray.get_actor(name, namespace=namespace).describe.remote())["pid"]


def test_every_controller_function_runs_in_its_own_detached_actor(cluster) -> None:  # type: ignore[no-untyped-def]
    names = [CONTROLLER_NAME, REQUEST_PROCESSOR_NAME, "cluster-manager"] + [
        stream_bucket_name(b) for b in range(RETENTION_BUCKETS_DEFAULT)
    ]
    pids = {name: _pid(name, cluster.namespace) for name in names}
    assert len(set(pids.values())) == len(names)  # one process each
    described = ray.get(
        ray.get_actor(stream_bucket_name(1), namespace=cluster.namespace).describe.remote()
    )
    assert (described["bucket"], described["buckets"]) == (1, RETENTION_BUCKETS_DEFAULT)
    assert 0 <= bucket_of("sc", "st", 4) < 4


@pytest.mark.parametrize("victim", [REQUEST_PROCESSOR_NAME, CONTROLLER_NAME])
def test_actor_killed_during_scales_every_scale_completes_exactly_once(
    cluster, unique_name, victim: str
) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, unique_name, 2)
    handle = ray.get_actor(victim, namespace=cluster.namespace)
    before = ray.get(handle.describe.remote()).get("pid")
    done = []

    def scales() -> None:
        for _ in range(6):
            last = mgr.get_stream_info(unique_name, "st").segments[-1]
            middle = (last.key_low + last.key_high) / 2
            new = [(last.key_low, middle), (middle, last.key_high)]
            assert mgr.scale_stream(unique_name, "st", [last.segment_id], new)
            done.append(1)

    worker = threading.Thread(target=scales)
    worker.start()
    while len(done) < 2:
        time.sleep(0.01)
    ray.kill(handle, no_restart=False)  # Ray restarts it; it resumes from stored state
    worker.join(180)
    assert len(done) == 6
    info = mgr.get_stream_info(unique_name, "st")
    assert info.epoch == 6 and info.state is pr.StreamState.ACTIVE
    assert len(info.segments) == 8
    assert info.segments[-1].segment_id == segment_id(6, 13)  # numbers used once each
    bounds = [(s.key_low, s.key_high) for s in info.segments]
    assert bounds[0][0] == 0 and bounds[-1][1] == 1
    assert (
        ray.get(ray.get_actor(victim, namespace=cluster.namespace).describe.remote()).get("pid")
        != before
        or victim == CONTROLLER_NAME
    )


def test_update_seal_delete_and_a_recursive_scope_delete_on_ray(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, unique_name, 2)
    config = pr.StreamConfiguration(pr.ScalingPolicy.by_event_rate(500, 2, 2))
    assert mgr.update_stream(unique_name, "st", config)
    assert mgr.get_stream_info(unique_name, "st").configuration == config
    with pytest.raises(pr.StreamNotSealedError):
        mgr.delete_stream(unique_name, "st")
    assert mgr.seal_stream(unique_name, "st")
    assert mgr.delete_stream(unique_name, "st")
    with pytest.raises(pr.StreamNotFoundError):
        mgr.get_stream_info(unique_name, "st")
    assert mgr.create_stream(unique_name, "again", None)
    mgr.create_key_value_table(unique_name, "t", 1)
    group = pr.ReaderGroupConfig.for_streams(f"{unique_name}/again")
    cluster.create_reader_group(unique_name, "rg", group)
    # The request processor's actor runs the delete (a controller instance of its own).
    assert mgr.delete_scope(unique_name, recursive=True)
    assert unique_name not in mgr.list_scopes()
    with pytest.raises(pr.ScopeNotFoundError):
        mgr.create_stream(unique_name, "late", None)


def test_a_stream_split_by_a_burst_merges_back_to_min_segments_once_cold(
    cluster, unique_name
) -> None:  # type: ignore[no-untyped-def]
    config = pr.StreamConfiguration(pr.ScalingPolicy.by_event_rate(1000, 2, 1))
    mgr = _stream(cluster, unique_name, 1, config)
    writer = cluster.create_writer(unique_name, "st", pr.BytesSerializer())
    deadline = time.monotonic() + 90
    n = 0
    try:
        while mgr.get_stream_info(unique_name, "st").epoch == 0:
            assert time.monotonic() < deadline, "no auto-scale within 90 s"
            started = time.monotonic()
            for _ in range(500):
                writer.write_event(b"x" * 16, routing_key=str(n % 64))
                n += 1
            writer.flush()
            time.sleep(max(0.0, 0.05 - (time.monotonic() - started)))  # about 10,000/s
    finally:
        writer.close()
    info = mgr.get_stream_info(unique_name, "st")
    assert len(info.segments) == 2  # split into scale_factor pieces at once
    assert [(s.key_low, s.key_high) for s in info.segments] == [(0.0, 0.5), (0.5, 1.0)]
    # No more writes: both halves turn cold (after the containers' cooldown and warm-up) and
    # the controller merges them, down to min_segments and no further.
    deadline = time.monotonic() + 120
    while len(info.segments) > 1:
        assert time.monotonic() < deadline, f"not merged back within 120 s: {info.segments}"
        time.sleep(1.0)
        info = mgr.get_stream_info(unique_name, "st")
    assert info.epoch == 2
    assert [(s.key_low, s.key_high) for s in info.segments] == [(0.0, 1.0)]
    time.sleep(5.0)  # cold still, but at min_segments: nothing more happens
    assert mgr.get_stream_info(unique_name, "st").epoch == 2
    reader_config = pr.ReaderGroupConfig.for_streams(f"{unique_name}/st")
    cluster.create_reader_group(unique_name, "rg", reader_config)
    reader = cluster.create_reader("r", unique_name, "rg", pr.BytesSerializer())
    read = 0
    try:
        while read < n:
            event = reader.read_next_event(5.0)
            assert event is not None, f"{read} of {n} events read across the split and merge"
            read += event.checkpoint_name is None
    finally:
        reader.close()


def test_an_actor_starting_while_a_name_is_unregistered_waits_for_it(cluster) -> None:  # type: ignore[no-untyped-def]
    """Controller actors look the containers up in ``__init__``; a container being moved
    has no name for a while, and an ``__init__`` that raised then was never restarted by Ray
    (the chaos run's transaction timer). ``lookup`` waits for the name instead."""
    from pravega_ray_actors.ray_calls import lookup

    @ray.remote(num_cpus=0)
    class Late:
        def ping(self) -> str:
            return "here"

    name = f"late-{time.monotonic_ns()}"
    created: list[object] = []
    timer = threading.Timer(
        1.0, lambda: created.append(Late.options(name=name, namespace=cluster.namespace).remote())
    )
    timer.start()
    handle = lookup(name, cluster.namespace, wait_s=30)
    assert ray.get(handle.ping.remote()) == "here"
    ray.kill(handle)
    with pytest.raises(ValueError):
        lookup(f"never-{name}", cluster.namespace, wait_s=0.5)
