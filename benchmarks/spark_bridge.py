"""The Spark bridge's overhead (docs/benchmarks.md): ``pr.spark.read_stream`` to a counted
DataFrame against ``ray.data.from_arrow(the same rows).to_spark(spark)`` to a counted DataFrame,
timed in the same run on the same Spark session.

For each event size (``--event-bytes``, 100 B and 1 KiB): ``--events`` events (200k of 100 B;
the 1 KiB run writes a tenth as many, about the same bytes x 1) go to a stream of
``--segments`` segments (16 routing keys). The same rows are collected once into one
single-chunk Arrow table in the driver (the baseline's input, not timed). Then, alternating:

- ``read_stream``: ``pr.spark.read_stream(spark, "scope/stream").count()``;
- ``from_arrow``: ``ray.data.from_arrow(table).to_spark(spark).count()``.

``first`` is each one's first call on that stream (Spark itself is warmed once at the start by
a tiny from_arrow -> to_spark -> count, so neither pays the JVM's very first job); ``steady`` is
the median of ``--repeats`` further calls. ``ratio`` is read_stream over from_arrow, ``goal``
says PASS when it is at most ``GOAL_RATIO`` (1.3), else MISS. The machine is shared and small
(2 cores): numbers are noisy, read the ratios.

Run: ``make bench-spark-bridge`` or ``.venv/bin/python -m benchmarks.spark_bridge --help``.
"""

from __future__ import annotations

import uuid
from typing import Any

import pravega_ray as pr
from benchmarks.common import local_cluster, local_ray, log, percentile, print_table, work_dir
from benchmarks.connector_reads import bench_arguments, same_rows, timed, write_events

GOAL_RATIO = 1.3
"""read_stream's time over from_arrow(same rows).to_spark()'s, at most: the goal."""


def verdict(ratio: float) -> str:
    """PASS if ``ratio`` meets :data:`GOAL_RATIO`, else MISS."""
    return "PASS" if ratio <= GOAL_RATIO else "MISS"


def main() -> None:
    args, sizes = bench_arguments(__doc__.split("\n\n")[0], 200_000)

    from pravega_ray.logging_setup import configure_logging
    from pravega_ray.spark import clean_raydp_temp_folders, init_spark, stop_spark

    configure_logging()
    try:
        with (
            work_dir("bench-spark-bridge-") as data_dir,
            local_ray(num_cpus=2, namespace=f"bench-{uuid.uuid4().hex[:8]}"),
            local_cluster(data_dir, 4) as cluster,
        ):
            spark = init_spark(app_name="bench-spark-bridge")
            try:
                rows = measure(cluster, spark, args, sizes)
            finally:
                stop_spark()
    finally:
        clean_raydp_temp_folders()
    print_table(
        "read_stream -> count vs from_arrow(same rows) -> to_spark -> count (seconds)",
        ["event B", "events", "MiB", "call", "read_stream s", "from_arrow s", "ratio", "goal"],
        rows,
    )


def measure(cluster: Any, spark: Any, args: Any, sizes: list[int]) -> list[list[object]]:
    """The table's rows: per event size, the first and the steady calls of both paths."""
    import ray

    rows: list[list[object]] = []
    warm = ray.data.from_items([{"a": 1}]).to_spark(spark).count()
    assert warm == 1
    mgr = cluster.stream_manager()
    mgr.create_scope("bench")
    for size in sizes:
        count = args.events if size <= 100 else max(1, args.events // 10)
        stream = f"bridge{size}"
        mgr.create_stream(
            "bench",
            stream,
            pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(args.segments)),
        )
        log(f"writing {count} events of {size} B")
        write_events(cluster, "bench", stream, count, size)
        table = same_rows(cluster, f"bench/{stream}")
        mib = table.nbytes / 2**20

        def read(stream: str = stream) -> int:
            return pr.spark.read_stream(spark, f"bench/{stream}", cluster=cluster).count()

        def baseline(table: Any = table) -> int:
            return ray.data.from_arrow(table).to_spark(spark).count()

        log(f"timing {count} events of {size} B")
        first_read = timed(read, count)
        first_base = timed(baseline, count)
        reads, bases = [], []
        for _ in range(args.repeats):
            reads.append(timed(read, count))
            bases.append(timed(baseline, count))
        steady_read, steady_base = percentile(reads, 0.5), percentile(bases, 0.5)
        first_ratio, steady_ratio = first_read / first_base, steady_read / steady_base
        rows.append(
            [
                size,
                count,
                f"{mib:.1f}",
                "first",
                first_read,
                first_base,
                first_ratio,
                verdict(first_ratio),
            ]
        )
        rows.append(
            ["", "", "", "steady", steady_read, steady_base, steady_ratio, verdict(steady_ratio)]
        )
    return rows


if __name__ == "__main__":
    main()
