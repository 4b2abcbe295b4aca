"""Checkpoint acknowledgements: each reader records passing a checkpoint under a key of its
own in the group's state segment, and they are folded into the state in one update once a
checkpoint has them all. The layout (keys, folding, sweeping), kills between the steps
(a reader gone after acknowledging, before folding), stored states from before ids, and
the notice that wakes watching readers."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.reader import EventStreamReader
from pravega_ray.client.reader_group_synchronizer import ReaderGroupSynchronizer
from pravega_ray.contracts.checkpoint_state import (
    ack_key,
    ack_key_checkpoint_id,
)
from pravega_ray.contracts.reader_group_state import STATE_KEY, ReaderGroupState
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import parse_segment_name
from pravega_ray.timing import ManualClock
from tests.checks import group_test_cluster, write_numbered
from tests.unit.client.test_checkpoints import _Checkpointer, _drain, _wait_started
from tests.unit.client.test_reader_group_synchronizer import StateCallFaults

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = group_test_cluster(4)
    yield c
    c.shutdown()


def _group(cluster: InProcessCluster, name: str = "g") -> pr.ReaderGroup:
    cluster.create_reader_group("sc", name, pr.ReaderGroupConfig.for_streams("sc/st"))
    return cluster.reader_group("sc", name)


def _ack_keys(group: pr.ReaderGroup) -> list[bytes]:
    """The acknowledgement keys in the group's state segment now."""
    sync = group._state
    keys: list[bytes] = []
    cursor: bytes | None = None
    while True:
        entries, cursor = sync._segments.table_iterate(sync.segment, cursor, 1000, False).result()
        keys += [e.key for e in entries if ack_key_checkpoint_id(e.key) is not None]
        if cursor is None:
            return sorted(keys)


def _until_marker(reader: Any, name: str, got: list[int], limit: int = 400) -> Any:
    """Read until ``reader`` returns the marker ``name``; the marker."""
    for _ in range(limit):
        ev = reader.read_next_event(0.05)
        if ev is None:
            continue
        if ev.checkpoint_name is not None:
            assert ev.checkpoint_name == name
            return ev
        got.append(ev.event["n"])
    raise AssertionError(f"no marker {name}")


def _state(group: pr.ReaderGroup) -> ReaderGroupState:
    return group._state.fetch()[0]


# --- the state's logic ----------------------------------------------------------------------
def _two_readers() -> ReaderGroupState:
    state = ReaderGroupState.new("sc", "g", ["sc/st"], ["a", "b"])
    state.add_reader("r1", "s1")
    state.add_reader("r2", "s2")
    state.sync("r1", "s1", {}, [])
    state.sync("r2", "s2", {}, [])
    state.create_checkpoint("cp", False, 0)
    return state


def test_fold_records_valid_acks_once_and_ignores_the_rest() -> None:
    state = _two_readers()
    cid = state.checkpoints.outstanding[0]["id"]
    good = {"session": "s1", "generation": 0, "positions": {"a": 5}}
    bad = {
        (cid, "r2"): {"session": "old", "generation": 0, "positions": {"b": 1}},  # other session
        ("other-id", "r2"): {"session": "s2", "generation": 0, "positions": {"b": 1}},
        (cid, "ghost"): {"session": "x", "generation": 0, "positions": {}},
    }
    assert state.fold_acks({(cid, "r1"): good, **bad}) == []
    assert state.checkpoints.outstanding[0]["readers_left"] == ["r2"]
    assert state.checkpoints.outstanding[0]["positions"] == {"a": 5}
    before = state.to_dict()
    assert state.fold_acks({(cid, "r1"): good}) == []  # twice: nothing changes
    assert state.to_dict() == before
    stale = {"session": "s2", "generation": -1, "positions": {"b": 9}}
    assert state.fold_acks({(cid, "r2"): stale}) == []  # an older generation
    malformed = {"session": "s2", "generation": 0, "positions": {"b": -1}}
    assert state.fold_acks({(cid, "r2"): malformed}) == []
    done = {"session": "s2", "generation": 0, "positions": {"b": 7}}
    assert state.fold_acks({(cid, "r2"): done}) == ["cp"]
    assert state.checkpoints.get_completed("cp") == {
        "name": "cp",
        "positions": {"a": 5, "b": 7},
    }


