"""The steps every controller service shares: being ready, checking names, running a
workflow step, posting a request.

One :class:`ControllerSteps` is made by the :class:`~pravega_ray.controller.controller.Controller`
and handed to each of its services (``stream_metadata_tasks.py``,
``stream_transaction_metadata_tasks.py``, ``table_metadata_tasks.py``,
``reader_group_tasks.py``, ``stream_cut_tasks.py``, ``subscriber_tasks.py``):

* **Ready** (:meth:`ControllerSteps.ready`): the first call that changes something first
  finishes the create, seal and delete workflows a crash interrupted (as Pravega's
  ``TaskSweeper`` does for a failed controller's tasks), one record at a time; a record
  whose workflow failed with an outcome-unknown error is tried again, at most every
  ``RESUME_RETRY_INTERVAL_S`` of the clock. Which step finishes a record of which kind
  in which state is registered by the service that owns it (:meth:`add_finisher`).
* **Checks** (:meth:`check_scope`, :meth:`check_stream_names`, :meth:`check_stream`):
  names first (InvalidNameError), then existence (ScopeNotFoundError,
  StreamNotFoundError).
* **Posting** (:meth:`post`): a workflow request to the internal request stream, stamped
  with the clock's wall time (the request event processor expires it from there).

Thread-safe: an instance runs many calls at once. The first resumption runs once, and the
calls that change something wait for it; a retry round runs on one caller's thread while the
others go on. Several controller instances may resume the same record: every finisher is
idempotent and tolerates another caller finishing the same workflow meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from pravega_ray.contracts.records import StreamState
from pravega_ray.controller.request_stream import RequestStream
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.errors import (
    ConflictingUpdateError,
    DataCorruptionError,
    IllegalStateError,
    PravegaError,
    RetriableError,
    ScopeNotFoundError,
)
from pravega_ray.naming import validate_name, validate_stream_name
from pravega_ray.timing import Clock

__all__ = [
    "CREATE_RACE_ATTEMPTS",
    "RESUME_RETRY_INTERVAL_S",
    "ControllerSteps",
    "Finisher",
    "create_racing",
]

log = logging.getLogger(__name__)

RESUME_RETRY_INTERVAL_S = 5.0
"""How soon a workflow whose resumption failed with an outcome-unknown error is tried again."""

Finisher = Callable[[str, str], None]
"""A workflow step that finishes the record of ``(scope, name)``."""

CREATE_RACE_ATTEMPTS = 20
"""How often a create looks again when another create of the same name won the write
between its look and its write (the winner's record may not be readable yet)."""

V = TypeVar("V")


def create_racing(read: Callable[[], V | None], write: Callable[[], None], what: str) -> V | None:
    """Create a record unless it exists: None if ``write`` (which raises
    ConflictingUpdateError if the record exists) created it, else the record ``read`` found.

    Creates of one name may race (threads of an instance, instances): the loser's write
    fails, and it looks again until it reads the winner's record. ConflictingUpdateError
    (``what`` is being created) after ``CREATE_RACE_ATTEMPTS`` looks.
    """
    for _ in range(CREATE_RACE_ATTEMPTS):
        existing = read()
        if existing is not None:
            return existing
        try:
            write()
        except ConflictingUpdateError:
            continue
        return None
    raise ConflictingUpdateError(f"{what} is being created by another call; try again")


class ControllerSteps:
    """The shared steps over the records of ``store`` (module docstring)."""

    def __init__(self, store: StreamMetadataStore, requests: RequestStream, clock: Clock) -> None:
        self._store = store
        self._requests = requests
        self._clock = clock
        self._finishers: dict[str, dict[str, Finisher]] = {}  # kind -> state -> step
        self._resumed = False
        self._unresumed: dict[str, str] = {}  # key -> state, to retry (outcome unknown)
        self._last_resume = 0.0
        self._resuming = threading.Lock()  # one resumption (first or retry round) at a time
        self._lock = threading.Lock()  # guards _unresumed

    # --- interrupted workflows -------------------------------------------------------------------
    def add_finisher(self, kind: str, state: str, finish: Finisher) -> None:
        """Resume records of ``kind`` (``streams``, ``kvtables``) left in ``state`` with
        ``finish``; kinds are resumed in the order they were first added. Called while the
        services are built, before any call."""
        self._finishers.setdefault(kind, {})[state] = finish

    def resume_workflows(self) -> int:
        """Finish create/seal/delete workflows a crash interrupted; returns how many finished.

        Each record is handled on its own: a damaged one is quarantined (logged, in
        ``damaged_records``), one that fails with an outcome-unknown error is tried
        again later; neither stops the others or the calls that follow. One resumption runs
        at a time (a concurrent one waits for it, then runs).
        """
        with self._resuming:
            return self._resume_all()

    def _resume_all(self) -> int:
        resumed = 0
        for scope in self._store.list_scopes():
            resumed += self._resume_scope_delete(scope)
            for kind in self._finishers:
                try:
                    keys = self._store.list_keys(kind, scope)
                except DataCorruptionError as e:  # their records' calls answer it; not the rest
                    self._store.quarantine(f"{kind}/{scope}/*", e)
                    continue
                for key in keys:
                    resumed += self._resume(key)
        self._resumed = True
        self._last_resume = self._clock.monotonic()
        if resumed:
            log.info("controller resumed %d interrupted workflows", resumed)
        return resumed

    def _resume_scope_delete(self, scope: str) -> int:
        """Post the delete request of a scope marked DELETING again (its first post may
        have been cut short); 1 if posted. A duplicate request is harmless."""
        try:
            if not self._store.scope_deleting(scope):
                return 0
            self.post("delete_scope", scope, "")
        except RetriableError as e:
            log.warning("controller: resuming the delete of scope %s failed (%r)", scope, e)
            return 0
        except PravegaError as e:  # a damaged scope record: quarantined by the read
            log.warning("controller: scope %s not resumed: %r", scope, e)
            return 0
        return 1

    def _finisher(self, kind: str, state: object) -> Finisher | None:
        """The workflow step that finishes a record of ``kind`` left in ``state``, if any."""
        return self._finishers[kind].get(state) if isinstance(state, str) else None

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
            with self._lock:
                self._unresumed[key] = "retry"
            return 0
        except PravegaError as e:  # damage, here or reported by a container: leave it, say so
            self._store.quarantine(key, e)
            return 0
        with self._lock:
            self._unresumed.pop(key, None)
        return 1

    def run_workflow(self, key: str, finish: Callable[[], None]) -> None:
        """Run a workflow step now; if its outcome is unknown, resume it again later too."""
        try:
            finish()
        except RetriableError:
            with self._lock:
                self._unresumed[key] = "retry"
            raise
        with self._lock:
            self._unresumed.pop(key, None)

    def ready(self) -> None:
        """Resume interrupted workflows on the first call (calls arriving meanwhile wait for
        it), and those that failed with an outcome-unknown error again every
        ``RESUME_RETRY_INTERVAL_S`` (on the thread of the call that finds it due; a call
        arriving while a retry round runs does not wait for it)."""
        if not self._resumed:
            with self._resuming:
                if not self._resumed:
                    self._resume_all()
            return
        if not self._unresumed or (
            self._clock.monotonic() - self._last_resume < RESUME_RETRY_INTERVAL_S
        ):
            return
        if not self._resuming.acquire(blocking=False):
            return  # another call runs the round
        try:
            if self._clock.monotonic() - self._last_resume < RESUME_RETRY_INTERVAL_S:
                return
            self._last_resume = self._clock.monotonic()
            with self._lock:
                keys = list(self._unresumed)
            for key in keys:
                self._resume(key)
        finally:
            self._resuming.release()

    # --- checks ----------------------------------------------------------------------------------
    def check_scope(self, scope: str) -> None:
        """InvalidNameError for a bad scope name, then ScopeNotFoundError. A call naming
        something in the scope checks that name first (names before existence)."""
        validate_name("scope", scope)
        if self._store.get_scope(scope) is None:
            raise ScopeNotFoundError(f"scope {scope} does not exist")

    def check_scope_open(self, scope: str) -> None:
        """For a create in ``scope`` (names checked): ScopeNotFoundError, or
        IllegalStateError while a recursive delete of the scope is under way."""
        deleting = self._store.scope_deleting(scope)
        if deleting is None:
            raise ScopeNotFoundError(f"scope {scope} does not exist")
        if deleting:
            raise IllegalStateError(f"scope {scope} is being deleted; nothing is created in it")

    def created_in_open_scope(self, scope: str, what: str, undo: Callable[[], None]) -> None:
        """Called by a create right after its record is stored: if a recursive delete of
        ``scope`` began meanwhile (or ended), ``undo`` removes what the create stored and
        IllegalStateError (ScopeNotFoundError) says why.

        The create writes its record, then reads the scope; the delete marks the scope,
        then lists what it holds: one of the two sees the other, so a record is never
        left behind in a deleted scope (but for a create killed in between)."""
        try:
            self.check_scope_open(scope)
        except (IllegalStateError, ScopeNotFoundError) as e:
            undo()
            log.info("controller: %s undone: %s", what, e)
            raise

    def check_stream_names(self, scope: str, stream: str) -> None:
        """Where every stream call starts: both names (InvalidNameError; a leading ``_``
        is the system's, see :func:`~pravega_ray.naming.validate_stream_name`), then the
        scope (ScopeNotFoundError)."""
        validate_stream_name(scope, stream)
        self.check_scope(scope)

    def check_stream(self, scope: str, stream: str) -> StreamState:
        """:meth:`check_stream_names`, then the stream (StreamNotFoundError,
        DataCorruptionError for a damaged record); its state."""
        self.check_stream_names(scope, stream)
        return self._store.streams.state(scope, stream)

    # --- requests --------------------------------------------------------------------------------
    def post(self, kind: str, scope: str, stream: str, **fields: Any) -> None:
        """Post a ``kind`` request about ``scope/stream`` to the request stream (at least
        once), stamped ``posted_ms`` now; ``fields`` are added (and may override it)."""
        now = self._clock.wall_time_ms()
        body = {"type": kind, "scope": scope, "stream": stream, "posted_ms": now}
        self._requests.post({**body, **fields})

    def wake(self, scope: str, stream: str) -> None:
        """Post a ``wake`` request about ``scope/stream``: posted after a workflow's
        temporary property is written (its request went first, Pravega's order), so that a
        processor which read the request before the property, and postponed it, tries it
        again now instead of after its rest (a new request of a resting stream ends the
        rest; the wake itself does nothing, so one posted twice is harmless). Best effort: a
        wake lost costs only the rest, so a failure is logged, not raised (the workflow is
        asked for already)."""
        try:
            self._requests.post(
                {
                    "type": "wake",
                    "scope": scope,
                    "stream": stream,
                    "posted_ms": self._clock.wall_time_ms(),
                }
            )
        except (PravegaError, TimeoutError) as e:
            log.info(
                "controller: no wake posted for %s/%s (%r); the request runs after its rest",
                scope,
                stream,
                e,
            )
