"""Serializers turn events into bytes and back. Writers and readers take one each.

Contract: ``serialize`` raises :class:`SerializationError` (an InvalidArgumentError) for a
value it cannot encode, having changed nothing; ``deserialize`` raises
:class:`SerializationError` carrying the raw bytes as ``data`` for bytes it cannot decode.
Readers and key-value tables add where the bytes came from and never consume an event
that failed to decode (docs/api.md).

*Tabular serializers* (:class:`TableSerializer`) also know their events as Arrow rows, so the
Ray Data and Spark connectors (``pravega_ray/data``, ``pravega_ray/spark``) turn events into
columns and tables into events: ``JsonSerializer(schema)`` (one JSON object per row) and
:class:`ArrowIpcSerializer` (one Arrow record batch per event). pyarrow is imported only when
one is built, so ``import pravega_ray`` stays quick.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeGuard, TypeVar, runtime_checkable

import orjson

from pravega_ray import json_text
from pravega_ray.client.json_columns import decode_rows, encode_rows
from pravega_ray.constants import MIB
from pravega_ray.errors import InvalidArgumentError, SerializationError

if TYPE_CHECKING:
    import pyarrow as pa

T = TypeVar("T")


class Serializer(Protocol, Generic[T]):
    """``serialize(event) -> bytes`` and ``deserialize(bytes) -> event``, inverse of each other."""

    def serialize(self, event: T) -> bytes: ...

    def deserialize(self, data: bytes) -> T: ...


def check_serializer(serializer: object, what: str = "serializer") -> None:
    """InvalidArgumentError unless ``serializer`` has callable serialize() and deserialize().

    A class instead of an instance (``JsonSerializer`` for ``JsonSerializer()``) is refused
    too: its methods would fail on the first event, far from the mistake.
    """
    if isinstance(serializer, type):
        raise InvalidArgumentError(
            f"{what} must be an instance, e.g. {serializer.__name__}(), not the class"
        )
    for method in ("serialize", "deserialize"):
        if not callable(getattr(serializer, method, None)):
            raise InvalidArgumentError(
                f"{what} must have serialize() and deserialize() methods, "
                f"got {type(serializer).__name__}"
            )


def serialized_bytes(payload: object) -> bytes:
    """A serializer's output as bytes; SerializationError if it returned something else.

    The writer checks at the call, because its pump joins payloads long after and a
    str there would crash it.
    """
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    raise _encode_error(f"serializer returned {type(payload).__name__}, not bytes")


def _encode_error(message: str) -> SerializationError:
    """A serialize failure: no stored bytes and no location (the errors.py contract)."""
    return SerializationError(message, data=None, segment=None, offset=None, key=None)


def _decode_error(message: str, data: object) -> SerializationError:
    """A deserialize failure carrying the raw bytes; readers fill in segment/offset or key."""
    raw = bytes(data) if isinstance(data, (bytes, bytearray, memoryview)) else None
    return SerializationError(message, data=raw, segment=None, offset=None, key=None)


def _raw(data: object, who: str) -> bytes:
    """``data`` as bytes; SerializationError if it is not bytes-like (``bytes(5)`` is no event)."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise _decode_error(f"{who}.deserialize needs bytes, got {type(data).__name__}", data)


class BytesSerializer:
    """Events are ``bytes``; ``bytearray`` and ``memoryview`` are written as their bytes.

    ``serialize`` raises SerializationError for anything else; ``deserialize`` returns
    ``bytes`` (SerializationError if not given bytes-like data).
    """

    def serialize(self, event: bytes) -> bytes:
        if isinstance(event, bytes):
            return event
        if isinstance(event, (bytearray, memoryview)):
            return bytes(event)
        raise _encode_error(f"BytesSerializer needs bytes, got {type(event).__name__}")

    def deserialize(self, data: bytes) -> bytes:
        return _raw(data, "BytesSerializer")


