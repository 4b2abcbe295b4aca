"""Readers: a reader the group no longer has stops at once; offline at a position; skip_event
checks what it skips; a lost report of a finished segment does not make it read again."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray import constants
from pravega_ray.client.client_factory import ClientFactory
from pravega_ray.client.reader import EventStreamReader
from pravega_ray.client.reader_group_synchronizer import ReaderGroupSynchronizer
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.errors import (
    ClientClosedError,
    IllegalStateError,
    InvalidArgumentError,
    ReaderAlreadyExistsError,
    ReaderGroupNotFoundError,
    ReaderNotInGroupError,
    ScopeNotEmptyError,
    ScopeNotFoundError,
    SegmentStoreUnavailableError,
    SerializationError,
)
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.timing import ManualClock, ManualThreadScheduler
from tests.unit.client.test_reader_group_synchronizer import StateCallFaults

pytestmark = pytest.mark.timeout(60)


def _cluster(segments: int) -> InProcessCluster:
    cluster = InProcessCluster(container_count=2)
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))
    cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    return cluster


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = _cluster(2)
    yield c
    c.shutdown()


@pytest.fixture
def single():  # type: ignore[no-untyped-def]
    c = _cluster(1)
    yield c
    c.shutdown()


def _manual_reader(cluster: InProcessCluster, reader_id: str) -> tuple[Any, ManualClock]:
    """A reader of ``sc/rg`` on a manual clock (its reads still wait in real time)."""
    clock = ManualClock()
    reader = EventStreamReader(
        reader_id,
        "sc",
        "rg",
        pr.BytesSerializer(),
        cluster._controller,
        cluster._segments,
        clock=clock,
        scheduler=ManualThreadScheduler(clock),
    )
    return reader, clock


def _write(cluster: InProcessCluster, events: list[bytes], key: str | None = None) -> None:
    """Write ``events``, each under its own routing key unless ``key`` is given."""
    with cluster.create_writer("sc", "st") as writer:
        for i, event in enumerate(events):
            writer.write_event(event, routing_key=key or f"k{i}")


def _drain(reader: pr.EventStreamReader, timeout_s: float = 2.0) -> list[Any]:
    """Events until a read of ``timeout_s`` brings nothing (2 s: a loaded machine hands a
    reader its segments slowly)."""
    events = []
    while (event := reader.read_next_event(timeout_s=timeout_s)) is not None:
        events.append(event.event)
    return events


def test_read_next_event_after_declared_offline_never_returns_buffered_events(cluster) -> None:
    _write(cluster, [f"e{i}".encode() for i in range(200)])
    old, clock = _manual_reader(cluster, "r1")
    returned = [old.read_next_event(timeout_s=5) for _ in range(10)]
    seen = [e.event for e in returned]  # type: ignore[union-attr]
    assert cluster.reader_group("sc", "rg").reader_offline("r1", returned[-1].position)
    clock.advance(0.25)  # the next call syncs and learns it is out
    with pytest.raises(ReaderNotInGroupError):
        old.read_next_event(timeout_s=1)
    for _ in range(3):  # stopped: it never hands out what it had buffered
        with pytest.raises(ReaderNotInGroupError):
            old.read_next_event(timeout_s=0.1)
    assert old.position().to_dict() == {}
    old.close()
    successor = cluster.create_reader("r1", "sc", "rg")
    rest = _drain(successor)
    successor.close()
    assert sorted(seen + rest) == sorted(f"e{i}".encode() for i in range(200))


def test_read_next_event_of_a_deleted_and_recreated_group_is_group_not_found(cluster) -> None:
    _write(cluster, [b"x"] * 10)
    reader, clock = _manual_reader(cluster, "r1")
    assert reader.read_next_event(timeout_s=5) is not None
    group = cluster.reader_group("sc", "rg")
    assert cluster.delete_reader_group("sc", "rg")
    assert cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    newcomer = cluster.create_reader("r1", "sc", "rg")  # the same id, in the new group
    clock.advance(0.25)  # past the reader's sync interval
    with pytest.raises(ReaderGroupNotFoundError, match="deleted"):
        reader.read_next_event(timeout_s=1)
    with pytest.raises(ReaderGroupNotFoundError):
        group.get_online_readers()  # the object of the old group
    with pytest.raises(ReaderGroupNotFoundError):
        group.reader_offline("r1")
    reader.close()  # quiet, and it does not take the new group's r1 out
    assert cluster.reader_group("sc", "rg").get_online_readers() == ["r1"]
    assert len(_drain(newcomer)) == 10
    newcomer.close()


def test_reader_offline_at_a_position_behind_the_last_sync_reads_the_rest_again(single) -> None:
    events = [f"e{i:03d}".encode() for i in range(60)]
    _write(single, events)
    crashed, clock = _manual_reader(single, "r1")
    returned = [crashed.read_next_event(timeout_s=5) for _ in range(30)]
    clock.advance(constants.READER_GROUP_OFFSETS_SAVE_INTERVAL_S + 0.1)
    returned.append(crashed.read_next_event(timeout_s=5))  # syncs offsets after 30 events
    processed = returned[9]  # the application finished with only the first 10
    assert single.reader_group("sc", "rg").reader_offline("r1", processed.position)
    successor = single.create_reader("r2", "sc", "rg")
    assert _drain(successor) == events[10:]
    successor.close()
    crashed.close()


def test_reader_offline_without_a_position_returns_segments_at_the_last_synced_offsets(
    single,
) -> None:
    events = [f"e{i:03d}".encode() for i in range(60)]
    _write(single, events)
    crashed, clock = _manual_reader(single, "r1")
    returned = [crashed.read_next_event(timeout_s=5) for _ in range(30)]
    clock.advance(constants.READER_GROUP_OFFSETS_SAVE_INTERVAL_S + 0.1)
    returned.append(crashed.read_next_event(timeout_s=5))  # syncs offsets after 30 events
    assert single.reader_group("sc", "rg").reader_offline("r1")
    successor = single.create_reader("r2", "sc", "rg")
    assert _drain(successor) == events[30:]  # only the event returned after the sync again
    successor.close()
    crashed.close()


def test_reader_offline_with_a_malformed_position_is_invalid_argument(single) -> None:
    reader = single.create_reader("r1", "sc", "rg")
    group = single.reader_group("sc", "rg")
    for position in ({"sc/st/0.#epoch.0": 0}, pr.Position((("seg", -1),)), pr.Position(5)):
        with pytest.raises(InvalidArgumentError):
            group.reader_offline("r1", position)  # type: ignore[arg-type]
    assert group.get_online_readers() == ["r1"]
    reader.close()


def test_skip_event_refuses_an_error_for_other_bytes_and_after_close(single) -> None:
    _write(single, [b"\xff", b"ok"])
    reader = single.create_reader("r1", "sc", "rg", pr.Utf8Serializer())
    with pytest.raises(SerializationError) as raised:
        for _ in range(5):
            reader.read_next_event(timeout_s=1)
    error = raised.value
    forged = SerializationError(
        "forged",
        data=b"other",
        segment=error.segment,
        offset=error.offset,  # type: ignore[attr-defined]
    )
    with pytest.raises(IllegalStateError):
        reader.skip_event(forged)
    with pytest.raises(InvalidArgumentError):
        reader.skip_event(ValueError("x"))  # type: ignore[arg-type]
    reader.skip_event(error)
    assert reader.read_next_event(timeout_s=5).event == "ok"  # type: ignore[union-attr]
    reader.close()
    with pytest.raises(ClientClosedError):
        reader.skip_event(error)


def test_read_next_event_after_a_failed_sync_does_not_read_a_finished_segment_again(
    single, monkeypatch
) -> None:
    monkeypatch.setattr(constants, "READER_GROUP_STATE_ATTEMPTS_MAX", 2)
    monkeypatch.setattr(constants, "READER_GROUP_STATE_RETRY_PAUSE_S", 0.0)
    events = [f"e{i}".encode() for i in range(5)]
    _write(single, events)
    single.stream_manager().seal_stream("sc", "st")
    faults = StateCallFaults(single)
    clients = ClientFactory(single._controller, SegmentStoreClient(faults))
    reader = clients.create_reader("r1", "sc", "rg")
    got = [reader.read_next_event(timeout_s=5).event for _ in range(5)]  # type: ignore[union-attr]
    faults.fail_before["table_update"] = 2  # the sync reporting the finished segment fails
    with pytest.raises(SegmentStoreUnavailableError):
        for _ in range(20):
            assert reader.read_next_event(timeout_s=0.2) is None
    assert reader.position().to_dict() == {"sc/st/0.#epoch.0": 5 * (8 + 2)}  # its end
    got += _drain(reader)
    assert got == events  # nothing read twice
    state = ReaderGroupSynchronizer("sc", "rg", single.core, single.segments).fetch()[0]
    assert state.completed == {"sc/st/0.#epoch.0"}
    reader.close()


def test_a_second_reader_with_the_same_id_is_refused_and_nothing_is_read_twice(cluster) -> None:
    events = [f"e{i}".encode() for i in range(200)]
    _write(cluster, events)
    first = cluster.create_reader("dup", "sc", "rg")
    got = [first.read_next_event(timeout_s=5).event for _ in range(100)]
    with pytest.raises(ReaderAlreadyExistsError):
        cluster.create_reader("dup", "sc", "rg")
    got += _drain(first)
    first.close()
    assert sorted(got) == sorted(events)


def test_reader_declared_offline_hands_back_its_segments_and_is_stopped(cluster) -> None:
    events = [f"e{i}".encode() for i in range(100)]
    _write(cluster, events)
    crashed = cluster.create_reader("r1", "sc", "rg")
    first_half = [crashed.read_next_event(timeout_s=5) for _ in range(50)]
    group = cluster.reader_group("sc", "rg")
    assert group.get_online_readers() == ["r1"]
    assert group.reader_offline("r1", first_half[-1].position)
    assert not group.reader_offline("r1")
    assert group.get_online_readers() == []
    successor = cluster.create_reader("r1", "sc", "rg")  # the id may join again
    rest = _drain(successor)
    assert sorted([e.event for e in first_half] + rest) == sorted(events)
    with pytest.raises(ReaderNotInGroupError):  # the old object, still running
        while True:
            crashed.read_next_event(timeout_s=0.3)
    crashed.close()  # quiet: it is not a member any more
    assert group.get_online_readers() == ["r1"]
    successor.close()


def test_undecodable_event_is_not_consumed_until_skipped(cluster) -> None:
    _write(cluster, [b'{"n": 1}', b"\xff not json", b'{"n": 2}'], key="one-key")
    _write(cluster, [b'{"other": 0}'], key="another-key-entirely-0")
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
    _write(cluster, [b"\xff"], key="k")
    first = cluster.create_reader("r1", "sc", "rg", pr.Utf8Serializer())
    with pytest.raises(SerializationError):
        for _ in range(5):
            first.read_next_event(timeout_s=1)
    first.close()
    second = cluster.create_reader("r2", "sc", "rg", pr.BytesSerializer())
    assert _drain(second) == [b"\xff"]
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
