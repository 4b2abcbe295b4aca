"""pravega-ray quickstart: write, read with a reader group, and aggregate in Spark.

Run with ``make demo`` (or ``.venv/bin/python examples/quickstart.py``). It

1. starts the embedded cluster (local Ray, data under ./.pravega-data),
2. creates scope ``quickstart`` and a 3-segment stream,
3. writes 100,000 JSON events over 100 routing keys,
4. reads them back with a two-reader group (in batches, ``read_next_events``) and checks
   count, no duplicates and per-key order,
5. reads the stream into a Spark DataFrame (RayDP) and prints a per-key
   aggregate,
6. stores the aggregate in a key-value table and reads it back,
7. auto-scaling: writes a stream made with ``ScalingPolicy.by_event_rate(1000, 2, 1)``
   at about ten times that rate until the controller splits it, prints its epochs,
   and reads it back exactly once, in order per key, across the scale; then prints a
   short summary;
8. transactions and a large event: commits one transaction of 1,000 events, aborts another
   (and one whose ``with`` block raised), writes a 20 MiB event through a transient
   segment, and reads the stream back: the committed events once and contiguous per segment,
   the aborted ones never, the large event whole;
9. stream cuts, checkpoints and retention: writes two batches, cuts the stream exactly between
   them by time (``get_segments_at_time``) and reads the second batch back through the batch
   client; a subscriber reader group reads and checkpoints, 1,000 more events follow, and the
   retention cycle (every 2 s here, ``start_local(retention_period_s=2)``) truncates the
   stream up to that checkpoint and no further: the events after it are all still read.

Each run uses a fresh stream name, so it can be run again on the same data dir. It prints
only its own lines (and any warning or error); ``-v`` shows Ray's, Spark's and the actors'
logs too (``pravega_ray.logging_setup.configure_logging``).
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
import uuid
from collections import defaultdict

os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")

import pravega_ray as pr
from pravega_ray.logging_setup import configure_logging

EVENTS = 100_000
AFTER_CHECKPOINT = 1_000
"""Events the retention step writes after its checkpoint."""
KEYS = 100
SEGMENTS = 3


def step(message: str) -> None:
    print(f"[quickstart] {message}", flush=True)


def write(cluster: pr.Cluster, scope: str, stream: str) -> float:
    started = time.monotonic()
    with cluster.create_writer(scope, stream, serializer=pr.JsonSerializer()) as writer:
        for i in range(EVENTS):
            key = f"sensor-{i % KEYS}"
            writer.write_event({"key": key, "seq": i, "value": i % 997}, routing_key=key)
    return time.monotonic() - started


def read(
    cluster: pr.Cluster, scope: str, stream: str, expected: int = EVENTS
) -> tuple[list[pr.EventRead], float]:
    """Read ``expected`` events with a new two-reader group; the events and the seconds from
    the group's creation until the last one arrived and both readers closed.

    Each reader takes events in batches (``read_next_events``: what as many
    ``read_next_event`` calls would return, the per-call work paid once) and stops once the
    group has read ``expected``, or after 2 s without an event (fewer arrived: ``check``
    says so)."""
    group = f"{stream}-readers"  # a fresh group per run, like the stream
    started = time.monotonic()
    cluster.create_reader_group(scope, group, pr.ReaderGroupConfig.for_streams(f"{scope}/{stream}"))
    events: list[pr.EventRead] = []
    lock = threading.Lock()
    done = threading.Event()

    def run(reader_id: str) -> None:
        with cluster.create_reader(reader_id, scope, group, pr.JsonSerializer()) as reader:
            idle_since = time.monotonic()
            while not done.is_set() and time.monotonic() - idle_since < 2.0:
                batch = reader.read_next_events(1000, timeout_s=0.05)
                if not batch:
                    continue
                idle_since = time.monotonic()
                with lock:
                    events.extend(batch)
                    if len(events) >= expected:
                        done.set()

    threads = [threading.Thread(target=run, args=(f"reader-{i}",)) for i in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return events, time.monotonic() - started


def check(events: list[pr.EventRead], expected: int = EVENTS) -> None:
    seqs = [e.event["seq"] for e in events]
    if len(seqs) != expected or len(set(seqs)) != expected:
        raise SystemExit(
            f"FAILED: read {len(seqs)} events ({len(set(seqs))} distinct), wrote {expected}"
        )
    last: dict[str, int] = defaultdict(lambda: -1)
    for e in events:
        key, seq = e.event["key"], e.event["seq"]
        if seq <= last[key]:
            raise SystemExit(f"FAILED: routing key {key} out of order")
        last[key] = seq


def autoscale(cluster: pr.Cluster, scope: str, stream: str) -> dict[str, object]:
    """Write at ~10x the stream's target rate until it scales; print its epochs; read back."""
    manager = cluster.stream_manager()
    policy = pr.ScalingPolicy.by_event_rate(target_rate=1000, scale_factor=2, min_segments=1)
    manager.create_stream(scope, stream, pr.StreamConfiguration(scaling=policy))
    step(f"created {scope}/{stream} with {policy}; writing ~10,000 events/s until it scales ...")
    started = time.monotonic()
    written = 0
    with cluster.create_writer(scope, stream, serializer=pr.JsonSerializer()) as writer:
        while manager.get_stream_info(scope, stream).epoch == 0:
            if time.monotonic() - started > 120:
                raise SystemExit("FAILED: the stream did not auto-scale within 120 s")
            batch_started = time.monotonic()
            for _ in range(500):
                key = f"sensor-{written % KEYS}"
                writer.write_event({"key": key, "seq": written, "value": 1}, routing_key=key)
                written += 1
            writer.flush()
            time.sleep(max(0.0, 0.05 - (time.monotonic() - batch_started)))
        scaled_s = time.monotonic() - started
        for _ in range(5_000):  # a few more after the scale, into the new segments
            key = f"sensor-{written % KEYS}"
            writer.write_event({"key": key, "seq": written, "value": 1}, routing_key=key)
            written += 1
    info = manager.get_stream_info(scope, stream)
    step(f"auto-scaled after {scaled_s:.1f}s of writing; epochs of {scope}/{stream}:")
    for epoch in range(info.epoch + 1):
        ranges = ", ".join(
            f"{s.segment_id >> 32}.{s.segment_id & 0xFFFFFFFF} [{s.key_low:.2f}, {s.key_high:.2f})"
            for s in manager.get_epoch_segments(scope, stream, epoch)
        )
        print(f"    epoch {epoch}: {ranges}", flush=True)
    events, _ = read(cluster, scope, stream, expected=written)
    check(events, expected=written)
    step(f"read {len(events):,} events back across the scale: exactly once, in order per key")
    return {"autoscale_epochs": info.epoch + 1, "autoscale_after_s": round(scaled_s, 1)}


