"""Serializers turn events into bytes and back. Writers and readers take one each."""

from __future__ import annotations

import json
from typing import Any, Generic, Protocol, TypeVar

from pravega_ray.errors import InvalidArgumentError

T = TypeVar("T")


class Serializer(Protocol, Generic[T]):
    """``serialize(event) -> bytes`` and ``deserialize(bytes) -> event``, inverse of each other."""

    def serialize(self, event: T) -> bytes: ...

    def deserialize(self, data: bytes) -> T: ...


def check_serializer(serializer: object, what: str = "serializer") -> None:
    """Raise InvalidArgumentError unless ``serializer`` has callable ``serialize``/``deserialize``."""
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
        raise InvalidArgumentError(f"BytesSerializer needs bytes, got {type(event).__name__}")

    def deserialize(self, data: bytes) -> bytes:
        return data


class Utf8Serializer:
    """Events are ``str``, stored as UTF-8."""

    def serialize(self, event: str) -> bytes:
        if not isinstance(event, str):
            raise InvalidArgumentError(f"Utf8Serializer needs str, got {type(event).__name__}")
        return event.encode("utf-8")

    def deserialize(self, data: bytes) -> str:
        return data.decode("utf-8")


class JsonSerializer:
    """Events are JSON values, stored as compact UTF-8 JSON."""

    def serialize(self, event: Any) -> bytes:
        try:
            return json.dumps(event, separators=(",", ":")).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(f"event is not JSON serializable: {e}") from e

    def deserialize(self, data: bytes) -> Any:
        return json.loads(data)
