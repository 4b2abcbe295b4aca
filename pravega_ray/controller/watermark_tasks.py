"""Writers' marks and the periodic watermark workflow (Pravega's ``noteTimestampFromWriter``,
``removeWriter`` and ``PeriodicWatermarking``; semantics in ``contracts/watermarks.py``).

Records (the controller's metadata, next to the stream's own):

* ``marks/sc/st/<writer id>``: a writer's latest :class:`WriterMark` and the creation time of
  the stream it was noted on (marks of an earlier stream of the name are dropped);
* ``watermark/sc/st``: the stream's mark segment, the offset of its end as last seen, and
  the last watermark emitted (a cache of the segment's last entry: the segment is the
  truth, read again from that offset at each run).

:meth:`WatermarkTasks.run` is one iteration for one stream (the stream buckets call
:meth:`run_streams` every ``watermark_period_s``):

1. read the marks; drop those of another incarnation of the stream and those not renewed
   within ``writer_timeout_s`` (a writer that stopped noting time);
2. the writers *timing* the watermark are the live ones not closed; with none, stop;
3. the last watermark (the mark segment's tail read from the stored offset);
4. ``lower`` = the least of their times; unless it is past the last watermark's lower
   bound, stop (no watermark: time did not advance for every writer);
5. the cut: the least upper bound of every live mark's position (closed writers' too:
   their events are all before their last position) and the last cut
   (``contracts.watermarks.upper_bound``);
6. append the watermark to the mark segment *conditionally on its length*, so two runs at
   once (a bucket restarted, say) emit it once; then store the record, and drop the closed
   writers' marks the watermark covered;
7. keep the segment bounded: once ``keep_bytes`` were appended since the entry the record
   notes (``keep_from``, an entry's start), truncate the segment there and note the entry
   just appended instead; the segment holds between ``keep_bytes`` and twice as many (a
   truncation is idempotent, so a run killed around it repeats it harmlessly). A run whose
   record points below the segment's start reads on from the start (an entry's start too).

Killed between any two steps, the next run starts again from the segment: a watermark is
never emitted twice, never moves backwards (its lower bound grows strictly, its cut is an
upper bound of the last one) and never passes a writer's noted time (a live writer's
time bounds ``lower``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Protocol

from pravega_ray import metrics
from pravega_ray.constants import (
    SYSTEM_SCOPE,
    WATERMARK_SEGMENT_KEEP_BYTES,
    WATERMARK_WRITER_TIMEOUT_S,
)
from pravega_ray.contracts.records import StreamState
from pravega_ray.contracts.segment_store import ReadResult
from pravega_ray.contracts.watermarks import (
    Watermark,
    WriterMark,
    check_position,
    check_time_ms,
    encode_watermark,
    mark_segment_name,
    read_watermarks,
    upper_bound,
)
from pravega_ray.controller.controller_steps import ControllerSteps
from pravega_ray.controller.stream_metadata_store import MetadataStore, StreamMetadataStore
from pravega_ray.errors import (
    ConflictingUpdateError,
    InvalidArgumentError,
    PravegaError,
    SegmentExistsError,
    SegmentNotFoundError,
    StreamNotFoundError,
)
from pravega_ray.timing import SYSTEM_CLOCK, Clock

__all__ = [
    "PeriodicWatermarking",
    "WatermarkSegments",
    "WatermarkTasks",
    "check_writer_id",
    "read_marks",
]

log = logging.getLogger(__name__)

MARKS = "marks"
RECORD = "watermark"
READ_CHUNK = 1 << 20
EXPIRED_KEEP = 10
"""An expired mark is deleted once its writer has been silent this many timeouts."""
RUNNABLE = frozenset(
    s.value
    for s in (StreamState.ACTIVE, StreamState.SCALING, StreamState.TRUNCATING, StreamState.SEALED)
)
"""States in which a stream's watermarks go on (sealed too: its last events still get one)."""


class WatermarkSegments(Protocol):
    """The segment calls the workflow makes (``SegmentHelper`` provides them)."""

    def create_segment(self, segment: str) -> None: ...

    def segment_length(self, segment: str) -> int: ...

    def read(self, segment: str, offset: int, max_bytes: int, wait_s: float) -> ReadResult: ...

    def append_at(self, segment: str, data: bytes, expected_offset: int) -> bool: ...

    def truncate_segment(self, segment: str, offset: int) -> None: ...