def transactions(cluster: pr.Cluster, scope: str, stream: str) -> dict[str, object]:
    """Commit one transaction, abort two, write one large event; read back and check."""
    manager = cluster.stream_manager()
    manager.create_stream(scope, stream, pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(2)))
    started = time.monotonic()
    with cluster.create_transactional_writer(scope, stream, serializer=pr.JsonSerializer()) as tw:
        committed = tw.begin_txn()
        for i in range(1_000):
            committed.write_event({"txn": "committed", "seq": i}, routing_key=f"k{i % 10}")
        committed.commit()  # returns once every event is visible
        aborted = tw.begin_txn()
        for i in range(500):
            aborted.write_event({"txn": "aborted", "seq": i}, routing_key=f"k{i % 10}")
        aborted.abort()
        try:
            with tw.begin_txn() as txn:  # a with block that raises aborts its transaction
                txn.write_event({"txn": "aborted", "seq": -1}, routing_key="k0")
                raise RuntimeError("the job failed half way")
        except RuntimeError:
            pass
        statuses = [t.check_status().name for t in (committed, aborted, txn)]
    txn_s = time.monotonic() - started
    step(f"transactions: committed 1,000 events in {txn_s:.2f}s; statuses {statuses}")
    big = os.urandom(20 * 1024 * 1024)
    started = time.monotonic()
    with cluster.create_writer(scope, stream, serializer=pr.BytesSerializer()) as writer:
        writer.write_event(big, routing_key="k0").result()
    large_s = time.monotonic() - started
    step(f"large event: wrote 20 MiB through a transient segment in {large_s:.2f}s")
    group = f"{stream}-readers"
    cluster.create_reader_group(scope, group, pr.ReaderGroupConfig.for_streams(f"{scope}/{stream}"))
    seen: list[dict] = []
    large_ok = False
    with cluster.create_reader("r1", scope, group, serializer=pr.BytesSerializer()) as reader:
        while len(seen) + large_ok < 1_001:
            ev = reader.read_next_event(timeout_s=10.0)
            if ev is None:
                raise SystemExit(f"FAILED: read {len(seen)} transaction events, expected 1,000")
            if len(ev.event) > 1024:
                large_ok = ev.event == big
            else:
                seen.append(json.loads(ev.event))
    if not large_ok or any(e["txn"] != "committed" for e in seen):
        raise SystemExit("FAILED: an aborted event was read, or the large event differs")
    if sorted(e["seq"] for e in seen) != list(range(1_000)):
        raise SystemExit("FAILED: committed events missing or duplicated")
    step("read back: the 1,000 committed events once each, no aborted one, the large event whole")
    return {"txn_commit_s": round(txn_s, 2), "large_event_mib_per_s": round(20 / large_s, 1)}


