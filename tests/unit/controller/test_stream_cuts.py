"""Stream cuts (head, tail, at a time: exact to the event) and truncation, on an in-process
cluster (real containers on memory backends)."""

from __future__ import annotations

import time
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.constants import TIME_INDEX_RESOLUTION_MS
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import container_for_segment
from pravega_ray.segmentstore.container import SegmentContainer
from tests.containers import QUIET
from tests.unit.controller.test_scaling import _die_once_after, _wait

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=2, **QUIET)
    yield c
    c.shutdown()


def _stream(cluster: InProcessCluster, segments: int = 2, name: str = "st") -> pr.StreamManager:
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    assert mgr.create_stream("sc", name, pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))
    return mgr


def _write(cluster: InProcessCluster, first: int, count: int, name: str = "st") -> list[bytes]:
    events = [f"event-{i}".encode() for i in range(first, first + count)]
    with cluster.create_writer("sc", name) as writer:
        for i, event in enumerate(events):
            writer.write_event(event, routing_key=f"k{(first + i) % 11}")
        writer.flush()
    return events


def _read(cluster: InProcessCluster, start: Any = None, end: Any = None) -> list[bytes]:
    bc = cluster.batch_client()
    out: list[bytes] = []
    for rng in bc.segment_ranges("sc", "st", start, end):
        out += list(bc.read_segment(rng))
    return out


def _owner(cluster: InProcessCluster, segment: str) -> SegmentContainer:
    return cluster.container(container_for_segment(segment, cluster.container_count))


def _now_ms() -> int:
    return int(time.time() * 1000)


