"""Readers: a reader the group no longer has stops at once; offline at a position; skip_event
checks what it skips; a lost report of a finished segment does not make it read again."""

from __future__ import annotations

import time
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray import constants
from pravega_ray.client.client_factory import ClientFactory
from pravega_ray.client.controller_connection import RetryingControllerConnection
from pravega_ray.errors import (
    ClientClosedError,
    ControllerUnavailableError,
    IllegalStateError,
    InvalidArgumentError,
    ReaderGroupNotFoundError,
    ReaderNotInGroupError,
    SerializationError,
)
from pravega_ray.inprocess import InProcessCluster

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


def _write(cluster: InProcessCluster, events: list[bytes]) -> None:
    with cluster.create_writer("sc", "st") as writer:
        for i, event in enumerate(events):
            writer.write_event(event, routing_key=f"k{i}")


def _drain(reader: pr.EventStreamReader, timeout_s: float = 0.5) -> list[Any]:
    events = []
    while (event := reader.read_next_event(timeout_s=timeout_s)) is not None:
        events.append(event.event)
    return events


def test_read_next_event_after_declared_offline_never_returns_buffered_events(cluster) -> None:
    _write(cluster, [f"e{i}".encode() for i in range(200)])
    old = cluster.create_reader("r1", "sc", "rg")
    returned = [old.read_next_event(timeout_s=5) for _ in range(10)]
    seen = [e.event for e in returned]  # type: ignore[union-attr]
    assert cluster.reader_group("sc", "rg").reader_offline("r1", returned[-1].position)
    time.sleep(0.25)  # the next call syncs and learns it is out
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
    reader = cluster.create_reader("r1", "sc", "rg")
    assert reader.read_next_event(timeout_s=5) is not None
    group = cluster.reader_group("sc", "rg")
    assert cluster.delete_reader_group("sc", "rg")
    assert cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    newcomer = cluster.create_reader("r1", "sc", "rg")  # the same id, in the new group
    time.sleep(0.25)
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
    crashed = single.create_reader("r1", "sc", "rg")
    returned = [crashed.read_next_event(timeout_s=5) for _ in range(30)]
    time.sleep(constants.READER_GROUP_OFFSETS_SAVE_INTERVAL_S + 0.1)
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
    crashed = single.create_reader("r1", "sc", "rg")
    returned = [crashed.read_next_event(timeout_s=5) for _ in range(30)]
    time.sleep(constants.READER_GROUP_OFFSETS_SAVE_INTERVAL_S + 0.1)
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
        "forged", data=b"other", segment=error.segment, offset=error.offset  # type: ignore[attr-defined]
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


class FailingSyncs:
    """A controller connection whose next ``fail`` syncs are lost before reaching it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.fail = 0

    def __getattr__(self, method: str) -> Any:
        target = getattr(self._inner, method)

        def call(*args: Any, **kwargs: Any) -> Any:
            if method == "reader_group_sync" and self.fail > 0:
                self.fail -= 1
                raise ControllerUnavailableError("controller restarting")
            return target(*args, **kwargs)

        return call


def test_read_next_event_after_a_failed_sync_does_not_read_a_finished_segment_again(
    single,
) -> None:
    events = [f"e{i}".encode() for i in range(5)]
    _write(single, events)
    single.stream_manager().seal_stream("sc", "st")
    failing = FailingSyncs(single._locked)
    clients = ClientFactory(RetryingControllerConnection(failing, attempts_max=1), single._segments)
    reader = clients.create_reader("r1", "sc", "rg")
    got = [reader.read_next_event(timeout_s=5).event for _ in range(5)]  # type: ignore[union-attr]
    failing.fail = 1  # the sync reporting the finished segment fails
    with pytest.raises(ControllerUnavailableError):
        for _ in range(20):
            assert reader.read_next_event(timeout_s=0.2) is None
    got += _drain(reader)
    assert got == events  # nothing read twice
    assert single._locked.get_reader_group("sc", "rg")["completed"] == ["sc/st/0.#epoch.0"]
    reader.close()
