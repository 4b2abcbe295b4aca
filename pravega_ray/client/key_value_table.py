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

Key families (``kvt_families.py``): a table created with ``primary_key_length`` has
keys of a fixed length whose primary key alone picks the partition; ``update`` of
several entries of one primary key (``Insert``/``Put``/``Remove``, each with its own
condition) is atomic. On a table without key families ``update`` is atomic too, but
only takes keys that share a partition (one key, or any keys of a one-partition table).

Iteration (``iter_keys``, ``iter_entries``) walks the partitions one after
another, a page at a time, in hash order (not key order). Keys present
throughout are seen exactly once; keys added or removed meanwhile may or may
not be. ``entries_page`` gives the same walk a page per call, from a position that
can be stored between calls (a scan spread over time).

Stored bytes the serializers cannot decode raise SerializationError (attributes
``key``: the raw key, ``data``: the raw value, ``version``) and change nothing; an
iterator that raised it can be asked for ``next()`` again and goes on with the next
entry. A client whose table was deleted (or deleted and re-created: the new one has
new segments) gets KeyValueTableNotFoundError.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pravega_ray import constants
from pravega_ray.client.connection import SegmentStoreConnection
from pravega_ray.client.kvt_families import (
    KeyFilter,
    KeyLayout,
    TableModification,
    check_version,
    segment_update,
)
from pravega_ray.client.serializers import BytesSerializer, Serializer, check_serializer
from pravega_ray.contracts.arguments import check_int
from pravega_ray.contracts.attributes import NULL_VALUE
from pravega_ray.contracts.records import KeyValueTableInfo
from pravega_ray.contracts.segment_store import NOT_EXISTS, TableUpdate, TableUpdateResult
from pravega_ray.contracts.segment_store import TableEntry as SegmentEntry
from pravega_ray.errors import (
    ClientClosedError,
    DataCorruptionError,
    InvalidArgumentError,
    KeyValueTableNotFoundError,
    RetriableError,
    SegmentNotFoundError,
    SerializationError,
)
from pravega_ray.timing import DAEMON_THREADS, ThreadScheduler

__all__ = ["KeyValueTable", "TableEntry", "TableKey"]

K = TypeVar("K")
V = TypeVar("V")
R = TypeVar("R")

_CLIENT_ID_BYTES = 15


