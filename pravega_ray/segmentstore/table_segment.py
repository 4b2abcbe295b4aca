"""Table segments: a key-value store on a segment whose hash index lives in its attributes.

Pravega's table segments (``ContainerTableExtension``; docs/tables.md): entries are
appended to an ordinary segment (created with role ``table``) and the segment's
attributes map a hash of each key to the offset of the key's latest entry. The attribute
index (a B+tree, docs/attribute-index.md) makes that hash index durable and lets it grow
to tens of millions of keys.

Entry layout (big-endian), one after another in the segment::

    offset  size  field
    0       1     magic             0x54 ("T")
    1       1     kind              0 = put, 1 = removal (a tombstone), 2 = copy
    2       4     key length        1 .. TABLE_KEY_BYTES_MAX
    6       4     value length      0 .. TABLE_VALUE_BYTES_MAX (0 for a removal)
    10      4     checksum          crc32 of the version field (copies), key and value
    14      8     version           copies only: the version of the put it copies
    14/22   ...   key, then value

A *copy* is a put that compaction re-appended at the tail (``table_compactor.py``); it
keeps the version of the put it copies.

Versions
--------

A key's *version* is the segment offset of its latest put entry, so versions
grow with every update and are unique within the segment. ``NOT_EXISTS`` (-1)
stands for "absent". An update batch is a list of :class:`TableUpdate`, each with
an optional condition: ``expected_version=None`` (unconditional), ``NOT_EXISTS``
(the key must be absent) or a version (the key must have exactly it). The whole
batch is checked and applied atomically as *one* append
(:meth:`SegmentContainer.append_composed`): either every entry is appended and
the index moves, or :class:`BadKeyVersionError` / :class:`NoSuchKeyError` is
raised and nothing changes. Every update appends one entry; removals append a
tombstone (also for an absent key), so :meth:`TableSegments.read_changes`
reports them and a batch's layout depends on its content only.

Hash index
----------

Attribute keys of a table segment (16 bytes)::

    0x01 + blake2b(key, digest 15 bytes)    -> where the key's latest put entry is (below)
    0x02 + 15-byte client id                -> offset of the client's last update batch
    0x00 * 15 + 0x01                        -> live keys (LIVE_KEYS)
    0x00 * 15 + 0x02                        -> entries at or above the compaction offset
    0x00 * 15 + 0x03                        -> the compaction offset
    0x00 * 15 + 0x04                        -> whether the two counters count (COUNTS)

A key's hash attribute is the offset of its latest put (which is also its version), or,
once compaction copied that put, ``-1 - offset`` of the copy: a negative value says "read
the version from the entry". Updates set it back to the offset of their new entry.
The counters drive compaction (``table_compactor.py``). ``COUNTS`` is ``COUNTED`` (-1)
once they count every entry: from a segment's first update, or, for a segment written
before they existed (no ``COUNTS``), once the compactor has counted it. While it counts,
``COUNTS`` holds the offset it counts below, and updates add to the counters from there.

The 120-bit hash makes collisions negligible (about n^2 / 2^121 for n keys); a
lookup that finds another key at the hashed offset raises
:class:`DataCorruptionError` rather than returning a wrong entry. Iteration
walks the ``0x01`` range of the attributes in hash order (the order is stable
but not the keys' order).

Exactly-once updates
--------------------

A client that cannot tell whether an update landed (its container died
mid-call) retries it with the same ``client_id`` and ``client_last``: the
offset of the client's previous batch, recorded in its ``0x02`` attribute. If
that attribute has moved past ``client_last``, the batch landed before (a
client sends one batch at a time), so the retry appends nothing and returns the
versions the first attempt produced, computed from the recorded offset and the
batch's (deterministic) layout. This check comes before the key conditions, so
a retried conditional update does not fail on the versions it produced itself.

Compaction
----------

The compactor (``table_compactor.py``) re-appends the live puts at the head as copies and
truncates the head, so a segment's size follows its live data. Reads of a key whose entry
compaction moved meanwhile (the read met the truncation) look the key up again. A
conditional update of a key whose latest put is a copy reads the copy's version first,
then applies the batch, checking that the key did not move in between.
"""

from __future__ import annotations

