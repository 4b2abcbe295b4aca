"""Key families and multi-key updates of key-value tables (Pravega's ``TableKey`` with a
primary and a secondary key, ``Insert``/``Put``/``Remove`` and ``KeyValueTableIterator``).

A table created with ``primary_key_length=P`` (and ``secondary_key_length=S``, 0 if not
given) has *key families*: every key is exactly ``P + S`` bytes once serialized, its first
``P`` bytes the *primary key* and the rest the *secondary key*. The partition is chosen by
the primary key alone, so all entries of one primary key live in one table segment and
``kvt.update([...])`` of several of them is one atomic batch there.

A key is given as the table's key serializer takes it (bytes by default) or, on a table
with key families, as a ``(primary, secondary)`` pair of ``bytes`` (joined, bypassing the
serializer). Reads answer with the key as it was asked (``get``) or as the serializer
deserializes the full key bytes (iteration).

This module holds the modifications (:class:`Insert`, :class:`Put`, :class:`Remove`),
the key layout (:class:`KeyLayout`) and the iteration filter (:class:`KeyFilter`);
:class:`~pravega_ray.client.key_value_table.KeyValueTable` uses them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pravega_ray.contracts.records import KeyValueTableInfo
from pravega_ray.contracts.segment_store import NOT_EXISTS, TableUpdate
from pravega_ray.errors import InvalidArgumentError

__all__ = [
    "Insert",
    "KeyFilter",
    "KeyLayout",
    "Put",
    "Remove",
    "TableModification",
    "check_version",
    "segment_update",
]

K = TypeVar("K")
V = TypeVar("V")


def check_version(version: object) -> None:
    """A key version: a non-negative int (not a bool), else InvalidArgumentError."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise InvalidArgumentError(f"a key version is a non-negative int, got {version!r}")


@dataclass(frozen=True, slots=True)
class Insert(Generic[K, V]):
    """Set ``key`` to ``value`` only if the key does not exist (else BadKeyVersionError)."""

    key: K
    value: V


@dataclass(frozen=True, slots=True)
class Put(Generic[K, V]):
    """Set ``key`` to ``value``: unconditionally (``version=None``) or only if the key's
    version is ``version`` (NoSuchKeyError if absent, BadKeyVersionError if it differs)."""

    key: K
    value: V
    version: int | None = None

    def __post_init__(self) -> None:
        if self.version is not None:
            check_version(self.version)


@dataclass(frozen=True, slots=True)
class Remove(Generic[K]):
    """Remove ``key``: unconditionally (a no-op if absent, ``version=None``) or only if its
    version is ``version`` (NoSuchKeyError if absent, BadKeyVersionError if it differs)."""

    key: K
    version: int | None = None

    def __post_init__(self) -> None:
        if self.version is not None:
            check_version(self.version)


TableModification = Insert[Any, Any] | Put[Any, Any] | Remove[Any]
"""One entry of ``kvt.update([...])``."""


def segment_update(
    modification: object,
    raw_key: Callable[[Any], bytes],
    raw_value: Callable[[Any], bytes],
) -> TableUpdate:
    """The table segment update a modification asks for (its key and value turned into
    bytes by ``raw_key``/``raw_value``); InvalidArgumentError for anything but an
    :class:`Insert`, :class:`Put` or :class:`Remove`, or a bad version."""
    if isinstance(modification, Insert):
        return TableUpdate(raw_key(modification.key), raw_value(modification.value), NOT_EXISTS)
    if isinstance(modification, Put):
        if modification.version is not None:
            check_version(modification.version)
        key = raw_key(modification.key)
        return TableUpdate(key, raw_value(modification.value), modification.version)
    if isinstance(modification, Remove):
        if modification.version is not None:
            check_version(modification.version)
        return TableUpdate(raw_key(modification.key), None, modification.version)
    raise InvalidArgumentError(
        f"a modification is an Insert, Put or Remove, got {type(modification).__name__}"
    )


