"""Table segments: a key-value store on a segment whose hash index lives in its attributes.

Pravega's table segments (``ContainerTableExtension``; docs/tables.md): entries are
appended to an ordinary segment (created with role ``table``) and the segment's
attributes map a hash of each key to the offset of the key's latest entry. The attribute
index (a B+tree, docs/attribute-index.md) makes that hash index durable and lets it grow
to tens of millions of keys.

Entry layout (big-endian), one after another in the segment::

    offset  size  field
    0       1     magic             0x54 ("T")
    1       1     kind              0 = put, 1 = removal (a tombstone)
    2       4     key length        1 .. TABLE_KEY_BYTES_MAX
    6       4     value length      0 .. TABLE_VALUE_BYTES_MAX (0 for a removal)
    10      4     checksum          crc32 of key + value
    14      ...   key, then value

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

    0x01 + blake2b(key, digest 15 bytes)    -> version of the key's latest put entry
    0x02 + 15-byte client id                -> offset of the client's last update batch

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

Deferred: compaction of table segments (re-appending live entries so the head
can be truncated); today a table segment keeps every entry ever written.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

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
)
from pravega_ray.errors import (
    BadKeyVersionError,
    DataCorruptionError,
    InvalidArgumentError,
    NoSuchKeyError,
)

if TYPE_CHECKING:
    from pravega_ray.segmentstore.container import SegmentContainer

__all__ = [
    "CLIENT_ID_BYTES",
    "NOT_EXISTS",
    "TableEntry",
    "TableSegments",
    "TableUpdate",
    "TableUpdateResult",
    "decode_entries",
    "encode_entry",
    "key_hash",
]

CLIENT_ID_BYTES = 15
"""Length of a table client's id (its attribute is ``0x02`` + the id)."""

_MAGIC = 0x54
_PUT, _REMOVAL = 0, 1
_HEADER = struct.Struct(">BBIII")
HEADER_BYTES = _HEADER.size
_HASH_PREFIX = b"\x01"
_CLIENT_PREFIX = b"\x02"
_HASH_RANGE_BEFORE = b"\x00" + b"\xff" * 15  # iteration starts after it


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


def _parse_header(data: bytes, offset: int) -> tuple[bool, int, int, int]:
    """``(is_put, key length, value length, crc)`` of the header at ``data[0:14]``."""
    magic, kind, key_length, value_length, crc = _HEADER.unpack_from(data)
    if magic != _MAGIC or kind not in (_PUT, _REMOVAL) or key_length == 0:
        raise DataCorruptionError(f"no table entry at offset {offset}", offset=offset)
    if key_length > TABLE_KEY_BYTES_MAX or value_length > TABLE_VALUE_BYTES_MAX:
        raise DataCorruptionError(f"table entry at {offset} has bad lengths", offset=offset)
    return kind == _PUT, key_length, value_length, crc


def decode_entries(data: bytes, offset: int) -> tuple[list[TableEntry], int]:
    """Whole entries at the start of ``data`` (which starts at segment ``offset``).

    Returns the entries (removals with ``value=None``) and how many bytes they
    took; a partial entry at the end is left for the next call.
    """
    entries: list[TableEntry] = []
    position = 0
    while len(data) - position >= HEADER_BYTES:
        is_put, key_length, value_length, crc = _parse_header(
            data[position : position + HEADER_BYTES], offset + position
        )
        end = position + HEADER_BYTES + key_length + value_length
        if end > len(data):
            break
        body = data[position + HEADER_BYTES : end]
        if zlib.crc32(body) != crc:
            raise DataCorruptionError(
                f"table entry at {offset + position}: checksum mismatch", offset=offset + position
            )
        key = bytes(body[:key_length])
        value = bytes(body[key_length:]) if is_put else None
        entries.append(TableEntry(key, value, offset + position))
        position = end
    return entries, position


