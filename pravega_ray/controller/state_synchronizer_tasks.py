"""The controller's state-synchronizer calls: create (or look up), list and delete them.

A service of :class:`~pravega_ray.controller.controller.Controller`. A state synchronizer
(``client/state_synchronizer.py``, Pravega's ``StateSynchronizer``) keeps its state in a
table segment of the ``_system`` scope; the controller keeps its *record*
(``synchronizers/<scope>/<name>``: ``sync_id``, ``segment``) and creates and deletes the
segment, so a scope's synchronizers are listed with it, refuse an empty-scope delete
(ScopeNotEmptyError) and are removed by a recursive one (``scope_workflows.py``). The state
itself is read and changed by the clients, with conditional updates on the segment's
container: the controller is asked once per synchronizer object, never per update.

Every incarnation has its own id and segment (``contracts/state_synchronizer.py``), so a
synchronizer re-created under a deleted one's name starts from its own initial state.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, Protocol

from pravega_ray.contracts.state_synchronizer import check_sync_id, state_synchronizer_segment
from pravega_ray.controller.controller_steps import ControllerSteps
from pravega_ray.controller.stream_metadata_store import (
    MetadataStore,
    StreamMetadataStore,
    damaged,
)
from pravega_ray.errors import (
    ConflictingUpdateError,
    DataCorruptionError,
    SegmentExistsError,
    SegmentNotFoundError,
)
from pravega_ray.naming import validate_name

__all__ = ["StateSynchronizerSegments", "StateSynchronizerTasks", "synchronizer_key"]

log = logging.getLogger(__name__)

KIND = "synchronizers"
"""The records' kind (``StreamMetadataStore.list_keys``)."""


def synchronizer_key(scope: str, name: str) -> str:
    return f"{KIND}/{scope}/{name}"


class StateSynchronizerSegments(Protocol):
    """The segment calls state-synchronizer calls make (``SegmentHelper`` provides them)."""

    def create_table_segment(self, segment: str) -> None: ...

    def delete_segment(self, segment: str) -> None: ...


class StateSynchronizerTasks:
    """State-synchronizer calls over the records of ``store`` (its ``synchronizers/``
    records are read and written through ``records``, the store under it); ``new_id``
    gives each incarnation its id."""

    def __init__(
        self,
        store: StreamMetadataStore,
        records: MetadataStore,
        segments: StateSynchronizerSegments,
        steps: ControllerSteps,
        *,
        new_id: Callable[[], str],
    ) -> None:
        self._store = store
        self._records = records
        self._segments = segments
        self._steps = steps
        self._new_id = new_id

    def create_state_synchronizer(self, scope: str, name: str) -> dict[str, Any]:
        """The record of state synchronizer ``scope/name`` (``scope``, ``name``,
        ``sync_id``, ``segment``: the table segment holding its state), created with an
        empty segment if it does not exist. Safe to repeat: two creates racing end with
        the same record (the loser removes the segment it made).

        Raises InvalidNameError, ScopeNotFoundError, IllegalStateError (the scope is being
        deleted), DataCorruptionError (a damaged record: named, never replaced).
        """
        self._steps.ready()
        self._check_names(scope, name)
        self._steps.check_scope(scope)
        existing = self._get(scope, name)
        if existing is not None:
            return existing
        self._steps.check_scope_open(scope)
        sync_id = self._new_id()[:32]
        segment = state_synchronizer_segment(scope, name, sync_id)
        # The segment first: a crash before the record leaves an empty segment of an
        # incarnation nobody knows, never a record without its segment.
        with contextlib.suppress(SegmentExistsError):
            self._segments.create_table_segment(segment)
        record = {"scope": scope, "name": name, "sync_id": sync_id, "segment": segment}
        try:
            self._records.put(synchronizer_key(scope, name), record, None)
        except ConflictingUpdateError:  # another create stored first: theirs
            with contextlib.suppress(SegmentNotFoundError):
                self._segments.delete_segment(segment)
            winner = self._get(scope, name)
            if winner is None:  # stored and deleted meanwhile: try again from the start
                return self.create_state_synchronizer(scope, name)
            return winner
        self._steps.created_in_open_scope(
            scope,
            f"create of state synchronizer {scope}/{name}",
            lambda: self._undo_create(scope, name, sync_id, segment),
        )
        log.info("controller: state synchronizer %s/%s created in %s", scope, name, segment)
        return record

    def list_state_synchronizers(self, scope: str) -> list[str]:
        """The state synchronizers of ``scope``, sorted (damaged records too).

        Raises InvalidNameError, ScopeNotFoundError.
        """
        self._steps.check_scope(scope)
        return self._store.list_names(KIND, scope)

    def delete_state_synchronizer(self, scope: str, name: str) -> bool:
        """Delete the synchronizer and its segment; False if it does not exist. Clients
        of it get StateSynchronizerNotFoundError at their next call to its segment.

        The segment goes first, so a crash in between leaves a record that a repeated
        delete removes. Raises InvalidNameError, ScopeNotFoundError, DataCorruptionError
        (a damaged record is not deleted blindly).
        """
        self._steps.ready()
        self._check_names(scope, name)
        self._steps.check_scope(scope)
        record = self._get(scope, name)
        if record is None:
            return False
        with contextlib.suppress(SegmentNotFoundError):  # a repeated delete
            self._segments.delete_segment(record["segment"])
        self._records.delete(synchronizer_key(scope, name))
        return True

    # --- helpers ---------------------------------------------------------------------------------
    @staticmethod
    def _check_names(scope: str, name: str) -> None:
        validate_name("scope", scope)
        validate_name("state synchronizer", name)

    def _get(self, scope: str, name: str) -> dict[str, Any] | None:
        """The record (None if absent); a damaged one is quarantined and raised."""
        key = synchronizer_key(scope, name)
        try:
            stored = self._records.get(key)
            if stored is None:
                return None
            record = dict(stored.value)
            sync_id = check_sync_id(record.get("sync_id"))
            if record.get("segment") != state_synchronizer_segment(scope, name, sync_id):
                raise ValueError(f"segment {record.get('segment')!r} is not its segment")
        except DataCorruptionError as e:
            self._store.quarantine(key, e)
            raise
        except (ValueError, TypeError, KeyError) as e:  # InvalidArgumentError too
            error = damaged(key, f"{type(e).__name__}: {e}")
            self._store.quarantine(key, error)
            raise error from None
        return {"scope": scope, "name": name, "sync_id": sync_id, "segment": record["segment"]}

    def _undo_create(self, scope: str, name: str, sync_id: str, segment: str) -> None:
        """Remove a synchronizer just created in a scope being deleted (what a recursive
        delete removed meanwhile is fine)."""
        with contextlib.suppress(SegmentNotFoundError):
            self._segments.delete_segment(segment)
        stored = self._records.get(synchronizer_key(scope, name))
        if stored is not None and stored.value.get("sync_id") == sync_id:
            self._records.delete(synchronizer_key(scope, name))
