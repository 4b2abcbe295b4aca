"""Readers and reader groups across epochs, on an in-process cluster.

A stream is written with keyed events and scaled (splits and merges) between batches; each
batch is written by a fresh writer made after the scale (a writer made after a scale
writes to the new epoch), and the group reads while the stream scales. Every event must be
read exactly once and in write order per routing key: a successor is never handed out
before all its predecessors were read to their ends.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.reader_group_synchronizer import ReaderGroupSynchronizer
from pravega_ray.constants import READER_GROUP_SYNC_INTERVAL_S
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.wire.routing import pravega_key_hash
from tests.checks import assert_exactly_once_in_key_order, read_with_threads

pytestmark = pytest.mark.timeout(120)

KEYS = 24


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=3, storage_flush_interval_s=0.05)
    yield c
    c.shutdown()


def _write_batch(
    cluster: InProcessCluster, start: int, count: int, keys: list[str] | None = None
) -> int:
    """Events ``start .. start+count-1`` with a writer made now; the next number."""
    keys = keys or [f"k{i}" for i in range(KEYS)]
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        for n in range(start, start + count):
            key = keys[n % len(keys)]
            writer.write_event({"k": key, "n": n}, routing_key=key)
        writer.flush()
    return start + count


def _scale_once(mgr: pr.StreamManager, rng: random.Random) -> None:
    """Split a random segment in two, or merge two random neighbours (never below 1)."""
    segments = sorted(mgr.get_stream_info("sc", "st").segments, key=lambda s: s.key_low)
    if len(segments) >= 2 and rng.random() < 0.45:
        i = rng.randrange(len(segments) - 1)
        a, b = segments[i], segments[i + 1]
        assert mgr.scale_stream("sc", "st", [a.segment_id, b.segment_id], [(a.key_low, b.key_high)])
    else:
        s = rng.choice(segments)
        middle = (s.key_low + s.key_high) / 2
        assert mgr.scale_stream(
            "sc", "st", [s.segment_id], [(s.key_low, middle), (middle, s.key_high)]
        )


def _read_some(readers: list[Any], count: int, got: list[Any]) -> None:
    """Read at least ``count`` more events (one thread per reader) into ``got``."""
    more = read_with_threads(readers, count, timeout_s=30)
    assert len(more) >= count
    got += more


def _read_in_turn(readers: list[Any], got: list[Any]) -> None:
    """One event from the first reader, in turn, that has one (this thread)."""
    for _ in range(100):
        for reader in readers:
            event = reader.read_next_event(0.05)
            if event is not None:
                got.append(event)
                return
    raise AssertionError("no reader had an event")


def _group(cluster: InProcessCluster, readers: int) -> list[Any]:
    assert cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    return [cluster.create_reader(f"r{i}", "sc", "rg", pr.JsonSerializer()) for i in range(readers)]


def _state(cluster: InProcessCluster) -> dict[str, Any]:
    """The group's live state, read from its state segment."""
    state, _ = ReaderGroupSynchronizer("sc", "rg", cluster.core, cluster.segments).fetch()
    return state.to_dict()


def _stream(cluster: InProcessCluster, segments: int = 2) -> pr.StreamManager:
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    assert mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))
    return mgr


@pytest.mark.parametrize("readers", [1, 3])
@pytest.mark.parametrize("scales", [1, 3, 10])
def test_group_reads_every_event_once_in_key_order_across_scales(cluster, scales, readers) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster)
    rng = random.Random(scales * 10 + readers)
    group = _group(cluster, readers)
    got: list[Any] = []
    n = _write_batch(cluster, 0, 300)
    for _ in range(scales):
        _read_some(group, rng.randrange(50, 250), got)  # readers stand mid-segment
        _scale_once(mgr, rng)
        n = _write_batch(cluster, n, 300)
    got += read_with_threads(group, n - len(got), timeout_s=60)
    assert_exactly_once_in_key_order(got, n)
    assert all(r.read_next_event(0.05) is None for r in group)
    state = _state(cluster)
    assert state["future"] == {}
    current = {s.name for s in mgr.get_stream_info("sc", "st").segments}
    held = set(state["unassigned"]) | {s for o in state["assigned"].values() for s in o}
    assert held == current  # every sealed segment completed, each current one handed out
    assert state["completed"] == []  # and forgotten: the state holds the live segments only
    for reader in group:
        reader.close()