def cuts_and_retention(cluster: pr.Cluster, scope: str, stream: str) -> dict[str, object]:
    """A cut exact to the event, a checkpoint, and retention truncating up to it only."""
    manager = cluster.stream_manager()
    policy = pr.RetentionPolicy.by_size(min_bytes=1, max_bytes=0)
    manager.create_stream(
        scope, stream, pr.StreamConfiguration(pr.ScalingPolicy.fixed(2), retention=policy)
    )
    batch = 5_000
    with cluster.create_writer(scope, stream, serializer=pr.JsonSerializer()) as writer:
        for i in range(batch):
            writer.write_event({"batch": 1, "seq": i}, routing_key=f"k{i % 10}")
        writer.flush()
        time.sleep(0.05)
        between_ms = int(time.time() * 1000)
        time.sleep(0.05)
        for i in range(batch):
            writer.write_event({"batch": 2, "seq": i}, routing_key=f"k{i % 10}")
        writer.flush()
    cut = manager.get_segments_at_time(scope, stream, between_ms)
    batch_client = cluster.batch_client()
    ranges = batch_client.segment_ranges(scope, stream, cut, manager.get_tail_cut(scope, stream))
    second = [e for r in ranges for e in batch_client.read_segment(r, pr.JsonSerializer())]
    if sorted(e["seq"] for e in second) != list(range(batch)) or any(
        e["batch"] != 2 for e in second
    ):
        raise SystemExit("FAILED: the cut at a time is not exactly between the two batches")
    step(
        f"stream cut at a time, exact to the event: {len(ranges)} segment ranges after it hold "
        f"exactly the second batch of {batch:,} events (cut {cut.to_base64()[:24]}...)"
    )
    group = f"{stream}-audit"
    subscriber = pr.RetentionConfigType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT
    config = pr.ReaderGroupConfig.for_streams(f"{scope}/{stream}", retention_type=subscriber)
    cluster.create_reader_group(scope, group, config)
    initial_head = manager.get_head_cut(scope, stream)
    rg = cluster.reader_group(scope, group)
    done: list[pr.Checkpoint] = []
    with cluster.create_reader("auditor", scope, group, serializer=pr.JsonSerializer()) as reader:
        read = 0
        while read < 3_000:
            if reader.read_next_event(timeout_s=10.0) is None:
                raise SystemExit("FAILED: the auditor read nothing")
            read += 1
        checkpointer = threading.Thread(target=lambda: done.append(rg.initiate_checkpoint("cp-1")))
        checkpointer.start()
        while (ev := reader.read_next_event(timeout_s=10.0)) is not None:
            if ev.checkpoint_name == "cp-1":
                break
            read += 1
        else:
            raise SystemExit("FAILED: no checkpoint marker reached the reader")
        before = read
        # The call after the marker passes the checkpoint (all before it is processed).
        if reader.read_next_event(timeout_s=2.0) is not None:
            read += 1
        checkpointer.join(timeout=60)
        if not done:
            raise SystemExit("FAILED: the checkpoint did not complete")
        checkpoint = done[0].cuts[f"{scope}/{stream}"]
        step(f"checkpoint cp-1 after {before:,} events: segment -> offset {checkpoint.positions}")
        # Events after the checkpoint whatever the timing (the marker may reach the reader only
        # at the tail): the policy keeps at least 1 byte, so retention truncates up to the
        # checkpoint only when something follows it.
        with cluster.create_writer(scope, stream, serializer=pr.JsonSerializer()) as writer:
            for i in range(AFTER_CHECKPOINT):
                writer.write_event({"batch": 3, "seq": i}, routing_key=f"k{i % 10}")
            writer.flush()
        deadline = time.monotonic() + 60
        while (head := manager.get_head_cut(scope, stream)) == initial_head:
            if time.monotonic() > deadline:
                raise SystemExit("FAILED: retention did not truncate the stream within 60 s")
            time.sleep(0.5)
        if not head <= checkpoint:
            raise SystemExit(f"FAILED: retention truncated past the checkpoint ({head})")
        rest = 0
        while reader.read_next_event(timeout_s=2.0) is not None:
            rest += 1
    total = 2 * batch + AFTER_CHECKPOINT
    if read + rest != total:
        raise SystemExit(f"FAILED: the auditor read {read + rest} events, expected {total}")
    step(
        f"retention truncated {scope}/{stream} up to the checkpoint, not past it; the auditor "
        f"read the other {total - before:,} events: {total:,} in all, none lost"
    )
    return {"retention_truncated": True, "checkpoint_events": before}


