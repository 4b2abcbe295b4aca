"""Epochs and scaling, update, seal and delete through the request event processor,
on an in-process cluster (real containers on memory backends)."""

from __future__ import annotations

import itertools
import math
import time
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.event_framing import frame_events
from pravega_ray.controller.event_processor import RequestEventProcessor
from pravega_ray.controller.request_stream import REQUEST_SEGMENT, RequestStream
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import segment_id
from pravega_ray.timing import ManualClock, ManualThreadScheduler

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=3)
    yield c
    c.shutdown()


def _stream(cluster: InProcessCluster, segments: int = 2, name: str = "st") -> pr.StreamManager:
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments))
    assert mgr.create_stream("sc", name, config)
    return mgr


def _segments_on_containers(cluster: InProcessCluster) -> set[str]:
    out: set[str] = set()
    for i in range(cluster.container_count):
        out |= set(cluster.run(cluster.container(i).list_segments()).result(10))
    return {s for s in out if not s.startswith("_system/")}


def test_split_adds_an_epoch_with_successors_predecessors_and_history(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    before = int(time.time() * 1000)
    time.sleep(0.01)
    first = mgr.get_stream_info("sc", "st")
    assert first.epoch == 0
    s0, s1 = first.segments
    assert mgr.scale_stream("sc", "st", [s1.segment_id], [(0.5, 0.75), (0.75, 1.0)])
    info = mgr.get_stream_info("sc", "st")
    assert info.epoch == 1 and info.state is pr.StreamState.ACTIVE
    ids = [s.segment_id for s in info.segments]
    assert ids == [s0.segment_id, segment_id(1, 2), segment_id(1, 3)]
    assert [(s.key_low, s.key_high) for s in info.segments] == [(0, 0.5), (0.5, 0.75), (0.75, 1)]
    successors = mgr.get_successors("sc", "st", s1.segment_id)
    assert {(r.segment_id, tuple(p)) for r, p in successors.items()} == {
        (segment_id(1, 2), (s1.segment_id,)),
        (segment_id(1, 3), (s1.segment_id,)),
    }
    assert mgr.get_successors("sc", "st", s0.segment_id) == {}  # still active
    controller = cluster.core
    assert [p.segment_id for p in controller.get_predecessors("sc", "st", ids[1])] == [
        s1.segment_id
    ]
    assert controller.get_predecessors("sc", "st", s0.segment_id) == []
    # Segments at a time: binary search of the index table.
    assert mgr.get_segments_at_time("sc", "st", before).segment_ids == [
        s0.segment_id,
        s1.segment_id,
    ]
    assert mgr.get_segments_at_time("sc", "st", 0).segment_ids == [s0.segment_id, s1.segment_id]
    now = int(time.time() * 1000) + 1
    assert mgr.get_segments_at_time("sc", "st", now).segment_ids == ids
    # The old segment is sealed on its container, with its size recorded.
    sealed = cluster.segments.get_info(s1.name).result(10)
    assert sealed.sealed


def test_get_epoch_tells_each_epoch_s_time_and_segments(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    first = mgr.get_stream_info("sc", "st")
    time.sleep(0.01)
    assert mgr.scale_stream("sc", "st", [first.segments[1].segment_id], [(0.5, 0.75), (0.75, 1)])
    core = cluster.core
    zero, one = core.get_epoch("sc", "st", 0), core.get_epoch("sc", "st", 1)
    assert (zero.epoch, zero.created_ms, zero.segments) == (
        0,
        first.creation_time_ms,
        first.segments,
    )
    assert one.epoch == 1 and one.created_ms > zero.created_ms
    assert list(one.segments) == core.get_epoch_segments("sc", "st", 1)
    assert one.segments == mgr.get_stream_info("sc", "st").segments
    with pytest.raises(pr.StreamNotFoundError, match="no epoch 2"):
        core.get_epoch("sc", "st", 2)
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises(pr.InvalidArgumentError):
            core.get_epoch("sc", "st", bad)


def test_merge_gives_one_successor_with_both_predecessors(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 3)
    a, b, _c = mgr.get_stream_info("sc", "st").segments
    assert mgr.scale_stream("sc", "st", [a.segment_id, b.segment_id], [(a.key_low, b.key_high)])
    merged = mgr.get_stream_info("sc", "st").segments[0]
    for old in (a, b):
        successors = mgr.get_successors("sc", "st", old.segment_id)
        assert {r.segment_id: p for r, p in successors.items()} == {
            merged.segment_id: [a.segment_id, b.segment_id]
        }
    # And split again, across any number of epochs.
    for _ in range(3):
        info = mgr.get_stream_info("sc", "st")
        last = info.segments[-1]
        middle = (last.key_low + last.key_high) / 2
        assert mgr.scale_stream(
            "sc", "st", [last.segment_id], [(last.key_low, middle), (middle, last.key_high)]
        )
    info = mgr.get_stream_info("sc", "st")
    assert info.epoch == 4
    bounds = [(s.key_low, s.key_high) for s in info.segments]
    assert bounds[0][0] == 0 and bounds[-1][1] == 1
    assert all(x[1] == y[0] for x, y in itertools.pairwise(bounds))


@pytest.mark.parametrize(
    "ranges",
    [
        [(0.5, 0.7), (0.8, 1.0)],  # a gap
        [(0.5, 0.8), (0.7, 1.0)],  # an overlap
        [(0.5, 0.9)],  # short of the end
        [(0.4, 1.0)],  # more than the sealed range
    ],
)
def test_ranges_that_do_not_exactly_cover_are_refused_and_nothing_changes(cluster, ranges) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    s1 = mgr.get_stream_info("sc", "st").segments[1]
    before = _segments_on_containers(cluster)
    with pytest.raises(pr.ScaleConflictError):
        mgr.scale_stream("sc", "st", [s1.segment_id], ranges)
    assert mgr.get_stream_info("sc", "st").epoch == 0
    assert _segments_on_containers(cluster) == before
    assert mgr.scale_stream("sc", "st", [s1.segment_id], [(0.5, 1.0)])  # the property is gone


def test_bad_scale_input_is_a_typed_error(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    s0, _s1 = mgr.get_stream_info("sc", "st").segments
    for sealed, ranges, error in [
        ([], [(0, 0.5)], pr.InvalidArgumentError),
        ([s0.segment_id], [(0, math.nan)], pr.InvalidArgumentError),
        ([s0.segment_id], [(0.5, 0.0)], pr.InvalidArgumentError),
        ([s0.segment_id], [(True, 0.5)], pr.InvalidArgumentError),
        ([s0.segment_id], [], pr.InvalidArgumentError),
        (["x"], [(0, 0.5)], pr.InvalidArgumentError),
        ([-1], [(0, 0.5)], pr.InvalidArgumentError),
        ([segment_id(5, 0)], [(0, 0.5)], pr.ScaleConflictError),  # not in the current epoch
        ([s0.segment_id, s0.segment_id], [(0, 0.5)], pr.ScaleConflictError),
    ]:
        with pytest.raises(error):
            mgr.scale_stream("sc", "st", sealed, ranges)
    with pytest.raises(pr.StreamNotFoundError):
        mgr.scale_stream("sc", "nope", [s0.segment_id], [(0, 0.5)])
    # A segment of an earlier epoch cannot be scaled again.
    assert mgr.scale_stream("sc", "st", [s0.segment_id], [(0, 0.5)])
    with pytest.raises(pr.ScaleConflictError):
        mgr.scale_stream("sc", "st", [s0.segment_id], [(0, 0.5)])
    assert mgr.get_stream_info("sc", "st").epoch == 1


def test_scale_of_a_sealed_stream_is_refused(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    s0 = mgr.get_stream_info("sc", "st").segments[0]
    assert mgr.seal_stream("sc", "st")
    with pytest.raises(pr.StreamSealedError):
        mgr.scale_stream("sc", "st", [s0.segment_id], [(0, 0.5)])
    with pytest.raises(pr.StreamSealedError):
        mgr.update_stream("sc", "st", pr.StreamConfiguration())


def test_one_scale_at_a_time_per_stream(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    s0, s1 = mgr.get_stream_info("sc", "st").segments
    cluster.processor.stop()  # the first scale stays pending
    controller = cluster.core
    epoch = controller.scale_stream("sc", "st", [s0.segment_id], [(0, 0.5)])
    # The same request again answers the same epoch; another one conflicts.
    assert controller.scale_stream("sc", "st", [s0.segment_id], [(0, 0.5)]) == epoch
    with pytest.raises(pr.ScaleConflictError):
        controller.scale_stream("sc", "st", [s1.segment_id], [(0.5, 1.0)])
    assert not controller.check_scale("sc", "st", epoch)
    cluster.restart_processor()
    deadline = time.monotonic() + 20
    while not controller.check_scale("sc", "st", epoch):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert mgr.get_stream_info("sc", "st").epoch == 1


def _die_once_after(step: str, killed: list[str]):  # type: ignore[no-untyped-def]
    """A workflow ``step`` hook that kills the processor (once) right after ``step``."""

    def die_once(name: str) -> None:
        if name == step and not killed:
            killed.append(name)
            raise SystemExit(f"processor killed after {name!r}")

    return die_once


SCALE_STEPS = ["scaling", "segments created", "epoch added", "old segments sealed", "epoch current"]


@pytest.mark.parametrize("step", SCALE_STEPS)
def test_processor_killed_at_every_step_of_a_scale_finishes_it_exactly_once(
    cluster, step: str
) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    s0, s1 = mgr.get_stream_info("sc", "st").segments
    killed: list[str] = []
    cluster.restart_processor(step=_die_once_after(step, killed))
    controller = cluster.core
    epoch = controller.scale_stream("sc", "st", [s1.segment_id], [(0.5, 0.6), (0.6, 1.0)])
    deadline = time.monotonic() + 10
    while not killed:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    cluster.restart_processor()  # a new processor resumes from its checkpoint
    deadline = time.monotonic() + 20
    while not controller.check_scale("sc", "st", epoch):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    info = mgr.get_stream_info("sc", "st")
    assert info.epoch == 1 and info.state is pr.StreamState.ACTIVE
    assert [s.segment_id for s in info.segments] == [
        s0.segment_id,
        segment_id(1, 2),
        segment_id(1, 3),
    ]
    assert _segments_on_containers(cluster) == {s0.name, s1.name} | {s.name for s in info.segments}
    assert cluster.segments.get_info(s1.name).result(10).sealed
    # The clean-up too, killed or not: no closed mark below the current epoch is left.
    txns = StreamMetadataStore(cluster.metadata).txns
    deadline = time.monotonic() + 10
    while txns.closed_marks("sc", "st"):
        assert time.monotonic() < deadline, txns.closed_marks("sc", "st")
        time.sleep(0.01)
    # Exactly once: the next scale gets the next epoch and the next numbers.
    last = info.segments[-1]
    assert mgr.scale_stream("sc", "st", [last.segment_id], [(0.6, 1.0)])
    assert mgr.get_stream_info("sc", "st").segments[-1].segment_id == segment_id(2, 4)


def test_update_goes_through_updating_and_hands_the_policy_on(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 1)
    config = pr.StreamConfiguration(pr.ScalingPolicy.by_event_rate(100, 2, 1))
    assert mgr.update_stream("sc", "st", config)
    info = mgr.get_stream_info("sc", "st")
    assert info.configuration == config and info.state is pr.StreamState.ACTIVE
    with pytest.raises(pr.StreamNotFoundError):
        mgr.update_stream("sc", "missing", config)
    with pytest.raises(pr.InvalidArgumentError):
        mgr.update_stream("sc", "st", "not a config")  # type: ignore[arg-type]
    cluster.processor.stop()
    controller = cluster.core
    assert controller.update_stream("sc", "st", pr.StreamConfiguration())
    with pytest.raises(pr.ConflictingUpdateError):
        controller.update_stream("sc", "st", config)  # one update at a time
    cluster.restart_processor()
    deadline = time.monotonic() + 20
    while not controller.check_update("sc", "st"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert mgr.get_stream_info("sc", "st").configuration == pr.StreamConfiguration()


def test_delete_needs_a_sealed_stream_and_removes_every_segment_of_every_epoch(
    cluster,
) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    _s0, s1 = mgr.get_stream_info("sc", "st").segments
    assert mgr.scale_stream("sc", "st", [s1.segment_id], [(0.5, 0.7), (0.7, 1.0)])
    with pytest.raises(pr.StreamNotSealedError):
        mgr.delete_stream("sc", "st")
    assert mgr.seal_stream("sc", "st")
    assert mgr.seal_stream("sc", "st")  # idempotent
    assert mgr.delete_stream("sc", "st")
    assert not mgr.delete_stream("sc", "st")
    assert _segments_on_containers(cluster) == set()
    with pytest.raises(pr.StreamNotFoundError):
        mgr.get_stream_info("sc", "st")
    # Re-created: new segment numbers, so a client of the old stream cannot write into it.
    assert mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    numbers = [s.segment_id & 0xFFFFFFFF for s in mgr.get_stream_info("sc", "st").segments]
    assert numbers == [4, 5]
    with pytest.raises(pr.ScopeNotEmptyError):
        mgr.delete_scope("sc")


def test_delete_scope_recursive_removes_everything(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    mgr.create_stream("sc", "other", None)
    mgr.create_key_value_table("sc", "t", 2)
    cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    with pytest.raises(pr.ScopeNotEmptyError):
        mgr.delete_scope("sc")
    assert mgr.delete_scope("sc", recursive=True)
    assert "sc" not in mgr.list_scopes()
    assert _segments_on_containers(cluster) == set()
    assert not mgr.delete_scope("sc", recursive=True)
    with pytest.raises(pr.InvalidArgumentError):
        mgr.delete_scope("sc", recursive="yes")  # type: ignore[arg-type]


def test_a_request_without_its_property_is_postponed_then_dropped(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 1)
    cluster.processor.stop()
    controller = cluster.core
    # A scale request whose caller died before writing the property; then a seal.
    controller._steps.post("scale", "sc", "st", epoch=1, posted_ms=0)
    controller._steps.post("seal", "sc", "st")
    cluster.restart_processor()
    deadline = time.monotonic() + 20
    while mgr.get_stream_info("sc", "st").state is not pr.StreamState.SEALED:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert mgr.get_stream_info("sc", "st").epoch == 0


def test_requests_of_one_stream_run_in_order_and_survive_a_restart(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 1)
    for i in range(4):
        mgr.create_stream("sc", f"s{i}", None)
    for round_ in range(3):
        for i in range(4):
            seg = mgr.get_stream_info("sc", f"s{i}").segments[0]
            assert mgr.scale_stream("sc", f"s{i}", [seg.segment_id], [(0.0, 1.0)])
        cluster.restart()
        for i in range(4):
            assert mgr.get_stream_info("sc", f"s{i}").epoch == round_ + 1
    length = cluster.segments.get_info(REQUEST_SEGMENT).result(10).length
    assert length > 0


WORKFLOW_STEPS = {
    "update": ["updating", "configuration stored"],
    "seal": ["sealing", "segments sealed"],
    "delete": ["numbers remembered", "segments deleted"],
}


def _wait(condition, timeout_s: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.mark.parametrize(
    ("workflow", "step"), [(w, s) for w, steps in WORKFLOW_STEPS.items() for s in steps]
)
def test_processor_killed_at_every_step_of_update_seal_and_delete(
    cluster, workflow: str, step: str
) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    if workflow == "delete":
        assert mgr.seal_stream("sc", "st")
    killed: list[str] = []
    cluster.restart_processor(step=_die_once_after(step, killed))
    controller = cluster.core
    config = pr.StreamConfiguration(pr.ScalingPolicy.by_event_rate(10, 2, 2))
    {
        "update": lambda: controller.update_stream("sc", "st", config),
        "seal": lambda: controller.seal_stream("sc", "st"),
        "delete": lambda: controller.delete_stream("sc", "st"),
    }[workflow]()
    _wait(lambda: bool(killed))
    cluster.restart_processor()
    if workflow == "update":
        _wait(lambda: controller.check_update("sc", "st"))
        info = mgr.get_stream_info("sc", "st")
        assert info.configuration == config and info.state is pr.StreamState.ACTIVE
    elif workflow == "seal":
        _wait(lambda: mgr.get_stream_info("sc", "st").state is pr.StreamState.SEALED)
        for segment in mgr.get_stream_info("sc", "st").segments:
            assert cluster.segments.get_info(segment.name).result(10).sealed
    else:
        _wait(lambda: "st" not in mgr.list_streams("sc"))
        assert _segments_on_containers(cluster) == set()
        assert mgr.create_stream("sc", "st", None)  # numbers after the deleted ones
        assert mgr.get_stream_info("sc", "st").segments[0].segment_id == 2


@pytest.mark.parametrize("step", SCALE_STEPS)
def test_a_container_restarted_at_every_step_of_a_scale_delays_it_only(cluster, step: str) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 4)
    restarted = []

    def restart_containers(name: str) -> None:
        if name == step and not restarted:
            restarted.append(name)
            for container_id in range(cluster.container_count):
                cluster.restart_container(container_id)

    cluster.restart_processor(step=restart_containers)
    segments = mgr.get_stream_info("sc", "st").segments
    assert mgr.scale_stream(
        "sc", "st", [segments[0].segment_id, segments[1].segment_id], [(0.0, 0.5)]
    )
    info = mgr.get_stream_info("sc", "st")
    assert restarted and info.epoch == 1 and len(info.segments) == 3
    assert info.segments[0].segment_id == segment_id(1, 4)


def _append(cluster: InProcessCluster, segment: str, data: bytes) -> None:
    """``data`` as 10-byte events (2-byte payloads), so every multiple of 10 is a boundary."""
    events = frame_events([data[i : i + 2] for i in range(0, len(data), 2)])
    assert len(events) == 5 * len(data)
    cluster.segments.append_conditional(segment, events).result(10)


def test_truncate_goes_through_truncating_and_drops_what_is_before_the_cut(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    s0, s1 = mgr.get_stream_info("sc", "st").segments
    for segment in (s0, s1):
        _append(cluster, segment.name, b"x" * 100)
    assert mgr.scale_stream("sc", "st", [s0.segment_id], [(0.0, 0.5)])
    new = mgr.get_stream_info("sc", "st").segments[0]
    _append(cluster, new.name, b"y" * 50)
    listed = [s.segment_id for s in mgr.list_segments("sc", "st")]
    assert listed == [s0.segment_id, s1.segment_id, new.segment_id]  # every epoch's
    seen = []
    cluster.restart_processor(step=seen.append)
    cut = pr.StreamCut("sc", "st", {new.segment_id: 20, s1.segment_id: 40})
    assert mgr.truncate_stream("sc", "st", cut)
    assert seen[:3] == ["truncating", "segments deleted", "segments truncated"]
    assert mgr.get_stream_info("sc", "st").state is pr.StreamState.ACTIVE
    assert s0.name not in _segments_on_containers(cluster)  # wholly before the cut
    assert [s.segment_id for s in mgr.list_segments("sc", "st")] == [
        s1.segment_id,
        new.segment_id,
    ]
    assert cluster.segments.get_info(s1.name).result(10).start_offset == 40
    assert cluster.segments.get_info(new.name).result(10).start_offset == 20
    # A cut behind the truncation, or not a cut of the stream, is refused; nothing changes.
    for bad in (
        pr.StreamCut("sc", "st", {new.segment_id: 10, s1.segment_id: 40}),
        pr.StreamCut("sc", "st", {s0.segment_id: 0, s1.segment_id: 40}),
        pr.StreamCut("sc", "st", {new.segment_id: 20}),  # does not cover [0, 1)
        pr.StreamCut("sc", "st", {new.segment_id: 20, s1.segment_id: 10_000}),  # past the end
        pr.StreamCut("sc", "other", {new.segment_id: 20, s1.segment_id: 40}),
    ):
        with pytest.raises(pr.InvalidArgumentError):
            mgr.truncate_stream("sc", "st", bad)
    with pytest.raises(pr.InvalidArgumentError):
        mgr.truncate_stream("sc", "st", {new.segment_id: 20})  # type: ignore[arg-type]
    assert mgr.truncate_stream(
        "sc", "st", pr.StreamCut("sc", "st", {new.segment_id: 50, s1.segment_id: 100})
    )


@pytest.mark.parametrize("step", ["truncating", "segments deleted", "segments truncated"])
def test_processor_killed_at_every_step_of_a_truncation(cluster, step: str) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 1)
    s0 = mgr.get_stream_info("sc", "st").segments[0]
    _append(cluster, s0.name, b"x" * 100)
    assert mgr.scale_stream("sc", "st", [s0.segment_id], [(0.0, 1.0)])
    new = mgr.get_stream_info("sc", "st").segments[0]
    _append(cluster, new.name, b"y" * 100)
    killed: list[str] = []
    cluster.restart_processor(step=_die_once_after(step, killed))
    controller = cluster.core
    controller.truncate_stream("sc", "st", pr.StreamCut("sc", "st", {new.segment_id: 30}))
    _wait(lambda: bool(killed))
    cluster.restart_processor()
    _wait(lambda: controller.check_truncate("sc", "st"))
    assert mgr.get_stream_info("sc", "st").state is pr.StreamState.ACTIVE
    assert _segments_on_containers(cluster) == {new.name}
    assert cluster.segments.get_info(new.name).result(10).start_offset == 30


def test_a_group_created_after_scales_reads_from_the_head(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _stream(cluster, 2)
    written = 0
    for _ in range(3):
        with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
            for _ in range(50):
                writer.write_event({"n": written}, routing_key=f"k{written % 7}")
                written += 1
        last = mgr.get_stream_info("sc", "st").segments[-1]
        middle = (last.key_low + last.key_high) / 2
        assert mgr.scale_stream(
            "sc", "st", [last.segment_id], [(last.key_low, middle), (middle, last.key_high)]
        )
    cluster.create_reader_group("sc", "late", pr.ReaderGroupConfig.for_streams("sc/st"))
    got = []
    with cluster.create_reader("r", "sc", "late", pr.JsonSerializer()) as reader:
        while len(got) < written:
            event = reader.read_next_event(timeout_s=5)
            assert event is not None, f"read {len(got)} of {written}"
            got.append(event.event["n"])
    assert sorted(got) == list(range(written))


class _ReadAtOnce:
    """The request stream of a controller instance whose processor reads each workflow
    request the moment it is posted, before the instance writes the workflow's property
    (the race that made every scale, update and truncation wait out a rest)."""

    def __init__(self, inner: Any, processor: RequestEventProcessor) -> None:
        self._inner = inner
        self._processor = processor

    def post(self, body: dict[str, Any]) -> int:
        offset = int(self._inner.post(body))
        if body["type"] in ("scale", "update", "truncate"):
            self._processor.run_once()
            assert self._processor.wait_settled(10)
        return offset

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.mark.parametrize("workflow", ["scale", "update", "truncate"])
def test_a_request_read_before_its_property_runs_once_the_property_is_written_not_after_a_rest(
    cluster, workflow: str
) -> None:  # type: ignore[no-untyped-def]
    # The request goes first, then the property (Pravega's order); a processor reading the
    # request in between postpones it, and its stream rests. The instance then posts a wake:
    # the workflow runs at once, with the processor's clock never moved past the rest.
    mgr = _stream(cluster, 2)
    with cluster.create_writer("sc", "st", pr.BytesSerializer()) as writer:
        writer.write_event(b"e", routing_key="k")
    cut = cluster.core.get_tail_cut("sc", "st")
    cluster.processor.stop()
    clock = ManualClock()
    processor = RequestEventProcessor(
        RequestStream(cluster._segment_helper()),
        cluster.new_workflows().handle,
        cluster.metadata,
        clock=clock,
        scheduler=ManualThreadScheduler(clock),
    )
    core = cluster.core
    core._steps._requests = _ReadAtOnce(core._steps._requests, processor)
    processor.run_once()  # reads everything posted before (the create): settled
    assert processor.wait_settled(10)
    s0 = mgr.get_stream_info("sc", "st").segments[0]
    if workflow == "scale":
        epoch = core.scale_stream("sc", "st", [s0.segment_id], [(0.0, 0.25), (0.25, 0.5)])
        done = lambda: core.check_scale("sc", "st", epoch)  # noqa: E731
    elif workflow == "update":
        core.update_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(3)))
        done = lambda: core.check_update("sc", "st")  # noqa: E731
    else:
        core.truncate_stream("sc", "st", cut)
        done = lambda: core.check_truncate("sc", "st")  # noqa: E731
    assert not done()  # the processor postponed it: its stream rests
    processor.run_once()  # reads the wake; the clock stays where it was
    assert processor.wait_settled(10)
    assert done()
