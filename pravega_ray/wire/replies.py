"""The commands the segment store sends back (WIRE.md 3.3, 3.12).

Every reply but INVALID_EVENT_NUMBER carries the ``request_id`` of the request it answers, and
the client drops the connection on a mismatch. Field order is wire order. Read data is left
out of ``repr``. ``server_stack_trace`` may be ``""``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pravega_ray.wire.primitives import I32, I64, U128, Bool, Bytes, Entries, I64List, KeyList, Str
from pravega_ray.wire.wire_command import Reply, register

__all__ = [
    "AUTH_TOKEN_CHECK_FAILED",
    "AUTH_TOKEN_EXPIRED",
    "ERROR_CODE_ILLEGAL_ARGUMENT",
    "ERROR_CODE_UNSPECIFIED",
    "NULL_VALUE",
    "AppendSetup",
    "AuthTokenCheckFailed",
    "ConditionalCheckFailed",
    "DataAppended",
    "ErrorMessage",
    "InvalidEventNumber",
    "NoSuchSegment",
    "OperationUnsupported",
    "SegmentAlreadyExists",
    "SegmentAttribute",
    "SegmentAttributeUpdated",
    "SegmentCreated",
    "SegmentDeleted",
    "SegmentIsSealed",
    "SegmentIsTruncated",
    "SegmentRead",
    "SegmentSealed",
    "SegmentTruncated",
    "SegmentsMerged",
    "StreamSegmentInfo",
    "TableEntriesDeltaRead",
    "TableEntriesRead",
    "TableEntriesUpdated",
    "TableKeyBadVersion",
    "TableKeyDoesNotExist",
    "TableKeysRead",
    "TableKeysRemoved",
    "TableRead",
    "TableSegmentNotEmpty",
    "WrongHost",
]

NULL_VALUE = -(2**63)
"""``i64`` min: APPEND_SETUP's ``last_event_number`` for a writer the segment has never seen,
and SEGMENT_ATTRIBUTE's ``value`` for an absent attribute."""

