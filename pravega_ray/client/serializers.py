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
    """InvalidArgumentError unless ``serializer`` has callable serialize() and deserialize()."""
    for method in ("serialize", "deserialize"):
        if not callable(getattr(serializer, method, None)):
            raise InvalidArgumentError(
                f"{what} must have serialize() and deserialize() methods, "
                f"got {type(serializer).__name__}"
            )


class BytesSerializer:
    """Events are ``bytes`` (or bytearray/memoryview) passed through unchanged."""

    def serialize(self, event: bytes) -> bytes:
        if isinstance(event, bytes):
            return event
        if isinstance(event, (bytearray, memoryview)):
            return bytes(event)
        raise SerializationError(f"BytesSerializer needs bytes, got {type(event).__name__}")

    def deserialize(self, data: bytes) -> bytes:
        return bytes(data)


class Utf8Serializer:
    """Events are ``str``, stored as UTF-8 (lone surrogates cannot be stored)."""

    def serialize(self, event: str) -> bytes:
        if not isinstance(event, str):
            raise SerializationError(f"Utf8Serializer needs str, got {type(event).__name__}")
        try:
            return event.encode("utf-8")
        except UnicodeEncodeError as e:
            raise SerializationError(f"str is not encodable as UTF-8: {e}") from None

    def deserialize(self, data: bytes) -> str:
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise SerializationError(f"bytes are not UTF-8: {e}", data=bytes(data)) from None


class JsonSerializer:
    """Events are JSON values, stored as compact UTF-8 JSON.

    Strict JSON on writing: NaN and infinities are refused (``SerializationError``), as
    JSON readers such as Spark's reject them; reading accepts what Python's ``json``
    reads. Values nested deeper than Python's recursion limit are refused both ways.
    """

    def serialize(self, event: Any) -> bytes:
        try:
            return json.dumps(event, separators=(",", ":"), allow_nan=False).encode("utf-8")
        except (TypeError, ValueError, RecursionError, UnicodeEncodeError) as e:
            raise SerializationError(f"event is not JSON serializable: {e}") from None

    def deserialize(self, data: bytes) -> Any:
        try:
            return json.loads(bytes(data))
        except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError
            raise SerializationError(f"bytes are not JSON: {e}", data=bytes(data)) from None
