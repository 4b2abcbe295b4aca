"""Reading frames out of a byte stream, and the event envelope.

:class:`FrameReader` is the whole read side of a connection without the I/O: feed it the bytes
as they arrive, in any split, and take whole commands out. It holds at most what it was fed;
a caller that takes every command after each feed holds less than one frame plus one chunk.

The event envelope (WIRE.md 3.4) is the client's own framing of each event inside an
APPEND_BLOCK_END block and inside SEGMENT_READ data: ``i32 0 | i32 length | payload``. The
server stores blocks verbatim; :func:`count_events` and :func:`decode_events` check them.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from types import MappingProxyType

from pravega_ray.constants import EVENT_HEADER_BYTES, EVENT_TYPE_PLAIN
from pravega_ray.errors import InvalidArgumentError, WireProtocolError
from pravega_ray.wire.wire_command import (
    COMMANDS,
    FRAME_HEADER_BYTES,
    HEADER,
    PAYLOAD_BYTES_MAX,
    WireCommand,
)

__all__ = [
    "UNSUPPORTED_REQUESTS",
    "FrameReader",
    "count_events",
    "decode_events",
    "decode_frame",
    "decode_payload",
    "encode_event",
]

UNSUPPORTED_REQUESTS: Mapping[int, str] = MappingProxyType(
    {
        20: "CREATE_SEGMENT",
        30: "DELETE_SEGMENT",
        32: "UPDATE_SEGMENT_POLICY",
        41: "LOCATE_OFFSET",
        68: "GET_TABLE_SEGMENT_INFO",
        72: "MERGE_TABLE_SEGMENTS",
        73: "SEAL_TABLE_SEGMENT",
        90: "MERGE_SEGMENTS_BATCH",
    }
)
"""Pravega requests this codec does not decode (Java's controller sends them; the 0.3.x client
never does) whose payload starts with the request id. An error for one carries that id, so a
server can answer OPERATION_UNSUPPORTED(57) with the name here instead of closing."""

_I64 = struct.Struct(">q")


def decode_payload(
    type_code: int,
    payload: bytes | bytearray | memoryview,
    types: Mapping[int, type[WireCommand]] = COMMANDS,
) -> WireCommand:
    """The command of type ``type_code`` whose payload is ``payload``.

    Raises WireProtocolError (``fatal`` false) for a type code not in ``types`` (with
    ``request_id`` for the ones in ``UNSUPPORTED_REQUESTS``) and for a payload that does not
    decode (see :meth:`WireCommand.decode`).
    """
    command_type = types.get(type_code)
    if command_type is None:
        name = UNSUPPORTED_REQUESTS.get(type_code)
        request_id = None
        if name is not None and len(payload) >= _I64.size:
            request_id = _I64.unpack_from(payload)[0]
        raise WireProtocolError(
            f"unknown type code {type_code}" + (f" ({name}, not supported)" if name else ""),
            type_code=type_code,
            request_id=request_id,
        )
    return command_type.decode(payload)


def decode_frame(
    frame: bytes | bytearray | memoryview,
    types: Mapping[int, type[WireCommand]] = COMMANDS,
    payload_bytes_max: int = PAYLOAD_BYTES_MAX,
) -> WireCommand:
    """The one command ``frame`` holds, which must be exactly one whole frame.

    Raises WireProtocolError as :class:`FrameReader` does, and also when ``frame`` is shorter
    or longer than its header says.
    """
    reader = FrameReader(types, payload_bytes_max)
    reader.feed(frame)
    command = reader.next_command()
    if command is None or reader.buffered_bytes:
        raise WireProtocolError(
            f"expected one whole frame, got {len(frame)} bytes",
            type_code=HEADER.unpack_from(frame)[0] if len(frame) >= FRAME_HEADER_BYTES else None,
            fatal=True,
        )
    return command


class FrameReader:
    """Whole commands out of a byte stream fed in pieces.

    ``types`` are the commands accepted (``REQUESTS`` for a server, ``REPLIES`` for a client,
    ``COMMANDS`` for both); ``payload_bytes_max`` is the largest payload (at most the
    protocol's ``PAYLOAD_BYTES_MAX``).

    :meth:`next_command` raises WireProtocolError for a bad frame. With ``fatal`` false (an
    unknown type code, a payload that does not decode) the frame was consumed and the next one
    can be read; with ``fatal`` true (a negative or oversized length, so where the next frame
    starts is unknown) the reader is broken, and raises the same way on every later call.
    """

    __slots__ = ("_broken", "_buffer", "_payload_bytes_max", "_types")

    def __init__(
        self,
        types: Mapping[int, type[WireCommand]] = COMMANDS,
        payload_bytes_max: int = PAYLOAD_BYTES_MAX,
    ) -> None:
        if not 0 <= payload_bytes_max <= PAYLOAD_BYTES_MAX:
            raise InvalidArgumentError(f"payload_bytes_max must be in [0, {PAYLOAD_BYTES_MAX}]")
        self._types = types
        self._payload_bytes_max = payload_bytes_max
        self._buffer = bytearray()
        self._broken: tuple[str, int] | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes fed and not yet taken out as commands."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes received from the peer (any amount, including none)."""
        self._buffer += data

    def next_command(self) -> WireCommand | None:
        """The next whole command, or None until more bytes are fed. See the class for errors."""
        if self._broken is not None:
            message, type_code = self._broken
            raise WireProtocolError(message, type_code=type_code, fatal=True)
        buffer = self._buffer
        if len(buffer) < FRAME_HEADER_BYTES:
            return None
        type_code, size = HEADER.unpack_from(buffer)
        if not 0 <= size <= self._payload_bytes_max:
            self._broken = (
                f"frame of type {type_code} gives a payload length {size} outside "
                f"[0, {self._payload_bytes_max}]",
                type_code,
            )
            return self.next_command()
        end = FRAME_HEADER_BYTES + size
        if len(buffer) < end:
            return None
        with memoryview(buffer) as view:
            payload = bytes(view[FRAME_HEADER_BYTES:end])
        del buffer[:end]
        return decode_payload(type_code, payload, self._types)


def encode_event(payload: bytes | bytearray | memoryview) -> bytes:
    """``payload`` in an event envelope: ``i32 0 | i32 len(payload) | payload``."""
    size = memoryview(payload).nbytes
    if size > PAYLOAD_BYTES_MAX:
        raise InvalidArgumentError(f"an event of {size} bytes does not fit a frame")
    return HEADER.pack(EVENT_TYPE_PLAIN, size) + bytes(payload)


def _event_spans(data: bytes | bytearray | memoryview) -> list[tuple[int, int]]:
    """(start, end) of each event payload in ``data``; WireProtocolError unless it is whole
    envelopes of type 0."""
    spans = []
    total = memoryview(data).nbytes
    position = 0
    while position < total:
        if total - position < EVENT_HEADER_BYTES:
            raise WireProtocolError(f"an event envelope is cut short at {position}")
        type_code, size = HEADER.unpack_from(data, position)
        if type_code != EVENT_TYPE_PLAIN:
            raise WireProtocolError(f"an event envelope at {position} has type {type_code}, not 0")
        start = position + EVENT_HEADER_BYTES
        if size < 0 or size > total - start:
            raise WireProtocolError(f"the event at {position} gives a length {size} that is cut")
        spans.append((start, start + size))
        position = start + size
    return spans


def count_events(data: bytes | bytearray | memoryview) -> int:
    """How many events ``data`` (an APPEND_BLOCK_END block) holds, without copying them.

    Raises WireProtocolError unless ``data`` is whole envelopes, each of type 0.
    """
    return len(_event_spans(data))


def decode_events(data: bytes | bytearray | memoryview) -> list[bytes]:
    """The payloads of the events in ``data``, in order; errors as :func:`count_events`."""
    with memoryview(data) as view, view.cast("B") as octets:
        return [bytes(octets[start:end]) for start, end in _event_spans(octets)]
