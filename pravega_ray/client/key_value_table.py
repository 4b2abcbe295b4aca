"""Key-value tables (Pravega's ``KeyValueTable``): a hash-partitioned map over table segments.

A table has a fixed number of partitions, each a table segment (see
``pravega_ray.segmentstore.table_segment``) in the container its name hashes to.
A key's partition is a stable hash of its serialized bytes, so a key always
lives in one segment and its updates are ordered there.

Versions: every put returns the key's new *version* (an int that grows with
each update of the key); ``replace`` and ``remove`` can be made conditional on
it, ``put_if_absent`` on absence. A failed condition raises
:class:`BadKeyVersionError` or :class:`NoSuchKeyError` and changes nothing.

Exactly once: each ``KeyValueTable`` has a random client id per partition.
When the owning container dies mid-call (outcome unknown) the client retries
the same update with the same client state; the container recognises a batch that landed and
returns its original result instead of applying it twice, so a retried
``put_if_absent`` does not fail on the key it created itself. Calls on one
``KeyValueTable`` are thread-safe; updates of one partition are sent one at a
time (that is what makes the retry check sound). If the retries run out, the
call raises (outcome unknown) and the partition continues under a new client id.

Iteration (``iter_keys``, ``iter_entries``) walks the partitions one after
another, a page at a time, in hash order (not key order). Keys present
throughout are seen exactly once; keys added or removed meanwhile may or may
not be.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pravega_ray import constants
from pravega_ray.client.connection import SegmentStoreConnection
from pravega_ray.client.serializers import BytesSerializer, Serializer
from pravega_ray.controller.records import KeyValueTableInfo
from pravega_ray.errors import ClientClosedError, InvalidArgumentError, RetriableError
from pravega_ray.segmentstore.attributes import NULL_VALUE
from pravega_ray.segmentstore.contracts import NOT_EXISTS, TableUpdate, TableUpdateResult
from pravega_ray.segmentstore.contracts import TableEntry as SegmentEntry

__all__ = ["KeyValueTable", "TableEntry", "TableKey"]

K = TypeVar("K")
V = TypeVar("V")
R = TypeVar("R")

_CLIENT_ID_BYTES = 15


@dataclass(frozen=True, slots=True)
class TableKey(Generic[K]):
    """A key and its current version."""

    key: K
    version: int


@dataclass(frozen=True, slots=True)
class TableEntry(Generic[K, V]):
    """A key, its value and its version."""

    key: K
    value: V
    version: int


class _Partition:
    """One partition's segment and this client's exactly-once state on it."""

    def __init__(self, segment: str) -> None:
        self.segment = segment
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Start afresh under a new client id (after an update whose outcome stayed unknown)."""
        self.client_id = os.urandom(_CLIENT_ID_BYTES)
        self.last_offset = NULL_VALUE  # where this client's previous batch landed


