"""Readers: one session per reader id, offline readers, undecodable events, deleted groups."""

from __future__ import annotations

import uuid

import pytest

import pravega_ray as pr
from pravega_ray.errors import (
    IllegalStateError,
    ReaderAlreadyExistsError,
    ReaderGroupNotFoundError,
    ReaderNotInGroupError,
    ScopeNotEmptyError,
    ScopeNotFoundError,
    SerializationError,
)
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=2)
    c.stream_manager().create_scope("sc")
    c.stream_manager().create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    c.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    yield c
    c.shutdown()


def write(cluster: InProcessCluster, events: list[bytes], key: str | None = None) -> None:
    with cluster.create_writer("sc", "st") as writer:
        for i, event in enumerate(events):
            writer.write_event(event, routing_key=key or f"k{i}")


def drain(reader: pr.EventStreamReader, timeout_s: float = 0.5) -> list[bytes]:
    events = []
    while (event := reader.read_next_event(timeout_s=timeout_s)) is not None:
        events.append(event.event)
    return events


def test_a_second_reader_with_the_same_id_is_refused_and_nothing_is_read_twice(cluster) -> None:
    events = [f"e{i}".encode() for i in range(200)]
    write(cluster, events)
    first = cluster.create_reader("dup", "sc", "rg")
    got = [first.read_next_event(timeout_s=5).event for _ in range(100)]
    with pytest.raises(ReaderAlreadyExistsError):
        cluster.create_reader("dup", "sc", "rg")
    got += drain(first)
    first.close()
    assert sorted(got) == sorted(events)


def test_reader_declared_offline_hands_back_its_segments_and_is_stopped(cluster) -> None:
    events = [f"e{i}".encode() for i in range(100)]
    write(cluster, events)
    crashed = cluster.create_reader("r1", "sc", "rg")
    first_half = [crashed.read_next_event(timeout_s=5) for _ in range(50)]
    group = cluster.reader_group("sc", "rg")
    assert group.get_online_readers() == ["r1"]
    assert group.reader_offline("r1", first_half[-1].position)
    assert not group.reader_offline("r1")
    assert group.get_online_readers() == []
    successor = cluster.create_reader("r1", "sc", "rg")  # the id may join again
    rest = drain(successor)
    assert sorted([e.event for e in first_half] + rest) == sorted(events)
    with pytest.raises(ReaderNotInGroupError):  # the old object, still running
        while True:
            crashed.read_next_event(timeout_s=0.3)
    crashed.close()  # quiet: it is not a member any more
    assert group.get_online_readers() == ["r1"]
    successor.close()


def test_undecodable_event_is_not_consumed_until_skipped(cluster) -> None:
    write(cluster, [b'{"n": 1}', b"\xff not json", b'{"n": 2}'], key="one-key")
    write(cluster, [b'{"other": 0}'], key="another-key-entirely-0")
    reader = cluster.create_reader("r1", "sc", "rg", pr.JsonSerializer())
    seen: list[object] = []
    error: SerializationError | None = None
    for _ in range(6):
        try:
            event = reader.read_next_event(timeout_s=2)
        except SerializationError as e:
            error = e
            continue
        if event is not None:
            seen.append(event.event)
    assert error is not None and error.data == b"\xff not json"  # type: ignore[attr-defined]
    assert {"n": 1} in seen and {"n": 2} not in seen  # stuck before the bad one, in order
    position = reader.position().to_dict()
    assert position[error.segment] == error.offset  # type: ignore[attr-defined]
    with pytest.raises(SerializationError):  # asked again: the same event again
        for _ in range(3):
            reader.read_next_event(timeout_s=1)
    reader.skip_event(error)
    with pytest.raises(IllegalStateError):
        reader.skip_event(error)  # not the head any more
    seen += [e for e in iter(lambda: _next(reader), None)]
    assert seen.count({"n": 1}) == 1 and seen.count({"n": 2}) == 1
    assert {"other": 0} in seen
    reader.close()


def _next(reader: pr.EventStreamReader) -> object:
    event = reader.read_next_event(timeout_s=0.5)
    return None if event is None else event.event


def test_an_undecodable_event_left_unskipped_goes_to_the_next_reader(cluster) -> None:
    write(cluster, [b"\xff"], key="k")
    first = cluster.create_reader("r1", "sc", "rg", pr.Utf8Serializer())
    with pytest.raises(SerializationError):
        for _ in range(5):
            first.read_next_event(timeout_s=1)
    first.close()
    second = cluster.create_reader("r2", "sc", "rg", pr.BytesSerializer())
    assert drain(second) == [b"\xff"]
    second.close()


def test_scopes_with_reader_groups_are_not_empty_and_deleted_groups_stop_their_readers(
    cluster,
) -> None:
    mgr = cluster.stream_manager()
    with pytest.raises(ScopeNotEmptyError):
        mgr.delete_scope("sc")
    reader = cluster.create_reader("r1", "sc", "rg")
    assert cluster.delete_reader_group("sc", "rg")
    assert not cluster.delete_reader_group("sc", "rg")
    assert not cluster.delete_reader_group("sc", "never-was")
    cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    with pytest.raises((ReaderNotInGroupError, ReaderGroupNotFoundError)):
        reader.read_next_event(timeout_s=0.3)  # a reader of the deleted group
    reader.close()
    with pytest.raises(ScopeNotFoundError):
        cluster.create_reader("r", "missing-" + uuid.uuid4().hex[:6], "rg")
    with pytest.raises(ReaderGroupNotFoundError):
        cluster.reader_group("sc", "nope")
