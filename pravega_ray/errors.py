"""Every error pravega-ray raises on purpose.

Anything a caller can cause raises one of these types; internal consistency
checks use :func:`pravega_ray.invariant.invariant` instead. All errors pickle
cleanly, so they cross Ray actor boundaries unchanged (the Ray adapters in
``pravega_ray.cluster`` unwrap ``RayTaskError`` back to these types).

::

    PravegaError
    ├── InvalidArgumentError            bad input, nothing changed
    │   ├── InvalidNameError            scope/stream/segment name not allowed
    │   ├── EventTooLargeError          event over MAX_EVENT_SIZE_BYTES
    │   ├── SerializationError          a value the serializer cannot encode or decode
    │   └── WireProtocolError           a malformed or unknown frame of the segment store's
    │                                   TCP wire protocol (pravega_ray.wire)
    ├── NotFoundError
    │   ├── ScopeNotFoundError
    │   ├── StreamNotFoundError
    │   ├── SegmentNotFoundError
    │   ├── ReaderGroupNotFoundError
    │   ├── TxnNotFoundError            unknown (or long completed) transaction id
    │   ├── KeyValueTableNotFoundError
    │   ├── StateSynchronizerNotFoundError  a state synchronizer deleted under its client
    │   └── NoSuchEventError            no event where an EventPointer points (any more)
    ├── AlreadyExistsError
    │   ├── SegmentExistsError
    │   └── ReaderAlreadyExistsError    a reader id already online in the group
    ├── IllegalStateError               operation not allowed in the current state
    │   ├── StreamSealedError
    │   ├── SegmentSealedError
    │   ├── SegmentTruncatedError       read below a segment's truncation offset
    │   ├── TruncatedDataError          a reader's next events were truncated away
    │   ├── CheckpointFailedError       a reader-group checkpoint failed or timed out
    │   ├── IllegalStateTransitionError
    │   ├── ScopeNotEmptyError
    │   ├── StreamNotSealedError        delete of a stream not sealed yet
    │   ├── TxnFailedError              the transaction is no longer open / was aborted
    │   │   └── LeaseExpiredError       ping after the lease ran out or past max execution
    │   ├── ReaderNotInGroupError       the reader was declared offline (or never joined)
    │   ├── ReinitializationRequiredError  the group was reset: once, then reading goes on
    │   └── ClientClosedError           the writer or reader was closed
    ├── ConditionalUpdateError          a condition of the update did not hold
    │   ├── ConditionalAppendFailedError  writer event number mismatch
    │   ├── ConflictingUpdateError      concurrent update of a metadata record
    │   ├── ScaleConflictError          sealed segments / new ranges do not match, or a
    │   │                               scale is under way
    │   ├── BadKeyVersionError          table key exists / has another version
    │   └── NoSuchKeyError              conditional table update of an absent key
    ├── ConfigurationError              the cluster's stored config disagrees
    ├── DataCorruptionError             checksum or frame error in stored data
    ├── FencedError                     a newer owner took over a durable log
    └── RetriableError                  outcome unknown; safe to retry the protocol way
        ├── SegmentStoreUnavailableError  container actor died or restarting
        │   └── StorageUnavailableError  Tier-2 (S3) throttled, 5xx, timed out: for now
        ├── ContainerNotReadyError      container still recovering
        ├── ContainerThrottledError     appends held back too long (Tier-2 behind); none made
        └── ControllerUnavailableError  controller actor died or restarting mid-call
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AlreadyExistsError",
    "BadKeyVersionError",
    "CheckpointFailedError",
    "ClientClosedError",
    "ConditionalAppendFailedError",
    "ConditionalUpdateError",
    "ConfigurationError",
    "ConflictingUpdateError",
    "ContainerNotReadyError",
    "ContainerThrottledError",
    "ControllerUnavailableError",
    "DataCorruptionError",
    "EventTooLargeError",
    "FencedError",
    "IllegalStateError",
    "IllegalStateTransitionError",
    "InvalidArgumentError",
    "InvalidNameError",
    "KeyValueTableNotFoundError",
    "LeaseExpiredError",
    "NoSuchEventError",
    "NoSuchKeyError",
    "NotFoundError",
    "PravegaError",
    "ReaderAlreadyExistsError",
    "ReaderGroupNotFoundError",
    "ReaderNotInGroupError",
    "ReinitializationRequiredError",
    "RetriableError",
    "ScaleConflictError",
    "ScopeNotEmptyError",
    "ScopeNotFoundError",
    "SegmentExistsError",
    "SegmentNotFoundError",
    "SegmentSealedError",
    "SegmentStoreUnavailableError",
    "SegmentTruncatedError",
    "SerializationError",
    "StateSynchronizerNotFoundError",
    "StorageUnavailableError",
    "StreamNotFoundError",
    "StreamNotSealedError",
    "StreamSealedError",
    "TruncatedDataError",
    "TxnFailedError",
    "TxnNotFoundError",
    "WireProtocolError",
]


class PravegaError(Exception):
    """Base of every pravega-ray error.

    Extra keyword details are kept as attributes and survive pickling:
    ``BaseException.__reduce__`` rebuilds from ``args`` (the message) and then
    restores ``__dict__``.
    """

    def __init__(self, message: str = "", **details: Any) -> None:
        super().__init__(message)
        for key, value in details.items():
            setattr(self, key, value)

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidArgumentError(PravegaError, ValueError):
    """Bad input from the caller; nothing was changed."""


class InvalidNameError(InvalidArgumentError):
    """A scope, stream, reader group or segment name that is not allowed."""


class EventTooLargeError(InvalidArgumentError):
    """An event larger than ``constants.MAX_EVENT_SIZE_BYTES``."""


class SerializationError(InvalidArgumentError):
    """A serializer could not encode an event/key/value, or could not decode stored bytes.

    On decode the stored bytes are left where they are (nothing is consumed); the
    error carries them as ``data`` and says where they came from: ``segment`` and
    ``offset`` for an event (``EventStreamReader.skip_event`` passes over it), ``key``
    for a key-value table entry. Attributes not known are None.
    """

    data: bytes | None = None
    segment: str | None = None
    offset: int | None = None
    key: bytes | None = None


class WireProtocolError(InvalidArgumentError):
    """Bytes from a peer that are not a well-formed frame of the segment store's wire protocol.

    Raised by :mod:`pravega_ray.wire` for a frame length that is negative or over the limit,
    an unknown type code, a payload that ends early or (in a reply) has bytes left over, a
    bool that is not 0 or 1, invalid UTF-8, and event data that is not whole event envelopes.
    ``type_code`` is the frame's type when it was read; ``request_id`` is the request's id when
    the payload got that far (None otherwise), so the caller can answer it; ``fatal`` is true
    when the byte stream cannot be followed any further (a bad length): close the connection.
    When ``fatal`` is false the bad frame was consumed whole and the next frame can be read.
    """

    type_code: int | None = None
    request_id: int | None = None
    fatal: bool = False


class NotFoundError(PravegaError, LookupError):
    """The named thing does not exist."""


class ScopeNotFoundError(NotFoundError):
    pass


class StreamNotFoundError(NotFoundError):
    pass


class SegmentNotFoundError(NotFoundError):
    pass


class ReaderGroupNotFoundError(NotFoundError):
    pass


class TxnNotFoundError(NotFoundError):
    """No transaction with this id on this stream (never created, or completed long enough
    ago to have been forgotten)."""


class KeyValueTableNotFoundError(NotFoundError):
    pass


class StateSynchronizerNotFoundError(NotFoundError):
    """The state synchronizer was deleted (its segment is gone) while a client of it ran."""


class NoSuchEventError(NotFoundError):
    """No event where an event pointer points: its segment is gone (deleted, or truncated
    away whole), or no event frame of the pointer's length starts at its offset (Pravega's
    ``NoSuchEventException``)."""


class AlreadyExistsError(PravegaError):
    """The thing to create exists already."""


class SegmentExistsError(AlreadyExistsError):
    pass


class ReaderAlreadyExistsError(AlreadyExistsError):
    """A reader with this id is online in the group; declare it offline first."""


class IllegalStateError(PravegaError):
    """The operation is not allowed in the current state; nothing changed."""


class StreamSealedError(IllegalStateError):
    """The stream is sealed: no more writes are accepted."""


class SegmentSealedError(IllegalStateError):
    """The segment is sealed: no more appends are accepted."""


class SegmentTruncatedError(IllegalStateError):
    """The bytes asked for were truncated away; ``start_offset`` is where the segment now starts."""


class TruncatedDataError(IllegalStateError):
    """A reader's next events were truncated away (a reader group with
    ``raise_on_truncated_data``); raised once, the reader then goes on from the head.
    ``segment`` and ``offset`` name where it was, ``start_offset`` where data now starts."""


class CheckpointFailedError(IllegalStateError):
    """A checkpoint could not be taken or used: too many outstanding, its name in use, the
    group reset or deleted while it ran, or not every reader passed it in time."""


class IllegalStateTransitionError(IllegalStateError):
    """A state machine was asked for a transition its table forbids."""


class ScopeNotEmptyError(IllegalStateError):
    pass


class StreamNotSealedError(IllegalStateError):
    """Only a sealed stream can be deleted: seal it first."""


class TxnFailedError(IllegalStateError):
    """The transaction cannot do this any more: it is aborting or aborted (by the user or
    because its lease ran out), or committing/committed when an abort was asked."""


class LeaseExpiredError(TxnFailedError):
    """A ping came after the transaction's lease ran out, or would extend it beyond the
    transaction's maximum execution time."""


