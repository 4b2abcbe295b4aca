"""State synchronizer updates on a local cluster, against same-run baselines.

Run: ``.venv/bin/python -m benchmarks.state_synchronizer [--ops N] [--state-bytes B]``.

It starts its own embedded cluster (``start_local`` on a temporary directory, 2
containers, file tiers, Ray namespace ``bench-sync``) and measures, one call at a time,
with durable acknowledgements:

- ``update_state`` of a counter (one read and one conditional write per call, no
  contention), its state padded to ``--state-bytes`` serialized;
- ``fetch_updates`` (one read);
- ``update_state`` by 2 threads, each with its own synchronizer on the same state
  (conflicts: the loser of a race reads and writes again); ops/s of both together.

Baselines in the same run: ``kvt.put`` of a value of the same size (one durable write,
unconditional) and ``kvt.get``; a plain Ray actor call (``set`` on an in-memory dict: a Ray
round trip without durability).

Prints a table (ops/s, p50 and p99 latency in ms).
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from typing import Any

import pravega_ray as pr
from benchmarks.common import local_cluster, log, percentile, print_table, time_calls, work_dir
from benchmarks.key_value_table import DictActor


def _row(system: str, operation: str, ops: int, seconds: float, lat: list[float]) -> list[object]:
    return [
        system,
        operation,
        ops / seconds,
        percentile(lat, 0.50) * 1000 if lat else None,
        percentile(lat, 0.99) * 1000 if lat else None,
    ]


def _inc(state: dict[str, Any]) -> dict[str, Any]:
    return {**state, "n": state["n"] + 1}


def sync_rows(cluster: Any, ops: int, pad: str) -> list[list[object]]:
    scope = "bench" + uuid.uuid4().hex[:8]
    cluster.stream_manager().create_scope(scope)
    serializer = pr.JsonSerializer()
    sync = cluster.state_synchronizer(scope, "counter", serializer, initial={"n": 0, "pad": pad})
    for _ in range(50):  # warm up
        sync.update_state(_inc)
    rows = []
    seconds, lat = time_calls([lambda: sync.update_state(_inc)] * ops)
    rows.append(_row("state synchronizer", "update_state", ops, seconds, lat))
    seconds, lat = time_calls([sync.fetch_updates] * ops)
    rows.append(_row("state synchronizer", "fetch_updates", ops, seconds, lat))

    others = [
        cluster.state_synchronizer(scope, "counter", serializer, initial={}) for _ in range(2)
    ]
    runs = [0, 0]

    def racing(i: int) -> None:
        def inc(state: dict[str, Any]) -> dict[str, Any]:
            runs[i] += 1
            return _inc(state)

        for _ in range(ops // 2):
            others[i].update_state(inc)

    before = sync.update_state(lambda s: s)["n"]
    threads = [threading.Thread(target=racing, args=(i,)) for i in range(2)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    sync.fetch_updates()
    assert sync.get_state()["n"] == before + 2 * (ops // 2), "an update was lost"
    tries = sum(runs) / (2 * (ops // 2))
    rows.append(
        _row(
            "state synchronizer",
            f"update_state, 2 racing ({tries:.2f} tries each)",
            2 * (ops // 2),
            seconds,
            [],
        )
    )
    return rows


def kvt_rows(cluster: Any, ops: int, value: bytes) -> list[list[object]]:
    scope = "benchkvt" + uuid.uuid4().hex[:8]
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    mgr.create_key_value_table(scope, "t", 1)
    kvt = cluster.key_value_table(scope, "t")
    for _ in range(50):
        kvt.put(b"warm", value)
    seconds, lat = time_calls([lambda: kvt.put(b"counter", value)] * ops)
    rows = [_row("key-value table", "put (same key)", ops, seconds, lat)]
    seconds, lat = time_calls([lambda: kvt.get(b"counter")] * ops)
    rows.append(_row("key-value table", "get", ops, seconds, lat))
    return rows


def ray_rows(ops: int, value: bytes) -> list[list[object]]:
    import ray

    actor: Any = ray.remote(num_cpus=0)(DictActor).remote()
    try:
        ray.get([actor.set.remote(b"warm", value) for _ in range(50)])
        seconds, lat = time_calls([lambda: ray.get(actor.set.remote(b"k", value))] * ops)
    finally:
        ray.kill(actor)
    return [_row("plain Ray actor call", "set (no fsync)", ops, seconds, lat)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--ops", type=int, default=500, help="calls per measurement")
    parser.add_argument("--state-bytes", type=int, default=100, help="padding of the state")
    args = parser.parse_args()
    pad = "x" * args.state_bytes
    value = pr.JsonSerializer().serialize({"n": 0, "pad": pad})
    rows: list[list[object]] = []
    with (
        work_dir("bench-sync-") as work,
        local_cluster(work / "data", 2, namespace="bench-sync") as cluster,
    ):
        log("state synchronizer")
        rows += sync_rows(cluster, args.ops, pad)
        log("baseline: key-value table")
        rows += kvt_rows(cluster, args.ops, value)
        log("baseline: plain Ray actor")
        rows += ray_rows(args.ops, value)
    print_table(
        f"State synchronizer vs baselines ({args.ops} calls each, state {len(value)} bytes)",
        ["system", "operation", "ops/s", "p50 ms", "p99 ms"],
        rows,
    )


if __name__ == "__main__":
    main()
