"""Tabular serializers: JsonSerializer(schema) and ArrowIpcSerializer (memory only)."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

import pravega_ray as pr
from pravega_ray.client.serializers import (
    ARROW_IPC_EVENT_BYTES_TARGET,
    TableSerializer,
    is_table_serializer,
)
from pravega_ray.errors import InvalidArgumentError, SerializationError

pytestmark = pytest.mark.timeout(30)

SCHEMA = pa.schema(
    [
        pa.field("sensor", pa.string(), nullable=False),
        pa.field("value", pa.float64()),
        pa.field("count", pa.int8()),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("where", pa.struct([pa.field("x", pa.int64()), pa.field("y", pa.int64())])),
    ]
)


def test_is_table_serializer_tells_tabular_from_plain() -> None:
    assert is_table_serializer(pr.JsonSerializer(SCHEMA))
    assert is_table_serializer(pr.ArrowIpcSerializer(SCHEMA))
    assert isinstance(pr.ArrowIpcSerializer(SCHEMA), TableSerializer)
    for plain in (pr.JsonSerializer(), pr.Utf8Serializer(), pr.BytesSerializer(), None, 5):
        assert not is_table_serializer(plain)
    assert not is_table_serializer(pr.ArrowIpcSerializer)  # the class is no serializer


def test_json_with_schema_round_trips_rows_and_checks_types() -> None:
    s = pr.JsonSerializer(SCHEMA)
    event = {"sensor": "a", "value": 1, "count": 3, "tags": ["t"], "where": {"x": 1}, "more": 0}
    data = s.serialize(event)
    assert s.deserialize(data) == {
        "sensor": "a",
        "value": 1.0,
        "count": 3,
        "tags": ["t"],
        "where": {"x": 1, "y": None},  # a missing nullable field is null; extra keys dropped
    }
    table = s.decode_table([data, s.serialize({"sensor": "b"})])
    assert table.schema == SCHEMA
    assert table.column("sensor").to_pylist() == ["a", "b"]
    assert table.column("value").to_pylist() == [1.0, None]
    assert s.encode_table(table) == [
        s.serialize(row) for row in table.to_pylist()
    ]  # and back again
    assert s.decode_table(s.encode_table(table)).equals(table)


@pytest.mark.parametrize(
    "event",
    [
        {"value": 1.0},  # missing non-nullable field
        {"sensor": None},
        {"sensor": 5},
        {"sensor": "a", "value": "1.0"},
        {"sensor": "a", "value": True},  # a bool is not a number here
        {"sensor": "a", "count": 128},  # out of int8's range
        {"sensor": "a", "count": 1.5},
        {"sensor": "a", "tags": "t"},
        {"sensor": "a", "where": [1, 2]},
        ["not", "an", "object"],
    ],
)
def test_json_with_schema_refuses_what_does_not_fit(event: object) -> None:
    s = pr.JsonSerializer(SCHEMA)
    with pytest.raises(SerializationError):
        s.serialize(event)
    raw = pr.JsonSerializer().serialize(event)
    with pytest.raises(SerializationError) as info:
        s.deserialize(raw)
    assert info.value.data == raw
    with pytest.raises(SerializationError):
        s.decode_table([s.serialize({"sensor": "ok"}), raw])


def test_json_with_schema_refuses_types_json_cannot_hold() -> None:
    for bad in (pa.binary(), pa.timestamp("s"), pa.list_(pa.date32())):
        with pytest.raises(InvalidArgumentError, match="JSON cannot"):
            pr.JsonSerializer(pa.schema([pa.field("f", bad)]))
    with pytest.raises(InvalidArgumentError):
        pr.JsonSerializer("not a schema")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="no fields"):
        pr.ArrowIpcSerializer(pa.schema([]))
    with pytest.raises(InvalidArgumentError, match="twice"):
        pr.JsonSerializer(pa.schema([("a", pa.int64()), ("a", pa.string())]))


def test_json_without_schema_has_no_table_form() -> None:
    s = pr.JsonSerializer()
    assert not hasattr(s, "arrow_schema")  # duck-typed checks see a plain serializer
    with pytest.raises(InvalidArgumentError):
        s.decode_table([b"{}"])
    assert s.deserialize(b'{"any": [1, "x"]}') == {"any": [1, "x"]}


def test_json_encode_table_missing_columns() -> None:
    s = pr.JsonSerializer(SCHEMA)
    only_sensor = pa.table({"sensor": ["a"], "ignored": [1]})
    assert s.deserialize(s.encode_table(only_sensor)[0])["value"] is None
    with pytest.raises(SerializationError, match="sensor"):
        s.encode_table(pa.table({"value": [1.0]}))
    with pytest.raises(SerializationError):
        s.encode_table([{"sensor": "a"}])  # type: ignore[arg-type]


def test_table_serializers_pickle() -> None:
    for s in (pr.JsonSerializer(SCHEMA), pr.ArrowIpcSerializer(SCHEMA), pr.JsonSerializer()):
        copy = pickle.loads(pickle.dumps(s))
        assert getattr(copy, "arrow_schema", None) == getattr(s, "arrow_schema", None)


def batch(rows: int, start: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"sensor": f"s{i}", "value": i / 2, "count": i % 100} for i in range(start, start + rows)],
        schema=SCHEMA,
    )


def test_arrow_ipc_round_trips_a_record_batch() -> None:
    s = pr.ArrowIpcSerializer(SCHEMA)
    b = batch(10)
    data = s.serialize(b)
    assert s.deserialize(data).equals(b)
    empty = s.deserialize(s.serialize(batch(0)))
    assert empty.num_rows == 0 and empty.schema == SCHEMA
    table = s.decode_table([data, s.serialize(batch(5, start=10))])
    assert table.num_rows == 15
    assert table.column("sensor").to_pylist() == [f"s{i}" for i in range(15)]


def test_arrow_ipc_refuses_other_schemas_and_types() -> None:
    s = pr.ArrowIpcSerializer(SCHEMA)
    for bad in (pa.table(batch(1).to_pydict()), {"sensor": "a"}, b"x"):
        with pytest.raises(SerializationError):
            s.serialize(bad)  # type: ignore[arg-type]
    other = pa.RecordBatch.from_pylist([{"a": 1}])
    with pytest.raises(SerializationError, match="differs"):
        s.serialize(other)
    with pytest.raises(SerializationError, match="differs"):
        s.deserialize(pr.ArrowIpcSerializer(other.schema).serialize(other))
    with pytest.raises(SerializationError) as info:
        s.deserialize(b"not arrow at all")
    assert info.value.data == b"not arrow at all"
    with pytest.raises(SerializationError):
        s.decode_table([s.serialize(batch(1)), b"\xff" * 20])
    with pytest.raises(InvalidArgumentError):
        pr.ArrowIpcSerializer(None)  # type: ignore[arg-type]


def test_arrow_ipc_encode_table_slices_by_bytes_and_casts() -> None:
    s = pr.ArrowIpcSerializer(SCHEMA)
    rows = 40_000
    table = pa.table(
        {
            "sensor": pa.array(["x" * 60] * rows),
            "value": pa.array(range(rows), type=pa.int32()),  # cast to float64 (safe)
            "extra": pa.array(range(rows)),
        }
    )
    events = s.encode_table(table)
    assert len(events) > 1
    assert all(len(e) < 2 * ARROW_IPC_EVENT_BYTES_TARGET for e in events)
    back = s.decode_table(events)
    assert back.num_rows == rows
    assert back.column("value").to_pylist()[-1] == rows - 1.0
    assert back.column("count").null_count == rows  # missing nullable column: nulls
    assert s.encode_table(table.slice(0, 0)) == []
    with pytest.raises(SerializationError, match="sensor"):
        s.encode_table(pa.table({"value": [1.0]}))
    with pytest.raises(SerializationError, match="nulls"):
        s.encode_table(pa.table({"sensor": pa.array(["a", None])}))
    with pytest.raises(SerializationError, match="cast"):
        s.encode_table(pa.table({"sensor": ["a"], "count": [1000]}))  # int8 overflow