class ReaderNotInGroupError(IllegalStateError):
    """The reader is not (or no longer) a member of its group, e.g. it was declared offline."""


class ReinitializationRequiredError(IllegalStateError):
    """The reader group was reset (``ReaderGroup.reset_to``) since this reader last looked:
    what the application derived from the old positions no longer holds (Pravega's
    ``ReinitializationRequiredException``). Raised once by ``read_next_event``; the next
    call reads from the new positions."""


class ClientClosedError(IllegalStateError):
    """The writer or reader was closed."""


class ConditionalUpdateError(PravegaError):
    """A condition attached to an update did not hold; nothing changed."""


class ConditionalAppendFailedError(ConditionalUpdateError):
    """The writer's last event number on the segment is not the expected one.

    Attributes ``expected`` and ``actual`` carry the two event numbers.
    """


class ConflictingUpdateError(ConditionalUpdateError):
    """Another update of the same record won; re-read and retry."""


class ScaleConflictError(ConditionalUpdateError):
    """A scale's preconditions do not hold; nothing changed.

    The segments to seal are not all in the stream's current epoch, the new key ranges do
    not exactly cover theirs (a gap or an overlap), or another scale of the stream is under
    way.
    """


class BadKeyVersionError(ConditionalUpdateError):
    """A table key's version is not the expected one (or it exists where absence was asked).

    Attributes ``key`` (the table key, bytes), ``expected`` and ``actual`` (versions;
    ``-1`` means absent).
    """


