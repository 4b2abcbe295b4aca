"""The public state synchronizer (client/state_synchronizer.py, Pravega's StateSynchronizer) on
an in-process cluster: conditional updates retried on conflict, seeding once, stores whose
outcome is unknown applied once, hostile inputs, deletion and the scope's deletes.

Faults are injected by a segment-store invoker wrapping the cluster's: calls to synchronizer
segments fail before they reach the container, or are performed and their reply lost.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.client_factory import ClientFactory
from pravega_ray.client.controller_connection import ControllerClient
from pravega_ray.client.reader_group_synchronizer import ReaderGroupSynchronizer
from pravega_ray.client.state_synchronizer import WRITER_IDS_KEPT, StateSynchronizer
from pravega_ray.constants import TABLE_VALUE_BYTES_MAX
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.errors import (
    ClientClosedError,
    IllegalStateError,
    InvalidArgumentError,
    InvalidNameError,
    ScopeNotEmptyError,
    ScopeNotFoundError,
    SegmentStoreUnavailableError,
    SerializationError,
    StateSynchronizerNotFoundError,
)
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import container_for_segment

pytestmark = pytest.mark.timeout(60)

JSON = pr.JsonSerializer()


class Faults:
    """A segment-store invoker over ``cluster`` whose calls to synchronizer segments can
    fail: the next ``fail_before[name]`` without reaching the container, the next
    ``lose_reply[name]`` performed with their reply lost (``between`` runs then, as if
    another client acted before this one looked again). Counts those calls."""

    def __init__(self, cluster: InProcessCluster) -> None:
        self._cluster = cluster
        self.fail_before: Counter[str] = Counter()
        self.lose_reply: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.between: Callable[[], None] = lambda: None

    def invoke(self, method: Callable[..., Any], segment: str, *args: Any) -> Future[Any]:
        if not segment.startswith("_system/_SYNC"):
            return self._cluster.invoke(method, segment, *args)
        name = method.__name__
        self.calls[name] += 1
        if self.fail_before[name] > 0:
            self.fail_before[name] -= 1
            return _failed(name)
        future = self._cluster.invoke(method, segment, *args)
        if self.lose_reply[name] > 0:
            self.lose_reply[name] -= 1
            future.exception(10)  # it landed (or failed) on the container
            self.between()
            return _failed(name)
        return future


def _failed(name: str) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(SegmentStoreUnavailableError(f"reply of {name} lost"))
    return future


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=2)
    c.stream_manager().create_scope("sc")
    yield c
    c.shutdown()


def _faulty(cluster: InProcessCluster) -> tuple[ClientFactory, Faults]:
    faults = Faults(cluster)
    controller = ControllerClient(cluster._locked, attempts_max=2, pause_s=0.0)
    return ClientFactory(controller, SegmentStoreClient(faults)), faults


def _plus(n: int) -> Callable[[dict[str, int]], dict[str, int]]:
    return lambda state: {**state, "n": state["n"] + n}


# --- the contract -------------------------------------------------------------------------------
def test_updates_are_seen_by_other_clients_after_fetch_updates(cluster) -> None:  # type: ignore[no-untyped-def]
    a = cluster.state_synchronizer("sc", "conf", JSON, initial={"n": 0})
    b = cluster.state_synchronizer("sc", "conf", JSON, initial={"n": 99})  # ignored: exists
    assert isinstance(a, pr.StateSynchronizer)
    assert a.get_state() == b.get_state() == {"n": 0}
    assert a.update_state(_plus(5)) == {"n": 5}
    assert a.get_state() == {"n": 5}
    assert b.get_state() == {"n": 0}  # the local copy: no round trip
    b.fetch_updates()
    assert b.get_state() == {"n": 5}
    assert b.update_state(_plus(1)) == {"n": 6}  # applied to the latest state
    a.compact()  # stores nothing, brings the copy up to date
    assert a.get_state() == {"n": 6}
    assert cluster.list_state_synchronizers("sc") == ["conf"]


def test_racing_updates_lose_none(cluster) -> None:  # type: ignore[no-untyped-def]
    syncs = [cluster.state_synchronizer("sc", "count", JSON, initial={"n": 0}) for _ in range(2)]
    calls = Counter[int]()

    def run(i: int) -> None:
        def inc(state: dict[str, int]) -> dict[str, int]:
            calls[i] += 1
            return {"n": state["n"] + 1}

        for _ in range(100):
            syncs[i].update_state(inc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(50)
    syncs[0].fetch_updates()
    assert syncs[0].get_state() == {"n": 200}
    assert sum(calls.values()) >= 200  # the losers of a race applied inc again


def test_two_first_clients_cannot_both_seed(cluster) -> None:  # type: ignore[no-untyped-def]
    got: list[object] = []
    barrier = threading.Barrier(4)

    def first(i: int) -> None:
        barrier.wait()
        got.append(cluster.state_synchronizer("sc", "seed", JSON, initial={"by": i}).get_state())

    threads = [threading.Thread(target=first, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(got) == 4 and all(state == got[0] for state in got)
    assert cluster.list_state_synchronizers("sc") == ["seed"]


def test_an_update_that_changes_nothing_or_raises_stores_nothing(cluster) -> None:  # type: ignore[no-untyped-def]
    clients, faults = _faulty(cluster)
    sync = clients.state_synchronizer("sc", "s", JSON, initial={"n": 1})
    stores = faults.calls["table_update"]
    assert sync.update_state(lambda state: dict(state)) == {"n": 1}

    def boom(state: dict[str, int]) -> dict[str, int]:
        raise KeyError("from fn")

    with pytest.raises(KeyError, match="from fn"):
        sync.update_state(boom)
    with pytest.raises(InvalidArgumentError):
        sync.update_state("not a function")  # type: ignore[arg-type]
    assert faults.calls["table_update"] == stores
    assert sync.get_state() == {"n": 1}


def test_a_state_over_the_value_limit_is_refused_and_nothing_stored(cluster) -> None:  # type: ignore[no-untyped-def]
    sync = cluster.state_synchronizer("sc", "s", JSON, initial={"n": 1})
    huge = "x" * (TABLE_VALUE_BYTES_MAX + 1)
    with pytest.raises(InvalidArgumentError, match="sc/s"):
        sync.update_state(lambda state: {"big": huge})
    sync.fetch_updates()
    assert sync.get_state() == {"n": 1}
    with pytest.raises(InvalidArgumentError):  # refused before anything is created
        cluster.state_synchronizer("sc", "big", JSON, initial={"big": huge})
    assert cluster.list_state_synchronizers("sc") == ["s"]


def test_hostile_names_scopes_and_serializers(cluster) -> None:  # type: ignore[no-untyped-def]
    for scope, name in [("sc", "../x"), ("sc", "a/b"), ("sc", "_sys"), ("sc", ""), ("..", "s")]:
        with pytest.raises(InvalidNameError):
            cluster.state_synchronizer(scope, name, JSON, initial={})
    with pytest.raises(InvalidNameError):
        cluster.state_synchronizer("sc", 7, JSON, initial={})
    with pytest.raises(ScopeNotFoundError):
        cluster.state_synchronizer("nope", "s", JSON, initial={})
    with pytest.raises(InvalidArgumentError):
        cluster.state_synchronizer("sc", "s", pr.JsonSerializer, initial={})  # the class
    with pytest.raises(InvalidArgumentError):
        cluster.state_synchronizer("sc", "s", object(), initial={})
    with pytest.raises(SerializationError):
        cluster.state_synchronizer("sc", "s", JSON, initial={"x": object()})
    assert cluster.list_state_synchronizers("sc") == []


def test_a_state_the_serializer_cannot_decode_names_the_synchronizer(cluster) -> None:  # type: ignore[no-untyped-def]
    cluster.state_synchronizer("sc", "s", pr.BytesSerializer(), initial=b"\xff\xfe not json")
    with pytest.raises(SerializationError, match="sc/s") as caught:
        cluster.state_synchronizer("sc", "s", JSON, initial={})
    assert caught.value.data == b"\xff\xfe not json"
    assert caught.value.segment is not None and caught.value.key == b"state"


def test_closed_synchronizer_refuses_calls_but_keeps_its_copy(cluster) -> None:  # type: ignore[no-untyped-def]
    with cluster.state_synchronizer("sc", "s", JSON, initial={"n": 1}) as sync:
        pass
    assert sync.get_state() == {"n": 1}
    for call in (sync.fetch_updates, sync.compact, lambda: sync.update_state(_plus(1))):
        with pytest.raises(ClientClosedError):
            call()
    sync.close()  # idempotent


# --- faults -------------------------------------------------------------------------------------
def test_a_store_whose_reply_is_lost_is_applied_once(cluster) -> None:  # type: ignore[no-untyped-def]
    clients, faults = _faulty(cluster)
    sync = clients.state_synchronizer("sc", "s", JSON, initial={"n": 0})
    faults.lose_reply["table_update"] = 1
    assert sync.update_state(_plus(1)) == {"n": 1}
    faults.fail_before["table_update"] = 2  # never reached the container: tried again
    assert sync.update_state(_plus(1)) == {"n": 2}
    faults.fail_before["table_get"] = 1
    sync.fetch_updates()
    assert cluster.state_synchronizer("sc", "s", JSON, initial={}).get_state() == {"n": 2}


def test_a_lost_store_overwritten_by_others_before_the_retry_is_applied_once(cluster) -> None:  # type: ignore[no-untyped-def]
    clients, faults = _faulty(cluster)
    sync = clients.state_synchronizer("sc", "s", JSON, initial={"n": 0})
    other = cluster.state_synchronizer("sc", "s", JSON, initial={})

    def others() -> None:  # fewer than WRITER_IDS_KEPT stores by another client
        for _ in range(WRITER_IDS_KEPT // 2):
            other.update_state(_plus(10))

    faults.between = others
    faults.lose_reply["table_update"] = 1
    sync.update_state(_plus(1))
    sync.fetch_updates()
    assert sync.get_state() == {"n": 1 + 10 * (WRITER_IDS_KEPT // 2)}


def test_an_update_whose_container_restarts_mid_update_is_applied_once(cluster) -> None:  # type: ignore[no-untyped-def]
    sync = cluster.state_synchronizer("sc", "s", JSON, initial={"n": 0})
    owner = container_for_segment(sync.segment, cluster.container_count)
    calls = []

    def inc_and_restart(state: dict[str, int]) -> dict[str, int]:
        calls.append(state["n"])
        if len(calls) == 1:
            cluster.restart_container(owner)
        return {"n": state["n"] + 1}

    assert sync.update_state(inc_and_restart) == {"n": 1}
    sync.update_state(_plus(1))
    assert cluster.state_synchronizer("sc", "s", JSON, initial={}).get_state() == {"n": 2}
    # The container restarts after the store landed and before its reply came back.
    clients, faults = _faulty(cluster)
    faulty = clients.state_synchronizer("sc", "s", JSON, initial={})
    faults.between = lambda: cluster.restart_container(owner)
    faults.lose_reply["table_update"] = 1
    assert faulty.update_state(_plus(1)) == {"n": 3}
    assert cluster.state_synchronizer("sc", "s", JSON, initial={}).get_state() == {"n": 3}


def test_state_survives_a_restart_of_the_whole_cluster(cluster) -> None:  # type: ignore[no-untyped-def]
    sync = cluster.state_synchronizer("sc", "s", JSON, initial={"n": 0})
    sync.update_state(_plus(3))
    cluster.restart()
    sync.update_state(_plus(1))
    assert cluster.state_synchronizer("sc", "s", JSON, initial={}).get_state() == {"n": 4}


# --- deletes ------------------------------------------------------------------------------------
def test_a_deleted_synchronizer_is_not_found_and_a_new_one_starts_afresh(cluster) -> None:  # type: ignore[no-untyped-def]
    sync = cluster.state_synchronizer("sc", "s", JSON, initial={"n": 0})
    sync.update_state(_plus(7))
    assert cluster.delete_state_synchronizer("sc", "s")
    assert not cluster.delete_state_synchronizer("sc", "s")
    with pytest.raises(StateSynchronizerNotFoundError):
        sync.fetch_updates()
    with pytest.raises(StateSynchronizerNotFoundError):
        sync.update_state(_plus(1))
    assert sync.get_state() == {"n": 7}  # the local copy stays
    again = cluster.state_synchronizer("sc", "s", JSON, initial={"n": 0})
    assert again.get_state() == {"n": 0}
    assert again.segment != sync.segment
    with pytest.raises(StateSynchronizerNotFoundError):  # the old client never sees the new
        sync.fetch_updates()


def _segments(cluster: InProcessCluster) -> set[str]:
    found: set[str] = set()
    for i in range(cluster.container_count):
        found |= set(cluster.run(cluster.container(i).list_segments()).result(10))
    return found


def test_scope_deletes_refuse_or_remove_synchronizers(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    sync = cluster.state_synchronizer("sc", "s", JSON, initial={"n": 0})
    assert sync.segment in _segments(cluster)
    with pytest.raises(ScopeNotEmptyError):
        mgr.delete_scope("sc")
    assert mgr.delete_scope("sc", recursive=True)
    deadline = time.monotonic() + 30
    while "sc" in mgr.list_scopes():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert sync.segment not in _segments(cluster)
    assert not [k for k in cluster.metadata.all_keys() if k.startswith("synchronizers/")]
    with pytest.raises(StateSynchronizerNotFoundError):
        sync.fetch_updates()
    with pytest.raises(ScopeNotFoundError):
        cluster.state_synchronizer("sc", "s", JSON, initial={})
    mgr.create_scope("sc")
    assert cluster.state_synchronizer("sc", "s", JSON, initial={"n": 5}).get_state() == {"n": 5}


def test_no_synchronizer_is_created_in_a_scope_being_deleted(cluster) -> None:  # type: ignore[no-untyped-def]
    cluster.core._store.mark_scope_deleting("sc")  # as delete_scope_recursive's first step
    with pytest.raises(IllegalStateError):
        cluster.state_synchronizer("sc", "s", JSON, initial={})


def test_the_reader_group_state_is_a_state_synchronizer() -> None:
    assert issubclass(ReaderGroupSynchronizer, StateSynchronizer)
