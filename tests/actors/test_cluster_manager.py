"""The cluster manager: moves containers when nodes join, survives its own death, and a
container re-created under its name looks to clients like a restart.

The multi-node scenario runs in its own process (``cluster_manager_scenario.py``): it needs
a multi-node Ray of its own (``ray.cluster_utils.Cluster``), which cannot share the
session's Ray. The other tests run on the session's Ray, each in a namespace of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.cluster_assignment import ASSIGNMENT_PREFIX, AssignmentStore
from pravega_ray.naming import container_for_segment
from pravega_ray.segmentstore.builder import build_chunk_storage
from pravega_ray_actors.cluster_manager_actor import ClusterManagerActor
from pravega_ray_actors.options import CLUSTER_MANAGER_NAME, container_name

SCRIPT = Path(__file__).with_name("cluster_manager_scenario.py")
ROOT = Path(__file__).resolve().parents[2]


def describe(manager: Any) -> dict[str, Any]:
    """The manager's description; empty while it restarts (its calls fail then)."""
    import ray
    from ray.exceptions import RayError

    try:
        return ray.get(manager.describe.remote(), timeout=30)
    except RayError:
        return {}


def wait_for(condition: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.ray
@pytest.mark.timeout(480)
def test_cluster_manager_spreads_containers_to_a_joining_node_and_survives_its_death(
    tmp_path: Path,
) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=460,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, (
        f"scenario failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    )
    result = json.loads(lines[-1])
    # 1. A fourth node joined: 6 containers over 4 nodes, each node 1 or 2.
    assert result["spread"], result
    assert result["on_fourth"] >= 1 and result["loads_after_join"] == [1, 1, 2, 2], result
    # 2. The manager was killed mid-move; its successor finished the move.
    assert result["killed_mid_move"] is not None, result
    assert result["finished_after_kill"] and result["moved_container_at_target"], result
    assert result["on_fifth"] == 1 and result["stored_matches_placement"], result
    # The writer never failed; every acknowledged event exactly once, per-key order.
    assert not result["writer_failure"], result
    assert result["written"] > 0
    assert result["read"] == result["distinct"] == result["written"], result
    assert not result["extra"] and result["in_order"], result


@pytest.mark.ray
@pytest.mark.timeout(240)
def test_container_stopped_for_good_is_created_again_and_clients_carry_on(
    ray_session: None, tmp_path: Path
) -> None:
    import ray

    namespace = "pravega-manager-restore"
    cluster = pr.start_local(data_dir=tmp_path, container_count=2, namespace=namespace)
    try:
        manager = ray.get_actor(CLUSTER_MANAGER_NAME, namespace=namespace)
        first = wait_for(
            lambda: (d := describe(manager)).get("passes") and d,
            30,
            "the manager's first pass",
        )
        node = ray.get_runtime_context().get_node_id()
        assert first["assignment"] == {0: node, 1: node}
        assert first["moves"] == 0 and first["damaged"] is None

        mgr = cluster.stream_manager()
        mgr.create_scope("sc")
        mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(4)))
        stop = threading.Event()
        written: list[int] = []
        failure: list[BaseException] = []

        def write() -> None:
            try:
                with cluster.create_writer("sc", "st", pr.JsonSerializer()) as w:
                    i = 0
                    while not stop.is_set():
                        w.write_event({"k": f"k{i % 8}", "n": i}, routing_key=f"k{i % 8}")
                        i += 1
                        if i % 100 == 0:
                            time.sleep(0.01)
                    written.append(i)
            except BaseException as e:
                failure.append(e)

        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(1.5)
        old = cluster.container_handles()[0]
        # The first step of a move, with nobody finishing it: the manager notices (the
        # container is not running where its map says) and creates it again.
        ray.kill(old, no_restart=True)
        after = wait_for(
            lambda: (d := describe(manager)).get("moves", 0) >= 1 and d,
            60,
            "the manager to create the stopped container again",
        )
        assert after["assignment"] == {0: node, 1: node}
        time.sleep(1.5)
        stop.set()
        writer.join(120)
        assert not failure and written, failure
        # The old handle is dead for good; the client looked the name up again.
        assert cluster.container_handles()[0]._actor_id != old._actor_id
        fresh = ray.get_actor(container_name(0), namespace=namespace)
        assert cluster.container_handles()[0]._actor_id == fresh._actor_id

        cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
        events = []
        with cluster.create_reader("r", "sc", "rg", pr.JsonSerializer()) as reader:
            while len(events) < written[0]:
                event = reader.read_next_event(timeout_s=10)
                if event is None:
                    break
                events.append(event.event)
            assert reader.read_next_event(timeout_s=0.5) is None
        per_key: dict[str, list[int]] = defaultdict(list)
        for e in events:
            per_key[e["k"]].append(e["n"])
        assert len(events) == len({e["n"] for e in events}) == written[0]
        assert all(v == sorted(v) for v in per_key.values())
        # The controller's own handle of container 0 was dead too: it looks it up again.
        assert mgr.create_stream("sc", "st2", pr.StreamConfiguration(pr.ScalingPolicy.fixed(4)))
        segments = [seg.name for seg in mgr.get_stream_info("sc", "st2").segments]
        assert 0 in {container_for_segment(seg, 2) for seg in segments}
        with cluster.create_writer("sc", "st2") as w:
            for i in range(8):
                w.write_event(b"x", routing_key=f"k{i}").result(60)
    finally:
        cluster.shutdown()
    # shutdown stops the manager first, and the re-created container (found by name) too.
    for name in (CLUSTER_MANAGER_NAME, container_name(0), container_name(1)):
        with pytest.raises(ValueError):
            ray.get_actor(name, namespace=namespace)


