"""Event pointers (Pravega's ``EventPointer`` and ``EventStreamReader.fetchEvent``).

An :class:`EventPointer` names one event where it is stored: its segment, the offset of its
frame and the frame's length (header included). Every :class:`~pravega_ray.EventRead` has
one (``ev.event_pointer``); it survives the reader, the process and a base64 round trip
(``to_base64`` / ``from_base64``), so an application can keep it (an audit trail, a
dead-letter queue, a join) and read that one event again later with
``reader.fetch_event(pointer)`` or ``batch_client.fetch_event(pointer, serializer)``.

:func:`fetch_event` checks before it reads, in this order: the segment exists
(NoSuchEventError if not: deleted, or truncated away whole), the offset is not below the
segment's start (SegmentTruncatedError: truncated since), the frame ends within the segment
(NoSuchEventError: past its end), the offset is the start of an event frame (the container's
``check_event_boundary``, NoSuchEventError otherwise) and the frame found there is exactly
the pointer's length (NoSuchEventError otherwise). The bytes themselves are checked as every
read is (DataCorruptionError for damage).
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from pravega_ray.client.event_framing import FrameAssembler
from pravega_ray.constants import EVENT_HEADER_BYTES, LARGE_EVENT_BYTES_MAX, READ_BYTES_MAX
from pravega_ray.errors import (
    InvalidArgumentError,
    InvalidNameError,
    NoSuchEventError,
    SegmentNotFoundError,
    SegmentTruncatedError,
)
from pravega_ray.naming import parse_segment_name

__all__ = ["EventPointer", "fetch_event"]

R = TypeVar("R")

_VERSION = 1
_FIXED = struct.Struct(">BQI")  # version, offset, length; then the segment name, UTF-8


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class EventPointer:
    """Where one event is stored: ``segment`` (a stream segment's qualified name), the
    ``offset`` of its frame and the frame's ``length`` (header included).

    Immutable, hashable, equal by value. Built with bad fields it raises
    InvalidArgumentError (InvalidNameError for a name that is not a stream segment's)."""

    segment: str
    offset: int
    length: int

    def __post_init__(self) -> None:
        parse_segment_name(self.segment)
        if not _is_int(self.offset) or self.offset < 0:
            raise InvalidArgumentError(f"offset must be an int >= 0, got {self.offset!r}")
        if (
            not _is_int(self.length)
            or not EVENT_HEADER_BYTES <= self.length <= EVENT_HEADER_BYTES + LARGE_EVENT_BYTES_MAX
        ):
            raise InvalidArgumentError(
                f"length must be an int from {EVENT_HEADER_BYTES} to "
                f"{EVENT_HEADER_BYTES + LARGE_EVENT_BYTES_MAX}, got {self.length!r}"
            )

    @property
    def scoped_stream(self) -> str:
        """``"scope/stream"`` of the event's stream."""
        name = parse_segment_name(self.segment)
        return f"{name.scope}/{name.stream}"

    def to_base64(self) -> str:
        """The pointer as URL-safe base64 text (:meth:`from_base64` reads it back)."""
        raw = _FIXED.pack(_VERSION, self.offset, self.length) + self.segment.encode()
        return base64.urlsafe_b64encode(raw).decode("ascii")

    @classmethod
    def from_base64(cls, text: str) -> EventPointer:
        """The pointer :meth:`to_base64` wrote; InvalidArgumentError for anything else."""
        if not isinstance(text, str):
            raise InvalidArgumentError(f"an event pointer is a str, got {type(text).__name__}")
        try:
            raw = base64.urlsafe_b64decode(text.encode("ascii"))
        except (UnicodeEncodeError, binascii.Error, ValueError):
            raise InvalidArgumentError("not an event pointer: not base64") from None
        if len(raw) <= _FIXED.size:
            raise InvalidArgumentError("not an event pointer: too short")
        version, offset, length = _FIXED.unpack_from(raw)
        if version != _VERSION:
            raise InvalidArgumentError(f"not an event pointer: unknown version {version}")
        try:
            segment = raw[_FIXED.size :].decode()
        except UnicodeDecodeError:
            raise InvalidArgumentError("not an event pointer: a segment name not UTF-8") from None
        try:
            return cls(segment, offset, length)
        except InvalidNameError as e:
            raise InvalidArgumentError(f"not an event pointer: {e.message}") from None

    def __str__(self) -> str:
        return f"EventPointer({self.segment}@{self.offset}+{self.length})"


def fetch_event(
    segments: Any,
    call: Callable[[str, Callable[[], Future[Any]]], Any],
    pointer: EventPointer,
) -> bytes:
    """The payload of the one event ``pointer`` points at, read through ``segments`` (a
    :class:`~pravega_ray.client.connection.SegmentStoreConnection`); ``call(what, start)``
    runs a call and waits for its answer (retrying what may be retried). Errors: module
    docstring."""
    if not isinstance(pointer, EventPointer):
        raise InvalidArgumentError(f"fetch_event takes an EventPointer, not {type(pointer)}")
    name, offset, end = pointer.segment, pointer.offset, pointer.offset + pointer.length
    try:
        info = call(f"get_info of {name}", lambda: segments.get_info(name))
    except SegmentNotFoundError:
        raise NoSuchEventError(f"{pointer}: segment {name} no longer exists") from None
    if offset < info.start_offset:
        raise SegmentTruncatedError(
            f"{pointer}: {name} was truncated at {info.start_offset}, past the event"
        )
    if end > info.length:
        raise NoSuchEventError(f"{pointer}: past the end of {name} ({info.length} bytes)")
    try:
        call(f"check_event_boundary of {name}", lambda: segments.check_event_boundary(name, offset))
    except InvalidArgumentError:
        raise NoSuchEventError(f"{pointer}: no event starts at {offset} of {name}") from None
    except SegmentNotFoundError:
        raise NoSuchEventError(f"{pointer}: segment {name} no longer exists") from None
    assembler = FrameAssembler()
    at = offset
    found: list[bytes] = []
    while at < end and not found:
        want = min(end - at, READ_BYTES_MAX)
        try:
            result = call(f"read of {name}", partial(segments.read, name, at, want, 0.0))
        except SegmentNotFoundError:
            raise NoSuchEventError(f"{pointer}: segment {name} no longer exists") from None
        data = result.data[: end - at]
        if not data:
            raise NoSuchEventError(f"{pointer}: {name} ends before the event's end")
        for frame_offset, payload in assembler.feed(data, at):
            if frame_offset != offset or len(payload) + EVENT_HEADER_BYTES != pointer.length:
                raise NoSuchEventError(
                    f"{pointer}: the event at {frame_offset} of {name} is "
                    f"{len(payload) + EVENT_HEADER_BYTES} bytes, not the pointer's length"
                )
            found.append(bytes(payload))
        at += len(data)
    if not found:  # the frame's header names more bytes than the pointer's length
        raise NoSuchEventError(f"{pointer}: the event at {offset} of {name} is longer")
    return found[0]
