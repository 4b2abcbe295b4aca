"""The pure parts of the stream reader: block planning, piece tables, the Spark schema."""

from __future__ import annotations

import pytest

from pravega_ray.spark.stream_reader import (
    BLOCK_BYTES_TARGET,
    EVENT_ARROW_SCHEMA,
    EVENT_COLUMNS,
    _events_table,
    plan_blocks,
    spark_event_schema,
)

pytestmark = pytest.mark.timeout(30)

MIB = 1024 * 1024


def test_plan_blocks_coalesces_small_pieces_to_the_target_count() -> None:
    groups = plan_blocks([10, 20, 30, 40, 50], target_blocks=2)
    assert len(groups) == 2
    assert sorted(i for g in groups for i in g) == [0, 1, 2, 3, 4]
    assert all(g == sorted(g) for g in groups)


def test_plan_blocks_never_makes_more_groups_than_pieces() -> None:
    assert plan_blocks([5], target_blocks=4) == [[0]]
    assert plan_blocks([], target_blocks=4) == []


def test_plan_blocks_splits_by_bytes_when_pieces_are_large() -> None:
    sizes = [BLOCK_BYTES_TARGET] * 6
    groups = plan_blocks(sizes, target_blocks=1)
    assert len(groups) == 6  # ceil(total / target) wins over the core count


def test_plan_blocks_bounds_each_group() -> None:
    sizes = [3 * MIB, 60 * MIB, 1, 0, 64 * MIB, 17 * MIB, 40 * MIB, 2 * MIB]
    groups = plan_blocks(sizes, target_blocks=2, block_bytes_target=64 * MIB)
    total = sum(sizes)
    bound = total / len(groups) + max(sizes)
    assert all(sum(sizes[i] for i in g) <= bound for g in groups)
    assert sorted(i for g in groups for i in g) == list(range(len(sizes)))


def test_plan_blocks_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        plan_blocks([1], target_blocks=0)
    with pytest.raises(ValueError):
        plan_blocks([-1], target_blocks=1)


def test_events_table_is_one_chunk_with_the_connector_columns() -> None:
    table = _events_table("sc", "st", 7, [0, 13], [b"hello", b""])
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


def test_spark_event_schema_matches_the_arrow_schema() -> None:
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