def test_a_merge_successor_waits_for_both_predecessors(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    a, b = mgr.get_stream_info("sc", "st").segments
    (reader,) = _group(cluster, 1)
    keys = [f"k{i}" for i in range(KEYS)]
    # A new stream routes by Pravega's rule: a segment owns (low, high].
    low = [k for k in keys if pravega_key_hash(k) <= a.key_high]
    high = [k for k in keys if pravega_key_hash(k) > a.key_high]
    n = _write_batch(cluster, 0, 5, high)  # b is short: usually read to its end first
    n = _write_batch(cluster, n, 300, low)
    assert mgr.scale_stream("sc", "st", [a.segment_id, b.segment_id], [(0.0, 1.0)])
    merged = mgr.get_stream_info("sc", "st").segments[0].name
    n = _write_batch(cluster, n, 100)
    got: list[Any] = []
    # Read only until one predecessor is done: the successor is a future segment, not
    # handed out, while the other one is unfinished.
    while True:
        event = reader.read_next_event(1.0)
        assert event is not None
        got.append(event)
        state = _state(cluster)
        if state["completed"]:
            break
    # Usually the short b; a first if b's seal reached its reader late: either way one.
    assert len(state["completed"]) == 1 and state["completed"][0] in (a.name, b.name)
    assert state["future"] == {merged: sorted([a.name, b.name])}
    assert all(e.segment != merged for e in got)
    got += read_with_threads([reader], n - len(got), timeout_s=30)
    assert_exactly_once_in_key_order(got, n)
    first_of_merged = next(i for i, e in enumerate(got) if e.segment == merged)
    assert {e.segment for e in got[:first_of_merged]} == {a.name, b.name}
    assert all(e.segment == merged for e in got[first_of_merged:])
    assert _state(cluster)["completed"] == []  # no segment waits for them any more
    reader.close()


def test_reader_declared_offline_while_holding_a_predecessor_loses_nothing(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    rng = random.Random(7)
    r0, r1 = _group(cluster, 2)
    n = _write_batch(cluster, 0, 400)
    got: list[Any] = []
    # r0 reads first (r1's thread alone could read all 60 on a loaded machine), so r0 has
    # read part of a segment it holds when the scales seal it.
    while not got:
        event = r0.read_next_event(1.0)
        if event is not None:
            got.append(event)
    _read_some([r0, r1], 60, got)
    _scale_once(mgr, rng)  # every segment r0 holds is now a sealed predecessor
    n = _write_batch(cluster, n, 400)
    _scale_once(mgr, rng)
    n = _write_batch(cluster, n, 400)
    held = r0.position().to_dict()
    current = {s.name for s in mgr.get_stream_info("sc", "st").segments}
    assert held and not set(held) & current, "r0 holds sealed predecessors only"
    assert any(e.segment in held for e in got), "r0 has read part of one"
    # r0 dies; the application saved the position of the last event it finished with.
    assert cluster.reader_group("sc", "rg").reader_offline("r0", r0.position())
    state = _state(cluster)
    assert "r0" not in state["assigned"]
    got += read_with_threads([r1], n - len(got), timeout_s=60)
    assert_exactly_once_in_key_order(got, n)
    # r0 learns it is offline at its next sync, at most READER_GROUP_SYNC_INTERVAL_S after
    # the last (until then it may return what it had buffered: reader.py's docstring).
    time.sleep(READER_GROUP_SYNC_INTERVAL_S)
    with pytest.raises(pr.ReaderNotInGroupError):
        r0.read_next_event(0.01)
    r1.close()


def test_future_segments_survive_the_reader_leaving(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    a, b = mgr.get_stream_info("sc", "st").segments
    r0, r1 = _group(cluster, 2)
    keys = [f"k{i}" for i in range(KEYS)]
    n = _write_batch(cluster, 0, 5, [k for k in keys if pravega_key_hash(k) > a.key_high])
    n = _write_batch(cluster, n, 300, [k for k in keys if pravega_key_hash(k) <= a.key_high])
    assert mgr.scale_stream("sc", "st", [a.segment_id, b.segment_id], [(0.0, 1.0)])
    n = _write_batch(cluster, n, 200)
    got: list[Any] = []
    while not _state(cluster)["future"]:
        _read_in_turn([r0, r1], got)
    # One predecessor is done, the other one is held: the reader holding it goes away.
    holder = next(r for r in (r0, r1) if r.position().to_dict())
    other = r1 if holder is r0 else r0
    assert cluster.reader_group("sc", "rg").reader_offline(holder.reader_id, holder.position())
    assert _state(cluster)["future"]
    got += read_with_threads([other], n - len(got), timeout_s=30)
    assert_exactly_once_in_key_order(got, n)
    other.close()


def test_group_state_reloads_after_a_restart_mid_scale(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    rng = random.Random(3)
    group = _group(cluster, 2)
    got: list[Any] = []
    n = _write_batch(cluster, 0, 300)
    for _ in range(3):
        _read_some(group, 120, got)
        _scale_once(mgr, rng)
        n = _write_batch(cluster, n, 300)
    before = _state(cluster)
    cluster.restart()  # the controller (and every container) recovers from storage
    after = _state(cluster)
    assert after["future"] == before["future"] and after["completed"] == before["completed"]
    assert after["assigned"].keys() == before["assigned"].keys()
    _scale_once(mgr, rng)
    n = _write_batch(cluster, n, 300)
    got += read_with_threads(group, n - len(got), timeout_s=60)
    assert_exactly_once_in_key_order(got, n)
    for reader in group:
        reader.close()


def test_completed_segments_of_a_sealed_stream_have_no_successors(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    (reader,) = _group(cluster, 1)
    n = _write_batch(cluster, 0, 50)
    assert mgr.seal_stream("sc", "st")
    got = read_with_threads([reader], n, timeout_s=30)
    assert_exactly_once_in_key_order(got, n)
    assert reader.read_next_event(0.3) is None
    state = _state(cluster)
    assert len(state["completed"]) == 2 and state["future"] == {} and state["unassigned"] == {}
    reader.close()
