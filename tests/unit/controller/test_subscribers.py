"""Subscriber calls (consumption-based retention's input), through the client on an
in-process cluster, and the exact cut order they rely on."""

from __future__ import annotations

import time

import pytest

import pravega_ray as pr
from pravega_ray.client.controller_connection import ControllerClient
from pravega_ray.client.event_framing import frame_events
from pravega_ray.contracts.cut_order import covers_key_space, cut_le, lower_bound
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import segment_id

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=2)
    yield c
    c.shutdown()


def _client(cluster: InProcessCluster) -> ControllerClient:
    """The cluster's controller client (the calls a reader group makes)."""
    return cluster._controller  # type: ignore[return-value]


def _stream(cluster: InProcessCluster, name: str, segments: int = 2) -> list[pr.SegmentRange]:
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    assert mgr.create_stream("sc", name, pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))
    infos = list(mgr.get_stream_info("sc", name).segments)
    for s in infos:
        # Ten framed events of 10 bytes each: cuts are at multiples of 10.
        cluster.segments.append_conditional(s.name, frame_events([b"xy"] * 10)).result(10)
    return infos


def test_add_update_list_delete_with_generations(cluster) -> None:  # type: ignore[no-untyped-def]
    s0, s1 = _stream(cluster, "gen")
    c = _client(cluster)
    assert c.list_subscribers("sc", "gen") == []
    assert c.add_subscriber("sc", "gen", "sc/rg1", 0)
    assert not c.add_subscriber("sc", "gen", "sc/rg1", 0)  # there already (a repeat)
    assert c.add_subscriber("sc", "gen", "other/rg2", 3)
    assert c.list_subscribers("sc", "gen") == ["other/rg2", "sc/rg1"]
    cut = pr.StreamCut("sc", "gen", {s0.segment_id: 10, s1.segment_id: 20})
    assert c.update_subscriber_stream_cut("sc", "gen", "sc/rg1", 0, cut)
    assert c.update_subscriber_stream_cut("sc", "gen", "sc/rg1", 0, cut)  # same cut: fine
    # A lower generation is refused (False), nothing changed; a higher one moves it on.
    assert not c.add_subscriber("sc", "gen", "other/rg2", 2)
    assert not c.update_subscriber_stream_cut("sc", "gen", "other/rg2", 2, cut)
    assert not c.delete_subscriber("sc", "gen", "other/rg2", 2)
    assert c.add_subscriber("sc", "gen", "sc/rg1", 1)
    assert not c.update_subscriber_stream_cut("sc", "gen", "sc/rg1", 0, cut)
    ahead = pr.StreamCut("sc", "gen", {s0.segment_id: 50, s1.segment_id: 20})
    assert c.update_subscriber_stream_cut("sc", "gen", "sc/rg1", 2, ahead)
    assert cluster.core._store.streams.versioned("subscribers", "sc", "gen")[0] == {
        "subscribers": {
            "other/rg2": {"generation": 3, "cut": None},
            "sc/rg1": {"generation": 2, "cut": {str(s0.segment_id): 50, str(s1.segment_id): 20}},
        }
    }
    # Unknown subscribers: False.
    assert not c.update_subscriber_stream_cut("sc", "gen", "sc/nobody", 0, cut)
    assert not c.delete_subscriber("sc", "gen", "sc/nobody", 0)
    assert c.delete_subscriber("sc", "gen", "other/rg2", 3)
    assert not c.delete_subscriber("sc", "gen", "other/rg2", 3)  # a repeat
    assert c.list_subscribers("sc", "gen") == ["sc/rg1"]


def test_bad_input_is_a_typed_error_and_changes_nothing(cluster) -> None:  # type: ignore[no-untyped-def]
    s0, s1 = _stream(cluster, "bad")
    c = _client(cluster)
    assert c.add_subscriber("sc", "bad", "sc/rg", 0)
    good = pr.StreamCut("sc", "bad", {s0.segment_id: 40, s1.segment_id: 40})
    assert c.update_subscriber_stream_cut("sc", "bad", "sc/rg", 0, good)
    before = cluster.core._store.streams.versioned("subscribers", "sc", "bad")[0]
    for generation in (-1, 1.5, True, "1", None):
        with pytest.raises(pr.InvalidArgumentError):
            c.add_subscriber("sc", "bad", "sc/rg", generation)  # type: ignore[arg-type]
    for name in ("rg", "a/b/c", "", "sc/_x", 7):
        with pytest.raises(pr.InvalidArgumentError):
            c.add_subscriber("sc", "bad", name, 0)  # type: ignore[arg-type]
    for cut in (
        pr.StreamCut("sc", "other", good.positions),  # another stream's
        pr.StreamCut.UNBOUNDED,
        pr.StreamCut("sc", "bad", {s0.segment_id: 40}),  # does not cover [0, 1)
        pr.StreamCut("sc", "bad", {s0.segment_id: 40, s1.segment_id: 101}),  # past the end
        pr.StreamCut("sc", "bad", {s0.segment_id: 40, segment_id(5, 1): 0}),  # not its segment
        pr.StreamCut("sc", "bad", {s0.segment_id: 30, s1.segment_id: 60}),  # behind, at s0
        pr.StreamCut("sc", "bad", {s0.segment_id: 45, s1.segment_id: 60}),  # mid-event
        {s0.segment_id: 40, s1.segment_id: 40},  # not a StreamCut
    ):
        with pytest.raises(pr.InvalidArgumentError):
            c.update_subscriber_stream_cut("sc", "bad", "sc/rg", 0, cut)  # type: ignore[arg-type]
    assert cluster.core._store.streams.versioned("subscribers", "sc", "bad")[0] == before
    with pytest.raises(pr.StreamNotFoundError):
        c.add_subscriber("sc", "missing", "sc/rg", 0)
    with pytest.raises(pr.StreamNotFoundError):
        c.list_subscribers("sc", "missing")


