"""Segment commands of the wire gateway (WIRE.md 3.5, 3.6, 3.10, 3.11), on a container.

Each function takes the service and one decoded request and returns the reply, or raises
one of pravega-ray's typed errors, which the gateway maps to Pravega's error replies
(``gateway.error_reply``). The append handlers answer sealed and missing segments
themselves, because their requests do not name the segment: the writer set it up.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pravega_ray.contracts.attributes import NULL_VALUE, AttributeUpdate, AttributeUpdateType
from pravega_ray.contracts.segment_store_service import SegmentStoreService
from pravega_ray.errors import (
    ConditionalAppendFailedError,
    ConditionalUpdateError,
    InvalidArgumentError,
    SegmentNotFoundError,
    SegmentSealedError,
)
from pravega_ray.wire.frames import count_events
from pravega_ray.wire.replies import (
    AppendSetup,
    ConditionalCheckFailed,
    DataAppended,
    NoSuchSegment,
    SegmentAttribute,
    SegmentAttributeUpdated,
    SegmentCreated,
    SegmentIsSealed,
    SegmentRead,
    SegmentSealed,
    SegmentsMerged,
    SegmentTruncated,
    StreamSegmentInfo,
)
from pravega_ray.wire.requests import (
    AppendBlockEnd,
    ConditionalBlockEnd,
    CreateTransientSegment,
    GetSegmentAttribute,
    GetStreamSegmentInfo,
    MergeSegments,
    ReadSegment,
    SealSegment,
    SetupAppend,
    TruncateSegment,
    UpdateSegmentAttribute,
)
from pravega_ray.wire.wire_command import Reply

if TYPE_CHECKING:
    from pravega_ray.wire.gateway import GatewayConfig

__all__ = [
    "WriterState",
    "Writers",
    "append_block_end",
    "conditional_block_end",
    "create_transient_segment",
    "get_segment_attribute",
    "get_stream_segment_info",
    "merge_segments",
    "read_segment",
    "seal_segment",
    "setup_append",
    "truncate_segment",
    "update_segment_attribute",
]

_NO_OFFSET = -1
_APPEND_TRIES = 3
_TRANSIENT = "#transient."


def _writer_key(writer_id: int) -> bytes:
    """A wire writer id (u128) as the container's 16-byte writer attribute key."""
    return writer_id.to_bytes(16, "big")


@dataclass(slots=True)
class WriterState:
    """A writer set up on a connection: its segment and its last event number stored."""

    segment: str
    last_event_number: int


class Writers:
    """The writers one connection has set up, at most ``writers_max``."""

    def __init__(self, writers_max: int) -> None:
        self._writers: dict[int, WriterState] = {}
        self._writers_max = writers_max

    def set_up(self, writer_id: int, segment: str, last_event_number: int) -> None:
        """Record (or move) a writer. InvalidArgumentError when the connection has too many."""
        if writer_id not in self._writers and len(self._writers) >= self._writers_max:
            raise InvalidArgumentError(f"more than {self._writers_max} writers on a connection")
        self._writers[writer_id] = WriterState(segment, last_event_number)

    def get(self, writer_id: int) -> WriterState:
        """The writer's state. InvalidArgumentError if it was not set up on this connection."""
        state = self._writers.get(writer_id)
        if state is None:
            raise InvalidArgumentError(f"writer {writer_id:032x} was not set up (SETUP_APPEND)")
        return state


async def setup_append(
    service: SegmentStoreService, writers: Writers, request: SetupAppend
) -> Reply:
    """-> APPEND_SETUP with the writer's last stored event number (NULL_VALUE if none), also
    for a sealed segment (its next append is answered SEGMENT_IS_SEALED)."""
    last = await service.setup_append(request.segment, _writer_key(request.writer_id))
    writers.set_up(request.writer_id, request.segment, last)
    return AppendSetup(
        request_id=request.request_id,
        segment=request.segment,
        writer_id=request.writer_id,
        last_event_number=last,
    )


def _gone(request_id: int, segment: str, error: Exception) -> Reply:
    if isinstance(error, SegmentSealedError):
        return SegmentIsSealed(request_id=request_id, segment=segment, offset=_NO_OFFSET)
    return NoSuchSegment(request_id=request_id, segment=segment, offset=_NO_OFFSET)