import hashlib
import logging
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from pravega_ray.constants import (
    READ_BYTES_MAX,
    TABLE_BATCH_BYTES_MAX,
    TABLE_BATCH_KEYS_MAX,
    TABLE_GET_KEYS_MAX,
    TABLE_ITERATE_LIMIT,
    TABLE_KEY_BYTES_MAX,
    TABLE_VALUE_BYTES_MAX,
)
from pravega_ray.contracts.arguments import check_int, check_list, check_offset
from pravega_ray.contracts.attributes import NULL_VALUE
from pravega_ray.contracts.segment_store import (
    NOT_EXISTS,
    SegmentRole,
    TableEntry,
    TableUpdate,
    TableUpdateResult,
    check_table_key,
    check_table_update,
    table_entry_end,
)
from pravega_ray.errors import (
    BadKeyVersionError,
    DataCorruptionError,
    InvalidArgumentError,
    NoSuchKeyError,
    RetriableError,
    SegmentTruncatedError,
)
from pravega_ray.timing import AsyncioScheduler, Scheduler

if TYPE_CHECKING:
    from pravega_ray.segmentstore.container import SegmentContainer

__all__ = [
    "CLIENT_ID_BYTES",
    "COMPACTION_OFFSET",
    "COUNTED",
    "COUNTS",
    "ENTRY_COUNT",
    "LIVE_KEYS",
    "NOT_EXISTS",
    "TableEntry",
    "TableSegments",
    "TableUpdate",
    "TableUpdateResult",
    "counter_value",
    "decode_entries",
    "encode_copy",
    "encode_entry",
    "key_hash",
    "location",
    "moved_to",
    "stored_bytes",
]

log = logging.getLogger(__name__)

CLIENT_ID_BYTES = 15
"""Length of a table client's id (its attribute is ``0x02`` + the id)."""

_MAGIC = 0x54
_PUT, _REMOVAL, _COPY = 0, 1, 2
_HEADER = struct.Struct(">BBIII")
HEADER_BYTES = _HEADER.size
_VERSION = struct.Struct(">q")
_HASH_PREFIX = b"\x01"
_CLIENT_PREFIX = b"\x02"
_HASH_RANGE_BEFORE = b"\x00" + b"\xff" * 15  # iteration starts after it
_STATS_PREFIX = b"\x00" * 15
LIVE_KEYS = _STATS_PREFIX + b"\x01"
"""Attribute: how many keys the table holds."""
ENTRY_COUNT = _STATS_PREFIX + b"\x02"
"""Attribute: how many entries are stored at or above the compaction offset."""
COMPACTION_OFFSET = _STATS_PREFIX + b"\x03"
"""Attribute: where the compactor goes on (everything below is copied or dead)."""
COUNTS = _STATS_PREFIX + b"\x04"
"""Attribute: ``COUNTED``, an offset a count is under way below, or absent (module docstring)."""
COUNTED = -1
_STATS = [LIVE_KEYS, ENTRY_COUNT, COUNTS]
_RESOLVE_ROUNDS = 16  # a conditional update re-reads moved keys at most this often


def location(value: int) -> int:
    """Where a key's latest put is stored, from its hash attribute (not NULL_VALUE)."""
    return value if value >= 0 else -1 - value


def moved_to(offset: int) -> int:
    """The hash attribute of a key whose latest put compaction copied to ``offset``."""
    return -1 - offset


def stored_bytes(entry: TableEntry) -> int:
    """How many bytes ``entry`` (one this module decoded) takes in its segment."""
    return table_entry_end(entry) - (entry.offset or 0)


def key_hash(key: bytes) -> bytes:
    """The 16-byte attribute key of a table key."""
    return _HASH_PREFIX + hashlib.blake2b(key, digest_size=15).digest()


def client_attribute(client_id: bytes) -> bytes:
    if not isinstance(client_id, bytes) or len(client_id) != CLIENT_ID_BYTES:
        raise InvalidArgumentError(f"a table client id is {CLIENT_ID_BYTES} bytes")
    return _CLIENT_PREFIX + client_id


def encode_entry(key: bytes, value: bytes | None) -> bytes:
    """One entry's bytes: a put, or a removal when ``value`` is None."""
    body = key + (value or b"")
    kind = _PUT if value is not None else _REMOVAL
    return _HEADER.pack(_MAGIC, kind, len(key), len(value or b""), zlib.crc32(body)) + body