class NoSuchKeyError(ConditionalUpdateError):
    """A conditional table update or removal named a key that is absent. Attribute ``key``."""


class ConfigurationError(PravegaError):
    """Stored cluster configuration disagrees with the one asked for."""


class DataCorruptionError(PravegaError):
    """Stored data failed a checksum or framing check."""


class FencedError(PravegaError):
    """A newer owner (higher epoch) took over this durable log; stop writing."""


class RetriableError(PravegaError):
    """The outcome is unknown; the caller's protocol makes retrying safe."""


class SegmentStoreUnavailableError(RetriableError):
    """The segment container actor died or is restarting mid-call."""


class StorageUnavailableError(SegmentStoreUnavailableError):
    """Tier-2 storage failed for now, after its client's own retries: S3 throttling
    (``SlowDown``, 429), a 5xx, a timeout or a lost connection. A read changed nothing; the
    outcome of a write is unknown. The container is up: callers retry as for any
    :class:`SegmentStoreUnavailableError`."""


class ContainerNotReadyError(RetriableError):
    """The segment container is still recovering."""


class ContainerThrottledError(RetriableError):
    """An append waited longer than allowed for Tier-2 to catch up (backpressure,
    ``segmentstore/throttle.py``) and was not made: retry it (writers do, transparently)."""


class ControllerUnavailableError(RetriableError):
    """The controller actor died or restarted during the call; its outcome is unknown."""