class Utf8Serializer:
    """Events are ``str``, stored as UTF-8.

    ``serialize`` raises SerializationError for a non-str and for a str UTF-8 cannot hold
    (a lone surrogate such as ``"\\ud800"``); ``deserialize`` raises SerializationError
    (``data`` = the raw bytes) for bytes that are not valid UTF-8.
    """

    def serialize(self, event: str) -> bytes:
        if not isinstance(event, str):
            raise _encode_error(f"Utf8Serializer needs str, got {type(event).__name__}")
        try:
            return event.encode("utf-8")
        except UnicodeEncodeError as e:
            raise _encode_error(f"str is not encodable as UTF-8: {e}") from None

    def deserialize(self, data: bytes) -> str:
        raw = _raw(data, "Utf8Serializer")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _decode_error(f"bytes are not UTF-8: {e}", raw) from None


@runtime_checkable
class TableSerializer(Serializer[T], Protocol):
    """A serializer that also knows its events as Arrow rows (the Ray Data / Spark connectors).

    ``arrow_schema`` names the event's fields as Arrow columns. ``decode_table(payloads)``
    returns the rows of all payloads, in order, with ``arrow_schema``; a payload that does
    not decode raises SerializationError. ``encode_table(table)`` returns the events for the
    rows of ``table`` (columns named as ``arrow_schema``'s; extra columns ignored), all meant
    for ONE routing key; a table it cannot encode raises SerializationError, having made
    nothing. Optional hint: an attribute ``rows_per_event == 1`` tells the connectors that
    each event is exactly one row, so they decode many events in one call.
    """

    @property
    def arrow_schema(self) -> pa.Schema: ...

    def decode_table(self, payloads: Sequence[bytes]) -> pa.Table: ...

    def encode_table(self, table: pa.Table) -> list[bytes]: ...


def is_table_serializer(obj: object) -> TypeGuard[TableSerializer[Any]]:
    """Whether ``obj`` is a tabular serializer instance: an ``arrow_schema`` that is not
    None and callable ``decode_table``/``encode_table`` (``JsonSerializer()`` is not)."""
    if isinstance(obj, type):
        return False
    return (
        getattr(obj, "arrow_schema", None) is not None
        and callable(getattr(obj, "decode_table", None))
        and callable(getattr(obj, "encode_table", None))
    )


def _import_pyarrow() -> Any:
    """pyarrow, imported on first use (``import pravega_ray`` must stay quick)."""
    import pyarrow

    return pyarrow


def _check_schema(schema: object, who: str) -> pa.Schema:
    pa = _import_pyarrow()
    if not isinstance(schema, pa.Schema):
        raise InvalidArgumentError(f"{who} schema must be a pyarrow.Schema, got {schema!r}")
    names = schema.names
    if not names:
        raise InvalidArgumentError(f"{who} schema has no fields")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidArgumentError(f"{who} schema names a field twice: {duplicates}")
    return schema


class _JsonTypeMismatch(Exception):
    """A JSON value that does not fit its schema field (becomes a SerializationError)."""


def _json_check(value: Any, arrow_type: Any, nullable: bool, path: str) -> Any:
    """``value`` checked against ``arrow_type`` (floats widened from ints); raises
    _JsonTypeMismatch naming ``path``. Types: bool, ints (range-checked), floats, strings,
    lists and structs of those (a missing struct field is null when nullable)."""
    pa = _import_pyarrow()
    types = pa.types
    if value is None:
        if nullable or types.is_null(arrow_type):
            return None
        raise _JsonTypeMismatch(f"{path} is null but the field is not nullable")
    if types.is_boolean(arrow_type):
        if isinstance(value, bool):
            return value
    elif types.is_integer(arrow_type):
        if isinstance(value, int) and not isinstance(value, bool):
            bits = arrow_type.bit_width
            low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
            if types.is_unsigned_integer(arrow_type):
                low, high = 0, 2**bits - 1
            if low <= value <= high:
                return value
            raise _JsonTypeMismatch(f"{path}={value} is out of range for {arrow_type}")
    elif types.is_floating(arrow_type):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif types.is_string(arrow_type) or types.is_large_string(arrow_type):
        if isinstance(value, str):
            return value
    elif types.is_list(arrow_type) or types.is_large_list(arrow_type):
        if isinstance(value, list):
            item = arrow_type.value_field
            return [
                _json_check(v, item.type, item.nullable, f"{path}[{i}]")
                for i, v in enumerate(value)
            ]
    elif types.is_struct(arrow_type) and isinstance(value, dict):
        return _json_object(value, list(arrow_type), path + ".")
    raise _JsonTypeMismatch(f"{path}={value!r} is not a {arrow_type}")