def encode_copy(key: bytes, value: bytes, version: int) -> bytes:
    """A copy of a put of ``key`` whose version is ``version`` (compaction re-appends it)."""
    body = _VERSION.pack(version) + key + value
    return _HEADER.pack(_MAGIC, _COPY, len(key), len(value), zlib.crc32(body)) + body


def _parse_header(data: bytes, offset: int) -> tuple[int, int, int, int]:
    """``(kind, body length, key length, crc)`` of the header at ``data[0:14]``; the body
    is what follows the header (the version of a copy, the key, the value)."""
    magic, kind, key_length, value_length, crc = _HEADER.unpack_from(data)
    if magic != _MAGIC or kind not in (_PUT, _REMOVAL, _COPY) or key_length == 0:
        raise DataCorruptionError(f"no table entry at offset {offset}", offset=offset)
    if key_length > TABLE_KEY_BYTES_MAX or value_length > TABLE_VALUE_BYTES_MAX:
        raise DataCorruptionError(f"table entry at {offset} has bad lengths", offset=offset)
    if kind == _REMOVAL and value_length:
        raise DataCorruptionError(f"table removal at {offset} has a value", offset=offset)
    extra = _VERSION.size if kind == _COPY else 0
    return kind, extra + key_length + value_length, key_length, crc


def _entry(kind: int, body: bytes, key_length: int, crc: int, offset: int) -> TableEntry:
    """The entry stored at ``offset`` from its header fields and ``body``."""
    if zlib.crc32(body) != crc:
        raise DataCorruptionError(f"table entry at {offset}: checksum mismatch", offset=offset)
    version, start = offset, 0
    if kind == _COPY:
        (version,) = _VERSION.unpack_from(body)
        start = _VERSION.size
        if not 0 <= version < offset:
            raise DataCorruptionError(
                f"table entry at {offset}: a copy of version {version}", offset=offset
            )
    key = bytes(body[start : start + key_length])
    value = bytes(body[start + key_length :]) if kind != _REMOVAL else None
    return TableEntry(key, value, version, offset)


def decode_entries(data: bytes, offset: int) -> tuple[list[TableEntry], int]:
    """Whole entries at the start of ``data`` (which starts at segment ``offset``).

    Returns the entries (removals with ``value=None``; a copy with the version it keeps,
    each with its ``offset``) and how many bytes they took; a partial entry at the end is
    left for the next call.
    """
    entries: list[TableEntry] = []
    position = 0
    while len(data) - position >= HEADER_BYTES:
        kind, body_length, key_length, crc = _parse_header(
            data[position : position + HEADER_BYTES], offset + position
        )
        end = position + HEADER_BYTES + body_length
        if end > len(data):
            break
        body = data[position + HEADER_BYTES : end]
        entries.append(_entry(kind, body, key_length, crc, offset + position))
        position = end
    return entries, position