async def append_block_end(
    service: SegmentStoreService, writers: Writers, request: AppendBlockEnd
) -> Reply:
    """Append a block of whole events -> DATA_APPENDED acking ``last_event_number`` (the whole
    block). A block whose last event number is not above the writer's stored one is a
    duplicate: acked, not written. Sealed -> SEGMENT_IS_SEALED and missing ->
    NO_SUCH_SEGMENT, each naming the writer's segment. Data that is not whole event
    envelopes, or is not ``size_of_whole_events`` long, is refused (InvalidArgumentError).
    """
    state = writers.get(request.writer_id)
    if len(request.data) != request.size_of_whole_events:
        raise InvalidArgumentError(
            f"a block of {len(request.data)} bytes says it is {request.size_of_whole_events}"
        )
    event_count = count_events(request.data)
    key = _writer_key(request.writer_id)
    try:
        for _ in range(_APPEND_TRIES):
            previous = state.last_event_number
            if request.last_event_number <= previous:
                length = (await service.get_info(state.segment)).length
                return _appended(request, previous, length)
            try:
                result = await service.append(
                    state.segment,
                    key,
                    previous,
                    request.last_event_number,
                    event_count,
                    request.data,
                )
            except ConditionalAppendFailedError as error:
                # Another connection of this writer moved its number: go on from there.
                actual = getattr(error, "actual", previous)
                if actual == previous:
                    raise
                state.last_event_number = actual
                continue
            state.last_event_number = request.last_event_number
            return _appended(request, previous, result.length)
    except (SegmentSealedError, SegmentNotFoundError) as error:
        return _gone(request.request_id, state.segment, error)
    raise ConditionalAppendFailedError(f"writer {request.writer_id:032x} keeps moving")


def _appended(request: AppendBlockEnd, previous: int, length: int) -> Reply:
    return DataAppended(
        writer_id=request.writer_id,
        event_number=request.last_event_number,
        previous_event_number=previous,
        request_id=request.request_id,
        current_segment_write_offset=length,
    )


async def conditional_block_end(
    service: SegmentStoreService, writers: Writers, request: ConditionalBlockEnd
) -> Reply:
    """Append raw bytes only if the segment's length is ``expected_offset`` -> DATA_APPENDED
    (``event_number`` the request's, the new length), else CONDITIONAL_CHECK_FAILED.

    The writer's stored event number becomes ``event_number`` in the same append (as Java
    does, so a reconnecting byte writer learns what landed), except on a transient segment,
    which takes no writer attributes.
    """
    state = writers.get(request.writer_id)
    updates: tuple[AttributeUpdate, ...] = ()
    if _TRANSIENT not in state.segment and request.event_number != NULL_VALUE:
        key = _writer_key(request.writer_id)
        updates = (AttributeUpdate(key, AttributeUpdateType.REPLACE, request.event_number),)
    try:
        result = await service.append_conditional(
            state.segment, request.data, updates, expected_offset=request.expected_offset
        )
    except (SegmentSealedError, SegmentNotFoundError) as error:
        return _gone(request.request_id, state.segment, error)
    except ConditionalUpdateError:
        return ConditionalCheckFailed(
            writer_id=request.writer_id,
            event_number=request.event_number,
            request_id=request.request_id,
        )
    previous = state.last_event_number
    state.last_event_number = request.event_number
    return DataAppended(
        writer_id=request.writer_id,
        event_number=request.event_number,
        previous_event_number=previous,
        request_id=request.request_id,
        current_segment_write_offset=result.length,
    )


async def read_segment(
    service: SegmentStoreService, config: GatewayConfig, request: ReadSegment
) -> Reply:
    """-> SEGMENT_READ from the requested offset (echoed), WIRE.md 3.6.

    Below the start: SEGMENT_IS_TRUNCATED (SegmentTruncatedError). Past the end:
    ERROR_MESSAGE. Data there: up to ``min(suggested_length, read_reply_bytes_max)`` bytes
    (a non-positive suggestion asks for the cap), at once. At the end of a sealed segment:
    no data and ``end_of_segment``. At the tail of an open one: waits for data or a seal
    for ``read_wait_s`` (never replying empty before), and once data came, lingers
    ``tail_linger_s`` to take what follows it too.
    """
    segment, offset = request.segment, request.offset
    cap = config.read_reply_bytes_max
    wanted = min(request.suggested_length, cap) if request.suggested_length > 0 else cap
    info = await service.get_info(segment)
    waited = offset == info.length and not info.sealed
    loop = asyncio.get_running_loop()
    deadline = loop.time() + config.read_wait_s
    while True:
        result = await service.read(segment, offset, wanted, max(0.0, deadline - loop.time()))
        if result.data or result.end_of_segment or loop.time() >= deadline:
            break
    data, end_of_segment, length = result.data, result.end_of_segment, result.segment_length
    if waited and data and len(data) < wanted and config.tail_linger_s > 0:
        await asyncio.sleep(config.tail_linger_s)
    # Fill the reply with what is there now (a read may stop short, e.g. at a chunk's end).
    while data and not end_of_segment and len(data) < wanted:
        more = await service.read(segment, offset + len(data), wanted - len(data), 0.0)
        if not more.data:
            end_of_segment, length = more.end_of_segment, more.segment_length
            break
        data += more.data
        end_of_segment, length = more.end_of_segment, more.segment_length
    return SegmentRead(
        segment=segment,
        offset=offset,
        at_tail=offset + len(data) >= length,
        end_of_segment=end_of_segment,
        data=data,
        request_id=request.request_id,
    )


