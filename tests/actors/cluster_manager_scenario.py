"""Run as a script by test_cluster_manager.py: the cluster manager on a multi-node Ray.

A 3-node Ray cluster on one machine, ``start_local`` with 6 containers, a writer writing
numbered events with routing keys in a background thread. Then:

1. a fourth node joins: within a bound, the manager spreads the containers to it (every
   node holds 1 or 2);
2. a fifth node joins, and the manager actor is killed (``ray.kill`` without
   ``no_restart``, so Ray restarts it) while it moves a container there: the restarted
   manager finishes the move.

The writer then stops; everything is read back with a reader group: every acknowledged
event exactly once, in order per routing key. Prints one JSON line. Argument: data_dir.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter, defaultdict
from typing import Any

import ray
from ray.cluster_utils import Cluster

import pravega_ray as pr
from pravega_ray_actors.options import CLUSTER_MANAGER_NAME, container_name

CONTAINERS = 6
KEYS = 40
SPREAD_WAIT_S = 120.0


def placements() -> dict[int, str | None]:
    """Where each container runs now, found by name (a moved container is a new actor)."""
    out: dict[int, str | None] = {}
    for c in range(CONTAINERS):
        try:
            handle = ray.get_actor(container_name(c), namespace="pravega")
            out[c] = ray.get(handle.describe.remote(), timeout=30)["node_id"]
        except Exception:
            out[c] = None
    return out


def alive_nodes() -> list[str]:
    return sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))


def balanced(placed: dict[int, str | None], nodes: list[str]) -> bool:
    if any(n is None for n in placed.values()):
        return False
    counts = Counter(placed.values())
    loads = [counts.get(n, 0) for n in nodes]
    return max(loads) - min(loads) <= 1 and set(placed.values()) <= set(nodes)


def wait_balanced(nodes: list[str], deadline_s: float) -> tuple[bool, dict[int, str | None]]:
    deadline = time.monotonic() + deadline_s
    placed = placements()
    while time.monotonic() < deadline:
        if balanced(placed, nodes):
            return True, placed
        time.sleep(1.0)
        placed = placements()
    return balanced(placed, nodes), placed


def wait_nodes(count: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        len(alive_nodes()) < count or ray.available_resources().get("CPU", 0) < count
    ):
        time.sleep(0.2)


def main() -> None:
    data_dir = sys.argv[1]
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(2):
        nodes.add_node(num_cpus=1)
    nodes.wait_for_nodes()
    ray.init(address=nodes.address, namespace="pravega", logging_level="WARNING")
    wait_nodes(3)
    cluster = pr.start_local(data_dir=data_dir, container_count=CONTAINERS)
    manager = ray.get_actor(CLUSTER_MANAGER_NAME, namespace="pravega")
    result: dict[str, Any] = {"initial": placements()}

    mgr = cluster.stream_manager()
    mgr.create_scope("moves")
    mgr.create_stream("moves", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(6)))
    stop = threading.Event()
    written: list[int] = []
    failure: list[str] = []

    def write() -> None:
        try:
            with cluster.create_writer("moves", "st", pr.JsonSerializer()) as w:
                i = 0
                while not stop.is_set():
                    w.write_event({"k": f"k{i % KEYS}", "n": i}, routing_key=f"k{i % KEYS}")
                    i += 1
                    if i % 200 == 0:
                        time.sleep(0.02)
                written.append(i)  # close() below flushes: every event is acknowledged
        except Exception as e:  # reported, and the check fails
            failure.append(repr(e))

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(3)

    # 1. A fourth node joins: the containers spread to it.
    fourth = nodes.add_node(num_cpus=1)
    nodes.wait_for_nodes()
    wait_nodes(4)
    started = time.monotonic()
    spread, placed = wait_balanced(alive_nodes(), SPREAD_WAIT_S)
    result["spread"] = spread
    result["spread_s"] = round(time.monotonic() - started, 1)
    result["on_fourth"] = sum(1 for n in placed.values() if n == fourth.node_id)
    result["loads_after_join"] = sorted(Counter(placed.values()).values())
    time.sleep(2)

    # 2. A fifth node joins; the manager is killed while it moves a container there.
    fifth = nodes.add_node(num_cpus=1)
    nodes.wait_for_nodes()
    wait_nodes(5)
    moving = None
    deadline = time.monotonic() + SPREAD_WAIT_S
    while time.monotonic() < deadline and moving is None:
        moving = ray.get(manager.describe.remote(), timeout=30)["moving"]
        if moving is None:
            time.sleep(0.02)
    result["killed_mid_move"] = moving
    ray.kill(manager, no_restart=False)
    started = time.monotonic()
    finished, placed = wait_balanced(alive_nodes(), SPREAD_WAIT_S)
    result["finished_after_kill"] = finished
    result["finish_s"] = round(time.monotonic() - started, 1)
    result["on_fifth"] = sum(1 for n in placed.values() if n == fifth.node_id)
    result["moved_container_at_target"] = (
        moving is not None and placed.get(moving["container"]) == moving["to"]
    )
    description = ray.get(manager.describe.remote(), timeout=30)
    result["stored_matches_placement"] = description["assignment"] == {
        c: n for c, n in placed.items()
    }

    time.sleep(2)
    stop.set()
    writer.join(240)
    result["writer_failure"] = failure
    count = written[0] if written else 0

    cluster.create_reader_group("moves", "rg", pr.ReaderGroupConfig.for_streams("moves/st"))
    events = []
    with cluster.create_reader("r", "moves", "rg", pr.JsonSerializer()) as reader:
        while len(events) < count:
            event = reader.read_next_event(timeout_s=10)
            if event is None:
                break
            events.append(event.event)
        extra = reader.read_next_event(timeout_s=0.5)
    per_key: dict[str, list[int]] = defaultdict(list)
    for e in events:
        per_key[e["k"]].append(e["n"])
    result.update(
        written=count,
        read=len(events),
        distinct=len({e["n"] for e in events}),
        extra=extra is not None,
        in_order=all(v == sorted(v) for v in per_key.values()),
    )
    result.pop("initial")
    print(json.dumps(result), flush=True)
    cluster.shutdown()
    ray.shutdown()
    nodes.shutdown()


if __name__ == "__main__":
    main()
