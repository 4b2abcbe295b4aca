"""JsonSerializer's column-at-a-time table form gives exactly what its row-at-a-time path
gives: the same bytes when encoding, the same rows (or the same error) when decoding, and
it steps aside for everything it does not handle."""

from __future__ import annotations

import json
import math
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pravega_ray as pr
from pravega_ray.client.json_columns import decode_rows, encode_rows
from pravega_ray.errors import SerializationError

FLAT_TYPES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "bool": (pa.bool_(), st.booleans()),
    "i8": (pa.int8(), st.integers(-(2**7), 2**7 - 1)),
    "i64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "u32": (pa.uint32(), st.integers(0, 2**32 - 1)),
    "f64": (pa.float64(), st.floats(allow_nan=False, allow_infinity=False)),
    "f32": (pa.float32(), st.floats(width=32, allow_nan=False, allow_infinity=False)),
    "s": (pa.string(), st.text(st.characters(exclude_categories=("Cs",)), max_size=8)),
    "ls": (pa.large_string(), st.text(max_size=4).filter(lambda t: t.isascii())),
}


@st.composite
def tables(draw: st.DrawFn) -> tuple[pa.Schema, pa.Table]:
    """A schema of a few flat fields (some nullable, odd names too) and a table of it."""
    kinds = draw(st.lists(st.sampled_from(sorted(FLAT_TYPES)), min_size=1, max_size=4))
    rows = draw(st.integers(1, 6))
    fields, columns = [], []
    for i, kind in enumerate(kinds):
        arrow_type, values = FLAT_TYPES[kind]
        nullable = draw(st.booleans())
        name = draw(st.sampled_from([f"{kind}{i}", f'we"ird %s\u00e9{i}', f"k\n{i}"]))
        cells = st.one_of(st.none(), values) if nullable else values
        fields.append(pa.field(name, arrow_type, nullable=nullable))
        columns.append(pa.array(draw(st.lists(cells, min_size=rows, max_size=rows)), arrow_type))
    schema = pa.schema(fields)
    return schema, pa.Table.from_arrays(columns, schema=schema)


def row_at_a_time(serializer: pr.JsonSerializer, table: pa.Table) -> list[bytes]:
    return [serializer.serialize(row) for row in table.to_pylist()]