def test_a_cut_after_a_scale_is_ahead_of_one_before_it(cluster) -> None:  # type: ignore[no-untyped-def]
    s0, s1 = _stream(cluster, "scaled")
    mgr = cluster.stream_manager()
    c = _client(cluster)
    assert mgr.scale_stream("sc", "scaled", [s0.segment_id], [(0.0, 0.5)])
    new = mgr.get_stream_info("sc", "scaled").segments[0]
    assert c.add_subscriber("sc", "scaled", "sc/rg", 0)
    old = pr.StreamCut("sc", "scaled", {s0.segment_id: 100, s1.segment_id: 30})
    assert c.update_subscriber_stream_cut("sc", "scaled", "sc/rg", 0, old)
    later = pr.StreamCut("sc", "scaled", {new.segment_id: 0, s1.segment_id: 30})
    assert c.update_subscriber_stream_cut("sc", "scaled", "sc/rg", 0, later)
    with pytest.raises(pr.InvalidArgumentError):  # back to the sealed segment: behind
        c.update_subscriber_stream_cut("sc", "scaled", "sc/rg", 0, old)


def test_deleting_a_stream_deletes_its_subscribers(cluster) -> None:  # type: ignore[no-untyped-def]
    _stream(cluster, "gone")
    mgr = cluster.stream_manager()
    c = _client(cluster)
    assert c.add_subscriber("sc", "gone", "sc/rg", 0)
    assert mgr.seal_stream("sc", "gone")
    assert mgr.delete_stream("sc", "gone")
    deadline = time.monotonic() + 20
    while "gone" in mgr.list_streams("sc"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert cluster.core._store.streams.versioned("subscribers", "sc", "gone") == (None, None)
    _stream(cluster, "gone")  # re-created under the name: no subscribers inherited
    assert c.list_subscribers("sc", "gone") == []


# --- the exact cut order and the lower bound (pure) -----------------------------------------------
A, B = segment_id(0, 0), segment_id(0, 1)  # [0, .5), [.5, 1)
C = segment_id(1, 2)  # [0, 1): A and B merged
D, E = segment_id(2, 3), segment_id(2, 4)  # C split again
RANGES = {A: (0.0, 0.5), B: (0.5, 1.0), C: (0.0, 1.0), D: (0.0, 0.5), E: (0.5, 1.0)}
ROWS = {0: [A, B], 1: [C], 2: [D, E]}


def test_cut_order_is_exact_across_epochs() -> None:
    assert cut_le({A: 5, B: 5}, {A: 5, B: 6}, RANGES)
    assert not cut_le({A: 6, B: 5}, {A: 5, B: 6}, RANGES)
    assert cut_le({A: 900, B: 900}, {C: 0}, RANGES)
    assert not cut_le({C: 0}, {A: 900, B: 900}, RANGES)
    assert cut_le({C: 7}, {D: 0, E: 0}, RANGES)
    assert covers_key_space([A, B], RANGES) and not covers_key_space([A, C], RANGES)


def test_lower_bound_is_per_key_range_the_earliest_position() -> None:
    rows = ROWS.__getitem__
    assert lower_bound([{A: 5, B: 9}, {A: 7, B: 3}], RANGES, rows) == {A: 5, B: 3}
    assert lower_bound([{C: 4}, {A: 5, B: 9}], RANGES, rows) == {A: 5, B: 9}
    assert lower_bound([{D: 1, E: 2}, {C: 4}, {D: 0, E: 9}], RANGES, rows) == {C: 4}
    # Interleaved across epochs (A of epoch 0 with E of epoch 2 is not a real cut, but
    # the fallback must still be nowhere ahead of any input): the earliest epoch's row.
    bound = lower_bound([{A: 5, B: 7}, {C: 1}, {A: 2, E: 3}], RANGES, rows)
    assert bound == {A: 2, B: 7}
    for cut in ({A: 5, B: 7}, {C: 1}):
        assert cut_le(bound, cut, RANGES)
    with pytest.raises(ValueError):
        lower_bound([], RANGES, rows)