def check_writer_id(writer_id: object) -> str:
    """A writer id: a str of 1 to 255 letters, digits, ``-``, ``_`` or ``.``; else
    InvalidArgumentError (it becomes part of a record key)."""
    if (
        not isinstance(writer_id, str)
        or not 1 <= len(writer_id) <= 255
        or not all(c.isascii() and (c.isalnum() or c in "-_.") for c in writer_id)
    ):
        raise InvalidArgumentError(
            f"writer_id must be a str of 1-255 letters, digits, '-', '_' or '.': {writer_id!r}"
        )
    return writer_id


class WatermarkTasks:
    """The controller's calls about writers' marks, over ``records`` (module docstring)."""

    def __init__(
        self,
        store: StreamMetadataStore,
        records: MetadataStore,
        steps: ControllerSteps | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._store = store
        self._records = records
        self._steps = steps
        self._clock = clock

    # --- the controller's calls ---------------------------------------------------------------
    def note_writer_mark(
        self, scope: str, stream: str, writer_id: str, time_ms: int, position: dict[int, int]
    ) -> bool:
        """Store writer ``writer_id``'s time and position on ``scope/stream``. False (nothing
        stored) if it had noted a later time already: times go forward per writer (the
        writer logs a WARNING, as Pravega's). StreamNotFoundError, InvalidNameError,
        InvalidArgumentError (a bad id, time or position, a segment not of the stream)."""
        created = self._check(scope, stream, writer_id)
        check_time_ms(time_ms)
        position = self._check_position(scope, stream, position)
        key = f"{MARKS}/{scope}/{stream}/{writer_id}"
        for _ in range(16):
            current = self._records.get(key)
            value = current.value if current is not None else {}
            if int(value.get("created_ms", -1)) == created and int(value["time_ms"]) > time_ms:
                return False
            mark = WriterMark(time_ms, position, self._clock.wall_time_ms())
            try:
                self._records.put(
                    key,
                    {**mark.to_dict(), "created_ms": created},
                    None if current is None else current.version,
                )
                return True
            except ConflictingUpdateError:
                continue  # the same writer noting from two threads: read again
        raise ConflictingUpdateError(f"the mark of writer {writer_id} kept changing")

    def writer_closed(
        self, scope: str, stream: str, writer_id: str, position: dict[int, int]
    ) -> bool:
        """Writer ``writer_id`` closed at ``position`` (after its last event was
        acknowledged): its time no longer holds the watermark back, and ``position`` bounds
        the next watermark's cut, after which the mark goes. False if it has no mark (a
        writer that never noted a time takes no part in watermarks)."""
        self._check(scope, stream, writer_id)
        position = self._check_position(scope, stream, position)
        stored = {str(k): v for k, v in position.items()}
        return self._update_mark(scope, stream, writer_id, closed=True, position=stored)

    def remove_writer(self, scope: str, stream: str, writer_id: str) -> bool:
        """Forget writer ``writer_id`` (Pravega's ``removeWriter``): watermarks go on without
        it, as for a writer timed out. False if it had no mark."""
        self._check(scope, stream, writer_id)
        key = f"{MARKS}/{scope}/{stream}/{writer_id}"
        if self._records.get(key) is None:
            return False
        self._records.delete(key)
        return True

    def list_writers(self, scope: str, stream: str) -> dict[str, int]:
        """The writers with a mark on the stream, each with its last noted time."""
        created = self._check(scope, stream, None)
        marks = read_marks(self._records, scope, stream, created)
        return {writer: mark.time_ms for writer, (mark, _) in marks.items() if not mark.expired}

    def _check(self, scope: str, stream: str, writer_id: str | None) -> int:
        if self._steps is not None:
            self._steps.ready()
            self._steps.check_stream_names(scope, stream)
        if writer_id is not None:
            check_writer_id(writer_id)
        value, _ = self._store.streams.get(scope, stream)
        return int(value["created_ms"])

    def _check_position(self, scope: str, stream: str, position: object) -> dict[int, int]:
        checked = check_position(position)
        for sid in checked:
            if self._store.streams.segment_row(scope, stream, sid) is None:
                raise InvalidArgumentError(f"segment {sid} is not a segment of {scope}/{stream}")
        return checked

    def _update_mark(self, scope: str, stream: str, writer_id: str, **changes: Any) -> bool:
        key = f"{MARKS}/{scope}/{stream}/{writer_id}"
        for _ in range(16):
            current = self._records.get(key)
            if current is None:
                return False
            try:
                self._records.put(key, {**current.value, **changes}, current.version)
                return True
            except ConflictingUpdateError:
                continue
        raise ConflictingUpdateError(f"the mark of writer {writer_id} kept changing")


class PeriodicWatermarking:
    """The watermark workflow over ``records`` (module docstring); the stream buckets run it."""

    def __init__(
        self,
        store: StreamMetadataStore,
        records: MetadataStore,
        segments: WatermarkSegments,
        *,
        clock: Clock = SYSTEM_CLOCK,
        writer_timeout_s: float = WATERMARK_WRITER_TIMEOUT_S,
        keep_bytes: int = WATERMARK_SEGMENT_KEEP_BYTES,
        step: Callable[[str], None] = lambda name: None,
    ) -> None:
        """``step`` is called after each named step of :meth:`run` (tests kill runs there);
        ``keep_bytes``: the mark segment's bound (module docstring, step 7)."""
        self._keep_bytes = keep_bytes
        self._store = store
        self._records = records
        self._segments = segments
        self._clock = clock
        self._timeout_ms = int(writer_timeout_s * 1000)
        self._step = step

    def streams(self) -> Iterator[tuple[str, str]]:
        """Every user stream with at least one writer's mark."""
        for scope in self._store.list_scopes():
            if scope == SYSTEM_SCOPE:
                continue
            for stream in self._store.list_names("streams", scope):
                if self._records.list_keys(f"{MARKS}/{scope}/{stream}"):
                    yield scope, stream

    def run_streams(self, which: Callable[[str, str], bool] = lambda sc, st: True) -> int:
        """One iteration for every stream ``which`` selects that has marks; a stream whose
        iteration fails is logged and left to the next period. Returns watermarks emitted."""
        emitted = 0
        for scope, stream in self.streams():
            if not which(scope, stream):
                continue
            try:
                mark = self.run(scope, stream)
            except PravegaError as e:
                log.warning("watermarking of %s/%s failed (%r); next period", scope, stream, e)
                metrics.WORKFLOWS.inc(1, {"workflow": "watermark", "outcome": "failed"})
                continue
            emitted += mark is not None
            outcome = "emitted" if mark is not None else "skipped"
            metrics.WORKFLOWS.inc(1, {"workflow": "watermark", "outcome": outcome})
        return emitted

    def run(self, scope: str, stream: str) -> Watermark | None:
        """One iteration for ``scope/stream`` (module docstring); the watermark emitted, if any."""
        try:
            value, _ = self._store.streams.get(scope, stream)
        except StreamNotFoundError:
            return None
        if value["state"] not in RUNNABLE:
            return None
        created = int(value["created_ms"])
        now = self._clock.wall_time_ms()
        marks = read_marks(self._records, scope, stream, created)
        live: dict[str, tuple[WriterMark, int]] = {}
        for writer, (mark, version) in marks.items():
            key = f"{MARKS}/{scope}/{stream}/{writer}"
            age = now - mark.noted_ms
            if mark.expired:
                if age > EXPIRED_KEEP * self._timeout_ms:
                    self._records.delete(key)  # silent ten timeouts long: forgotten
            elif age > self._timeout_ms:
                # Expired by compare-and-set: a note landing meanwhile wins and stays live
                # (an unconditional delete could drop a fresh mark, and the watermark could
                # then pass that writer's time).
                log.info("watermarks of %s/%s: writer %s timed out", scope, stream, writer)
                expired = {**replace(mark, expired=True).to_dict(), "created_ms": created}
                with contextlib.suppress(ConflictingUpdateError):
                    self._records.put(key, expired, version)
            else:
                live[writer] = (mark, version)
        self._step("marks read")
        timing = [mark.time_ms for mark, _ in live.values() if not mark.closed]
        if not timing:
            return None
        segment = mark_segment_name(scope, stream, created)
        previous, end, record_version, keep_from = self._last(scope, stream, segment)
        self._step("last read")
        lower, upper = min(timing), max(timing)
        if previous is not None and lower <= previous.lower_ms:
            return None
        epochs: dict[int, dict[int, tuple[float, float]]] = {}

        def ranges_of(epoch: int) -> dict[int, tuple[float, float]]:
            if epoch not in epochs:
                record = self._store.streams.epoch(scope, stream, epoch)
                rows = record.segments if record is not None else ()
                epochs[epoch] = {sid: (low, high) for sid, low, high in rows}
            return epochs[epoch]

        newest = int(value["epoch"])
        positions = [mark.position for mark, _ in live.values()]
        sids = {sid for p in positions for sid in p} | set(previous.cut if previous else ())
        ranges: dict[int, tuple[float, float]] = {}
        for sid in [*sids, *ranges_of(newest)]:
            known = ranges_of(sid >> 32).get(sid)
            if known is None:
                if previous is not None and sid in previous.ranges:
                    known = previous.ranges[sid]
                else:
                    raise InvalidArgumentError(f"segment {sid} of {scope}/{stream} is unknown")
            ranges[sid] = known
        cut = upper_bound(
            positions, ranges, lambda: sorted(ranges_of(newest)), previous.cut if previous else None
        )
        watermark = Watermark(lower, upper, cut, {sid: ranges[sid] for sid in cut})
        self._step("computed")
        entry = encode_watermark(watermark)
        if not self._segments.append_at(segment, entry, end):
            log.info("watermarks of %s/%s: another run emitted first", scope, stream)
            return None
        self._step("appended")
        if end + len(entry) - keep_from >= self._keep_bytes:
            self._segments.truncate_segment(segment, keep_from)  # at or below the start: no-op
            self._step("truncated")
            keep_from = end  # where the entry just appended starts
        record = {
            "segment": segment,
            "offset": end + len(entry),
            "last": watermark.to_dict(),
            "keep_from": keep_from,
        }
        with contextlib.suppress(ConflictingUpdateError):  # the next run reads the segment
            self._records.put(f"{RECORD}/{scope}/{stream}", record, record_version)
        self._step("recorded")
        for writer, (written, _) in live.items():
            if written.closed:  # its position is in the cut now: its events are all before it
                self._records.delete(f"{MARKS}/{scope}/{stream}/{writer}")
        return watermark

    def _last(
        self, scope: str, stream: str, segment: str
    ) -> tuple[Watermark | None, int, int | None, int]:
        """The last watermark in the mark segment (created here if missing), the segment's
        length, the version of the stream's watermark record and its ``keep_from``."""
        record = self._records.get(f"{RECORD}/{scope}/{stream}")
        stored = record.value if record is not None and record.value["segment"] == segment else {}
        offset = int(stored.get("offset", 0))
        keep_from = int(stored.get("keep_from", 0))
        last = Watermark.from_dict(stored["last"]) if stored.get("last") else None
        try:
            length = self._segments.segment_length(segment)
        except SegmentNotFoundError:
            with contextlib.suppress(SegmentExistsError):
                self._segments.create_segment(segment)
            length = 0
        if length < offset:  # the record is ahead of a segment re-created: trust the segment
            offset, last, keep_from = 0, None, 0
        for found, _ in read_watermarks(  # below the start (truncated): from the start
            lambda at: self._segments.read(segment, at, min(READ_CHUNK, length - at), 0.0),
            segment,
            offset,
            length,
        ):
            last = found[-1]
        return last, length, None if record is None else record.version, keep_from


def read_marks(
    records: MetadataStore, scope: str, stream: str, created: int
) -> dict[str, tuple[WriterMark, int]]:
    """The stream's marks (writer -> (mark, version)); marks of an earlier stream of the
    name are deleted."""
    found: dict[str, tuple[WriterMark, int]] = {}
    for key in records.list_keys(f"{MARKS}/{scope}/{stream}"):
        record = records.get(key)
        if record is None:
            continue
        if int(record.value.get("created_ms", -1)) != created:
            records.delete(key)
            continue
        found[key.rsplit("/", 1)[1]] = (WriterMark.from_dict(record.value), record.version)
    return found
