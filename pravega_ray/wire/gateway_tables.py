"""Table-segment commands of the wire gateway (WIRE.md 3.7), on a container's table API.

Pure adaptation: each function takes the service and one decoded request and returns the
reply, or raises one of pravega-ray's typed errors, which the gateway maps to Pravega's
error replies (``gateway.py``). What differs from pravega-ray's own table API:

* **Duplicate keys in one update batch** are normal for the Rust client, and
  ``TableSegments.update`` refuses them. :func:`collapse_updates` keeps each key once, at the
  place of its last occurrence and with its last value; the conditions of its occurrences
  are all checked against the state before the batch (as Java checks them), so two
  different conditions on one key cannot both hold and the batch fails (TABLE_KEY_BAD_VERSION)
  without reaching the container. Every occurrence is answered with the key's final version.
* **A conditional update of an absent key** is TABLE_KEY_BAD_VERSION(82), not Java's
  TABLE_KEY_DOES_NOT_EXIST(81), which 0.3.x clients do not retry properly.
* **Delta reads** skip removal records (the Rust client cannot represent them) and keep
  reading until a put or the end, because the client stops at the first empty reply.
* **Iteration tokens** (READ_TABLE_KEYS, READ_TABLE_ENTRIES) are the gateway's own: empty
  is the start, ``b"\\x00"`` the end, ``b"\\x01"`` + the container's cursor in between.
"""

from __future__ import annotations

from pravega_ray.constants import TABLE_KEY_BYTES_MAX, TABLE_VALUE_BYTES_MAX
from pravega_ray.contracts.segment_store import (
    NOT_EXISTS,
    TableEntry,
    TableUpdate,
    table_entry_end,
)
from pravega_ray.contracts.segment_store_service import SegmentStoreService
from pravega_ray.errors import BadKeyVersionError, InvalidArgumentError, NoSuchKeyError
from pravega_ray.wire.primitives import KEY_NO_VERSION, KEY_NOT_EXISTS, TableKey, TableValue
from pravega_ray.wire.replies import (
    OperationUnsupported,
    SegmentCreated,
    SegmentDeleted,
    TableEntriesDeltaRead,
    TableEntriesRead,
    TableEntriesUpdated,
    TableKeyDoesNotExist,
    TableKeysRead,
    TableKeysRemoved,
    TableRead,
    TableSegmentNotEmpty,
)
from pravega_ray.wire.requests import (
    CreateTableSegment,
    DeleteTableSegment,
    ReadTable,
    ReadTableEntries,
    ReadTableEntriesDelta,
    ReadTableKeys,
    RemoveTableKeys,
    UpdateTableEntries,
)
from pravega_ray.wire.wire_command import Reply

__all__ = [
    "ENTRY_WIRE_BYTES",
    "TABLE_ITERATE_COUNT_MAX",
    "collapse_updates",
    "create_table_segment",
    "delete_table_segment",
    "read_table",
    "read_table_entries",
    "read_table_entries_delta",
    "read_table_keys",
    "remove_table_keys",
    "update_table_entries",
]

ENTRY_WIRE_BYTES = 24
"""A table entry's bytes on the wire besides its key and value: the key's payload size,
data length and version (4 + 4 + 8), the value's payload size and data length (4 + 4)."""

TABLE_ITERATE_COUNT_MAX = 1000
"""The most keys or entries one READ_TABLE_KEYS / READ_TABLE_ENTRIES reply carries."""

_NO_TABLE_OFFSET = -1
_TOKEN_END = b"\x00"
_TOKEN_MORE = b"\x01"


def _condition(key_version: int) -> int | None:
    """pravega-ray's expected version for a wire key version (WIRE.md 3.7)."""
    if key_version == KEY_NO_VERSION:
        return None
    if key_version == KEY_NOT_EXISTS:
        return NOT_EXISTS
    if key_version < 0:
        raise InvalidArgumentError(f"a table key version of {key_version} is not allowed")
    return key_version


def collapse_updates(updates: list[TableUpdate]) -> tuple[list[TableUpdate], list[int]]:
    """``updates`` with each key once, and for each update the index of its key's update.

    A key keeps its last value, at the place of its last occurrence. Its condition is the one
    its occurrences state (unconditional ones state none). Raises BadKeyVersionError if two
    occurrences state different conditions: the key has one version before the batch, so
    one of them fails, and the batch with it.
    """
    last: dict[bytes, int] = {}
    conditions: dict[bytes, int] = {}
    for position, update in enumerate(updates):
        last[update.key] = position
        expected = update.expected_version
        if expected is None:
            continue
        if conditions.setdefault(update.key, expected) != expected:
            raise BadKeyVersionError(
                f"table key {update.key!r} is given two versions in one batch",
                key=update.key,
                expected=expected,
                actual=conditions[update.key],
            )
    order = sorted(last, key=last.__getitem__)
    index = {key: i for i, key in enumerate(order)}
    collapsed = [TableUpdate(key, updates[last[key]].value, conditions.get(key)) for key in order]
    return collapsed, [index[update.key] for update in updates]