def _json_object(value: Any, fields: list[Any], prefix: str) -> dict[str, Any]:
    """The schema's fields of a JSON object, checked; extra keys are dropped."""
    if not isinstance(value, dict):
        raise _JsonTypeMismatch(f"the event is a {type(value).__name__}, not a JSON object")
    return {
        f.name: _json_check(value.get(f.name), f.type, f.nullable, prefix + f.name) for f in fields
    }


def _check_json_type(arrow_type: Any, path: str) -> None:
    """InvalidArgumentError unless JSON can hold ``arrow_type`` (see :func:`_json_check`)."""
    types = _import_pyarrow().types
    if types.is_list(arrow_type) or types.is_large_list(arrow_type):
        _check_json_type(arrow_type.value_type, path + "[]")
        return
    if types.is_struct(arrow_type):
        for field in arrow_type:
            _check_json_type(field.type, f"{path}.{field.name}")
        return
    simple = (
        types.is_null,
        types.is_boolean,
        types.is_integer,
        types.is_floating,
        types.is_string,
        types.is_large_string,
    )
    if not any(check(arrow_type) for check in simple):
        raise InvalidArgumentError(
            f"JsonSerializer schema field {path} has type {arrow_type}, which JSON cannot "
            "hold (use bool, ints, floats, strings, lists and structs of them)"
        )


# --- JSON text: orjson where it writes and reads exactly what Python's json does -------------
#
# The stored format is Python's ``json.dumps(value, separators=(",", ":"), allow_nan=False)``
# (ASCII, everything else escaped), and ``deserialize`` reads what ``json.loads`` reads. orjson
# is several times faster, and differs from Python's json in ways that matter here. Writing: it
# writes NaN and infinities as ``null`` (json refuses them); serializes what json refuses
# (enums, UUIDs, dataclasses, datetimes, ``orjson.Fragment``); refuses what json writes
# (non-str keys, str subclasses as keys, ints beyond 64 bits, lone surrogates, float
# subclasses, nesting 254 levels or more); writes non-ASCII and DEL (0x7f) as raw UTF-8 where json
# escapes them; and formats floats in 0 < |x| < 1e-4 otherwise (``0.00001`` and ``1e-6`` for
# json's ``1e-05`` and ``1e-06``). Reading: it refuses ``NaN``/``Infinity``, lone surrogate
# escapes, a byte order mark, UTF-16/32 and numbers json reads as inf (json reads them all);
# and it reads ints beyond 64 bits as floats, where json keeps them exact ints.
#
# So orjson writes only values made of exactly dict, list, tuple, str, int, bool, None and
# finite floats of 0 or at least 1e-4 in magnitude, at most ``_ORJSON_DEPTH_MAX`` deep
# (:func:`_orjson_writes_alike`); whatever it then refuses (a key that is not exactly a str, an
# int beyond 64 bits, a lone surrogate) and bytes that are not ASCII without DEL go to json.
# Reading: ``pravega_ray.json_text.loads`` (orjson unless a digit run may be an int beyond
# 64 bits; what orjson refuses goes to json). Python's json thus decides everything orjson might
# see otherwise: the stored bytes, the values read and the errors are what they were before
# orjson, byte for byte (tests/unit/client/test_serializers.py compares them). One difference
# is left, on purpose: orjson reads nesting up to 1,024 levels, where json alone raised near
# its recursion limit (1,000 by default, less the caller's stack).

_ORJSON_DEPTH_MAX = 64
"""Values nested deeper than this are written by Python's json (orjson stops at 254)."""


