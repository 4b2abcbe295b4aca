"""What an idle segment container costs as its segment count grows (docs/benchmarks.md).

For each count of ``--segments`` (default 0, 1,000, 25,000: a quarter of the 100,000 segments
of the controller benchmark's last level, one container's share of four), an in-process
cluster of one container (memory backends, no Ray) gets that many new segments (as a stream
create makes them: empty), then sits idle for ``--seconds``; the row reports the process's CPU
time over that wait as a share of one core. Baseline: the same cluster with no segment (the
first row). The container's background rounds (storage writer, attribute flushes, log
checkpoints and truncation) run every ``STORAGE_WRITER_TICK_S``; a cost that grows with the
idle segments is work those rounds do for segments that have none.

A second table: one round of the auto-scaler (``segmentstore/auto_scale.py``, every
``AUTO_SCALE_PERIOD_S`` on a cluster that auto-scales: every Ray cluster) over a container's
metadata holding that many segments, none with a scaling policy (a stream of a fixed policy),
median of ``--rounds``.

Run: ``make bench-idle-container`` or ``.venv/bin/python -m benchmarks.idle_container --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import time

from benchmarks.common import log, print_table
from pravega_ray.constants import AUTO_SCALE_PERIOD_S, TRAFFIC_TIME_CONSTANT_S
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.segmentstore.auto_scale import AutoScaleMonitor, AutoScaler, ScaleReport
from pravega_ray.segmentstore.container_metadata import ContainerMetadata, SegmentMetadata
from pravega_ray.segmentstore.traffic import RateTracker
from pravega_ray.timing import AsyncioScheduler, ManualClock


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


class _Nobody:
    def report(self, report: ScaleReport) -> None:
        """No policy, no report."""


def auto_scaler_round_s(segments: int, rounds: int) -> float:
    """Median seconds of one auto-scaler round over ``segments`` live segments."""
    clock = ManualClock(100.0)
    metadata = ContainerMetadata(0)
    for n in range(segments):
        traffic = RateTracker(TRAFFIC_TIME_CONSTANT_S, clock.monotonic())
        metadata.add(SegmentMetadata(f"bench/idle{n}/0.#epoch.0", 0, traffic=traffic))

    async def read(segment: str, keys: list[bytes]) -> dict[bytes, int]:
        return {}

    monitor = AutoScaleMonitor(clock, _Nobody())
    scaler = AutoScaler(monitor, metadata, read, clock=clock, scheduler=AsyncioScheduler())

    async def timed() -> list[float]:
        took = []
        for _ in range(rounds):
            clock.advance(AUTO_SCALE_PERIOD_S)
            start = time.perf_counter()
            await scaler.run_round()
            took.append(time.perf_counter() - start)
        return took

    return statistics.median(asyncio.run(timed()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", default="0,1000,25000", help="comma-separated counts")
    parser.add_argument("--seconds", type=float, default=10.0, help="idle time measured")
    parser.add_argument("--rounds", type=int, default=20, help="auto-scaler rounds timed")
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
    scaler_rows = []
    for count in counts:
        took = auto_scaler_round_s(count, args.rounds)
        share = took / AUTO_SCALE_PERIOD_S
        scaler_rows.append((f"{count:,}", 1000 * took, 100 * share))
    print_table(
        f"One auto-scaler round (every {AUTO_SCALE_PERIOD_S:g} s), no segment with a policy",
        ["segments", "round ms", "% of one core"],
        scaler_rows,
    )


if __name__ == "__main__":
    main()
