"""The controller's record cache: stream-info reads with and without it, with baselines.

Two parts (``--parts``), each printing one table with its baseline measured in the same run:

1. ``store``: on an ``InProcessCluster`` of 4 containers (no Ray), ``--streams`` streams of 4
   segments; ``StreamMetadataStore.get_stream_info`` of a random stream, sequential, through a
   ``TableMetadataStore`` with its cache (each read one operation: one round of change-log
   reads) against the same store with ``cache_bytes=0`` (a table read per record, as before
   the cache), and a read of a stream whose record was just changed by another store.
   Reported: p50/p99 ms, reads/s, and table-segment calls per read.
2. ``ray``: on ``pr.start_local`` (its own Ray, file tiers in a temporary directory): a plain
   Ray actor's trivial method (the baseline), ``get_stream_info`` through the client (the
   controller actor, cached), and the store-level read from the driver over the real container
   actors, cached and uncached.

Run: ``.venv/bin/python -m benchmarks.metadata_cache --help``. Progress goes to stderr, tables
to stdout. Timings on a loaded machine are noisy; the ratios of the same run are the measure.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from benchmarks.common import local_cluster, log, percentile, print_table, time_calls, work_dir
from pravega_ray.contracts.segment_store_service import SegmentStoreClient, ServiceInvoker
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.controller.table_metadata_store import TableMetadataStore
from pravega_ray.stream_configuration import ScalingPolicy, StreamConfiguration

PARTS = ("store", "ray")
R = TypeVar("R")


class CountingInvoker:
    """Forwards to ``inner``, counting calls (the table-segment round trips of a read)."""

    def __init__(self, inner: ServiceInvoker) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    def invoke(self, method: Callable[..., Awaitable[R]], segment: str, *args: Any) -> Future[R]:
        self.calls[method.__name__] += 1
        return self.inner.invoke(method, segment, *args)


def _reads(
    invoker: ServiceInvoker, streams: int, calls: int, cache_bytes: int | None
) -> tuple[float, float, float, float]:
    """(p50 ms, p99 ms, reads/s, container calls per read) of ``calls`` sequential
    ``get_stream_info`` reads of random streams ``s<i>`` of scope ``bench``."""
    counting = CountingInvoker(invoker)
    options = {} if cache_bytes is None else {"cache_bytes": cache_bytes}
    store = StreamMetadataStore(TableMetadataStore(SegmentStoreClient(counting), **options))
    rng = random.Random(7)

    def read() -> None:
        with store.operation():
            store.get_stream_info("bench", f"s{rng.randrange(streams)}")

    for _ in range(min(streams, 200)):  # warm up (fills the cache of the cached one)
        read()
    counting.calls.clear()
    elapsed, latencies = time_calls(itertools.repeat(read, calls))
    per_read = sum(counting.calls.values()) / calls
    return (
        percentile(latencies, 0.5) * 1e3,
        percentile(latencies, 0.99) * 1e3,
        calls / elapsed,
        per_read,
    )


def _after_a_change(invoker: ServiceInvoker, calls: int) -> tuple[float, float, float, float]:
    """Reads of a stream whose record another store changed just before each read."""
    writer = TableMetadataStore(SegmentStoreClient(invoker))
    counting = CountingInvoker(invoker)
    store = StreamMetadataStore(TableMetadataStore(SegmentStoreClient(counting)))
    key = "streams/bench/s0"
    latencies = []
    for i in range(calls + 10):
        record = writer.get(key)
        assert record is not None
        writer.put(key, {**record.value, "cold": [i]}, record.version)
        if i == 10:
            counting.calls.clear()
        _, (latency,) = time_calls([lambda: store.get_stream_info("bench", "s0")])
        if i >= 10:
            latencies.append(latency)
    per_read = sum(counting.calls.values()) / calls
    total = sum(latencies)
    return (
        percentile(latencies, 0.5) * 1e3,
        percentile(latencies, 0.99) * 1e3,
        calls / total,
        per_read,
    )


def _fill(mgr: Any, streams: int) -> None:
    mgr.create_scope("bench")
    config = StreamConfiguration(ScalingPolicy.fixed(4))
    for i in range(streams):
        mgr.create_stream("bench", f"s{i}", config)
        if (i + 1) % 100 == 0:
            log(f"created {i + 1}/{streams} streams")


HEADER = ["read", "p50 ms", "p99 ms", "reads/s", "container calls/read"]


def run_store(args: argparse.Namespace) -> None:
    from pravega_ray.inprocess import InProcessCluster

    cluster = InProcessCluster(4)
    try:
        _fill(cluster.stream_manager(), args.streams)
        rows = [
            ("uncached (cache_bytes=0)", *_reads(cluster, args.streams, args.calls, 0)),
            ("cached", *_reads(cluster, args.streams, args.calls, None)),
            ("cached, record changed before each read", *_after_a_change(cluster, args.calls)),
        ]
    finally:
        cluster.shutdown()
    print_table(
        f"StreamMetadataStore.get_stream_info, InProcessCluster, {args.streams} streams",
        HEADER,
        rows,
    )


def run_ray(args: argparse.Namespace) -> None:
    import ray

    from pravega_ray_actors.ray_calls import RayServiceInvoker

    class Trivial:
        def ping(self) -> int:
            return 0

    with work_dir("bench-metadata-cache-") as path, local_cluster(path / "data") as cluster:
        mgr = cluster.stream_manager()
        _fill(mgr, args.streams)
        actor = ray.remote(Trivial).options(num_cpus=0, name=f"bench-trivial-{os.getpid()}")
        handle = actor.remote()
        invoker = RayServiceInvoker(cluster.container_handles(), cluster.namespace)
        rng = random.Random(3)

        def info() -> None:
            mgr.get_stream_info("bench", f"s{rng.randrange(args.streams)}")

        def sequential(call: Callable[[], object]) -> tuple[float, float, float]:
            for _ in range(20):
                call()
            elapsed, latencies = time_calls(itertools.repeat(call, args.calls))
            return (
                percentile(latencies, 0.5) * 1e3,
                percentile(latencies, 0.99) * 1e3,
                args.calls / elapsed,
            )

        try:
            plain = sequential(lambda: ray.get(handle.ping.remote()))
            through = sequential(info)
            rows: list[tuple[object, ...]] = [
                ("plain Ray actor call (baseline)", *plain, "-"),
                ("get_stream_info through the controller actor", *through, "-"),
                (
                    "store read from the driver, uncached",
                    *_reads(invoker, args.streams, args.calls, 0),
                ),
                (
                    "store read from the driver, cached",
                    *_reads(invoker, args.streams, args.calls, None),
                ),
            ]
        finally:
            ray.kill(handle)
    print_table(
        f"get_stream_info on Ray ({args.streams} streams); ratio to the plain call: "
        f"{through[0] / plain[0]:.2f}x at p50",
        HEADER,
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"any of {PARTS}")
    parser.add_argument("--streams", type=int, default=200, help="streams of 4 segments")
    parser.add_argument("--calls", type=int, default=500, help="timed reads per row")
    args = parser.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}")
    if "store" in parts:
        run_store(args)
    if "ray" in parts:
        run_ray(args)


if __name__ == "__main__":
    main()
