"""Serializers: typed errors both ways, the raw bytes kept on a decode failure."""

from __future__ import annotations

from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.serializers import check_serializer
from pravega_ray.errors import InvalidArgumentError, SerializationError

pytestmark = pytest.mark.timeout(10)


def _deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def _circular() -> Any:
    value: list[Any] = []
    value.append(value)
    return value


@pytest.mark.parametrize(
    "serializer, event",
    [
        (pr.Utf8Serializer(), "\ud800"),
        (pr.Utf8Serializer(), "ok\udfff"),
        (pr.Utf8Serializer(), b"bytes"),
        (pr.Utf8Serializer(), None),
        (pr.BytesSerializer(), "str"),
        (pr.BytesSerializer(), 5),
        (pr.JsonSerializer(), {"nan": float("nan")}),
        (pr.JsonSerializer(), float("inf")),
        (pr.JsonSerializer(), [float("-inf")]),
        (pr.JsonSerializer(), {1, 2}),
        (pr.JsonSerializer(), b"bytes"),
        (pr.JsonSerializer(), object()),
        (pr.JsonSerializer(), _circular()),
        (pr.JsonSerializer(), _deep(100_000)),
        # Past Python's int-to-str digit limit.
        pytest.param(pr.JsonSerializer(), 10**5000, id="huge-int"),
    ],
)
def test_serialize_of_what_it_cannot_store_raises_serialization_error(
    serializer: Any, event: Any
) -> None:
    with pytest.raises(SerializationError) as raised:
        serializer.serialize(event)
    assert isinstance(raised.value, InvalidArgumentError)
    assert raised.value.data is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "serializer, data",
    [
        (pr.Utf8Serializer(), b"\xff\xfe"),
        (pr.Utf8Serializer(), b"\xed\xa0\x80"),  # an encoded surrogate is not UTF-8
        (pr.JsonSerializer(), b"{not json"),
        (pr.JsonSerializer(), b""),
        (pr.JsonSerializer(), b"\xff"),
        (pr.JsonSerializer(), b"[" * 100_000 + b"]" * 100_000),
        (pr.JsonSerializer(), b"1" * 5000),  # past Python's str-to-int digit limit
    ],
)
def test_deserialize_of_bad_bytes_raises_serialization_error_with_the_raw_bytes(
    serializer: Any, data: bytes
) -> None:
    with pytest.raises(SerializationError) as raised:
        serializer.deserialize(data)
    assert raised.value.data == data  # type: ignore[attr-defined]
    with pytest.raises(SerializationError) as raised:
        serializer.deserialize(memoryview(data))
    assert raised.value.data == data  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "serializer", [pr.BytesSerializer(), pr.Utf8Serializer(), pr.JsonSerializer()]
)
@pytest.mark.parametrize("data", [5, "text", None])
def test_deserialize_of_something_not_bytes_raises_serialization_error(
    serializer: Any, data: Any
) -> None:
    with pytest.raises(SerializationError, match="needs bytes"):
        serializer.deserialize(data)


def test_serialize_then_deserialize_round_trips() -> None:
    assert pr.Utf8Serializer().deserialize(pr.Utf8Serializer().serialize("é€")) == "é€"
    value = {"a": [1, 2.5, None, "x", "é\ud800"], "b": True}
    assert pr.JsonSerializer().deserialize(pr.JsonSerializer().serialize(value)) == value
    assert pr.BytesSerializer().serialize(bytearray(b"ab")) == b"ab"


@pytest.mark.parametrize("data", [b"ab", bytearray(b"ab"), memoryview(b"ab")])
def test_bytes_serializer_deserialize_returns_bytes(data: Any) -> None:
    result = pr.BytesSerializer().deserialize(data)
    assert type(result) is bytes and result == b"ab"


def test_json_deserialize_of_nan_written_elsewhere_is_accepted() -> None:
    value = pr.JsonSerializer().deserialize(b"[NaN]")
    assert value[0] != value[0]


@pytest.mark.parametrize("candidate", ["x", None, object(), pr.JsonSerializer])
def test_check_serializer_of_a_non_serializer_raises_invalid_argument(candidate: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="key_serializer"):
        check_serializer(candidate, "key_serializer")
    check_serializer(pr.JsonSerializer(), "key_serializer")
