"""The controller: scopes, streams and reader groups, stored durably.

Minimal today (walking skeleton): streams have one epoch of a fixed number of
segments splitting the routing-key space [0, 1) evenly. Workflows follow the
controller seed's shape: a stream record is written first in state CREATING,
segments are created on their containers (idempotently), then the state moves
to ACTIVE; seal moves ACTIVE -> SEALING, seals every segment, -> SEALED. Every
state change goes through the transition table (``records.STATE_TRANSITIONS``).
A workflow interrupted by a crash is resumed on the next start, so the
controller can be killed at any point.

The controller reaches segment containers through :class:`SegmentStoreAdmin`
(Ray handles in the actor shell, direct calls in-process). Not thread-safe:
the actor shell serializes calls.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from pravega_ray.client.reader_group_state import Assignment, ReaderGroupState
from pravega_ray.constants import KVT_PARTITIONS_MAX
from pravega_ray.controller.metadata_store import MetadataStore
from pravega_ray.controller.records import (
    STATE_TRANSITIONS,
    KeyValueTableInfo,
    KeyValueTableState,
    SegmentRange,
    StreamInfo,
    StreamState,
)
from pravega_ray.errors import (
    IllegalStateError,
    IllegalStateTransitionError,
    InvalidArgumentError,
    KeyValueTableNotFoundError,
    ReaderGroupNotFoundError,
    ScopeNotEmptyError,
    ScopeNotFoundError,
    SegmentExistsError,
    SegmentNotFoundError,
    StreamNotFoundError,
)
from pravega_ray.naming import (
    kvt_segment_name,
    parse_scoped_stream,
    segment_id,
    stream_segment_name,
    validate_kvt_name,
    validate_name,
)
from pravega_ray.stream_configuration import ReaderGroupConfig, StreamConfiguration

log = logging.getLogger(__name__)


class SegmentStoreAdmin(Protocol):
    """What the controller needs from segment containers (synchronous, retrying restarts)."""

    def create_segment(self, segment: str) -> None: ...

    def create_table_segment(self, segment: str) -> None: ...

    def seal_segment(self, segment: str) -> int: ...

    def delete_segment(self, segment: str) -> None: ...


class Controller:
    def __init__(
        self,
        store: MetadataStore,
        segments: SegmentStoreAdmin,
        container_count: int,
        *,
        wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._store = store
        self._segments = segments
        self.container_count = container_count
        self._wall_clock_ms = wall_clock_ms
        self._resumed = False

    # --- cluster -------------------------------------------------------------------------------
    def get_cluster_config(self) -> dict[str, Any]:
        return {"container_count": self.container_count}

    def resume_workflows(self) -> int:
        """Finish create/seal workflows a crash interrupted. Returns how many were resumed."""
        resumed = 0
        for scope in self.list_scopes():
            resumed += self._resume(
                scope,
                f"streams/{scope}",
                {
                    StreamState.CREATING.value: self._finish_create,
                    StreamState.SEALING.value: self._finish_seal,
                },
            )
            resumed += self._resume(
                scope,
                f"kvtables/{scope}",
                {
                    KeyValueTableState.CREATING.value: self._finish_create_kvt,
                    KeyValueTableState.DELETING.value: self._finish_delete_kvt,
                },
            )
        self._resumed = True
        if resumed:
            log.info("controller resumed %d interrupted workflows", resumed)
        return resumed

    def _resume(
        self, scope: str, prefix: str, finishers: dict[str, Callable[[str, str], None]]
    ) -> int:
        """Finish every record under ``prefix`` whose state has a finisher; returns how many."""
        resumed = 0
        for key in self._store.list_keys(prefix):
            record = self._store.get(key)
            finish = finishers.get(record.value["state"]) if record is not None else None
            if finish is not None:
                finish(scope, key.rsplit("/", 1)[1])
                resumed += 1
        return resumed

    def _ready(self) -> None:
        if not self._resumed:
            self.resume_workflows()

    # --- scopes --------------------------------------------------------------------------------
    def create_scope(self, scope: str) -> bool:
        """Create ``scope``; False if it exists already."""
        self._ready()
        validate_name("scope", scope)
        if self._store.get(f"scopes/{scope}") is not None:
            return False
        self._store.put(f"scopes/{scope}", {"created_ms": self._wall_clock_ms()}, None)
        return True

    def list_scopes(self) -> list[str]:
        return [k.rsplit("/", 1)[1] for k in self._store.list_keys("scopes")]

    def delete_scope(self, scope: str) -> bool:
        self._ready()
        validate_name("scope", scope)
        if self._store.get(f"scopes/{scope}") is None:
            return False
        if self._store.list_keys(f"streams/{scope}") or self._store.list_keys(f"kvtables/{scope}"):
            raise ScopeNotEmptyError(f"scope {scope} still has streams or key-value tables")
        self._store.delete(f"scopes/{scope}")
        return True

    def _check_scope(self, scope: str) -> None:
        validate_name("scope", scope)
        if self._store.get(f"scopes/{scope}") is None:
            raise ScopeNotFoundError(f"scope {scope} does not exist")

    # --- streams -------------------------------------------------------------------------------
    def create_stream(self, scope: str, stream: str, config: StreamConfiguration | None) -> bool:
        """Create a stream with ``config.scaling.min_segments`` segments; False if it exists."""
        self._ready()
        self._check_scope(scope)
        validate_name("stream", stream)
        config = config if config is not None else StreamConfiguration()
        if not isinstance(config, StreamConfiguration):
            raise InvalidArgumentError("config must be a StreamConfiguration")
        key = f"streams/{scope}/{stream}"
        if self._store.get(key) is not None:
            return False
        count = config.scaling.min_segments
        record = {
            "state": StreamState.CREATING.value,
            "config": config.to_dict(),
            "created_ms": self._wall_clock_ms(),
            # History table, one row per epoch: [[segment_id, key_low, key_high], ...].
            "epochs": [[[segment_id(0, i), i / count, (i + 1) / count] for i in range(count)]],
        }
        self._store.put(key, record, None)
        self._finish_create(scope, stream)
        return True

    def _finish_create(self, scope: str, stream: str) -> None:
        record = self._store.get(f"streams/{scope}/{stream}")
        assert record is not None
        for sid, _, _ in record.value["epochs"][-1]:
            # A segment created before a crash is fine: the workflow is idempotent.
            with contextlib.suppress(SegmentExistsError):
                self._segments.create_segment(stream_segment_name(scope, stream, sid))
        self._transition(scope, stream, StreamState.ACTIVE)

    def _transition(self, scope: str, stream: str, to: StreamState) -> None:
        key = f"streams/{scope}/{stream}"
        record = self._store.get(key)
        if record is None:
            raise StreamNotFoundError(f"stream {scope}/{stream} does not exist")
        current = StreamState(record.value["state"])
        if to not in STATE_TRANSITIONS[current]:
            raise IllegalStateTransitionError(
                f"stream {scope}/{stream} cannot go from {current.value} to {to.value}"
            )
        self._store.put(key, {**record.value, "state": to.value}, record.version)

    def _record(self, scope: str, stream: str) -> dict[str, Any]:
        self._check_scope(scope)
        validate_name("stream", stream, allow_system=True)
        record = self._store.get(f"streams/{scope}/{stream}")
        if record is None:
            raise StreamNotFoundError(f"stream {scope}/{stream} does not exist")
        return record.value

    def list_streams(self, scope: str) -> list[str]:
        self._check_scope(scope)
        return [k.rsplit("/", 1)[1] for k in self._store.list_keys(f"streams/{scope}")]

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        record = self._record(scope, stream)
        epochs = record["epochs"]
        return StreamInfo(
            scope=scope,
            stream=stream,
            state=StreamState(record["state"]),
            configuration=StreamConfiguration.from_dict(record["config"]),
            epoch=len(epochs) - 1,
            segments=tuple(
                SegmentRange(scope, stream, sid, stream_segment_name(scope, stream, sid), lo, hi)
                for sid, lo, hi in epochs[-1]
            ),
            creation_time_ms=record["created_ms"],
        )

    def get_current_segments(self, scope: str, stream: str) -> tuple[SegmentRange, ...]:
        return self.get_stream_info(scope, stream).segments

    def seal_stream(self, scope: str, stream: str) -> bool:
        """Seal every segment of the stream; True once SEALED (idempotent)."""
        self._ready()
        state = StreamState(self._record(scope, stream)["state"])
        if state is StreamState.SEALED:
            return True
        if state is not StreamState.SEALING:
            self._transition(scope, stream, StreamState.SEALING)
        self._finish_seal(scope, stream)
        return True

    def _finish_seal(self, scope: str, stream: str) -> None:
        for segment in self.get_current_segments(scope, stream):
            self._segments.seal_segment(segment.name)
        self._transition(scope, stream, StreamState.SEALED)

    # --- key-value tables -----------------------------------------------------------------------
    def create_key_value_table(self, scope: str, table: str, partitions: int) -> bool:
        """Create a key-value table of ``partitions`` table segments; False if it exists.

        Raises ScopeNotFoundError, InvalidNameError, InvalidArgumentError (partitions
        outside [1, KVT_PARTITIONS_MAX]). A table of that name with another
        partition count is still "exists" (False): partitions are fixed at creation.
        """
        self._ready()
        self._check_scope(scope)
        validate_kvt_name(table)
        if (
            isinstance(partitions, bool)
            or not isinstance(partitions, int)
            or not 1 <= partitions <= KVT_PARTITIONS_MAX
        ):
            raise InvalidArgumentError(f"partitions must be an int in [1, {KVT_PARTITIONS_MAX}]")
        key = f"kvtables/{scope}/{table}"
        if self._store.get(key) is not None:
            return False
        record = {
            "state": KeyValueTableState.CREATING.value,
            "partitions": partitions,
            "created_ms": self._wall_clock_ms(),
        }
        self._store.put(key, record, None)
        self._finish_create_kvt(scope, table)
        return True

    def _finish_create_kvt(self, scope: str, table: str) -> None:
        info = self.get_key_value_table(scope, table)
        for segment in info.segments:
            with contextlib.suppress(SegmentExistsError):  # idempotent after a crash
                self._segments.create_table_segment(segment)
        self._set_kvt_state(scope, table, KeyValueTableState.CREATING, KeyValueTableState.ACTIVE)

    def _set_kvt_state(
        self, scope: str, table: str, expected: KeyValueTableState, to: KeyValueTableState
    ) -> None:
        key = f"kvtables/{scope}/{table}"
        record = self._store.get(key)
        if record is None:
            raise KeyValueTableNotFoundError(f"key-value table {scope}/{table} does not exist")
        if record.value["state"] != expected.value:
            raise IllegalStateTransitionError(
                f"key-value table {scope}/{table} is {record.value['state']}, not {expected.value}"
            )
        self._store.put(key, {**record.value, "state": to.value}, record.version)

    def get_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        """The table's partitions and segments. Raises KeyValueTableNotFoundError."""
        self._check_scope(scope)
        validate_kvt_name(table)
        record = self._store.get(f"kvtables/{scope}/{table}")
        if record is None:
            raise KeyValueTableNotFoundError(f"key-value table {scope}/{table} does not exist")
        partitions = record.value["partitions"]
        return KeyValueTableInfo(
            scope=scope,
            name=table,
            state=KeyValueTableState(record.value["state"]),
            partitions=partitions,
            segments=tuple(kvt_segment_name(scope, table, i) for i in range(partitions)),
            creation_time_ms=record.value["created_ms"],
        )

    def get_active_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        """As :meth:`get_key_value_table`, but IllegalStateError unless it is ACTIVE."""
        self._ready()
        info = self.get_key_value_table(scope, table)
        if info.state is not KeyValueTableState.ACTIVE:
            raise IllegalStateError(f"key-value table {scope}/{table} is {info.state.value}")
        return info

    def list_key_value_tables(self, scope: str) -> list[str]:
        self._check_scope(scope)
        return [k.rsplit("/", 1)[1] for k in self._store.list_keys(f"kvtables/{scope}")]

    def delete_key_value_table(self, scope: str, table: str) -> bool:
        """Delete the table and its segments; False if it does not exist."""
        self._ready()
        self._check_scope(scope)
        validate_kvt_name(table)
        record = self._store.get(f"kvtables/{scope}/{table}")
        if record is None:
            return False
        if record.value["state"] != KeyValueTableState.DELETING.value:
            self._set_kvt_state(
                scope,
                table,
                KeyValueTableState(record.value["state"]),
                KeyValueTableState.DELETING,
            )
        self._finish_delete_kvt(scope, table)
        return True

    def _finish_delete_kvt(self, scope: str, table: str) -> None:
        for segment in self.get_key_value_table(scope, table).segments:
            with contextlib.suppress(SegmentNotFoundError):  # idempotent after a crash
                self._segments.delete_segment(segment)
        self._store.delete(f"kvtables/{scope}/{table}")

    # --- reader groups -------------------------------------------------------------------------
    def create_reader_group(self, scope: str, group: str, config: ReaderGroupConfig) -> bool:
        """Create a reader group at the head of its streams; False if it exists."""
        self._ready()
        self._check_scope(scope)
        validate_name("reader group", group)
        if not isinstance(config, ReaderGroupConfig):
            raise InvalidArgumentError("config must be a ReaderGroupConfig")
        key = f"readergroups/{scope}/{group}"
        if self._store.get(key) is not None:
            return False
        segments: list[str] = []
        for scoped in config.streams:
            s_scope, s_stream = parse_scoped_stream(scoped)
            segments += [s.name for s in self.get_current_segments(s_scope, s_stream)]
        state = ReaderGroupState.new(scope, group, list(config.streams), segments)
        self._store.put(key, state.to_dict(), None)
        return True

    def _group(self, scope: str, group: str) -> tuple[ReaderGroupState, int]:
        validate_name("scope", scope)
        validate_name("reader group", group)
        record = self._store.get(f"readergroups/{scope}/{group}")
        if record is None:
            raise ReaderGroupNotFoundError(f"reader group {scope}/{group} does not exist")
        return ReaderGroupState.from_dict(record.value), record.version

    def _save_group(self, state: ReaderGroupState, version: int) -> None:
        self._store.put(f"readergroups/{state.scope}/{state.name}", state.to_dict(), version)

    def get_reader_group(self, scope: str, group: str) -> dict[str, Any]:
        return self._group(scope, group)[0].to_dict()

    def delete_reader_group(self, scope: str, group: str) -> bool:
        self._group(scope, group)
        self._store.delete(f"readergroups/{scope}/{group}")
        return True

    def reader_group_add_reader(self, scope: str, group: str, reader_id: str) -> None:
        state, version = self._group(scope, group)
        state.add_reader(reader_id)
        self._save_group(state, version)

    def reader_group_remove_reader(
        self, scope: str, group: str, reader_id: str, offsets: dict[str, int] | None
    ) -> None:
        state, version = self._group(scope, group)
        state.remove_reader(reader_id, offsets)
        self._save_group(state, version)

    def reader_group_sync(
        self, scope: str, group: str, reader_id: str, offsets: dict[str, int], completed: list[str]
    ) -> Assignment:
        state, version = self._group(scope, group)
        owned_before = {r: set(o) for r, o in state.assigned.items()}
        assignment = state.sync(reader_id, offsets, completed)
        # Persist ownership changes; offsets alone are re-reported by readers on release/leave.
        if owned_before != {r: set(o) for r, o in state.assigned.items()}:
            self._save_group(state, version)
        return assignment

    def reader_group_release(
        self, scope: str, group: str, reader_id: str, segment: str, offset: int
    ) -> None:
        state, version = self._group(scope, group)
        state.release(reader_id, segment, offset)
        self._save_group(state, version)
