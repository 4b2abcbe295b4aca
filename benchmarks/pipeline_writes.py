"""Exactly-once writes from pipelines: Ray Data and Spark against plain ``write_event``.

One table, every number measured in the same run on the same ``pr.start_local`` cluster (a
fresh namespace and temporary directory, file tiers; shut down at the end):

* ``plain write_event``: the driver writes the rows' events one by one through an
  ``EventStreamWriter`` (routing key per row) and flushes: the baseline; it runs first and
  last, "vs plain" is against the mean of the two;
* ``pr.data.write_stream``: the same rows as a materialized Ray Dataset of ``--blocks``
  blocks, written exactly once (one transaction per write task, committed together); run
  twice, the first pays Ray Data's start-up (worker processes, imports);
* ``pr.spark.write_stream``: the same rows as a Spark DataFrame of ``--blocks`` partitions
  (RayDP, one executor of one core), converted with ``ray.data.from_spark`` and written by
  the same sink; the time includes the conversion. ``--no-spark`` skips it (and Spark's
  10-15 s start-up).

``--events`` events of ``--event-bytes`` bytes over 16 routing keys, each measurement into a
fresh stream of ``--segments`` segments. Progress goes to stderr, the table to stdout.
Numbers on a shared 2-core machine are noisy: compare rows of one run, not runs.

Run: ``make bench-pipeline-writes`` or ``.venv/bin/python -m benchmarks.pipeline_writes --help``.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from typing import Any

import pyarrow as pa

import pravega_ray as pr
from benchmarks.common import local_cluster, log, new_stream, print_table, work_dir

KEYS = 16


def _rows(events: int, event_bytes: int) -> pa.Table:
    keys = [f"key-{i % KEYS}" for i in range(events)]
    payloads = [
        (f"{i:012d}".encode() * (event_bytes // 12 + 1))[:event_bytes] for i in range(events)
    ]
    return pa.table({"key": pa.array(keys, pa.string()), "event": pa.array(payloads, pa.binary())})


def _count(cluster: Any, scope: str, stream: str) -> int:
    bc = cluster.batch_client()
    return sum(len(list(bc.read_segment(r))) for r in bc.segment_ranges(scope, stream) if r.length)


def _plain(cluster: Any, scope: str, stream: str, table: pa.Table) -> float:
    keys = table.column("key").to_pylist()
    payloads = table.column("event").to_pylist()
    started = time.perf_counter()
    with cluster.create_writer(scope, stream) as writer:
        for key, payload in zip(keys, payloads, strict=True):
            writer.write_event(payload, routing_key=key)
        writer.flush()
    return time.perf_counter() - started


def run(args: argparse.Namespace) -> None:
    table = _rows(args.events, args.event_bytes)
    megabytes = args.events * args.event_bytes / 1e6
    results: list[tuple[str, float]] = []
    with (
        work_dir("bench-pw-") as data_dir,
        local_cluster(data_dir, namespace="bench-pw-" + uuid.uuid4().hex[:6]) as cluster,
    ):
        spark = None
        try:
            import ray.data

            scope = "bench"
            cluster.stream_manager().create_scope(scope)

            def measure(name: str, write: Any) -> None:
                stream = new_stream(cluster, scope, args.segments)
                log(f"{name} ...")
                seconds = write(stream)
                written = _count(cluster, scope, stream)
                assert written == args.events, f"{name}: {written} events, not {args.events}"
                results.append((name, seconds))
                log(f"{name}: {seconds:.2f} s")

            def plain(stream: str) -> float:
                return _plain(cluster, scope, stream, table)

            per_block = -(-table.num_rows // args.blocks)
            ds = ray.data.from_arrow(
                [table.slice(i, per_block) for i in range(0, table.num_rows, per_block)]
            ).materialize()

            def data(stream: str) -> float:
                started = time.perf_counter()
                pr.data.write_stream(ds, f"{scope}/{stream}", "key", cluster=cluster)
                return time.perf_counter() - started

            measure("plain write_event (first)", plain)
            measure("pr.data.write_stream (first)", data)
            measure("pr.data.write_stream (second)", data)
            if not args.no_spark:
                log("starting Spark (RayDP) ...")
                spark = pr.spark.init_spark(app_name="bench-pipeline-writes")
                df = spark.createDataFrame(
                    spark.sparkContext.parallelize(
                        list(
                            zip(
                                table.column("key").to_pylist(),
                                table.column("event").to_pylist(),
                                strict=True,
                            )
                        ),
                        args.blocks,
                    ),
                    "key string, event binary",
                ).cache()
                df.count()  # the DataFrame exists before the clock starts

                def via_spark(stream: str) -> float:
                    started = time.perf_counter()
                    pr.spark.write_stream(df, f"{scope}/{stream}", "key", cluster=cluster)
                    return time.perf_counter() - started

                measure("pr.spark.write_stream (first)", via_spark)
                measure("pr.spark.write_stream (second)", via_spark)
            measure("plain write_event (last)", plain)
        finally:
            if spark is not None:
                pr.spark.stop_spark()

    baseline = (results[0][1] + results[-1][1]) / 2
    rows = [
        (
            name,
            args.events,
            seconds,
            args.events / seconds,
            megabytes / seconds,
            f"{baseline / seconds:.2f}x",
        )
        for name, seconds in results
    ]
    print_table(
        f"exactly-once writes: {args.events:,} events of {args.event_bytes} B, "
        f"{args.segments} segments, {args.blocks} blocks/partitions",
        ["path", "events", "s", "events/s", "MB/s", "vs plain"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--event-bytes", type=int, default=256)
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark rows")
    args = parser.parse_args()
    os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
    run(args)


if __name__ == "__main__":
    main()
