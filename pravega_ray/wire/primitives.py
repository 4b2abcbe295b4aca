"""The field encodings of the segment store's wire protocol (WIRE.md 3.1, docs/wire.md).

Every field of every command is one of these, all big-endian (Java's ``DataOutput``, which the
Rust client's bincode settings reproduce byte for byte):

============  ===================================================================
``I32``       4 bytes, signed
``I64``       8 bytes, signed
``Bool``      1 byte, exactly 0 or 1 (anything else is an error, as in the client)
``U128``      16 bytes, unsigned (a UUID: Java's most significant half first)
``Str``       u16 byte length, then that many bytes of UTF-8
``Bytes``     i32 length, then the raw bytes
``I64List``   i32 count, then the i64 items
``KeyList``   i32 count, then the :class:`TableKey` items
``Entries``   i32 count, then (:class:`TableKey`, :class:`TableValue`) pairs
============  ===================================================================

The aliases are ``Annotated`` types: a command's dataclass fields are annotated with them
(``request_id: I64``), and those annotations, in field order, are the command's layout. Type
checkers see the plain Python type (``int``, ``str``, ...).

Table structures, as the Rust client writes and reads them (WIRE.md 3.3):
``TableKey = payload i32 (= 4 + len + 8), data bytes, key_version i64`` and
``TableValue = payload i32 (= 4 + len), data bytes``. The key version is always written, also
for an empty key (Java leaves it out there, which the Rust decoder would mis-parse), and a
``payload`` other than the one those sizes give is an error.

``OptionalI32`` and friends are trailing fields a peer may leave out (Java's v17 additions to
CREATE_TABLE_SEGMENT): read when enough bytes remain, as Java reads them, else None; written
when not None.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Annotated, Any

from pravega_ray.errors import InvalidArgumentError

__all__ = [
    "I32",
    "I64",
    "KEY_NOT_EXISTS",
    "KEY_NO_VERSION",
    "U128",
    "Bool",
    "Bytes",
    "Entries",
    "FieldCodec",
    "I64List",
    "KeyList",
    "OptionalBool",
    "OptionalI32",
    "OptionalI64",
    "Str",
    "TableKey",
    "TableValue",
]

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN = -(2**63)
U128_MAX = 2**128 - 1
STR_BYTES_MAX = 0xFFFF
"""A string's encoded length is a u16."""

KEY_NO_VERSION = I64_MIN
"""A table key's version meaning "no version": an unconditional update (Pravega's
``TableKey.NO_VERSION``)."""

KEY_NOT_EXISTS = -1
"""A table key's version meaning "must be absent" (Pravega's ``TableKey.NOT_EXISTS``)."""

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U64_PAIR = struct.Struct(">QQ")
_U16 = struct.Struct(">H")


class Malformed(Exception):
    """A payload that does not decode; :mod:`wire_command` turns it into WireProtocolError.

    Internal: never leaves the package (every decoding entry point catches it).
    """


class Cursor:
    """Reads a payload front to back; every read checks the bytes are there first.

    It keeps its own ``bytes`` (copying a bytearray or memoryview once), so it never holds a
    buffer export on the caller's bytearray, not even from a traceback.
    """

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._data = data if isinstance(data, bytes) else bytes(data)
        self._pos = 0

    def remaining(self) -> int:
        return len(self._data) - self._pos

    def need(self, size: int, what: str) -> int:
        """The position of ``size`` more bytes, which are then consumed; Malformed if short."""
        if size > len(self._data) - self._pos:
            raise Malformed(f"payload ends inside {what} (needs {size}, {self.remaining()} left)")
        pos = self._pos
        self._pos = pos + size
        return pos

    def unpack_all(self, layout: struct.Struct, what: str) -> tuple[Any, ...]:
        return layout.unpack_from(self._data, self.need(layout.size, what))

    def unpack(self, layout: struct.Struct, what: str) -> Any:
        return layout.unpack_from(self._data, self.need(layout.size, what))[0]

    def take(self, size: int, what: str) -> bytes:
        pos = self.need(size, what)
        return self._data[pos : pos + size]


