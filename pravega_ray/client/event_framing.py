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

from pravega_ray.constants import EVENT_HEADER_BYTES, EVENT_TYPE_PLAIN, MAX_EVENT_SIZE_BYTES
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
    the event size limit, which means the reader is not at an event boundary.
    """
    view = memoryview(data)
    total = len(view)
    position = 0
    events: list[tuple[int, bytes]] = []
    unpack = _HEADER.unpack_from
    while total - position >= EVENT_HEADER_BYTES:
        frame_type, length = unpack(view, position)
        if frame_type != EVENT_TYPE_PLAIN or length > MAX_EVENT_SIZE_BYTES:
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
