"""Reader-group checkpoint latency for 1, 4 and 16 readers, against baselines measured in
the same run.

Each row: a group of N readers (one thread each, looping ``read_next_event(0.05)`` over a
16-segment stream with a few events in it) takes ``--checkpoints`` checkpoints one after
another; the row reports the median and p99 of ``initiate_checkpoint`` (from the call to
the completed cut) and, for 16 readers on Ray, PASS/MISS against the goal (p50 <=
GOAL_16_RAY_MS). Baselines: ``state read`` (one fetch of the group's state, what each look
at a checkpoint's progress costs) and ``state update`` (one conditional update of the state
that changes it, what creating a checkpoint or folding the readers' acknowledgements
costs). Readers learn of a checkpoint from its notice on the state segment they watch
(else at their next sync, every ``READER_GROUP_SYNC_INTERVAL_S``), acknowledge it under keys
of their own (no race on the state), and the last one folds the acknowledgements.

Systems: ``in-process`` (memory backends, no Ray) and, with ``--ray``, ``ray``
(``pravega_ray.start_local`` on filesystem tiers under a temporary directory).

Run: ``.venv/bin/python -m benchmarks.checkpoints`` (in-process) or ``make bench-checkpoints``
(``--ray``: both). Timings decide nothing in the tests.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

import pravega_ray as pr
from benchmarks.common import local_cluster, local_ray, percentile, print_table, work_dir
from pravega_ray.constants import READER_GROUP_SYNC_INTERVAL_S
from pravega_ray.inprocess import InProcessCluster

SEGMENTS = 16
GOAL_16_RAY_MS = 300.0
"""Checkpoint p50 with 16 readers on Ray."""


def _row(cluster: Any, scope: str, readers: int, checkpoints: int) -> list[float]:
    group_name = f"g{readers}"
    cluster.create_reader_group(scope, group_name, pr.ReaderGroupConfig.for_streams(f"{scope}/st"))
    group = cluster.reader_group(scope, group_name)
    members = [cluster.create_reader(f"r{i}", scope, group_name) for i in range(readers)]
    stop = threading.Event()

    def loop(reader: Any) -> None:
        while not stop.is_set():
            reader.read_next_event(0.05)

    threads = [threading.Thread(target=loop, args=(r,), daemon=True) for r in members]
    for t in threads:
        t.start()
    time.sleep(1.0)  # segments spread over the readers
    took = []
    try:
        for n in range(checkpoints):
            start = time.perf_counter()
            group.initiate_checkpoint(f"cp{n}", timeout_s=60)
            took.append(time.perf_counter() - start)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        for r in members:
            r.close()
    return took


def _baselines(cluster: Any, scope: str, count: int = 50) -> tuple[list[float], list[float]]:
    cluster.create_reader_group(scope, "base", pr.ReaderGroupConfig.for_streams(f"{scope}/st"))
    group = cluster.reader_group(scope, "base")
    state = group._state  # the synchronizer every reader and ReaderGroup uses
    reads, updates = [], []
    for n in range(count):
        start = time.perf_counter()
        state.fetch()
        reads.append(time.perf_counter() - start)
        start = time.perf_counter()
        state.update(lambda s, n=n: setattr(s.checkpoints, "last_created_ms", n + 1))
        updates.append(time.perf_counter() - start)
    return reads, updates


def _run(system: str, cluster: Any, checkpoints: int, rows: list[list[object]]) -> None:
    scope = f"bench{os.getpid()}"
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    mgr.create_stream(scope, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(SEGMENTS)))
    with cluster.create_writer(scope, "st") as writer:
        for n in range(200):
            writer.write_event(b"x" * 100, routing_key=f"k{n}")
        writer.flush()
    reads, updates = _baselines(cluster, scope)
    for name, values in (("state read", reads), ("state update", updates)):
        ms = [v * 1000 for v in values]
        rows.append([system, name, len(ms), percentile(ms, 0.5), percentile(ms, 0.99), ""])
    for readers in (1, 4, 16):
        ms = [v * 1000 for v in _row(cluster, scope, readers, checkpoints)]
        p50 = percentile(ms, 0.5)
        goal = ""
        if system == "ray" and readers == 16:
            verdict = "PASS" if p50 <= GOAL_16_RAY_MS else "MISS"
            goal = f"{verdict} (p50 <= {GOAL_16_RAY_MS:.0f} ms)"
        rows.append(
            [
                system,
                f"checkpoint, {readers} readers",
                len(ms),
                p50,
                percentile(ms, 0.99),
                goal,
            ]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ray", action="store_true", help="also run on start_local (Ray)")
    parser.add_argument("--checkpoints", type=int, default=10, help="checkpoints per row")
    args = parser.parse_args()
    rows: list[list[object]] = []
    cluster = InProcessCluster(container_count=2)
    try:
        _run("in-process", cluster, args.checkpoints, rows)
    finally:
        cluster.shutdown()
    _print(rows)  # printed before Ray starts: a Ray that fails to start loses nothing
    if args.ray:
        with (
            work_dir("bench-checkpoints-") as directory,
            local_ray(num_cpus=2, log_to_driver=False),
            local_cluster(
                directory / "data", 2, namespace=f"bench-checkpoints-{os.getpid()}"
            ) as ray_cluster,
        ):
            _run("ray", ray_cluster, args.checkpoints, rows)
        _print(rows)


def _print(rows: list[list[object]]) -> None:
    print_table(
        f"Checkpoint latency (ms; readers sync every {READER_GROUP_SYNC_INTERVAL_S} s)",
        ["system", "operation", "count", "p50 ms", "p99 ms", "goal"],
        rows,
    )


if __name__ == "__main__":
    main()