class FieldCodec:
    """How one kind of field is written and read.

    ``size_min`` is the fewest bytes the field can take (bounds a list's count before its
    items are read); ``optional`` marks a trailing field a peer may leave out.
    """

    __slots__ = ("name", "optional", "size_min")

    def __init__(self, name: str, size_min: int, optional: bool = False) -> None:
        self.name = name
        self.size_min = size_min
        self.optional = optional

    def write(self, out: bytearray, value: Any) -> None:
        raise NotImplementedError

    def read(self, cursor: Cursor) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class _Int(FieldCodec):
    __slots__ = ("_layout",)

    def __init__(self, name: str, layout: struct.Struct) -> None:
        super().__init__(name, layout.size)
        self._layout = layout

    def write(self, out: bytearray, value: Any) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidArgumentError(
                f"{self.name} field needs an int, got {type(value).__name__}"
            )
        try:
            out += self._layout.pack(value)
        except struct.error:
            raise InvalidArgumentError(f"{value} does not fit an {self.name}") from None

    def read(self, cursor: Cursor) -> Any:
        return cursor.unpack(self._layout, self.name)


class _Bool(FieldCodec):
    __slots__ = ()

    def write(self, out: bytearray, value: Any) -> None:
        if not isinstance(value, bool):
            raise InvalidArgumentError(
                f"bool field needs True or False, got {type(value).__name__}"
            )
        out.append(1 if value else 0)

    def read(self, cursor: Cursor) -> Any:
        byte = cursor.take(1, "a bool")[0]
        if byte > 1:
            raise Malformed(f"a bool must be 0 or 1, not {byte}")
        return byte == 1


class _U128(FieldCodec):
    __slots__ = ()

    def write(self, out: bytearray, value: Any) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= U128_MAX:
            raise InvalidArgumentError("u128 field needs an int in [0, 2**128)")
        out += _U64_PAIR.pack(value >> 64, value & 0xFFFF_FFFF_FFFF_FFFF)

    def read(self, cursor: Cursor) -> Any:
        high, low = cursor.unpack_all(_U64_PAIR, "a u128")
        return (high << 64) | low


class _Str(FieldCodec):
    __slots__ = ()

    def write(self, out: bytearray, value: Any) -> None:
        if not isinstance(value, str):
            raise InvalidArgumentError(f"str field needs a str, got {type(value).__name__}")
        try:
            encoded = value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgumentError(f"{value!r} is not encodable as UTF-8") from None
        if len(encoded) > STR_BYTES_MAX:
            raise InvalidArgumentError(f"a string is at most {STR_BYTES_MAX} bytes of UTF-8")
        out += _U16.pack(len(encoded))
        out += encoded

    def read(self, cursor: Cursor) -> Any:
        size = cursor.unpack(_U16, "a string's length")
        try:
            return cursor.take(size, "a string").decode("utf-8")
        except UnicodeDecodeError as error:
            raise Malformed(f"a string is not valid UTF-8 ({error.reason})") from None


def _blob_size(value: Any) -> int:
    """The length of a bytes field's value; InvalidArgumentError unless it is bytes-like."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"bytes field needs bytes, got {type(value).__name__}")
    size = memoryview(value).nbytes
    if size > I32_MAX - 12:  # room for a table key's payload size (4 + size + 8)
        raise InvalidArgumentError("bytes longer than an i32 can count")
    return size


def _write_blob(out: bytearray, value: Any, size: int) -> None:
    out += _I32.pack(size)
    out += value


def _read_blob(cursor: Cursor, what: str) -> bytes:
    size = cursor.unpack(_I32, f"{what}'s length")
    if size < 0:
        raise Malformed(f"{what} has a negative length {size}")
    return cursor.take(size, what)


def _read_count(cursor: Cursor, item_size_min: int) -> int:
    """A list's count, checked against the bytes left so a bad count cannot loop long."""
    count = cursor.unpack(_I32, "a list's count")
    if count < 0:
        raise Malformed(f"a list has a negative count {count}")
    if count * item_size_min > cursor.remaining():
        raise Malformed(f"a list of {count} items needs more than the {cursor.remaining()} left")
    return int(count)


def _write_sequence(out: bytearray, value: Any, what: str) -> list[Any]:
    if not isinstance(value, (tuple, list)):
        raise InvalidArgumentError(f"{what} field needs a tuple, got {type(value).__name__}")
    out += _I32.pack(len(value))
    return list(value)


class _Bytes(FieldCodec):
    __slots__ = ()

    def write(self, out: bytearray, value: Any) -> None:
        _write_blob(out, value, _blob_size(value))

    def read(self, cursor: Cursor) -> Any:
        return _read_blob(cursor, "a bytes field")


class _I64List(FieldCodec):
    __slots__ = ()

    def write(self, out: bytearray, value: Any) -> None:
        for item in _write_sequence(out, value, "list<i64>"):
            I64_CODEC.write(out, item)

    def read(self, cursor: Cursor) -> Any:
        count = _read_count(cursor, 8)
        return cursor.unpack_all(struct.Struct(f">{count}q"), "list<i64>")


