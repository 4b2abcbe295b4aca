"""A reader group's state, read and changed by its readers (Pravega's ``StateSynchronizer``).

The state (:class:`~pravega_ray.contracts.reader_group_state.ReaderGroupState`) is one
JSON value in the group's *state segment*, a table segment of the ``_system`` scope that
the controller created with the group. Every reader (and every ``ReaderGroup`` object)
keeps its own :class:`ReaderGroupSynchronizer` and talks to the segment's container
directly; the controller is asked once, for the group's record, when the synchronizer is
made, and then only for successors of segments read to their ends.

A change is optimistic (Pravega's ``updateState``): fetch the state and its version, apply
the change to it, and store the result conditionally on that version. If another reader
stored first (BadKeyVersionError), fetch again and apply the change again; a change that
alters nothing stores nothing, so a reader's periodic sync costs one read. Every change of
a reader is idempotent (``contracts/reader_group_state.py``), so a change whose outcome is
unknown (the container restarted mid-call) is applied again the same way; a change that
is not (``reader_offline``) is tried once and, if its outcome stays unknown, the error
reaches the caller.

The state segment is seeded from the group's record at its first fetch (a conditional
create, so two first readers cannot both seed it). A state segment that is gone means
the group was deleted: ReaderGroupNotFoundError.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import TypeVar

from pravega_ray import constants
from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.contracts.reader_group_state import (
    STATE_KEY,
    ReaderGroupState,
    reader_group_state_segment,
)
from pravega_ray.contracts.segment_store import NOT_EXISTS, TableUpdate
from pravega_ray.errors import (
    BadKeyVersionError,
    ConflictingUpdateError,
    DataCorruptionError,
    InvalidArgumentError,
    PravegaError,
    ReaderGroupNotFoundError,
    RetriableError,
    SegmentNotFoundError,
    SegmentStoreUnavailableError,
)
from pravega_ray.stream_cut import cuts_of
from pravega_ray.timing import DAEMON_THREADS, ThreadScheduler

__all__ = ["ReaderGroupSynchronizer"]

log = logging.getLogger(__name__)
R = TypeVar("R")


class ReaderGroupSynchronizer:
    """The state of reader group ``scope/group`` as its members see and change it.

    Made from the group's record (one controller call): raises ReaderGroupNotFoundError,
    ScopeNotFoundError, InvalidNameError, DataCorruptionError as ``get_reader_group`` does.
    ``attempts_max`` (default ``READER_GROUP_STATE_ATTEMPTS_MAX``) bounds the tries of one
    change; ``scheduler`` sleeps the pause between tries after an outcome-unknown call.
    """

    def __init__(
        self,
        scope: str,
        group: str,
        controller: ControllerConnection,
        segments: SegmentStoreConnection,
        *,
        attempts_max: int | None = None,
        scheduler: ThreadScheduler = DAEMON_THREADS,
    ) -> None:
        record = controller.get_reader_group(scope, group)
        self.scope = scope
        self.group = group
        self._record = record
        self.group_id: str = record.get("group_id") or ""
        self.segment: str = record.get("state_segment") or reader_group_state_segment(
            scope, group, self.group_id
        )
        self._segments = segments
        self._attempts_max = (
            constants.READER_GROUP_STATE_ATTEMPTS_MAX if attempts_max is None else attempts_max
        )
        self._scheduler = scheduler

    # --- reading ---------------------------------------------------------------------------------
    def fetch(self) -> tuple[ReaderGroupState, int]:
        """The group's state now and its version (one container call, seeding it once).

        ReaderGroupNotFoundError once the group was deleted (even if re-created: that is
        another incarnation); DataCorruptionError for a stored state that does not load;
        SegmentStoreUnavailableError if the container did not answer.
        """
        entry = self._call(self._segments.table_get(self.segment, [STATE_KEY]))[0]
        if entry is None or entry.value is None:
            return self._seed()
        state = self._parse(entry.value)
        state.check_group_id(self.group_id)
        return state, entry.version

    def _seed(self) -> tuple[ReaderGroupState, int]:
        """Store the state the group was created with, unless someone did first."""
        state = self._parse(json.dumps(self._record).encode())
        try:
            result = self._call(
                self._segments.table_update(
                    self.segment, [TableUpdate(STATE_KEY, _encode(state), NOT_EXISTS)]
                )
            )
        except BadKeyVersionError:  # another member seeded it: read theirs
            return self.fetch()
        return state, result.versions[0]

    def _parse(self, value: bytes) -> ReaderGroupState:
        try:
            return ReaderGroupState.from_dict(json.loads(value))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise DataCorruptionError(
                f"the state of reader group {self.scope}/{self.group} in {self.segment} "
                f"does not load: {e!r}"
            ) from None

    # --- changing --------------------------------------------------------------------------------
    def update(self, change: Callable[[ReaderGroupState], R], *, repeat_unknown: bool = True) -> R:
        """Apply ``change`` to the current state and store the result; ``change``'s answer.

        ``change`` may be applied several times (to fresh states) and must decide from
        the state it is given; an error it raises reaches the caller, nothing stored. A
        change that leaves the state as it was stores nothing. ``repeat_unknown=False``:
        an outcome-unknown store is not tried again (unless a fresh fetch shows it
        landed), SegmentStoreUnavailableError reaches the caller. After ``attempts_max``
        tries: the last outcome-unknown error if the last try failed so, else
        ConflictingUpdateError.
        """
        unknown: RetriableError | None = None  # the last outcome-unknown failure
        for attempt in range(self._attempts_max):
            try:
                state, version = self.fetch()
            except RetriableError as e:
                unknown = e
                self._pause(attempt, e)
                continue
            before = _encode(state)  # to_dict shares the state's dicts: compare bytes
            answer = change(state)
            after = _encode(state)
            if after == before:
                return answer
            try:
                self._call(
                    self._segments.table_update(
                        self.segment, [TableUpdate(STATE_KEY, after, version)]
                    )
                )
                return answer
            except BadKeyVersionError:
                unknown = None
                continue  # another member stored first: apply the change to theirs
            except RetriableError as e:
                if not repeat_unknown:
                    if self._landed(after):
                        return answer
                    raise
                unknown = e
                self._pause(attempt, e)
        if unknown is not None:
            raise unknown
        raise ConflictingUpdateError(
            f"the state of reader group {self.scope}/{self.group} could not be changed in "
            f"{self._attempts_max} tries"
        )

    # --- retention ---------------------------------------------------------------------------
    def publish_retention(self, controller: ControllerConnection) -> bool:
        """Publish the cut of the group's last completed checkpoint, if one is waiting
        (``retention_pending``, set for AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT groups), with
        ``update_subscriber_stream_cut`` per stream, then clear it; True if one was published.

        Failures are logged and the cut stays pending: the next member that syncs publishes
        it again (at least once; the controller keeps the latest per subscriber). A cut the
        controller refuses (InvalidArgumentError: behind the one published before, e.g.
        after ``reset_to`` an older checkpoint) is logged and dropped: it can never land.
        """
        state, _ = self.fetch()
        pending = state.retention_pending
        if pending is None:
            return False
        subscriber = f"{self.scope}/{self.group}"
        try:
            for scoped, cut in cuts_of(pending["positions"], state.streams).items():
                scope, stream = scoped.split("/", 1)
                controller.update_subscriber_stream_cut(
                    scope, stream, subscriber, int(pending["generation"]), cut
                )
        except InvalidArgumentError as e:  # e.g. behind the cut it published before
            log.warning("reader group %s: its retention cut was refused: %r", subscriber, e)
        except PravegaError as e:
            log.warning("reader group %s: publishing its retention cut failed: %r", subscriber, e)
            return False

        def clear(current: ReaderGroupState) -> None:
            if current.retention_pending == pending:
                current.retention_pending = None

        self.update(clear)
        return True

    def _landed(self, after: bytes) -> bool:
        """Whether the stored state is the one an outcome-unknown store wrote."""
        try:
            return _encode(self.fetch()[0]) == after
        except RetriableError:
            return False

    def _pause(self, attempt: int, error: Exception) -> None:
        log.info(
            "state of reader group %s/%s: try %d failed (%r)",
            self.scope,
            self.group,
            attempt,
            error,
        )
        self._scheduler.sleep(constants.READER_GROUP_STATE_RETRY_PAUSE_S)

    def _call(self, future: Future[R]) -> R:
        try:
            return future.result(constants.READER_GROUP_STATE_CALL_TIMEOUT_S)
        except SegmentNotFoundError:
            raise ReaderGroupNotFoundError(
                f"reader group {self.scope}/{self.group} was deleted (its state segment "
                f"{self.segment} is gone)",
                group_id=self.group_id,
            ) from None
        except FutureTimeoutError:
            raise SegmentStoreUnavailableError(
                f"no answer from the container of {self.segment}: outcome unknown"
            ) from None


def _encode(state: ReaderGroupState) -> bytes:
    return json.dumps(state.to_dict(), separators=(",", ":"), sort_keys=True).encode()
