"""Serializers turn events into bytes and back. Writers and readers take one each.

Contract: ``serialize`` raises :class:`SerializationError` (an InvalidArgumentError) for a
value it cannot encode, having changed nothing; ``deserialize`` raises
:class:`SerializationError` carrying the raw bytes as ``data`` for bytes it cannot decode.
Readers and key-value tables add where the bytes came from and never consume an event
that failed to decode (docs/api.md).
"""

from __future__ import annotations

import json
from typing import Any, Generic, Protocol, TypeVar

from pravega_ray.errors import InvalidArgumentError, SerializationError

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


class JsonSerializer:
    """Events are JSON values, stored as compact JSON text (ASCII, non-ASCII escaped).

    Strict JSON on writing: ``serialize`` refuses NaN and infinities, as JSON readers
    such as Spark's reject Python's non-standard ``NaN``/``Infinity`` tokens. It also
    refuses values JSON cannot hold (sets, bytes, objects; circular references) and
    values nested deeper than Python's recursion limit: SerializationError each time.
    Python's ``json`` rules apply otherwise: tuples come back as lists, non-str dict
    keys as strs. ``deserialize`` accepts whatever Python's ``json`` reads (including
    ``NaN`` written by other clients) and raises SerializationError (``data`` = the raw
    bytes) for bytes that are not UTF-8 JSON or are nested too deep.
    """

    def serialize(self, event: Any) -> bytes:
        try:
            return json.dumps(event, separators=(",", ":"), allow_nan=False).encode("utf-8")
        except (TypeError, ValueError, RecursionError, UnicodeEncodeError) as e:
            raise _encode_error(f"event is not JSON serializable: {e}") from None

    def deserialize(self, data: bytes) -> Any:
        raw = _raw(data, "JsonSerializer")
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError
            raise _decode_error(f"bytes are not JSON: {e}", raw) from None
