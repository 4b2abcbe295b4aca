"""The batch client (client/batch_client.py) on an in-process cluster."""

from __future__ import annotations

import pickle
import time
from collections import Counter

import pytest

import pravega_ray as pr
from pravega_ray.constants import MAX_EVENT_SIZE_BYTES
from pravega_ray.inprocess import InProcessCluster
from tests.containers import QUIET

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=2, **QUIET)
    yield c
    c.shutdown()


def _write(cluster: InProcessCluster, first: int, count: int) -> list[bytes]:
    events = [f"e{i}".encode() * (1 + i % 5) for i in range(first, first + count)]
    with cluster.create_writer("sc", "st") as writer:
        for i, event in enumerate(events):
            writer.write_event(event, routing_key=f"k{(first + i) % 13}")
        writer.flush()
    return events


def _read_all(bc: pr.BatchClient, ranges: list[pr.SegmentReadRange]) -> list[bytes]:
    return [event for rng in ranges for event in bc.read_segment(rng)]


def test_ranges_across_a_split_and_a_merge_hold_each_event_once(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    bc = cluster.batch_client()
    a = _write(cluster, 0, 60)
    start = mgr.get_tail_cut("sc", "st")
    b = _write(cluster, 60, 60)
    _, s1 = mgr.get_stream_info("sc", "st").segments
    assert mgr.scale_stream("sc", "st", [s1.segment_id], [(0.5, 0.75), (0.75, 1.0)])  # split
    c = _write(cluster, 120, 60)
    segments = mgr.get_stream_info("sc", "st").segments
    assert mgr.scale_stream(
        "sc", "st", [s.segment_id for s in segments], [(0.0, 1.0)]
    )  # merge all three into one
    d = _write(cluster, 180, 60)
    end = mgr.get_tail_cut("sc", "st")
    e = _write(cluster, 240, 30)

    whole = bc.segment_ranges("sc", "st")
    assert len(whole) == 5  # epoch 0: two, the split: two more, the merge: one
    assert Counter(_read_all(bc, whole)) == Counter(a + b + c + d + e)
    assert sum(r.length for r in whole) == sum(
        cluster.segments.get_info(r.segment).result(10).length for r in whole
    )
    between = bc.segment_ranges("sc", "st", start, end)
    assert Counter(_read_all(bc, between)) == Counter(b + c + d)
    assert Counter(_read_all(bc, bc.segment_ranges("sc", "st", None, start))) == Counter(a)
    assert Counter(_read_all(bc, bc.segment_ranges("sc", "st", end, None))) == Counter(e)
    assert Counter(_read_all(bc, bc.segment_ranges("sc", "st", end, pr.StreamCut.UNBOUNDED))) == (
        Counter(e)
    )
    # From ``end`` on: only its own segment (every earlier one is wholly before it).
    after_end = bc.segment_ranges("sc", "st", end)
    assert [r.segment_id for r in after_end] == list(end.positions)
    # A range is a frozen, picklable value.
    rng = between[0]
    assert pickle.loads(pickle.dumps(rng)) == rng
    assert rng.segment.startswith("sc/st/") and rng.length == rng.end_offset - rng.start_offset
    with pytest.raises(AttributeError):
        rng.start_offset = 0  # type: ignore[misc]


def test_bad_cuts_and_ranges_are_typed_errors(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    mgr.create_stream("sc", "other", pr.StreamConfiguration())
    bc = cluster.batch_client()
    _write(cluster, 0, 10)
    head, tail = mgr.get_head_cut("sc", "st"), mgr.get_tail_cut("sc", "st")
    with pytest.raises(pr.InvalidArgumentError):
        bc.segment_ranges("sc", "st", tail, head)  # end behind start
    with pytest.raises(pr.InvalidArgumentError):
        bc.segment_ranges("sc", "st", mgr.get_head_cut("sc", "other"))
    with pytest.raises(pr.InvalidArgumentError):
        bc.segment_ranges("sc", "st", {0: 0})  # type: ignore[arg-type]
    with pytest.raises(pr.StreamNotFoundError):
        bc.segment_ranges("sc", "nope")
    for bad in ((-1, 0), (0, -1), (5, 4), (True, 3)):
        with pytest.raises(pr.InvalidArgumentError):
            pr.SegmentReadRange("sc", "st", 0, *bad)  # type: ignore[arg-type]
    with pytest.raises(pr.InvalidArgumentError):
        list(bc.read_segment("sc/st/0"))  # type: ignore[arg-type]
    (rng,) = bc.segment_ranges("sc", "st")
    not_at_boundary = pr.SegmentReadRange("sc", "st", rng.segment_id, 0, rng.end_offset - 1)
    with pytest.raises(pr.DataCorruptionError):
        list(bc.read_segment(not_at_boundary))
    past = pr.SegmentReadRange("sc", "st", rng.segment_id, 0, rng.end_offset + 100)
    with pytest.raises(pr.DataCorruptionError):
        list(bc.read_segment(past))
    assert mgr.truncate_stream("sc", "st", tail)
    with pytest.raises(pr.SegmentTruncatedError):
        list(bc.read_segment(rng))  # a range from before the truncation
    assert bc.segment_ranges("sc", "st")[0].length == 0


def test_a_large_event_comes_out_whole(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    big = bytes(range(256)) * ((MAX_EVENT_SIZE_BYTES + 1024) // 256)
    with cluster.create_writer("sc", "st") as writer:
        writer.write_event(b"small-1", routing_key="k")
        writer.flush()
        time.sleep(0.03)
        t = int(time.time() * 1000)
        time.sleep(0.02)
        writer.write_event(big, routing_key="k")
        writer.write_event(b"small-2", routing_key="k")
        writer.flush()
    bc = cluster.batch_client()
    got = _read_all(bc, bc.segment_ranges("sc", "st"))
    assert len(got) == 3 and got[0] == b"small-1" and got[1] == big and got[2] == b"small-2"
    # The merge that appended the large event is in the time index: a cut at t is at it.
    cut = mgr.get_segments_at_time("sc", "st", t)
    assert list(cut.positions.values()) == [8 + len(b"small-1")]
    assert _read_all(bc, bc.segment_ranges("sc", "st", cut)) == [big, b"small-2"]
    assert mgr.get_segments_at_time("sc", "st", 0) == mgr.get_head_cut("sc", "st")
