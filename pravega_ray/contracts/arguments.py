"""Checks of what callers hand a segment container, before anything changes.

Every number that ends up in a binary log record (``operations.encode``: offsets u64,
event counts u32, attribute counts u16, attribute values i64) is bounded here, so no
input can make the ingestion pipeline fail to encode an operation it has already
accepted (which would stop the container). Each check raises
:class:`InvalidArgumentError` naming the argument; none changes anything.
"""

from __future__ import annotations

import math
from collections.abc import Sized
from typing import Any

from pravega_ray.constants import APPEND_BLOCK_BYTES_MAX, ATTRIBUTE_UPDATES_MAX, NO_EVENT_NUMBER
from pravega_ray.contracts.attributes import AttributeUpdate, check_key
from pravega_ray.errors import InvalidArgumentError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT32_MAX = 2**32 - 1


def check_int(name: str, value: object, low: int, high: int) -> int:
    """``value`` if it is an int (not a bool) in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgumentError(f"{name} must be an int in [{low}, {high}], got {value!r}")
    return value


def check_offset(name: str, value: object) -> int:
    return check_int(name, value, 0, INT64_MAX)


def check_wait(name: str, value: object) -> float:
    """A finite, non-negative number of seconds."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise InvalidArgumentError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def check_seconds(name: str, value: object, high: float, *, positive: bool = False) -> float:
    """``value`` as a float if it is a finite number of seconds in ``[0, high]``, or in
    ``(0, high]`` with ``positive`` (leases, intervals, delays)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
        or value > high
    ):
        low = "above 0" if positive else "at least 0"
        raise InvalidArgumentError(
            f"{name} must be a finite number of seconds, {low} and at most {high}, got {value!r}"
        )
    return float(value)


def check_data(value: object, *, allow_empty: bool) -> bytes:
    """Append data: bytes-like, at most ``APPEND_BLOCK_BYTES_MAX`` bytes."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"append data must be bytes, got {type(value).__name__}")
    data = value if isinstance(value, bytes) else bytes(value)
    if len(data) > APPEND_BLOCK_BYTES_MAX or (not data and not allow_empty):
        raise InvalidArgumentError(
            f"append block of {len(data)} bytes: must be 1 to {APPEND_BLOCK_BYTES_MAX} bytes"
        )
    return data


def check_count(name: str, items: Sized, high: int = ATTRIBUTE_UPDATES_MAX) -> None:
    if len(items) > high:
        raise InvalidArgumentError(f"{name}: {len(items)} items, at most {high} per call")


def check_list(name: str, items: object, high: int = ATTRIBUTE_UPDATES_MAX) -> list[Any]:
    """``items`` as a list if it is a list or tuple of at most ``high`` items."""
    if not isinstance(items, (list, tuple)):
        raise InvalidArgumentError(f"{name} must be a list or tuple, got {type(items).__name__}")
    check_count(name, items, high)
    return list(items)


def check_attribute_updates(updates: object) -> tuple[AttributeUpdate, ...]:
    """A list or tuple of at most ``ATTRIBUTE_UPDATES_MAX`` :class:`AttributeUpdate`."""
    updates = check_list("attribute updates", updates)
    for update in updates:
        if not isinstance(update, AttributeUpdate):
            raise InvalidArgumentError(f"expected an AttributeUpdate, got {type(update).__name__}")
    return tuple(updates)


def check_attribute_values(values: dict[bytes, Any]) -> None:
    """New attribute values: at most ``ATTRIBUTE_UPDATES_MAX``, each a signed 64-bit int."""
    check_count("attribute values", values)
    for value in values.values():
        check_int("attribute value", value, INT64_MIN, INT64_MAX)


def check_append(
    writer_id: object, data: object, event_count: object, expected: object, last: object
) -> bytes:
    """The checked data of a writer's conditional append (``SegmentContainer.append``)."""
    check_key(writer_id)
    checked = check_data(data, allow_empty=False)
    check_int("event_count", event_count, 1, UINT32_MAX)
    low = check_int("expected last event number", expected, NO_EVENT_NUMBER, INT64_MAX)
    high = check_int("last event number", last, NO_EVENT_NUMBER + 1, INT64_MAX)
    if high <= low:
        raise InvalidArgumentError("an append block's last event number must exceed expected")
    return checked
