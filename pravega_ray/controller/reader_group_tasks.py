"""The controller's reader-group calls: create, look up and delete groups.

A service of :class:`~pravega_ray.controller.controller.Controller`. The controller keeps
each group's *record* (its :class:`ReaderGroupState` at creation, naming its state
segment) and creates and deletes the group's *state segment*, a table segment of the
``_system`` scope. The live state (who owns which segment at which offset, completed and
future segments) is read and changed there by the group's readers themselves, with
conditional updates (``client/reader_group_synchronizer.py``, Pravega's state
synchronizer): no reader calls the controller to sync, and the controller answers them
only the successors of segments they read to their ends (``get_successors``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, Protocol

from pravega_ray.contracts.reader_group_state import (
    ReaderGroupState,
    reader_group_state_segment,
)
from pravega_ray.contracts.records import check_request_id
from pravega_ray.controller.controller_steps import ControllerSteps
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.controller.stream_records import truncated_away
from pravega_ray.controller.subscriber_tasks import SubscriberTasks
from pravega_ray.errors import (
    InvalidArgumentError,
    ReaderGroupNotFoundError,
    ScopeNotFoundError,
    SegmentExistsError,
    SegmentNotFoundError,
    StreamNotFoundError,
)
from pravega_ray.naming import parse_scoped_stream, stream_segment_name, validate_name
from pravega_ray.stream_configuration import (
    ReaderGroupConfig,
    RetentionConfigType,
    check_reader_group_config,
)
from pravega_ray.stream_cut import cuts_of

__all__ = ["ReaderGroupSegments", "ReaderGroupTasks"]

log = logging.getLogger(__name__)

GENERATION_ALL = 1 << 62
"""The generation a deleted group's subscriber entries are removed with: above any real one."""


class ReaderGroupSegments(Protocol):
    """The segment calls reader-group calls make (``SegmentHelper`` provides them)."""

    def create_table_segment(self, segment: str) -> None: ...

    def delete_segment(self, segment: str) -> None: ...

    def check_event_boundary(self, segment: str, offset: int) -> None: ...


