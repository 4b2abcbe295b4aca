"""The commands a client sends to the segment store (WIRE.md 3.3), plus HELLO and KEEP_ALIVE,
which travel both ways.

Field order is wire order. ``delegation_token`` is ``""`` with auth off (WIRE.md 3.2); it is
left out of ``repr`` (Java leaves it out of its logs too), as are append and read data.
Each class names the replies a server gives it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pravega_ray.wire.primitives import (
    I32,
    I64,
    U128,
    Bool,
    Bytes,
    Entries,
    KeyList,
    OptionalBool,
    OptionalI32,
    OptionalI64,
    Str,
)
from pravega_ray.wire.wire_command import Reply, Request, register

__all__ = [
    "OLDEST_COMPATIBLE_VERSION",
    "WIRE_VERSION",
    "AppendBlockEnd",
    "ConditionalBlockEnd",
    "CreateTableSegment",
    "CreateTransientSegment",
    "DeleteTableSegment",
    "GetSegmentAttribute",
    "GetStreamSegmentInfo",
    "Hello",
    "KeepAlive",
    "MergeSegments",
    "ReadSegment",
    "ReadTable",
    "ReadTableEntries",
    "ReadTableEntriesDelta",
    "ReadTableKeys",
    "RemoveTableKeys",
    "SealSegment",
    "SetupAppend",
    "TruncateSegment",
    "UpdateSegmentAttribute",
    "UpdateTableEntries",
]

WIRE_VERSION = 15
"""The protocol version the 0.3.x Rust client speaks (Java servers speak 17)."""

OLDEST_COMPATIBLE_VERSION = 5
"""The oldest version either side still accepts."""


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class Hello(Request, Reply):
    """The first frame each way on a connection. A server answers the client's HELLO with
    exactly one HELLO; the client accepts it if ``low_version <= 15 <= high_version``."""

    TYPE = -127
    high_version: I32
    low_version: I32


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class KeepAlive(Request, Reply):
    """No fields. Java clients send it on idle connections; a server echoes it back."""

    TYPE = 100


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class SetupAppend(Request):
    """Open an append connection for one writer on one segment -> APPEND_SETUP, or
    NO_SUCH_SEGMENT / WRONG_HOST."""

    TYPE = 1
    request_id: I64
    writer_id: U128
    segment: Str
    delegation_token: Str = field(default="", repr=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class AppendBlockEnd(Request):
    """A block of whole events (3.4 envelopes) from a set-up writer -> DATA_APPENDED, or
    SEGMENT_IS_SEALED / NO_SUCH_SEGMENT. ``len(data)`` should be ``size_of_whole_events``."""

    TYPE = 4
    writer_id: U128
    size_of_whole_events: I32
    data: Bytes = field(repr=False)
    num_event: I32
    last_event_number: I64
    request_id: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class ConditionalBlockEnd(Request):
    """Raw bytes appended only if the segment's length is ``expected_offset`` ->
    DATA_APPENDED or CONDITIONAL_CHECK_FAILED (or SEGMENT_IS_SEALED / NO_SUCH_SEGMENT)."""

    TYPE = 89
    writer_id: U128
    event_number: I64
    expected_offset: I64
    data: Bytes = field(repr=False)
    request_id: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class ReadSegment(Request):
    """Read from ``offset`` (long-polling at the tail) -> SEGMENT_READ, or
    SEGMENT_IS_TRUNCATED / NO_SUCH_SEGMENT / SEGMENT_IS_SEALED / ERROR_MESSAGE."""

    TYPE = 9
    segment: Str
    offset: I64
    suggested_length: I32
    delegation_token: Str = field(default="", repr=False)
    request_id: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class GetStreamSegmentInfo(Request):
    """-> STREAM_SEGMENT_INFO or NO_SUCH_SEGMENT."""

    TYPE = 11
    request_id: I64
    segment_name: Str
    delegation_token: Str = field(default="", repr=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class SealSegment(Request):
    """-> SEGMENT_SEALED or NO_SUCH_SEGMENT."""

    TYPE = 28
    request_id: I64
    segment: Str
    delegation_token: Str = field(default="", repr=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class GetSegmentAttribute(Request):
    """-> SEGMENT_ATTRIBUTE (value ``i64`` min when absent) or NO_SUCH_SEGMENT."""

    TYPE = 34
    request_id: I64
    segment_name: Str
    attribute_id: U128
    delegation_token: Str = field(default="", repr=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateSegmentAttribute(Request):
    """Set an attribute if it holds ``expected_value`` -> SEGMENT_ATTRIBUTE_UPDATED."""

    TYPE = 36
    request_id: I64
    segment_name: Str
    attribute_id: U128
    new_value: I64
    expected_value: I64
    delegation_token: Str = field(default="", repr=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class TruncateSegment(Request):
    """-> SEGMENT_TRUNCATED or NO_SUCH_SEGMENT."""

    TYPE = 38
    request_id: I64
    segment: Str
    truncation_offset: I64
    delegation_token: Str = field(default="", repr=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTransientSegment(Request):
    """A transient segment beside ``segment`` for one large event (WIRE.md 3.11) ->
    SEGMENT_CREATED carrying the name the server chose."""

    TYPE = 40
    request_id: I64
    writer_id: U128
    segment: Str
    delegation_token: Str = field(default="", repr=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class MergeSegments(Request):
    """Append all of ``source`` to ``target`` atomically, then delete it -> SEGMENTS_MERGED.
    (Java v17 may add attribute updates after the token; they are ignored.)"""

    TYPE = 58
    request_id: I64
    target: Str
    source: Str
    delegation_token: Str = field(default="", repr=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTableSegment(Request):
    """-> SEGMENT_CREATED or SEGMENT_ALREADY_EXISTS.

    The 0.3.x client sends only the first three fields. Java v17 appends the other three; each
    is read if its bytes are there (else None), as Java reads them, and written if set.
    """

    TYPE = 70
    request_id: I64
    segment: Str
    delegation_token: Str = field(default="", repr=False)
    sorted_deprecated: OptionalBool = None
    key_length: OptionalI32 = None
    rollover_size_bytes: OptionalI64 = None


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTableSegment(Request):
    """-> SEGMENT_DELETED, or NO_SUCH_SEGMENT (both mean gone), or TABLE_SEGMENT_NOT_EMPTY."""

    TYPE = 71
    request_id: I64
    segment: Str
    must_be_empty: Bool
    delegation_token: Str = field(default="", repr=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateTableEntries(Request):
    """Put entries atomically, each conditional on its key's version (WIRE.md 3.7) ->
    TABLE_ENTRIES_UPDATED, or TABLE_KEY_BAD_VERSION / NO_SUCH_SEGMENT.
    ``table_segment_offset`` is -1 (no check) from the 0.3.x client."""

    TYPE = 74
    request_id: I64
    segment: Str
    delegation_token: Str = field(default="", repr=False)
    entries: Entries
    table_segment_offset: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveTableKeys(Request):
    """Remove keys, each conditional on its version -> TABLE_KEYS_REMOVED, or
    TABLE_KEY_BAD_VERSION / TABLE_KEY_DOES_NOT_EXIST."""

    TYPE = 76
    request_id: I64
    segment: Str
    delegation_token: Str = field(default="", repr=False)
    keys: KeyList
    table_segment_offset: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class ReadTable(Request):
    """Look keys up -> TABLE_READ (one entry per key, in order)."""

    TYPE = 78
    request_id: I64
    segment: Str
    delegation_token: Str = field(default="", repr=False)
    keys: KeyList


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class ReadTableKeys(Request):
    """Iterate keys from an opaque ``continuation_token`` (empty: the start) -> TABLE_KEYS_READ."""

    TYPE = 83
    request_id: I64
    segment: Str
    delegation_token: Str = field(default="", repr=False)
    suggested_key_count: I32
    continuation_token: Bytes


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class ReadTableEntries(Request):
    """Iterate entries from an opaque ``continuation_token`` (empty: the start) ->
    TABLE_ENTRIES_READ."""

    TYPE = 85
    request_id: I64
    segment: Str
    delegation_token: Str = field(default="", repr=False)
    suggested_entry_count: I32
    continuation_token: Bytes


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class ReadTableEntriesDelta(Request):
    """Entries written at ``from_position`` or later -> TABLE_ENTRIES_DELTA_READ, or
    NO_SUCH_SEGMENT when the table is gone."""

    TYPE = 88
    request_id: I64
    segment: Str
    delegation_token: Str = field(default="", repr=False)
    from_position: I64
    suggested_entry_count: I32
