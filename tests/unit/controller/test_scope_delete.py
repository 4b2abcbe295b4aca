"""The recursive delete of a scope as one controller workflow (``scope_workflows.py``):
creates refused from the mark on, a create racing the mark undone, every object removed,
resumable after a kill at every step, on an in-process cluster (memory backends)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.inprocess import InProcessCluster
from tests.unit.controller.test_transaction_faults import die_once_after

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=3)
    yield c
    c.shutdown()


def _filled(cluster: InProcessCluster, scope: str = "sc") -> pr.StreamManager:
    """A scope with two streams (one with an open transaction), a table, a group and a
    state synchronizer."""
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    mgr.create_stream(scope, "a", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    mgr.create_stream(scope, "b", None)
    mgr.create_key_value_table(scope, "t", 2)
    cluster.create_reader_group(scope, "rg", pr.ReaderGroupConfig.for_streams(f"{scope}/a"))
    cluster.state_synchronizer(scope, "sync", pr.JsonSerializer(), initial={"n": 1})
    writer = cluster.create_transactional_writer(scope, "b", pr.BytesSerializer())
    txn = writer.begin_txn()
    txn.write_event(b"never committed")
    return mgr


def _leftovers(cluster: InProcessCluster, scope: str = "sc") -> list[str]:
    """Records and segments of ``scope`` still stored; but the ``deleted/`` records, which
    must stay: a stream or table re-created under a deleted one's name numbers its segments
    after the deleted one's, so a client of the old one never writes into the new one."""
    records = [
        k
        for k in cluster.metadata.all_keys()
        if f"/{scope}/" in f"/{k}/" and not k.startswith("deleted/")
    ]
    segments: set[str] = set()
    for i in range(cluster.container_count):
        segments |= set(cluster.run(cluster.container(i).list_segments()).result(10))
    # A state synchronizer's segment is in _system (only this module's scopes make them).
    return records + sorted(s for s in segments if s.startswith((f"{scope}/", "_system/_SYNC")))