def _orjson_writes_alike(value: Any, depth: int) -> bool:
    """Whether ``value`` is made only of what orjson writes as Python's json does, or raises
    for (see above): exact types, so subclasses, enums and other objects go to json."""
    kind = type(value)
    if kind is dict:
        items = value.values()  # orjson itself refuses a key that is not exactly a str
    elif kind is list or kind is tuple:
        items = value
    else:
        items = (value,)
    if depth == 0:
        return False
    for item in items:
        kind = type(item)
        if kind is str or kind is int or item is None or kind is bool:
            continue
        if kind is float:
            # Finite (NaN and the infinities minus themselves are NaN), and not a float
            # orjson formats otherwise (0 < |item| < 1e-4); comparisons, not calls: per value.
            if item - item == 0.0 and not (-1e-4 < item < 1e-4 and item != 0.0):
                continue
            return False
        if not (kind is dict or kind is list or kind is tuple):
            return False
        if not _orjson_writes_alike(item, depth - 1):
            return False
    return True


class JsonSerializer:
    """Events are JSON values, stored as compact JSON text (ASCII, non-ASCII escaped).

    Strict JSON on writing: ``serialize`` refuses NaN and infinities, as JSON readers
    such as Spark's reject Python's non-standard ``NaN``/``Infinity`` tokens. It also
    refuses values JSON cannot hold (sets, bytes, objects; circular references) and
    values nested deeper than Python's recursion limit: SerializationError each time.
    Python's ``json`` rules apply otherwise: tuples come back as lists, non-str dict
    keys as strs. The bytes are exactly ``json.dumps(event, separators=(",", ":"),
    allow_nan=False)``'s, whichever library wrote them (orjson where its bytes are the
    same, Python's ``json`` for the rest: "JSON text" above). ``deserialize`` accepts
    whatever Python's ``json`` reads (including ``NaN`` written by other clients, and raw
    UTF-8 as well as escapes), with the same values (ints of any size stay ints), and
    raises SerializationError (``data`` = the raw bytes) for bytes that are not UTF-8
    JSON or are nested deeper than 1,024 levels (orjson's limit; Python's ``json`` alone
    gave up near its recursion limit, 1,000 by default).

    With ``schema`` (a ``pyarrow.Schema`` of bool, int, float, string, list and struct
    fields; InvalidArgumentError otherwise) it is a :class:`TableSerializer`, one JSON
    object per event and row. Events are then checked against the schema both ways:
    ``serialize`` and ``deserialize`` take/return a ``dict`` holding exactly the schema's
    fields (extra keys are dropped; a missing field is null if the field is nullable);
    a value of the wrong type, out of its int range, or null in a non-nullable field
    raises SerializationError. ``decode_table``/``encode_table`` apply the same checks.
    """

    def __init__(self, schema: pa.Schema | None = None) -> None:
        self._schema = None if schema is None else _check_schema(schema, "JsonSerializer")
        if self._schema is not None:
            for field in self._schema:
                _check_json_type(field.type, field.name)

    def __reduce__(self) -> tuple[Any, ...]:
        return (JsonSerializer, (self._schema,))

    def __repr__(self) -> str:
        return "JsonSerializer()" if self._schema is None else f"JsonSerializer({self._schema})"

    @property
    def arrow_schema(self) -> pa.Schema:
        """The schema given. Without one there is no such attribute (AttributeError), so
        duck-typed checks (``hasattr(s, "arrow_schema")``) see no TableSerializer."""
        if self._schema is None:
            raise AttributeError("JsonSerializer() without a schema has no arrow_schema")
        return self._schema

    @property
    def rows_per_event(self) -> int | None:
        """1 with a schema (one JSON object per row); None without."""
        return None if self._schema is None else 1

    def _checked(self, event: Any) -> Any:
        if self._schema is None:
            return event
        return _json_object(event, list(self._schema), "")

    def serialize(self, event: Any) -> bytes:
        # The hot path of JSON writers, kept flat (a call per step costs several percent):
        # orjson where it writes Python's json's bytes, json for the rest (see above).
        if self._schema is not None:
            try:
                event = _json_object(event, list(self._schema), "")
            except _JsonTypeMismatch as e:
                raise _encode_error(f"event does not fit the schema: {e}") from None
        if _orjson_writes_alike(event, _ORJSON_DEPTH_MAX):
            try:
                text = orjson.dumps(event).decode("ascii")
            except (orjson.JSONEncodeError, UnicodeDecodeError):
                pass  # a key not exactly a str, an int past 64 bits, a lone surrogate; non-ASCII
            else:
                if "\x7f" not in text:
                    # Encoded again, not orjson's bytes as they are: each of those keeps the
                    # buffer orjson wrote into (about 4 KiB of memory for a 61-byte event, and
                    # 1.5-2 us more per event, fresh memory touched, while many are held, as a
                    # writer holds its payloads until their block is sent). This copy is
                    # exactly sized.
                    return text.encode("ascii")
        try:
            return json.dumps(event, separators=(",", ":"), allow_nan=False).encode("ascii")
        except (TypeError, ValueError, RecursionError, UnicodeEncodeError) as e:
            raise _encode_error(f"event is not JSON serializable: {e}") from None

    def deserialize(self, data: bytes) -> Any:
        raw = data if type(data) is bytes else _raw(data, "JsonSerializer")
        try:
            value = json_text.loads(raw)
        except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError
            raise _decode_error(f"bytes are not JSON: {e}", raw) from None
        if self._schema is None:
            return value
        try:
            return self._checked(value)
        except _JsonTypeMismatch as e:
            raise _decode_error(f"event does not fit the schema: {e}", raw) from None

    def _require_schema(self) -> pa.Schema:
        if self._schema is None:
            raise InvalidArgumentError("JsonSerializer() without a schema has no table form")
        return self._schema

    def decode_table(self, payloads: Sequence[bytes]) -> pa.Table:
        """One row per payload, in order (SerializationError for one that does not decode)."""
        schema = self._require_schema()
        pa = _import_pyarrow()
        fast = decode_rows(list(payloads), schema)  # the same rows, all payloads at once
        if fast is not None:
            return fast
        rows = [self.deserialize(p) for p in payloads]
        arrays = [pa.array([row[f.name] for row in rows], type=f.type) for f in schema]
        return pa.Table.from_arrays(arrays, schema=schema)

    def encode_table(self, table: pa.Table) -> list[bytes]:
        """One JSON object per row of ``table`` (a pa.Table); a missing nullable column is null."""
        schema = self._require_schema()
        pa = _import_pyarrow()
        if not isinstance(table, pa.Table):
            raise _encode_error(f"encode_table needs a pyarrow.Table, got {type(table).__name__}")
        fast = encode_rows(table, schema)  # the same bytes, column at a time
        if fast is not None:
            return fast
        columns: list[list[Any]] = []
        for field in schema:
            if field.name in table.column_names:
                columns.append(table.column(field.name).to_pylist())
            elif field.nullable:
                columns.append([None] * table.num_rows)
            else:
                raise _encode_error(f"the table has no column {field.name!r} (not nullable)")
        names = schema.names
        return [
            self.serialize(dict(zip(names, row, strict=True))) for row in zip(*columns, strict=True)
        ]


