"""End to end: events written through pravega-ray come back as a Spark DataFrame (RayDP)."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
import pytest

import pravega_ray as pr
from pravega_ray.errors import InvalidArgumentError, InvalidNameError, NotFoundError
from pravega_ray.spark import read_stream
from pravega_ray.spark.stream_reader import EVENT_COLUMNS, spark_event_schema

# The first test also pays for the session fixtures: Ray (~3 s), the cluster,
# Spark (10-15 s) and the first Spark job (9-12 s).
pytestmark = [pytest.mark.ray, pytest.mark.spark, pytest.mark.timeout(300)]


def make_stream(cluster, scope: str, stream: str, segment_count: int):  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    mgr.create_stream(
        scope, stream, pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(segment_count))
    )
    return mgr


def write_events(cluster, scope: str, stream: str, events: list[tuple[str, bytes]]) -> None:  # type: ignore[no-untyped-def]
    with cluster.create_writer(scope, stream, serializer=pr.BytesSerializer()) as writer:
        for routing_key, payload in events:
            writer.write_event(payload, routing_key=routing_key)
        writer.flush()


def test_read_stream_returns_exactly_the_events_written(cluster, spark, unique_name) -> None:  # type: ignore[no-untyped-def]
    scope, stream = unique_name, "events"
    mgr = make_stream(cluster, scope, stream, segment_count=3)
    keys = [f"key-{k}" for k in range(12)]
    events = [
        (keys[i % len(keys)], f"{keys[i % len(keys)]}:{i:05d}".encode() * (1 + i % 3))
        for i in range(600)
    ]
    write_events(cluster, scope, stream, events)

    df = read_stream(spark, f"{scope}/{stream}", cluster=cluster)

    assert tuple(df.columns) == EVENT_COLUMNS
    assert df.schema == spark_event_schema()
    rows = df.collect()
    assert len(rows) == len(events) == df.count()
    assert sorted(bytes(r.event) for r in rows) == sorted(p for _, p in events)
    assert {(r.scope, r.stream) for r in rows} == {(scope, stream)}
    segment_ids = {s.segment_id for s in mgr.get_stream_info(scope, stream).segments}
    assert {r.segment_id for r in rows} <= segment_ids
    assert len({r.segment_id for r in rows}) > 1  # 12 keys over 3 segments

    # Within a segment, rows come in strictly increasing offset order...
    offsets_by_segment: dict[int, list[int]] = defaultdict(list)
    for r in rows:
        offsets_by_segment[r.segment_id].append(r.offset)
    for offsets in offsets_by_segment.values():
        assert offsets == sorted(set(offsets))
    # ...and each routing key's events are in the order they were written.
    by_key: dict[str, list[bytes]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: (r.segment_id, r.offset)):
        payload = bytes(r.event)
        by_key[payload.split(b":")[0].decode()].append(payload)
    for key in keys:
        assert by_key[key] == [p for k, p in events if k == key]


def test_read_stream_is_a_snapshot_of_the_call_time(cluster, spark, unique_name) -> None:  # type: ignore[no-untyped-def]
    scope, stream = unique_name, "snap"
    make_stream(cluster, scope, stream, segment_count=2)
    write_events(cluster, scope, stream, [(f"k{i}", b"before-%d" % i) for i in range(40)])

    df = read_stream(spark, f"{scope}/{stream}", cluster=cluster)
    write_events(cluster, scope, stream, [(f"k{i}", b"after-%d" % i) for i in range(40)])

    events = sorted(bytes(r.event) for r in df.collect())
    assert events == sorted(b"before-%d" % i for i in range(40))
    assert read_stream(spark, f"{scope}/{stream}", cluster=cluster).count() == 80


def test_read_stream_reads_every_epoch_of_a_scaled_stream(cluster, spark, unique_name) -> None:  # type: ignore[no-untyped-def]
    scope, stream = unique_name, "scaled"
    mgr = make_stream(cluster, scope, stream, segment_count=2)
    write_events(cluster, scope, stream, [(f"k{i}", b"epoch0-%d" % i) for i in range(40)])
    last = mgr.get_stream_info(scope, stream).segments[-1]
    assert mgr.scale_stream(scope, stream, [last.segment_id], [(0.5, 0.7), (0.7, 1.0)])
    write_events(cluster, scope, stream, [(f"k{i}", b"epoch1-%d" % i) for i in range(40)])

    rows = read_stream(spark, f"{scope}/{stream}", cluster=cluster).collect()

    expected = [b"epoch0-%d" % i for i in range(40)] + [b"epoch1-%d" % i for i in range(40)]
    assert sorted(bytes(r.event) for r in rows) == sorted(expected)
    assert last.segment_id in {r.segment_id for r in rows}  # the sealed predecessor too


def test_read_stream_returns_a_large_event_whole(cluster, spark, unique_name) -> None:  # type: ignore[no-untyped-def]
    """A 20 MiB event (through a transient segment) is one row, byte for byte."""
    scope, stream = unique_name, "large"
    make_stream(cluster, scope, stream, segment_count=1)
    big = bytes(range(256)) * (20 * 1024 * 4)  # 20 MiB
    write_events(cluster, scope, stream, [("k", b"before"), ("k", big), ("k", b"after")])

    rows = read_stream(spark, f"{scope}/{stream}", cluster=cluster).orderBy("offset").collect()

    assert [len(r.event) for r in rows] == [6, len(big), 5]
    assert bytes(rows[1].event) == big


def test_read_stream_empty_stream_gives_empty_dataframe(cluster, spark, unique_name) -> None:  # type: ignore[no-untyped-def]
    scope, stream = unique_name, "empty"
    make_stream(cluster, scope, stream, segment_count=2)

    df = read_stream(spark, f"{scope}/{stream}", cluster=cluster)

    assert df.schema == spark_event_schema()
    assert df.count() == 0
    assert df.collect() == []


def test_read_stream_unknown_stream_raises_not_found(cluster, spark, unique_name) -> None:  # type: ignore[no-untyped-def]
    cluster.stream_manager().create_scope(unique_name)
    with pytest.raises(NotFoundError):
        read_stream(spark, f"{unique_name}/missing", cluster=cluster)


@pytest.mark.parametrize("name", ["no-slash", "a/b/c", "/st", "sc/", "sc/bad name", "_sys/st", ""])
def test_read_stream_invalid_name_raises_invalid_name(name: str) -> None:
    # Names are checked before Spark, Ray or the cluster are touched.
    with pytest.raises(InvalidNameError):
        read_stream(None, name, cluster=None)  # type: ignore[arg-type]


def test_read_stream_between_cuts_with_decoded_columns(cluster, spark, unique_name) -> None:  # type: ignore[no-untyped-def]
    """Cuts bound the read; a JSON schema adds its fields as columns after the five."""
    scope, stream = unique_name, "cuts"
    mgr = make_stream(cluster, scope, stream, segment_count=2)
    schema = pa.schema([pa.field("i", pa.int64(), nullable=False), pa.field("name", pa.string())])
    json = pr.JsonSerializer(schema)

    def write_json(first: int, count: int) -> None:
        with cluster.create_writer(scope, stream, serializer=json) as writer:
            for i in range(first, first + count):
                writer.write_event({"i": i, "name": f"n{i}"}, routing_key=f"k{i % 5}")
            writer.flush()

    write_json(0, 30)
    start = mgr.get_tail_cut(scope, stream)
    write_json(30, 30)
    end = mgr.get_tail_cut(scope, stream)
    write_json(60, 30)

    df = read_stream(spark, f"{scope}/{stream}", start, end, cluster=cluster, serializer=json)

    assert tuple(df.columns) == (*EVENT_COLUMNS, "i", "name")
    rows = df.collect()
    assert sorted((r.i, r.name) for r in rows) == [(i, f"n{i}") for i in range(30, 60)]
    assert all(json.deserialize(bytes(r.event))["i"] == r.i for r in rows)
    raw = read_stream(spark, f"{scope}/{stream}", end=start, cluster=cluster)  # the alias
    assert raw.schema == spark_event_schema() and raw.count() == 30
    with pytest.raises(InvalidArgumentError):
        read_stream(spark, f"{scope}/{stream}", serializer=pr.JsonSerializer(), cluster=cluster)


def test_read_stream_of_many_blocks_reevaluated_after_gc(cluster, spark, unique_name) -> None:  # type: ignore[no-untyped-def]
    """Small blocks (a Spark partition each, read by the JVM from Arrow IPC): every event
    once; the DataFrame evaluates again after the caller's references are gone (RayDP's
    master holds the blocks)."""
    import gc

    import ray

    scope, stream = unique_name, "blocks"
    make_stream(cluster, scope, stream, segment_count=3)
    events = [(f"k{i % 7}", b"%05d" % i * (1 + i % 40)) for i in range(900)]
    write_events(cluster, scope, stream, events)
    context = ray.data.DataContext.get_current()
    saved = context.target_max_block_size
    context.target_max_block_size = 8192
    try:
        df = read_stream(spark, f"{scope}/{stream}", cluster=cluster)
    finally:
        context.target_max_block_size = saved
    assert df.rdd.getNumPartitions() > 1  # a block per range at least (each read exceeds 8 KiB)
    gc.collect()
    first = sorted(bytes(r.event) for r in df.collect())
    assert first == sorted(p for _, p in events)
    gc.collect()
    assert df.count() == len(events)
    by_segment: dict[int, list[int]] = defaultdict(list)
    for r in df.select("segment_id", "offset").collect():
        by_segment[r.segment_id].append(r.offset)
    assert all(offsets == sorted(set(offsets)) for offsets in by_segment.values())


def test_read_stream_types_the_jvm_does_not_read_go_through_pandas(
    cluster, spark, unique_name
) -> None:  # type: ignore[no-untyped-def]
    """A field of a type Spark's JVM is not handed as Arrow (a list) still reads, row for
    row, through RayDP's pandas conversion."""
    scope, stream = unique_name, "lists"
    make_stream(cluster, scope, stream, segment_count=2)
    schema = pa.schema(
        [pa.field("i", pa.int64(), nullable=False), pa.field("xs", pa.list_(pa.int64()))]
    )
    json = pr.JsonSerializer(schema)
    with cluster.create_writer(scope, stream, serializer=json) as writer:
        for i in range(50):
            writer.write_event({"i": i, "xs": list(range(i % 4))}, routing_key=f"k{i % 5}")
        writer.flush()

    rows = read_stream(spark, f"{scope}/{stream}", cluster=cluster, serializer=json).collect()

    assert sorted((r.i, list(r.xs)) for r in rows) == [(i, list(range(i % 4))) for i in range(50)]


def test_read_stream_of_a_damaged_segment_raises_in_read_stream(
    cluster, spark, unique_name
) -> None:  # type: ignore[no-untyped-def]
    import ray

    from pravega_ray.errors import DataCorruptionError
    from pravega_ray.naming import stream_segment_name

    scope, stream = unique_name, "damaged"
    make_stream(cluster, scope, stream, segment_count=1)
    write_events(cluster, scope, stream, [("k", b"fine")] * 3)
    segment = stream_segment_name(scope, stream, 0)
    ray.get(cluster.container_handle(segment).append_conditional.remote(segment, b"\xff" * 16))

    with pytest.raises(DataCorruptionError) as info:
        read_stream(spark, f"{scope}/{stream}", cluster=cluster)
    assert segment in str(info.value)