def main() -> None:
    parser = argparse.ArgumentParser(description="pravega-ray quickstart (make demo)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show library logs too")
    configure_logging(parser.parse_args().verbose)  # before Ray and Spark start
    t0 = time.monotonic()
    step("starting the embedded cluster (local Ray, data in ./.pravega-data) ...")
    cluster = pr.start_local(retention_period_s=2.0)
    spark = None
    try:
        scope, stream = "quickstart", f"readings-{uuid.uuid4().hex[:8]}"
        manager = cluster.stream_manager()
        manager.create_scope(scope)
        manager.create_stream(
            scope, stream, pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(SEGMENTS))
        )
        step(f"created stream {scope}/{stream} with {SEGMENTS} segments")

        step(f"writing {EVENTS:,} JSON events over {KEYS} routing keys ...")
        write_s = write(cluster, scope, stream)
        step(
            f"wrote {EVENTS:,} events in {write_s:.2f}s ({EVENTS / write_s:,.0f} events/s, "
            "all durably acknowledged)"
        )

        step("reading them back with a two-reader group ...")
        events, read_s = read(cluster, scope, stream)
        check(events)
        step(f"read {len(events):,} events in {read_s:.2f}s: exactly once, in order per key")

        step("starting Spark on Ray (RayDP) ...")
        spark = pr.spark.init_spark(app_name="pravega-ray-quickstart")
        from pyspark.sql import functions as F

        df = pr.spark.read_stream(spark, f"{scope}/{stream}")
        parsed = df.select(
            F.get_json_object(F.col("event").cast("string"), "$.key").alias("key"),
            F.get_json_object(F.col("event").cast("string"), "$.value").cast("long").alias("value"),
            "segment_id",
        )
        aggregate = (
            parsed.groupBy("key")
            .agg(F.count("*").alias("events"), F.sum("value").alias("sum_value"))
            .orderBy("key")
        )
        rows = aggregate.collect()
        spark_total = sum(r["events"] for r in rows)
        step(f"per-key aggregate from Spark (first 5 of {len(rows)} keys):")
        for r in rows[:5]:
            print(f"    {r['key']:<12} events={r['events']:>5}  sum(value)={r['sum_value']}")
        if spark_total != EVENTS:
            raise SystemExit(f"FAILED: Spark saw {spark_total} events, wrote {EVENTS}")

        table = f"aggregates-{stream.removeprefix('readings-')}"
        manager.create_key_value_table(scope, table, partitions=2)
        kvt = cluster.key_value_table(
            scope, table, key_serializer=pr.Utf8Serializer(), value_serializer=pr.JsonSerializer()
        )
        for r in rows:
            kvt.put_if_absent(r["key"], {"events": r["events"], "sum": r["sum_value"]})
        stored = kvt.get_all([r["key"] for r in rows])
        if [e.value["events"] if e else None for e in stored] != [r["events"] for r in rows]:
            raise SystemExit("FAILED: the key-value table does not hold the aggregate")
        step(
            f"stored the aggregate in key-value table {scope}/{table}: "
            f"{sum(1 for _ in kvt.iter_keys())} keys, read back with get_all"
        )

        scaled = autoscale(cluster, scope, f"autoscale-{stream.removeprefix('readings-')}")
        txns = transactions(cluster, scope, f"orders-{stream.removeprefix('readings-')}")
        kept = cuts_and_retention(cluster, scope, f"audit-{stream.removeprefix('readings-')}")

        summary = {
            "stream": f"{scope}/{stream}",
            "segments": SEGMENTS,
            "events_written": EVENTS,
            "write_events_per_s": round(EVENTS / write_s),
            "events_read_by_group": len(events),
            "read_events_per_s": round(len(events) / read_s),
            "spark_rows": spark_total,
            "spark_keys": len(rows),
            "kvt_keys": len(stored),
            **scaled,
            **txns,
            **kept,
            "total_s": round(time.monotonic() - t0, 1),
        }
        step("summary: " + json.dumps(summary))
        print("[quickstart] OK", flush=True)
    finally:
        if spark is not None:
            pr.spark.stop_spark()
        cluster.shutdown()
        pr.spark.clean_raydp_temp_folders()


if __name__ == "__main__":
    main()
