"""Event time through Ray (issue 27 item 1): writers in Ray tasks note times, the stream
buckets' watermark workflow emits watermarks (run here on demand instead of waiting for its
period), a reader's window follows them and never contradicts an event it reads; a bucket
killed mid-run emits nothing twice (shared local Ray, filesystem tiers)."""

from __future__ import annotations

import time

import pytest
import ray

import pravega_ray as pr
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.contracts.watermarks import mark_segment_name, read_watermarks
from pravega_ray_actors.options import stream_bucket_name
from tests.buckets import private_bucket

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


@ray.remote(num_cpus=0)
def _write(namespace: str, scope: str, base: int, steps: int) -> str:
    """A writer in a Ray worker: at each step notes a time, then writes events of that time
    and later; returns its id once its last mark reached the controller."""
    cluster = pr.connect(namespace=namespace)
    mgr = cluster.stream_manager()
    with cluster.create_writer(scope, "st", pr.JsonSerializer()) as writer:
        for step in range(steps):
            t = 1000 * step + base
            writer.note_time(t)
            for i in range(50):
                writer.write_event({"t": t + i}, routing_key=f"k{i % 7}")
            deadline = time.monotonic() + 30
            while mgr.list_writers(scope, "st").get(writer.writer_id.hex()) != t:
                assert time.monotonic() < deadline
                time.sleep(0.02)
        return writer.writer_id.hex()


def _run_buckets(cluster: pr.Cluster) -> int:
    emitted = 0
    for bucket in range(64):
        try:
            handle = ray.get_actor(stream_bucket_name(bucket), namespace=cluster.namespace)
        except ValueError:
            break
        emitted += ray.get(handle.run_watermarks_once.remote(), timeout=60)
    return emitted


def test_windows_follow_writers_in_ray_tasks(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    scope = unique_name
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    mgr.create_stream(scope, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(3)))
    cluster.create_reader_group(scope, "g", pr.ReaderGroupConfig.for_streams(f"{scope}/st"))
    reader = cluster.create_reader("r", scope, "g", pr.JsonSerializer())
    # Two writers, one step at a time, a watermark after each step.
    for step in range(3):
        ray.get([_write.remote(cluster.namespace, scope, 1000 * step + b, 1) for b in (0, 5)])
        assert _run_buckets(cluster) == 0  # both writers closed: their times hold nothing
    # Writers that stay open: the window moves as they note.
    cluster_writers = [cluster.create_writer(scope, "st", pr.JsonSerializer()) for _ in range(2)]
    lowest_allowed = None
    lowers = []
    for step in range(4):
        t = 10_000 + 1000 * step
        for writer in cluster_writers:
            writer.note_time(t)
            for i in range(30):
                writer.write_event({"t": t + i}, routing_key=f"k{i % 7}")
        ids = {writer.writer_id.hex() for writer in cluster_writers}
        deadline = time.monotonic() + 30
        while {v for k, v in mgr.list_writers(scope, "st").items() if k in ids} != {t}:
            assert time.monotonic() < deadline, mgr.list_writers(scope, "st")
            time.sleep(0.02)
        _run_buckets(cluster)  # emits, unless the buckets' own period just did
    events = 0
    while events < 3 * 2 * 50 + 4 * 2 * 30:
        ev = reader.read_next_event(10.0)
        assert ev is not None
        if ev.event is None:
            continue
        events += 1
        if lowest_allowed is not None:
            assert ev.event["t"] >= lowest_allowed
        window = reader.get_current_time_window(f"{scope}/st")
        if window.lower_ms is not None:
            lowers.append(window.lower_ms)
            lowest_allowed = window.lower_ms
    assert lowers == sorted(lowers)
    deadline = time.monotonic() + 10
    while reader.get_current_time_window(f"{scope}/st").lower_ms != 13_000:
        assert time.monotonic() < deadline, reader.get_current_time_window(f"{scope}/st")
        time.sleep(0.05)
    for writer in cluster_writers:
        writer.close()
    reader.close()
    assert _run_buckets(cluster) == 0  # closed writers time nothing
    # Kept (their positions bound the next watermark's cut) until one covers them or they
    # time out; the Ray tasks' writers went with the first watermark after them.
    assert set(mgr.list_writers(scope, "st")) == ids


@pytest.mark.parametrize("step", ["appended", "computed"])
def test_a_bucket_killed_mid_run_emits_each_watermark_once(cluster, unique_name, step) -> None:  # type: ignore[no-untyped-def]
    scope = unique_name
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    mgr.create_stream(scope, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    info = mgr.get_stream_info(scope, "st")
    segment = mark_segment_name(scope, "st", info.creation_time_ms)
    segments = SegmentStoreClient(cluster._invoker)

    def marks() -> list[int]:
        """Every watermark's lower bound in the mark segment (a read may stop short of the
        end: read on until there)."""
        reads = read_watermarks(
            lambda at: segments.read(segment, at, 1 << 20, 0.0).result(30), segment, 0
        )
        try:
            return [mark.lower_ms for found, _ in reads for mark in found]
        except pr.SegmentNotFoundError:
            return []

    writer = cluster.create_writer(scope, "st", pr.Utf8Serializer())
    writer.write_event("e")
    writer.note_time(100)
    deadline = time.monotonic() + 30
    while mgr.list_writers(scope, "st").get(writer.writer_id.hex()) != 100:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    victim = private_bucket(cluster, watermark_pause=(step, 60.0))
    running = victim.run_watermarks_once.remote()  # pauses after ``step``
    time.sleep(3.0 if step == "computed" else 0.0)
    deadline = time.monotonic() + 60
    while step == "appended" and marks() != [100]:
        assert time.monotonic() < deadline, "the watermark was never appended"
        time.sleep(0.1)
    ray.kill(victim, no_restart=True)
    with pytest.raises(ray.exceptions.RayError):
        ray.get(running, timeout=30)
    survivor = private_bucket(cluster)
    ray.get(survivor.run_watermarks_once.remote(), timeout=60)  # nothing new, or the one cut short
    ray.get(survivor.run_watermarks_once.remote(), timeout=60)
    assert marks() == [100]  # once, whichever bucket emitted it
    writer.note_time(200)
    deadline = time.monotonic() + 30
    while mgr.list_writers(scope, "st").get(writer.writer_id.hex()) != 200:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    _run_buckets(cluster)  # the cluster's own buckets may emit it too: still once
    ray.get(survivor.run_watermarks_once.remote(), timeout=60)
    assert marks() == [100, 200]
    writer.close()
    ray.kill(survivor, no_restart=True)
