"""What an idle segment container costs as its segment count grows (docs/benchmarks.md).

For each count of ``--segments`` (default 0, 1,000, 25,000: a quarter of the 100,000 segments
of the controller benchmark's last level, one container's share of four), an in-process
cluster of one container (memory backends, no Ray) gets that many new segments (as a stream
create makes them: empty), then sits idle for ``--seconds``; the row reports the process's CPU
time over that wait as a share of one core. Baseline: the same cluster with no segment (the
first row). The container's background rounds (storage writer, attribute flushes, log
checkpoints and truncation) run every ``STORAGE_WRITER_TICK_S``; a cost that grows with the
idle segments is work those rounds do for segments that have none.

Run: ``make bench-idle-container`` or ``.venv/bin/python -m benchmarks.idle_container --help``.
"""

from __future__ import annotations

import argparse
import resource
import time

from benchmarks.common import log, print_table
from pravega_ray.inprocess import InProcessCluster


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def idle_share(segments: int, seconds: float) -> tuple[float, float]:
    """(seconds to create ``segments``, idle CPU as a share of one core)."""
    cluster = InProcessCluster(container_count=1)
    try:
        start = time.perf_counter()
        client = cluster.segments
        pending = []
        for n in range(segments):
            pending.append(client.create_segment(f"bench/idle{n}/0.#epoch.0"))
            if len(pending) >= 500:
                for created in pending:
                    created.result(60)
                pending = []
        for created in pending:
            created.result(60)
        made = time.perf_counter() - start
        time.sleep(2.0)  # the creates' log records checkpointed: the container is idle now
        before, wall = _cpu_s(), time.perf_counter()
        time.sleep(seconds)
        return made, (_cpu_s() - before) / (time.perf_counter() - wall)
    finally:
        cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", default="0,1000,25000", help="comma-separated counts")
    parser.add_argument("--seconds", type=float, default=10.0, help="idle time measured")
    args = parser.parse_args()
    counts = [int(c) for c in args.segments.split(",")]
    rows = []
    baseline = None
    for count in counts:
        log(f"{count:,} segments")
        made, share = idle_share(count, args.seconds)
        baseline = share if baseline is None else baseline
        rows.append((f"{count:,}", made, 100 * share, 100 * (share - baseline)))
    print_table(
        "An idle container (in process, memory backends): CPU, % of one core",
        ["segments", "create s", "idle CPU %", "beyond the first row %"],
        rows,
    )


if __name__ == "__main__":
    main()
