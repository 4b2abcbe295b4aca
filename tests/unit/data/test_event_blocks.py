"""The pure parts of the Ray Data reader: read-task grouping, block tables, Spark schema."""

from __future__ import annotations

import pyarrow as pa
import pytest

import pravega_ray as pr
from pravega_ray.data.datasource import group_ranges
from pravega_ray.data.event_blocks import (
    EVENT_ARROW_SCHEMA,
    EVENT_COLUMNS,
    events_table,
    layout_for,
)
from pravega_ray.errors import InvalidArgumentError, SerializationError

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