def rows_of(serializer: pr.JsonSerializer, schema: pa.Schema, payloads: list[bytes]) -> pa.Table:
    rows = [serializer.deserialize(p) for p in payloads]
    arrays = [pa.array([row[f.name] for row in rows], type=f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


@settings(max_examples=300, deadline=None)
@given(tables())
def test_both_paths_write_the_same_bytes_and_read_the_same_rows(
    case: tuple[pa.Schema, pa.Table],
) -> None:
    schema, table = case
    serializer = pr.JsonSerializer(schema=schema)
    expected = row_at_a_time(serializer, table)
    assert encode_rows(table, schema) == expected
    assert serializer.encode_table(table) == expected
    decoded = decode_rows(expected, schema)
    assert decoded is not None and decoded.equals(table)
    assert decoded.equals(rows_of(serializer, schema, expected))
    assert serializer.decode_table(expected).equals(table)


SCHEMA = pa.schema(
    [
        pa.field("name", pa.string(), nullable=False),
        pa.field("n", pa.int32()),
        pa.field("x", pa.float64()),
    ]
)


@pytest.mark.parametrize(
    "columns",
    [
        {"name": ["a", "b"], "n": [1, 2], "x": [1.0, math.nan]},  # NaN: refused row by row
        {"name": ["a", None], "n": [1, 2], "x": [1.0, 2.0]},  # null, not nullable
        {"name": ["a", "b"], "n": pa.array([1, 2**40], pa.int64()), "x": [1.0, 2.0]},  # range
    ],
)
def test_a_table_the_fast_path_does_not_take_gets_the_row_errors(columns: dict[str, Any]) -> None:
    table = pa.table(columns)
    assert encode_rows(table, SCHEMA) is None
    with pytest.raises(SerializationError):
        pr.JsonSerializer(schema=SCHEMA).encode_table(table)


def test_other_column_types_and_missing_columns_take_the_row_path() -> None:
    serializer = pr.JsonSerializer(schema=SCHEMA)
    table = pa.table({"name": ["a"], "n": pa.array([7], pa.int64()), "x": [0.5]})
    assert encode_rows(table, SCHEMA) is None  # int64 where the schema says int32: fits
    assert serializer.encode_table(table) == [b'{"name":"a","n":7,"x":0.5}']
    missing = pa.table({"name": ["a"], "n": pa.array([7], pa.int32())})
    assert encode_rows(missing, SCHEMA) is None
    assert serializer.encode_table(missing) == [b'{"name":"a","n":7,"x":null}']
    nested = pa.schema([pa.field("l", pa.list_(pa.int64()))])
    assert encode_rows(pa.table({"l": [[1, 2]]}), nested) is None
    assert decode_rows([b'{"l":[1,2]}'], nested) is None
    assert encode_rows(SCHEMA.empty_table(), SCHEMA) == []


@pytest.mark.parametrize(
    "payload, row",
    [
        (b'{"name": "a", "n": 1, "x": 2.5}', {"name": "a", "n": 1, "x": 2.5}),  # spacing
        (b'{"x":2.5,"n":1,"name":"a"}', {"name": "a", "n": 1, "x": 2.5}),  # key order
        (b'{"name":"a","n":1,"x":2}', {"name": "a", "n": 1, "x": 2.0}),  # an int for a float
        (b'{"name":"a","n":1,"x":2.5,"extra":[1]}', {"name": "a", "n": 1, "x": 2.5}),  # dropped
        (b'{"name":"a","x":NaN}', {"name": "a", "n": None, "x": math.nan}),  # another client's
        (b'{\n  "name": "a",\n  "n": 1,\n  "x": 2.5\n}', {"name": "a", "n": 1, "x": 2.5}),
        (b'{"name":"\\u00e9","n":1,"x":1e3}', {"name": "\u00e9", "n": 1, "x": 1000.0}),
    ],
)
def test_payloads_other_writers_wrote_are_read_as_the_row_path_reads_them(
    payload: bytes, row: dict[str, Any]
) -> None:
    serializer = pr.JsonSerializer(schema=SCHEMA)
    canonical = b'{"name":"b","n":2,"x":0.25}'
    payloads = [canonical, payload, canonical]
    assert decode_rows(payloads, SCHEMA) is None
    got = serializer.decode_table(payloads).to_pylist()
    assert got[0] == got[2] == {"name": "b", "n": 2, "x": 0.25}
    if isinstance(row["x"], float) and math.isnan(row["x"]):
        assert math.isnan(got[1].pop("x")) and got[1] == {"name": "a", "n": None}
    else:
        assert got[1] == row


@pytest.mark.parametrize(
    "payload",
    [
        b'{"name":"a","n":1.5,"x":1.0}',  # a float for an int
        b'{"name":"a","n":4294967296,"x":1.0}',  # out of int32's range
        b'{"name":1,"n":1,"x":1.0}',  # a number for a string
        b'{"name":null,"n":1,"x":1.0}',  # null, not nullable
        b'{"n":1,"x":1.0}',  # missing, not nullable
        b'{"name":"a","n":true,"x":1.0}',  # a bool for an int
        b'["a",1,1.0]',  # not an object
        b"not json",
        b"",
        "a str",  # not bytes: a typed error, as before the column path
        None,
        7,
    ],
)
def test_a_payload_the_row_path_refuses_is_refused(payload: object) -> None:
    serializer = pr.JsonSerializer(schema=SCHEMA)
    canonical = b'{"name":"b","n":2,"x":0.25}'
    assert decode_rows([canonical, payload], SCHEMA) is None
    with pytest.raises(SerializationError):
        serializer.decode_table([canonical, payload])  # type: ignore[list-item]


def test_a_big_batch_round_trips_through_the_fast_path() -> None:
    count = 20_000
    table = pa.table(
        {
            "name": pa.array([f"sensor-{i % 8}" for i in range(count)]),
            "n": pa.array(range(count), pa.int32()),
            "x": pa.array([i / 7 for i in range(count)], pa.float64()),
        },
        schema=SCHEMA,
    )
    serializer = pr.JsonSerializer(schema=SCHEMA)
    payloads = serializer.encode_table(table)
    row = table.slice(3, 1).to_pylist()[0]
    assert payloads[3] == json.dumps(row, separators=(",", ":")).encode()
    decoded = decode_rows(payloads, SCHEMA)
    assert decoded is not None and decoded.equals(table)
