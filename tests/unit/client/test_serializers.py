"""Serializers: typed errors both ways, the raw bytes kept on a decode failure."""

from __future__ import annotations

from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.errors import InvalidArgumentError, SerializationError

pytestmark = pytest.mark.timeout(10)


def _deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "serializer, event",
    [
        (pr.Utf8Serializer(), "\ud800"),
        (pr.Utf8Serializer(), b"bytes"),
        (pr.BytesSerializer(), "str"),
        (pr.JsonSerializer(), {"nan": float("nan")}),
        (pr.JsonSerializer(), float("inf")),
        (pr.JsonSerializer(), {1, 2}),
        (pr.JsonSerializer(), _deep(100_000)),
    ],
)
def test_serialize_refuses_what_it_cannot_store(serializer: Any, event: Any) -> None:
    with pytest.raises(SerializationError):
        serializer.serialize(event)
    assert issubclass(SerializationError, InvalidArgumentError)


@pytest.mark.parametrize(
    "serializer, data",
    [
        (pr.Utf8Serializer(), b"\xff\xfe"),
        (pr.JsonSerializer(), b"{not json"),
        (pr.JsonSerializer(), b"\xff"),
        (pr.JsonSerializer(), b"[" * 100_000 + b"]" * 100_000),
    ],
)
def test_deserialize_failure_carries_the_raw_bytes(serializer: Any, data: bytes) -> None:
    with pytest.raises(SerializationError) as raised:
        serializer.deserialize(data)
    assert raised.value.data == data  # type: ignore[attr-defined]


def test_round_trips() -> None:
    assert pr.Utf8Serializer().deserialize(pr.Utf8Serializer().serialize("é€")) == "é€"
    value = {"a": [1, 2.5, None, "x"], "b": True}
    assert pr.JsonSerializer().deserialize(pr.JsonSerializer().serialize(value)) == value
    assert pr.BytesSerializer().deserialize(memoryview(b"ab")) == b"ab"
