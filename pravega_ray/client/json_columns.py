"""Column-at-a-time JSON for :class:`~pravega_ray.client.serializers.JsonSerializer`'s table
form: the same bytes as its row-at-a-time path, without a dict and a schema check per row.

:func:`encode_rows` handles the common case, a table whose columns already have the
schema's *flat* types (bool, ints, floats, strings) exactly, finite floats, and nulls only in
nullable fields: every value then fits its field by construction, so each column is turned
into JSON text once (Python's own encoders: ``int.__repr__``, ``float.__repr__``, the C
string encoder ``json`` uses) and each row is one string format. Anything else answers
None and the caller takes the per-row path, which also raises the per-row errors: the
fast path never accepts or rejects what the per-row path would not, and its bytes are the
per-row path's (``tests/unit/client/test_json_columns.py`` compares them).

:func:`decode_rows` parses all payloads at once with Arrow's JSON reader, then encodes the
rows it read with :func:`encode_rows` and keeps the table only if that gives back every
payload byte for byte: the payloads were then exactly what the per-row path writes, so
``json.loads`` and the schema checks would have read the same values (ints, floats and
strings round-trip through their canonical text). Anything else (another writer's spacing
or key order, a value the reader converted, NaN, a newline inside a payload) answers None:
the per-row path decodes, and raises its errors.
"""

from __future__ import annotations

from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["decode_rows", "encode_rows"]


def _flat(arrow_type: Any) -> bool:
    import pyarrow as pa

    types = pa.types
    return bool(
        types.is_boolean(arrow_type)
        or types.is_integer(arrow_type)
        or types.is_floating(arrow_type)
        or types.is_string(arrow_type)
        or types.is_large_string(arrow_type)
    )


def _column_text(column: Any, arrow_type: Any) -> list[str] | None:
    """Each value of ``column`` (of type ``arrow_type``) as the JSON text ``json.dumps``
    writes for it; None if a value needs the per-row path (a non-finite float)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    types = pa.types
    if types.is_floating(arrow_type):
        finite = pc.is_finite(column)
        if finite.null_count != column.null_count or pc.all(finite).as_py() not in (True, None):
            return None
        encode: Any = float.__repr__
    elif types.is_integer(arrow_type):
        encode = int.__repr__
    elif types.is_boolean(arrow_type):
        encode = {True: "true", False: "false"}.__getitem__
    else:
        encode = encode_basestring_ascii
    values = column.to_pylist()
    if column.null_count:
        return ["null" if v is None else encode(v) for v in values]
    return list(map(encode, values))


def encode_rows(table: pa.Table, schema: pa.Schema) -> list[bytes] | None:
    """One compact JSON object per row of ``table``, keys in ``schema``'s order, the bytes
    ``json.dumps(row, separators=(",", ":"), allow_nan=False)`` gives; None when the table
    is not the common case (module docstring)."""
    if table.num_rows == 0:
        return []
    columns: list[list[str]] = []
    for field in schema:
        if field.name not in table.column_names or not _flat(field.type):
            return None
        column = table.column(field.name)
        if column.type != field.type or (column.null_count and not field.nullable):
            return None
        text = _column_text(column, field.type)
        if text is None:
            return None
        columns.append(text)
    keys = [encode_basestring_ascii(name).replace("%", "%%") + ":%s" for name in schema.names]
    template = "{" + ",".join(keys) + "}"
    rows = [template % values for values in zip(*columns, strict=True)]
    # ASCII text with every newline escaped: one encode and one split for all rows.
    return "\n".join(rows).encode("ascii").split(b"\n")


def decode_rows(payloads: list[Any], schema: pa.Schema) -> pa.Table | None:
    """The rows of ``payloads`` (one JSON object each) as a table of ``schema``, exactly as
    the per-row path decodes them, or None (module docstring)."""
    import pyarrow as pa
    import pyarrow.json as pj

    if not payloads or not all(_flat(f.type) for f in schema):
        return None
    if not all(isinstance(p, (bytes, bytearray, memoryview)) for p in payloads):
        return None  # the per-row path names what is not bytes
    joined = b"\n".join(payloads)
    if joined.count(b"\n") != len(payloads) - 1 or b"\r" in joined:
        return None  # a payload holds a line break: rows would not line up
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    try:
        table = pj.read_json(pa.py_buffer(joined), parse_options=options)
    except (pa.ArrowException, ValueError):
        return None
    if table.num_rows != len(payloads) or table.schema.types != schema.types:
        return None
    # The reader makes every field nullable: a null in a non-nullable one makes the
    # re-encoding below answer None.
    table = pa.Table.from_arrays(table.combine_chunks().columns, schema=schema)
    again = encode_rows(table, schema)
    if again is None or again != [bytes(p) for p in payloads]:
        return None
    return table
