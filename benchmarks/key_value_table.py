"""Key-value table throughput and latency on a local cluster, against same-run baselines.

Run: ``.venv/bin/python -m benchmarks.key_value_table [--ops N] [--threads T] [--value-bytes B]
[--batch-sizes 10,100] [--updates-only]``.

It starts its own embedded cluster (``start_local`` on a temporary directory, 2
containers, file tiers, Ray namespace ``bench-kvt``) and a table of 4 partitions,
then measures, with durable acknowledgements throughout:

- ``put`` one thread: sequential unconditional puts (latency per call);
- ``put`` T threads: each thread its own keys, all partitions busy;
- ``replace``: conditional updates carrying the version of the previous put;
- ``get`` one thread, and ``get_all`` of 100 keys per call;
- ``iter_entries`` over every key;
- multi-key ``update``: on a table with key families (8-byte primary, 4-byte secondary
  keys), one atomic ``update([Put ...])`` of N entries of one primary key against N
  single-key puts of as many fresh keys, one after another, in the same run (for each N of
  ``--batch-sizes``; about ``--ops`` entries each way). ``--updates-only`` runs this
  section alone (and no baselines).

Baselines measured in the same run:

- ``plain Ray actor call``: a sync actor holding a dict (``set``/``get``), one call at a
  time: the cost of a Ray round trip without durability;
- ``redis SET/GET (AOF always)``: ``redis-server`` with an fsync per write, one client,
  one command at a time (skipped when ``redis-server`` is not installed).

Prints a table (ops/s, p50 and p99 latency in ms).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pravega_ray as pr
from benchmarks.common import local_cluster, log, percentile, time_calls, work_dir
from benchmarks.redis_server import redis_command, running_redis


@dataclass(frozen=True)
class Row:
    system: str
    operation: str
    ops_per_s: float
    p50_ms: float
    p99_ms: float


def row(system: str, operation: str, ops: int, seconds: float, latencies: list[float]) -> Row:
    return Row(
        system,
        operation,
        ops / seconds,
        percentile(latencies, 0.50) * 1000,
        percentile(latencies, 0.99) * 1000,
    )


class DictActor:
    """The baseline: a sync actor with an in-memory dict (no durability)."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}

    def set(self, key: bytes, value: bytes) -> None:
        self.data[key] = value

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)


def ray_baseline(ops: int, value: bytes) -> list[Row]:
    import ray

    actor = ray.remote(num_cpus=0)(DictActor).remote()  # type: ignore[attr-defined]
    try:
        ray.get([actor.set.remote(b"warm", value) for _ in range(100)])
        keys = [b"key-%d" % i for i in range(ops)]
        seconds, lat = time_calls([lambda k=k: ray.get(actor.set.remote(k, value)) for k in keys])
        put = row("plain Ray actor call", "set (no fsync)", ops, seconds, lat)
        seconds, lat = time_calls([lambda k=k: ray.get(actor.get.remote(k)) for k in keys])
        get = row("plain Ray actor call", "get", ops, seconds, lat)
    finally:
        ray.kill(actor)
    return [put, get]


def redis_baseline(ops: int, value: bytes, work_dir: Path) -> list[Row]:
    binary = shutil.which("redis-server")
    if binary is None:
        log("redis-server not installed: Redis baseline skipped")
        return []
    rows = []
    with (
        running_redis(binary, work_dir / "redis") as port,
        socket.create_connection(("127.0.0.1", port)) as s,
    ):
        reader = s.makefile("rb")

        def command(*args: bytes) -> None:
            s.sendall(redis_command(*args))
            line = reader.readline()
            if line.startswith(b"-"):
                raise RuntimeError(f"redis error: {line!r}")
            if line.startswith(b"$") and not line.startswith(b"$-1"):
                reader.read(int(line[1:]) + 2)

        keys = [b"key-%d" % i for i in range(ops)]
        seconds, lat = time_calls([lambda k=k: command(b"SET", k, value) for k in keys])
        rows.append(row("redis (AOF always)", "SET", ops, seconds, lat))
        seconds, lat = time_calls([lambda k=k: command(b"GET", k) for k in keys])
        rows.append(row("redis (AOF always)", "GET", ops, seconds, lat))
    return rows


