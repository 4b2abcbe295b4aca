"""Read tasks on the shared cluster: many read calls in flight across ranges give each
range's events exactly once, in offset order; the Spark read's Arrow IPC blocks."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
import ray

import pravega_ray as pr
from pravega_ray.data.datasource import plan_read
from pravega_ray.data.event_blocks import EVENT_ARROW_SCHEMA, read_ranges
from pravega_ray.errors import DataCorruptionError, InvalidArgumentError
from pravega_ray.naming import stream_segment_name
from pravega_ray.spark.stream_reader import arrow_stream_blocks

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


def make_stream(cluster, scope: str, stream: str, segments: int):  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    if scope not in mgr.list_scopes():
        mgr.create_scope(scope)
    mgr.create_stream(
        scope, stream, pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(segments))
    )


def write_mixed(cluster, scope: str, stream: str, count: int) -> list[bytes]:  # type: ignore[no-untyped-def]
    """``count`` events of 0-600 bytes over 10 routing keys; returns them in write order."""
    rng = random.Random(7)
    events = [b"%05d:" % i + bytes([i % 251]) * rng.randrange(0, 600) for i in range(count)]
    with cluster.create_writer(scope, stream, serializer=pr.BytesSerializer()) as writer:
        for i, event in enumerate(events):
            writer.write_event(event, routing_key=f"k{i % 10}")
        writer.flush()
    return events


def rows_by_range(tables: list[pa.Table]) -> list[tuple[int, int, bytes]]:
    return [
        (row["segment_id"], row["offset"], row["event"])
        for table in tables
        for row in table.to_pylist()
    ]


def test_many_reads_in_flight_give_each_range_in_offset_order(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    """Windows of 700 bytes (events cut across them), 1 to 16 outstanding: always the same
    rows, every event once, ranges one after the other, each in offset order."""
    scope, stream = unique_name, "windows"
    make_stream(cluster, scope, stream, segments=3)
    events = write_mixed(cluster, scope, stream, 400)
    plan = plan_read(f"{scope}/{stream}", None, None, None, cluster)
    assert len(plan.ranges) == 3

    one_by_one = rows_by_range(
        list(
            read_ranges(
                plan.containers, plan.ranges, plan.layout, read_bytes=700, reads_in_flight=1
            )
        )
    )
    assert sorted(e for _, _, e in one_by_one) == sorted(events)
    order = [r.segment_id for r in plan.ranges]
    segment_ids = [s for s, _, _ in one_by_one]
    assert segment_ids == sorted(segment_ids, key=order.index)  # ranges in order
    for segment_id in order:
        offsets = [o for s, o, _ in one_by_one if s == segment_id]
        assert offsets == sorted(set(offsets))
    for in_flight in (2, 5, 16):
        tables = list(
            read_ranges(
                plan.containers,
                plan.ranges,
                plan.layout,
                block_bytes=4096,  # several blocks per task
                read_bytes=700,
                reads_in_flight=in_flight,
            )
        )
        assert len(tables) > 3
        assert all(t.num_rows and t.schema == EVENT_ARROW_SCHEMA for t in tables)
        assert rows_by_range(tables) == one_by_one


def test_read_ranges_refuses_bad_window_settings(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    scope, stream = unique_name, "bad"
    make_stream(cluster, scope, stream, segments=1)
    write_mixed(cluster, scope, stream, 5)
    plan = plan_read(f"{scope}/{stream}", None, None, None, cluster)
    for settings in ({"read_bytes": 0}, {"reads_in_flight": 0}, {"read_bytes": True}):
        with pytest.raises(InvalidArgumentError):
            list(read_ranges(plan.containers, plan.ranges, plan.layout, **settings))


def test_spark_read_blocks_are_arrow_ipc_of_every_event_once(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    """The Spark read's tasks (no Ray Data): Arrow IPC blocks closed at the block size, every
    event once, each range in offset order; a damaged segment raises DataCorruptionError
    itself, not wrapped by Ray."""
    scope, stream = unique_name, "ipc"
    make_stream(cluster, scope, stream, segments=4)
    events = write_mixed(cluster, scope, stream, 600)
    plan = plan_read(f"{scope}/{stream}", None, None, None, cluster)

    for tasks in (1, 3, 8):
        refs = arrow_stream_blocks(plan, tasks, block_bytes=8192)
        blocks = [pa.ipc.open_stream(data).read_all() for data in ray.get(refs)]
        assert len(blocks) >= len(plan.ranges)  # each range's read exceeds the block size
        assert all(b.num_rows and b.schema == EVENT_ARROW_SCHEMA for b in blocks)
        got = rows_by_range(blocks)
        assert sorted(e for _, _, e in got) == sorted(events)
        for r in plan.ranges:
            offsets = [o for s, o, _ in got if s == r.segment_id]
            assert offsets == sorted(set(offsets))

    make_stream(cluster, scope, "damaged", segments=1)
    with cluster.create_writer(scope, "damaged", serializer=pr.BytesSerializer()) as writer:
        for _ in range(3):
            writer.write_event(b"fine")
        writer.flush()
    segment = stream_segment_name(scope, "damaged", 0)
    ray.get(cluster.container_handle(segment).append_conditional.remote(segment, b"\xff" * 16))
    damaged = plan_read(f"{scope}/damaged", None, None, None, cluster)
    with pytest.raises(DataCorruptionError) as info:
        arrow_stream_blocks(damaged, 1)
    assert type(info.value) is DataCorruptionError and segment in str(info.value)
