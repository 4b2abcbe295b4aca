"""Serializers: typed errors both ways, the raw bytes kept on a decode failure."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import uuid
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# --- JsonSerializer on orjson: Python's json's bytes, values and errors ------------------------
#
# JsonSerializer writes with orjson where orjson's bytes are Python's json's, and reads with it
# where it reads the same values; everything else goes to Python's json. Each case below is a
# place where the two libraries differ (serializers.py, "JSON text").


def _python_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode("ascii")


class _Int(int):
    pass


class _Float(float):
    pass


class _Dict(dict):  # type: ignore[type-arg]
    pass


class _Str(str):
    __slots__ = ()


class _Color(enum.Enum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class _Point:
    x: int


@pytest.mark.parametrize(
    "event",
    [
        pytest.param({"id": 7, "sensor": "s-17", "value": 0.25, "ts": 1700000000000}, id="small"),
        pytest.param([1e-5, -2.5e-6, 1e-7, 3.3e-8, 9.9e-9, 1e-10, 1e-4, 0.0, -0.0], id="floats"),
        pytest.param([1e16, 1.5e300, 5e-324, 1.7976931348623157e308, 0.1], id="floats-wide"),
        pytest.param({"t": "é", "u": "\u2028", "d": "\x7f", "e": "😀"}, id="non-ascii"),
        pytest.param({"c": '\x00\x1f\b\f\n\r\t"\\/'}, id="escapes"),
        pytest.param({"s": "ok\ud800", "t": ["\udfff"]}, id="lone-surrogates"),
        pytest.param({1: "a", 2.5: "b", None: "c", "d": 1}, id="non-str-keys"),
        pytest.param({True: 1, False: 2}, id="bool-keys"),
        pytest.param({_Str("k"): 1, _Level.HIGH: 2}, id="key-subclasses"),
        pytest.param([2**64, 2**64 - 1, -(2**63) - 1, 10**100, -(10**100)], id="big-ints"),
        pytest.param({"big": {"n": [2**70]}}, id="big-int-nested"),
        pytest.param([_Int(5), _Level.HIGH, True, False], id="int-subclasses"),
        pytest.param([_Float(1.5), _Float(1e-5)], id="float-subclasses"),
        pytest.param(_Dict(a=1, b=[2]), id="dict-subclass"),
        pytest.param([_Str("x")], id="str-subclass"),
        pytest.param((1, (2, [3])), id="tuples"),
        pytest.param(_deep(60), id="depth-60"),
        pytest.param(_deep(300), id="depth-300"),
        pytest.param({"a": _deep(300)}, id="depth-300-in-dict"),
    ],
)
def test_json_serialize_writes_python_json_bytes(event: Any) -> None:
    serializer = pr.JsonSerializer()
    data = serializer.serialize(event)
    assert data == _python_json(event)
    assert data.isascii()
    assert serializer.deserialize(data) == json.loads(data)


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(float("nan"), id="nan"),
        pytest.param({"a": [1, {"b": float("inf")}]}, id="inf-nested"),
        pytest.param((float("-inf"),), id="inf-tuple"),
        pytest.param(_Float("nan"), id="nan-subclass"),
        pytest.param({"deep": [*_deep(100), float("nan")]}, id="nan-past-orjson-depth"),
        pytest.param(_Color.RED, id="enum"),
        pytest.param([uuid.uuid4()], id="uuid"),
        pytest.param({"p": _Point(1)}, id="dataclass"),
        pytest.param(datetime.datetime(2026, 1, 1), id="datetime"),
        pytest.param(orjson.Fragment(b"[1]"), id="orjson-fragment"),
        pytest.param({"a": b"bytes"}, id="bytes"),
        pytest.param({(1, 2): 3}, id="tuple-key"),
    ],
)
def test_json_serialize_of_what_python_json_refuses_raises_serialization_error(
    event: Any,
) -> None:
    with pytest.raises(SerializationError):
        pr.JsonSerializer().serialize(event)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'{"id":7,"sensor":"s-17","value":0.25,"ts":1700000000000}', id="small"),
        pytest.param(b"[NaN,Infinity,-Infinity]", id="nan-infinity"),
        pytest.param(b"[1e400,-1e400]", id="overflowing-floats"),
        pytest.param(b'["\\ud800","a\\udfff"]', id="lone-surrogate-escapes"),
        pytest.param(b'"\xed\xa0\x80"', id="encoded-surrogate"),
        pytest.param(b"\xef\xbb\xbf[1]", id="byte-order-mark"),
        pytest.param("[1]".encode("utf-16"), id="utf-16"),
        pytest.param(b'{"t":"\xc3\xa9\\u00e9","d":"\x7f"}', id="non-ascii"),
        pytest.param(b"[18446744073709551615,18446744073709551616]", id="past-u64"),
        pytest.param(b"[-9223372036854775808,-9223372036854775809]", id="past-i64"),
        pytest.param(b'{"a":[1,{"b":-99999999999999999999999999}]}', id="big-int-nested"),
        pytest.param(b"[1700000000000000000,-1700000000000000000]", id="19-digit-ints"),
        pytest.param(b"[0.00001,1e-05,1E5,-0,-0.0]", id="number-forms"),
        pytest.param(b'{"a":1,"b":2,"a":3}', id="duplicate-keys"),
        pytest.param(b" [1] \n", id="whitespace"),
        pytest.param(b"[" * 500 + b"]" * 500, id="depth-500"),
    ],
)
def test_json_deserialize_reads_what_python_json_reads(data: bytes) -> None:
    value = pr.JsonSerializer().deserialize(data)
    expected = json.loads(data)
    assert repr(value) == repr(expected)  # repr: NaN != NaN, and an int is not a float
    assert value == expected or value != value


@pytest.mark.parametrize(
    "data",
    [
        b"01",
        b"1.",
        b".5",
        b"+1",
        b"1e",
        b"-",
        b"0x10",
        b"[1,]",
        b'{"a":1,}',
        b"nul",
        b"tru",
        b"Nan",
        b"[1]x",
        b"\x0c1",
        b'"\t"',
        b"'a'",
        b'{"a"}',
        b'"\\x"',
        b'"\\u12"',
        b"[1 2]",
    ],
)
def test_json_deserialize_refuses_what_python_json_refuses(data: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(data)
    with pytest.raises(SerializationError) as raised:
        pr.JsonSerializer().deserialize(data)
    assert raised.value.data == data  # type: ignore[attr-defined]


@pytest.mark.timeout(120)  # 300 generated values: seconds on a machine the other tier loads
@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.integers(min_value=-(2**80), max_value=2**80)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )
)
def test_json_serialize_and_deserialize_agree_with_python_json(event: Any) -> None:
    serializer = pr.JsonSerializer()
    data = serializer.serialize(event)
    assert data == _python_json(event)
    assert repr(serializer.deserialize(data)) == repr(json.loads(data))


def test_json_of_plain_values_does_not_call_python_json(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fast path is taken for what events usually are (a speed choice, not a contract).
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Python's json was called")

    monkeypatch.setattr(json, "dumps", refuse)
    monkeypatch.setattr(json, "loads", refuse)
    serializer = pr.JsonSerializer()
    event = {"id": 7, "s": "x", "v": [0.25, 1e-4, 0.0, None, True], "ts": 2**63, "n": {"a": []}}
    data = serializer.serialize(event)
    assert serializer.deserialize(data) == event


def test_json_deserialize_reads_1024_levels_and_refuses_more() -> None:
    serializer = pr.JsonSerializer()
    value, depth = serializer.deserialize(b"[" * 1024 + b"]" * 1024), 1
    while value:  # compared level by level: == on it would pass the recursion limit
        (value,), depth = value, depth + 1
    assert value == [] and depth == 1024
    data = b"[" * 1025 + b"]" * 1025
    with pytest.raises(SerializationError) as raised:
        serializer.deserialize(data)
    assert raised.value.data == data  # type: ignore[attr-defined]
