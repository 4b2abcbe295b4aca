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
from dataclasses import dataclass

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


def _bad_frame(offset: int, frame_type: int, length: int) -> DataCorruptionError:
    """The error for a frame header that is not a plain event within the size limit."""
    return DataCorruptionError(
        f"bad event frame at segment offset {offset}: type={frame_type} length={length}"
    )


def parse_events(
    data: bytes | memoryview, base_offset: int = 0
) -> tuple[list[tuple[int, bytes]], int]:
    """Parse complete frames from ``data``.

    Returns ``(events, consumed)``: ``events`` is a list of
    ``(segment_offset_of_frame, payload)`` with offsets ``base_offset + position``;
    ``consumed`` is how many bytes of ``data`` the complete frames used (the rest
    is a partial frame to be completed by the next read).

    Raises :class:`DataCorruptionError` on an unknown frame type or a length over
    ``LARGE_EVENT_BYTES_MAX`` (a large event's frame is like any other), which
    means the reader is not at an event boundary.
    """
    # Each payload is a slice of bytes: one copy, where a memoryview's slice made into bytes
    # cost a third more per event (other buffers are copied whole once first).
    buffer = data if type(data) is bytes else bytes(data)
    total = len(buffer)
    position = 0
    events: list[tuple[int, bytes]] = []
    append = events.append
    unpack = _HEADER.unpack_from
    while total - position >= EVENT_HEADER_BYTES:
        frame_type, length = unpack(buffer, position)
        if frame_type != EVENT_TYPE_PLAIN or length > LARGE_EVENT_BYTES_MAX:
            raise _bad_frame(base_offset + position, frame_type, length)
        start = position + EVENT_HEADER_BYTES
        end = start + length
        if end > total:
            break
        append((base_offset + position, buffer[start:end]))
        position = end
    return events, position


