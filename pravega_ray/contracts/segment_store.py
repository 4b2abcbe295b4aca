"""Values a segment container takes and returns (Pravega's ``segmentstore:contracts``).

Plain frozen dataclasses and enums: they pickle across Ray. Both the segment store and its
callers (the client, the controller) depend on this module; the client never imports the
segment store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from pravega_ray.constants import TABLE_KEY_BYTES_MAX, TABLE_VALUE_BYTES_MAX
from pravega_ray.errors import InvalidArgumentError


class SegmentRole(str, Enum):
    """What a segment is for; stored with it (table and transient behaviour build on it)."""

    NORMAL = "normal"
    TABLE = "table"
    TRANSACTION = "transaction"
    TRANSIENT = "transient"
    ATTRIBUTE = "attribute"


@dataclass(frozen=True, slots=True)
class SegmentTraffic:
    """A segment's smoothed traffic rates, as the container reports them for auto-scaling."""

    segment: str
    events_per_s: float
    bytes_per_s: float


@dataclass(frozen=True, slots=True)
class AppendResult:
    """A durably added append block.

    ``offset`` is where the block starts in the segment; ``length`` is the
    segment's length right after it.
    """

    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Bytes read from a segment.

    ``data`` starts at ``offset`` and is at most the bytes asked for; it is empty
    only if the wait ran out or the read is at the end of a sealed segment.
    ``end_of_segment`` is true when the segment is sealed and this read reaches
    its end (nothing more will ever be appended).
    """

    offset: int
    data: bytes
    end_of_segment: bool
    segment_length: int


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What a container knows of one segment (durable values only)."""

    name: str
    length: int
    start_offset: int
    sealed: bool
    event_count: int
    storage_length: int
    creation_time_ms: int


NOT_EXISTS = -1
"""A table key's version when it is absent, and the condition "must be absent"."""


@dataclass(frozen=True, slots=True)
class TableUpdate:
    """One change in a table update batch: ``value=None`` removes the key.

    ``expected_version``: None (unconditional), ``NOT_EXISTS`` (must be absent),
    or the version the key must have.
    """

    key: bytes
    value: bytes | None
    expected_version: int | None = None


TABLE_ENTRY_HEADER_BYTES = 14
"""Bytes a table segment stores before each entry's key and value
(``segmentstore/table_segment.py``): a batch's size against ``TABLE_BATCH_BYTES_MAX`` counts
them."""


def table_entry_end(entry: TableEntry) -> int:
    """Where the entry after ``entry`` starts in its table segment (``entry`` as the segment
    store answered it, with its ``offset``): a copy made by compaction (its offset is not
    its version) stores its version, 8 bytes, after the header."""
    if entry.offset is None:
        raise InvalidArgumentError("a table entry built by a client has no offset")
    size = TABLE_ENTRY_HEADER_BYTES + len(entry.key) + len(entry.value or b"")
    return entry.offset + size + (8 if entry.offset != entry.version else 0)


def table_update_bytes(update: TableUpdate) -> int:
    """What ``update`` adds to its batch's size: its entry's header, key and value."""
    return TABLE_ENTRY_HEADER_BYTES + len(update.key) + len(update.value or b"")


def check_table_key(key: object) -> None:
    """InvalidArgumentError unless ``key`` is a table key: 1 to TABLE_KEY_BYTES_MAX bytes."""
    if not isinstance(key, bytes) or not 0 < len(key) <= TABLE_KEY_BYTES_MAX:
        raise InvalidArgumentError(f"table keys are 1 to {TABLE_KEY_BYTES_MAX} bytes")


def check_table_update(update: object) -> TableUpdate:
    """``update`` if it is a well-formed TableUpdate (its key, a value of bytes up to
    TABLE_VALUE_BYTES_MAX or None, an expected version that is None, NOT_EXISTS or a version
    >= 0), else InvalidArgumentError."""
    if not isinstance(update, TableUpdate):
        raise InvalidArgumentError(f"expected a TableUpdate, got {type(update).__name__}")
    key, value, expected = update.key, update.value, update.expected_version
    check_table_key(key)
    if value is not None and (not isinstance(value, bytes) or len(value) > TABLE_VALUE_BYTES_MAX):
        raise InvalidArgumentError(f"table values are bytes of at most {TABLE_VALUE_BYTES_MAX}")
    if expected is not None and (
        isinstance(expected, bool) or not isinstance(expected, int) or expected < NOT_EXISTS
    ):
        raise InvalidArgumentError(f"bad expected version {expected!r}")
    return update


@dataclass(frozen=True, slots=True)
class TableEntry:
    """A key, its value (None in :meth:`TableSegments.read_changes` for a removal), its version.

    ``offset`` is where the entry is stored in its table segment, when the segment store
    answered it (None in entries a client builds). It equals ``version`` unless compaction
    copied the entry to the segment's tail: a copy keeps its key's version. It is not part
    of the entry's equality.
    """

    key: bytes
    value: bytes | None
    version: int
    offset: int | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class TableUpdateResult:
    """Versions of a batch's updates, in order (``NOT_EXISTS`` for removals).

    ``offset`` is where the batch was appended (None if it appended nothing): a
    client passes it as ``client_last`` with its next batch.
    """

    versions: tuple[int, ...]
    offset: int | None
