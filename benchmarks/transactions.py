"""Transactions: commit latency, and events/s through transactions against plain writes.

Two tables, every number measured in the same run on the same cluster:

1. ``commit latency``: for transactions of 1, 100 and 10,000 events (``--sizes``) over streams
   of 1 and 16 segments (``--segments``), the time of ``txn.commit()`` alone (it flushes what
   is not yet durable and makes one controller call, ``commit_transaction_and_wait``, which
   answers once the commit event processor merged every transaction segment into its
   parent: no polling), p50 and p99 over
   ``--commits`` transactions each (fewer for 10,000 events: ``--big-commits``). The events are
   flushed into the transaction before the timer starts, so the row is the commit itself.
2. ``throughput``: ``--events`` events of ``--event-bytes`` bytes (16 routing keys) written
   through transactions of 10,000 events (begin, write, commit: the whole cost) against the
   same events through a plain writer's ``write_event`` + ``flush`` on the same stream, in the
   same run (the plain baseline runs first and last; the table shows both, and "vs plain" is
   against their mean). Transactions are measured twice: ``commit()`` waiting for COMMITTED
   each time, and ``commit(wait=False)`` (returns at COMMITTING, as Pravega's
   ``Transaction.commit`` does; the next transaction is written while the commit processor
   merges the last), the clock stopping once all are COMMITTED. Then ``--writers``
   transactional writers side by side (threads, each its own transactions of ``--per-txn``,
   ``commit()`` waiting), against one writer (the ``commit()`` row): "vs one writer". One
   plain batch and one transaction run first as a warm-up, not counted. Goals: transactions
   at least half of plain, 4 writers at least twice one, commit p50 on Ray at most 20 ms
   (1 segment) / 40 ms (16 segments).

By default the cluster is an in-process one (``InProcessCluster``: containers and the
controller in this process, memory backends, the commit/abort processors and the timer on
threads); ``--ray`` runs on ``pr.start_local`` (a fresh namespace and temporary directory,
file tiers; shut down at the end). Progress goes to stderr, tables to stdout.

Run: ``make bench-transactions`` or ``.venv/bin/python -m benchmarks.transactions --help``.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pravega_ray as pr
from benchmarks.common import local_cluster, log, new_stream, percentile, print_table, work_dir


def commit_latency(
    cluster: Any, scope: str, segments: int, size: int, commits: int, payload: bytes
) -> tuple[float, float, float]:
    """(p50 ms, p99 ms, mean ms) of ``commits`` commits of ``size``-event transactions."""
    stream = new_stream(cluster, scope, segments)
    latencies: list[float] = []
    with cluster.create_transactional_writer(scope, stream, pr.BytesSerializer()) as tw:
        for _ in range(commits):
            txn = tw.begin_txn()
            for n in range(size):
                txn.write_event(payload, routing_key=str(n % 16))
            txn.flush()
            started = time.perf_counter()
            txn.commit()
            latencies.append(time.perf_counter() - started)
    mean = sum(latencies) / len(latencies)
    return percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000, mean * 1000


def plain_rate(cluster: Any, scope: str, stream: str, events: int, payload: bytes) -> float:
    """Events/s of ``write_event`` of ``events`` events, then ``flush``."""
    with cluster.create_writer(scope, stream, pr.BytesSerializer()) as writer:
        started = time.perf_counter()
        for n in range(events):
            writer.write_event(payload, routing_key=str(n % 16))
        writer.flush()
        return events / (time.perf_counter() - started)


def txn_rate(
    cluster: Any,
    scope: str,
    stream: str,
    events: int,
    per_txn: int,
    payload: bytes,
    *,
    wait: bool = True,
) -> float:
    """Events/s through transactions of ``per_txn`` events: begin, write, commit each.

    ``wait``: each ``commit()`` returns once COMMITTED; without, once COMMITTING (Pravega's
    ``Transaction.commit``), and the clock stops once every transaction is COMMITTED.
    """
    with cluster.create_transactional_writer(scope, stream, pr.BytesSerializer()) as tw:
        started = time.perf_counter()
        written = 0
        txns = []
        while written < events:
            txn = tw.begin_txn()
            for n in range(min(per_txn, events - written)):
                txn.write_event(payload, routing_key=str(n % 16))
            written += min(per_txn, events - written)
            txn.commit(wait=wait)
            txns.append(txn)
        for txn in txns:
            txn.commit()  # a no-op once COMMITTED; waits for it otherwise
        return events / (time.perf_counter() - started)


def parallel_txn_rate(
    cluster: Any, scope: str, stream: str, events: int, per_txn: int, payload: bytes, writers: int
) -> float:
    """Events/s through ``writers`` transactional writers side by side (one thread each,
    as the tasks of a pipeline would), each committing transactions of ``per_txn`` events
    and waiting for COMMITTED; ``events`` in all."""
    share = events // writers
    errors: list[BaseException] = []

    def one() -> None:
        try:
            txn_rate(cluster, scope, stream, share, per_txn, payload)
        except BaseException as e:  # reported below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(writers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return share * writers / (time.perf_counter() - started)


def run(cluster: Any, args: argparse.Namespace) -> None:
    scope = "bench" + uuid.uuid4().hex[:6]
    cluster.stream_manager().create_scope(scope)
    payload = b"x" * args.event_bytes
    rows: list[tuple[object, ...]] = []
    for segments in args.segments:
        for size in args.sizes:
            commits = args.big_commits if size >= 10_000 else args.commits
            log(f"commit latency: {segments} segments, {size} events x {commits}")
            p50, p99, mean = commit_latency(cluster, scope, segments, size, commits, payload)
            rows.append((f"{size:,} events, {segments} segment(s)", commits, p50, p99, mean))
    print_table(
        f"Commit latency ({args.event_bytes}-byte events, flushed before the clock starts)",
        ["transaction", "commits", "p50 ms", "p99 ms", "mean ms"],
        rows,
    )
    stream = new_stream(cluster, scope, args.throughput_segments)
    log("throughput: warm-up (one plain batch, one transaction; not counted)")
    plain_rate(cluster, scope, stream, args.per_txn, payload)
    txn_rate(cluster, scope, stream, args.per_txn, args.per_txn, payload)
    log(f"throughput: {args.events} events, plain first")
    plain_before = plain_rate(cluster, scope, stream, args.events, payload)
    log("throughput: through transactions, commit() waiting for COMMITTED")
    through_txns = txn_rate(cluster, scope, stream, args.events, args.per_txn, payload)
    log("throughput: through transactions, commit(wait=False)")
    pipelined = txn_rate(cluster, scope, stream, args.events, args.per_txn, payload, wait=False)
    log(f"throughput: {args.writers} transactional writers side by side, commit()")
    parallel = parallel_txn_rate(
        cluster, scope, stream, args.events, args.per_txn, payload, args.writers
    )
    log("throughput: plain again")
    plain_after = plain_rate(cluster, scope, stream, args.events, payload)
    baseline = (plain_before + plain_after) / 2
    one = through_txns
    print_table(
        f"Throughput: {args.events:,} {args.event_bytes}-byte events, 16 keys, "
        f"{args.throughput_segments} segments",
        ["path", "events/s", "vs plain", "vs one writer"],
        [
            ("plain write_event (before)", plain_before, plain_before / baseline, None),
            (
                f"transactions of {args.per_txn:,}, commit()",
                through_txns,
                through_txns / baseline,
                1.0,
            ),
            (
                f"transactions of {args.per_txn:,}, commit(wait=False)",
                pipelined,
                pipelined / baseline,
                pipelined / one,
            ),
            (
                f"{args.writers} writers side by side, transactions of {args.per_txn:,}",
                parallel,
                parallel / baseline,
                parallel / one,
            ),
            ("plain write_event (after)", plain_after, plain_after / baseline, None),
        ],
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ray", action="store_true", help="run on pr.start_local")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 100, 10_000])
    parser.add_argument("--segments", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--big-commits", type=int, default=5)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--per-txn", type=int, default=10_000)
    parser.add_argument("--throughput-segments", type=int, default=4)
    parser.add_argument("--writers", type=int, default=4, help="transactional writers side by side")
    parser.add_argument("--event-bytes", type=int, default=100)
    args = parser.parse_args(argv)
    if args.ray:
        namespace = "bench-txn-" + uuid.uuid4().hex[:6]
        with (
            work_dir("pravega-bench-txn-") as data_dir,
            local_cluster(data_dir, namespace=namespace) as cluster,
        ):
            run(cluster, args)
    else:
        from pravega_ray.inprocess import InProcessCluster

        cluster = InProcessCluster(container_count=4)
        try:
            run(cluster, args)
        finally:
            cluster.shutdown()


if __name__ == "__main__":
    main()