def test_head_and_tail_cuts(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    s0, s1 = mgr.get_stream_info("sc", "st").segments
    empty = pr.StreamCut("sc", "st", {s0.segment_id: 0, s1.segment_id: 0})
    assert mgr.get_head_cut("sc", "st") == empty == mgr.get_tail_cut("sc", "st")
    events = _write(cluster, 0, 40)
    tail = mgr.get_tail_cut("sc", "st")
    lengths = {s.segment_id: cluster.segments.get_info(s.name).result(10).length for s in (s0, s1)}
    assert tail.positions == lengths and sum(lengths.values()) > 0
    assert mgr.get_head_cut("sc", "st") == empty
    assert sorted(_read(cluster, None, tail)) == sorted(events)
    assert _read(cluster, tail, None) == []
    with pytest.raises(pr.StreamNotFoundError):
        mgr.get_head_cut("sc", "nope")
    with pytest.raises(pr.StreamNotFoundError):
        mgr.get_tail_cut("sc", "nope")


def test_segments_at_time_is_exact_to_the_event_across_a_scale(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    before = _write(cluster, 0, 50)
    time.sleep(3 * TIME_INDEX_RESOLUTION_MS / 1000)
    t1 = _now_ms()
    time.sleep(2 * TIME_INDEX_RESOLUTION_MS / 1000)
    middle = _write(cluster, 50, 50)
    s0 = mgr.get_stream_info("sc", "st").segments[0]
    assert mgr.scale_stream("sc", "st", [s0.segment_id], [(0.0, 0.25), (0.25, 0.5)])
    time.sleep(3 * TIME_INDEX_RESOLUTION_MS / 1000)
    t2 = _now_ms()
    time.sleep(2 * TIME_INDEX_RESOLUTION_MS / 1000)
    after = _write(cluster, 100, 50)
    at1 = mgr.get_segments_at_time("sc", "st", t1)
    at2 = mgr.get_segments_at_time("sc", "st", t2)
    assert len(at1.positions) == 2 and len(at2.positions) == 3  # epochs 0 and 1
    assert all(offset > 0 for offset in at1.positions.values())  # not just the epoch
    assert sorted(_read(cluster, None, at1)) == sorted(before)
    assert sorted(_read(cluster, at1, at2)) == sorted(middle)
    assert sorted(_read(cluster, at2, None)) == sorted(after)
    assert mgr.get_segments_at_time("sc", "st", 0) == mgr.get_head_cut("sc", "st")
    future = mgr.get_segments_at_time("sc", "st", _now_ms() + 60_000)
    assert future == mgr.get_tail_cut("sc", "st")
    with pytest.raises(pr.InvalidArgumentError):
        mgr.get_segments_at_time("sc", "st", 1.5)  # type: ignore[arg-type]


def test_a_time_before_the_head_gives_the_head(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 1)
    _write(cluster, 0, 20)
    t = _now_ms()
    time.sleep(2 * TIME_INDEX_RESOLUTION_MS / 1000)
    s0 = mgr.get_stream_info("sc", "st").segments[0]
    assert mgr.scale_stream("sc", "st", [s0.segment_id], [(0.0, 1.0)])
    kept = _write(cluster, 20, 20)
    mid = mgr.get_tail_cut("sc", "st")
    assert mgr.truncate_stream("sc", "st", mid)
    assert mgr.get_head_cut("sc", "st") == mid
    assert mgr.get_segments_at_time("sc", "st", t) == mid  # epoch 0 is gone
    more = _write(cluster, 40, 5)
    assert sorted(_read(cluster)) == sorted(more)
    assert kept and sorted(_read(cluster, mid)) == sorted(more)


def test_truncate_rejects_bad_cuts_and_changes_nothing(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 1)
    _stream_other = mgr.create_stream("sc", "other", pr.StreamConfiguration())
    assert _stream_other
    _write(cluster, 0, 10)
    (s0,) = mgr.get_stream_info("sc", "st").segments
    tail = mgr.get_tail_cut("sc", "st")
    middle = tail.positions[s0.segment_id] // 2
    other_tail = mgr.get_tail_cut("sc", "other")
    for bad in (
        pr.StreamCut("sc", "other", tail.positions),  # another stream's
        other_tail,
        pr.StreamCut("sc", "st", {s0.segment_id: 3}),  # inside the first event's header
        pr.StreamCut("sc", "st", {s0.segment_id: tail.positions[s0.segment_id] - 1}),
        pr.StreamCut("sc", "st", {s0.segment_id: tail.positions[s0.segment_id] + 10}),
        pr.StreamCut.UNBOUNDED,
    ):
        with pytest.raises(pr.InvalidArgumentError):
            mgr.truncate_stream("sc", "st", bad)
    assert middle > 0
    assert mgr.get_head_cut("sc", "st").positions == {s0.segment_id: 0}
    assert cluster.core.check_truncate("sc", "st")  # nothing pending
    assert cluster.segments.get_info(s0.name).result(10).start_offset == 0
    # Behind the head: truncate at the tail, then at the start again.
    assert mgr.truncate_stream("sc", "st", tail)
    with pytest.raises(pr.InvalidArgumentError):
        mgr.truncate_stream("sc", "st", pr.StreamCut("sc", "st", {s0.segment_id: 0}))
    assert mgr.get_head_cut("sc", "st") == tail


def test_truncation_frees_chunks_and_log_and_moves_the_head(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 1)
    (s0,) = mgr.get_stream_info("sc", "st").segments
    owner = _owner(cluster, s0.name)
    batches = []
    for b in range(3):  # three flushes: three chunks
        batches.append(_write(cluster, 100 * b, 30))
        cluster.run(owner.flush_to_storage()).result(10)
        if b == 1:
            cut = mgr.get_tail_cut("sc", "st")
    prefix = "segments/" + owner.metadata.get(s0.name).storage_name + "/"
    chunks_before = cluster.storage.list(prefix)
    assert len(chunks_before) >= 3
    log_store = cluster.log_stores[container_for_segment(s0.name, cluster.container_count)]
    upto_before = cluster.run(owner.checkpoint()).result(10)
    assert mgr.truncate_stream("sc", "st", cut)
    upto_after = cluster.run(owner.checkpoint()).result(10)
    chunks_after = cluster.storage.list(prefix)
    offset = cut.positions[s0.segment_id]
    assert chunks_after and all(int(name.rsplit("/", 1)[1]) >= offset for name in chunks_after)
    assert len(chunks_after) < len(chunks_before)
    assert upto_after > upto_before and log_store.size_bytes() >= 0
    with pytest.raises(pr.SegmentTruncatedError):
        cluster.segments.read(s0.name, 0, 100, 0).result(10)
    assert mgr.get_head_cut("sc", "st") == cut
    assert _read(cluster) == batches[2]
    ranges = cluster.batch_client().segment_ranges("sc", "st")
    assert [(r.start_offset, r.end_offset) for r in ranges] == [
        (offset, mgr.get_tail_cut("sc", "st").positions[s0.segment_id])
    ]


@pytest.mark.parametrize("step", ["truncating", "segments deleted", "segments truncated"])
def test_processor_killed_mid_truncation_truncates_once_at_the_cut(cluster, step: str) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    first = _write(cluster, 0, 30)
    s0, s1 = mgr.get_stream_info("sc", "st").segments
    assert mgr.scale_stream("sc", "st", [s0.segment_id], [(0.0, 0.5)])
    second = _write(cluster, 30, 30)
    cut = mgr.get_tail_cut("sc", "st")
    third = _write(cluster, 60, 30)
    killed: list[str] = []
    cluster.restart_processor(step=_die_once_after(step, killed))
    cluster.core.truncate_stream("sc", "st", cut)
    _wait(lambda: bool(killed))
    steps: list[str] = []
    cluster.restart_processor(step=steps.append)
    _wait(lambda: cluster.core.check_truncate("sc", "st"))
    assert mgr.get_stream_info("sc", "st").state is pr.StreamState.ACTIVE
    assert mgr.get_head_cut("sc", "st") == cut
    for sid, offset in cut.positions.items():
        segment = next(s for s in mgr.list_segments("sc", "st") if s.segment_id == sid)
        assert cluster.segments.get_info(segment.name).result(10).start_offset == offset
    assert s0.segment_id not in {s.segment_id for s in mgr.list_segments("sc", "st")}
    assert steps.count("truncating") <= 1  # resumed once, never run twice
    assert first and second and sorted(_read(cluster)) == sorted(third)
    assert s1.segment_id in cut.positions