async def get_stream_segment_info(
    service: SegmentStoreService, request: GetStreamSegmentInfo
) -> Reply:
    """-> STREAM_SEGMENT_INFO (``last_modified``: the creation time, the only time the
    container keeps); a missing segment raises SegmentNotFoundError (NO_SUCH_SEGMENT)."""
    info = await service.get_info(request.segment_name)
    return StreamSegmentInfo(
        request_id=request.request_id,
        segment_name=request.segment_name,
        exists=True,
        is_sealed=info.sealed,
        is_deleted=False,
        last_modified=info.creation_time_ms,
        write_offset=info.length,
        start_offset=info.start_offset,
    )


async def truncate_segment(service: SegmentStoreService, request: TruncateSegment) -> Reply:
    """-> SEGMENT_TRUNCATED (idempotent at or below the start; past the end: ERROR_MESSAGE)."""
    await service.truncate(request.segment, request.truncation_offset)
    return SegmentTruncated(request_id=request.request_id, segment=request.segment)


async def seal_segment(service: SegmentStoreService, request: SealSegment) -> Reply:
    """-> SEGMENT_SEALED (idempotent)."""
    await service.seal(request.segment)
    return SegmentSealed(request_id=request.request_id, segment=request.segment)


async def create_transient_segment(
    service: SegmentStoreService, request: CreateTransientSegment
) -> Reply:
    """-> SEGMENT_CREATED naming the transient segment the container made for ``segment``
    (its parent); a sealed parent -> SEGMENT_IS_SEALED."""
    name = await service.create_transient_segment(request.segment)
    return SegmentCreated(request_id=request.request_id, segment=name)


async def merge_segments(service: SegmentStoreService, request: MergeSegments) -> Reply:
    """Seal ``source`` and append it to ``target`` atomically -> SEGMENTS_MERGED with the
    target's new length. A missing source -> NO_SUCH_SEGMENT naming it."""
    try:
        await service.seal(request.source)
    except SegmentNotFoundError:
        return NoSuchSegment(
            request_id=request.request_id, segment=request.source, offset=_NO_OFFSET
        )
    length = await service.merge(request.target, request.source)
    return SegmentsMerged(
        request_id=request.request_id,
        target=request.target,
        source=request.source,
        new_target_write_offset=length,
    )


async def get_segment_attribute(
    service: SegmentStoreService, request: GetSegmentAttribute
) -> Reply:
    """-> SEGMENT_ATTRIBUTE (NULL_VALUE when absent)."""
    key = _writer_key(request.attribute_id)
    values = await service.get_attributes(request.segment_name, [key])
    return SegmentAttribute(request_id=request.request_id, value=values.get(key, NULL_VALUE))


async def update_segment_attribute(
    service: SegmentStoreService, request: UpdateSegmentAttribute
) -> Reply:
    """Set an attribute if it holds ``expected_value`` (NULL_VALUE: absent) ->
    SEGMENT_ATTRIBUTE_UPDATED saying whether it did."""
    update = AttributeUpdate(
        _writer_key(request.attribute_id),
        AttributeUpdateType.REPLACE_IF_EQUALS,
        request.new_value,
        request.expected_value,
    )
    try:
        await service.update_attributes(request.segment_name, (update,))
    except ConditionalUpdateError:
        return SegmentAttributeUpdated(request_id=request.request_id, success=False)
    return SegmentAttributeUpdated(request_id=request.request_id, success=True)