ERROR_CODE_UNSPECIFIED = -1
"""ERROR_MESSAGE and AUTH_TOKEN_CHECK_FAILED ``error_code``: no detail."""
ERROR_CODE_ILLEGAL_ARGUMENT = 0
"""ERROR_MESSAGE ``error_code``: the request's arguments were not acceptable."""
AUTH_TOKEN_CHECK_FAILED = 0
"""AUTH_TOKEN_CHECK_FAILED ``error_code``: the token did not check out."""
AUTH_TOKEN_EXPIRED = 1
"""AUTH_TOKEN_CHECK_FAILED ``error_code``: the token expired."""


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class AppendSetup(Reply):
    """SETUP_APPEND succeeded; ``last_event_number`` is the writer's last stored event number,
    or ``NULL_VALUE`` if it has none."""

    TYPE = 2
    request_id: I64
    segment: Str
    writer_id: U128
    last_event_number: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class DataAppended(Reply):
    """A block is durable; the client acks every event up to ``event_number``."""

    TYPE = 7
    writer_id: U128
    event_number: I64
    previous_event_number: I64
    request_id: I64
    current_segment_write_offset: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class ConditionalCheckFailed(Reply):
    """A CONDITIONAL_BLOCK_END whose ``expected_offset`` was not the segment's length."""

    TYPE = 8
    writer_id: U128
    event_number: I64
    request_id: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentRead(Reply):
    """Data read from ``offset`` (the requested offset, echoed)."""

    TYPE = 10
    segment: Str
    offset: I64
    at_tail: Bool
    end_of_segment: Bool
    data: Bytes = field(repr=False)
    request_id: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class StreamSegmentInfo(Reply):
    """A segment's state; ``write_offset`` is its length, ``last_modified`` in ms."""

    TYPE = 12
    request_id: I64
    segment_name: Str
    exists: Bool
    is_sealed: Bool
    is_deleted: Bool
    last_modified: I64
    write_offset: I64
    start_offset: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentCreated(Reply):
    """A table or transient segment was created; ``segment`` is its name."""

    TYPE = 21
    request_id: I64
    segment: Str


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentSealed(Reply):
    TYPE = 29
    request_id: I64
    segment: Str


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentDeleted(Reply):
    TYPE = 31
    request_id: I64
    segment: Str


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentAttribute(Reply):
    """An attribute's value, or ``NULL_VALUE`` if absent."""

    TYPE = 35
    request_id: I64
    value: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentAttributeUpdated(Reply):
    """Whether the conditional attribute update held."""

    TYPE = 37
    request_id: I64
    success: Bool


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentTruncated(Reply):
    TYPE = 39
    request_id: I64
    segment: Str


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class WrongHost(Reply):
    """The segment is served elsewhere; the client asks the controller again."""

    TYPE = 50
    request_id: I64
    segment: Str
    correct_host: Str
    server_stack_trace: Str = ""


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentIsSealed(Reply):
    """No more appends. ``segment`` must be the full ``scope/stream/N.#epoch.E`` name: the
    writer maps it back to a segment to find its successors."""

    TYPE = 51
    request_id: I64
    segment: Str
    server_stack_trace: Str = ""
    offset: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentAlreadyExists(Reply):
    TYPE = 52
    request_id: I64
    segment: Str
    server_stack_trace: Str = ""


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class NoSuchSegment(Reply):
    TYPE = 53
    request_id: I64
    segment: Str
    server_stack_trace: Str = ""
    offset: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidEventNumber(Reply):
    """An append whose event number went backwards; it names the writer, not a request."""

    TYPE = 55
    writer_id: U128
    event_number: I64
    server_stack_trace: Str = ""


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentIsTruncated(Reply):
    """The read offset is below ``start_offset``, where the segment now starts."""

    TYPE = 56
    request_id: I64
    segment: Str
    start_offset: I64
    server_stack_trace: Str = ""
    offset: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class OperationUnsupported(Reply):
    TYPE = 57
    request_id: I64
    operation_name: Str
    server_stack_trace: Str = ""


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentsMerged(Reply):
    """``source`` was appended to ``target``, now ``new_target_write_offset`` long."""

    TYPE = 59
    request_id: I64
    target: Str
    source: Str
    new_target_write_offset: I64


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class AuthTokenCheckFailed(Reply):
    """``error_code``: ERROR_CODE_UNSPECIFIED, AUTH_TOKEN_CHECK_FAILED or AUTH_TOKEN_EXPIRED."""

    TYPE = 60
    request_id: I64
    server_stack_trace: Str = ""
    error_code: I32


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorMessage(Reply):
    """A failed request; ``error_code``: ERROR_CODE_UNSPECIFIED or ERROR_CODE_ILLEGAL_ARGUMENT.
    The client treats it as a non-retryable error."""

    TYPE = 61
    request_id: I64
    segment: Str
    message: Str
    error_code: I32


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class TableEntriesUpdated(Reply):
    """The new version of each entry of the update, in request order."""

    TYPE = 75
    request_id: I64
    updated_versions: I64List


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class TableKeysRemoved(Reply):
    TYPE = 77
    request_id: I64
    segment: Str


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class TableRead(Reply):
    """One entry per key asked for, in order."""

    TYPE = 79
    request_id: I64
    segment: Str
    entries: Entries


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class TableSegmentNotEmpty(Reply):
    TYPE = 80
    request_id: I64
    segment: Str
    server_stack_trace: Str = ""


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class TableKeyDoesNotExist(Reply):
    """Java's answer to a conditional update of an absent key; send TABLE_KEY_BAD_VERSION to
    0.3.x clients instead (WIRE.md 3.7)."""

    TYPE = 81
    request_id: I64
    segment: Str
    server_stack_trace: Str = ""


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class TableKeyBadVersion(Reply):
    """A condition of the update did not hold; nothing was written."""

    TYPE = 82
    request_id: I64
    segment: Str
    server_stack_trace: Str = ""


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class TableKeysRead(Reply):
    """A page of keys; ``continuation_token`` resumes after it."""

    TYPE = 84
    request_id: I64
    segment: Str
    keys: KeyList
    continuation_token: Bytes


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class TableEntriesRead(Reply):
    """A page of entries; ``continuation_token`` resumes after it."""

    TYPE = 86
    request_id: I64
    segment: Str
    entries: Entries
    continuation_token: Bytes


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class TableEntriesDeltaRead(Reply):
    """Entries from a delta read, each key's version its own position; ``last_position`` is
    where the next read starts. The client reads until a reply has no entries."""

    TYPE = 87
    request_id: I64
    segment: Str
    entries: Entries
    should_clear: Bool
    reached_end: Bool
    last_position: I64
