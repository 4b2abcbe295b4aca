"""Run as a script by test_node_failover.py: a 3-node Ray cluster on one machine.

Containers are spread over the nodes; a writer writes while the node of one
container is removed; the container restarts on another node and every event
is read back exactly once, in order per routing key. Prints one JSON line.
Arguments: data_dir [tier1_url tier2_url].
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import defaultdict

import ray
from ray.cluster_utils import Cluster

import pravega_ray as pr


def main() -> None:
    data_dir = sys.argv[1]
    tier1 = sys.argv[2] if len(sys.argv) > 2 else None
    tier2 = sys.argv[3] if len(sys.argv) > 3 else None
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    workers = [nodes.add_node(num_cpus=1) for _ in range(2)]
    nodes.wait_for_nodes()
    ray.init(address=nodes.address, namespace="pravega", logging_level="WARNING")
    deadline = time.monotonic() + 60
    # Under load nodes register late, and the scheduler's resource view lags behind the node
    # table; soft node affinity falls back to another node when the target is not schedulable.
    while time.monotonic() < deadline and (
        sum(1 for n in ray.nodes() if n.get("Alive")) < 3
        or ray.available_resources().get("CPU", 0) < 3
    ):
        time.sleep(0.2)
    cluster = pr.start_local(data_dir=data_dir, container_count=3, tier1=tier1, tier2=tier2)
    placed = ray.get([h.describe.remote() for h in cluster.container_handles()])
    nodes_used = {d["node_id"] for d in placed}

    mgr = cluster.stream_manager()
    mgr.create_scope("failover")
    mgr.create_stream("failover", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(6)))
    n = 30_000
    half = threading.Event()
    done = threading.Event()

    def write() -> None:
        with cluster.create_writer("failover", "st", pr.JsonSerializer()) as w:
            for i in range(n):
                w.write_event({"k": f"k{i % 50}", "n": i}, routing_key=f"k{i % 50}")
                if i == n // 3:
                    half.set()
                if i % 1000 == 0:
                    time.sleep(0.05)
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    half.wait(60)
    victims = [w for w in workers if w.node_id in nodes_used]
    if not victims:
        alive = sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))
        raise SystemExit(
            f"no container on a worker: placed={placed} alive={alive} "
            f"workers={[w.node_id for w in workers]}"
        )
    victim_node = victims[0]
    moved = [d["container_id"] for d in placed if d["node_id"] == victim_node.node_id]
    nodes.remove_node(victim_node)
    writer.join(240)
    after = ray.get([h.describe.remote() for h in cluster.container_handles()])

    cluster.create_reader_group("failover", "rg", pr.ReaderGroupConfig.for_streams("failover/st"))
    events = []
    with cluster.create_reader("r", "failover", "rg", pr.JsonSerializer()) as reader:
        while len(events) < n:
            event = reader.read_next_event(timeout_s=10)
            if event is None:
                break
            events.append(event.event)
        extra = reader.read_next_event(timeout_s=0.5)
    per_key: dict[str, list[int]] = defaultdict(list)
    for e in events:
        per_key[e["k"]].append(e["n"])
    result = {
        "writer_finished": done.is_set(),
        "nodes_used": len(nodes_used),
        "moved": moved,
        "moved_off_removed_node": all(
            d["node_id"] != victim_node.node_id for d in after if d["container_id"] in moved
        ),
        "read": len(events),
        "distinct": len({e["n"] for e in events}),
        "extra": extra is not None,
        "in_order": all(v == sorted(v) for v in per_key.values()),
        "expected": n,
    }
    print(json.dumps(result), flush=True)
    cluster.shutdown()
    ray.shutdown()
    nodes.shutdown()


if __name__ == "__main__":
    main()
