"""The pure parts of the Ray Data reader: read-task grouping, block tables, Spark schema."""

from __future__ import annotations

import random
import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pravega_ray as pr
from pravega_ray.client.event_framing import FrameAssembler, FrameScanner, frame_events
from pravega_ray.constants import EVENT_TYPE_PLAIN, MIB
from pravega_ray.data.datasource import group_ranges
from pravega_ray.data.event_blocks import (
    EVENT_ARROW_SCHEMA,
    EVENT_COLUMNS,
    events_table,
    layout_for,
    raw_events_table,
)
from pravega_ray.errors import DataCorruptionError, InvalidArgumentError, SerializationError

pytestmark = pytest.mark.timeout(30)

SCHEMA = pa.schema([pa.field("i", pa.int64(), nullable=False)])


def test_group_ranges_one_per_range_or_balanced_by_bytes() -> None:
    assert group_ranges([5, 0, 7], None) == [[0], [1], [2]]
    groups = group_ranges([10, 1, 1, 10, 1], 2)
    assert sorted(i for g in groups for i in g) == [0, 1, 2, 3, 4]
    assert len(groups) == 2 and all(g == sorted(g) for g in groups)
    assert sorted(sum([10, 1, 1, 10, 1][i] for i in g) for g in groups) == [11, 12]
    assert group_ranges([3], 8) == [[0]]
    assert group_ranges([], 2) == []
    for bad in (0, -1, True, 1.5):
        with pytest.raises(InvalidArgumentError):
            group_ranges([1], bad)  # type: ignore[arg-type]


def test_events_table_raw_is_one_chunk_with_the_connector_columns() -> None:
    table = events_table(layout_for(None), "sc", "st", "sc/st/7", 7, [0, 13], [b"hello", b""])
    assert table.schema == EVENT_ARROW_SCHEMA
    assert tuple(table.column_names) == EVENT_COLUMNS
    assert all(column.num_chunks == 1 for column in table.columns)
    assert table.to_pydict() == {
        "event": [b"hello", b""],
        "scope": ["sc", "sc"],
        "stream": ["st", "st"],
        "segment_id": [7, 7],
        "offset": [0, 13],
    }


def test_events_table_decodes_table_serializers_and_repeats_metadata() -> None:
    json = pr.JsonSerializer(SCHEMA)
    table = events_table(
        layout_for(json), "sc", "st", "seg", 1, [0, 20], [json.serialize({"i": 1}), b'{"i":2}']
    )
    assert table.column_names == [*EVENT_COLUMNS, "i"]
    assert table.column("i").to_pylist() == [1, 2]
    ipc = pr.ArrowIpcSerializer(SCHEMA)
    payloads = [ipc.serialize(pa.record_batch({"i": [1, 2, 3]}, schema=SCHEMA))]
    payloads.append(ipc.serialize(pa.record_batch({"i": [4]}, schema=SCHEMA)))
    table = events_table(layout_for(ipc), "sc", "st", "seg", 1, [0, 500], payloads)
    assert table.column("offset").to_pylist() == [0, 0, 0, 500]
    assert table.column("event").null_count == 4
    assert all(column.num_chunks == 1 for column in table.columns)


def test_events_table_names_the_event_that_does_not_decode() -> None:
    json = pr.JsonSerializer(SCHEMA)
    with pytest.raises(SerializationError) as info:
        events_table(layout_for(json), "sc", "st", "seg", 1, [0, 9], [b'{"i":1}', b'{"i":"x"}'])
    assert (info.value.segment, info.value.offset, info.value.data) == ("seg", 9, b'{"i":"x"}')
    with pytest.raises(SerializationError, match="one Arrow column"):
        events_table(layout_for(pr.JsonSerializer()), "s", "t", "seg", 1, [0, 5], [b"1", b'"a"'])


def test_layout_refuses_connector_column_names_and_non_serializers() -> None:
    with pytest.raises(InvalidArgumentError, match="segment_id"):
        layout_for(pr.ArrowIpcSerializer(pa.schema([("segment_id", pa.int64())])))
    with pytest.raises(InvalidArgumentError):
        layout_for("json")
    assert layout_for(pr.Utf8Serializer()).schema.field("event").type == pa.string()
    assert layout_for(pr.JsonSerializer()).schema is None


def test_spark_schemas_match_the_arrow_schemas() -> None:
    pytest.importorskip("pyspark")
    from pravega_ray.spark.stream_reader import spark_event_schema, spark_schema

    schema = spark_event_schema()
    assert tuple(schema.fieldNames()) == EVENT_COLUMNS
    assert [f.dataType.typeName() for f in schema.fields] == [
        "binary",
        "string",
        "string",
        "long",
        "long",
    ]
    assert not any(f.nullable for f in schema.fields)
    decoded = spark_schema(layout_for(pr.ArrowIpcSerializer(SCHEMA)).schema)
    assert decoded.fieldNames()[-1] == "i" and decoded.fields[0].nullable


