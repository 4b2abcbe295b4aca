"""Micro-batches with stream cuts as offsets (pravega_ray/spark/micro_batches.py) on RayDP.

Bad arguments and damaged checkpoints are tested without Spark in
tests/unit/spark/test_micro_batches_checkpoint.py; cut sizing in
tests/unit/client/test_next_stream_cut.py.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import pravega_ray as pr
from pravega_ray.spark import micro_batches

pytestmark = [pytest.mark.ray, pytest.mark.spark, pytest.mark.timeout(300)]
EVENT_BYTES = 64
FRAME_BYTES = EVENT_BYTES + 8


def make_stream(cluster, scope: str, stream: str, segment_count: int) -> pr.StreamManager:  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    mgr.create_stream(
        scope, stream, pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(segment_count))
    )
    return mgr


def write_events(cluster, scope: str, stream: str, first: int, count: int) -> list[bytes]:  # type: ignore[no-untyped-def]
    events = [
        f"event-{i:06d}".encode().ljust(EVENT_BYTES, b".") for i in range(first, first + count)
    ]
    with cluster.create_writer(scope, stream, serializer=pr.BytesSerializer()) as writer:
        for i, payload in enumerate(events):
            writer.write_event(payload, routing_key=f"k{(first + i) % 7}")
        writer.flush()
    return events


def rows_of(df) -> list[bytes]:  # type: ignore[no-untyped-def]
    return [bytes(r.event) for r in df.select("event").collect()]


def test_micro_batches_cover_every_event_once_while_a_writer_appends_and_scales(
    cluster, spark, unique_name, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    scope, stream = unique_name, "live"
    mgr = make_stream(cluster, scope, stream, segment_count=2)
    written = write_events(cluster, scope, stream, 0, 60)
    more_written: list[bytes] = []
    scaled = threading.Event()

    def writer() -> None:  # appends, scales, appends again, while batches are read
        more_written.extend(write_events(cluster, scope, stream, 60, 60))
        last = mgr.get_stream_info(scope, stream).segments[-1]
        assert mgr.scale_stream(scope, stream, [last.segment_id], [(0.5, 0.8), (0.8, 1.0)])
        scaled.set()
        more_written.extend(write_events(cluster, scope, stream, 120, 60))

    thread = threading.Thread(target=writer)
    seen: list[bytes] = []
    ids: list[int] = []
    budget = 50 * FRAME_BYTES
    for batch_id, df in micro_batches(
        spark,
        f"{scope}/{stream}",
        tmp_path / "cp",
        approx_bytes_per_trigger=budget,
        cluster=cluster,
        poll_interval_s=0.2,
        idle_timeout_s=30.0,  # a safeguard: the loop ends once every event is seen
        max_batches=60,
    ):
        if not thread.is_alive() and not ids:
            thread.start()
        rows = rows_of(df)
        assert rows, "a batch is never empty"
        # At most one event per segment over the budget (3 segments after the split).
        assert len(rows) * FRAME_BYTES <= budget + 3 * FRAME_BYTES
        ids.append(batch_id)
        seen.extend(rows)
        if len(seen) >= 180:
            break  # closes the iterator: the batch in hand stays uncommitted
    thread.join(60)

    assert scaled.is_set()
    assert ids == list(range(len(ids)))
    assert Counter(seen) == Counter(written + more_written)  # every event, exactly once
    commits = sorted(int(p.name) for p in (tmp_path / "cp" / "commits").iterdir())
    assert commits == ids[:-1]


def test_a_restarted_iterator_replays_the_uncommitted_batch_then_goes_on(
    cluster, spark, unique_name, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    scope, stream = unique_name, "restart"
    make_stream(cluster, scope, stream, segment_count=1)
    written = write_events(cluster, scope, stream, 0, 90)
    location = tmp_path / "cp"

    def batches(approx_bytes: int | None = 30 * FRAME_BYTES):  # type: ignore[no-untyped-def]
        return micro_batches(
            spark,
            f"{scope}/{stream}",
            location,
            approx_bytes_per_trigger=approx_bytes,
            cluster=cluster,
            poll_interval_s=0.2,
            idle_timeout_s=0.5,
        )

    first = batches()
    batch0, df0 = next(first)
    rows0 = rows_of(df0)
    batch1, df1 = next(first)  # commits batch 0
    rows1 = rows_of(df1)
    first.close()  # the job "dies" while processing batch 1: never committed
    assert (batch0, batch1) == (0, 1)
    assert len(rows0) == len(rows1) == 30

    replayed: list[tuple[int, list[bytes]]] = [(b, rows_of(df)) for b, df in batches()]
    assert replayed[0] == (1, rows1)  # the same id, the same rows
    assert [b for b, _ in replayed] == [1, 2]
    assert rows0 + [e for _, rows in replayed for e in rows] == written  # one segment: in order

    more = write_events(cluster, scope, stream, 90, 10)
    # No size: up to the tail at the trigger.
    assert [(b, rows_of(df)) for b, df in batches(approx_bytes=None)] == [(3, more)]
    assert list(batches()) == []  # nothing new: ends after the idle time


def test_micro_batches_with_their_time_windows(cluster, spark, unique_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``with_time_window``: each batch comes with where its end stands in event time, so
    an event-time window at or below its lower bound can close (issue 27)."""
    import ray

    from pravega_ray_actors.options import stream_bucket_name

    scope, stream = unique_name, "timed"
    mgr = make_stream(cluster, scope, stream, segment_count=2)
    with cluster.create_writer(scope, stream, serializer=pr.BytesSerializer()) as writer:
        writer.note_time(5_000)
        for i in range(20):
            writer.write_event(b"e%d" % i, routing_key=f"k{i}")
        writer.flush()
        deadline = time.monotonic() + 30
        while mgr.list_writers(scope, stream).get(writer.writer_id.hex()) != 5_000:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        for bucket in range(64):  # the buckets' own period is 10 s: run them now
            try:
                handle = ray.get_actor(stream_bucket_name(bucket), namespace=cluster.namespace)
            except ValueError:
                break
            ray.get(handle.run_watermarks_once.remote(), timeout=60)
    batches = list(
        micro_batches(
            spark,
            f"{scope}/{stream}",
            tmp_path / "cp",
            cluster=cluster,
            idle_timeout_s=1.0,
            max_batches=1,
            with_time_window=True,
        )
    )
    assert len(batches) == 1
    batch_id, df, window = batches[0]
    assert batch_id == 0 and df.count() == 20
    assert window == pr.TimeWindow(5_000, None)
    with pytest.raises(pr.InvalidArgumentError):
        micro_batches(spark, f"{scope}/{stream}", tmp_path / "cp2", with_time_window=1)  # type: ignore[arg-type]