class KeyValueTable(Generic[K, V]):
    """A key-value table (get it with ``cluster.key_value_table(scope, name)``).

    ``key_serializer``/``value_serializer`` turn keys and values into bytes
    (default: both are bytes). Keys are at most 8 KiB and values 1 MiB once
    serialized (InvalidArgumentError otherwise).
    """

    def __init__(
        self,
        info: KeyValueTableInfo,
        segments: SegmentStoreConnection,
        key_serializer: Serializer[K] | None = None,
        value_serializer: Serializer[V] | None = None,
        *,
        call_timeout_s: float = constants.APPEND_CALL_TIMEOUT_S,
        retry_attempts_max: int = constants.WRITER_RECONNECT_ATTEMPTS_MAX,
        retry_backoff_s: float = constants.WRITER_RECONNECT_BACKOFF_S,
    ) -> None:
        self.info = info
        self._segments = segments
        self._keys: Serializer[Any] = key_serializer or BytesSerializer()
        self._values: Serializer[Any] = value_serializer or BytesSerializer()
        self._partitions = [_Partition(s) for s in info.segments]
        self._call_timeout_s = call_timeout_s
        self._retry_attempts_max = retry_attempts_max
        self._retry_backoff_s = retry_backoff_s
        self._closed = False
        self.retries = 0
        """Calls repeated because their outcome was unknown (a container died or timed out)."""

    # --- updates ------------------------------------------------------------------------------
    def put(self, key: K, value: V) -> int:
        """Set ``key`` to ``value`` unconditionally; returns the new version."""
        return self._update_one(key, value, None)

    def put_if_absent(self, key: K, value: V) -> int:
        """Insert ``key``; BadKeyVersionError if it exists. Returns the new version."""
        return self._update_one(key, value, NOT_EXISTS)

    def replace(self, key: K, value: V, version: int) -> int:
        """Update ``key`` only if its version is ``version``; returns the new version.

        Raises NoSuchKeyError if the key is absent, BadKeyVersionError if its
        version differs.
        """
        _check_version(version)
        return self._update_one(key, value, version)

    def remove(self, key: K, version: int | None = None) -> None:
        """Remove ``key`` (a no-op if absent), or only if its version is ``version``.

        With a version: NoSuchKeyError if the key is absent, BadKeyVersionError
        if its version differs.
        """
        if version is not None:
            _check_version(version)
        self._update_one(key, None, version, remove=True)

    def _update_one(
        self, key: K, value: V | None, expected: int | None, remove: bool = False
    ) -> int:
        raw_key = self._keys.serialize(key)
        raw_value = None if remove else self._values.serialize(value)
        if not remove and not isinstance(raw_value, bytes):
            raise InvalidArgumentError("the value serializer must return bytes")
        partition = self._partition(raw_key)
        result = self._update(partition, [TableUpdate(raw_key, raw_value, expected)])
        return result.versions[0]

    def _update(self, partition: _Partition, updates: list[TableUpdate]) -> TableUpdateResult:
        with partition.lock:
            try:
                result: TableUpdateResult = self._retrying(
                    lambda: self._segments.table_call(
                        partition.segment,
                        "update",
                        updates,
                        partition.client_id,
                        partition.last_offset,
                    )
                )
            except (RetriableError, FutureTimeoutError):
                # Outcome unknown and the caller is told so; the update may still land later,
                # so this client's state on the partition can no longer tell retries apart.
                partition.reset()
                raise
            if result.offset is not None:
                partition.last_offset = result.offset
            return result

    # --- reads --------------------------------------------------------------------------------
    def get(self, key: K) -> TableEntry[K, V] | None:
        """The key's entry (value and version), or None if absent."""
        return self.get_all([key])[0]

    def get_all(self, keys: Iterable[K]) -> list[TableEntry[K, V] | None]:
        """Entries of ``keys``, in the same order (None where absent); partitions in parallel."""
        self._check_open()
        keys = list(keys)
        raw_keys = [self._keys.serialize(k) for k in keys]
        by_partition: dict[int, list[int]] = {}
        for i, raw in enumerate(raw_keys):
            by_partition.setdefault(self._partition_index(raw), []).append(i)
        result: list[TableEntry[K, V] | None] = [None] * len(keys)
        calls = {
            index: lambda s=self._partitions[index].segment, w=[raw_keys[i] for i in positions]: (
                self._segments.table_call(s, "get", w)
            )
            for index, positions in by_partition.items()
        }
        first = {index: call() for index, call in calls.items()}  # partitions in parallel
        for index, positions in by_partition.items():
            try:
                found: list[SegmentEntry | None] = first[index].result(self._call_timeout_s)
            except (RetriableError, FutureTimeoutError):
                found = self._retrying(calls[index])
            for i, entry in zip(positions, found, strict=True):
                if entry is not None:
                    value = self._values.deserialize(entry.value or b"")
                    result[i] = TableEntry(keys[i], value, entry.version)
        return result

    def iter_keys(self) -> Iterator[TableKey[K]]:
        """Every key with its version (see the module docstring for the guarantees)."""
        for entry in self._iterate(with_values=False):
            yield TableKey(self._keys.deserialize(entry.key), entry.version)

    def iter_entries(self) -> Iterator[TableEntry[K, V]]:
        """Every entry (key, value, version)."""
        for entry in self._iterate(with_values=True):
            value = self._values.deserialize(entry.value or b"")
            yield TableEntry(self._keys.deserialize(entry.key), value, entry.version)

    def _iterate(self, with_values: bool) -> Iterator[SegmentEntry]:
        for partition in self._partitions:
            cursor: bytes | None = None
            while True:
                page, cursor = self._retrying(
                    lambda c=cursor, s=partition.segment: self._segments.table_call(
                        s, "iterate", c, constants.TABLE_ITERATE_LIMIT, with_values
                    )
                )
                yield from page
                if cursor is None:
                    break

    # --- plumbing -----------------------------------------------------------------------------
    def _partition_index(self, raw_key: bytes) -> int:
        if not isinstance(raw_key, bytes):
            raise InvalidArgumentError("the key serializer must return bytes")
        digest = hashlib.blake2b(raw_key, digest_size=8, person=b"kvt-partition").digest()
        return int.from_bytes(digest, "big") % len(self._partitions)

    def _partition(self, raw_key: bytes) -> _Partition:
        return self._partitions[self._partition_index(raw_key)]

    def _retrying(self, call: Callable[[], Future[R]]) -> R:
        """Run ``call`` until its outcome is known; every table call is safe to repeat."""
        self._check_open()
        for attempt in range(self._retry_attempts_max):
            try:
                return call().result(self._call_timeout_s)
            except (RetriableError, FutureTimeoutError):
                if attempt == self._retry_attempts_max - 1:
                    raise
                self.retries += 1
                time.sleep(min(2.0, self._retry_backoff_s * (attempt + 1)))
        raise AssertionError("unreachable")

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError(f"key-value table {self.info.scope}/{self.info.name} is closed")

    def close(self) -> None:
        """Release the client (later calls raise ClientClosedError). The data stays."""
        self._closed = True

    def __enter__(self) -> KeyValueTable[K, V]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_version(version: object) -> None:
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise InvalidArgumentError(f"a key version is a non-negative int, got {version!r}")