ARROW_IPC_EVENT_BYTES_TARGET = 1 * MIB
"""``ArrowIpcSerializer.encode_table`` cuts tables into events of about this many bytes."""


class ArrowIpcSerializer:
    """Events are ``pyarrow.RecordBatch``es of one schema, each stored in Arrow IPC stream format.

    A :class:`TableSerializer`. ``serialize`` raises SerializationError for anything but a
    RecordBatch whose schema equals the serializer's (field names, types and nullability;
    schema metadata is ignored). ``deserialize`` returns a RecordBatch (the rows of every
    batch in the stream) and raises SerializationError for bytes that are not an IPC stream
    of that schema. ``encode_table`` makes one event per slice of about
    ``ARROW_IPC_EVENT_BYTES_TARGET`` bytes (at least one row each; none for an empty table),
    casting columns to the schema's types (safe casts only; a missing nullable column is
    null); ``decode_table`` concatenates the events' rows. Raises InvalidArgumentError if
    ``schema`` is not a pyarrow.Schema.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self._schema = _check_schema(schema, "ArrowIpcSerializer")

    def __reduce__(self) -> tuple[Any, ...]:
        return (ArrowIpcSerializer, (self._schema,))

    def __repr__(self) -> str:
        return f"ArrowIpcSerializer({self._schema})"

    @property
    def arrow_schema(self) -> pa.Schema:
        return self._schema

    def serialize(self, event: pa.RecordBatch) -> bytes:
        pa = _import_pyarrow()
        if not isinstance(event, pa.RecordBatch):
            raise _encode_error(
                f"ArrowIpcSerializer needs a pyarrow.RecordBatch, got {type(event).__name__}"
            )
        if not event.schema.equals(self._schema, check_metadata=False):
            raise _encode_error(
                f"record batch schema {event.schema} differs from the serializer's {self._schema}"
            )
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self._schema) as writer:
            writer.write_batch(event)
        return bytes(sink.getvalue().to_pybytes())

    def _read(self, data: bytes) -> pa.Table:
        pa = _import_pyarrow()
        raw = _raw(data, "ArrowIpcSerializer")
        try:
            table = pa.ipc.open_stream(pa.py_buffer(raw)).read_all()
        except (pa.ArrowException, ValueError, OSError) as e:
            raise _decode_error(f"bytes are not an Arrow IPC stream: {e}", raw) from None
        if not table.schema.equals(self._schema, check_metadata=False):
            raise _decode_error(
                f"IPC stream schema {table.schema} differs from the serializer's {self._schema}",
                raw,
            )
        return table.replace_schema_metadata(self._schema.metadata)

    def deserialize(self, data: bytes) -> pa.RecordBatch:
        pa = _import_pyarrow()
        table = self._read(data).combine_chunks()
        batches = table.to_batches()
        if not batches:
            return pa.RecordBatch.from_pylist([], schema=self._schema)
        return batches[0]

    def decode_table(self, payloads: Sequence[bytes]) -> pa.Table:
        """The rows of all payloads, in order (the columns may hold several chunks)."""
        pa = _import_pyarrow()
        tables = [self._read(p) for p in payloads]
        if not tables:
            return self._schema.empty_table()
        return pa.concat_tables(tables)

    def encode_table(self, table: pa.Table) -> list[bytes]:
        pa = _import_pyarrow()
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if not isinstance(table, pa.Table):
            raise _encode_error(f"encode_table needs a pyarrow.Table, got {type(table).__name__}")
        arrays = []
        for field in self._schema:
            if field.name in table.column_names:
                column = table.column(field.name)
                if column.type != field.type:
                    try:
                        column = column.cast(field.type, safe=True)
                    except (pa.ArrowException, ValueError) as e:
                        raise _encode_error(
                            f"column {field.name!r} of type {column.type} does not cast to "
                            f"{field.type}: {e}"
                        ) from None
                if not field.nullable and column.null_count:
                    raise _encode_error(f"column {field.name!r} holds nulls (not nullable)")
            elif field.nullable:
                column = pa.nulls(table.num_rows, field.type)
            else:
                raise _encode_error(f"the table has no column {field.name!r} (not nullable)")
            arrays.append(column)
        selected = pa.Table.from_arrays(arrays, schema=self._schema)
        if selected.num_rows == 0:
            return []
        row_bytes = max(1, math.ceil(selected.nbytes / selected.num_rows))
        rows_per_event = max(1, ARROW_IPC_EVENT_BYTES_TARGET // row_bytes)
        events = []
        for start in range(0, selected.num_rows, rows_per_event):
            part = selected.slice(start, rows_per_event).combine_chunks()
            events.append(self.serialize(part.to_batches()[0]))
        return events