class FrameAssembler:
    """Frames of one segment from consecutive reads of any size, one large event at a time.

    :meth:`feed` takes each read's bytes in order and returns the complete frames. A
    frame cut by a read's end is kept: a small one as its bytes (joined with the next
    read), a large one (payload over ``MAX_EVENT_SIZE_BYTES``) in a buffer of
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


_RUN_FRAMES_MIN = 4
"""Equal frame headers in a row after which :func:`scan_frames` looks for a run of them."""
_RUN_WINDOW_FRAMES = 16
"""Frames a run check looks at first; each check that matches all doubles the next one."""


def scan_frames(
    data: bytes | bytearray | memoryview, base_offset: int = 0, start: int = 0
) -> tuple[list[int], int]:
    """The positions in ``data`` of the headers of the complete frames from ``data[start]``
    on, and the position after the last of them (``start`` if none).

    :func:`parse_events` without a Python object per payload: only the headers are read,
    so a caller can cut the payloads out in one vectorized pass (``FrameSpans``). Raises
    DataCorruptionError exactly where and as :func:`parse_events` does (``base_offset``,
    the segment offset of ``data[0]``, only names the segment offset in that error).

    Headers are unpacked one by one (~0.3 us each), except in runs of equal-sized events
    (fixed-size records are common): after ``_RUN_FRAMES_MIN`` equal headers in a row,
    :func:`_equal_frames` checks the next headers in bulk with C-level byte operations.
    """
    view = memoryview(data)
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    total = len(view)
    position = start
    starts: list[int] = []
    append = starts.append
    unpack = _HEADER.unpack_from
    previous, same = -1, 0  # the last frame's length, how many in a row had it
    while total - position >= EVENT_HEADER_BYTES:
        frame_type, length = unpack(view, position)
        if frame_type != EVENT_TYPE_PLAIN or length > LARGE_EVENT_BYTES_MAX:
            raise _bad_frame(base_offset + position, frame_type, length)
        end = position + EVENT_HEADER_BYTES + length
        if end > total:
            break
        append(position)
        position = end
        if length != previous:
            previous, same = length, 1
        else:
            same += 1
            if same >= _RUN_FRAMES_MIN:
                source = data if isinstance(data, bytes) else view
                position = _equal_frames(source, position, length, starts)
                same = 0
    return starts, position


def _equal_frames(source: bytes | memoryview, position: int, length: int, starts: list[int]) -> int:
    """Append to ``starts`` the complete frames from ``position`` on whose header is that of
    a plain event of ``length`` bytes; the position after them (at a different header, a
    cut frame or the end). Each header byte is compared for a window of frames at once: a
    strided copy of that byte of every frame (~1.5 ns a byte from ``bytes``, ~6 from a
    memoryview), then ``lstrip`` of the expected value.
    """
    stride = EVENT_HEADER_BYTES + length
    header = _PLAIN_HEADER_PREFIX + length.to_bytes(4, "big")
    window = _RUN_WINDOW_FRAMES
    while True:
        count = min(window, (len(source) - position) // stride)
        for index in range(EVENT_HEADER_BYTES):
            if not count:
                break
            column = bytes(source[position + index : position + count * stride : stride])
            count -= len(column.lstrip(header[index : index + 1]))
        starts.extend(range(position, position + count * stride, stride))
        position += count * stride
        if count < window:
            return position
        window *= 2


@dataclass(frozen=True, slots=True)
class FrameSpans:
    """Complete frames lying back to back in one buffer: frame ``i`` starts at
    ``data[starts[i]]`` (its header), ends where frame ``i + 1`` starts, the last at ``end``;
    its segment offset is ``base_offset + starts[i]``. Holds ``data``, does not copy it.
    """

    data: bytes | bytearray | memoryview
    base_offset: int
    starts: list[int]
    end: int

    @property
    def payload_bytes(self) -> int:
        """Payload bytes of the frames (without their headers)."""
        if not self.starts:
            return 0
        return self.end - self.starts[0] - EVENT_HEADER_BYTES * len(self.starts)

    def events(self) -> list[tuple[int, bytes]]:
        """``(segment offset, payload)`` of each frame, as :func:`parse_events` gives them."""
        view = memoryview(self.data)
        bounds = [*self.starts[1:], self.end]
        return [
            (self.base_offset + start, bytes(view[start + EVENT_HEADER_BYTES : stop]))
            for start, stop in zip(self.starts, bounds, strict=True)
        ]


class FrameScanner:
    """:class:`FrameAssembler` for bulk readers: :meth:`feed` returns the complete frames as
    :class:`FrameSpans` (positions in the read's bytes) instead of a ``bytes`` per payload.

    Same contract otherwise: a frame cut by a read's end is kept (a small one joined with
    the next read, a large one assembled in a buffer of its final size, header included,
    which becomes its own one-frame FrameSpans); :attr:`buffered_bytes` and
    :attr:`missing_bytes` mean the same; DataCorruptionError as :func:`parse_events`.
    """

    __slots__ = ("_large", "_large_filled", "_large_offset", "_partial", "_partial_offset")

    def __init__(self) -> None:
        self._partial: bytes = b""
        self._partial_offset = 0
        self._large: bytearray | None = None  # header + payload of a large event
        self._large_filled = 0  # bytes of _large received, header included
        self._large_offset = 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes of an incomplete frame held (0 at an event boundary)."""
        if self._large is not None:
            return self._large_filled
        return len(self._partial)

    @property
    def missing_bytes(self) -> int:
        """Payload bytes of the large event being assembled still to come (0 if none)."""
        return 0 if self._large is None else len(self._large) - self._large_filled

    def feed(self, data: bytes | bytearray | memoryview, offset: int) -> list[FrameSpans]:
        """The complete frames (in segment order) after adding ``data``, read at ``offset``.

        ``data`` is not copied but for the bytes that complete a held frame: the spans of
        its other frames refer to it (so bytes read by the caller should stay unchanged).
        """
        spans: list[FrameSpans] = []
        self._feed(data, offset, 0, spans)
        return spans

    def _feed(
        self,
        data: bytes | bytearray | memoryview,
        offset: int,
        position: int,
        spans: list[FrameSpans],
    ) -> None:
        """Add ``data[position:]`` (``data[0]`` is at segment ``offset``) to ``spans``."""
        size = len(data)
        if self._large is not None:
            take = min(size - position, len(self._large) - self._large_filled)
            end = self._large_filled + take
            self._large[self._large_filled : end] = memoryview(data)[position : position + take]
            self._large_filled = end
            if end < len(self._large):
                return
            spans.append(FrameSpans(self._large, self._large_offset, [0], end))
            self._large = None
            self._large_filled = 0
            position += take
        if self._partial and position < size:
            position = self._complete_partial(data, offset, position, spans)
            if self._partial or self._large is not None:
                return
        if position >= size:
            return
        starts, consumed = scan_frames(data, offset, position)
        if starts:
            spans.append(FrameSpans(data, offset, starts, consumed))
        if size - consumed >= EVENT_HEADER_BYTES:
            length = _HEADER.unpack_from(data, consumed)[1]
            if length > MAX_EVENT_SIZE_BYTES:  # a large event: assemble it in place
                self._large = bytearray(EVENT_HEADER_BYTES + length)
                self._large[:EVENT_HEADER_BYTES] = memoryview(data)[
                    consumed : consumed + EVENT_HEADER_BYTES
                ]
                self._large_offset = offset + consumed
                self._large_filled = EVENT_HEADER_BYTES
                self._feed(data, offset, consumed + EVENT_HEADER_BYTES, spans)
                return
        if consumed < size:
            self._partial = bytes(memoryview(data)[consumed:])
            self._partial_offset = offset + consumed

    def _complete_partial(
        self,
        data: bytes | bytearray | memoryview,
        offset: int,
        position: int,
        spans: list[FrameSpans],
    ) -> int:
        """Add to the held cut frame the bytes of ``data[position:]`` it lacks (only those:
        the rest of the read is not copied); the position after them. The frame goes to
        ``spans`` once whole; a large one moves to the large-event buffer."""
        partial, view = self._partial, memoryview(data)
        if len(partial) < EVENT_HEADER_BYTES:
            take = min(EVENT_HEADER_BYTES - len(partial), len(data) - position)
            partial += bytes(view[position : position + take])
            position += take
            if len(partial) < EVENT_HEADER_BYTES:
                self._partial = partial
                return position
        scan_frames(partial[:EVENT_HEADER_BYTES], self._partial_offset)  # a bad header raises
        frame_bytes = EVENT_HEADER_BYTES + _HEADER.unpack_from(partial)[1]
        if frame_bytes > EVENT_HEADER_BYTES + MAX_EVENT_SIZE_BYTES:
            self._large = bytearray(frame_bytes)
            self._large[: len(partial)] = partial
            self._large_filled = len(partial)
            self._large_offset = self._partial_offset
            self._partial = b""
            self._feed(data, offset, position, spans)
            return len(data)
        take = min(frame_bytes - len(partial), len(data) - position)
        partial += bytes(view[position : position + take])
        position += take
        if len(partial) < frame_bytes:
            self._partial = partial
            return position
        spans.append(FrameSpans(partial, self._partial_offset, [0], frame_bytes))
        self._partial = b""
        return position
