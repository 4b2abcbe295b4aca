"""What the two connector read benchmarks share (``ray_data_read`` and ``spark_bridge``): their
options, writing the events, the baseline's rows, and a timed call that checks its row count.
Importing this module starts nothing."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import pravega_ray as pr

KEYS = 16


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


def write_events(cluster: Any, scope: str, stream: str, count: int, size: int) -> None:
    """``count`` events of ``size`` bytes, round robin over KEYS routing keys, then flush."""
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
    """Seconds of ``call()``; AssertionError if it counted other than ``expected`` rows."""
    started = time.perf_counter()
    count = call()
    elapsed = time.perf_counter() - started
    if count != expected:
        raise AssertionError(f"counted {count} rows, expected {expected}")
    return elapsed
