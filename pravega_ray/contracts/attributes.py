"""Segment attributes: 16-byte keys, 8-byte signed values, Pravega's four update verbs.

Verbs:

* ``REPLACE``: set the value.
* ``REPLACE_IF_GREATER``: set it if the attribute exists and the new value is greater.
* ``REPLACE_IF_EQUALS``: compare-and-set against ``compare_value``; comparing
  with :data:`NULL_VALUE` means "must be absent".
* ``ACCUMULATE``: add to the current value (absent counts as 0).

A batch of updates is atomic: :func:`apply_updates` computes every new value
or raises :class:`ConditionalUpdateError` having changed nothing. The log
records the resulting values, never the verbs, so replay is deterministic.

Core attributes have keys starting with ``0x80`` followed by seven zero bytes and
an 8-byte id (reserved: user keys there are rejected); today the container keeps
``EVENT_COUNT`` (id 1) and ``CREATION_TIME`` (id 2) as fields and reports them here.
Core ids 16 to 31 are *settable*: stored like extended attributes, they may be set
by attribute updates (the controller's scaling policy, ``segmentstore/auto_scale.py``,
ids 16 to 18), but never used as a writer id, so no writer can clash with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from pravega_ray.constants import NO_EVENT_NUMBER
from pravega_ray.errors import ConditionalUpdateError, InvalidArgumentError

ATTRIBUTE_KEY_BYTES = 16
NULL_VALUE = NO_EVENT_NUMBER
"""The value of an absent attribute (Pravega's ``Attributes.NULL_ATTRIBUTE_VALUE``)."""

_CORE_PREFIX = b"\x80" + bytes(7)
EVENT_COUNT = _CORE_PREFIX + (1).to_bytes(8, "big")
CREATION_TIME = _CORE_PREFIX + (2).to_bytes(8, "big")
SETTABLE_CORE_IDS = range(16, 32)
"""Core attribute ids that attribute updates may set (the rest are rejected)."""
_VALUE_MIN, _VALUE_MAX = -(2**63), 2**63 - 1


class AttributeUpdateType(str, Enum):
    REPLACE = "replace"
    REPLACE_IF_GREATER = "replace_if_greater"
    REPLACE_IF_EQUALS = "replace_if_equals"
    ACCUMULATE = "accumulate"


@dataclass(frozen=True, slots=True)
class AttributeUpdate:
    key: bytes
    update_type: AttributeUpdateType
    value: int
    compare_value: int = NULL_VALUE

    def __post_init__(self) -> None:
        check_key(self.key, allow_core=is_settable_core_key(self.key))
        if not isinstance(self.update_type, AttributeUpdateType):
            raise InvalidArgumentError(f"unknown attribute update type {self.update_type!r}")
        for v in (self.value, self.compare_value):
            if not isinstance(v, int) or not _VALUE_MIN <= v <= _VALUE_MAX:
                raise InvalidArgumentError("attribute values are 64-bit signed integers")


def check_key(key: object, *, allow_core: bool = False) -> bytes:
    if not isinstance(key, bytes) or len(key) != ATTRIBUTE_KEY_BYTES:
        raise InvalidArgumentError(f"attribute keys are {ATTRIBUTE_KEY_BYTES} bytes")
    if not allow_core and key.startswith(_CORE_PREFIX):
        raise InvalidArgumentError(f"attribute key {key.hex()} is reserved for core attributes")
    return key


def is_core_key(key: bytes) -> bool:
    """Whether ``key`` is in the range reserved for core attributes."""
    return key.startswith(_CORE_PREFIX)


def core_key(core_id: int) -> bytes:
    """The key of core attribute ``core_id`` (0 to 2**63 - 1)."""
    if isinstance(core_id, bool) or not isinstance(core_id, int) or not 0 <= core_id <= _VALUE_MAX:
        raise InvalidArgumentError(f"core attribute ids are 0 to 2**63 - 1, got {core_id!r}")
    return _CORE_PREFIX + core_id.to_bytes(8, "big")


def is_settable_core_key(key: object) -> bool:
    """Whether ``key`` is a core key that attribute updates may set (:data:`SETTABLE_CORE_IDS`)."""
    return (
        isinstance(key, bytes)
        and len(key) == ATTRIBUTE_KEY_BYTES
        and key.startswith(_CORE_PREFIX)
        and int.from_bytes(key[8:], "big") in SETTABLE_CORE_IDS
    )


def apply_updates(
    current: Mapping[bytes, int], updates: Iterable[AttributeUpdate]
) -> dict[bytes, int]:
    """The new values of the attributes ``updates`` touch, or ConditionalUpdateError.

    Updates apply in order, each seeing the ones before it in the batch.
    """
    changed: dict[bytes, int] = {}
    for update in updates:
        old = changed.get(update.key, current.get(update.key, NULL_VALUE))
        kind = update.update_type
        if kind is AttributeUpdateType.REPLACE:
            new = update.value
        elif kind is AttributeUpdateType.REPLACE_IF_GREATER:
            if old != NULL_VALUE and update.value <= old:
                raise ConditionalUpdateError(
                    f"attribute {update.key.hex()}: {update.value} is not greater than {old}",
                    key=update.key,
                    expected=old,
                    actual=old,
                )
            new = update.value
        elif kind is AttributeUpdateType.REPLACE_IF_EQUALS:
            if old != update.compare_value:
                raise ConditionalUpdateError(
                    f"attribute {update.key.hex()}: expected {update.compare_value}, found {old}",
                    key=update.key,
                    expected=update.compare_value,
                    actual=old,
                )
            new = update.value
        else:
            base = 0 if old == NULL_VALUE else old
            new = base + update.value
            if not _VALUE_MIN < new <= _VALUE_MAX:
                raise InvalidArgumentError(f"attribute {update.key.hex()} would overflow")
        changed[update.key] = new
    return changed
