"""Conversions between the controller's gRPC messages and pravega-ray's records, and the
mapping of pravega-ray's errors to gRPC status codes.

Message objects are the classes of :mod:`pravega_ray.grpc.schema`; they are built at run
time, so they are typed ``Any`` here. Every function that reads a request raises
:class:`Refusal` or a typed error of :mod:`pravega_ray.errors` for input it cannot use, never
anything else.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import grpc

from pravega_ray.contracts.records import SegmentRange, TxnStatus
from pravega_ray.errors import (
    AlreadyExistsError,
    ConditionalUpdateError,
    ConfigurationError,
    DataCorruptionError,
    FencedError,
    IllegalStateError,
    InvalidArgumentError,
    NotFoundError,
    RetriableError,
)
from pravega_ray.grpc.schema import message_class
from pravega_ray.stream_configuration import (
    RetentionPolicy,
    RetentionType,
    ScaleType,
    ScalingPolicy,
    StreamConfiguration,
    check_tags,
)

__all__ = [
    "INT32_MAX",
    "INT64_MAX",
    "Refusal",
    "config_from_message",
    "config_message",
    "grpc_status",
    "require",
    "segment_id_message",
    "segment_range_message",
    "segment_ranges_message",
    "stream_info_message",
    "tags_from_message",
    "txn_id_message",
    "txn_state",
    "txn_uuid",
]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

_SCALE_TYPES = (
    ScaleType.FIXED_NUM_SEGMENTS,  # 0
    ScaleType.BY_RATE_IN_KBYTES_PER_SEC,  # 1
    ScaleType.BY_RATE_IN_EVENTS_PER_SEC,  # 2
)
_RETENTION_TYPES = {1: RetentionType.TIME, 2: RetentionType.SIZE}  # 0 UNKNOWN: no retention

_TXN_STATES = {
    TxnStatus.OPEN: 1,
    TxnStatus.COMMITTING: 2,
    TxnStatus.COMMITTED: 3,
    TxnStatus.ABORTING: 4,
    TxnStatus.ABORTED: 5,
}


class Refusal(Exception):
    """A request refused with gRPC status ``code`` and ``message`` (e.g. a required field
    absent). Raised inside handlers; the servicer turns it into the RPC's status."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def require(message: Any, field: str) -> Any:
    """``message.<field>`` (a message field), or Refusal INVALID_ARGUMENT if it is absent."""
    if not message.HasField(field):
        raise Refusal(
            grpc.StatusCode.INVALID_ARGUMENT, f"{type(message).__name__}.{field} is required"
        )
    return getattr(message, field)


def grpc_status(error: BaseException) -> grpc.StatusCode | None:
    """The gRPC status code for a pravega-ray error, None for anything else (a bug: the
    caller answers INTERNAL and logs it).

    The Rust client treats INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED,
    OUT_OF_RANGE and UNIMPLEMENTED as final and retries every other code for about a minute
    (docs/grpc.md), so a conflict (ABORTED) or an unknown outcome (UNAVAILABLE) is retried.
    """
    if isinstance(error, Refusal):
        return error.code
    if isinstance(error, InvalidArgumentError):
        return grpc.StatusCode.INVALID_ARGUMENT
    if isinstance(error, NotFoundError):
        return grpc.StatusCode.NOT_FOUND
    if isinstance(error, AlreadyExistsError):
        return grpc.StatusCode.ALREADY_EXISTS
    if isinstance(error, (IllegalStateError, ConfigurationError)):
        return grpc.StatusCode.FAILED_PRECONDITION
    if isinstance(error, ConditionalUpdateError):
        return grpc.StatusCode.ABORTED
    if isinstance(error, (RetriableError, FencedError)):
        return grpc.StatusCode.UNAVAILABLE
    if isinstance(error, DataCorruptionError):
        return grpc.StatusCode.DATA_LOSS
    if isinstance(error, TimeoutError):
        return grpc.StatusCode.DEADLINE_EXCEEDED
    return None


# --- streams and segments -----------------------------------------------------------------------
def stream_info_message(scope: str, stream: str) -> Any:
    """A ``StreamInfo`` (accessOperation left UNSPECIFIED)."""
    return message_class("StreamInfo")(scope=scope, stream=stream)


def segment_id_message(scope: str, stream: str, segment_id: int) -> Any:
    """A ``SegmentId`` with its ``streamInfo`` set (the client reads it)."""
    message = message_class("SegmentId")(segmentId=segment_id)
    message.streamInfo.CopyFrom(stream_info_message(scope, stream))
    return message


def segment_range_message(segment: SegmentRange) -> Any:
    """A ``SegmentRange`` with ``segmentId`` and its ``streamInfo`` set."""
    message = message_class("SegmentRange")(minKey=segment.key_low, maxKey=segment.key_high)
    message.segmentId.CopyFrom(
        segment_id_message(segment.scope, segment.stream, segment.segment_id)
    )
    return message


