"""The controller's key-value table calls (Pravega's ``TableMetadataTasks``).

A service of :class:`~pravega_ray.controller.controller.Controller`: create is a task
(record in CREATING, table segments created idempotently, then ACTIVE; resumed after a
crash), delete moves the record to DELETING, remembers the numbers the name used (so a
re-created table never reuses a segment), deletes the segments, then the record.

Thread-safe, and safe beside other controller instances on the same records (records change
by compare-and-set only; a create finished by two callers at once completes once).
"""

from __future__ import annotations

import contextlib
from typing import Protocol

from pravega_ray.constants import KVT_PARTITIONS_MAX
from pravega_ray.contracts.records import (
    KeyValueTableInfo,
    KeyValueTableState,
    check_key_lengths,
    check_request_id,
)
from pravega_ray.controller.controller_steps import ControllerSteps, create_racing
from pravega_ray.controller.segment_helper import run_each
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.errors import (
    ConflictingUpdateError,
    IllegalStateError,
    IllegalStateTransitionError,
    InvalidArgumentError,
    SegmentExistsError,
    SegmentNotFoundError,
)
from pravega_ray.naming import validate_kvt_name, validate_name
from pravega_ray.timing import Clock

__all__ = ["TableMetadataTasks", "TableSegments"]


class TableSegments(Protocol):
    """The segment calls key-value table calls make (``SegmentHelper`` provides them)."""

    def create_table_segment(self, segment: str) -> None: ...

    def delete_segment(self, segment: str) -> None: ...


class TableMetadataTasks:
    """Key-value table calls over the records of ``store`` (module docstring)."""

    def __init__(
        self,
        store: StreamMetadataStore,
        segments: TableSegments,
        steps: ControllerSteps,
        clock: Clock,
    ) -> None:
        self._store = store
        self._segments = segments
        self._steps = steps
        self._clock = clock
        steps.add_finisher("kvtables", KeyValueTableState.CREATING.value, self._finish_create)
        steps.add_finisher("kvtables", KeyValueTableState.DELETING.value, self._finish_delete)

    # --- key-value tables -----------------------------------------------------------------------
    def _table_args(self, scope: str, table: str) -> None:
        """Both names first (InvalidNameError), then the scope (ScopeNotFoundError)."""
        validate_name("scope", scope)
        validate_kvt_name(table)
        self._steps.check_scope(scope)

    def create_key_value_table(
        self,
        scope: str,
        table: str,
        partitions: int,
        request_id: str | None = None,
        primary_key_length: int | None = None,
        secondary_key_length: int | None = None,
    ) -> bool:
        """Create a key-value table of ``partitions`` table segments; False if it exists.

        With ``primary_key_length`` the table has key families (``check_key_lengths``),
        kept in its record. Raises ScopeNotFoundError, InvalidNameError,
        InvalidArgumentError (partitions outside [1, KVT_PARTITIONS_MAX], bad key
        lengths). A table of that name with another partition count or other key lengths
        is still "exists" (False): both are fixed at creation.
        """
        self._steps.ready()
        self._table_args(scope, table)
        self._steps.check_scope_open(scope)
        check_request_id(request_id)
        if (
            isinstance(partitions, bool)
            or not isinstance(partitions, int)
            or not 1 <= partitions <= KVT_PARTITIONS_MAX
        ):
            raise InvalidArgumentError(f"partitions must be an int in [1, {KVT_PARTITIONS_MAX}]")
        primary, secondary = check_key_lengths(primary_key_length, secondary_key_length)
        lengths = None if primary is None or secondary is None else (primary, secondary)
        key = f"kvtables/{scope}/{table}"
        existing = create_racing(
            lambda: self._store.get_key_value_table_record(scope, table),
            lambda: self._store.create_key_value_table(
                scope, table, partitions, self._clock.wall_time_ms(), request_id, lengths
            ),
            f"key-value table {scope}/{table}",
        )
        if existing is None:
            self._steps.created_in_open_scope(
                scope,
                f"create of key-value table {scope}/{table}",
                lambda: self._undo_create(scope, table),
            )
            self._steps.run_workflow(key, lambda: self._finish_create(scope, table))
            return True
        # A damaged record is named, not "exists"; a create cut short is finished.
        if self.get_key_value_table(scope, table).state is KeyValueTableState.CREATING:
            self._steps.run_workflow(key, lambda: self._finish_create(scope, table))
        return request_id is not None and existing.get("request_id") == request_id

    def _undo_create(self, scope: str, table: str) -> None:
        """Remove the record of a table just created (CREATING, no segment yet) in a scope
        being deleted; one a recursive delete removed meanwhile is fine."""
        record = self._store.get_key_value_table_record(scope, table)
        if record is not None and record.get("state") == KeyValueTableState.CREATING.value:
            self._store.delete_key_value_table(scope, table)

    def _finish_create(self, scope: str, table: str) -> None:
        """Create the table segments side by side, then make the table ACTIVE. Idempotent:
        after a crash, and beside another caller (instance) finishing the same create."""
        info = self.get_key_value_table(scope, table)
        if info.state is not KeyValueTableState.CREATING:
            return

        def create(segment: str) -> None:
            with contextlib.suppress(SegmentExistsError):  # idempotent after a crash
                self._segments.create_table_segment(segment)

        run_each(create, info.segments)
        try:
            self._store.set_key_value_table_state(
                scope, table, KeyValueTableState.CREATING, KeyValueTableState.ACTIVE
            )
        except (IllegalStateTransitionError, ConflictingUpdateError):
            if self.get_key_value_table(scope, table).state is KeyValueTableState.CREATING:
                raise  # not another caller's finish: the error stands

    def get_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        """The table's partitions and segments. Raises KeyValueTableNotFoundError."""
        self._table_args(scope, table)
        return self._store.get_key_value_table(scope, table)

    def get_active_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        """As :meth:`get_key_value_table`, but IllegalStateError unless it is ACTIVE."""
        self._steps.ready()
        info = self.get_key_value_table(scope, table)
        if info.state is not KeyValueTableState.ACTIVE:
            raise IllegalStateError(f"key-value table {scope}/{table} is {info.state.value}")
        return info

    def list_key_value_tables(self, scope: str) -> list[str]:
        self._steps.check_scope(scope)
        return self._store.list_names("kvtables", scope)

    def delete_key_value_table(self, scope: str, table: str) -> bool:
        """Delete the table and its segments; False if it does not exist."""
        self._steps.ready()
        self._table_args(scope, table)
        if self._store.get_key_value_table_record(scope, table) is None:
            return False
        state = self.get_key_value_table(scope, table).state
        if state is not KeyValueTableState.DELETING:
            self._store.set_key_value_table_state(scope, table, state, KeyValueTableState.DELETING)
        key = f"kvtables/{scope}/{table}"
        self._steps.run_workflow(key, lambda: self._finish_delete(scope, table))
        return True

    def _finish_delete(self, scope: str, table: str) -> None:
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
