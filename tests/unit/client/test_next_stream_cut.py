"""BatchClient.next_stream_cut (the micro-batch source's sizing) on an in-process cluster."""

from __future__ import annotations

from collections import Counter

import pytest

import pravega_ray as pr
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.inprocess import InProcessCluster
from tests.containers import QUIET

pytestmark = pytest.mark.timeout(120)
FRAME_HEADER_BYTES = 8


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=2, **QUIET)
    yield c
    c.shutdown()


def _stream(cluster: InProcessCluster, segments: int) -> pr.StreamManager:
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))
    return mgr


def _write(cluster: InProcessCluster, first: int, count: int, size: int = 100) -> list[bytes]:
    events = [f"{i:08d}".encode().ljust(size, b".") for i in range(first, first + count)]
    with cluster.create_writer("sc", "st") as writer:
        for i, event in enumerate(events):
            writer.write_event(event, routing_key=f"k{(first + i) % 11}")
        writer.flush()
    return events


def _between(cluster: InProcessCluster, start: pr.StreamCut, end: pr.StreamCut) -> list[bytes]:
    bc = cluster.batch_client()
    return [e for r in bc.segment_ranges("sc", "st", start, end) for e in bc.read_segment(r)]


def _bytes_between(cluster: InProcessCluster, start: pr.StreamCut, end: pr.StreamCut) -> int:
    return sum(r.length for r in cluster.batch_client().segment_ranges("sc", "st", start, end))


def test_next_stream_cut_covers_about_the_bytes_asked(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 3)
    events = _write(cluster, 0, 300)  # 300 frames of 108 bytes
    bc = cluster.batch_client()
    cut = mgr.get_head_cut("sc", "st")
    seen: list[bytes] = []
    budget = 2000
    while True:
        nxt = bc.next_stream_cut(cut, budget)
        covered = _bytes_between(cluster, cut, nxt)
        if covered == 0:
            break
        remaining = _bytes_between(cluster, cut, mgr.get_tail_cut("sc", "st"))
        # At least the budget (or all that is left), at most one more event per segment.
        assert min(budget, remaining) <= covered <= budget + 3 * (100 + FRAME_HEADER_BYTES)
        for sid, offset in nxt.positions.items():  # every end is an event boundary
            cluster.segments.check_event_boundary(f"sc/st/{sid}.#epoch.0", offset).result(10)
        seen += _between(cluster, cut, nxt)
        cut = nxt
    assert Counter(seen) == Counter(events)
    assert cut == mgr.get_tail_cut("sc", "st")


def test_next_stream_cut_crosses_a_split_and_a_merge(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    bc = cluster.batch_client()
    events = _write(cluster, 0, 50)
    _, s1 = mgr.get_stream_info("sc", "st").segments
    assert mgr.scale_stream("sc", "st", [s1.segment_id], [(0.5, 0.75), (0.75, 1.0)])
    events += _write(cluster, 50, 50)
    segments = mgr.get_stream_info("sc", "st").segments
    assert mgr.scale_stream("sc", "st", [s.segment_id for s in segments], [(0.0, 1.0)])
    events += _write(cluster, 100, 50)

    cut = mgr.get_head_cut("sc", "st")
    seen: list[bytes] = []
    for _ in range(200):
        nxt = bc.next_stream_cut(cut, 1500)
        chunk = _between(cluster, cut, nxt)
        if not chunk:
            break
        seen += chunk
        cut = nxt
    assert Counter(seen) == Counter(events)
    # The last cut is in the merged segment, at its end: the tail.
    assert cut == mgr.get_tail_cut("sc", "st")


def test_next_stream_cut_with_a_tiny_budget_still_moves(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 1)
    events = _write(cluster, 0, 5)
    bc = cluster.batch_client()
    head = mgr.get_head_cut("sc", "st")
    one = bc.next_stream_cut(head, 1)
    assert _between(cluster, head, one) == events[:1]
    assert bc.next_stream_cut(mgr.get_tail_cut("sc", "st"), 10) == mgr.get_tail_cut("sc", "st")


@pytest.mark.parametrize("bad", [0, -1, 1.5, float("nan"), True, "10", None])
def test_next_stream_cut_rejects_a_bad_size(cluster, bad: object) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 1)
    with pytest.raises(InvalidArgumentError):
        cluster.batch_client().next_stream_cut(mgr.get_head_cut("sc", "st"), bad)  # type: ignore[arg-type]


def test_next_stream_cut_rejects_an_unbounded_or_foreign_start(cluster) -> None:  # type: ignore[no-untyped-def]
    _stream(cluster, 1)
    bc = cluster.batch_client()
    for bad in (pr.StreamCut.UNBOUNDED, None, "cut"):
        with pytest.raises(InvalidArgumentError):
            bc.next_stream_cut(bad, 10)  # type: ignore[arg-type]
