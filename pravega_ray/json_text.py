"""JSON text read as Python's ``json.loads`` reads it, several times faster: orjson where it
reads alike, Python's json for the rest (the event serializer's and the controller records'
reader).

orjson refuses ``NaN``/``Infinity``, lone surrogate escapes, a byte order mark, UTF-16/32 and
numbers json reads as inf (json reads them all), and reads ints beyond 64 bits as floats,
where json keeps them exact ints. So orjson decodes a text unless it holds a digit run long
enough to be such an int, and what orjson refuses goes to json: the values read and the
errors raised are json's (``tests/unit/client/test_serializers.py`` compares them). One
difference is left, on purpose: orjson reads nesting up to 1,024 levels, where json alone
raised near its recursion limit.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["loads"]

_DIGITS_AS_ZERO = bytes.maketrans(b"-0123456789", b"0" * 11)
_LONG_INT = b"0" * 20
"""Once digits and ``-`` read ``0``: a run that may be an int orjson reads as a float (a
positive int past 2**64 - 1 has at least 20 digits; a negative one below -2**63, a minus and
at least 19)."""


def loads(raw: bytes) -> Any:
    """The value of JSON text ``raw``, as ``json.loads(raw)``; ValueError (JSONDecodeError,
    UnicodeDecodeError) or RecursionError as it raises them."""
    if raw.translate(_DIGITS_AS_ZERO).find(_LONG_INT) < 0:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:  # NaN, a lone surrogate, a BOM, UTF-16, depth
            pass
    return json.loads(raw)  # or maybe an int beyond 64 bits, which orjson reads as a float
