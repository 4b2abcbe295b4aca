"""Reader group state: which reader owns which segment, at which offset. Pure logic.

Where it lives (Pravega's state synchronizer): each incarnation of a group has a *state
segment*, a table segment of the ``_system`` scope (:func:`reader_group_state_segment`)
holding this state as one JSON value under :data:`STATE_KEY`, versioned by the table.
The controller creates and deletes that segment and keeps the group's *record* (this
state as it was at creation, which also seeds the state segment); readers and
``ReaderGroup`` objects read the state and change it themselves with conditional updates
(``client/reader_group_synchronizer.py``), so no reader calls the controller to sync.
Both sides import this module (it is a contract); neither imports the other.

Readers of a group share the segments of its streams; each segment is owned by
at most one reader at a time, so each event is delivered to one reader of the
group. Rebalancing is cooperative (Pravega's ``ReaderGroupStateManager``):

* each incarnation of a group has a random ``group_id``: a reader learns it when it joins
  and carries it on every call, so a reader of a group that was deleted (and perhaps
  re-created under the same name) gets :class:`ReaderGroupNotFoundError`, never the new
  group's segments;
* a reader joins with an id and a *session* (a random token of that reader object); an
  id online in the group is refused (:class:`ReaderAlreadyExistsError`) unless it is
  declared offline first (``reader_offline``), and every later call of a reader
  carries its session: one whose session is gone (declared offline, or the group was
  deleted and re-created) gets :class:`ReaderNotInGroupError` and can never act on
  segments another reader now owns;
* a reader ``sync``\\ s periodically, reporting the offsets it has reached and
  the segments it read to the end; the answer lists every segment it owns (with the
  offsets known here) and how many it should give up;
* a reader gives a segment up with ``release(segment, offset)``, where
  ``offset`` is the offset of the next event it has *not* returned, so the next
  owner continues exactly there: nothing is skipped or read twice;
* fair share is ``ceil(live segments / readers)``;
* across epochs (Pravega's ``segmentCompleted`` and ``futureSegments``): a reader that read a
  sealed segment to its end reports it *completed*; the group records it, looks up its
  successors (each with all its predecessors) and keeps each successor as a *future*
  segment until every one of its predecessors is completed; only then does the successor
  become unassigned (at offset 0) and get handed out like any other. So no successor is
  read before all its predecessors were read to their ends, and per routing key order
  holds for the whole group across any number of splits and merges. Futures belong to
  the group, not to a reader: a reader leaving or declared offline loses none. A completed
  segment is kept while a future segment waits for it (or its end offset is still needed):
  then it is dropped, so the state grows with the live segments, not with the streams'
  epochs. A late or repeated report changes nothing (nobody owns the segment any more).

Every change can be applied again after a lost reply with the same effect (the
synchronizer repeats a change whose outcome is unknown): joining again with the same
session, releasing a segment no longer owned and leaving twice are no-ops, and a sync
answers with the whole owned set, so a reader never misses a segment a lost reply had
assigned to it.

A reader that leaves returns its segments at the offsets it reports; a reader declared
offline returns them at the position given for it (Pravega's ``readerOffline``), else
at its offsets in the last completed checkpoint, else at the offsets it last synced.

The state also holds (each optional in stored records, so older ones load): the group's
``config`` (start and end cuts, automatic checkpoints, retention type) and its
``generation``, bumped by every ``reset`` (a reader still in an older generation reports
nothing and, at its next sync, drops all it buffered); ``end_offsets`` (a segment of an
end cut is read up to its offset and completed with no successors); ``completed_ends``
(end offsets of completed segments no live segment covers yet, so a checkpoint's cut
covers the key space once); the checkpoints (:mod:`checkpoint_state`); and a completed
checkpoint's positions waiting to be published for retention (``retention_pending``).
The state is a plain value (``to_dict``/``from_dict``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pravega_ray.constants import CHECKPOINTS_OUTSTANDING_MAX, SYSTEM_SCOPE
from pravega_ray.contracts.checkpoint_state import CheckpointState
from pravega_ray.errors import (
    InvalidArgumentError,
    ReaderAlreadyExistsError,
    ReaderGroupNotFoundError,
    ReaderNotInGroupError,
)
from pravega_ray.invariant import invariant
from pravega_ray.naming import segment_id, stable_hash64, stream_segment_name
from pravega_ray.stream_configuration import ReaderGroupConfig, RetentionConfigType

_T = TypeVar("_T")

STATE_KEY = b"state"
"""The key of a state segment's one entry: the group's state as JSON."""


def reader_group_state_segment(scope: str, group: str, group_id: str) -> str:
    """The state segment of incarnation ``group_id`` of group ``scope/group``: a table
    segment of the ``_system`` scope, never shared by two incarnations (records from
    before group ids, ``group_id == ""``, are told apart by their names)."""
    digest = f"{stable_hash64(f'{scope}/{group}/{group_id}'):016x}"
    return stream_segment_name(SYSTEM_SCOPE, f"_RG{group_id[:32]}{digest}", segment_id(0, 0))


def check_offsets(data: object, what: str = "offsets") -> dict[str, int]:
    """A copy of ``data`` if it is a dict of segment name -> offset (an int >= 0, not a bool).

    Shared by positions (``client/events.py``), reader-group calls and stored reader-group
    records; raises InvalidArgumentError naming ``what``.
    """
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in data.items()
    ):
        raise InvalidArgumentError(f"{what} must be a dict of segment name -> offset >= 0")
    return dict(data)


@dataclass(frozen=True, slots=True)
class Assignment:
    """Answer to a sync: every segment the reader owns (offsets as known to the group)
    and how many it should release; the group's ``generation`` (a reader that joined or
    synced in an earlier one drops all it buffered); the oldest ``checkpoint`` it has not
    passed (``silent`` for an automatic one); ``ends``: the end-cut offsets of its owned
    segments that have one; ``finished``: every segment of the group is read to its end."""

    owned: dict[str, int]
    release_count: int
    generation: int = 0
    checkpoint: str | None = None
    silent: bool = False
    ends: dict[str, int] = field(default_factory=dict)
    finished: bool = False
    raise_on_truncated_data: bool = False
    publish: bool = False
    """A completed checkpoint's cut waits to be published (retention)."""
    checkpoint_id: str | None = None
    """The id of ``checkpoint``."""
    unfolded: tuple[str, ...] = ()
    """Ids of outstanding checkpoints the reader acknowledged that are not folded yet."""
    checkpoint_readers: tuple[str, ...] = ()
    """The readers ``checkpoint`` waits for (as folded so far)."""


