"""The controller's reader-group calls: a group's state as a versioned record.

A mixin of :class:`~pravega_ray.controller.controller.Controller`. The state itself (who
owns which segment at which offset) is :class:`ReaderGroupState`; these calls check
arguments, load it, apply one change and store it over the version read.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from pravega_ray.constants import READER_GROUP_OFFSETS_SAVE_INTERVAL_S
from pravega_ray.controller.reader_group_state import Assignment, ReaderGroupState, check_offsets
from pravega_ray.controller.records import SegmentRange, check_request_id
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore, is_int
from pravega_ray.errors import (
    InvalidArgumentError,
    PravegaError,
    ReaderGroupNotFoundError,
)
from pravega_ray.naming import (
    parse_scoped_stream,
    parse_segment_name,
    stream_segment_name,
    validate_name,
)
from pravega_ray.stream_configuration import ReaderGroupConfig

__all__ = ["ReaderGroupCalls"]

log = logging.getLogger(__name__)


class ReaderGroupCalls:
    """Reader-group calls; the controller provides the attributes annotated here."""

    _store: StreamMetadataStore
    _monotonic: Callable[[], float]
    _new_id: Callable[[], str]
    _offsets_saved: dict[str, float]
    _ready: Callable[[], None]
    _check_scope: Callable[[str], None]
    get_current_segments: Callable[[str, str], tuple[SegmentRange, ...]]

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
        self._ready()
        self._check_scope(scope)
        validate_name("reader group", group)
        check_request_id(request_id)
        if not isinstance(config, ReaderGroupConfig):
            raise InvalidArgumentError(
                f"config must be a ReaderGroupConfig, got {type(config).__name__}"
            )
        try:
            config = ReaderGroupConfig.from_dict(config.to_dict())  # what it says must load
        except InvalidArgumentError:
            raise
        except (AttributeError, TypeError, ValueError) as e:  # a tampered-with object
            raise InvalidArgumentError(f"config does not validate: {e!r}") from None
        existing = self._store.get_reader_group_record(scope, group)
        if existing is not None:
            self._group(scope, group)  # a damaged record is named, not "exists"
            return request_id is not None and existing.get("request_id") == request_id
        segments: list[str] = []
        for scoped in config.streams:
            s_scope, s_stream = parse_scoped_stream(scoped)
            segments += [s.name for s in self.get_current_segments(s_scope, s_stream)]
        state = ReaderGroupState.new(
            scope, group, list(config.streams), segments, self._new_id(), request_id
        )
        self._store.create_reader_group(state)
        return True

    def _group(self, scope: str, group: str) -> tuple[ReaderGroupState, int]:
        self._check_scope(scope)
        validate_name("reader group", group)
        return self._store.get_reader_group(scope, group)

    def list_reader_groups(self, scope: str) -> list[str]:
        self._check_scope(scope)
        return self._store.list_names("readergroups", scope)

    def get_reader_group(self, scope: str, group: str) -> dict[str, Any]:
        """The group's state as stored (``group_id``, owners, offsets)."""
        return self._group(scope, group)[0].to_dict()

    def delete_reader_group(self, scope: str, group: str) -> bool:
        """Delete the group; False if it does not exist. Its readers' next calls fail.

        Raises ScopeNotFoundError, InvalidNameError, DataCorruptionError (a damaged
        record is not deleted blindly).
        """
        try:
            self._group(scope, group)
        except ReaderGroupNotFoundError:
            return False
        self._store.delete_reader_group(scope, group)
        self._offsets_saved.pop(f"{scope}/{group}", None)
        return True

    # Reader calls. ``group_id`` (from joining, or from ``get_reader_group``) names the
    # incarnation the caller knows: ReaderGroupNotFoundError if the group was re-created
    # since. None skips that check (callers that do not know it yet).

    def reader_group_online_readers(
        self, scope: str, group: str, group_id: str | None = None
    ) -> list[str]:
        state = self._group(scope, group)[0]
        state.check_group_id(group_id)
        return state.readers

    def reader_group_reader_offline(
        self,
        scope: str,
        group: str,
        reader_id: str,
        offsets: dict[str, int] | None,
        group_id: str | None = None,
    ) -> bool:
        """Declare ``reader_id`` gone; its segments return at ``offsets`` (or as last synced)."""
        if offsets is not None:
            check_offsets(offsets)
        state, version = self._group(scope, group)
        state.check_group_id(group_id)
        if not state.reader_offline(reader_id, offsets):
            return False
        self._store.save_reader_group(state, version)
        return True

    def reader_group_add_reader(self, scope: str, group: str, reader_id: str, session: str) -> str:
        """Join ``reader_id`` with ``session``; returns the group id the reader must carry.

        A no-op for a repeated join of the same session; ReaderAlreadyExistsError if the
        id is online with another session.
        """
        _check_session(session)
        state, version = self._group(scope, group)
        joining = reader_id not in state.assigned
        state.add_reader(reader_id, session)  # a no-op for a repeated join of this session
        if joining:
            self._store.save_reader_group(state, version)
        return state.group_id

    def reader_group_remove_reader(
        self,
        scope: str,
        group: str,
        reader_id: str,
        session: str,
        offsets: dict[str, int] | None,
        group_id: str | None = None,
    ) -> bool:
        if offsets is not None:
            check_offsets(offsets)
        state, version = self._group(scope, group)
        state.check_group_id(group_id)
        if not state.remove_reader(reader_id, session, offsets):
            return False
        self._store.save_reader_group(state, version)
        return True

    def reader_group_sync(
        self,
        scope: str,
        group: str,
        reader_id: str,
        session: str,
        offsets: dict[str, int],
        completed: list[str],
        group_id: str | None = None,
    ) -> Assignment:
        check_offsets(offsets)
        if not isinstance(completed, list) or not all(isinstance(c, str) for c in completed):
            raise InvalidArgumentError("completed must be a list of segment names")
        state, version = self._group(scope, group)
        state.check_group_id(group_id)
        before = {r: dict(o) for r, o in state.assigned.items()}
        pool = (dict(state.unassigned), len(state.future), len(state.completed))
        assignment = state.sync(reader_id, session, offsets, list(completed), self._successors)
        # Ownership changes are stored at once; offsets alone at most every
        # READER_GROUP_OFFSETS_SAVE_INTERVAL_S (readers report their exact offsets again
        # when they release a segment or leave), so syncs do not write a record each.
        key = f"{scope}/{group}"
        now = self._monotonic()
        owned_changed = {r: set(o) for r, o in before.items()} != {
            r: set(o) for r, o in state.assigned.items()
        } or pool != (dict(state.unassigned), len(state.future), len(state.completed))
        offsets_due = before != state.assigned and (
            now - self._offsets_saved.get(key, -math.inf) >= READER_GROUP_OFFSETS_SAVE_INTERVAL_S
        )
        if owned_changed or offsets_due:
            self._store.save_reader_group(state, version)
            self._offsets_saved[key] = now
        return assignment

    def _successors(self, segment: str) -> dict[str, list[str]]:
        """The successors of a segment a reader read to its end, each with all its
        predecessors, by name (empty once its stream is sealed or deleted)."""
        try:
            name = parse_segment_name(segment)
            rows = self._store.streams.successors(name.scope, name.stream, name.segment_id)
        except PravegaError as e:  # the stream was deleted meanwhile: nothing follows
            log.info("no successors of %s: %s", segment, e)
            return {}
        return {
            stream_segment_name(name.scope, name.stream, row[0]): [
                stream_segment_name(name.scope, name.stream, p) for p in predecessors
            ]
            for row, predecessors in rows
        }

    def reader_group_release(
        self,
        scope: str,
        group: str,
        reader_id: str,
        session: str,
        segment: str,
        offset: int,
        group_id: str | None = None,
    ) -> None:
        if not is_int(offset) or offset < 0:
            raise InvalidArgumentError("offset must be an int >= 0")
        state, version = self._group(scope, group)
        state.check_group_id(group_id)
        if state.release(reader_id, session, segment, offset):
            self._store.save_reader_group(state, version)


def _check_session(session: object) -> None:
    if not isinstance(session, str) or not 0 < len(session) <= 64:
        raise InvalidArgumentError("a reader session is a str of 1 to 64 characters")
