"""The base of every wire command, its generic encoder and decoder, and the type registry.

Frame layout (WIRE.md 3.1), big-endian::

    +------------+--------------+------------------------------+
    | i32 type   | i32 length   | payload (length bytes)       |
    +------------+--------------+------------------------------+

A command is a frozen dataclass whose fields, in declaration order, are its payload: each
field's annotation (``request_id: I64``, see :mod:`pravega_ray.wire.primitives`) says how it
is written. :func:`register` reads the annotations once, checks them and files the class
under its ``TYPE`` code; :meth:`WireCommand.encode` and :meth:`WireCommand.decode` walk that
layout.

Requests (:class:`Request`) are read tolerantly: bytes after the last known field are ignored,
because Java-era clients append fields a newer server knows (WIRE.md 3.1). Replies
(:class:`Reply`) are read strictly: bytes left over are an error. HELLO and KEEP_ALIVE are
both, and so tolerant.
"""

from __future__ import annotations

import dataclasses
import re
import struct
import typing
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

from pravega_ray.errors import InvalidArgumentError, WireProtocolError
from pravega_ray.invariant import InvariantViolation, invariant
from pravega_ray.wire.primitives import Cursor, FieldCodec, Malformed

__all__ = [
    "COMMANDS",
    "FRAME_HEADER_BYTES",
    "PAYLOAD_BYTES_MAX",
    "REPLIES",
    "REQUESTS",
    "Reply",
    "Request",
    "WireCommand",
    "register",
]

FRAME_HEADER_BYTES = 8
"""A frame's type and length fields."""

PAYLOAD_BYTES_MAX = 0x00FFFFFF
"""The largest payload of a frame, in either direction (16 MiB - 1): the Rust client drops a
connection whose reply is longer (``MAX_WIRECOMMAND_SIZE``), and the Java server refuses a
longer request. The 0.3.x client's requests stay under about 8 MiB + 100 bytes."""

HEADER = struct.Struct(">ii")
_REQUEST_ID = "request_id"

C = TypeVar("C", bound="WireCommand")
T = TypeVar("T", bound=type["WireCommand"])


class WireCommand:
    """One frame of the segment store's wire protocol.

    Subclasses are frozen, slotted, keyword-only dataclasses decorated with :func:`register`,
    which sets ``NAME`` (Pravega's name, e.g. ``SETUP_APPEND``) and ``LAYOUT`` from the class.
    """

    __slots__ = ()

    TYPE: ClassVar[int]
    """The frame's type code."""
    NAME: ClassVar[str]
    LAYOUT: ClassVar[tuple[tuple[str, FieldCodec], ...]]
    TRAILING_BYTES_ALLOWED: ClassVar[bool]

    def encode(self) -> bytes:
        """The whole frame: type, payload length, payload.

        Raises InvalidArgumentError (and writes nothing anywhere) if a field's value does not
        fit its wire type (an int out of range, a string over 65535 bytes of UTF-8, a bool
        that is not a bool, ...), if an optional trailing field is set after one left unset,
        or if the payload would exceed ``PAYLOAD_BYTES_MAX``.
        """
        out = bytearray(FRAME_HEADER_BYTES)
        skipped = ""
        for name, codec in self.LAYOUT:
            value = getattr(self, name)
            if codec.optional and value is None:
                skipped = skipped or name
                continue
            if skipped:
                raise InvalidArgumentError(f"{self.NAME}: {name} is set but {skipped} is not")
            try:
                codec.write(out, value)
            except InvalidArgumentError as error:
                raise InvalidArgumentError(f"{self.NAME}.{name}: {error.message}") from None
        size = len(out) - FRAME_HEADER_BYTES
        if size > PAYLOAD_BYTES_MAX:
            raise InvalidArgumentError(
                f"{self.NAME}: a payload of {size} bytes is over the {PAYLOAD_BYTES_MAX} limit"
            )
        HEADER.pack_into(out, 0, self.TYPE, size)
        return bytes(out)

    @classmethod
    def decode(cls: type[C], payload: bytes | bytearray | memoryview) -> C:
        """The command whose payload (the bytes after the frame header) is ``payload``.

        Raises WireProtocolError (``type_code`` set, ``request_id`` set when it was read
        before the fault, ``fatal`` false) if the payload ends early, a bool is not 0 or 1, a
        string is not UTF-8, a length or count is negative or more than the bytes left, a
        table structure's payload size disagrees with its data, or (replies only) bytes are
        left over. Nothing else escapes.
        """
        cursor = Cursor(payload)
        values: dict[str, Any] = {}
        try:
            for name, codec in cls.LAYOUT:
                values[name] = codec.read(cursor)
            if cursor.remaining() and not cls.TRAILING_BYTES_ALLOWED:
                raise Malformed(f"{cursor.remaining()} bytes left over after the last field")
        except Malformed as error:
            raise WireProtocolError(
                f"{cls.NAME} ({cls.TYPE}): {error}",
                type_code=cls.TYPE,
                request_id=values.get(_REQUEST_ID),
            ) from None
        return cls(**values)