async def _apply(
    service: SegmentStoreService, segment: str, updates: list[TableUpdate], offset: int
) -> list[int]:
    """Apply a batch that may name a key twice; the version of each update, in order."""
    if offset != _NO_TABLE_OFFSET:
        raise _Unsupported("a table update conditional on the table's length")
    collapsed, places = collapse_updates(updates)
    result = await service.table_update(segment, collapsed)
    return [result.versions[place] for place in places]


class _Unsupported(Exception):
    """A request the container's table API cannot serve; answered OPERATION_UNSUPPORTED."""


async def create_table_segment(service: SegmentStoreService, request: CreateTableSegment) -> Reply:
    """-> SEGMENT_CREATED; SegmentExistsError when it exists (SEGMENT_ALREADY_EXISTS)."""
    await service.table_create(request.segment)
    return SegmentCreated(request_id=request.request_id, segment=request.segment)


async def delete_table_segment(service: SegmentStoreService, request: DeleteTableSegment) -> Reply:
    """-> SEGMENT_DELETED, or TABLE_SEGMENT_NOT_EMPTY when ``must_be_empty`` and a key is
    there (checked, then deleted: not atomic against a concurrent update). A segment that is
    not a table segment is refused (InvalidArgumentError)."""
    # The first page also checks that it is a table segment; pages may be empty before the end.
    page, cursor = await service.table_iterate(request.segment, None, 1, with_values=False)
    while request.must_be_empty and not page and cursor is not None:
        page, cursor = await service.table_iterate(request.segment, cursor, 1, False)
    if request.must_be_empty and page:
        return TableSegmentNotEmpty(request_id=request.request_id, segment=request.segment)
    await service.delete_segment(request.segment)
    return SegmentDeleted(request_id=request.request_id, segment=request.segment)


async def update_table_entries(service: SegmentStoreService, request: UpdateTableEntries) -> Reply:
    """-> TABLE_ENTRIES_UPDATED with one version per entry, in request order; a condition that
    fails raises BadKeyVersionError or NoSuchKeyError (both TABLE_KEY_BAD_VERSION) and writes
    nothing. A ``table_segment_offset`` other than -1 is OPERATION_UNSUPPORTED."""
    updates = [
        TableUpdate(key.data, value.data, _condition(key.key_version))
        for key, value in request.entries
    ]
    try:
        versions = await _apply(service, request.segment, updates, request.table_segment_offset)
    except _Unsupported as e:
        return OperationUnsupported(request_id=request.request_id, operation_name=str(e))
    return TableEntriesUpdated(request_id=request.request_id, updated_versions=tuple(versions))


async def remove_table_keys(service: SegmentStoreService, request: RemoveTableKeys) -> Reply:
    """-> TABLE_KEYS_REMOVED; a version condition that fails is TABLE_KEY_BAD_VERSION, and an
    absent key given a version TABLE_KEY_DOES_NOT_EXIST (Java's answer to a removal)."""
    updates = [TableUpdate(key.data, None, _condition(key.key_version)) for key in request.keys]
    try:
        await _apply(service, request.segment, updates, request.table_segment_offset)
    except _Unsupported as e:
        return OperationUnsupported(request_id=request.request_id, operation_name=str(e))
    except NoSuchKeyError:
        return TableKeyDoesNotExist(request_id=request.request_id, segment=request.segment)
    return TableKeysRemoved(request_id=request.request_id, segment=request.segment)


def _wire_entry(entry: TableEntry) -> tuple[TableKey, TableValue]:
    return TableKey(data=entry.key, key_version=entry.version), TableValue(data=entry.value or b"")


async def read_table(service: SegmentStoreService, request: ReadTable) -> Reply:
    """-> TABLE_READ, one entry per key asked for, in order; an absent key comes back with
    version KEY_NOT_EXISTS and an empty value (as Java answers)."""
    keys = [key.data for key in request.keys]
    found = await service.table_get(request.segment, keys)
    entries = tuple(
        _wire_entry(entry)
        if entry is not None
        else (TableKey(data=key, key_version=KEY_NOT_EXISTS), TableValue(data=b""))
        for key, entry in zip(keys, found, strict=True)
    )
    return TableRead(request_id=request.request_id, segment=request.segment, entries=entries)