def test_an_acknowledged_reader_is_not_asked_again_but_stays_frozen() -> None:
    state = _two_readers()
    cid = state.checkpoints.outstanding[0]["id"]
    asked = state.sync("r1", "s1", {}, [])
    assert (asked.checkpoint, asked.checkpoint_id, asked.unfolded) == ("cp", cid, ())
    acked = state.sync("r1", "s1", {}, ["a"], acknowledged=frozenset({cid}))
    assert acked.checkpoint is None and acked.unfolded == (cid,)
    assert acked.owned == {"a": 0}  # its completed segment is kept until it is folded
    assert "a" not in state.completed


def test_a_stored_state_from_before_checkpoint_ids_loads_and_folds() -> None:
    state = _two_readers()
    stored = state.to_dict()
    del stored["checkpoints"]["outstanding"][0]["id"]
    loaded = ReaderGroupState.from_dict(stored)
    cid = loaded.checkpoints.outstanding[0]["id"]
    assert cid == "~cp" and ack_key_checkpoint_id(ack_key(cid, "r1")) == cid
    assert ReaderGroupState.from_dict(loaded.to_dict()).checkpoints.outstanding[0]["id"] == cid
    acks = {
        (cid, "r1"): {"session": "s1", "generation": 0, "positions": {"a": 1}},
        (cid, "r2"): {"session": "s2", "generation": 0, "positions": {"b": 2}},
    }
    assert loaded.fold_acks(acks) == ["cp"]


def test_ack_keys_parse_back_whatever_the_reader_id() -> None:
    for reader_id in ["r1", "a\x00b", "ünï", "x" * 255]:
        assert ack_key_checkpoint_id(ack_key("c0ffee", reader_id)) == "c0ffee"
    assert ack_key_checkpoint_id(STATE_KEY) is None


# --- on a cluster ---------------------------------------------------------------------------
def test_acks_are_keys_of_their_own_folded_by_the_last_reader(cluster: InProcessCluster) -> None:
    write_numbered(cluster, 0, 40, keys=11)
    group = _group(cluster)
    readers = [cluster.create_reader(f"r{i}", "sc", "g", pr.JsonSerializer()) for i in range(3)]
    got: list[int] = []
    _drain(readers, got)
    waiter = _Checkpointer(group, "cp")
    _wait_started(group, "cp")
    cid = _state(group).checkpoints.find("cp")["id"]  # type: ignore[index]
    markers = {}
    for reader in readers[:2]:
        markers[reader.reader_id] = _until_marker(reader, "cp", got)
        reader.read_next_event(0.05)  # acknowledges
    # Two acknowledgements stored under their own keys; the state still waits for all.
    assert _ack_keys(group) == sorted(ack_key(cid, r.reader_id) for r in readers[:2])
    state = _state(group)
    assert state.checkpoints.find("cp")["readers_left"] == ["r0", "r1", "r2"]  # type: ignore[index]
    markers["r2"] = _until_marker(readers[2], "cp", got)
    readers[2].read_next_event(0.05)  # the last one: folds them all
    checkpoint = waiter.join()
    assert sorted(got) == list(range(40))
    expected = {}
    for marker in markers.values():
        expected.update(
            {parse_segment_name(s).segment_id: o for s, o in marker.position.to_dict().items()}
        )
    assert checkpoint.cuts["sc/st"].positions == expected
    assert _ack_keys(group) == []  # removed in the folding batch
    for reader in readers:
        reader.close()


