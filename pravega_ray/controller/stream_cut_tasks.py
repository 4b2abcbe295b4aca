"""The controller's stream-cut calls: head, tail and time cuts, truncation requests, and the
segments between two cuts (docs/design.md "The controller", stream cuts).

A service of :class:`~pravega_ray.controller.controller.Controller`. Cuts are exact to the
event: every offset is an event boundary.

* **head** (:meth:`StreamCutTasks.get_head_cut`): the cut of the stream's last truncation
  (the truncation record), else epoch 0's segments at offset 0.
* **tail** (:meth:`StreamCutTasks.get_tail_cut`): the current epoch's segments at their
  durable lengths (appends end at event boundaries).
* **at a time** (:meth:`StreamCutTasks.get_segments_at_time`): the epoch current at
  ``time_ms`` (index table), each of its segments at the container's time index answer
  (``segmentstore/time_index.py``: the first event appended in the first 10 ms slot at or
  after ``time_ms``'s). A time before the head gives the head; one in the future the tail.
* **truncation** (:meth:`StreamCutTasks.truncate_stream`): checked here (a cut of this
  stream, covering the key space once, each offset an event boundary of a live segment,
  not behind the current head), then run by the request event processor
  (``stream_workflows.py``, ``_on_truncate``).
* **between two cuts** (:meth:`StreamCutTasks.get_segments_between`): the batch client's
  segment list, across epochs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pravega_ray.contracts.records import SegmentRange, StreamState
from pravega_ray.controller.controller_steps import ControllerSteps
from pravega_ray.controller.epochs import overlaps, to_range
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore, is_int
from pravega_ray.controller.stream_records import truncated_away
from pravega_ray.errors import (
    ConflictingUpdateError,
    InvalidArgumentError,
    SegmentNotFoundError,
    StreamSealedError,
)
from pravega_ray.naming import segment_epoch, stream_segment_name
from pravega_ray.stream_cut import StreamCut

__all__ = ["StreamCutSegments", "StreamCutTasks"]


class StreamCutSegments(Protocol):
    """The segment calls stream-cut calls make (``SegmentHelper`` provides them)."""

    def segment_length(self, segment: str) -> int: ...

    def offset_at_time(self, segment: str, time_ms: int) -> int: ...

    def check_event_boundary(self, segment: str, offset: int) -> None: ...


class StreamCutTasks:
    """Stream-cut calls over the records of ``store`` (module docstring); ``new_id`` names
    truncation requests."""

    def __init__(
        self,
        store: StreamMetadataStore,
        segments: StreamCutSegments,
        steps: ControllerSteps,
        *,
        new_id: Callable[[], str],
    ) -> None:
        self._store = store
        self._segments = segments
        self._steps = steps
        self._new_id = new_id

    # --- head, tail, at a time -----------------------------------------------------------------
    def get_head_cut(self, scope: str, stream: str) -> StreamCut:
        """The stream's head: its last truncation's cut, else epoch 0's segments at 0.

        Raises ScopeNotFoundError, StreamNotFoundError, InvalidNameError, DataCorruptionError.
        """
        self._steps.check_stream(scope, stream)
        records = self._store.streams
        cut = records.truncation(scope, stream)["cut"]
        if cut:
            return StreamCut(scope, stream, {int(k): int(v) for k, v in cut.items()})
        row = records.epoch(scope, stream, 0)
        assert row is not None
        return StreamCut(scope, stream, {sid: 0 for sid, _, _ in row.segments})

    def get_tail_cut(self, scope: str, stream: str) -> StreamCut:
        """The current epoch's segments at their durable lengths (event boundaries)."""
        self._steps.check_stream_names(scope, stream)  # the record is read next
        segments = self._store.get_stream_info(scope, stream).segments
        return StreamCut(
            scope, stream, {s.segment_id: self._segments.segment_length(s.name) for s in segments}
        )

    def get_segments_at_time(self, scope: str, stream: str, time_ms: int) -> StreamCut:
        """The cut at ``time_ms`` (ms since 1970), exact to the event: the epoch current then,
        each segment at the first event appended at or after ``time_ms`` (10 ms slots). The
        head for a time before it; the tail for a time in the future.

        Raises InvalidArgumentError (a time that is not an int), StreamNotFoundError, ...
        """
        self._steps.check_stream(scope, stream)
        if not is_int(time_ms):
            raise InvalidArgumentError("time_ms must be an int (milliseconds since the epoch)")
        records = self._store.streams
        epoch = records.epoch_at(scope, stream, time_ms)
        row = records.epoch(scope, stream, epoch)
        assert row is not None
        truncation = records.truncation(scope, stream)
        positions = {}
        for sid, _, _ in row.segments:
            if truncated_away(truncation, sid):
                return self.get_head_cut(scope, stream)  # wholly before the head
            name = stream_segment_name(scope, stream, sid)
            try:
                positions[sid] = self._segments.offset_at_time(name, max(time_ms, 0))
            except SegmentNotFoundError:  # deleted by a truncation under way
                return self.get_head_cut(scope, stream)
        return StreamCut(scope, stream, positions)

    # --- truncation ----------------------------------------------------------------------------
    def truncate_stream(self, scope: str, stream: str, cut: StreamCut) -> bool:
        """Ask for the stream to be truncated at ``cut`` (poll :meth:`check_truncate`).

        Raises InvalidArgumentError (not a cut of this stream: another stream's, segments
        that do not cover the key space once, unknown or deleted segments, an offset that is
        not an event boundary or is past a segment's end, a cut behind the current head),
        StreamSealedError, StreamNotFoundError, ConflictingUpdateError (another truncation
        under way); nothing changed then.
        """
        self._steps.ready()
        state = self._steps.check_stream(scope, stream)
        if not isinstance(cut, StreamCut) or cut.is_unbounded:
            raise InvalidArgumentError(f"cut must be a StreamCut of {scope}/{stream}")
        if (cut.scope, cut.stream) != (scope, stream):
            raise InvalidArgumentError(
                f"the cut is of {cut.scoped_stream}, not of {scope}/{stream}"
            )
        records = self._store.streams
        if state in (StreamState.SEALING, StreamState.SEALED):
            raise StreamSealedError(f"stream {scope}/{stream} is sealed")
        positions = cut.positions
        records.check_cut(scope, stream, positions)
        truncation = records.truncation(scope, stream)
        current = {int(k): int(v) for k, v in truncation["cut"].items()}
        for sid, offset in positions.items():
            name = stream_segment_name(scope, stream, sid)
            if truncated_away(truncation, sid):
                raise InvalidArgumentError(f"the cut is behind the stream's truncation ({name})")
            if sid in current and offset < current[sid]:
                raise InvalidArgumentError(
                    f"the cut is behind the stream's current truncation at {name}"
                )
            try:  # InvalidArgumentError past the end or not at an event boundary
                self._segments.check_event_boundary(name, offset)
            except SegmentNotFoundError:
                raise InvalidArgumentError(f"segment {name} of the cut is gone") from None
        before = set(records.before_cut(scope, stream, positions))
        for sid, offset in current.items():
            if not (positions.get(sid, -1) >= offset or sid in before):
                raise InvalidArgumentError(
                    f"the cut is behind the stream's current truncation at segment {sid}"
                )
        request = self._new_id()
        self._steps.post("truncate", scope, stream, request=request)
        try:
            records.put_truncate(scope, stream, positions, request)
        except ConflictingUpdateError:
            raise ConflictingUpdateError(
                f"a truncation of {scope}/{stream} is under way; try again once it is done"
            ) from None
        self._steps.wake(scope, stream)
        return True

    def check_truncate(self, scope: str, stream: str) -> bool:
        """Whether no truncation of the stream is pending."""
        self._steps.check_stream(scope, stream)
        return self._store.streams.pending_truncate(scope, stream) is None

    # --- between two cuts ----------------------------------------------------------------------
    def get_segments_between(
        self, scope: str, stream: str, start: dict[int, int], end: dict[int, int] | None
    ) -> list[SegmentRange]:
        """Every segment between two cuts (segment id -> offset; ``start`` empty: the head,
        ``end`` None: the tail), across epochs, in creation order: a segment wholly before
        ``start`` (sealed no later than every overlapping start segment was created), wholly
        after ``end`` (created no earlier than every overlapping end segment was sealed) or
        truncated away is left out. For the batch client and the Spark reader.

        Raises InvalidArgumentError for malformed cuts or an ``end`` behind ``start`` (an
        end segment wholly before the start cut, or at a lower offset than the start's).
        """
        self._steps.check_stream(scope, stream)
        start, end = _check_positions(start, "start"), _check_positions(end, "end")
        records = self._store.streams
        truncation = records.truncation(scope, stream)
        before = set(records.before_cut(scope, stream, start)) if start else set()
        if end is not None:
            for sid, offset in end.items():
                if sid in before or offset < start.get(sid, 0):
                    raise InvalidArgumentError(
                        f"the end cut is behind the start cut at segment {sid}"
                    )
        end_rows = {}
        for sid in end or {}:
            row = records.segment_row(scope, stream, sid)
            if row is not None:
                end_rows[sid] = (row[0], records.sealed_in(scope, stream, sid))
        out = []
        for sid in records.all_segment_ids(scope, stream):
            found = records.segment_row(scope, stream, sid)
            if found is None or truncated_away(truncation, sid) or sid in before:
                continue
            if end is not None and sid not in end:
                over = [sealed for row, sealed in end_rows.values() if overlaps(row, found[0])]
                if over and all(s is not None and s.epoch <= segment_epoch(sid) for s in over):
                    continue  # wholly after the end cut
            out.append(to_range(scope, stream, found[0]))
        return out


def _check_positions(positions: object, what: str) -> Any:
    """``positions`` as a dict segment id -> offset (None stays None for an end)."""
    if positions is None and what == "end":
        return None
    if not isinstance(positions, dict):
        raise InvalidArgumentError(f"the {what} cut must be a dict of segment id -> offset")
    for sid, offset in positions.items():
        if not is_int(sid) or not is_int(offset) or sid < 0 or offset < 0:
            raise InvalidArgumentError(f"the {what} cut holds a bad position {sid!r}: {offset!r}")
    return positions
