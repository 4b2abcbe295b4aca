"""What the controller returns about streams: plain frozen dataclasses."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import Enum

from pravega_ray.constants import TABLE_KEY_BYTES_MAX
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.stream_configuration import StreamConfiguration


class StreamState(str, Enum):
    CREATING = "CREATING"
    ACTIVE = "ACTIVE"
    UPDATING = "UPDATING"
    SCALING = "SCALING"
    TRUNCATING = "TRUNCATING"
    SEALING = "SEALING"
    SEALED = "SEALED"


# Pravega's stream state transition table (docs/design.md, "The controller").
STATE_TRANSITIONS: dict[StreamState, frozenset[StreamState]] = {
    StreamState.CREATING: frozenset({StreamState.ACTIVE}),
    StreamState.ACTIVE: frozenset(
        {
            StreamState.UPDATING,
            StreamState.SCALING,
            StreamState.TRUNCATING,
            StreamState.SEALING,
            StreamState.SEALED,
        }
    ),
    StreamState.UPDATING: frozenset({StreamState.ACTIVE}),
    StreamState.SCALING: frozenset({StreamState.ACTIVE}),
    StreamState.TRUNCATING: frozenset({StreamState.ACTIVE}),
    StreamState.SEALING: frozenset({StreamState.SEALED}),
    StreamState.SEALED: frozenset(),
}


class KeyHash(str, Enum):
    """How a stream routes a routing key to a segment: the hash that maps the key to a point of
    the key space [0, 1), and which segment owns a point on a boundary between two.

    A stream's rule is recorded in its record when it is created and never changes: neither an
    update of its configuration, a scale, a seal nor a restart of the controller touches it,
    so a key keeps its segment (and its events their order) for the stream's whole life.
    Streams created from now on get ``PRAVEGA``; a record without a rule (a stream created
    before streams recorded one) reads as ``LEGACY``. Users do not choose it.
    """

    PRAVEGA = "pravega"
    """Pravega's own clients' rule (docs/wire.md): ``wire.routing.pravega_key_hash`` (murmur3
    x64-128 of the key's UTF-16LE code units, seed ``"EventRouter".hashCode()``), and a point
    goes to the segment with the smallest ``key_high`` >= it: a segment owns
    ``(key_low, key_high]``, and 0.0 goes to the first segment."""
    LEGACY = "legacy"
    """pravega-ray's rule before streams recorded one: ``naming.routing_key_hash`` (blake2b of
    the key's UTF-8 bytes), and a segment owns ``[key_low, key_high)``."""


@dataclass(frozen=True, slots=True)
class SegmentRange:
    """A segment of a stream and the part of the routing-key space [0, 1) it owns."""

    scope: str
    stream: str
    segment_id: int
    name: str
    key_low: float
    key_high: float


@dataclass(frozen=True, slots=True)
class EpochInfo:
    """One epoch of a stream's history: when its scale completed (epoch 0: when the stream
    was created; ms since 1970, the controller's wall clock) and its segments, in key order."""

    epoch: int
    created_ms: int
    segments: tuple[SegmentRange, ...]


@dataclass(frozen=True, slots=True)
class StreamInfo:
    scope: str
    stream: str
    state: StreamState
    configuration: StreamConfiguration
    epoch: int
    segments: tuple[SegmentRange, ...]
    creation_time_ms: int
    key_hash: KeyHash
    """How writers route routing keys to ``segments`` (see :class:`KeyHash`)."""

    @property
    def sealed(self) -> bool:
        return self.state is StreamState.SEALED


class TxnStatus(str, Enum):
    """Where a transaction is (docs/design.md, "The controller", Transactions)."""

    OPEN = "open"
    COMMITTING = "committing"
    COMMITTED = "committed"
    ABORTING = "aborting"
    ABORTED = "aborted"

    @property
    def completed(self) -> bool:
        return self in (TxnStatus.COMMITTED, TxnStatus.ABORTED)


@dataclass(frozen=True, slots=True)
class TxnInfo:
    """A transaction as the controller created it.

    ``segments`` are the active segments of ``epoch`` (the parents); the transaction's
    own segment on each is ``naming.transaction_segment_name(parent.name, txn_id.bytes)``.
    Times are wall-clock milliseconds; ``lease_deadline_ms`` moves with each ping, never
    beyond ``max_deadline_ms``. ``key_hash`` is the stream's routing rule: a transaction's
    events go to the transaction segment of the parent their routing key maps to under it,
    as they would on the stream itself.
    """

    scope: str
    stream: str
    txn_id: uuid.UUID
    epoch: int
    segments: tuple[SegmentRange, ...]
    status: TxnStatus
    lease_deadline_ms: int
    max_deadline_ms: int
    key_hash: KeyHash


class KeyValueTableState(str, Enum):
    CREATING = "CREATING"
    ACTIVE = "ACTIVE"
    DELETING = "DELETING"


@dataclass(frozen=True, slots=True)
class KeyValueTableInfo:
    """A key-value table: its partitions are table segments, one per partition.

    ``primary_key_length``/``secondary_key_length``: the table's key families (Pravega's
    ``KeyValueTableConfiguration``): every key is exactly that many bytes once serialized,
    its first ``primary_key_length`` bytes the primary key, which alone picks the
    partition. None for a table without key families (any key of 1 to 8 KiB).
    """

    scope: str
    name: str
    state: KeyValueTableState
    partitions: int
    segments: tuple[str, ...]
    creation_time_ms: int
    primary_key_length: int | None = None
    secondary_key_length: int | None = None

    @property
    def key_families(self) -> bool:
        """Whether keys are primary + secondary keys of fixed lengths."""
        return self.primary_key_length is not None


def check_request_id(request_id: object) -> None:
    """A create's ``request_id``: None or a str of 1 to 64 characters, else InvalidArgumentError."""
    if request_id is not None and not (isinstance(request_id, str) and 0 < len(request_id) <= 64):
        raise InvalidArgumentError("request_id must be None or a str of 1 to 64 characters")


def check_key_lengths(
    primary_key_length: object, secondary_key_length: object
) -> tuple[int | None, int | None]:
    """A key-value table's key families: ``(None, None)`` (none) or ``(primary, secondary)``
    with ``primary`` an int >= 1, ``secondary`` an int >= 0 (None: 0) and their sum at most
    ``TABLE_KEY_BYTES_MAX`` (8 KiB). Anything else (bools, floats, a secondary length
    without a primary one) raises InvalidArgumentError."""
    if primary_key_length is None:
        if secondary_key_length is not None:
            raise InvalidArgumentError("secondary_key_length needs a primary_key_length")
        return None, None
    secondary = 0 if secondary_key_length is None else secondary_key_length
    for name, value, least in (
        ("primary_key_length", primary_key_length, 1),
        ("secondary_key_length", secondary, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InvalidArgumentError(f"{name} must be an int >= {least}, got {value!r}")
    assert isinstance(primary_key_length, int) and isinstance(secondary, int)
    if primary_key_length + secondary > TABLE_KEY_BYTES_MAX:
        raise InvalidArgumentError(
            f"primary_key_length + secondary_key_length must be at most {TABLE_KEY_BYTES_MAX}"
        )
    return primary_key_length, secondary
