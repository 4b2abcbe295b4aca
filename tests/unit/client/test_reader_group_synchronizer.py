"""The reader group's state in its state segment, changed by its members with conditional
updates (client/reader_group_synchronizer.py), on an in-process cluster.

Faults are injected by a segment-store invoker wrapping the cluster's: calls to state
segments fail before they reach the container, or are performed and their reply lost.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.client_factory import ClientFactory
from pravega_ray.client.controller_connection import ControllerClient, ControllerInvoker
from pravega_ray.client.reader_group_synchronizer import ReaderGroupSynchronizer
from pravega_ray.contracts.reader_group_state import STATE_KEY, ReaderGroupState
from pravega_ray.contracts.segment_store import TableUpdate
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.errors import (
    ConflictingUpdateError,
    ControllerUnavailableError,
    DataCorruptionError,
    ReaderGroupNotFoundError,
    SegmentStoreUnavailableError,
)
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(60)


class StateCallFaults:
    """A segment-store invoker over ``cluster`` whose calls to reader-group state segments
    can fail: the next ``fail_before[name]`` fail without reaching the container, the next
    ``lose_reply[name]`` are performed and then their reply is lost (``lose_reply_of[key]``:
    the next ``table_update`` calls carrying ``key``). Counts those calls, and the keys
    ``table_update`` calls carry (``updated``)."""

    def __init__(self, cluster: InProcessCluster) -> None:
        self._cluster = cluster
        self.fail_before: Counter[str] = Counter()
        self.lose_reply: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.updated: Counter[bytes] = Counter()
        self.lose_reply_of: Counter[bytes] = Counter()

    def invoke(self, method: Callable[..., Any], segment: str, *args: Any) -> Future[Any]:
        if not segment.startswith("_system/_RG"):
            return self._cluster.invoke(method, segment, *args)
        name = method.__name__
        self.calls[name] += 1
        lost_key = None
        if name == "table_update":
            keys = [update.key for update in args[0]]
            self.updated.update(keys)
            lost_key = next((k for k in keys if self.lose_reply_of[k] > 0), None)
        if self.fail_before[name] > 0:
            self.fail_before[name] -= 1
            return _failed(name)
        future = self._cluster.invoke(method, segment, *args)
        if self.lose_reply[name] > 0 or lost_key is not None:
            if lost_key is not None:
                self.lose_reply_of[lost_key] -= 1
            else:
                self.lose_reply[name] -= 1
            future.exception(10)  # it landed (or failed) on the container
            return _failed(name)
        return future


def _failed(name: str) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(SegmentStoreUnavailableError(f"reply of {name} lost"))
    return future


class CountingController:
    """A controller invoker that counts calls, and can be made unreachable."""

    def __init__(self, inner: ControllerInvoker) -> None:
        self._inner = inner
        self.calls: Counter[str] = Counter()
        self.down = False

    def invoke(self, method: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        self.calls[method.__name__] += 1
        if self.down:
            raise ControllerUnavailableError("controller down")
        return self._inner.invoke(method, *args, **kwargs)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=2)
    mgr = c.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(4)))
    c.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    yield c
    c.shutdown()


def _write(cluster: InProcessCluster, count: int) -> list[bytes]:
    events = [f"e{i}".encode() for i in range(count)]
    with cluster.create_writer("sc", "st") as writer:
        for i, event in enumerate(events):
            writer.write_event(event, routing_key=f"k{i}")
    return events


def _clients(
    cluster: InProcessCluster,
) -> tuple[ClientFactory, StateCallFaults, CountingController]:
    faults = StateCallFaults(cluster)
    controller = CountingController(cluster._locked)
    clients = ClientFactory(
        ControllerClient(controller, attempts_max=2, pause_s=0.0), SegmentStoreClient(faults)
    )
    return clients, faults, controller


def _drain(readers: list[Any], got: list[bytes]) -> None:
    idle = 0
    while idle < 20:
        progressed = False
        for reader in readers:
            event = reader.read_next_event(timeout_s=0.1)  # 20 idle rounds: 2 s
            if event is not None:
                got.append(event.event)
                progressed = True
        idle = 0 if progressed else idle + 1


def _sync(cluster: InProcessCluster) -> ReaderGroupSynchronizer:
    return ReaderGroupSynchronizer("sc", "rg", cluster.core, cluster.segments)


def test_readers_never_call_the_controller_while_they_read(cluster) -> None:  # type: ignore[no-untyped-def]
    events = _write(cluster, 400)
    clients, faults, controller = _clients(cluster)
    first = clients.create_reader("r1", "sc", "rg")
    second = clients.create_reader("r2", "sc", "rg")
    joined = sum(controller.calls.values())
    controller.down = True  # the controller is gone: readers carry on without it
    got: list[bytes] = []
    _drain([first, second], got)
    assert sorted(got) == sorted(events)
    assert sum(controller.calls.values()) == joined  # no call since they joined
    assert faults.calls["table_get"] > 0  # they synced through the state segment
    state, _ = _sync(cluster).fetch()
    assert sorted(state.readers) == ["r1", "r2"]
    first.close()
    second.close()
    assert _sync(cluster).fetch()[0].readers == []


@pytest.mark.timeout(240)  # about 10 s here; several times that on a loaded CI machine
def test_readers_carry_on_through_lost_replies_of_every_state_change(cluster) -> None:  # type: ignore[no-untyped-def]
    events = _write(cluster, 400)
    clients, faults, _ = _clients(cluster)
    faults.lose_reply.update({"table_update": 2, "table_get": 1})  # the join, the first syncs
    first = clients.create_reader("r1", "sc", "rg")
    got = [first.read_next_event(timeout_s=5).event for _ in range(50)]  # type: ignore[union-attr]
    # A second reader joins: the first must release segments, and those replies are lost.
    faults.lose_reply.update({"table_update": 3})
    faults.fail_before.update({"table_get": 2})
    second = clients.create_reader("r2", "sc", "rg")
    _drain([first, second], got)
    faults.lose_reply.update({"table_update": 2})  # leaving, twice
    first.close()
    second.close()
    assert sorted(got) == sorted(events)  # every event once: nothing stranded, nothing twice
    state = _sync(cluster).fetch()[0]
    assert state.readers == [] and len(state.unassigned) == 4


def test_reader_offline_whose_reply_is_lost_answers_true_once_it_landed(cluster) -> None:  # type: ignore[no-untyped-def]
    clients, faults, _ = _clients(cluster)
    reader = clients.create_reader("r1", "sc", "rg")
    assert reader.read_next_event(timeout_s=0.05) is None  # joined and took the segments
    group = clients.reader_group("sc", "rg")
    faults.lose_reply["table_update"] = 1
    assert group.reader_offline("r1", None)  # landed: the fresh state shows it
    assert group.get_online_readers() == []
    # Lost before it reached the container: not repeated, the caller is told.
    reader2 = clients.create_reader("r2", "sc", "rg")
    assert reader2.read_next_event(timeout_s=0.05) is None
    faults.fail_before["table_update"] = 1
    with pytest.raises(SegmentStoreUnavailableError):
        group.reader_offline("r2", None)
    assert group.get_online_readers() == ["r2"]
    assert group.reader_offline("r2", None)


def test_a_change_beaten_by_another_member_is_applied_again_to_theirs(cluster) -> None:  # type: ignore[no-untyped-def]
    mine, theirs = _sync(cluster), _sync(cluster)
    applied: list[int] = []

    def join(state: ReaderGroupState) -> None:
        applied.append(len(state.readers))
        if len(applied) == 1:  # between my fetch and my store, another member stores
            theirs.update(lambda s: s.add_reader("other", "session-o"))
        state.add_reader("me", "session-m")

    mine.update(join)
    assert applied == [0, 1]  # the second try saw the other member's change
    assert mine.fetch()[0].readers == ["me", "other"]


def test_a_change_that_keeps_losing_is_conflicting_update_error(cluster) -> None:  # type: ignore[no-untyped-def]
    mine = ReaderGroupSynchronizer("sc", "rg", cluster.core, cluster.segments, attempts_max=3)
    theirs = _sync(cluster)
    count = iter(range(100))

    def always_beaten(state: ReaderGroupState) -> None:
        theirs.update(lambda s: s.add_reader(f"other-{next(count)}", "session"))
        state.add_reader("me", "session-m")

    with pytest.raises(ConflictingUpdateError):
        mine.update(always_beaten)
    assert "me" not in mine.fetch()[0].readers


def test_a_change_that_alters_nothing_stores_nothing(cluster) -> None:  # type: ignore[no-untyped-def]
    faults = StateCallFaults(cluster)
    synchronizer = ReaderGroupSynchronizer("sc", "rg", cluster.core, SegmentStoreClient(faults))
    synchronizer.fetch()  # seeds the state segment: one store
    stores = faults.calls["table_update"]
    assert synchronizer.update(lambda s: s.readers) == []
    assert synchronizer.update(lambda s: s.reader_offline("ghost", None)) is False
    assert faults.calls["table_update"] == stores


def test_deleted_and_recreated_group_is_not_found_for_old_members(cluster) -> None:  # type: ignore[no-untyped-def]
    old = _sync(cluster)
    old.update(lambda s: s.add_reader("r1", "session-1"))
    reader = cluster.create_reader("r2", "sc", "rg")
    assert cluster.delete_reader_group("sc", "rg")
    with pytest.raises(ReaderGroupNotFoundError):
        old.fetch()
    assert cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    with pytest.raises(ReaderGroupNotFoundError):
        old.update(lambda s: s.readers)
    with pytest.raises(ReaderGroupNotFoundError):
        reader.read_next_event(timeout_s=0.05)
    assert _sync(cluster).fetch()[0].readers == []  # the new incarnation starts empty


def test_a_damaged_state_is_data_corruption_error(cluster) -> None:  # type: ignore[no-untyped-def]
    synchronizer = _sync(cluster)
    synchronizer.fetch()  # seeded
    for damage in (b"{not json", json.dumps({"scope": 1}).encode()):
        cluster.segments.table_update(
            synchronizer.segment, [TableUpdate(STATE_KEY, damage, None)]
        ).result(10)
        with pytest.raises(DataCorruptionError, match="_system/_RG"):
            synchronizer.fetch()
        with pytest.raises(DataCorruptionError):
            cluster.create_reader("r1", "sc", "rg")


def test_a_group_record_from_before_state_segments_is_upgraded(cluster) -> None:  # type: ignore[no-untyped-def]
    store = cluster.core._store
    state, version = store.get_reader_group("sc", "rg")
    state.state_segment = None
    state.add_reader("old", "old-session")  # a member recorded in the controller's record
    first = min(state.unassigned)
    state.assigned["old"] = {first: 17}
    del state.unassigned[first]
    store.save_reader_group(state, version)
    record = cluster.core.get_reader_group("sc", "rg")
    assert record["state_segment"].startswith("_system/_RG")
    group = cluster.reader_group("sc", "rg")
    assert group.get_online_readers() == ["old"]  # the live state was seeded from the record
    assert group.reader_offline("old", None)
    assert _sync(cluster).fetch()[0].unassigned[first] == 17


def test_state_survives_a_restart_of_the_whole_cluster(cluster) -> None:  # type: ignore[no-untyped-def]
    events = _write(cluster, 200)
    reader = cluster.create_reader("r1", "sc", "rg")
    got = [reader.read_next_event(timeout_s=5).event for _ in range(100)]  # type: ignore[union-attr]
    reader._sync()  # report its offsets now
    before = _sync(cluster).fetch()[0]
    cluster.restart()
    assert _sync(cluster).fetch()[0] == before
    _drain([reader], got)
    assert sorted(got) == sorted(events)
    reader.close()