def read_both_ways(data: bytes, cuts: list[int]) -> tuple[object, object]:
    """The raw table of ``data`` read in pieces cut at ``cuts``, through the old path
    (FrameAssembler + events_table) and the new one (FrameScanner + raw_events_table), or
    the DataCorruptionError message each raised; the held-bytes counters must agree."""

    def old() -> object:
        frames, events = FrameAssembler(), []
        start = 0
        for end in [*cuts, len(data)]:
            try:
                events += frames.feed(data[start:end], start)
            except DataCorruptionError as error:
                return str(error)
            start = end
        offsets, payloads = [o for o, _ in events], [p for _, p in events]
        table = events_table(layout_for(None), "sc", "st", "sc/st/3", 3, offsets, payloads)
        return table, frames.buffered_bytes, frames.missing_bytes

    def new() -> object:
        frames, spans = FrameScanner(), []
        start = 0
        for end in [*cuts, len(data)]:
            try:
                spans += frames.feed(data[start:end], start)
            except DataCorruptionError as error:
                return str(error)
            start = end
        table = raw_events_table("sc", "st", 3, spans)
        assert [e for s in spans for e in s.events()] == list(
            zip(table.column("offset").to_pylist(), table.column("event").to_pylist(), strict=True)
        )
        return table, frames.buffered_bytes, frames.missing_bytes

    return old(), new()


def assert_same(old: object, new: object) -> None:
    if isinstance(old, str):
        assert new == old
        return
    assert isinstance(old, tuple) and isinstance(new, tuple)
    assert new[1:] == old[1:]
    table = new[0]
    assert table.schema == EVENT_ARROW_SCHEMA
    assert all(column.num_chunks == 1 for column in table.columns)
    assert table.equals(old[0])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=st.lists(st.tuples(st.integers(0, 300), st.integers(1, 40)), max_size=8),
    cut_seed=st.integers(0, 2**32),
    cut_count=st.integers(0, 12),
    damage=st.one_of(
        st.none(), st.tuples(st.integers(0, 10**6), st.sampled_from([0, 1, 7, 0x7F, 0xFF]))
    ),
)
def test_raw_events_table_equals_the_per_event_path(
    runs: list[tuple[int, int]], cut_seed: int, cut_count: int, damage: tuple[int, int] | None
) -> None:
    """Runs of equal sizes (bulk header checks) and single ones (one by one), cut anywhere."""
    rng = random.Random(cut_seed)
    sizes = [size for size, repeat in runs for _ in range(repeat)]
    data = bytearray(frame_events([rng.randbytes(size) for size in sizes]))
    if damage is not None and data:
        # A header byte or a payload byte; values that make no length over ~112 MiB.
        data[damage[0] % len(data)] = damage[1]
    cuts = sorted(rng.randrange(len(data) + 1) for _ in range(cut_count))
    old, new = read_both_ways(bytes(data), cuts)
    assert_same(old, new)


@pytest.mark.parametrize("seed", range(3))
def test_raw_events_table_assembles_large_events_cut_anywhere(seed: int) -> None:
    rng = random.Random(seed)
    large = rng.randbytes(9 * MIB)
    small = [rng.randbytes(rng.randrange(0, 300)) for _ in range(40)]
    head = frame_events(small[:20])
    data = head + struct.pack(">II", EVENT_TYPE_PLAIN, len(large)) + large
    data += frame_events(small[20:])
    cuts = sorted({rng.randrange(len(data)) for _ in range(6)} | {len(head) + 3})
    old, new = read_both_ways(data, cuts)
    assert_same(old, new)
    assert new[0].column("event")[20].as_py() == large  # type: ignore[index]
    # A range that ends inside the large event: the held bytes say so, as before.
    old, new = read_both_ways(data[: len(head) + MIB], [len(head) + 5])
    assert_same(old, new)
    assert new[2] == 9 * MIB - (MIB - 8)  # type: ignore[index]  # missing payload bytes


def test_raw_events_table_of_no_frames_is_empty_with_the_schema() -> None:
    table = raw_events_table("sc", "st", 1, [])
    assert table.schema == EVENT_ARROW_SCHEMA and table.num_rows == 0
    frames = FrameScanner()
    assert frames.feed(b"\0\0\7", 0) == [] and frames.buffered_bytes == 3
    with pytest.raises(DataCorruptionError, match="segment offset 0: type=1792"):
        frames.feed(bytes(5), 3)  # the header completed by the next read is bad


@pytest.mark.parametrize("byte", [0, 3, 5, 7])
def test_a_damaged_header_inside_a_run_of_equal_events_is_found_where_it_is(byte: int) -> None:
    data = bytearray(frame_events([bytes([i]) * 20 for i in range(200)]))
    data[137 * 28 + byte] ^= 0x40  # frame 137's type or length
    old, new = read_both_ways(bytes(data), [])
    assert_same(old, new)
    if byte < 4:
        frame_type = 0x40 << (8 * (3 - byte))
        assert old == f"bad event frame at segment offset {137 * 28}: type={frame_type} length=20"
