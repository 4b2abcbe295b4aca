"""Watermarks: writers' times, the marks the controller emits, and a reader's time window.

Pravega's event-time design (``EventStreamWriter.noteTime``, the controller's
``PeriodicWatermarking``, ``EventStreamReader.getCurrentTimeWindow``), pure logic both sides
import (the controller emits, readers read); no I/O here.

* A writer notes a time ``t``: it promises that every event it writes from then on has an
  event time of at least ``t``. It reports ``t`` with its *position*: for each segment it
  writes, an offset at or after the end of every event it wrote before noting (the
  writer waits for those to be acknowledged first, so the position is exact).
* The controller keeps each writer's latest mark (:class:`WriterMark`) and, periodically,
  emits a :class:`Watermark` to the stream's *mark segment* when every participating
  writer's time moved past the last watermark's lower bound: ``lower_ms`` is the least of
  their times, ``upper_ms`` the greatest, and ``cut`` the least upper bound of their
  positions (:func:`upper_bound`), completed with segments of the newest epoch so it
  covers the key space, and never behind the last watermark's cut. So an event beyond
  ``cut`` was written after its writer noted a time >= ``lower_ms``.
* A reader (of a group) has *passed* a watermark once the group's positions are nowhere
  behind its cut (:func:`passed`); its time window is then ``lower_ms`` of the last
  watermark passed and ``upper_ms`` of the last one not yet passed
  (:class:`WindowTracker`, Pravega's ``WatermarkReaderImpl``).

Mark segment entries are framed ``<u32 length><u32 crc32><JSON>`` (:func:`encode_watermark`,
:func:`decode_watermarks`): damage is a DataCorruptionError naming the segment and offset.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pravega_ray.constants import SYSTEM_SCOPE
from pravega_ray.contracts.cut_order import Cut, Ranges, covers_key_space, cut_le
from pravega_ray.contracts.segment_store import ReadResult
from pravega_ray.errors import DataCorruptionError, InvalidArgumentError, SegmentTruncatedError
from pravega_ray.naming import segment_epoch, segment_id, stable_hash64, stream_segment_name

__all__ = [
    "TimeWindow",
    "Watermark",
    "WindowTracker",
    "WriterMark",
    "check_position",
    "check_time_ms",
    "decode_watermarks",
    "encode_watermark",
    "mark_segment_name",
    "passed",
    "read_watermarks",
    "upper_bound",
]

_HEADER = struct.Struct(">II")
WATERMARK_BYTES_MAX = 1 << 20
"""A watermark entry's JSON is at most this long (a cut of tens of thousands of segments)."""


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """Where a reader is in event time (Pravega's ``TimeWindow``): every event it reads from
    now on has a time of at least ``lower_ms`` (None: no watermark passed yet), and the
    writers had noted at most ``upper_ms`` where it is reading (None: none ahead known)."""

    lower_ms: int | None
    upper_ms: int | None

    @property
    def is_lower_bound_known(self) -> bool:
        return self.lower_ms is not None

    @property
    def is_upper_bound_known(self) -> bool:
        return self.upper_ms is not None


def check_time_ms(time_ms: object, what: str = "time_ms") -> int:
    """``time_ms`` if an int (not bool) in [0, 2**63); else InvalidArgumentError."""
    if isinstance(time_ms, bool) or not isinstance(time_ms, int) or not 0 <= time_ms < 1 << 63:
        raise InvalidArgumentError(f"{what} must be an int in [0, 2**63), got {time_ms!r}")
    return time_ms


def check_position(position: object) -> dict[int, int]:
    """A writer's position as ``{segment id: offset}``: non-empty, ints >= 0 (not bool);
    else InvalidArgumentError."""
    if not isinstance(position, Mapping) or not position:
        raise InvalidArgumentError("a writer's position must be a non-empty {segment id: offset}")
    checked: dict[int, int] = {}
    for sid, offset in position.items():
        for value in (sid, offset):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(f"bad position entry {sid!r}: {offset!r}")
        checked[sid] = offset
    return checked


