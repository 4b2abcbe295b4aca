"""The reader's hot path: ``read_next_events`` batches (same events, order and
positions as ``read_next_event``; checkpoint markers end a batch; an undecodable event ends
one and is raised by the next call), and ``EventRead`` (immutable, equal by fields, picklable,
its position the reader's position just after that event however late it is read)."""

from __future__ import annotations

import pickle
import threading

import pytest

import pravega_ray as pr
from pravega_ray.client.events import EventRead, Position
from pravega_ray.errors import InvalidArgumentError, SerializationError
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(90)


def _cluster(segments: int, group: str = "rg") -> InProcessCluster:
    cluster = InProcessCluster(container_count=2)
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))
    cluster.create_reader_group("sc", group, pr.ReaderGroupConfig.for_streams("sc/st"))
    return cluster


@pytest.fixture
def multi():  # type: ignore[no-untyped-def]
    c = _cluster(3)
    yield c
    c.shutdown()


def _write(cluster: InProcessCluster, events: list[bytes]) -> None:
    with cluster.create_writer("sc", "st") as writer:
        for n, event in enumerate(events):
            writer.write_event(event, routing_key=f"k{n % 5}")
        writer.flush()


def _drain_one_by_one(reader: object, count: int) -> list[EventRead]:
    got: list[EventRead] = []
    while len(got) < count:
        ev = reader.read_next_event(timeout_s=5)  # type: ignore[attr-defined]
        assert ev is not None
        if not ev.is_checkpoint:
            got.append(ev)
    return got


def test_batches_return_what_single_reads_return(multi: InProcessCluster) -> None:
    events = [f"e{i:04d}".encode() for i in range(500)]
    _write(multi, events)
    one = multi.create_reader("r1", "sc", "rg")
    singles = _drain_one_by_one(one, len(events))
    one.close()
    multi.create_reader_group("sc", "rg2", pr.ReaderGroupConfig.for_streams("sc/st"))
    batcher = multi.create_reader("r1", "sc", "rg2")
    batched: list[EventRead] = []
    sizes = []
    while len(batched) < len(events):
        batch = batcher.read_next_events(7, timeout_s=5)
        assert 1 <= len(batch) <= 7
        sizes.append(len(batch))
        batched.extend(e for e in batch if not e.is_checkpoint)
    assert sorted(e.event for e in batched) == sorted(events)
    # Per segment: the same events at the same offsets, with the same positions after them.
    by_segment = {(e.segment, e.offset): e for e in singles}
    for e in batched:
        assert by_segment[(e.segment, e.offset)].event == e.event
    assert batched[-1].position == batcher.position()
    assert max(sizes) == 7
    assert batcher.read_next_events(10, timeout_s=0.05) == []
    batcher.close()


def test_positions_are_snapshots_read_late(multi: InProcessCluster) -> None:
    _write(multi, [bytes([65 + i % 26]) * 3 for i in range(60)])
    reader = multi.create_reader("r1", "sc", "rg")
    got = _drain_one_by_one(reader, 60)
    # Read only now: each position is the reader's just after that event.
    per_segment: dict[str, int] = {}
    for ev in got:
        per_segment[ev.segment] = ev.offset + 8 + len(ev.event)
        position = ev.position.to_dict()
        assert position[ev.segment] == per_segment[ev.segment]
        for segment, offset in per_segment.items():
            assert position.get(segment, offset) >= offset if segment != ev.segment else True
    assert got[-1].position == reader.position()
    reader.close()


def test_a_checkpoint_marker_ends_a_batch(multi: InProcessCluster) -> None:
    _write(multi, [b"x%d" % i for i in range(300)])
    group = multi.reader_group("sc", "rg")
    reader = multi.create_reader("r1", "sc", "rg")
    first = reader.read_next_events(5, timeout_s=5)
    assert first and not any(e.is_checkpoint for e in first)
    result: dict[str, object] = {}
    thread = threading.Thread(
        target=lambda: result.update(cp=group.initiate_checkpoint("cp1", timeout_s=30))
    )
    thread.start()
    marker_seen = False
    for _ in range(2000):
        batch = reader.read_next_events(1000, timeout_s=0.05)
        marks = [i for i, e in enumerate(batch) if e.is_checkpoint]
        if marks:
            assert marks == [len(batch) - 1]  # the marker is the batch's last item
            assert batch[-1].checkpoint_name == "cp1" and batch[-1].event is None
            marker_seen = True
            break
    assert marker_seen
    reader.read_next_events(10, timeout_s=0.05)  # records the position
    thread.join(30)
    assert isinstance(result["cp"], pr.Checkpoint)
    reader.close()


def test_an_undecodable_event_ends_a_batch_and_the_next_call_raises() -> None:
    cluster = _cluster(1)
    try:
        _write(cluster, [b"a", b"b", b"\xff", b"c"])
        reader = cluster.create_reader("r1", "sc", "rg", pr.Utf8Serializer())
        batch = reader.read_next_events(10, timeout_s=5)
        while len(batch) < 2:
            batch += reader.read_next_events(10, timeout_s=5)
        assert [e.event for e in batch] == ["a", "b"]
        with pytest.raises(SerializationError) as raised:
            reader.read_next_events(10, timeout_s=5)
        reader.skip_event(raised.value)
        assert [e.event for e in reader.read_next_events(10, timeout_s=5)] == ["c"]
        reader.close()
    finally:
        cluster.shutdown()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3", None])
def test_read_next_events_refuses_a_bad_count(multi: InProcessCluster, bad: object) -> None:
    reader = multi.create_reader("r1", "sc", "rg")
    with pytest.raises(InvalidArgumentError):
        reader.read_next_events(bad, timeout_s=0.01)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        reader.read_next_events(3, timeout_s=-1)
    reader.close()


def test_event_read_is_an_immutable_record() -> None:
    position = Position((("sc/st/0.#epoch.0", 12),))
    built = EventRead(b"e", "sc/st/0.#epoch.0", 0, position)
    raw = tuple.__new__(EventRead, (b"e", "sc/st/0.#epoch.0", 0, (("sc/st/0.#epoch.0", 12),), None))
    assert built == raw and hash(built) == hash(raw) and raw.position == position
    assert built != EventRead(b"f", "sc/st/0.#epoch.0", 0, position)
    assert built != (b"e", "sc/st/0.#epoch.0", 0, position, None)
    assert not built.is_checkpoint
    assert EventRead(None, "", -1, position, checkpoint_name="cp").is_checkpoint
    for name in ("event", "segment", "offset", "position", "checkpoint_name"):
        with pytest.raises(AttributeError):
            setattr(built, name, 1)
    with pytest.raises(AttributeError):
        built.other = 1  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(raw)) == built
    assert "position=Position(" in repr(raw)
    with pytest.raises(TypeError):
        _ = built < raw  # type: ignore[operator]