@dataclass(frozen=True, slots=True)
class TableKey(Generic[K]):
    """A key and its current version (what ``iter_keys`` yields; Pravega's
    ``IteratorItem<TableKey>``: a key of a table with key families is its full bytes)."""

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
    serialized (InvalidArgumentError otherwise); with key families a key is exactly
    ``primary_key_length + secondary_key_length`` bytes, and may also be given as a
    ``(primary, secondary)`` pair of bytes (``kvt_families.py``). A call whose outcome is unknown is
    repeated after a backoff slept through ``scheduler``.
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
        scheduler: ThreadScheduler = DAEMON_THREADS,
    ) -> None:
        self.info = info
        self._segments = segments
        self._keys: Serializer[Any] = key_serializer or BytesSerializer()
        self._values: Serializer[Any] = value_serializer or BytesSerializer()
        check_serializer(self._keys, "key_serializer")
        check_serializer(self._values, "value_serializer")
        self._partitions = [_Partition(s) for s in info.segments]
        self._layout = KeyLayout(info)
        self._call_timeout_s = call_timeout_s
        self._retry_attempts_max = retry_attempts_max
        self._retry_backoff_s = retry_backoff_s
        self._scheduler = scheduler
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
        check_version(version)
        return self._update_one(key, value, version)

    def remove(self, key: K, version: int | None = None) -> None:
        """Remove ``key`` (a no-op if absent), or only if its version is ``version``.

        With a version: NoSuchKeyError if the key is absent, BadKeyVersionError
        if its version differs.
        """
        if version is not None:
            check_version(version)
        self._update_one(key, None, version, remove=True)

    def _update_one(
        self, key: K, value: V | None, expected: int | None, remove: bool = False
    ) -> int:
        self._check_open()
        raw_key = self._raw_key(key)
        raw_value = None if remove else self._raw_value(value)
        partition = self._partition(raw_key)
        result = self._update(partition, [TableUpdate(raw_key, raw_value, expected)])
        return result.versions[0]

    def update(self, modifications: Iterable[TableModification]) -> list[int | None]:
        """Apply ``modifications`` (:class:`Insert`, :class:`Put`, :class:`Remove`)
        atomically: every condition is checked together and either all are applied or
        none (Pravega's ``KeyValueTable.update``). Returns the new version of each, in
        order (None for a Remove); ``[]`` for no modifications.

        The keys must share one primary key (a table with key families) or one partition
        (a table without: one key, or any keys of a one-partition table), and no key may
        appear twice: InvalidArgumentError otherwise, as for a key of the wrong length, a
        value or key the serializers cannot turn into bytes, or a batch over 4096 keys or
        8 MiB. A failed condition raises BadKeyVersionError (an Insert of an existing key,
        a version that differs; ``key`` names it, as raw bytes) or NoSuchKeyError (a
        versioned Put or Remove of an absent key). Nothing changes on any error. Retried
        as single-key updates are when the outcome is unknown (applied once).
        """
        self._check_open()
        if isinstance(modifications, (str, bytes)) or not isinstance(modifications, Iterable):
            raise InvalidArgumentError(
                f"modifications must be an iterable of Insert/Put/Remove, "
                f"got {type(modifications).__name__}"
            )
        updates: list[TableUpdate] = []
        for modification in modifications:
            updates.append(segment_update(modification, self._raw_key, self._raw_value))
        if not updates:
            return []
        routes = {self._layout.routing(u.key) for u in updates}
        if len(routes) > 1 and self._layout.families:
            raise InvalidArgumentError(
                f"an update's keys must share one primary key, got {len(routes)}: "
                f"{sorted(routes)[:4]!r}"
            )
        partitions = {self._partition_index(route) for route in routes}
        if len(partitions) > 1:
            raise InvalidArgumentError(
                f"an update's keys must share one partition on table "
                f"{self.info.scope}/{self.info.name} (it has no key families), got "
                f"{len(partitions)}: create it with primary_key_length for atomic updates "
                "of related keys"
            )
        if len({u.key for u in updates}) != len(updates):
            raise InvalidArgumentError("an update names a key twice")
        result = self._update(self._partitions[partitions.pop()], updates)
        return [
            None if u.value is None else version
            for u, version in zip(updates, result.versions, strict=True)
        ]

    def _raw_key(self, key: object) -> bytes:
        """A key's bytes (a ``(primary, secondary)`` pair joined, else serialized), checked
        against the table's key layout."""
        joined = self._layout.join(key)
        return self._layout.check(self._keys.serialize(key) if joined is None else joined)

    def _raw_value(self, value: object) -> bytes:
        raw_value = self._values.serialize(value)
        if not isinstance(raw_value, bytes):
            raise InvalidArgumentError("the value serializer must return bytes")
        return raw_value

    def _update(self, partition: _Partition, updates: list[TableUpdate]) -> TableUpdateResult:
        with partition.lock:
            try:
                result: TableUpdateResult = self._retrying(
                    lambda: self._segments.table_update(
                        partition.segment,
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

    def exists(self, key: K) -> bool:
        """Whether ``key`` has an entry (Pravega's ``exists``)."""
        return self.get(key) is not None

    def get_all(self, keys: Iterable[K]) -> list[TableEntry[K, V] | None]:
        """Entries of ``keys``, in the same order (None where absent); partitions in parallel."""
        self._check_open()
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
            raise InvalidArgumentError(
                f"keys must be an iterable of keys, got {type(keys).__name__}"
            )
        keys = list(keys)
        raw_keys = [self._raw_key(k) for k in keys]
        by_request: list[tuple[int, list[int]]] = []  # (partition, positions), bounded requests
        by_partition: dict[int, list[int]] = {}
        for i, raw in enumerate(raw_keys):
            by_partition.setdefault(self._partition_index(self._layout.routing(raw)), []).append(i)
        for index, positions in by_partition.items():
            step = constants.TABLE_GET_KEYS_MAX
            by_request += [(index, positions[j : j + step]) for j in range(0, len(positions), step)]
        result: list[TableEntry[K, V] | None] = [None] * len(keys)
        calls = [
            functools.partial(
                self._segments.table_get,
                self._partitions[index].segment,
                [raw_keys[i] for i in positions],
            )
            for index, positions in by_request
        ]
        first = [call() for call in calls]  # partitions in parallel
        for (_, positions), call, pending in zip(by_request, calls, first, strict=True):
            try:
                found: list[SegmentEntry | None] = pending.result(self._call_timeout_s)
            except (RetriableError, FutureTimeoutError):
                found = self._retrying(call)
            except SegmentNotFoundError:
                raise self._gone() from None
            for i, entry in zip(positions, found, strict=True):
                if entry is not None:
                    result[i] = TableEntry(keys[i], self._value(entry), entry.version)
        return result

    def _value(self, entry: SegmentEntry) -> Any:
        try:
            return self._values.deserialize(entry.value or b"")
        except Exception as e:
            raise _undecodable("value", entry, e) from e

    def _key(self, entry: SegmentEntry) -> Any:
        try:
            return self._keys.deserialize(entry.key)
        except Exception as e:
            raise _undecodable("key", entry, e) from e

    def _gone(self) -> KeyValueTableNotFoundError:
        return KeyValueTableNotFoundError(
            f"key-value table {self.info.scope}/{self.info.name} was deleted (a table of "
            "that name created since is another table: open it again)"
        )

    def iter_keys(
        self,
        primary_key: bytes | None = None,
        *,
        secondary_from: bytes | None = None,
        secondary_to: bytes | None = None,
        primary_from: bytes | None = None,
        primary_to: bytes | None = None,
    ) -> Iterator[TableKey[K]]:
        """Every key with its version (see the module docstring for the guarantees), or
        those the filters keep (as :meth:`iter_entries`)."""
        keep = KeyFilter.build(
            self._layout, primary_key, secondary_from, secondary_to, primary_from, primary_to
        )
        return _Entries(
            self, lambda e: TableKey(self._key(e), e.version), False, self._visit(keep), keep
        )

    def iter_entries(
        self,
        primary_key: bytes | None = None,
        *,
        secondary_from: bytes | None = None,
        secondary_to: bytes | None = None,
        primary_from: bytes | None = None,
        primary_to: bytes | None = None,
    ) -> Iterator[TableEntry[K, V]]:
        """Every entry (key, value, version), or on a table with key families (Pravega's
        ``KeyValueTableIterator``):

        - ``primary_key=pk`` (bytes, exactly ``primary_key_length``): the entries of that
          primary key (``forPrimaryKey``), with ``secondary_from``/``secondary_to``
          (inclusive, compared bytewise; None: open) their secondary keys' range; only
          the primary key's partition is read;
        - ``primary_from``/``primary_to`` (inclusive, bytewise; ``forRange``): the entries
          whose primary keys lie in the range; every partition is read.

        The table segment's index is a hash index (no key order), so the segment store
        still reads the whole partition (every partition for a range) in hash order: for
        ``primary_key`` it sends only that primary key's entries (a key prefix filter),
        and the client drops the keys outside the secondary or primary range (raw bytes,
        before deserializing). The order is hash order, not key order. Filters on a table
        without key families, bounds that are not bytes, ``primary_key`` of another length,
        secondary bounds without ``primary_key`` or ``primary_key`` with primary bounds
        raise InvalidArgumentError.

        A SerializationError for one entry can be caught and ``next()`` called again to
        go on with the next entry.
        """
        keep = KeyFilter.build(
            self._layout, primary_key, secondary_from, secondary_to, primary_from, primary_to
        )
        return _Entries(
            self,
            lambda e: TableEntry(self._key(e), self._value(e), e.version),
            True,
            self._visit(keep),
            keep,
        )

    def _visit(self, keep: KeyFilter | None) -> list[int]:
        """The partitions an iteration under ``keep`` reads, in order."""
        if keep is not None and keep.primary_key is not None:
            return [self._partition_index(keep.primary_key)]
        return list(range(len(self._partitions)))

    def entries_page(
        self, position: bytes | None = None, limit: int | None = None
    ) -> tuple[list[TableEntry[K, V]], bytes | None]:
        """One page of the table's entries from ``position`` (None: the start), in the order
        of :meth:`iter_entries`, and the position of the next page (None: the end).

        For a scan spread over time (even over processes: a position is opaque bytes that
        can be stored): going from None to None sees every key present throughout exactly
        once, as an iteration does. A page holds at most ``limit`` entries (1 to
        ``TABLE_ITERATE_LIMIT``, that if None) and may be empty before the end.
        InvalidArgumentError for a bad limit or a position that is not one of this table's
        (another table's, or a table of that name re-created with fewer partitions);
        SerializationError if an entry does not decode (nothing of the page is returned: a
        bytes serializer sees every entry); DataCorruptionError for an entry that cannot be
        read, with ``position`` (bytes: after it) to go on from.
        """
        most = constants.TABLE_ITERATE_LIMIT
        limit = most if limit is None else check_int("limit", limit, 1, most)
        partition, cursor = self._decode_position(position)
        segment = self._partitions[partition].segment
        try:
            page, cursor = self._page(segment, cursor, True, limit)
        except DataCorruptionError as e:
            after = getattr(e, "cursor", None)
            if not isinstance(after, bytes):
                raise
            vars(e)["position"] = _position(partition, after)
            raise
        entries = [TableEntry(self._key(e), self._value(e), e.version) for e in page]
        if cursor is not None:
            return entries, _position(partition, cursor)
        if partition + 1 < len(self._partitions):
            return entries, _position(partition + 1, None)
        return entries, None

    def _decode_position(self, position: bytes | None) -> tuple[int, bytes | None]:
        if position is None:
            return 0, None
        if not isinstance(position, bytes) or len(position) < 2:
            raise InvalidArgumentError(f"bad table position {position!r}")
        partition = int.from_bytes(position[:2], "big")
        if partition >= len(self._partitions):
            raise InvalidArgumentError(
                f"table position of partition {partition}: "
                f"{self.info.scope}/{self.info.name} has {len(self._partitions)}"
            )
        return partition, (position[2:] or None)

    def _page(
        self,
        segment: str,
        cursor: bytes | None,
        with_values: bool,
        limit: int | None = None,
        key_prefix: bytes | None = None,
    ) -> tuple[list[SegmentEntry], bytes | None]:
        most = constants.TABLE_ITERATE_LIMIT if limit is None else limit
        if key_prefix is None:
            return self._retrying(
                lambda: self._segments.table_iterate(segment, cursor, most, with_values)
            )
        return self._retrying(
            lambda: self._segments.table_iterate(segment, cursor, most, with_values, key_prefix)
        )

    # --- plumbing -----------------------------------------------------------------------------
    def _partition_index(self, routing: bytes) -> int:
        """The partition of a key whose routing bytes (``KeyLayout.routing``) are given."""
        if not isinstance(routing, bytes):
            raise InvalidArgumentError("the key serializer must return bytes")
        digest = hashlib.blake2b(routing, digest_size=8, person=b"kvt-partition").digest()
        return int.from_bytes(digest, "big") % len(self._partitions)

    def _partition(self, raw_key: bytes) -> _Partition:
        return self._partitions[self._partition_index(self._layout.routing(raw_key))]

    def _retrying(self, call: Callable[[], Future[R]]) -> R:
        """Run ``call`` until its outcome is known; every table call is safe to repeat."""
        self._check_open()
        for attempt in range(self._retry_attempts_max):
            try:
                return call().result(self._call_timeout_s)
            except SegmentNotFoundError:
                raise self._gone() from None
            except (RetriableError, FutureTimeoutError):
                if attempt == self._retry_attempts_max - 1:
                    raise
                self.retries += 1
                self._scheduler.sleep(min(2.0, self._retry_backoff_s * (attempt + 1)))
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


class _Entries(Iterator[R]):
    """Iterates partitions ``visit`` of a table (default: all) a page at a time, keeping
    the entries whose raw keys ``keep`` keeps; survives one bad entry.

    An entry whose conversion raises is dropped before the error propagates, so the
    caller may catch it and call ``next()`` again to go on with the next entry. So is
    an entry the table cannot read (its Tier-2 chunk damaged): DataCorruptionError
    naming it, after the entries before it, and ``next()`` goes on after it.
    """

    def __init__(
        self,
        table: KeyValueTable[Any, Any],
        convert: Callable[[SegmentEntry], R],
        with_values: bool,
        visit: list[int] | None = None,
        keep: KeyFilter | None = None,
    ) -> None:
        self._table = table
        self._convert = convert
        self._with_values = with_values
        self._visit = list(range(len(table._partitions))) if visit is None else visit
        self._keep = None if keep is None else keep.predicate()
        self._prefix = None if keep is None else keep.primary_key  # filtered server-side too
        self._partition = 0  # index into _visit
        self._cursor: bytes | None = None
        self._page: deque[SegmentEntry] = deque()
        self._partition_done = False
        self._damage: DataCorruptionError | None = None  # raised once the page before it is out

    def __iter__(self) -> _Entries[R]:
        return self

    def __next__(self) -> R:
        while not self._page:
            if self._damage is not None:
                damage, self._damage = self._damage, None
                raise damage
            if self._partition_done:
                self._partition += 1
                self._cursor = None
                self._partition_done = False
            if self._partition >= len(self._visit):
                raise StopIteration
            segment = self._table._partitions[self._visit[self._partition]].segment
            try:
                page, self._cursor = self._table._page(
                    segment, self._cursor, self._with_values, key_prefix=self._prefix
                )
            except DataCorruptionError as e:  # one unreadable entry; the page says where to go on
                after = getattr(e, "cursor", None)
                if not isinstance(after, bytes):
                    raise
                page, self._cursor, self._damage = getattr(e, "entries", []), after, e
            keep = self._keep
            self._page = deque(page if keep is None else [e for e in page if keep(e.key)])
            self._partition_done = self._cursor is None
        entry = self._page.popleft()
        return self._convert(entry)


def _position(partition: int, cursor: bytes | None) -> bytes:
    """*format* A table position: the partition (u16, big-endian), then the table segment's
    iteration cursor (none: the partition's start)."""
    return partition.to_bytes(2, "big") + (cursor or b"")


def _undecodable(what: str, entry: SegmentEntry, cause: BaseException) -> SerializationError:
    return SerializationError(
        f"table entry {entry.key!r} (version {entry.version}): its {what} cannot be "
        f"deserialized: {cause}",
        key=entry.key,
        data=entry.value,
        version=entry.version,
    )