@dataclass(frozen=True, slots=True)
class WriterMark:
    """A writer's latest noted time and position, as the controller keeps it. ``noted_ms``:
    the controller's wall time when it was stored (a writer silent for longer than the
    timeout is dropped); ``closed``: the writer closed after noting it (its position still
    bounds the next watermark's cut, its time no longer holds the watermark back)."""

    time_ms: int
    position: dict[int, int]
    noted_ms: int
    closed: bool = False
    expired: bool = False
    """Timed out: no longer part of watermarks (a new note of the writer replaces it)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "time_ms": self.time_ms,
            "position": {str(k): v for k, v in self.position.items()},
            "noted_ms": self.noted_ms,
            "closed": self.closed,
            "expired": self.expired,
        }

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> WriterMark:
        return cls(
            int(value["time_ms"]),
            {int(k): int(v) for k, v in value["position"].items()},
            int(value["noted_ms"]),
            bool(value.get("closed", False)),
            bool(value.get("expired", False)),
        )


@dataclass(frozen=True, slots=True)
class Watermark:
    """One emitted watermark: time bounds, and the cut (with its segments' key ranges) past
    which every event has a time of at least ``lower_ms``."""

    lower_ms: int
    upper_ms: int
    cut: dict[int, int]
    ranges: dict[int, tuple[float, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lower_ms": self.lower_ms,
            "upper_ms": self.upper_ms,
            "cut": {str(k): v for k, v in self.cut.items()},
            "ranges": {str(k): list(v) for k, v in self.ranges.items()},
        }

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Watermark:
        return cls(
            int(value["lower_ms"]),
            int(value["upper_ms"]),
            {int(k): int(v) for k, v in value["cut"].items()},
            {int(k): (float(v[0]), float(v[1])) for k, v in value["ranges"].items()},
        )


def mark_segment_name(scope: str, stream: str, created_ms: int) -> str:
    """The mark segment of the incarnation of ``scope/stream`` created at ``created_ms``: a
    segment of the ``_system`` scope, so a stream deleted and created again under the name
    starts with no watermarks."""
    digest = f"{stable_hash64(f'{scope}/{stream}/{created_ms}'):016x}"
    return stream_segment_name(SYSTEM_SCOPE, f"_MARK{digest}", segment_id(0, 0))


def encode_watermark(mark: Watermark) -> bytes:
    """One entry of a mark segment."""
    body = json.dumps(mark.to_dict(), sort_keys=True, separators=(",", ":")).encode()
    if len(body) > WATERMARK_BYTES_MAX:
        raise InvalidArgumentError(f"a watermark of {len(body)} bytes is too large")
    return _HEADER.pack(len(body), zlib.crc32(body)) + body


def decode_watermarks(
    segment: str, offset: int, data: bytes, segment_length: int | None = None
) -> tuple[list[tuple[int, Watermark]], int]:
    """The whole entries in ``data`` (read at ``offset``) as ``(offset after the entry,
    watermark)``, and the offset where the first incomplete entry starts. An entry whose
    checksum or content is wrong, or that would end past ``segment_length`` (each is
    appended whole, so none can), is DataCorruptionError naming ``segment`` and its
    offset: damage is never mistaken for an entry still being written."""
    found: list[tuple[int, Watermark]] = []
    at = 0
    while len(data) - at >= _HEADER.size:
        length, crc = _HEADER.unpack_from(data, at)
        if length > WATERMARK_BYTES_MAX:
            raise _damaged(segment, offset + at, f"entry length {length}")
        end = at + _HEADER.size + length
        if segment_length is not None and offset + end > segment_length:
            raise _damaged(segment, offset + at, f"entry of {length} bytes past the end")
        if end > len(data):
            break
        body = data[at + _HEADER.size : end]
        if zlib.crc32(body) != crc:
            raise _damaged(segment, offset + at, "checksum mismatch")
        try:
            mark = Watermark.from_dict(json.loads(body))
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise _damaged(segment, offset + at, repr(e)) from e
        found.append((offset + end, mark))
        at = end
    return found, offset + at


def read_watermarks(
    read: Callable[[int], ReadResult], segment: str, offset: int, end: int | None = None
) -> Iterator[tuple[list[Watermark], int]]:
    """The watermarks of mark segment ``segment`` from ``offset`` on, a read at a time
    (``read(offset)``; a read may stop short of the end): per read, the whole entries it
    held and the offset after them. Ends at ``end`` (default: the length each read reports)
    or at a read holding no whole entry. A read below the segment's start (the controller
    truncates it at an entry's start, keeping the newest watermarks) goes on from the start:
    the offsets yielded say where it went on. DataCorruptionError as
    :func:`decode_watermarks` (the entries of earlier reads were yielded already)."""
    while end is None or offset < end:
        try:
            result = read(offset)
        except SegmentTruncatedError as e:
            start = getattr(e, "start_offset", None)
            if not isinstance(start, int) or start <= offset:
                raise
            offset = start
            continue
        length = result.segment_length if end is None else end
        found, offset = decode_watermarks(segment, offset, result.data, length)
        if not found:
            return
        yield [mark for _, mark in found], offset
        if offset >= length:
            return


def _damaged(segment: str, offset: int, why: str) -> DataCorruptionError:
    error = DataCorruptionError(f"mark segment {segment}: damaged watermark at {offset}: {why}")
    error.segment = segment  # type: ignore[attr-defined]
    error.offset = offset  # type: ignore[attr-defined]
    return error


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def upper_bound(
    positions: Iterable[Cut],
    ranges: Ranges,
    newest_epoch_segments: Callable[[], Sequence[int]],
    previous: Cut | None = None,
) -> dict[int, int]:
    """The least cut nowhere behind any of ``positions`` nor ``previous`` (Pravega's
    ``computeWatermark``): at each point of the key space, the latest of their positions
    (per segment the greatest offset; a segment dropped where one of a later epoch
    overlaps it). Key ranges none of them covers are filled with the overlapping
    segments of the newest epoch (``newest_epoch_segments()``) at offset 0, repeatedly,
    so the result covers the key space once. KeyError if ``ranges`` lacks a segment."""
    merged: dict[int, int] = {}
    for cut in [*positions, *([previous] if previous else [])]:
        for sid, offset in cut.items():
            merged[sid] = max(offset, merged.get(sid, offset))
    kept = _latest_only(merged, ranges)
    if covers_key_space(kept, ranges):
        return kept
    for sid in newest_epoch_segments():
        if sid not in kept and not any(
            _overlap(ranges[sid], ranges[k]) and segment_epoch(k) >= segment_epoch(sid)
            for k in kept
        ):
            kept[sid] = 0
    kept = _latest_only(kept, ranges)
    if not covers_key_space(kept, ranges):  # positions in a newer epoch than "newest": all
        kept = {sid: merged.get(sid, 0) for sid in newest_epoch_segments()}
    return kept


def _latest_only(cut: Mapping[int, int], ranges: Ranges) -> dict[int, int]:
    return {
        sid: offset
        for sid, offset in cut.items()
        if not any(
            _overlap(ranges[sid], ranges[o]) and segment_epoch(o) > segment_epoch(sid) for o in cut
        )
    }


def passed(position: Cut, mark: Watermark, ranges: Ranges) -> bool:
    """Whether a group at ``position`` (its segments' next offsets) is nowhere behind the
    watermark's cut: every event it reads from now on lies beyond the cut. Equal counts as
    passed (Pravega: at a mark, time advances). KeyError if ``ranges`` lacks a segment."""
    return cut_le(mark.cut, position, {**mark.ranges, **ranges})


class WindowTracker:
    """A reader's time window over one stream's watermarks, in the order emitted (Pravega's
    ``WatermarkReaderImpl``): :meth:`add` the watermarks read from the mark segment,
    :meth:`advance` with the group's position; :meth:`window` is the answer. Not
    thread-safe (the reader calls it from its own thread)."""

    def __init__(self) -> None:
        self._inflight: deque[Watermark] = deque()
        self._lower: int | None = None

    def add(self, marks: Iterable[Watermark]) -> None:
        self._inflight.extend(marks)

    def advance(self, position: Cut, ranges: Ranges) -> None:
        """Drop the watermarks the group passed (in order: the first not passed stops it)."""
        while self._inflight and passed(position, self._inflight[0], ranges):
            self._lower = self._inflight.popleft().lower_ms

    def window(self) -> TimeWindow:
        upper = self._inflight[-1].upper_ms if self._inflight else None
        return TimeWindow(self._lower, upper)

    @property
    def waiting(self) -> int:
        """Watermarks read and not yet passed."""
        return len(self._inflight)