class TableSegments:
    """Table operations of one container (its table-segment extension).

    Every method is a coroutine on the container's event loop and takes a
    segment name; segments must have been created with :meth:`create` (role
    ``table``), else InvalidArgumentError. Reads return durable state only. Its
    ``compactor`` (:class:`TableCompactor`) runs on ``scheduler``.
    """

    def __init__(self, container: SegmentContainer, scheduler: Scheduler | None = None) -> None:
        from pravega_ray.segmentstore.table_compactor import TableCompactor

        self._container = container
        self.compactor = TableCompactor(container, self, scheduler or AsyncioScheduler())

    async def create(self, segment: str) -> None:
        """Create an empty table segment (SegmentExistsError if it exists)."""
        await self._container.create_segment(segment, SegmentRole.TABLE)

    def _check_table(self, segment: str) -> None:
        if self._container.segment_role(segment) != SegmentRole.TABLE.value:
            raise InvalidArgumentError(f"segment {segment} is not a table segment")

    async def update(
        self,
        segment: str,
        updates: Sequence[TableUpdate],
        client_id: bytes | None = None,
        client_last: int = NULL_VALUE,
    ) -> TableUpdateResult:
        """Apply ``updates`` atomically (see the module docstring); durable when it returns.

        Raises InvalidArgumentError (bad or duplicate keys, batch over
        ``TABLE_BATCH_BYTES_MAX``), BadKeyVersionError, NoSuchKeyError, and
        changes nothing then. With ``client_id``, a retry of a batch that landed
        returns the first attempt's result instead of applying it again.
        """
        self._check_table(segment)
        updates = [
            check_table_update(u) for u in check_list("updates", updates, TABLE_BATCH_KEYS_MAX)
        ]
        if len({u.key for u in updates}) != len(updates):
            raise InvalidArgumentError("a table update batch names a key twice")
        encoded = [encode_entry(u.key, u.value) for u in updates]
        if sum(map(len, encoded)) > TABLE_BATCH_BYTES_MAX:
            raise InvalidArgumentError(f"table update batch over {TABLE_BATCH_BYTES_MAX} bytes")
        hashes = [key_hash(u.key) for u in updates]
        client = client_attribute(client_id) if client_id is not None else None
        keys = hashes + _STATS + ([client] if client is not None else [])
        outcome: list[TableUpdateResult] = []
        # Versions of keys whose latest put is a copy, read from the copies: hash ->
        # (its hash attribute when read, the version).
        copied: dict[bytes, tuple[int, int]] = {}

        def version_of(hashed: bytes, value: int) -> int | None:
            if value == NULL_VALUE:
                return NOT_EXISTS
            if value >= 0:
                return value
            known = copied.get(hashed)
            return known[1] if known is not None and known[0] == value else None

        def compose(offset: int, current: Callable[[bytes], int]) -> tuple[bytes, dict[bytes, int]]:
            if client is not None and current(client) != client_last:
                outcome.append(_replayed(current(client), encoded, updates))
                return b"", {}
            conditioned = {  # hash -> the key's version now, for the conditional updates
                hashed: version_of(hashed, current(hashed))
                for update, hashed in zip(updates, hashes, strict=True)
                if update.expected_version is not None
            }
            unknown = {h: current(h) for h, version in conditioned.items() if version is None}
            if unknown:
                raise _CopiedVersions(unknown)
            data = bytearray()
            changed: dict[bytes, int] = {}
            versions = []
            live = 0
            for update, entry, hashed in zip(updates, encoded, hashes, strict=True):
                value = current(hashed)
                if update.expected_version is not None:
                    _check_condition(update, cast(int, conditioned[hashed]))
                if update.value is None:
                    versions.append(NOT_EXISTS)
                    changed[hashed] = NULL_VALUE
                    live -= 1 if value != NULL_VALUE else 0
                else:
                    versions.append(offset + len(data))
                    changed[hashed] = offset + len(data)
                    live += 1 if value == NULL_VALUE else 0
                data += entry
            if data and client is not None:
                changed[client] = offset
            counts = current(COUNTS)
            if counts == NULL_VALUE and offset == 0:  # the first update: count from here
                counts = changed[COUNTS] = COUNTED
            if data and counts != NULL_VALUE:
                changed[ENTRY_COUNT] = counter_value(current(ENTRY_COUNT)) + len(updates)
                changed[LIVE_KEYS] = counter_value(current(LIVE_KEYS)) + live
            outcome.append(TableUpdateResult(tuple(versions), offset if data else None))
            return bytes(data), changed

        for _ in range(_RESOLVE_ROUNDS):
            try:
                await self._container.append_composed(segment, keys, compose)
            except _CopiedVersions as e:
                keys_of = {h: u.key for u, h in zip(updates, hashes, strict=True)}
                await self._read_copied_versions(segment, e.values, keys_of, copied)
                continue
            except (BadKeyVersionError, NoSuchKeyError):
                # The update that made the condition fail may not be durable yet: answer once
                # it is, so a read after the conflict sees the winner (reads return durable
                # state).
                await self._container.durable_barrier()
                raise
            self.compactor.consider(segment)
            return outcome[-1]
        raise RetriableError(f"{segment}: keys kept moving under a conditional update")

    async def _read_copied_versions(
        self,
        segment: str,
        values: dict[bytes, int],
        keys: dict[bytes, bytes],
        into: dict[bytes, tuple[int, int]],
    ) -> None:
        """Note the version of each key in ``values`` (hash -> hash attribute) from its copy
        (``keys``: hash -> the key, which the copy must hold)."""
        await self._container.durable_barrier()  # the copies are durable (reads are)
        for hashed, value in values.items():
            try:
                entry = await self.read_entry(segment, location(value), with_value=False)
            except SegmentTruncatedError:
                continue  # moved again meanwhile: the next round sees where to
            if entry.key != keys[hashed]:
                raise DataCorruptionError(
                    f"{segment}: key hash {hashed.hex()} points at another key (a hash "
                    "collision or a damaged index)",
                    offset=location(value),
                )
            into[hashed] = (value, entry.version)

    async def get(self, segment: str, keys: Sequence[bytes]) -> list[TableEntry | None]:
        """The latest entry of each key (None where absent), in the order asked."""
        self._check_table(segment)
        keys = check_list("keys", keys, TABLE_GET_KEYS_MAX)
        for key in keys:
            check_table_key(key)
        hashes = [key_hash(k) for k in keys]
        values = await self._container.get_attributes(segment, hashes)
        result: list[TableEntry | None] = []
        for key, hashed in zip(keys, hashes, strict=True):
            value = values.get(hashed)
            entry = await self._latest(segment, hashed, value, with_value=True)
            if entry is not None and entry.key != key:
                raise DataCorruptionError(
                    f"{segment}: key hash {hashed.hex()} points at another key (a hash collision "
                    "or a damaged index)",
                    offset=entry.offset,
                )
            result.append(entry)
        return result

    async def _latest(
        self, segment: str, hashed: bytes, value: int | None, *, with_value: bool
    ) -> TableEntry | None:
        """The entry a key's hash attribute ``value`` points at (None if absent). Compaction
        may have moved it and truncated the head meanwhile: then look the key up again."""
        while value is not None and value != NULL_VALUE:
            try:
                return await self.read_entry(segment, location(value), with_value=with_value)
            except SegmentTruncatedError:
                moved = (await self._container.get_attributes(segment, [hashed])).get(hashed)
                if moved == value:
                    # The index points below the segment's start: compaction dropped the
                    # entry yet the key was not moved. Seen once in a chaos run (reader-group
                    # state under container kills and S3 faults), not explained yet: say
                    # everything that may tell why.
                    found = await self._container.get_attributes(
                        segment, [COMPACTION_OFFSET, ENTRY_COUNT, LIVE_KEYS, COUNTS]
                    )
                    state = self._container.metadata.get(segment)
                    log.warning(
                        "%s: key hash %s points at %d, below the start %d (compaction "
                        "offset and counters %s; pending value %s, dirty %s)",
                        segment,
                        hashed.hex(),
                        location(value),
                        state.start_offset,
                        found,
                        state.pending_attributes.get(hashed),
                        hashed in state.dirty_attributes,
                    )
                    raise
                value = moved
        return None

    async def iterate(
        self,
        segment: str,
        cursor: bytes | None,
        limit: int,
        with_values: bool = True,
        key_prefix: bytes | None = None,
    ) -> tuple[list[TableEntry], bytes | None]:
        """A page of the table's current entries in hash order, and the next cursor.

        Pass the returned cursor back for the next page; None means done. Pages
        may be short (even empty) before the end. Keys added or removed during
        an iteration may or may not be seen; every key present throughout is
        seen exactly once, with its version, whether or not compaction moves it.
        With ``with_values=False`` values come back as None. With ``key_prefix`` only
        keys that start with it are returned: the hash index has no key order, so the
        page's ``limit`` entries are still read, and the others are dropped here (what
        it saves is sending them).

        An entry that cannot be read (its Tier-2 chunk damaged or lost) raises
        DataCorruptionError naming it, with ``entries`` (the page's entries before it) and
        ``cursor`` (pass it to go on after the damaged entry): one bad entry never hides
        the rest of the table.
        """
        self._check_table(segment)
        check_int("limit", limit, 1, TABLE_ITERATE_LIMIT)
        if key_prefix is not None and not isinstance(key_prefix, bytes):
            raise InvalidArgumentError(f"a key prefix is bytes, got {type(key_prefix).__name__}")
        after = _HASH_RANGE_BEFORE if cursor is None else cursor
        if not isinstance(after, bytes) or not after.startswith((b"\x00", _HASH_PREFIX)):
            raise InvalidArgumentError(f"bad table iteration cursor {cursor!r}")
        items, next_cursor = await self._container.iterate_attributes(segment, after, limit)
        entries: list[TableEntry] = []
        for hashed, value in items:
            if not hashed.startswith(_HASH_PREFIX):
                return entries, None  # past the hash range: client attributes follow
            try:
                entry = await self._latest(segment, hashed, value, with_value=with_values)
            except DataCorruptionError as e:
                raise DataCorruptionError(
                    f"table entry at offset {location(value)} of {segment} cannot be read: {e}",
                    **{**vars(e), "segment": segment, "offset": location(value)},
                    entries=entries,
                    cursor=hashed,
                ) from e
            if entry is not None and (key_prefix is None or entry.key.startswith(key_prefix)):
                entries.append(entry)  # None: removed while the page was read
        if next_cursor is not None and not next_cursor.startswith(_HASH_PREFIX):
            next_cursor = None
        return entries, next_cursor

    async def read_changes(
        self, segment: str, from_offset: int, max_bytes: int
    ) -> tuple[list[TableEntry], int]:
        """Entries appended at or after ``from_offset`` (removals with value None).

        Returns whole entries of up to about ``max_bytes`` (at least one if any
        exists) and the offset to continue from; ``from_offset`` must be an entry
        boundary (0, or an offset this method returned). Compaction's copies are among
        them, as puts with the version they keep (a copy never changes a key's value).
        ``from_offset=0`` reads from the segment's start: below it, compaction has
        dropped only entries a later one replaced or copied. Any other offset below the
        start raises SegmentTruncatedError: the changes there are gone, so a reader of
        changes starts afresh (iterate, then read changes from the length it saw).
        """
        self._check_table(segment)
        check_offset("from_offset", from_offset)
        max_bytes = min(check_int("max_bytes", max_bytes, 1, 2**63 - 1), READ_BYTES_MAX)
        info = await self._container.get_info(segment)
        if from_offset > info.length:
            raise InvalidArgumentError(f"offset {from_offset} is outside {segment}")
        if from_offset == 0:
            from_offset = info.start_offset
        end = min(info.length, from_offset + max_bytes)
        data = await self._container.read_range(segment, from_offset, end - from_offset)
        entries, used = decode_entries(data, from_offset)
        if not entries and from_offset < info.length:  # one entry bigger than max_bytes
            entry = await self.read_entry(segment, from_offset, with_value=True)
            entries, used = [entry], stored_bytes(entry)
        return entries, from_offset + used

    async def read_entry(self, segment: str, offset: int, *, with_value: bool) -> TableEntry:
        """The entry stored at ``offset`` (its ``offset`` set)."""
        header = await self._container.read_range(segment, offset, HEADER_BYTES)
        kind, body_length, key_length, crc = _parse_header(header, offset)
        body = await self._container.read_range(segment, offset + HEADER_BYTES, body_length)
        entry = _entry(kind, body, key_length, crc, offset)
        if with_value or entry.value is None:
            return entry
        return TableEntry(entry.key, None, entry.version, offset)

    def stop(self) -> None:
        """Stop compacting (the container closes)."""
        self.compactor.stop()


