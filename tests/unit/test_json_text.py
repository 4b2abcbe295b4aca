"""``pravega_ray.json_text.loads``: orjson's speed, Python's json's values and errors (the
controller's records and the JSON serializer read through it)."""

from __future__ import annotations

import json

import pytest

from pravega_ray import json_text
from pravega_ray.controller.stream_metadata_store import decode_record

pytestmark = pytest.mark.timeout(30)

TEXTS = [
    b'{"a":1,"b":[1.5,-2,null,true],"c":"x"}',
    b"[18446744073709551616, -9223372036854775809, 12345678901234567890123]",  # beyond 64 bits
    b"[NaN, Infinity, -Infinity, 1e400]",  # json reads them, orjson does not
    b'["\\ud800", "\\udfff x"]',  # lone surrogates
    b'\xef\xbb\xbf{"bom": 1}',  # a UTF-8 byte order mark
    '{"utf16": 1}'.encode("utf-16"),
    b'{"k": 1, "k": 2}',  # the last wins
    b'{"e": "\\u00e9\xc3\xa9", "f": 1e-7, "g": 0.1}',
]


@pytest.mark.parametrize("text", TEXTS)
def test_values_are_pythons(text: bytes) -> None:
    assert repr(json_text.loads(text)) == repr(json.loads(text))


@pytest.mark.parametrize("text", [b"", b"{", b"[1,]", b"nul", b"\xff", b'"\\x"', b"1 2"])
def test_errors_are_pythons(text: bytes) -> None:
    with pytest.raises(ValueError) as python:
        json.loads(text)
    with pytest.raises(ValueError) as ours:
        json_text.loads(text)
    assert type(ours.value) is type(python.value)


def test_a_record_with_an_int_beyond_64_bits_keeps_it_exact() -> None:
    big = 2**70 + 1
    assert decode_record("k", "c", json.dumps({"n": big}).encode())["n"] == big