def test_a_reader_gone_after_acknowledging_is_folded_by_the_initiator(
    cluster: InProcessCluster,
) -> None:
    write_numbered(cluster, 0, 20)
    group = _group(cluster)
    reader = cluster.create_reader("r1", "sc", "g", pr.JsonSerializer())
    got: list[int] = []
    _drain([reader], got)
    # It dies right after storing its acknowledgement: it never folds.
    reader._fold = lambda hint=None, own=None: []  # type: ignore[method-assign]
    waiter = _Checkpointer(group, "cp")
    marker = _until_marker(reader, "cp", got)
    reader.read_next_event(0.05)  # acknowledges, never folds
    checkpoint = waiter.join()  # the initiator's look folded it
    assert sum(checkpoint.cuts["sc/st"].positions.values()) == sum(
        marker.position.to_dict().values()
    )
    reader.close()


def test_offline_after_acknowledging_keeps_the_acknowledged_positions(
    cluster: InProcessCluster,
) -> None:
    write_numbered(cluster, 0, 40, keys=13)
    group = _group(cluster)
    dead = cluster.create_reader("dead", "sc", "g", pr.JsonSerializer())
    other = cluster.create_reader("other", "sc", "g", pr.JsonSerializer())
    got: list[int] = []
    _drain([dead, other], got)
    waiter = _Checkpointer(group, "cp")
    _wait_started(group, "cp")
    marker = _until_marker(dead, "cp", got)
    dead.read_next_event(0.05)  # acknowledges (not the last: nothing folded)
    write_numbered(cluster, 40, 40, keys=13)
    after: list[int] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # reads on and stores offsets past its ack
        ev = dead.read_next_event(0.05)
        if ev is not None:
            after.append(ev.event["n"])
    synced = _state(group).assigned["dead"]
    acked = marker.position.to_dict()
    assert any(synced[s] > acked[s] for s in acked)
    # ... then dies. Declared offline: its acknowledged position is what the cut holds.
    assert group.reader_offline("dead")
    _until_marker(other, "cp", got)
    other.read_next_event(0.05)
    checkpoint = waiter.join()
    positions = {
        s: o
        for s, o in group._state.fetch()[0].checkpoints.get_completed("cp")["positions"].items()  # type: ignore[index]
        if s in acked
    }
    assert positions == acked
    assert checkpoint.name == "cp"
    other.close()


def test_acks_of_a_cancelled_checkpoint_are_swept(cluster: InProcessCluster) -> None:
    write_numbered(cluster, 0, 20)
    group = _group(cluster)
    r1 = cluster.create_reader("r1", "sc", "g", pr.JsonSerializer())
    r2 = cluster.create_reader("r2", "sc", "g", pr.JsonSerializer())
    got: list[int] = []
    _drain([r1, r2], got)
    waiter = _Checkpointer(group, "lost", timeout_s=1.0)
    _wait_started(group, "lost")
    _until_marker(r1, "lost", got)
    r1.read_next_event(0.05)  # acknowledges; r2 never does: the checkpoint times out
    with pytest.raises(pr.CheckpointFailedError):
        waiter.join()
    assert len(_ack_keys(group)) == 1  # left behind
    waiter = _Checkpointer(group, "cp")
    _wait_started(group, "cp")
    for reader in (r1, r2):
        _until_marker(reader, "cp", got)
    for reader in (r1, r2):
        reader.read_next_event(0.05)
    waiter.join()
    deadline = time.monotonic() + 5
    while _ack_keys(group) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _ack_keys(group) == []
    r1.close()
    r2.close()


def test_a_checkpoint_notice_wakes_a_reader_before_its_periodic_sync(
    cluster: InProcessCluster,
) -> None:
    write_numbered(cluster, 0, 10)
    group = _group(cluster)
    clock = ManualClock()  # never moves: no periodic sync ever falls due
    reader: EventStreamReader[Any] = EventStreamReader(
        "r1",
        "sc",
        "g",
        pr.JsonSerializer(),
        cluster.core,
        SegmentStoreClient(cluster),
        clock=clock,
    )
    got: list[int] = []
    while len(got) < 10:
        ev = reader.read_next_event(0.05)
        if ev is not None:
            got.append(ev.event["n"])
    seen: list[Any] = []
    thread = threading.Thread(target=lambda: seen.append(reader.read_next_event(1.0)), daemon=True)
    thread.start()
    time.sleep(0.3)  # the reader waits on its reads and its watch
    assert thread.is_alive()
    waiter = _Checkpointer(group, "cp")
    thread.join(20)
    assert not thread.is_alive(), "the notice did not wake the reader"
    assert seen[0] is not None and seen[0].checkpoint_name == "cp"
    done = threading.Thread(target=lambda: reader.read_next_event(0.0), daemon=True)
    done.start()
    waiter.join()
    done.join(20)
    reader.close()