def segment_ranges_message(segments: Iterable[SegmentRange]) -> Any:
    """``SegmentRanges`` of ``segments`` in segment-id order, with an empty delegation token."""
    message = message_class("SegmentRanges")(delegationToken="")
    for segment in sorted(segments, key=lambda s: s.segment_id):
        message.segmentRanges.append(segment_range_message(segment))
    return message


# --- configuration ------------------------------------------------------------------------------
def _scaling_from_message(policy: Any) -> ScalingPolicy:
    scale_type = policy.scaleType
    if not 0 <= scale_type < len(_SCALE_TYPES):
        raise InvalidArgumentError(f"ScalingPolicy.scaleType {scale_type} is not a known type")
    return ScalingPolicy(
        _SCALE_TYPES[scale_type], policy.targetRate, policy.scaleFactor, policy.minNumSegments
    )


def _retention_from_message(config: Any) -> RetentionPolicy | None:
    if not config.HasField("retentionPolicy"):
        return None
    policy = config.retentionPolicy
    if policy.retentionType == 0:  # UNKNOWN: the client's "no retention"
        return None
    retention_type = _RETENTION_TYPES.get(policy.retentionType)
    if retention_type is None:
        raise InvalidArgumentError(
            f"RetentionPolicy.retentionType {policy.retentionType} is not a known type"
        )
    # Pravega's "no upper limit" is Long.MAX_VALUE (what the Rust client sends); ours is 0.
    upper = 0 if policy.retentionMax in (0, INT64_MAX) else policy.retentionMax
    return RetentionPolicy(retention_type, policy.retentionParam, upper)


def config_from_message(config: Any, tags: tuple[str, ...] = ()) -> StreamConfiguration:
    """The :class:`StreamConfiguration` of a ``StreamConfig``, with ``tags`` (the message's
    own are read by :func:`tags_from_message`: an update without them keeps the stream's).

    Refusal INVALID_ARGUMENT if ``scalingPolicy`` is absent; InvalidArgumentError for an
    unknown policy type or values pravega-ray's policies refuse (tags included:
    ``stream_configuration.check_tags``).
    """
    scaling = _scaling_from_message(require(config, "scalingPolicy"))
    return StreamConfiguration(scaling, _retention_from_message(config), tags)


def tags_from_message(tags: Any) -> tuple[str, ...]:
    """The tags of a ``Tags`` message in order, duplicates dropped (Pravega keeps the first).

    InvalidArgumentError for more than TAGS_MAX tags or one that is empty or longer than
    TAG_CHARS_MAX characters (``stream_configuration.check_tags``).
    """
    return check_tags(list(tags.tag))


def config_message(scope: str, stream: str, config: StreamConfiguration) -> Any:
    """A ``StreamConfig`` with ``streamInfo``, ``scalingPolicy``, ``retentionPolicy`` and
    ``tags`` all set (the client unwraps the first two and reads absent tags as None).
    Numbers beyond int32 (pravega-ray allows int64 rates) are clamped to int32's maximum."""
    message = message_class("StreamConfig")()
    message.streamInfo.CopyFrom(stream_info_message(scope, stream))
    scaling = config.scaling
    policy = message.scalingPolicy
    policy.scaleType = _SCALE_TYPES.index(scaling.scale_type)
    policy.targetRate = min(scaling.target_rate, INT32_MAX)
    policy.scaleFactor = min(scaling.scale_factor, INT32_MAX)
    policy.minNumSegments = min(scaling.min_segments, INT32_MAX)
    retention = message.retentionPolicy
    retention.SetInParent()
    if config.retention is not None:
        retention.retentionType = 1 if config.retention.retention_type is RetentionType.TIME else 2
        retention.retentionParam = config.retention.min_limit
        retention.retentionMax = config.retention.max_limit or INT64_MAX
    message.tags.SetInParent()
    message.tags.tag.extend(config.tags)
    return message


# --- transactions -------------------------------------------------------------------------------
def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def txn_id_message(txn_id: uuid.UUID) -> Any:
    """The ``TxnId`` of a transaction: the uuid's 128 bits, high half in ``highBits``.

    The controller draws ids as Pravega's are (``new_transaction_id``: the epoch in the top
    32 bits of ``highBits``, a ``lowBits`` never negative). Keeping the id whole keeps the
    client's transaction segment names (``#transaction.<32 hex>``) equal to pravega-ray's.
    """
    value = txn_id.int
    return message_class("TxnId")(
        highBits=_signed64(value >> 64), lowBits=_signed64(value & ((1 << 64) - 1))
    )


def txn_uuid(txn_id: Any) -> uuid.UUID:
    """The uuid a ``TxnId`` message carries (inverse of :func:`txn_id_message`)."""
    mask = (1 << 64) - 1
    return uuid.UUID(int=((txn_id.highBits & mask) << 64) | (txn_id.lowBits & mask))


def txn_state(status: TxnStatus) -> int:
    """The ``TxnState.State`` value of a transaction status (never UNKNOWN)."""
    return _TXN_STATES[status]
