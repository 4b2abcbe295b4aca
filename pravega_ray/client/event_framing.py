"""Event framing inside a segment.

*format* Every event is stored as ``[type: u32 BE][length: u32 BE][payload]``
(Pravega's wire event type 0). A segment is a plain concatenation of frames, so
any reader that starts at an event boundary can parse forward; a read that ends
mid-frame leaves the tail for the next read.

The writer frames through :class:`EventHeaders`, a per-writer cache of headers by
payload size: sizes repeat, and on the writer's hot path a dict lookup is cheaper
than packing a header (docs/stack.md: per-event Python work is the throughput budget).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from pravega_ray.constants import (
    EVENT_HEADER_BYTES,
    EVENT_TYPE_PLAIN,
    LARGE_EVENT_BYTES_MAX,
    MAX_EVENT_SIZE_BYTES,
)
from pravega_ray.errors import DataCorruptionError, EventTooLargeError, InvalidArgumentError

_HEADER = struct.Struct(">II")
_PLAIN_HEADER_PREFIX = struct.pack(">I", EVENT_TYPE_PLAIN)
_HEADER_CACHE_PAYLOAD_BYTES_MAX = 64 * 1024
"""Headers of payloads below this size are cached: at most this many cache entries."""


class EventHeaders(dict[int, bytes]):
    """Frame headers by payload size: ``headers[size]`` is the header of a ``size``-byte payload.

    Raises EventTooLargeError for a size over ``MAX_EVENT_SIZE_BYTES``. A dict subclass
    so that a hit is a C-level lookup with no Python call; only a miss runs
    :meth:`__missing__`, which builds the header and keeps it when the size is small
    (at most ``_HEADER_CACHE_PAYLOAD_BYTES_MAX`` entries, so the cache is bounded).
    One per writer: nothing is shared between writers.
    """

    __slots__ = ()

    def __missing__(self, size: int) -> bytes:
        if size > MAX_EVENT_SIZE_BYTES:
            raise EventTooLargeError(f"event of {size} bytes exceeds {MAX_EVENT_SIZE_BYTES} bytes")
        header = _PLAIN_HEADER_PREFIX + size.to_bytes(4, "big")
        if size < _HEADER_CACHE_PAYLOAD_BYTES_MAX:
            self[size] = header
        return header


def _header(payload: object) -> bytes:
    """The frame header of ``payload``; typed errors for what a reader could not parse back."""
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"an event payload must be bytes, got {type(payload).__name__}")
    size = memoryview(payload).nbytes
    if size > MAX_EVENT_SIZE_BYTES:
        raise EventTooLargeError(f"event of {size} bytes exceeds {MAX_EVENT_SIZE_BYTES} bytes")
    return _PLAIN_HEADER_PREFIX + size.to_bytes(4, "big")


def frame_event(payload: bytes) -> bytes:
    """Frame one event payload.

    Raises EventTooLargeError for a payload over ``MAX_EVENT_SIZE_BYTES`` (readers would
    take its frame for corruption) and InvalidArgumentError for one that is not bytes-like.
    """
    return _header(payload) + bytes(payload)


def frame_events(payloads: Iterable[bytes]) -> bytes:
    """Frame many payloads into one contiguous block; raises as :func:`frame_event` does."""
    parts: list[bytes] = []
    for p in payloads:
        parts.append(_header(p))
        parts.append(bytes(p))
    return b"".join(parts)


def parse_events(
    data: bytes | memoryview, base_offset: int = 0
) -> tuple[list[tuple[int, bytes]], int]:
    """Parse complete frames from ``data``.

    Returns ``(events, consumed)``: ``events`` is a list of
    ``(segment_offset_of_frame, payload)`` with offsets ``base_offset + position``;
    ``consumed`` is how many bytes of ``data`` the complete frames used (the rest
    is a partial frame to be completed by the next read).

    Raises :class:`DataCorruptionError` on an unknown frame type or a length over
    ``LARGE_EVENT_BYTES_MAX`` (a large event's frame is like any other, seed 003), which
    means the reader is not at an event boundary.
    """
    view = memoryview(data)
    total = len(view)
    position = 0
    events: list[tuple[int, bytes]] = []
    unpack = _HEADER.unpack_from
    while total - position >= EVENT_HEADER_BYTES:
        frame_type, length = unpack(view, position)
        if frame_type != EVENT_TYPE_PLAIN or length > LARGE_EVENT_BYTES_MAX:
            raise DataCorruptionError(
                f"bad event frame at segment offset {base_offset + position}: "
                f"type={frame_type} length={length}"
            )
        end = position + EVENT_HEADER_BYTES + length
        if end > total:
            break
        events.append((base_offset + position, bytes(view[position + EVENT_HEADER_BYTES : end])))
        position = end
    return events, position


class FrameAssembler:
    """Frames of one segment from consecutive reads of any size, one large event at a time.

    :meth:`feed` takes each read's bytes in order and returns the complete frames. A
    frame cut by a read's end is kept: a small one as its bytes (joined with the next
    read), a large one (payload over ``MAX_EVENT_SIZE_BYTES``, seed 003) in a buffer of
    its final size filled by later reads, so assembling it copies each byte once rather
    than once per read. :attr:`missing_bytes` says how much of that frame is still to
    come (a reader may ask for that much at once). Raises DataCorruptionError as
    :func:`parse_events` does.
    """

    __slots__ = ("_large", "_large_filled", "_large_offset", "_partial", "_partial_offset")

    def __init__(self) -> None:
        self._partial: bytes = b""
        self._partial_offset = 0
        self._large: bytearray | None = None
        self._large_filled = 0
        self._large_offset = 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes of an incomplete frame held (0 at an event boundary)."""
        if self._large is not None:
            return EVENT_HEADER_BYTES + self._large_filled
        return len(self._partial)

    @property
    def missing_bytes(self) -> int:
        """Payload bytes of the large event being assembled still to come (0 if none)."""
        return 0 if self._large is None else len(self._large) - self._large_filled

    def reset(self) -> None:
        """Forget any incomplete frame (the reader moved elsewhere)."""
        self._partial = b""
        self._large = None
        self._large_filled = 0

    def feed(self, data: bytes | memoryview, offset: int) -> list[tuple[int, bytes]]:
        """The complete frames after adding ``data``, read at segment ``offset``."""
        events: list[tuple[int, bytes]] = []
        if self._large is not None:
            take = min(len(data), len(self._large) - self._large_filled)
            end = self._large_filled + take
            self._large[self._large_filled : end] = memoryview(data)[:take]
            self._large_filled = end
            if end < len(self._large):
                return events
            events.append((self._large_offset, bytes(self._large)))
            self._large = None
            self._large_filled = 0
            data = memoryview(data)[take:]
            offset += take
            if not data:
                return events
        if self._partial:
            data = self._partial + bytes(data)
            offset = self._partial_offset
            self._partial = b""
        frames, consumed = parse_events(data, offset)
        if events:
            frames[:0] = events
        rest = memoryview(data)[consumed:]
        if len(rest) >= EVENT_HEADER_BYTES:
            length = _HEADER.unpack_from(rest)[1]
            if length > MAX_EVENT_SIZE_BYTES:  # a large event: assemble it in place
                self._large = bytearray(length)
                self._large_offset = offset + consumed
                self._large_filled = 0
                frames += self.feed(
                    rest[EVENT_HEADER_BYTES:], offset + consumed + EVENT_HEADER_BYTES
                )
                return frames
        if rest:
            self._partial = bytes(rest)
            self._partial_offset = offset + consumed
        return frames