@pytest.mark.ray
@pytest.mark.timeout(180)
def test_damaged_stored_map_is_reported_and_rebuilt_from_the_live_containers(
    ray_session: None, tmp_path: Path
) -> None:
    import ray

    namespace = "pravega-manager-damage"
    cluster = pr.start_local(data_dir=tmp_path, container_count=2, namespace=namespace)
    try:
        manager = ray.get_actor(CLUSTER_MANAGER_NAME, namespace=namespace)
        before = wait_for(lambda: (d := describe(manager)).get("passes") and d, 30, "a pass")
        storage = build_chunk_storage(json.loads((tmp_path / "cluster.json").read_text())["tier2"])
        chunk = storage.list(ASSIGNMENT_PREFIX)[-1]
        raw = storage.read(chunk, 0, storage.length(chunk))
        storage.delete(chunk)
        storage.create(chunk, raw[:-4] + b"XXXX")  # same length, CRC no longer matches
        ray.kill(manager, no_restart=False)  # Ray restarts it; it reads the damaged map
        after = wait_for(
            lambda: (d := describe(manager)).get("passes") and d["pid"] != before["pid"] and d,
            60,
            "the restarted manager's first pass",
        )
        assert after["damaged"] is not None and chunk in after["damaged"]
        node = ray.get_runtime_context().get_node_id()
        assert after["assignment"] == {0: node, 1: node}
        assert after["moves"] == 0  # rebuilt from where the containers run: nothing moved
        assert AssignmentStore(storage).load() == after["assignment"]
        assert chunk not in storage.list(ASSIGNMENT_PREFIX)
    finally:
        cluster.shutdown()


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("container_count", "period_s"), [(0, 1.0), (-1, 1.0), ("2", 1.0), (2, 0), (2, -1), (2, "1")]
)
def test_cluster_manager_bad_arguments_raise_invalid_argument(
    container_count: Any, period_s: Any
) -> None:
    with pytest.raises(pr.InvalidArgumentError):
        ClusterManagerActor(
            "file:///nowhere/1", "file:///nowhere/2", container_count, "ns", period_s
        )


SEG = "sc/st/0.#epoch.0"


class _Echo:
    """A stand-in container with one SegmentStoreService-named method (a real Ray actor)."""

    def __init__(self, tag: str) -> None:
        self._tag = tag

    async def get_info(self, segment: str) -> str:
        return f"{self._tag}:{segment}"


@pytest.mark.ray
@pytest.mark.timeout(120)
def test_invoker_looks_a_dead_container_up_by_name_once_per_failed_call(ray_session: None) -> None:
    import ray

    from pravega_ray.contracts.segment_store_service import SegmentStoreService
    from pravega_ray_actors.ray_calls import RayServiceInvoker

    namespace = "pravega-invoker-resolve"
    options = {"name": container_name(0), "namespace": namespace, "lifetime": "detached"}
    echo = ray.remote(_Echo).options(num_cpus=0, **options)
    handles = [echo.remote("old")]
    invoker = RayServiceInvoker(handles, namespace)
    try:
        assert invoker.invoke(SegmentStoreService.get_info, SEG).result(30) == f"old:{SEG}"
        dead = handles[0]
        ray.kill(dead, no_restart=True)
        wait_for(lambda: not _named(namespace), 30, "the name to free")
        # Mid-move (the name is free): calls fail fast as outcome unknown, nothing replaced.
        for _ in range(2):
            with pytest.raises(pr.SegmentStoreUnavailableError):
                invoker.invoke(SegmentStoreService.get_info, SEG).result(30)
        assert handles[0] is dead
        echo.remote("new")
        # The next call looks the name up again and reaches the new actor.
        assert invoker.invoke(SegmentStoreService.get_info, SEG).result(30) == f"new:{SEG}"
        assert handles[0] is not dead and invoker.handle(SEG) is handles[0]
    finally:
        if _named(namespace):
            ray.kill(ray.get_actor(container_name(0), namespace=namespace), no_restart=True)


def _named(namespace: str) -> bool:
    import ray

    try:
        ray.get_actor(container_name(0), namespace=namespace)
    except ValueError:
        return False
    return True


@pytest.mark.ray
def test_where_a_new_container_runs_is_known_before_its_recovery_ends(
    ray_session: None, tmp_path: Path
) -> None:
    """``placed_node`` reads the node as soon as Ray places the actor, so a misplaced
    container is stopped before its recovery, not after it (``start_container_on``)."""
    import ray

    from pravega_ray_actors.cluster_manager_actor import placed_node

    gate = tmp_path / "open"

    @ray.remote(num_cpus=0)
    class Recovering:
        def __init__(self, gate: str) -> None:  # a constructor that ends when told
            deadline = time.monotonic() + 120
            while not Path(gate).exists() and time.monotonic() < deadline:
                time.sleep(0.05)

        def node(self) -> str:
            return str(ray.get_runtime_context().get_node_id())

    handle = Recovering.remote(str(gate))  # type: ignore[attr-defined]
    try:
        node = placed_node(handle, wait_s=60)
        assert node is not None  # known while the constructor still waits
        gate.touch()
        assert node == ray.get(handle.node.remote(), timeout=60)
        assert placed_node(object()) is None  # not an actor: unknown, never an error
    finally:
        gate.touch()
        ray.kill(handle)