SuccessorLookup = Callable[[str], dict[str, list[str]]]
"""Segment name -> its successors' names, each with ALL its predecessors' names (the
controller's ``get_successors``); empty while the segment is active or once its stream is
sealed."""


def no_successors(segment: str) -> dict[str, list[str]]:
    """The lookup of a group whose streams never scale."""
    return {}


@dataclass
class ReaderGroupState:
    """The group's segments, each in exactly one place: unassigned (offset), assigned to a
    reader (offset), future (waiting for its predecessors) or completed."""

    scope: str
    name: str
    streams: list[str]
    unassigned: dict[str, int] = field(default_factory=dict)
    assigned: dict[str, dict[str, int]] = field(default_factory=dict)
    completed: set[str] = field(default_factory=set)
    sessions: dict[str, str] = field(default_factory=dict)
    group_id: str = ""
    """This incarnation of the group (records from before group ids have ``""``)."""
    request_id: str | None = None
    """The create request that made it (a repeated create that landed answers True)."""
    future: dict[str, list[str]] = field(default_factory=dict)
    """Successor name -> all its predecessors' names: held until all are completed."""
    state_segment: str | None = None
    """Where the live state is (None in records from before state segments)."""
    config: dict[str, Any] | None = None
    """The group's ReaderGroupConfig (``to_dict``); None in records from before configs."""
    generation: int = 0
    """Bumped by every ``reset``: orders the group's configurations and positions."""
    end_offsets: dict[str, int] = field(default_factory=dict)
    """Segment -> offset of the end cuts: read up to there, then done, no successors."""
    completed_ends: dict[str, int] = field(default_factory=dict)
    """End offsets of completed segments whose key range no live segment covers yet."""
    checkpoints: CheckpointState = field(default_factory=CheckpointState)
    retention_pending: dict[str, Any] | None = None
    """A completed checkpoint's positions not yet published as the subscriber's cut."""

    @classmethod
    def new(
        cls,
        scope: str,
        name: str,
        streams: list[str],
        segments: list[str] | dict[str, int],
        group_id: str = "",
        request_id: str | None = None,
        config: dict[str, Any] | None = None,
        end_offsets: dict[str, int] | None = None,
    ) -> ReaderGroupState:
        """A new group; ``segments`` are where it starts (a list: each at offset 0)."""
        start = dict(segments) if isinstance(segments, dict) else {s: 0 for s in segments}
        return cls(
            scope,
            name,
            list(streams),
            start,
            group_id=group_id,
            request_id=request_id,
            config=config,
            end_offsets=dict(end_offsets or {}),
        )

    def group_config(self) -> ReaderGroupConfig:
        """The group's config (a record from before configs: its streams, defaults)."""
        if self.config is None:
            return ReaderGroupConfig.for_streams(*self.streams)
        return ReaderGroupConfig.from_dict(self.config)

    def check_group_id(self, group_id: str | None) -> None:
        """ReaderGroupNotFoundError unless ``group_id`` is this incarnation's (None: unchecked).

        A reader or ReaderGroup object made for a group that was deleted and re-created
        under the same name carries the old id.
        """
        if group_id is not None and group_id != self.group_id:
            raise ReaderGroupNotFoundError(
                f"reader group {self.scope}/{self.name} was deleted; the group of that name "
                "now is another one (create the reader or ReaderGroup again)",
                group_id=group_id,
            )

    # --- membership --------------------------------------------------------------------------
    def add_reader(self, reader_id: str, session: str) -> None:
        """Join; a no-op for the same session, ReaderAlreadyExistsError for another one."""
        if not isinstance(reader_id, str) or not reader_id:
            raise InvalidArgumentError("reader id must be a non-empty str")
        if reader_id in self.assigned:
            if self.sessions.get(reader_id) == session:
                return
            raise ReaderAlreadyExistsError(
                f"reader {reader_id!r} is online in group {self.scope}/{self.name}; "
                "declare it offline first (ReaderGroup.reader_offline)",
                reader_id=reader_id,
            )
        self.assigned[reader_id] = {}
        self.sessions[reader_id] = session

    def remove_reader(
        self,
        reader_id: str,
        session: str,
        offsets: dict[str, int] | None,
        generation: int | None = None,
    ) -> bool:
        """Leave; owned segments return to the pool at ``offsets`` (else the last synced ones;
        offsets of a reader still in an earlier ``generation`` are ignored).

        False (nothing changed) if this session is not in the group (it left already, or
        was declared offline). The reader counts as having passed every checkpoint it had
        not, at the offsets its segments go back at.
        """
        if reader_id not in self.assigned or self.sessions.get(reader_id) != session:
            return False
        stale = generation is not None and generation != self.generation
        self._drop(reader_id, None if stale else offsets)
        return True

    def reader_offline(self, reader_id: str, offsets: dict[str, int] | None) -> bool:
        """Declare a reader gone (whatever its session); False if it is not in the group.

        Each segment it owns returns to the pool at its offset in ``offsets`` where
        given (a position the application saved: events after it are read again, even
        ones this reader had returned). With ``offsets`` None (Pravega's ``readerOffline``
        with no position), each goes back at its offset in the last completed checkpoint
        that holds it, else at the offset the reader last synced. Offsets of segments it
        does not own are ignored.
        """
        if reader_id not in self.assigned:
            return False
        if offsets is None:
            offsets = {}
            for checkpoint in self.checkpoints.completed:  # oldest first: the last one wins
                for segment, offset in checkpoint["positions"].items():
                    if segment in self.assigned[reader_id]:
                        offsets[segment] = offset
        self._drop(reader_id, offsets, exact=True)
        return True

    def _drop(self, reader_id: str, offsets: dict[str, int] | None, exact: bool = False) -> None:
        owned = self.assigned.pop(reader_id)
        self.sessions.pop(reader_id, None)
        given = offsets or {}
        returned: dict[str, int] = {}
        for segment, offset in owned.items():
            if segment not in given:
                returned[segment] = offset
            elif exact:
                returned[segment] = given[segment]
            else:  # the reader's own report: never behind what it synced already
                returned[segment] = max(offset, given[segment])
        self.unassigned.update(returned)
        self._checkpoints_completed(self.checkpoints.reader_gone(reader_id, returned))

    @property
    def readers(self) -> list[str]:
        return sorted(self.assigned)

    # --- reading -----------------------------------------------------------------------------
    def _owned(self, reader_id: str, session: str) -> dict[str, int]:
        owned = self.assigned.get(reader_id)
        if owned is None or self.sessions.get(reader_id) != session:
            raise ReaderNotInGroupError(
                f"reader {reader_id!r} is not in group {self.scope}/{self.name} (it was "
                "declared offline, or the group was deleted or re-created)",
                reader_id=reader_id,
            )
        return owned

    def sync(
        self,
        reader_id: str,
        session: str,
        offsets: dict[str, int],
        completed: list[str] | dict[str, int],
        successors: SuccessorLookup = no_successors,
        generation: int | None = None,
        now_ms: int | None = None,
        passed: tuple[str, dict[str, int]] | None = None,
        acknowledged: frozenset[str] = frozenset(),
    ) -> Assignment:
        """Record ``offsets`` and ``completed`` (name, or name -> end offset) of the segments
        this reader owns, then top its share up from the unassigned ones.

        ``successors`` is asked about each segment completed here (once: a repeated report
        of a completed segment, or one of a segment this reader does not own, is ignored).
        A reader in an earlier ``generation`` (the group was reset since) reports nothing.
        While the reader has an outstanding checkpoint to pass it reports no completed
        segments and neither gains nor loses any (see :mod:`checkpoint_state`); the reader
        keeps its completed ones and reports them later. With ``now_ms``, a group with
        automatic checkpoints starts a silent one once the interval has passed. ``passed``
        (a checkpoint's name and the reader's position) records the reader passing it
        first, as :meth:`checkpoint_passed` does: one update for both. ``acknowledged``: ids
        of checkpoints the reader acknowledged (:meth:`fold_acks`): the answer names the
        oldest other one as its ``checkpoint``, but until they are folded the reader still
        neither gains nor loses segments.
        """
        owned = self._owned(reader_id, session)
        stale = generation is not None and generation != self.generation
        if passed is not None and not stale:
            self.checkpoint_passed(reader_id, session, passed[0], passed[1])
        pending = self.checkpoints.pending_for(reader_id)
        if not stale:
            for segment, offset in offsets.items():
                if segment in owned:
                    owned[segment] = max(owned[segment], offset)
            if pending is None:
                ends = completed if isinstance(completed, dict) else {}
                for segment in completed:
                    if segment in owned:
                        del owned[segment]
                        lookup = {} if segment in self.end_offsets else successors(segment)
                        self.segment_completed(segment, lookup, ends.get(segment))
        if now_ms is not None:
            self._maybe_automatic_checkpoint(now_ms)
            pending = self.checkpoints.pending_for(reader_id)
        live = len(self.unassigned) + sum(len(o) for o in self.assigned.values())
        fair = math.ceil(live / len(self.assigned)) if live else 0
        release_count = 0
        if pending is None:
            while len(owned) < fair and self.unassigned:
                segment = min(self.unassigned)
                owned[segment] = self.unassigned.pop(segment)
            release_count = max(0, len(owned) - fair)
        due = self.checkpoints.pending_for(reader_id, acknowledged)
        return Assignment(
            dict(owned),
            release_count,
            self.generation,
            None if due is None else due["name"],
            False if due is None else due["silent"],
            {s: self.end_offsets[s] for s in owned if s in self.end_offsets},
            live == 0 and not self.future,
            self.group_config().raise_on_truncated_data,
            self.retention_pending is not None,
            None if due is None else due["id"],
            tuple(
                c["id"]
                for c in self.checkpoints.outstanding
                if c["id"] in acknowledged and reader_id in c["readers_left"]
            ),
            () if due is None else tuple(due["readers_left"]),
        )

    def segment_completed(
        self, segment: str, successors: dict[str, list[str]], end_offset: int | None = None
    ) -> None:
        """``segment`` was read to its end (``end_offset``, if known): record it, keep each
        of its ``successors`` (name -> all its predecessors' names) not seen before as a
        future segment, and release every future segment whose predecessors are now all
        completed. A successor with a predecessor in the end cuts is beyond them: never
        kept.

        ``segment`` must be held by nobody (its reader dropped it first); a repeat is a
        no-op. Pravega's ``ReaderGroupState.segmentCompleted``.
        """
        invariant(
            segment not in self.unassigned
            and segment not in self.future
            and self._owner(segment) is None,
            f"completed segment {segment} is still held",
        )
        self.completed.add(segment)
        if end_offset is not None:
            self.completed_ends[segment] = end_offset
        for successor, predecessors in successors.items():
            if any(p in self.end_offsets for p in predecessors):
                continue
            if not self._known(successor):
                self.future[successor] = sorted(predecessors)
        released: list[str] = []
        for successor, predecessors in list(self.future.items()):
            if all(p in self.completed for p in predecessors):
                del self.future[successor]
                self.unassigned[successor] = 0
                released += predecessors
        waiting = {p for preds in self.future.values() for p in preds}
        for predecessor in released:
            if predecessor not in waiting and predecessor not in self.end_offsets:
                self.completed_ends.pop(predecessor, None)  # its successors cover it now
        # A completed segment matters only while a future segment waits for it: all its
        # successors became known when it completed, and a late report of it is ignored
        # (nobody owns it). Dropping the others keeps the state as large as the live
        # segments, however many epochs the streams had.
        self.completed.intersection_update(waiting | self.completed_ends.keys())

    def _known(self, segment: str) -> bool:
        return (
            segment in self.unassigned
            or segment in self.future
            or segment in self.completed
            or self._owner(segment) is not None
        )

    def _owner(self, segment: str) -> str | None:
        for reader_id, owned in self.assigned.items():
            if segment in owned:
                return reader_id
        return None

    def release(
        self,
        reader_id: str,
        session: str,
        segment: str,
        offset: int,
        generation: int | None = None,
    ) -> bool:
        """Give ``segment`` back at ``offset``; False (a no-op) if the reader does not own it,
        is in an earlier ``generation``, or has a checkpoint to pass."""
        owned = self._owned(reader_id, session)
        if segment not in owned:
            return False  # released before (a retried call) or never owned
        if generation is not None and generation != self.generation:
            return False
        if self.checkpoints.pending_for(reader_id) is not None:
            return False
        invariant(offset >= 0, "negative release offset")
        del owned[segment]
        self.unassigned[segment] = offset
        return True

    # --- checkpoints, positions, reset ----------------------------------------------------------
    def unowned_positions(self) -> dict[str, int]:
        """Where the segments no reader owns are: unassigned ones at their offsets, and
        completed ones no live segment covers yet at their ends."""
        return {**self.completed_ends, **self.unassigned}

    def positions(self) -> dict[str, int]:
        """The group's current positions: every segment at the offset last synced."""
        out = self.unowned_positions()
        for owned in self.assigned.values():
            out.update(owned)
        return out

    def create_checkpoint(self, name: str, silent: bool, now_ms: int) -> None:
        """Start checkpoint ``name`` (CheckpointFailedError: name in use, too many under way)."""
        self.checkpoints.create(name, silent, self.readers, self.unowned_positions(), now_ms)
        self._checkpoints_completed([name] if self.checkpoints.get_completed(name) else [])

    def checkpoint_passed(
        self,
        reader_id: str,
        session: str,
        name: str,
        offsets: dict[str, int],
        generation: int | None = None,
    ) -> None:
        """The reader passed checkpoint ``name`` at ``offsets`` (its position); a no-op for a
        checkpoint gone or passed, or a reader in an earlier generation."""
        self._owned(reader_id, session)
        if generation is not None and generation != self.generation:
            return
        self._checkpoints_completed(self.checkpoints.reader_passed(reader_id, name, offsets))

    def fold_acks(self, acks: dict[tuple[str, str], Any]) -> list[str]:
        """Record the acknowledgements ``acks`` (``(checkpoint id, reader id)`` -> the
        stored ``{"session", "generation", "positions"}``) as those readers passing those
        checkpoints; the names of the checkpoints this completed. An acknowledgement of
        another session or generation, of a checkpoint gone, or of a reader that passed
        or left, is ignored (a no-op: folding twice changes nothing)."""
        names = self.checkpoints.fold(self.valid_acks(acks))
        self._checkpoints_completed(names)
        return names

    def valid_acks(self, acks: dict[tuple[str, str], Any]) -> dict[tuple[str, str], dict[str, int]]:
        """The acknowledgements of ``acks`` that :meth:`fold_acks` would record: of a reader
        in the group with that session, in this generation, with well-formed positions,
        as ``(checkpoint id, reader id)`` -> positions."""
        valid: dict[tuple[str, str], dict[str, int]] = {}
        for (checkpoint_id, reader_id), ack in acks.items():
            if (
                not isinstance(ack, dict)
                or reader_id not in self.assigned
                or ack.get("session") != self.sessions.get(reader_id)
                or ack.get("generation") != self.generation
            ):
                continue
            try:
                valid[(checkpoint_id, reader_id)] = check_offsets(ack.get("positions"))
            except InvalidArgumentError:
                continue
        return valid

    def _checkpoints_completed(self, names: list[str]) -> None:
        if not names:
            return
        retention = self.group_config().retention_type
        if retention is RetentionConfigType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT:
            last = self.checkpoints.get_completed(names[-1])
            if last is not None:
                self.retention_pending = {
                    "generation": self.generation,
                    "positions": dict(last["positions"]),
                }

    def _maybe_automatic_checkpoint(self, now_ms: int) -> None:
        interval = self.group_config().automatic_checkpoint_interval_s
        if interval is None or not self.assigned:
            return
        if now_ms - self.checkpoints.last_created_ms < interval * 1000:
            return
        if any(c["silent"] for c in self.checkpoints.outstanding):
            return  # one automatic checkpoint at a time
        if len(self.checkpoints.outstanding) >= CHECKPOINTS_OUTSTANDING_MAX:
            return
        self.create_checkpoint(f"_auto.{self.generation}.{now_ms}", True, now_ms)

    def reset(self, positions: dict[str, int], config: dict[str, Any] | None = None) -> None:
        """Start the group again at ``positions`` (and ``config``, if given) in a new
        generation: every reader loses its segments (it drops what it buffered at its next
        sync), outstanding checkpoints fail, completed and future segments are forgotten."""
        if config is not None:
            self.config = config
        self.generation += 1
        self.unassigned = dict(positions)
        for reader_id in self.assigned:
            self.assigned[reader_id] = {}
        self.completed = set()
        self.future = {}
        self.completed_ends = {}
        self.checkpoints.reset()
        self.retention_pending = None

    # --- persistence -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "name": self.name,
            "streams": self.streams,
            "unassigned": self.unassigned,
            "assigned": self.assigned,
            "completed": sorted(self.completed),
            "sessions": self.sessions,
            "group_id": self.group_id,
            "request_id": self.request_id,
            "future": {s: list(p) for s, p in sorted(self.future.items())},
            "state_segment": self.state_segment,
            "config": self.config,
            "generation": self.generation,
            "end_offsets": self.end_offsets,
            "completed_ends": self.completed_ends,
            "checkpoints": self.checkpoints.to_dict(),
            "retention_pending": self.retention_pending,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReaderGroupState:
        """The state stored as ``d``; ValueError for a malformed record (the controller
        reports it as damaged): wrong types, negative offsets, a segment owned twice.

        Records from before sessions have none: their readers must be declared offline
        before their ids join again. Records from before group ids have the id ``""``,
        records from before epochs no future segments, records from before state segments
        none (the controller creates one when the group is next looked up).
        """
        state = cls(
            _str(d["scope"]),
            _str(d["name"]),
            [_str(s) for s in _typed(d["streams"], list)],
            check_offsets(d["unassigned"], "unassigned offsets"),
            {
                _str(r): check_offsets(o, "assigned offsets")
                for r, o in _typed(d["assigned"], dict).items()
            },
            {_str(s) for s in _typed(d["completed"], list)},
            {_str(r): _str(s) for r, s in _typed(d.get("sessions", {}), dict).items()},
            _str(d.get("group_id", "")),
            None if d.get("request_id") is None else _str(d["request_id"]),
            {
                _str(s): [_str(p) for p in _typed(preds, list)]
                for s, preds in _typed(d.get("future", {}), dict).items()
            },
            None if d.get("state_segment") is None else _str(d["state_segment"]),
            None if d.get("config") is None else dict(_typed(d["config"], dict)),
            _typed(d.get("generation", 0), int),
            check_offsets(d.get("end_offsets", {}), "end offsets"),
            check_offsets(d.get("completed_ends", {}), "completed ends"),
            CheckpointState.from_dict(d.get("checkpoints")),
            None if d.get("retention_pending") is None else _typed(d["retention_pending"], dict),
        )
        held = [s for o in state.assigned.values() for s in o] + list(state.unassigned)
        held += list(state.future)
        if len(held) != len(set(held)):
            raise ValueError("a segment is held twice in the reader group record")
        if state.completed.intersection(held):
            raise ValueError("a completed segment is held in the reader group record")
        if any(not preds for preds in state.future.values()):
            raise ValueError("a future segment without predecessors in the reader group record")
        return state


def _typed(value: Any, kind: type[_T]) -> _T:
    if not isinstance(value, kind):
        raise ValueError(f"expected a {kind.__name__}, got {type(value).__name__}")
    return value


def _str(value: Any) -> str:
    return _typed(value, str)
