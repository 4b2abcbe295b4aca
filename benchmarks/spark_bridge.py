"""The Spark bridge's overhead (issue 13, "Measured"): ``pr.spark.read_stream`` to a counted
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
the median of ``--repeats`` further calls. ``ratio`` is read_stream over from_arrow (the goal:
at most 1.3). The machine is shared and small (2 cores): numbers are noisy, read the ratios.

Run: ``make bench-spark-bridge`` or ``.venv/bin/python benchmarks/spark_bridge.py --help``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from report import print_table

import pravega_ray as pr

KEYS = 16


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def write_events(cluster: Any, scope: str, stream: str, count: int, size: int) -> None:
    payload = b"x" * size
    with cluster.create_writer(scope, stream, serializer=pr.BytesSerializer()) as writer:
        for i in range(count):
            writer.write_event(payload, routing_key=f"k{i % KEYS}")
        writer.flush()


def same_rows(cluster: Any, scoped_stream: str) -> Any:
    """The read's rows as one single-chunk table in the driver (the baseline's input)."""
    import pyarrow as pa
    import ray

    refs = pr.data.read_stream(scoped_stream, cluster=cluster).to_arrow_refs()
    return pa.concat_tables(ray.get(refs)).combine_chunks()


def timed(call: Callable[[], int], expected: int) -> float:
    started = time.perf_counter()
    count = call()
    elapsed = time.perf_counter() - started
    if count != expected:
        raise AssertionError(f"counted {count} rows, expected {expected}")
    return elapsed


def bench_arguments(description: str, default_events: int) -> tuple[argparse.Namespace, list[int]]:
    """The options both read benchmarks take, parsed, and the event sizes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--events", type=int, default=default_events)
    parser.add_argument("--event-bytes", default="100,1024", help="comma-separated sizes")
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20k events, 1 repeat")
    args = parser.parse_args()
    if args.quick:
        args.events, args.repeats = 20_000, 1
    return args, [int(s) for s in args.event_bytes.split(",")]


def main() -> None:
    args, sizes = bench_arguments(__doc__.split("\n\n")[0], 200_000)

    os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
    import ray

    from pravega_ray.logging_setup import configure_logging
    from pravega_ray.spark import clean_raydp_temp_folders, init_spark, stop_spark

    configure_logging()
    ray.init(num_cpus=2, namespace=f"bench-{uuid.uuid4().hex[:8]}", include_dashboard=False)
    data_dir = tempfile.mkdtemp(prefix="bench-spark-bridge-")
    cluster = pr.start_local(data_dir=data_dir, container_count=4)
    spark = init_spark(app_name="bench-spark-bridge")
    rows: list[list[object]] = []
    try:
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
            steady_read, steady_base = statistics.median(reads), statistics.median(bases)
            rows.append(
                [
                    size,
                    count,
                    f"{mib:.1f}",
                    "first",
                    first_read,
                    first_base,
                    first_read / first_base,
                ]
            )
            rows.append(["", "", "", "steady", steady_read, steady_base, steady_read / steady_base])
    finally:
        stop_spark()
        cluster.shutdown()
        ray.shutdown()
        clean_raydp_temp_folders()
    print_table(
        "read_stream -> count vs from_arrow(same rows) -> to_spark -> count (seconds)",
        ["event B", "events", "MiB", "call", "read_stream s", "from_arrow s", "ratio"],
        rows,
    )


if __name__ == "__main__":
    main()