class Request(WireCommand):
    """A command a client sends; read tolerantly (bytes after the known fields are ignored)."""

    __slots__ = ()


class Reply(WireCommand):
    """A command the segment store sends; read strictly (no bytes may be left over)."""

    __slots__ = ()


_COMMANDS: dict[int, type[WireCommand]] = {}
_REQUESTS: dict[int, type[WireCommand]] = {}
_REPLIES: dict[int, type[WireCommand]] = {}

COMMANDS: Mapping[int, type[WireCommand]] = MappingProxyType(_COMMANDS)
"""Every command this codec decodes, by type code."""
REQUESTS: Mapping[int, type[WireCommand]] = MappingProxyType(_REQUESTS)
"""The commands a client sends (what a server's frame reader accepts), by type code."""
REPLIES: Mapping[int, type[WireCommand]] = MappingProxyType(_REPLIES)
"""The commands a server sends (what a client's frame reader accepts), by type code."""


def _name_of(cls: type) -> str:
    """Pravega's name for a command class: ``SetupAppend`` -> ``SETUP_APPEND``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).upper()


def _fields_of(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    if dataclasses.is_dataclass(cls):
        return dataclasses.fields(cls)
    raise InvariantViolation(f"{cls.__name__} is not a dataclass: apply @register above it")


def register(cls: T) -> T:
    """File a command class under its ``TYPE`` and derive its ``LAYOUT`` from its fields.

    Apply it above ``@dataclass``. Every field must be annotated with a wire type from
    :mod:`primitives`, optional fields may only come last, and a type code is registered
    once: each a bug in this package if it fails (an invariant, not a caller's error).
    """
    hints = typing.get_type_hints(cls, include_extras=True)
    layout: list[tuple[str, FieldCodec]] = []
    for field in _fields_of(cls):
        metadata = getattr(hints[field.name], "__metadata__", ())
        codecs = [m for m in metadata if isinstance(m, FieldCodec)]
        invariant(len(codecs) == 1, f"{cls.__name__}.{field.name} has no wire type")
        invariant(
            codecs[0].optional or not any(c.optional for _, c in layout),
            f"{cls.__name__}.{field.name}: a required field after an optional one",
        )
        layout.append((field.name, codecs[0]))
    invariant(cls.TYPE not in _COMMANDS, f"type code {cls.TYPE} registered twice")
    cls.LAYOUT = tuple(layout)
    cls.NAME = _name_of(cls)
    cls.TRAILING_BYTES_ALLOWED = issubclass(cls, Request)
    _COMMANDS[cls.TYPE] = cls
    if issubclass(cls, Request):
        _REQUESTS[cls.TYPE] = cls
    if issubclass(cls, Reply):
        _REPLIES[cls.TYPE] = cls
    invariant(cls.TYPE in _REQUESTS or cls.TYPE in _REPLIES, f"{cls.__name__}: no direction")
    return cls