async def _iterate(
    service: SegmentStoreService,
    segment: str,
    token: bytes,
    count: int,
    with_values: bool,
    reply_bytes_max: int,
) -> tuple[list[TableEntry], bytes]:
    """A non-empty page of the table (empty only at the end) and the token after it."""
    if token == _TOKEN_END:
        return [], _TOKEN_END
    if token and not token.startswith(_TOKEN_MORE):
        raise InvalidArgumentError("bad continuation token")
    cursor: bytes | None = token[1:] if token else None
    # A page's size is bounded by its count: every entry may be as large as allowed.
    entry_max = (
        ENTRY_WIRE_BYTES + TABLE_KEY_BYTES_MAX + (TABLE_VALUE_BYTES_MAX if with_values else 0)
    )
    limit = max(1, min(count if count > 0 else TABLE_ITERATE_COUNT_MAX, TABLE_ITERATE_COUNT_MAX))
    limit = max(1, min(limit, reply_bytes_max // entry_max))
    while True:
        page, cursor = await service.table_iterate(segment, cursor, limit, with_values)
        if page or cursor is None:
            return page, _TOKEN_END if cursor is None else _TOKEN_MORE + cursor


async def read_table_keys(
    service: SegmentStoreService, request: ReadTableKeys, reply_bytes_max: int
) -> Reply:
    """-> TABLE_KEYS_READ: a page of keys (with versions) in the table's hash order."""
    page, token = await _iterate(
        service,
        request.segment,
        request.continuation_token,
        request.suggested_key_count,
        False,
        reply_bytes_max,
    )
    keys = tuple(TableKey(data=entry.key, key_version=entry.version) for entry in page)
    return TableKeysRead(
        request_id=request.request_id, segment=request.segment, keys=keys, continuation_token=token
    )


async def read_table_entries(
    service: SegmentStoreService, request: ReadTableEntries, reply_bytes_max: int
) -> Reply:
    """-> TABLE_ENTRIES_READ: a page of entries in the table's hash order."""
    page, token = await _iterate(
        service,
        request.segment,
        request.continuation_token,
        request.suggested_entry_count,
        True,
        reply_bytes_max,
    )
    return TableEntriesRead(
        request_id=request.request_id,
        segment=request.segment,
        entries=tuple(_wire_entry(entry) for entry in page),
        continuation_token=token,
    )


async def read_table_entries_delta(
    service: SegmentStoreService, request: ReadTableEntriesDelta, reply_bytes_max: int
) -> Reply:
    """-> TABLE_ENTRIES_DELTA_READ: the puts written at ``from_position`` or later, in position
    order, each with its position as its version; removal records are skipped.

    At most ``suggested_entry_count`` entries (10 when it is not positive) and about
    ``reply_bytes_max`` bytes, but at least one entry if a put follows: an empty reply means
    the end, so the read goes on past removal records until it finds a put or the end.
    ``last_position`` is where the next read starts; ``reached_end`` says it is the table's
    length. ``from_position`` must be 0 or a ``last_position`` given before
    (DataCorruptionError or InvalidArgumentError otherwise). A missing table raises
    SegmentNotFoundError (NO_SUCH_SEGMENT: the client takes it as "table gone").
    """
    segment = request.segment
    count = request.suggested_entry_count if request.suggested_entry_count > 0 else 10
    length = (await service.get_info(segment)).length
    position = request.from_position
    entries: list[tuple[TableKey, TableValue]] = []
    size = 0
    while position < length and len(entries) < count:
        budget = max(1, reply_bytes_max - size)
        chunk, _ = await service.table_read_changes(segment, position, budget)
        for entry in chunk:
            value = entry.value
            wire_bytes = ENTRY_WIRE_BYTES + len(entry.key) + len(value or b"")
            if value is not None and entries and size + wire_bytes > reply_bytes_max:
                break
            if value is not None:
                entries.append(_wire_entry(entry))
                size += wire_bytes
            position = table_entry_end(entry)
            if len(entries) >= count:
                break
        else:
            continue
        break  # the reply is full
    return TableEntriesDeltaRead(
        request_id=request.request_id,
        segment=segment,
        entries=tuple(entries),
        should_clear=False,
        reached_end=position >= length,
        last_position=position,
    )