def test_an_acknowledgement_whose_reply_is_lost_is_stored_again(
    cluster: InProcessCluster,
) -> None:
    write_numbered(cluster, 0, 20)
    group = _group(cluster)
    faults = StateCallFaults(cluster)
    r1: EventStreamReader[Any] = EventStreamReader(
        "r1", "sc", "g", pr.JsonSerializer(), cluster.core, SegmentStoreClient(faults)
    )
    r2 = cluster.create_reader("r2", "sc", "g", pr.JsonSerializer())
    got: list[int] = []
    _drain([r1, r2], got)
    waiter = _Checkpointer(group, "cp")
    _wait_started(group, "cp")
    cid = _state(group).checkpoints.find("cp")["id"]  # type: ignore[index]
    marker = _until_marker(r1, "cp", got)
    # The acknowledgement lands, its reply is lost. Named by key: an offsets save falling due
    # meanwhile (a slow machine) is another update.
    faults.lose_reply_of[ack_key(cid, "r1")] = 1
    before = faults.updated[ack_key(cid, "r1")]
    r1.read_next_event(0.05)  # stores it again (idempotent)
    assert faults.updated[ack_key(cid, "r1")] == before + 2
    assert _ack_keys(group) == [ack_key(cid, "r1")]
    _until_marker(r2, "cp", got)
    r2.read_next_event(0.05)  # the last one: folds
    checkpoint = waiter.join()
    cut = checkpoint.cuts["sc/st"].positions
    for segment, offset in marker.position.to_dict().items():
        assert cut[parse_segment_name(segment).segment_id] == offset
    r1.close()
    r2.close()


def test_two_readers_passing_at_once_the_later_store_folds(cluster: InProcessCluster) -> None:
    """The interleaving that could lose a fold: each reader looks for the other's
    acknowledgement before either stored one, then both store; the look after each store
    (in this order) completes the checkpoint exactly once."""
    _group(cluster)
    sync = ReaderGroupSynchronizer("sc", "g", cluster.core, SegmentStoreClient(cluster))
    for reader_id in ("r1", "r2"):
        sync.update(lambda s, r=reader_id: s.add_reader(r, f"s-{r}"))
    for reader_id in ("r1", "r2"):
        sync.update(lambda s, r=reader_id: s.sync(r, f"s-{r}", {}, []))
    sync.update(lambda s: s.create_checkpoint("cp", False, 0))
    state = sync.fetch()[0]
    cid = state.checkpoints.find("cp")["id"]  # type: ignore[index]
    acks = {
        r: {"session": f"s-{r}", "generation": 0, "positions": dict(state.assigned[r])}
        for r in ("r1", "r2")
    }
    for r in ("r1", "r2"):  # both look first: neither is the last
        assert sync.fold(own={(cid, r): acks[r]}) == []
    sync.acknowledge(cid, "r1", "s-r1", 0, acks["r1"]["positions"])  # type: ignore[arg-type]
    sync.acknowledge(cid, "r2", "s-r2", 0, acks["r2"]["positions"])  # type: ignore[arg-type]
    assert sync.fold() == ["cp"]  # r1's look after its store sees both
    assert sync.fold() == []  # r2's: nothing left to fold, nothing changes
    done = sync.fetch()[0].checkpoints.get_completed("cp")
    assert done is not None
    expected = {**acks["r1"]["positions"], **acks["r2"]["positions"]}  # type: ignore[dict-item]
    assert done["positions"] == expected and len(expected) == 4
