"""Rows of an Arrow table -> ``(routing key, payload)`` events, for ``pr.data.write_stream``.

Three ways, chosen by the serializer (see :func:`events_of_table`):

* None: column ``event`` (binary or string; strings are UTF-8 encoded) is the payload.
* a table serializer (duck-typed: ``arrow_schema``, ``encode_table``, ``decode_table``):
  ``encode_table`` of each routing key's rows, in the order keys first appear;
* any other serializer: ``serialize(row)`` per row, the row a dict of every column but
  the routing key column.

Routing keys: ``routing_key_column`` values as str (string or integer columns); a null
key means no routing key. Pure functions of their arguments, no Ray.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pravega_ray.client.serializers import (
    check_serializer,
    is_table_serializer,
    serialized_bytes,
)
from pravega_ray.constants import MAX_EVENT_SIZE_BYTES
from pravega_ray.errors import EventTooLargeError, InvalidArgumentError

__all__ = [
    "EVENT_COLUMN",
    "check_schema",
    "check_serializer_kind",
    "events_of_table",
    "is_table_serializer",
]

EVENT_COLUMN = "event"
"""The payload column when no serializer is given."""

Event = tuple[str | None, bytes]


def check_serializer_kind(serializer: object) -> None:
    """InvalidArgumentError unless ``serializer`` is None, a table serializer or a serializer."""
    if serializer is None or is_table_serializer(serializer):
        return
    check_serializer(serializer)


def _is_payload_type(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
    )


def _is_key_type(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_key_type(t.value_type)
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t))


def check_schema(schema: pa.Schema, routing_key_column: str | None, serializer: object) -> None:
    """InvalidArgumentError naming the problem if rows of ``schema`` cannot be written:
    a missing routing key column or one not string/integer, a missing or non-binary,
    non-string ``event`` column (no serializer), a field of the table serializer's schema
    missing."""
    names = set(schema.names)
    if routing_key_column is not None:
        if routing_key_column not in names:
            raise InvalidArgumentError(
                f"routing_key_column {routing_key_column!r} is not a column "
                f"(columns: {sorted(names)})"
            )
        key_type = schema.field(routing_key_column).type
        if not _is_key_type(key_type):
            raise InvalidArgumentError(
                f"routing_key_column {routing_key_column!r} must be a string or integer "
                f"column, got {key_type}"
            )
    if serializer is None:
        if EVENT_COLUMN not in names:
            raise InvalidArgumentError(
                f"without a serializer the dataset needs a column {EVENT_COLUMN!r} "
                f"(binary or string); columns: {sorted(names)}"
            )
        event_type = schema.field(EVENT_COLUMN).type
        if not _is_payload_type(event_type):
            raise InvalidArgumentError(
                f"column {EVENT_COLUMN!r} must be binary or string, got {event_type}"
            )
    elif is_table_serializer(serializer):
        wanted: pa.Schema = serializer.arrow_schema
        missing = [n for n in wanted.names if n not in names]
        if missing:
            raise InvalidArgumentError(
                f"columns {missing} of the serializer's schema are missing "
                f"(columns: {sorted(names)})"
            )


def _checked(payload: bytes, row: int) -> bytes:
    if len(payload) > MAX_EVENT_SIZE_BYTES:
        raise EventTooLargeError(
            f"row {row}: event of {len(payload)} bytes is over {MAX_EVENT_SIZE_BYTES} "
            "(large events are not supported in transactions)"
        )
    return payload


def _keys(table: pa.Table, routing_key_column: str | None) -> list[str | None]:
    if routing_key_column is None:
        return [None] * table.num_rows
    column = table.column(routing_key_column)
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    keys: list[str | None] = pc.cast(column, pa.string()).to_pylist()
    return keys


def events_of_table(
    table: pa.Table, routing_key_column: str | None, serializer: Any
) -> list[Event]:
    """The events for the rows of ``table``, in row order per routing key.

    Checks every event before returning any: InvalidArgumentError (the schema, a null
    event), EventTooLargeError (over MAX_EVENT_SIZE_BYTES), SerializationError (the
    serializer's).
    """
    if table.num_rows == 0:
        return []
    check_schema(table.schema, routing_key_column, serializer)
    keys = _keys(table, routing_key_column)
    if serializer is None:
        column = table.column(EVENT_COLUMN)
        if column.null_count:
            raise InvalidArgumentError(f"column {EVENT_COLUMN!r} holds nulls: an event is bytes")
        # Whole-column work (no Python call per row): strings as their UTF-8 bytes (a
        # zero-copy cast), the size limit checked on the lengths.
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            column = column.cast(
                pa.binary() if pa.types.is_string(column.type) else pa.large_binary()
            )
        lengths = pc.binary_length(column)
        if pc.max(lengths).as_py() > MAX_EVENT_SIZE_BYTES:
            row = pc.index(pc.greater(lengths, MAX_EVENT_SIZE_BYTES), True).as_py()
            _checked(column[row].as_py(), row)
        return list(zip(keys, column.to_pylist(), strict=True))
    if is_table_serializer(serializer):
        return _table_serializer_events(table, keys, serializer)
    body = table if routing_key_column is None else table.drop_columns([routing_key_column])
    return [
        (key, _checked(serialized_bytes(serializer.serialize(row_value)), row))
        for row, (key, row_value) in enumerate(zip(keys, body.to_pylist(), strict=True))
    ]


def _table_serializer_events(
    table: pa.Table, keys: list[str | None], serializer: Any
) -> list[Event]:
    """``encode_table`` per routing key group (keys in order of first appearance)."""
    groups: dict[str | None, list[int]] = {}
    for row, key in enumerate(keys):
        groups.setdefault(key, []).append(row)
    events: list[Event] = []
    for key, rows in groups.items():
        part = table if len(groups) == 1 else table.take(pa.array(rows, pa.int64()))
        for payload in serializer.encode_table(part):
            events.append((key, _checked(serialized_bytes(payload), rows[0])))
    return events
