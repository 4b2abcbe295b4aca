"""What ``pr.spark.read_stream`` hands Spark's JVM: which schemas it reads from Arrow IPC
blocks directly, and the blocks' bytes (no Ray, no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import pravega_ray as pr
from pravega_ray.data.event_blocks import EVENT_ARROW_SCHEMA, layout_for
from pravega_ray.spark.stream_reader import arrow_ipc_bytes, jvm_readable


def test_the_connector_columns_and_simple_fields_are_read_by_the_jvm() -> None:
    assert jvm_readable(EVENT_ARROW_SCHEMA)
    fields = pa.schema(
        [
            ("i8", pa.int8()),
            ("i64", pa.int64()),
            ("f", pa.float32()),
            ("d", pa.float64()),
            ("b", pa.bool_()),
            ("day", pa.date32()),
            ("s", pa.string()),
        ]
    )
    schema = layout_for(pr.ArrowIpcSerializer(fields)).schema
    assert schema is not None and jvm_readable(schema)
    utf8 = layout_for(pr.Utf8Serializer()).schema
    assert utf8 is not None and jvm_readable(utf8)


@pytest.mark.parametrize(
    "arrow_type",
    [
        pa.timestamp("us"),
        pa.timestamp("ns", tz="UTC"),
        pa.decimal128(10, 2),
        pa.list_(pa.int64()),
        pa.struct([("a", pa.int64())]),
        pa.large_string(),
        pa.large_binary(),
        pa.uint32(),
        pa.float16(),
    ],
)
def test_other_types_go_through_raydp_pandas_conversion(arrow_type: pa.DataType) -> None:
    assert not jvm_readable(pa.schema([*EVENT_ARROW_SCHEMA, pa.field("x", arrow_type)]))


def test_a_block_is_one_arrow_ipc_stream_of_the_table() -> None:
    table = pa.table(
        {
            "event": pa.array([b"a", b"", b"ccc"], pa.binary()),
            "scope": pa.array(["s"] * 3),
            "stream": pa.array(["t"] * 3),
            "segment_id": pa.array([1, 1, 2], pa.int64()),
            "offset": pa.array([0, 9, 0], pa.int64()),
        },
        schema=EVENT_ARROW_SCHEMA,
    )
    data = arrow_ipc_bytes(table)
    assert type(data) is bytes  # Ray stores bytes in the form its Java workers read
    back = pa.ipc.open_stream(data).read_all()
    assert back.schema == EVENT_ARROW_SCHEMA and back.equals(table)