class _CopiedVersions(Exception):
    """Raised from an update's compose: these keys' latest puts are copies whose versions
    must be read first (hash -> its attribute value)."""

    def __init__(self, values: dict[bytes, int]) -> None:
        super().__init__(f"{len(values)} keys to read")
        self.values = values


def counter_value(value: int) -> int:
    """A counter attribute's value (absent, ``NULL_VALUE``, counts as 0)."""
    return 0 if value == NULL_VALUE else value


def _check_condition(update: TableUpdate, version: int) -> None:
    expected = update.expected_version
    if expected is None or expected == version:
        return
    if expected != NOT_EXISTS and version == NOT_EXISTS:
        raise NoSuchKeyError(f"table key {update.key!r} does not exist", key=update.key)
    raise BadKeyVersionError(
        f"table key {update.key!r}: expected version {expected}, actual {version}",
        key=update.key,
        expected=expected,
        actual=version,
    )


def _replayed(
    offset: int, encoded: Sequence[bytes], updates: Sequence[TableUpdate]
) -> TableUpdateResult:
    """The result a batch had when it landed at ``offset`` (retried after an unknown outcome).

    Every update appended exactly one entry, in order, so the layout is known.
    """
    versions = []
    position = offset
    for update, entry in zip(updates, encoded, strict=True):
        versions.append(position if update.value is not None else NOT_EXISTS)
        position += len(entry)
    return TableUpdateResult(tuple(versions), offset)