class KeyLayout:
    """How a table's keys are laid out: with key families (``primary_length`` not None) or
    not, and so which bytes of a key choose its partition."""

    def __init__(self, info: KeyValueTableInfo) -> None:
        self.primary_length = info.primary_key_length
        self.secondary_length = info.secondary_key_length or 0
        self.table = f"{info.scope}/{info.name}"

    @property
    def families(self) -> bool:
        return self.primary_length is not None

    def join(self, key: object) -> bytes | None:
        """``key`` as bytes if it is a ``(primary, secondary)`` pair of bytes on a table
        with key families (None otherwise: the serializer takes it)."""
        if (
            self.families
            and isinstance(key, tuple)
            and len(key) == 2
            and all(isinstance(part, bytes) for part in key)
        ):
            return bytes(key[0] + key[1])
        return None

    def check(self, raw_key: object) -> bytes:
        """A serialized key: bytes, of exactly ``primary + secondary`` bytes with key
        families; else InvalidArgumentError."""
        if not isinstance(raw_key, bytes):
            raise InvalidArgumentError("the key serializer must return bytes")
        if self.primary_length is not None:
            total = self.primary_length + self.secondary_length
            if len(raw_key) != total:
                raise InvalidArgumentError(
                    f"a key of table {self.table} is {total} bytes (primary key "
                    f"{self.primary_length}, secondary {self.secondary_length}), "
                    f"got {len(raw_key)}"
                )
        return raw_key

    def routing(self, raw_key: bytes) -> bytes:
        """The bytes that choose the partition: the primary key, or the whole key."""
        return raw_key if self.primary_length is None else raw_key[: self.primary_length]

    def primary(self, name: str, value: object) -> bytes:
        """A primary key argument: bytes of exactly ``primary_key_length``."""
        self.need_families(name)
        if not isinstance(value, bytes) or len(value) != self.primary_length:
            raise InvalidArgumentError(
                f"{name} must be bytes of the primary key length {self.primary_length}, "
                f"got {value!r}"
            )
        return value

    def need_families(self, name: str) -> None:
        if not self.families:
            raise InvalidArgumentError(
                f"{name}: table {self.table} has no key families (create it with "
                "primary_key_length=...)"
            )


def _bound(name: str, value: object) -> bytes | None:
    if value is not None and not isinstance(value, bytes):
        raise InvalidArgumentError(f"{name} must be bytes or None, got {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True)
class KeyFilter:
    """Which keys an iteration keeps (Pravega's ``forPrimaryKey`` / ``forRange``).

    ``primary_key``: only that primary key's entries (its partition alone is read), with
    secondary keys in ``[secondary_from, secondary_to]`` (inclusive, bytewise; None: open).
    Else primary keys in ``[primary_from, primary_to]`` (inclusive, bytewise), every
    partition read. The filter runs on raw key bytes before anything is deserialized.
    """

    primary_length: int
    primary_key: bytes | None = None
    secondary_from: bytes | None = None
    secondary_to: bytes | None = None
    primary_from: bytes | None = None
    primary_to: bytes | None = None

    @staticmethod
    def build(
        layout: KeyLayout,
        primary_key: object,
        secondary_from: object,
        secondary_to: object,
        primary_from: object,
        primary_to: object,
    ) -> KeyFilter | None:
        """The filter the arguments ask for (None: every key), or InvalidArgumentError
        (filters on a table without key families, bounds not bytes, secondary bounds
        without ``primary_key``, ``primary_key`` with primary bounds)."""
        given = {
            "primary_key": primary_key,
            "secondary_from": secondary_from,
            "secondary_to": secondary_to,
            "primary_from": primary_from,
            "primary_to": primary_to,
        }
        named = [name for name, value in given.items() if value is not None]
        if not named:
            return None
        layout.need_families(named[0])
        assert layout.primary_length is not None
        if primary_key is None:
            if secondary_from is not None or secondary_to is not None:
                raise InvalidArgumentError("secondary_from/secondary_to need a primary_key")
            return KeyFilter(
                layout.primary_length,
                primary_from=_bound("primary_from", primary_from),
                primary_to=_bound("primary_to", primary_to),
            )
        if primary_from is not None or primary_to is not None:
            raise InvalidArgumentError("give primary_key or primary_from/primary_to, not both")
        return KeyFilter(
            layout.primary_length,
            primary_key=layout.primary("primary_key", primary_key),
            secondary_from=_bound("secondary_from", secondary_from),
            secondary_to=_bound("secondary_to", secondary_to),
        )

    def predicate(self) -> Callable[[bytes], bool]:
        """Whether a raw key is kept."""
        n = self.primary_length
        if self.primary_key is not None:
            pk, low, high = self.primary_key, self.secondary_from, self.secondary_to
            return lambda key: (
                key[:n] == pk
                and (low is None or key[n:] >= low)
                and (high is None or key[n:] <= high)
            )
        low, high = self.primary_from, self.primary_to
        return lambda key: (low is None or key[:n] >= low) and (high is None or key[:n] <= high)
