"""The retention cycle (controller/retention_service.py) on an in-process cluster: tail cuts
into the retention set, truncation requests through the request event processor, the
subscribers' lower bound, and cycles or processors killed between steps."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

import pravega_ray as pr
from pravega_ray.client.event_framing import frame_events
from pravega_ray.controller.retention import Case, RetentionRecord, encoded_bytes
from pravega_ray.controller.retention_service import RetentionService
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.timing import ManualClock

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=2)
    yield c
    c.shutdown()


def clock_from_now() -> ManualClock:
    """A manual clock whose wall time starts now (stream records carry real creation times)."""
    return ManualClock(wall_start_ms=int(time.time() * 1000))


def _stream(
    cluster: InProcessCluster,
    policy: pr.RetentionPolicy | None,
    name: str = "st",
    segments: int = 1,
) -> list[pr.SegmentRange]:
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments), policy)
    assert mgr.create_stream("sc", name, config)
    return list(mgr.get_stream_info("sc", name).segments)


def _append(cluster: InProcessCluster, segment: pr.SegmentRange, n: int) -> None:
    """``n`` bytes of framed events, 10 bytes each (multiples of 10 are event boundaries)."""
    assert n % 10 == 0
    cluster.segments.append_conditional(segment.name, frame_events([b"xy"] * (n // 10))).result(10)


def _wait(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _head(cluster: InProcessCluster, name: str = "st") -> int:
    _wait(lambda: cluster.core.check_truncate("sc", name))
    segment = cluster.core.get_current_segments("sc", name)[0]
    return cluster.segments.get_info(segment.name).result(10).start_offset


def _grow(
    cluster: InProcessCluster, service, clock: ManualClock, s: pr.SegmentRange, sizes
) -> list:  # type: ignore[no-untyped-def]
    """Append 10 bytes per step and run a cycle after each (10 ms apart), each time waiting
    for the truncation it requested; the results."""
    out = []
    for _ in range(sizes):
        _append(cluster, s, 10)
        clock.advance(0.010)
        out.append(service.run("sc", "st"))
        _wait(lambda: cluster.core.check_truncate("sc", "st"))
    return out


def test_size_policy_truncates_just_above_min_and_keeps_under_max(cluster) -> None:  # type: ignore[no-untyped-def]
    (s,) = _stream(cluster, pr.RetentionPolicy.by_size(20, 100))
    clock = clock_from_now()
    service = cluster.retention_service(clock)
    results = _grow(cluster, service, clock, s, 3)  # 10, 20, 30 bytes
    assert [r.requested for r in results] == [False, False, True]
    assert results[1].choice.case is Case.BELOW_MIN
    assert results[2].choice.case is Case.BETWEEN
    assert dict(results[2].choice.cut) == {s.segment_id: 10}  # keeps 20
    assert _head(cluster) == 10
    stored = cluster.core._store.streams.versioned("retention", "sc", "st")[0]
    assert [r["size"] for r in stored["records"]] == [20, 30]  # the cut used is purged
    # Many cycles later the stream still holds between 20 and 100 bytes.
    _grow(cluster, service, clock, s, 20)
    head = _head(cluster)
    assert 20 <= 230 - head <= 100


def test_a_burst_above_max_is_cut_back_under_max(cluster) -> None:  # type: ignore[no-untyped-def]
    (s,) = _stream(cluster, pr.RetentionPolicy.by_size(20, 100))
    clock = clock_from_now()
    service = cluster.retention_service(clock)
    _append(cluster, s, 150)  # a burst: the set has cuts at 50 and 100 only
    clock.advance(0.010)
    records = [
        RetentionRecord(clock.wall_time_ms() - 100 + 10 * i, 10 * i, {s.segment_id: 10 * i})
        for i in (5, 10)
    ]
    cluster.core._store.streams.put_versioned(
        "retention", "sc", "st", {"records": [r.to_dict() for r in records], "head": None}, None
    )
    result = service.run("sc", "st")  # 150 > max: the cut keeping <= 100 and >= 20
    assert (result.choice.case, dict(result.choice.cut)) == (Case.ABOVE_MAX, {s.segment_id: 50})
    assert _head(cluster) == 50


def test_time_policy_with_a_manual_clock(cluster) -> None:  # type: ignore[no-untyped-def]
    (s,) = _stream(cluster, pr.RetentionPolicy.by_time(20, 0))
    clock = clock_from_now()
    service = cluster.retention_service(clock)
    results = _grow(cluster, service, clock, s, 4)
    # The third cycle finds the first cut (10 bytes) 20 ms old, the fourth the second one.
    assert [r.requested for r in results] == [False, False, True, True]
    assert _head(cluster) == 20


def test_no_policy_means_no_retention_even_with_subscribers(cluster) -> None:  # type: ignore[no-untyped-def]
    (s,) = _stream(cluster, None)
    _append(cluster, s, 500)
    cluster.core.add_subscriber("sc", "st", "sc/rg", 0)
    cut = pr.StreamCut("sc", "st", {s.segment_id: 400})
    cluster.core.update_subscriber_stream_cut("sc", "st", "sc/rg", 0, cut)
    (result,) = cluster.run_retention()
    assert (result.choice, result.why) == (None, "no retention policy")
    assert cluster.core._store.streams.versioned("retention", "sc", "st") == (None, None)


def test_subscribers_hold_truncation_back_to_their_lower_bound(cluster) -> None:  # type: ignore[no-untyped-def]
    a, b = _stream(cluster, pr.RetentionPolicy.by_size(20, 1000), segments=2)
    core = cluster.core
    for group in ("sc/rg1", "sc/rg2"):
        assert core.add_subscriber("sc", "st", group, 0)
    _append(cluster, a, 100)
    _append(cluster, b, 100)
    core.update_subscriber_stream_cut(
        "sc", "st", "sc/rg1", 0, pr.StreamCut("sc", "st", {a.segment_id: 60, b.segment_id: 30})
    )
    core.update_subscriber_stream_cut(
        "sc", "st", "sc/rg2", 0, pr.StreamCut("sc", "st", {a.segment_id: 40, b.segment_id: 90})
    )
    clock = clock_from_now()
    result = cluster.retention_service(clock).run("sc", "st")
    assert result.choice.case is Case.CBR_WITHIN
    assert dict(result.choice.cut) == {a.segment_id: 40, b.segment_id: 30}
    _wait(lambda: core.check_truncate("sc", "st"))
    assert cluster.segments.get_info(a.name).result(10).start_offset == 40
    assert cluster.segments.get_info(b.name).result(10).start_offset == 30
    # Again with nothing new: nothing truncated twice.
    clock.advance(0.010)
    again = cluster.retention_service(clock).run("sc", "st")
    assert not again.requested


def test_subscribers_without_a_cut_leave_the_size_policy_in_charge(cluster) -> None:  # type: ignore[no-untyped-def]
    (s,) = _stream(cluster, pr.RetentionPolicy.by_size(20, 0))
    cluster.core.add_subscriber("sc", "st", "sc/rg", 0)
    clock = clock_from_now()
    results = _grow(cluster, cluster.retention_service(clock), clock, s, 3)
    assert results[-1].choice.case is Case.ABOVE_MIN


def test_a_pending_truncation_skips_the_cycle(cluster) -> None:  # type: ignore[no-untyped-def]
    (s,) = _stream(cluster, pr.RetentionPolicy.by_size(20, 0))
    _append(cluster, s, 100)  # a user's cut must be at an event boundary
    cluster.processor.stop()  # requests wait: the truncation stays pending
    cluster.core.truncate_stream("sc", "st", pr.StreamCut("sc", "st", {s.segment_id: 10}))
    (result,) = cluster.run_retention()
    assert result.why == "a truncation is under way"
    cluster.restart_processor()
    assert _head(cluster) == 10


def _die_once_after(step: str, killed: list[str]) -> Callable[[str], None]:
    def die(name: str) -> None:
        if name == step and not killed:
            killed.append(name)
            raise SystemExit(f"killed after {name!r}")

    return die


@pytest.mark.parametrize("step", ["tail added", "request posted", "truncation requested"])
def test_a_cycle_killed_at_any_step_never_truncates_twice(cluster, step: str) -> None:  # type: ignore[no-untyped-def]
    (s,) = _stream(cluster, pr.RetentionPolicy.by_size(20, 0))
    clock = clock_from_now()
    _grow(cluster, cluster.retention_service(clock), clock, s, 1)  # one record: 10
    _append(cluster, s, 30)  # 40
    clock.advance(0.010)
    killed: list[str] = []
    with pytest.raises(SystemExit):
        cluster.retention_service(clock, step=_die_once_after(step, killed)).run("sc", "st")
    first = _head(cluster)
    again = cluster.retention_service(clock).run("sc", "st")
    assert _head(cluster) == 10 and first in (0, 10)
    assert again.requested == (step in ("tail added", "request posted"))
    stored = cluster.core._store.streams.versioned("retention", "sc", "st")[0]
    assert [r["size"] for r in stored["records"]] == [40]


@pytest.mark.parametrize("step", ["truncating", "segments deleted", "segments truncated"])
def test_processor_killed_mid_truncation_never_passes_a_subscriber(cluster, step: str) -> None:  # type: ignore[no-untyped-def]
    (s,) = _stream(cluster, pr.RetentionPolicy.by_size(0, 1000))
    core = cluster.core
    core.add_subscriber("sc", "st", "sc/rg", 0)
    _append(cluster, s, 100)
    core.update_subscriber_stream_cut(
        "sc", "st", "sc/rg", 0, pr.StreamCut("sc", "st", {s.segment_id: 30})
    )
    killed: list[str] = []
    cluster.restart_processor(step=_die_once_after(step, killed))
    clock = clock_from_now()
    assert cluster.retention_service(clock).run("sc", "st").requested
    _wait(lambda: bool(killed))
    cluster.restart_processor()
    assert _head(cluster) == 30
    for _ in range(3):  # more cycles while the subscriber stays put: no further truncation
        clock.advance(0.010)
        assert not cluster.retention_service(clock).run("sc", "st").requested
    assert _head(cluster) == 30
    assert core.get_stream_info("sc", "st").state is pr.StreamState.ACTIVE


def test_the_retention_set_is_bounded(cluster) -> None:  # type: ignore[no-untyped-def]
    (s,) = _stream(cluster, pr.RetentionPolicy.by_size(10_000, 0))
    clock = clock_from_now()
    service = RetentionService(cluster.metadata, cluster._segment_helper(), clock=clock, set_max=5)
    _grow(cluster, service, clock, s, 12)
    stored = cluster.core._store.streams.versioned("retention", "sc", "st")[0]
    sizes = [r["size"] for r in stored["records"]]
    assert len(sizes) == 5 and sizes[0] == 10 and sizes[-1] == 120


def test_the_retention_set_is_bounded_in_bytes(cluster) -> None:  # type: ignore[no-untyped-def]
    (s,) = _stream(cluster, pr.RetentionPolicy.by_size(10_000, 0))
    clock = clock_from_now()
    one = encoded_bytes(RetentionRecord(clock.wall_time_ms(), 100, {s.segment_id: 100}))
    service = RetentionService(
        cluster.metadata, cluster._segment_helper(), clock=clock, set_bytes_max=4 * one
    )
    _grow(cluster, service, clock, s, 12)
    stored = cluster.core._store.streams.versioned("retention", "sc", "st")[0]
    records = [RetentionRecord.from_dict(r) for r in stored["records"]]
    assert 2 <= len(records) <= 4 and sum(map(encoded_bytes, records)) <= 4 * one
    assert records[0].size == 10 and records[-1].size == 120  # still spanning the stream


def test_deleting_the_stream_deletes_its_retention_set(cluster) -> None:  # type: ignore[no-untyped-def]
    (s,) = _stream(cluster, pr.RetentionPolicy.by_size(20, 0))
    _append(cluster, s, 10)
    cluster.run_retention()
    mgr = cluster.stream_manager()
    assert mgr.seal_stream("sc", "st")
    assert mgr.delete_stream("sc", "st")
    _wait(lambda: "st" not in mgr.list_streams("sc"))
    assert cluster.core._store.streams.versioned("retention", "sc", "st") == (None, None)
