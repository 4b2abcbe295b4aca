"""A reader group's state, read and changed by its readers (Pravega's ``StateSynchronizer``).

The state (:class:`~pravega_ray.contracts.reader_group_state.ReaderGroupState`) is one
JSON value in the group's *state segment*, a table segment of the ``_system`` scope that
the controller created with the group. Every reader (and every ``ReaderGroup`` object)
keeps its own :class:`ReaderGroupSynchronizer` and talks to the segment's container
directly; the controller is asked once, for the group's record, when the synchronizer is
made, and then only for successors of segments read to their ends.

It is a :class:`~pravega_ray.client.state_synchronizer.StateSynchronizer` (the public
state synchronizer), whose fetch, seed and conditional-update loop it uses with the
group's own encoding (``ReaderGroupState`` as JSON) and without writer ids.

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

Checkpoints (``contracts/checkpoint_state.py``): a reader passing one writes an
*acknowledgement* under a key of its own (:meth:`acknowledge`: an unconditional put, no
race with other readers); :meth:`fold` reads the acknowledgements an outstanding
checkpoint waits for and, once one checkpoint has them all, records them in the state
with one conditional update that also removes their keys. Keys left behind (a checkpoint
cancelled or reset, a reader gone after acknowledging) are removed by :meth:`sweep` when a
fold completes a checkpoint, so the segment holds acknowledgements of outstanding
checkpoints only, give or take one round.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from pravega_ray import constants
from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.client.state_synchronizer import StateSynchronizer
from pravega_ray.contracts.checkpoint_state import ack_key, ack_key_checkpoint_id
from pravega_ray.contracts.reader_group_state import (
    STATE_KEY,
    ReaderGroupState,
    reader_group_state_segment,
)
from pravega_ray.contracts.segment_store import TableEntry, TableUpdate
from pravega_ray.errors import (
    DataCorruptionError,
    InvalidArgumentError,
    PravegaError,
    ReaderGroupNotFoundError,
    RetriableError,
)
from pravega_ray.stream_cut import cuts_of
from pravega_ray.timing import DAEMON_THREADS, ThreadScheduler

__all__ = ["ReaderGroupSynchronizer"]

log = logging.getLogger(__name__)
R = TypeVar("R")


class ReaderGroupSynchronizer(StateSynchronizer[ReaderGroupState]):
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
        segment: str = record.get("state_segment") or reader_group_state_segment(
            scope, group, self.group_id
        )
        super().__init__(
            f"the state of reader group {scope}/{group}",
            segment,
            segments,
            encode=_encode,
            decode=self._load,
            initial=lambda: self._parse(json.dumps(self._record).encode()),
            gone=self._deleted,
            writer_ids=False,
            attempts_max=(
                constants.READER_GROUP_STATE_ATTEMPTS_MAX if attempts_max is None else attempts_max
            ),
            scheduler=scheduler,
        )

    # --- reading ---------------------------------------------------------------------------------
    def fetch(self) -> tuple[ReaderGroupState, int]:
        """The group's state now and its version (one container call, seeding it once).

        ReaderGroupNotFoundError once the group was deleted (even if re-created: that is
        another incarnation); DataCorruptionError for a stored state that does not load;
        SegmentStoreUnavailableError if the container did not answer.
        """
        state, version, _ = self._fetch()
        return state, version

    def _parse(self, value: bytes) -> ReaderGroupState:
        try:
            return ReaderGroupState.from_dict(json.loads(value))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise DataCorruptionError(
                f"the state of reader group {self.scope}/{self.group} in {self.segment} "
                f"does not load: {e!r}"
            ) from None

    def _load(self, value: bytes) -> ReaderGroupState:
        """A stored state: parsed, and of this incarnation of the group."""
        state = self._parse(value)
        state.check_group_id(self.group_id)
        return state

    def _deleted(self) -> PravegaError:
        return ReaderGroupNotFoundError(
            f"reader group {self.scope}/{self.group} was deleted (its state segment "
            f"{self.segment} is gone)",
            group_id=self.group_id,
        )

    # --- changing --------------------------------------------------------------------------------
    def update(
        self,
        change: Callable[[ReaderGroupState], R],
        *,
        repeat_unknown: bool = True,
        also: Sequence[TableUpdate] = (),
    ) -> R:
        """Apply ``change`` to the current state and store the result; ``change``'s answer.

        ``change`` may be applied several times (to fresh states) and must decide from
        the state it is given; an error it raises reaches the caller, nothing stored. A
        change that leaves the state as it was stores nothing. ``repeat_unknown=False``:
        an outcome-unknown store is not tried again (unless a fresh fetch shows it
        landed), SegmentStoreUnavailableError reaches the caller. After ``attempts_max``
        tries: the last outcome-unknown error if the last try failed so, else
        ConflictingUpdateError. ``also``: updates of other keys of the segment, stored in
        the same atomic batch as the state (not at all if the state is not stored).
        """

        def mutate(state: ReaderGroupState) -> tuple[ReaderGroupState, R]:
            return state, change(state)

        return self._apply(mutate, repeat_unknown=repeat_unknown, also=also)

    # --- checkpoint acknowledgements ----------------------------------------------------------
    def acknowledge(
        self,
        checkpoint_id: str,
        reader_id: str,
        session: str,
        generation: int,
        positions: dict[str, int],
    ) -> None:
        """Store that reader ``reader_id`` (``session``, in ``generation``) passed checkpoint
        ``checkpoint_id`` at ``positions``: a put of its own key, repeated after an
        outcome-unknown failure (it is idempotent). After ``attempts_max`` tries the last
        error reaches the caller."""
        value = json.dumps(
            {"session": session, "generation": generation, "positions": positions},
            separators=(",", ":"),
            sort_keys=True,
        ).encode()
        update = TableUpdate(ack_key(checkpoint_id, reader_id), value)
        for attempt in range(self._attempts_max):
            try:
                with self._errors():
                    self._rounds.put([update], constants.READER_GROUP_STATE_CALL_TIMEOUT_S)
                return
            except RetriableError as e:
                if attempt + 1 >= self._attempts_max:
                    raise
                self._pause(attempt, e)

    def acks(self, state: ReaderGroupState) -> dict[tuple[str, str], object]:
        """The stored acknowledgements the outstanding checkpoints of ``state`` wait for
        (one container call; none: no call): ``(checkpoint id, reader id)`` -> value. A
        value that does not load is left out (logged): its reader counts as not passed."""
        wanted = state.checkpoints.acks_wanted()
        if not wanted:
            return {}
        keys = [ack_key(checkpoint_id, reader_id) for checkpoint_id, reader_id in wanted]
        return self._loaded(wanted, self._get(keys))

    def look(
        self, hint: Sequence[tuple[str, str]]
    ) -> tuple[ReaderGroupState, dict[tuple[str, str], object]]:
        """The state and the stored acknowledgements its outstanding checkpoints wait for,
        in one container call if they wait for none but those of ``hint`` (``(checkpoint
        id, reader id)`` pairs, e.g. a checkpoint's readers when it was last seen), else
        two. Raises as :meth:`fetch` does."""
        hint = list(dict.fromkeys(hint))
        keys = [STATE_KEY] + [ack_key(c, r) for c, r in hint]
        entries = self._get(keys)
        entry = entries[0]
        if entry is None or entry.value is None:
            state = self._seed()[0]
            return state, self.acks(state)
        state = self._load(entry.value)
        wanted = state.checkpoints.acks_wanted()
        if not set(wanted) <= set(hint):
            return state, self.acks(state)
        found = self._loaded(hint, entries[1:])
        return state, {pair: found[pair] for pair in wanted if pair in found}

    def _loaded(
        self, pairs: Sequence[tuple[str, str]], entries: Sequence[TableEntry | None]
    ) -> dict[tuple[str, str], object]:
        found: dict[tuple[str, str], object] = {}
        for pair, entry in zip(pairs, entries, strict=True):
            if entry is None or entry.value is None:
                continue
            try:
                found[pair] = json.loads(entry.value)
            except ValueError as e:
                log.warning(
                    "reader group %s/%s: ack %r does not load: %r", self.scope, self.group, pair, e
                )
        return found

    def fold(
        self,
        hint: Sequence[tuple[str, str]] = (),
        own: dict[tuple[str, str], object] | None = None,
    ) -> list[str]:
        """If some outstanding checkpoint has every acknowledgement it waits for, record
        all the acknowledgements stored (one conditional update, their keys removed in the
        same batch); the names of the checkpoints completed. ``hint``: the acknowledgements
        likely waited for (:meth:`look`: one call instead of two). ``own``:
        acknowledgements not stored, counted and recorded with the stored ones (a reader
        that is the last one a checkpoint waits for folds without storing its own). Costs
        one or two calls when none is ready."""
        state, stored = self.look(hint)
        acks = {**stored, **(own or {})}
        if not state.checkpoints.ready(set(state.valid_acks(acks))):
            return []
        keys = [ack_key(checkpoint_id, reader_id) for checkpoint_id, reader_id in acks]
        keys = [k for k, pair in zip(keys, acks, strict=True) if pair not in (own or {})]
        keys = keys[: constants.TABLE_BATCH_KEYS_MAX - 1]  # the rest: swept later
        names = self.update(
            lambda current: current.fold_acks(acks), also=[TableUpdate(k, None) for k in keys]
        )
        if names:
            try:
                self.sweep()
            except PravegaError as e:
                log.info("reader group %s/%s: sweeping acks failed: %r", self.scope, self.group, e)
        return names

    def sweep(self) -> int:
        """Remove acknowledgement keys of checkpoints no longer outstanding; how many.

        The keys are listed before the state is read, so an acknowledgement of a
        checkpoint created meanwhile is seen outstanding and kept."""
        cursor: bytes | None = None
        found: list[tuple[bytes, str]] = []
        while True:
            entries, cursor = self._call(
                self._segments.table_iterate(self.segment, cursor, 1000, False)
            )
            for entry in entries:
                checkpoint_id = ack_key_checkpoint_id(entry.key)
                if checkpoint_id is not None:
                    found.append((entry.key, checkpoint_id))
            if cursor is None:
                break
        if not found:
            return 0
        outstanding = {c["id"] for c in self.fetch()[0].checkpoints.outstanding}
        stale = [key for key, checkpoint_id in found if checkpoint_id not in outstanding]
        batch_max = constants.TABLE_BATCH_KEYS_MAX
        for start in range(0, len(stale), batch_max):
            chunk = stale[start : start + batch_max]
            self._call(
                self._segments.table_update(self.segment, [TableUpdate(k, None) for k in chunk])
            )
        return len(stale)

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


def _encode(state: ReaderGroupState) -> bytes:
    return json.dumps(state.to_dict(), separators=(",", ":"), sort_keys=True).encode()