class TableSegments:
    """Table operations of one container (its table-segment extension).

    Every method is a coroutine on the container's event loop and takes a
    segment name; segments must have been created with :meth:`create` (role
    ``table``), else InvalidArgumentError. Reads return durable state only.
    """

    def __init__(self, container: SegmentContainer) -> None:
        self._container = container

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
        keys = hashes + ([client] if client is not None else [])
        outcome: list[TableUpdateResult] = []

        def compose(offset: int, current: Callable[[bytes], int]) -> tuple[bytes, dict[bytes, int]]:
            if client is not None and current(client) != client_last:
                outcome.append(_replayed(current(client), encoded, updates))
                return b"", {}
            data = bytearray()
            changed: dict[bytes, int] = {}
            versions = []
            for update, entry, hashed in zip(updates, encoded, hashes, strict=True):
                version = current(hashed)
                _check_condition(update, NOT_EXISTS if version == NULL_VALUE else version)
                if update.value is None:
                    versions.append(NOT_EXISTS)
                    changed[hashed] = NULL_VALUE
                else:
                    versions.append(offset + len(data))
                    changed[hashed] = offset + len(data)
                data += entry
            if data and client is not None:
                changed[client] = offset
            outcome.append(TableUpdateResult(tuple(versions), offset if data else None))
            return bytes(data), changed

        try:
            await self._container.append_composed(segment, keys, compose)
        except (BadKeyVersionError, NoSuchKeyError):
            # The update that made the condition fail may not be durable yet: answer once it
            # is, so a read after the conflict sees the winner (reads return durable state).
            await self._container.durable_barrier()
            raise
        return outcome[-1]

    async def get(self, segment: str, keys: Sequence[bytes]) -> list[TableEntry | None]:
        """The latest entry of each key (None where absent), in the order asked."""
        self._check_table(segment)
        keys = check_list("keys", keys, TABLE_GET_KEYS_MAX)
        for key in keys:
            check_table_key(key)
        hashes = [key_hash(k) for k in keys]
        versions = await self._container.get_attributes(segment, hashes)
        result: list[TableEntry | None] = []
        for key, hashed in zip(keys, hashes, strict=True):
            version = versions.get(hashed)
            if version is None:
                result.append(None)
                continue
            entry = await self._read_entry(segment, version, with_value=True)
            if entry.key != key:
                raise DataCorruptionError(
                    f"{segment}: key hash {hashed.hex()} points at another key (a hash collision "
                    "or a damaged index)",
                    offset=version,
                )
            result.append(entry)
        return result

    async def iterate(
        self, segment: str, cursor: bytes | None, limit: int, with_values: bool = True
    ) -> tuple[list[TableEntry], bytes | None]:
        """A page of the table's current entries in hash order, and the next cursor.

        Pass the returned cursor back for the next page; None means done. Pages
        may be short (even empty) before the end. Keys added or removed during
        an iteration may or may not be seen; every key present throughout is
        seen exactly once. With ``with_values=False`` values come back as None.

        An entry that cannot be read (its Tier-2 chunk damaged or lost) raises
        DataCorruptionError naming it, with ``entries`` (the page's entries before it) and
        ``cursor`` (pass it to go on after the damaged entry): one bad entry never hides
        the rest of the table.
        """
        self._check_table(segment)
        check_int("limit", limit, 1, TABLE_ITERATE_LIMIT)
        after = _HASH_RANGE_BEFORE if cursor is None else cursor
        if not isinstance(after, bytes) or not after.startswith((b"\x00", _HASH_PREFIX)):
            raise InvalidArgumentError(f"bad table iteration cursor {cursor!r}")
        items, next_cursor = await self._container.iterate_attributes(segment, after, limit)
        entries: list[TableEntry] = []
        for hashed, version in items:
            if not hashed.startswith(_HASH_PREFIX):
                return entries, None  # past the hash range: client attributes follow
            try:
                entries.append(await self._read_entry(segment, version, with_value=with_values))
            except DataCorruptionError as e:
                raise DataCorruptionError(
                    f"table entry at offset {version} of {segment} cannot be read: {e}",
                    **{**vars(e), "segment": segment, "offset": version},
                    entries=entries,
                    cursor=hashed,
                ) from e
        if next_cursor is not None and not next_cursor.startswith(_HASH_PREFIX):
            next_cursor = None
        return entries, next_cursor

    async def read_changes(
        self, segment: str, from_offset: int, max_bytes: int
    ) -> tuple[list[TableEntry], int]:
        """Entries appended at or after ``from_offset`` (removals with value None).

        Returns whole entries of up to about ``max_bytes`` (at least one if any
        exists) and the offset to continue from; ``from_offset`` must be an entry
        boundary (0, or an offset this method returned). Raises
        SegmentTruncatedError below the segment's start.
        """
        self._check_table(segment)
        check_offset("from_offset", from_offset)
        max_bytes = min(check_int("max_bytes", max_bytes, 1, 2**63 - 1), READ_BYTES_MAX)
        info = await self._container.get_info(segment)
        if from_offset > info.length:
            raise InvalidArgumentError(f"offset {from_offset} is outside {segment}")
        end = min(info.length, from_offset + max_bytes)
        data = await self._container.read_range(segment, from_offset, end - from_offset)
        entries, used = decode_entries(data, from_offset)
        if not entries and from_offset < info.length:  # one entry bigger than max_bytes
            entry = await self._read_entry(segment, from_offset, with_value=True)
            entries, used = [entry], self._entry_bytes(entry)
        return entries, from_offset + used

    @staticmethod
    def _entry_bytes(entry: TableEntry) -> int:
        return HEADER_BYTES + len(entry.key) + len(entry.value or b"")

    async def _read_entry(self, segment: str, offset: int, *, with_value: bool) -> TableEntry:
        header = await self._container.read_range(segment, offset, HEADER_BYTES)
        is_put, key_length, value_length, crc = _parse_header(header, offset)
        body = await self._container.read_range(
            segment, offset + HEADER_BYTES, key_length + value_length
        )
        if zlib.crc32(body) != crc:
            raise DataCorruptionError(f"table entry at {offset}: checksum mismatch", offset=offset)
        value = body[key_length:] if is_put else None
        return TableEntry(body[:key_length], value if with_value else None, offset)


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