def _wait_gone(cluster: InProcessCluster, scope: str = "sc", timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while scope in cluster.core.list_scopes():
        assert time.monotonic() < deadline, f"scope {scope} still there"
        time.sleep(0.01)


def test_everything_in_the_scope_goes_and_an_open_transaction_is_aborted(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _filled(cluster)
    assert mgr.delete_scope("sc", recursive=True)
    assert "sc" not in mgr.list_scopes()
    assert _leftovers(cluster) == []
    assert not mgr.delete_scope("sc", recursive=True)  # absent now
    # The name is free again, for a new scope with new objects of the old names.
    _filled(cluster)
    assert mgr.list_streams("sc") == ["a", "b"]


def test_creates_are_refused_while_the_delete_runs_and_nothing_is_created(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _filled(cluster)
    cluster.processor.stop()  # the delete stays under way
    assert cluster.core.delete_scope_recursive("sc")
    assert cluster.core.delete_scope_recursive("sc")  # again: harmless
    creates: list[Callable[[], Any]] = [
        lambda: mgr.create_stream("sc", "new", None),
        lambda: mgr.create_key_value_table("sc", "new", 1),
        lambda: cluster.create_reader_group("sc", "new", pr.ReaderGroupConfig.for_streams("sc/a")),
    ]
    for create in creates:
        with pytest.raises(pr.IllegalStateError, match="being deleted"):
            create()
    assert "sc" in mgr.list_scopes()
    assert mgr.list_streams("sc") == ["a", "b"]
    assert mgr.list_key_value_tables("sc") == ["t"]
    cluster.restart_processor()
    _wait_gone(cluster)
    assert _leftovers(cluster) == []


@pytest.mark.parametrize("kind", ["stream", "table", "group"])
def test_a_create_whose_record_lands_just_before_the_mark_undoes_itself(cluster, kind: str) -> None:  # type: ignore[no-untyped-def]
    """The create checked the scope, then the delete marked it and listed nothing, then the
    create's record landed: the create reads the scope again and removes its record."""
    mgr = _filled(cluster)
    store = cluster.core._store
    method = {
        "stream": "create_stream",
        "table": "create_key_value_table",
        "group": "create_reader_group",
    }[kind]
    original = getattr(store, method)

    def create_then_marked(*args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        store.mark_scope_deleting("sc")

    setattr(store, method, create_then_marked)
    create: Callable[[], Any] = {
        "stream": lambda: mgr.create_stream("sc", "new", None),
        "table": lambda: mgr.create_key_value_table("sc", "new", 1),
        "group": lambda: cluster.create_reader_group(
            "sc", "new", pr.ReaderGroupConfig.for_streams("sc/a")
        ),
    }[kind]
    with pytest.raises(pr.IllegalStateError, match="being deleted"):
        create()
    setattr(store, method, original)
    assert all("/new" not in key for key in _leftovers(cluster))
    assert mgr.delete_scope("sc", recursive=True)  # the mark stands: the delete ends it
    assert _leftovers(cluster) == []


SCOPE_STEPS = [
    "reader groups deleted",
    "key-value tables deleted",
    "state synchronizers deleted",
    "streams asked to seal and delete",
    "segments sealed",
    "numbers remembered",
    "segments deleted",
]


@pytest.mark.parametrize("step", SCOPE_STEPS)
def test_the_processor_killed_at_every_step_resumes_and_ends_once(cluster, step: str) -> None:  # type: ignore[no-untyped-def]
    _filled(cluster)
    killed: list[str] = []
    cluster.restart_processor(step=die_once_after(step, killed))
    assert cluster.core.delete_scope_recursive("sc")
    deadline = time.monotonic() + 20
    while not killed:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    cluster.restart_processor()  # a new processor resumes from its checkpoint
    _wait_gone(cluster)
    assert _leftovers(cluster) == []


def test_a_controller_killed_between_the_mark_and_the_request_resumes_the_delete(cluster) -> None:  # type: ignore[no-untyped-def]
    _filled(cluster)
    cluster.core._store.mark_scope_deleting("sc")  # and no request posted
    cluster.restart()  # the new controller's first call resumes it
    assert cluster.core.list_scopes() == ["sc"]  # a read resumes nothing
    cluster.core.create_scope("other")  # a call that changes something does
    _wait_gone(cluster)
    assert _leftovers(cluster) == []


def test_a_group_of_the_scope_stops_being_a_subscriber_of_a_stream_elsewhere(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    mgr.create_scope("keep")
    mgr.create_stream("keep", "s", None)
    mgr.create_scope("sc")
    config = pr.ReaderGroupConfig.for_streams(
        "keep/s", retention_type=pr.RetentionConfigType.MANUAL_RELEASE_AT_USER_STREAMCUT
    )
    cluster.create_reader_group("sc", "rg", config)
    assert cluster.core.list_subscribers("keep", "s") == ["sc/rg"]
    assert mgr.delete_scope("sc", recursive=True)
    assert cluster.core.list_subscribers("keep", "s") == []
    assert mgr.list_streams("keep") == ["s"]


def test_creates_racing_the_delete_leave_nothing_behind(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = _filled(cluster)
    outcomes: list[str] = []
    stop = threading.Event()

    def create_many(prefix: str) -> None:
        n = 0
        while not stop.is_set():
            try:
                if prefix == "s":
                    mgr.create_stream("sc", f"s{n}", None)
                else:
                    mgr.create_key_value_table("sc", f"t{n}", 1)
                outcomes.append("created")
            except pr.IllegalStateError:
                outcomes.append("refused")
            except pr.ScopeNotFoundError:
                outcomes.append("gone")
            n += 1

    threads = [threading.Thread(target=create_many, args=(p,)) for p in ("s", "t")]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    assert mgr.delete_scope("sc", recursive=True)
    time.sleep(0.1)
    stop.set()
    for thread in threads:
        thread.join(30)
    assert "created" in outcomes and {"refused", "gone"} & set(outcomes)
    assert "sc" not in mgr.list_scopes()
    assert _leftovers(cluster) == []
