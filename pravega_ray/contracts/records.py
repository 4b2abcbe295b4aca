"""What the controller returns about streams: plain frozen dataclasses."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import Enum

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
class StreamInfo:
    scope: str
    stream: str
    state: StreamState
    configuration: StreamConfiguration
    epoch: int
    segments: tuple[SegmentRange, ...]
    creation_time_ms: int

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
    beyond ``max_deadline_ms``.
    """

    scope: str
    stream: str
    txn_id: uuid.UUID
    epoch: int
    segments: tuple[SegmentRange, ...]
    status: TxnStatus
    lease_deadline_ms: int
    max_deadline_ms: int


class KeyValueTableState(str, Enum):
    CREATING = "CREATING"
    ACTIVE = "ACTIVE"
    DELETING = "DELETING"


@dataclass(frozen=True, slots=True)
class KeyValueTableInfo:
    """A key-value table: its partitions are table segments, one per partition."""

    scope: str
    name: str
    state: KeyValueTableState
    partitions: int
    segments: tuple[str, ...]
    creation_time_ms: int


def check_request_id(request_id: object) -> None:
    """A create's ``request_id``: None or a str of 1 to 64 characters, else InvalidArgumentError."""
    if request_id is not None and not (isinstance(request_id, str) and 0 < len(request_id) <= 64):
        raise InvalidArgumentError("request_id must be None or a str of 1 to 64 characters")
