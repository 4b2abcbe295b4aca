"""pr.data.read_stream on the shared cluster: cuts across scalings, decoded columns, errors."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
import ray

import pravega_ray as pr
from pravega_ray.data.datasource import dataset_of, plan_read
from pravega_ray.data.event_blocks import EVENT_ARROW_SCHEMA, EVENT_COLUMNS
from pravega_ray.errors import (
    DataCorruptionError,
    InvalidArgumentError,
    InvalidNameError,
    SegmentTruncatedError,
    SerializationError,
    StreamNotFoundError,
)
from pravega_ray.naming import stream_segment_name
from pravega_ray.spark.stream_reader import spark_ready_blocks

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

SCHEMA = pa.schema([pa.field("i", pa.int64(), nullable=False), pa.field("name", pa.string())])


def make_stream(cluster, scope: str, stream: str, segments: int = 2):  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    if scope not in mgr.list_scopes():
        mgr.create_scope(scope)
    mgr.create_stream(
        scope, stream, pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(segments))
    )
    return mgr


def write(cluster, scope: str, stream: str, events: list[object], serializer=None) -> None:  # type: ignore[no-untyped-def]
    serializer = serializer or pr.BytesSerializer()
    with cluster.create_writer(scope, stream, serializer=serializer) as writer:
        for i, event in enumerate(events):
            writer.write_event(event, routing_key=f"k{i % 9}")
        writer.flush()


def rows(ds) -> list[dict]:  # type: ignore[no-untyped-def]
    return ds.take_all()


def test_read_stream_between_cuts_across_two_scalings_reads_each_event_once(
    cluster, unique_name
) -> None:  # type: ignore[no-untyped-def]
    scope, stream = unique_name, "scaled"
    mgr = make_stream(cluster, scope, stream)
    write(cluster, scope, stream, [b"before-%d" % i for i in range(30)])
    start = mgr.get_tail_cut(scope, stream)
    write(cluster, scope, stream, [b"e0-%d" % i for i in range(30)])
    first = mgr.get_stream_info(scope, stream).segments[-1]
    assert mgr.scale_stream(scope, stream, [first.segment_id], [(0.5, 0.75), (0.75, 1.0)])
    write(cluster, scope, stream, [b"e1-%d" % i for i in range(30)])
    segments = mgr.get_stream_info(scope, stream).segments
    assert mgr.scale_stream(scope, stream, [s.segment_id for s in segments], [(0.0, 1.0)])
    write(cluster, scope, stream, [b"e2-%d" % i for i in range(30)])
    end = mgr.get_tail_cut(scope, stream)
    write(cluster, scope, stream, [b"after-%d" % i for i in range(30)])

    between = rows(pr.data.read_stream(f"{scope}/{stream}", start, end, cluster=cluster))

    expected = [b"e%d-%d" % (e, i) for e in range(3) for i in range(30)]
    assert Counter(r["event"] for r in between) == Counter(expected)
    assert list(between[0]) == list(EVENT_COLUMNS)
    assert {(r["scope"], r["stream"]) for r in between} == {(scope, stream)}
    by_segment: dict[int, list[int]] = {}
    for r in between:
        by_segment.setdefault(r["segment_id"], []).append(r["offset"])
    assert len(by_segment) >= 4  # two epoch-0 segments, the split pair, the merged one
    assert all(offsets == sorted(set(offsets)) for offsets in by_segment.values())

    everything = pr.data.read_stream(f"{scope}/{stream}", cluster=cluster)
    assert everything.count() == 150
    assert everything.schema().base_schema == EVENT_ARROW_SCHEMA
    at_tail = pr.data.read_stream(f"{scope}/{stream}", start_cut=end, end_cut=end, cluster=cluster)
    assert at_tail.count() == 0


def test_read_tasks_of_several_ranges_make_small_single_chunk_blocks(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    """With a tiny target block size (Ray Data then slices and merges blocks), the blocks
    handed to Spark are still non-empty with one chunk per column, each event once."""
    scope, stream = unique_name, "blocks"
    make_stream(cluster, scope, stream, segments=3)
    write(cluster, scope, stream, [b"%04d" % i * 25 for i in range(300)])
    context = ray.data.DataContext.get_current()
    saved = context.target_max_block_size
    context.target_max_block_size = 4096
    try:
        plan = plan_read(f"{scope}/{stream}", None, None, None, cluster)
        blocks = ray.get(spark_ready_blocks(dataset_of(plan, read_tasks_max=1)))
    finally:
        context.target_max_block_size = saved
    assert len(blocks) > 3
    assert all(b.num_rows and all(c.num_chunks == 1 for c in b.columns) for b in blocks)
    events = [e for b in blocks for e in b.column("event").to_pylist()]
    assert sorted(events) == sorted(b"%04d" % i * 25 for i in range(300))


def test_read_stream_decodes_json_and_arrow_ipc_events_into_columns(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    scope = unique_name
    make_stream(cluster, scope, "json")
    json_events = [{"i": i, "name": f"n{i}"} for i in range(40)]
    write(cluster, scope, "json", json_events, pr.JsonSerializer(SCHEMA))
    make_stream(cluster, scope, "ipc", segments=1)
    ipc = pr.ArrowIpcSerializer(SCHEMA)
    batches = [pa.RecordBatch.from_pylist(json_events[k : k + 10], schema=SCHEMA) for k in (0, 10)]
    write(cluster, scope, "ipc", batches, ipc)

    decoded = pr.data.read_stream(
        f"{scope}/json", serializer=pr.JsonSerializer(SCHEMA), cluster=cluster
    )
    assert decoded.columns() == [*EVENT_COLUMNS, "i", "name"]
    got = rows(decoded)
    assert sorted((r["i"], r["name"]) for r in got) == [(e["i"], e["name"]) for e in json_events]
    assert all(pr.JsonSerializer(SCHEMA).deserialize(r["event"])["i"] == r["i"] for r in got)

    ipc_rows = sorted(
        rows(pr.data.read_stream(f"{scope}/ipc", serializer=ipc, cluster=cluster)),
        key=lambda r: r["i"],
    )
    assert [r["i"] for r in ipc_rows] == list(range(20))
    assert len({r["offset"] for r in ipc_rows[:10]}) == 1  # one event's rows repeat its offset
    assert ipc_rows[0]["offset"] != ipc_rows[10]["offset"]
    assert all(r["event"] is None for r in ipc_rows)

    text = rows(
        pr.data.read_stream(f"{scope}/json", serializer=pr.Utf8Serializer(), cluster=cluster)
    )
    assert all(isinstance(r["event"], str) for r in text) and len(text) == 40

    wrong = pr.data.read_stream(f"{scope}/json", serializer=ipc, cluster=cluster)
    with pytest.raises(SerializationError, match="offset"):
        wrong.materialize()


def test_read_stream_refuses_bad_arguments_before_reading(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    scope = unique_name
    mgr = make_stream(cluster, scope, "a")
    make_stream(cluster, scope, "b")
    write(cluster, scope, "a", [b"x"] * 5)
    cut_of_b = mgr.get_tail_cut(scope, "b")
    for bad_name in ("no-slash", "a/b/c", "", "sc/bad name"):
        with pytest.raises(InvalidNameError):
            pr.data.read_stream(bad_name, cluster=cluster)
    with pytest.raises(InvalidArgumentError, match="StreamCut"):
        pr.data.read_stream(f"{scope}/a", start_cut="head", cluster=cluster)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="cut of"):
        pr.data.read_stream(f"{scope}/a", end_cut=cut_of_b, cluster=cluster)
    with pytest.raises(InvalidArgumentError, match="offset"):
        clash = pr.JsonSerializer(pa.schema([("offset", pa.int64())]))
        pr.data.read_stream(f"{scope}/a", serializer=clash, cluster=cluster)
    with pytest.raises(InvalidArgumentError):
        pr.data.read_stream(f"{scope}/a", serializer=pr.JsonSerializer, cluster=cluster)
    with pytest.raises(InvalidArgumentError):
        head, tail = mgr.get_head_cut(scope, "a"), mgr.get_tail_cut(scope, "a")
        pr.data.read_stream(f"{scope}/a", start_cut=tail, end_cut=head, cluster=cluster)
    with pytest.raises(StreamNotFoundError):
        pr.data.read_stream(f"{scope}/missing", cluster=cluster)
    assert pr.data.read_stream(f"{scope}/b", cluster=cluster).count() == 0  # empty stream


def test_read_stream_large_event_damaged_segment_and_truncated_range(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    scope = unique_name
    mgr = make_stream(cluster, scope, "big", segments=1)
    big = bytes(range(256)) * (36 * 1024)  # 9 MiB: over MAX_EVENT_SIZE_BYTES, a large event
    write(cluster, scope, "big", [b"before", big, b"after"])
    got = sorted(
        rows(pr.data.read_stream(f"{scope}/big", cluster=cluster)), key=lambda r: r["offset"]
    )
    assert [len(r["event"]) for r in got] == [6, len(big), 5]
    assert got[1]["event"] == big

    make_stream(cluster, scope, "bad", segments=1)
    write(cluster, scope, "bad", [b"fine"] * 3)
    segment = stream_segment_name(scope, "bad", 0)
    length = 3 * (8 + 4)
    ray.get(cluster.container_handle(segment).append_conditional.remote(segment, b"\xff" * 16))
    with pytest.raises(DataCorruptionError) as info:
        pr.data.read_stream(f"{scope}/bad", cluster=cluster).materialize()
    assert segment in str(info.value) and str(length) in str(info.value)

    make_stream(cluster, scope, "cut", segments=1)
    write(cluster, scope, "cut", [b"old-%d" % i for i in range(20)])
    middle = mgr.get_tail_cut(scope, "cut")
    write(cluster, scope, "cut", [b"new-%d" % i for i in range(20)])
    planned = pr.data.read_stream(f"{scope}/cut", cluster=cluster)  # ranges fixed now
    mgr.truncate_stream(scope, "cut", middle)
    with pytest.raises(SegmentTruncatedError):
        planned.materialize()
    after = rows(pr.data.read_stream(f"{scope}/cut", cluster=cluster))
    assert sorted(r["event"] for r in after) == sorted(b"new-%d" % i for i in range(20))