class ReaderGroupTasks:
    """Reader-group calls over the records of ``store`` (module docstring). A group whose
    retention type is not NONE is a subscriber of its streams, through ``subscribers``;
    ``new_id`` gives each incarnation its group id."""

    def __init__(
        self,
        store: StreamMetadataStore,
        segments: ReaderGroupSegments,
        steps: ControllerSteps,
        subscribers: SubscriberTasks,
        *,
        new_id: Callable[[], str],
    ) -> None:
        self._store = store
        self._segments = segments
        self._steps = steps
        self._subscribers = subscribers
        self._new_id = new_id

    # --- reader groups -------------------------------------------------------------------------
    def create_reader_group(
        self, scope: str, group: str, config: ReaderGroupConfig, request_id: str | None = None
    ) -> bool:
        """Create a reader group at the head of its streams; False if it exists.

        Raises ScopeNotFoundError, StreamNotFoundError, InvalidNameError,
        InvalidArgumentError (config not a valid ReaderGroupConfig); nothing is stored then.
        Each creation is a new incarnation with a new group id, so readers of a group
        deleted before get ReaderGroupNotFoundError rather than this group's segments.
        """
        self._steps.ready()
        self._group_args(scope, group)
        self._steps.check_scope_open(scope)
        check_request_id(request_id)
        config = check_reader_group_config(config)  # what it says must load
        existing = self._store.get_reader_group_record(scope, group)
        if existing is not None:
            self._group(scope, group)  # a damaged record is named, not "exists"
            return request_id is not None and existing.get("request_id") == request_id
        segments, ends = self.get_reader_group_positions(config)
        state = ReaderGroupState.new(
            scope,
            group,
            list(config.streams),
            segments,
            self._new_id(),
            request_id,
            config.to_dict(),
            ends,
        )
        # The state segment first: a crash before the record leaves an empty segment of an
        # incarnation nobody knows, never a group without its state segment.
        state.state_segment = self._create_state_segment(state)
        self._store.create_reader_group(state)
        self._steps.created_in_open_scope(
            scope, f"create of reader group {scope}/{group}", lambda: self._undo_create(state)
        )
        if config.retention_type is not RetentionConfigType.NONE:
            # After the record: a crash in between leaves a group that is no subscriber
            # yet; a repeated create (same request id) does not come here again, so the
            # group's first ReaderGroup object adds it too (add_subscriber is idempotent).
            cuts = cuts_of(segments)
            for scoped in config.streams:
                s_scope, s_stream = parse_scoped_stream(scoped)
                self._subscribers.add_subscriber(s_scope, s_stream, f"{scope}/{group}", 0)
                # Its start as its first acknowledgement: retention ignores a subscriber
                # without a cut (docs/design.md "Retention"), so until its first checkpoint
                # it would lose what it has not read yet.
                self._subscribers.update_subscriber_stream_cut(
                    s_scope, s_stream, f"{scope}/{group}", 0, cuts[scoped]
                )
        return True

    def _undo_create(self, state: ReaderGroupState) -> None:
        """Remove a group just created (its state segment and record; no subscriber yet)
        in a scope being deleted; what a recursive delete removed meanwhile is fine."""
        with contextlib.suppress(SegmentNotFoundError):
            self._segments.delete_segment(state.state_segment or "")
        record = self._store.get_reader_group_record(state.scope, state.name)
        if record is not None and record.get("group_id") == state.group_id:
            self._store.delete_reader_group(state.scope, state.name)

    def _create_state_segment(self, state: ReaderGroupState) -> str:
        segment = reader_group_state_segment(state.scope, state.name, state.group_id)
        with contextlib.suppress(SegmentExistsError):  # a repeated create
            self._segments.create_table_segment(segment)
        return segment

    def _group_args(self, scope: str, group: str) -> None:
        """Both names first (InvalidNameError), then the scope (ScopeNotFoundError)."""
        validate_name("scope", scope)
        validate_name("reader group", group)
        self._steps.check_scope(scope)

    def _group(self, scope: str, group: str) -> tuple[ReaderGroupState, int]:
        self._group_args(scope, group)
        return self._store.get_reader_group(scope, group)

    def get_reader_group_positions(
        self, config: ReaderGroupConfig
    ) -> tuple[dict[str, int], dict[str, int]]:
        """Where a group with ``config`` starts (segment -> offset: each stream's start cut,
        else its head) and ends (segment -> offset of its end cuts).

        InvalidArgumentError for a config that is not a ReaderGroupConfig, a cut that is not
        a cut of its stream, an offset not at an event boundary, a start cut behind the
        stream's head (truncated away) or an end cut before a start cut;
        ScopeNotFoundError, StreamNotFoundError.
        """
        self._steps.ready()
        config = check_reader_group_config(config)
        start: dict[str, int] = {}
        ends: dict[str, int] = {}
        for scoped in config.streams:
            s_scope, s_stream = parse_scoped_stream(scoped)
            head = self._head_of(s_scope, s_stream)
            first = config.start_cuts.get(scoped)
            last = config.end_cuts.get(scoped)
            records = self._store.streams
            for cut in (first, last):
                if cut is not None:
                    records.check_cut(s_scope, s_stream, cut.positions)
                    if cut is first:  # the clearer error first
                        self._check_not_truncated(s_scope, s_stream, cut.positions)
                    self._check_within(s_scope, s_stream, cut.positions)
            if first is not None:
                head = {
                    stream_segment_name(s_scope, s_stream, sid): offset
                    for sid, offset in first.positions.items()
                }
            if last is not None:
                for sid, offset in last.positions.items():
                    name = stream_segment_name(s_scope, s_stream, sid)
                    if head.get(name, 0) > offset:
                        raise InvalidArgumentError(
                            f"the end cut of {scoped} is before its start cut at {name}"
                        )
                    ends[name] = offset
            start.update(head)
        return start, ends

    def _check_within(self, scope: str, stream: str, positions: dict[int, int]) -> None:
        """InvalidArgumentError for an offset past its segment's end or not at an event
        boundary (readers would start mid-frame), or a segment gone."""
        for sid, offset in positions.items():
            name = stream_segment_name(scope, stream, sid)
            try:
                self._segments.check_event_boundary(name, offset)
            except SegmentNotFoundError:
                raise InvalidArgumentError(f"segment {name} of the cut is gone") from None

    def _check_not_truncated(self, scope: str, stream: str, positions: dict[int, int]) -> None:
        truncation = self._store.streams.truncation(scope, stream)
        current = {int(k): int(v) for k, v in truncation["cut"].items()}
        for sid, offset in positions.items():
            if truncated_away(truncation, sid) or offset < current.get(sid, 0):
                raise InvalidArgumentError(
                    f"the start cut of {scope}/{stream} is behind the stream's head "
                    f"(segment {sid} at {offset} was truncated away)"
                )

    def _head_of(self, scope: str, stream: str) -> dict[str, int]:
        """Where a new group starts reading ``scope/stream``: its head, the segments of epoch 0
        at offset 0, or the truncation cut once the stream was truncated (older segments are
        then gone). Readers reach later epochs through successors."""
        # As get_stream_info: StreamNotFoundError, damage named.
        self._steps.check_stream_names(scope, stream)
        self._store.get_stream_info(scope, stream)
        records = self._store.streams
        cut = records.truncation(scope, stream)["cut"]
        if cut:
            return {stream_segment_name(scope, stream, int(k)): int(v) for k, v in cut.items()}
        first = records.epoch(scope, stream, 0)
        assert first is not None
        return {stream_segment_name(scope, stream, sid): 0 for sid, _, _ in first.segments}

    def list_reader_groups(self, scope: str) -> list[str]:
        self._steps.check_scope(scope)
        return self._store.list_names("readergroups", scope)

    def get_reader_group(self, scope: str, group: str) -> dict[str, Any]:
        """The group's record: its state at creation, ``group_id`` and ``state_segment``
        (where its members keep the live state).

        A record from before state segments gets one now (seeded from the record by the
        first member that reads it). Raises ReaderGroupNotFoundError, ScopeNotFoundError,
        InvalidNameError, DataCorruptionError.
        """
        state, version = self._group(scope, group)
        if state.state_segment is None:
            state.state_segment = self._create_state_segment(state)
            self._store.save_reader_group(state, version)
        return state.to_dict()

    def delete_reader_group(self, scope: str, group: str) -> bool:
        """Delete the group and its state segment; False if it does not exist. Its readers'
        next syncs fail with ReaderGroupNotFoundError.

        The state segment goes first, so a crash in between leaves a record that a repeated
        delete removes. Raises ScopeNotFoundError, InvalidNameError, DataCorruptionError
        (a damaged record is not deleted blindly).
        """
        try:
            state = self._group(scope, group)[0]
        except ReaderGroupNotFoundError:
            return False
        segment = state.state_segment or reader_group_state_segment(scope, group, state.group_id)
        # A repeated delete, or a record from before state segments, finds none.
        with contextlib.suppress(SegmentNotFoundError):
            self._segments.delete_segment(segment)
        self._store.delete_reader_group(scope, group)
        # The group, whatever generation it reached, is no subscriber any more.
        for scoped in state.streams:
            with contextlib.suppress(StreamNotFoundError, ScopeNotFoundError):
                self._subscribers.delete_subscriber(
                    *parse_scoped_stream(scoped), f"{scope}/{group}", GENERATION_ALL
                )
        return True