def kvt_rows(cluster: pr.Cluster, ops: int, threads: int, value: bytes) -> list[Row]:
    mgr = cluster.stream_manager()
    mgr.create_scope("bench")
    mgr.create_key_value_table("bench", "t", partitions=4)
    kvt = cluster.key_value_table("bench", "t")
    rows = []
    kvt.put(b"warm", value)

    keys = [b"key-%d" % i for i in range(ops)]
    versions: dict[bytes, int] = {}

    def put(k: bytes) -> None:
        versions[k] = kvt.put(k, value)

    log(f"put: {ops:,} sequential puts")
    seconds, lat = time_calls([lambda k=k: put(k) for k in keys])
    rows.append(row("pravega-ray kvt", "put, 1 thread", ops, seconds, lat))

    log(f"replace: {ops:,} conditional updates")
    seconds, lat = time_calls([lambda k=k: put_replace(kvt, versions, k, value) for k in keys])
    rows.append(row("pravega-ray kvt", "replace(version)", ops, seconds, lat))

    log(f"put: {ops:,} puts from {threads} threads")
    per_thread = max(1, ops // threads)
    all_latencies: list[list[float]] = [[] for _ in range(threads)]

    def worker(index: int) -> None:
        mine = [b"t%d-%d" % (index, i) for i in range(per_thread)]
        all_latencies[index] = time_calls([lambda k=k: kvt.put(k, value) for k in mine])[1]

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    seconds = time.perf_counter() - start
    flat = [x for part in all_latencies for x in part]
    rows.append(row("pravega-ray kvt", f"put, {threads} threads", len(flat), seconds, flat))

    log(f"get: {ops:,} sequential gets")
    seconds, lat = time_calls([lambda k=k: kvt.get(k) for k in keys])
    rows.append(row("pravega-ray kvt", "get, 1 thread", ops, seconds, lat))

    batches = [keys[i : i + 100] for i in range(0, ops, 100)]
    seconds, lat = time_calls([lambda b=b: kvt.get_all(b) for b in batches])
    rows.append(row("pravega-ray kvt", "get_all(100) keys", ops, seconds, lat))

    start = time.perf_counter()
    count = sum(1 for _ in kvt.iter_entries())
    seconds = time.perf_counter() - start
    rows.append(Row("pravega-ray kvt", f"iter_entries ({count:,})", count / seconds, 0.0, 0.0))
    return rows


def update_rows(cluster: pr.Cluster, ops: int, sizes: list[int], value: bytes) -> list[Row]:
    """A multi-key ``update`` of N entries of one primary key against N single-key puts.

    Rows count entries (not calls) per second; latencies are per call (one update of N
    entries, or one put).
    """
    mgr = cluster.stream_manager()
    mgr.create_scope("bench-f")
    mgr.create_key_value_table(
        "bench-f", "f", partitions=4, primary_key_length=8, secondary_key_length=4
    )
    kvt = cluster.key_value_table("bench-f", "f")
    kvt.put(b"warm0000" + b"0000", value)
    rows = []
    for n in sizes:
        rounds = max(1, ops // n)
        primaries = [b"%08d" % (n * 100_000 + r) for r in range(rounds)]
        log(f"update: {rounds:,} updates of {n} entries, then {rounds * n:,} single puts")
        batches = [[pr.Put(p + b"%04d" % i, value) for i in range(n)] for p in primaries]
        calls = [lambda b=b: kvt.update(b) for b in batches]
        seconds, lat = time_calls(calls)
        rows.append(row("pravega-ray kvt", f"update({n}) entries", rounds * n, seconds, lat))
        singles = [  # as many fresh keys, of other primary keys: the same work, one by one
            lambda k=b"%08d" % (n * 100_000 + 50_000 + r) + b"%04d" % i: kvt.put(k, value)
            for r in range(rounds)
            for i in range(n)
        ]
        seconds, lat = time_calls(singles)
        rows.append(row("pravega-ray kvt", f"put x{n} (one by one)", rounds * n, seconds, lat))
    return rows


def put_replace(
    kvt: pr.KeyValueTable, versions: dict[bytes, int], key: bytes, value: bytes
) -> None:
    versions[key] = kvt.replace(key, value, versions[key])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--ops", type=int, default=2000, help="operations per measurement")
    parser.add_argument("--threads", type=int, default=8, help="threads for the parallel puts")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument(
        "--batch-sizes", default="10,100", help="entries per multi-key update, comma-separated"
    )
    parser.add_argument(
        "--updates-only", action="store_true", help="only the multi-key update section"
    )
    args = parser.parse_args()
    sizes = [int(n) for n in args.batch_sizes.split(",")]
    os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
    value = os.urandom(args.value_bytes)
    rows: list[Row] = []
    with work_dir("bench-kvt-") as work:
        with local_cluster(work / "data", 2, namespace="bench-kvt") as cluster:
            if not args.updates_only:
                rows += kvt_rows(cluster, args.ops, args.threads, value)
            rows += update_rows(cluster, args.ops, sizes, value)
            if not args.updates_only:
                log("baseline: plain Ray actor")
                rows += ray_baseline(args.ops, value)
        if not args.updates_only:
            log("baseline: redis")
            rows += redis_baseline(args.ops, value, work)

    print(f"\nkey-value table, {args.value_bytes}-byte values, durable acks, {os.cpu_count()} CPUs")
    header = f"{'system':<22} {'operation':<24} {'ops/s':>10} {'p50 ms':>8} {'p99 ms':>8}"
    print(header)
    print("-" * len(header))
    for r in rows:
        latency = f"{r.p50_ms:>8.2f} {r.p99_ms:>8.2f}" if r.p50_ms else f"{'':>8} {'':>8}"
        print(f"{r.system:<22} {r.operation:<24} {r.ops_per_s:>10,.0f} {latency}")
    for n in sizes:
        batch = next(r for r in rows if r.operation == f"update({n}) entries")
        single = next(r for r in rows if r.operation == f"put x{n} (one by one)")
        print(
            f"update of {n} entries / {n} single puts: "
            f"{batch.ops_per_s / single.ops_per_s:.1f}x entries/s "
            f"(one update p50 {batch.p50_ms:.2f} ms vs {n} puts {n * single.p50_ms:.2f} ms)"
        )
    if args.updates_only:
        return
    put_1 = next(r for r in rows if r.operation == "put, 1 thread")
    ray_set = next(r for r in rows if r.system == "plain Ray actor call")
    print(
        f"\nput (1 thread) / plain Ray actor call: {put_1.ops_per_s / ray_set.ops_per_s:.2f}x "
        f"(p50 {put_1.p50_ms:.2f} ms vs {ray_set.p50_ms:.2f} ms)"
    )


if __name__ == "__main__":
    main()
