"""The controller: scopes, streams, key-value tables and reader groups, stored durably.

Minimal today (walking skeleton): streams have one epoch of a fixed number of
segments splitting the routing-key space [0, 1) evenly. Workflows follow the
controller seed's shape: a stream record is written first in state CREATING,
segments are created on their containers (idempotently), then the state moves
to ACTIVE; seal moves ACTIVE -> SEALING, seals every segment, -> SEALED. Every
state change goes through the transition table (``records.STATE_TRANSITIONS``).
A workflow interrupted by a crash is resumed on the next start, so the
controller can be killed at any point. Records are read and written through the
stream metadata store (``stream_metadata_store.py``); this module holds the
workflows and the checks of every argument.

Robustness:

* Every argument is checked before anything is stored (typed errors from
  ``pravega_ray.errors``); a configuration must survive its own ``from_dict(to_dict())``.
* A record that cannot be read or parsed is :class:`DataCorruptionError` naming it, for
  the calls that touch it; it is *quarantined* by the stream metadata store: logged,
  listed by :meth:`Controller.damaged_records`, never overwritten, and every other
  record keeps working (workflows are resumed one record at a time).
* Calls are safe to repeat after a lost reply where the client retries them
  (``client/controller_connection.py``): creates carry a ``request_id`` stored in the
  record, so a repeated create that had landed answers True; reader-group calls carry
  the reader's session and are idempotent (``reader_group_state.py``).
* Names are never reused: a key-value table re-created under a deleted one's name
  numbers its segments after the deleted one's (Pravega's safe starting segment
  number, kept in a ``deleted/`` record), so a client of the old table gets
  KeyValueTableNotFoundError instead of writing into the new one.

The controller reaches segment containers through :class:`SegmentStoreAdmin`
(Ray handles in the actor shell, direct calls in-process). Not thread-safe:
the actor shell serializes calls.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from pravega_ray.constants import KVT_PARTITIONS_MAX, READER_GROUP_OFFSETS_SAVE_INTERVAL_S
from pravega_ray.controller.reader_group_state import (
    Assignment,
    ReaderGroupState,
    check_offsets,
)
from pravega_ray.controller.records import (
    KeyValueTableInfo,
    KeyValueTableState,
    SegmentRange,
    StreamInfo,
    StreamState,
)
from pravega_ray.controller.stream_metadata_store import (
    MetadataStore,
    StreamMetadataStore,
    is_int,
)
from pravega_ray.errors import (
    IllegalStateError,
    InvalidArgumentError,
    PravegaError,
    ReaderGroupNotFoundError,
    RetriableError,
    ScopeNotEmptyError,
    ScopeNotFoundError,
    SegmentExistsError,
    SegmentNotFoundError,
)
from pravega_ray.naming import (
    parse_scoped_stream,
    validate_kvt_name,
    validate_name,
)
from pravega_ray.stream_configuration import ReaderGroupConfig, StreamConfiguration

log = logging.getLogger(__name__)

RESUME_RETRY_INTERVAL_S = 5.0
"""How soon a workflow whose resumption failed with an outcome-unknown error is tried again."""


class SegmentStoreAdmin(Protocol):
    """What the controller needs from segment containers (synchronous, retrying restarts)."""

    def create_segment(self, segment: str) -> None: ...

    def create_table_segment(self, segment: str) -> None: ...

    def seal_segment(self, segment: str) -> int: ...

    def delete_segment(self, segment: str) -> None: ...


def _check_request_id(request_id: object) -> None:
    if request_id is not None and not (isinstance(request_id, str) and 0 < len(request_id) <= 64):
        raise InvalidArgumentError("request_id must be None or a str of 1 to 64 characters")


class Controller:
    """Implements the controller's service surface
    (:class:`~pravega_ray.controller.service.ControllerService`) over the records of
    ``store`` (through a :class:`StreamMetadataStore`) and the segment containers reached
    through ``segments``."""

    def __init__(
        self,
        store: MetadataStore,
        segments: SegmentStoreAdmin,
        container_count: int,
        *,
        wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        monotonic: Callable[[], float] = time.monotonic,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    ) -> None:
        self._store = StreamMetadataStore(store)
        self._segments = segments
        self.container_count = container_count
        self._wall_clock_ms = wall_clock_ms
        self._monotonic = monotonic
        self._new_id = new_id
        self._resumed = False
        self._unresumed: dict[str, str] = {}  # key -> state, to retry (outcome unknown)
        self._last_resume = 0.0
        self._offsets_saved: dict[str, float] = {}  # group key -> when its offsets were stored

    # --- cluster -------------------------------------------------------------------------------
    def get_cluster_config(self) -> dict[str, Any]:
        return {"container_count": self.container_count}

    def damaged_records(self) -> dict[str, str]:
        """Records found damaged (key -> what is wrong): quarantined, never overwritten."""
        return self._store.damaged_records()

    def resume_workflows(self) -> int:
        """Finish create/seal/delete workflows a crash interrupted; returns how many finished.

        Each record is handled on its own: a damaged one is quarantined (logged, in
        :meth:`damaged_records`), one that fails with an outcome-unknown error is tried
        again later; neither stops the others or the calls that follow.
        """
        resumed = 0
        for scope in self.list_scopes():
            for kind in ("streams", "kvtables"):
                for key in self._store.list_keys(kind, scope):
                    resumed += self._resume(key)
        self._resumed = True
        self._last_resume = self._monotonic()
        if resumed:
            log.info("controller resumed %d interrupted workflows", resumed)
        return resumed

    def _finisher(self, kind: str, state: object) -> Callable[[str, str], None] | None:
        """The workflow step that finishes a record of ``kind`` left in ``state``, if any."""
        finishers: dict[str, dict[str, Callable[[str, str], None]]] = {
            "streams": {
                StreamState.CREATING.value: self._finish_create,
                StreamState.SEALING.value: self._finish_seal,
            },
            "kvtables": {
                KeyValueTableState.CREATING.value: self._finish_create_kvt,
                KeyValueTableState.DELETING.value: self._finish_delete_kvt,
            },
        }
        return finishers[kind].get(state) if isinstance(state, str) else None

    def _resume(self, key: str) -> int:
        """Finish the workflow of record ``key`` (``<kind>/<scope>/<name>``); 1 if one ran."""
        kind, scope, name = key.split("/", 2)
        try:
            finish = self._finisher(kind, self._store.record_state(key))
            if finish is None:
                return 0
            finish(scope, name)
        except RetriableError as e:
            log.warning("controller: resuming %s failed (%r); will retry", key, e)
            self._unresumed[key] = "retry"
            return 0
        except PravegaError as e:  # damage, here or reported by a container: leave it, say so
            self._store.quarantine(key, e)
            return 0
        self._unresumed.pop(key, None)
        return 1

    def _run_workflow(self, key: str, finish: Callable[[], None]) -> None:
        """Run a workflow step now; if its outcome is unknown, resume it again later too."""
        try:
            finish()
        except RetriableError:
            self._unresumed[key] = "retry"
            raise
        self._unresumed.pop(key, None)

    def _ready(self) -> None:
        if not self._resumed:
            self.resume_workflows()
        elif self._unresumed and (self._monotonic() - self._last_resume >= RESUME_RETRY_INTERVAL_S):
            self._last_resume = self._monotonic()
            for key in list(self._unresumed):
                self._resume(key)

    # --- scopes --------------------------------------------------------------------------------
    def create_scope(self, scope: str, request_id: str | None = None) -> bool:
        """Create ``scope``; False if it exists already (True again for a retried request)."""
        self._ready()
        validate_name("scope", scope)
        _check_request_id(request_id)
        existing = self._store.get_scope(scope)
        if existing is not None:
            return request_id is not None and existing.get("request_id") == request_id
        self._store.create_scope(scope, self._wall_clock_ms(), request_id)
        return True

    def list_scopes(self) -> list[str]:
        return self._store.list_scopes()

    def delete_scope(self, scope: str) -> bool:
        """Delete an empty scope; False if absent.

        ScopeNotEmptyError while it has streams, key-value tables or reader groups.
        """
        self._ready()
        validate_name("scope", scope)
        if self._store.get_scope(scope) is None:
            return False
        for kind in ("streams", "kvtables", "readergroups"):
            if self._store.list_keys(kind, scope):
                raise ScopeNotEmptyError(
                    f"scope {scope} still has streams, key-value tables or reader groups"
                )
        self._store.delete_scope(scope)
        return True

    def _check_scope(self, scope: str) -> None:
        validate_name("scope", scope)
        if self._store.get_scope(scope) is None:
            raise ScopeNotFoundError(f"scope {scope} does not exist")

    # --- streams -------------------------------------------------------------------------------
    def create_stream(
        self,
        scope: str,
        stream: str,
        config: StreamConfiguration | None,
        request_id: str | None = None,
    ) -> bool:
        """Create a stream with ``config.scaling.min_segments`` segments; False if it exists.

        Raises ScopeNotFoundError, InvalidNameError, InvalidArgumentError (config not a
        valid StreamConfiguration); nothing is stored then.
        """
        self._ready()
        self._check_scope(scope)
        validate_name("stream", stream)
        _check_request_id(request_id)
        config = config if config is not None else StreamConfiguration()
        if not isinstance(config, StreamConfiguration):
            raise InvalidArgumentError(
                f"config must be a StreamConfiguration, got {type(config).__name__}"
            )
        try:
            stored_config = config.to_dict()
            StreamConfiguration.from_dict(stored_config)  # what is stored must load again
        except InvalidArgumentError:
            raise
        except (AttributeError, TypeError, ValueError) as e:  # a tampered-with object
            raise InvalidArgumentError(f"config does not validate: {e!r}") from None
        key = f"streams/{scope}/{stream}"
        existing = self._store.get_stream_record(scope, stream)
        if existing is not None:
            # A damaged record is named, not "exists"; a create cut short is finished.
            if self.get_stream_info(scope, stream).state is StreamState.CREATING:
                self._run_workflow(key, lambda: self._finish_create(scope, stream))
            return request_id is not None and existing.get("request_id") == request_id
        self._store.create_stream(
            scope,
            stream,
            stored_config,
            config.scaling.min_segments,
            self._wall_clock_ms(),
            request_id,
        )
        self._run_workflow(key, lambda: self._finish_create(scope, stream))
        return True

    def _finish_create(self, scope: str, stream: str) -> None:
        for segment in self.get_stream_info(scope, stream).segments:
            # A segment created before a crash is fine: the workflow is idempotent.
            with contextlib.suppress(SegmentExistsError):
                self._segments.create_segment(segment.name)
        self._store.transition(scope, stream, StreamState.ACTIVE)

    def list_streams(self, scope: str) -> list[str]:
        self._check_scope(scope)
        return self._store.list_names("streams", scope)

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        """The stream's state, configuration and current segments.

        Raises ScopeNotFoundError, StreamNotFoundError, InvalidNameError, DataCorruptionError.
        """
        self._check_scope(scope)
        validate_name("stream", stream, allow_system=True)
        return self._store.get_stream_info(scope, stream)

    def get_current_segments(self, scope: str, stream: str) -> tuple[SegmentRange, ...]:
        return self.get_stream_info(scope, stream).segments

    def seal_stream(self, scope: str, stream: str) -> bool:
        """Seal every segment of the stream; True once SEALED (idempotent)."""
        self._ready()
        state = self.get_stream_info(scope, stream).state
        if state is StreamState.SEALED:
            return True
        key = f"streams/{scope}/{stream}"
        if state is StreamState.CREATING:  # a create interrupted earlier: finish it first
            self._run_workflow(key, lambda: self._finish_create(scope, stream))
        if state is not StreamState.SEALING:
            self._store.transition(scope, stream, StreamState.SEALING)
        self._run_workflow(key, lambda: self._finish_seal(scope, stream))
        return True

    def _finish_seal(self, scope: str, stream: str) -> None:
        for segment in self.get_current_segments(scope, stream):
            self._segments.seal_segment(segment.name)
        self._store.transition(scope, stream, StreamState.SEALED)

    # --- key-value tables -----------------------------------------------------------------------
    def create_key_value_table(
        self, scope: str, table: str, partitions: int, request_id: str | None = None
    ) -> bool:
        """Create a key-value table of ``partitions`` table segments; False if it exists.

        Raises ScopeNotFoundError, InvalidNameError, InvalidArgumentError (partitions
        outside [1, KVT_PARTITIONS_MAX]). A table of that name with another
        partition count is still "exists" (False): partitions are fixed at creation.
        """
        self._ready()
        self._check_scope(scope)
        validate_kvt_name(table)
        _check_request_id(request_id)
        if (
            isinstance(partitions, bool)
            or not isinstance(partitions, int)
            or not 1 <= partitions <= KVT_PARTITIONS_MAX
        ):
            raise InvalidArgumentError(f"partitions must be an int in [1, {KVT_PARTITIONS_MAX}]")
        key = f"kvtables/{scope}/{table}"
        existing = self._store.get_key_value_table_record(scope, table)
        if existing is not None:
            # A damaged record is named, not "exists"; a create cut short is finished.
            if self.get_key_value_table(scope, table).state is KeyValueTableState.CREATING:
                self._run_workflow(key, lambda: self._finish_create_kvt(scope, table))
            return request_id is not None and existing.get("request_id") == request_id
        self._store.create_key_value_table(
            scope, table, partitions, self._wall_clock_ms(), request_id
        )
        self._run_workflow(key, lambda: self._finish_create_kvt(scope, table))
        return True

    def _finish_create_kvt(self, scope: str, table: str) -> None:
        info = self.get_key_value_table(scope, table)
        for segment in info.segments:
            with contextlib.suppress(SegmentExistsError):  # idempotent after a crash
                self._segments.create_table_segment(segment)
        self._store.set_key_value_table_state(
            scope, table, KeyValueTableState.CREATING, KeyValueTableState.ACTIVE
        )

    def get_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        """The table's partitions and segments. Raises KeyValueTableNotFoundError."""
        self._check_scope(scope)
        validate_kvt_name(table)
        return self._store.get_key_value_table(scope, table)

    def get_active_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        """As :meth:`get_key_value_table`, but IllegalStateError unless it is ACTIVE."""
        self._ready()
        info = self.get_key_value_table(scope, table)
        if info.state is not KeyValueTableState.ACTIVE:
            raise IllegalStateError(f"key-value table {scope}/{table} is {info.state.value}")
        return info

    def list_key_value_tables(self, scope: str) -> list[str]:
        self._check_scope(scope)
        return self._store.list_names("kvtables", scope)

    def delete_key_value_table(self, scope: str, table: str) -> bool:
        """Delete the table and its segments; False if it does not exist."""
        self._ready()
        self._check_scope(scope)
        validate_kvt_name(table)
        if self._store.get_key_value_table_record(scope, table) is None:
            return False
        state = self.get_key_value_table(scope, table).state
        if state is not KeyValueTableState.DELETING:
            self._store.set_key_value_table_state(scope, table, state, KeyValueTableState.DELETING)
        key = f"kvtables/{scope}/{table}"
        self._run_workflow(key, lambda: self._finish_delete_kvt(scope, table))
        return True

    def _finish_delete_kvt(self, scope: str, table: str) -> None:
        info = self.get_key_value_table(scope, table)  # checks the record's fields
        record = self._store.get_key_value_table_record(scope, table) or {}
        next_number = record.get("segment_base", 0) + info.partitions
        # First the safe start for a re-created table, then the segments, then the record.
        if self._store.safe_start("kvtables", scope, table, 0) < next_number:
            self._store.remember_deleted("kvtables", scope, table, next_number)
        for segment in info.segments:
            with contextlib.suppress(SegmentNotFoundError):  # idempotent after a crash
                self._segments.delete_segment(segment)
        self._store.delete_key_value_table(scope, table)

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
        _check_request_id(request_id)
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
        assignment = state.sync(reader_id, session, offsets, list(completed))
        # Ownership changes are stored at once; offsets alone at most every
        # READER_GROUP_OFFSETS_SAVE_INTERVAL_S (readers report their exact offsets again
        # when they release a segment or leave), so syncs do not write a record each.
        key = f"{scope}/{group}"
        now = self._monotonic()
        owned_changed = {r: set(o) for r, o in before.items()} != {
            r: set(o) for r, o in state.assigned.items()
        }
        offsets_due = before != state.assigned and (
            now - self._offsets_saved.get(key, -math.inf) >= READER_GROUP_OFFSETS_SAVE_INTERVAL_S
        )
        if owned_changed or offsets_due:
            self._store.save_reader_group(state, version)
            self._offsets_saved[key] = now
        return assignment

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