@dataclass(frozen=True, slots=True)
class TableKey:
    """A table segment key and its version.

    As a condition (in an update or removal): ``KEY_NO_VERSION`` (unconditional),
    ``KEY_NOT_EXISTS`` (must be absent) or the version it must have. In a reply: its version,
    the offset of its latest entry in the table segment.
    """

    data: bytes
    key_version: int = KEY_NO_VERSION


@dataclass(frozen=True, slots=True)
class TableValue:
    """A table segment value."""

    data: bytes


def _write_key(out: bytearray, key: Any) -> None:
    if not isinstance(key, TableKey):
        raise InvalidArgumentError(f"expected a TableKey, got {type(key).__name__}")
    size = _blob_size(key.data)
    out += _I32.pack(4 + size + 8)
    _write_blob(out, key.data, size)
    I64_CODEC.write(out, key.key_version)


def _read_key(cursor: Cursor) -> TableKey:
    payload = cursor.unpack(_I32, "a table key's payload size")
    data = _read_blob(cursor, "a table key")
    if payload != len(data) + 12:
        raise Malformed(f"a table key of {len(data)} bytes gives its payload as {payload}")
    return TableKey(data, cursor.unpack(_I64, "a table key's version"))


def _write_value(out: bytearray, value: Any) -> None:
    if not isinstance(value, TableValue):
        raise InvalidArgumentError(f"expected a TableValue, got {type(value).__name__}")
    size = _blob_size(value.data)
    out += _I32.pack(4 + size)
    _write_blob(out, value.data, size)


def _read_value(cursor: Cursor) -> TableValue:
    payload = cursor.unpack(_I32, "a table value's payload size")
    data = _read_blob(cursor, "a table value")
    if payload != len(data) + 4:
        raise Malformed(f"a table value of {len(data)} bytes gives its payload as {payload}")
    return TableValue(data)


class _KeyList(FieldCodec):
    __slots__ = ()

    def write(self, out: bytearray, value: Any) -> None:
        for key in _write_sequence(out, value, "list<TableKey>"):
            _write_key(out, key)

    def read(self, cursor: Cursor) -> Any:
        return tuple(_read_key(cursor) for _ in range(_read_count(cursor, 16)))


class _Entries(FieldCodec):
    __slots__ = ()

    def write(self, out: bytearray, value: Any) -> None:
        for entry in _write_sequence(out, value, "TableEntries"):
            if not isinstance(entry, tuple) or len(entry) != 2:
                raise InvalidArgumentError("table entries are (TableKey, TableValue) pairs")
            _write_key(out, entry[0])
            _write_value(out, entry[1])

    def read(self, cursor: Cursor) -> Any:
        count = _read_count(cursor, 24)
        return tuple((_read_key(cursor), _read_value(cursor)) for _ in range(count))


class _Optional(FieldCodec):
    """A trailing fixed-size field: read if its bytes are there (else None), written if set."""

    __slots__ = ("_inner",)

    def __init__(self, inner: FieldCodec) -> None:
        super().__init__(f"optional {inner.name}", 0, optional=True)
        self._inner = inner

    def write(self, out: bytearray, value: Any) -> None:
        if value is not None:
            self._inner.write(out, value)

    def read(self, cursor: Cursor) -> Any:
        if cursor.remaining() < self._inner.size_min:
            return None
        return self._inner.read(cursor)


I32_CODEC = _Int("i32", _I32)
I64_CODEC = _Int("i64", _I64)
BOOL_CODEC = _Bool("bool", 1)

I32 = Annotated[int, I32_CODEC]
I64 = Annotated[int, I64_CODEC]
Bool = Annotated[bool, BOOL_CODEC]
U128 = Annotated[int, _U128("u128", 16)]
Str = Annotated[str, _Str("str", 2)]
Bytes = Annotated[bytes, _Bytes("bytes", 4)]
I64List = Annotated[tuple[int, ...], _I64List("list<i64>", 4)]
KeyList = Annotated[tuple[TableKey, ...], _KeyList("list<TableKey>", 4)]
Entries = Annotated[tuple[tuple[TableKey, TableValue], ...], _Entries("TableEntries", 4)]
OptionalBool = Annotated[bool | None, _Optional(BOOL_CODEC)]
OptionalI32 = Annotated[int | None, _Optional(I32_CODEC)]
OptionalI64 = Annotated[int | None, _Optional(I64_CODEC)]
