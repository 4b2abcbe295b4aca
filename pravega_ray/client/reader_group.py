"""A reader group as an object (Pravega's ``ReaderGroup``): who reads, checkpoints, stream
cuts, ``reset_to``, unread bytes and retention cuts.

Get one with ``cluster.reader_group(scope, name)``. Everything here reads and changes the
group's state in its state segment (:mod:`reader_group_synchronizer`), as the readers do;
the controller is asked only to validate cuts, for segment lists and for subscriber calls.
The checkpoint state machine is described in ``contracts/checkpoint_state.py``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from pravega_ray import metrics
from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.client.events import Checkpoint, Position
from pravega_ray.client.reader_group_synchronizer import ReaderGroupSynchronizer
from pravega_ray.contracts.checkpoint_state import NOTICE_KEY, check_checkpoint_name
from pravega_ray.contracts.reader_group_state import ReaderGroupState
from pravega_ray.contracts.segment_store import TableUpdate
from pravega_ray.errors import (
    CheckpointFailedError,
    IllegalStateError,
    InvalidArgumentError,
    SegmentNotFoundError,
)
from pravega_ray.naming import (
    parse_scoped_stream,
    parse_segment_name,
    stream_segment_name,
    validate_name,
)
from pravega_ray.stream_configuration import (
    ReaderGroupConfig,
    RetentionConfigType,
    check_reader_group_config,
)
from pravega_ray.stream_cut import StreamCut, cuts_of
from pravega_ray.timing import DAEMON_THREADS, SYSTEM_CLOCK, Clock, ThreadScheduler

__all__ = ["ReaderGroup", "ReaderSegmentDistribution", "SegmentDistribution"]

log = logging.getLogger(__name__)

CHECKPOINT_POLL_S_MAX = 0.02
"""The longest pause between two looks at a checkpoint's progress."""
CHECKPOINT_TIMEOUT_S_DEFAULT = 30.0
"""How long ``initiate_checkpoint`` waits by default."""


@dataclass(frozen=True)
class ReaderSegmentDistribution:
    """Which reader of a group holds which segments (Pravega's ``ReaderSegmentDistribution``):
    ``reader_segments`` maps every reader of the group (those holding none too) to the names
    of the segments it holds, sorted; ``unassigned_segments`` are the segments waiting for a
    reader to take them; ``waiting_segments`` the successors still waiting for a
    predecessor to be read to its end."""

    reader_segments: dict[str, list[str]]
    unassigned_segments: list[str]
    waiting_segments: list[str]

    @property
    def counts(self) -> dict[str, int]:
        """How many segments each reader holds (Pravega's ``getReaderSegmentDistribution``)."""
        return {reader: len(segments) for reader, segments in self.reader_segments.items()}


SegmentDistribution = ReaderSegmentDistribution
"""The name ARCHITECTURE.md section 5 gives ``rg.get_segment_distribution()``'s answer."""


class ReaderGroup:
    """The reader group ``scope/name``, as it exists when this object is made.

    Raises ReaderGroupNotFoundError (and ScopeNotFoundError, InvalidNameError) if it does
    not exist. If the group is deleted later, every method raises ReaderGroupNotFoundError,
    even once a group of the same name exists again (that is another group: get a new
    object for it). It reads and changes the group's state in its state segment, as the
    readers do (:mod:`reader_group_synchronizer`); a container that stays unreachable is
    SegmentStoreUnavailableError, a controller that stays unreachable when the object is
    made ControllerUnavailableError. ``clock`` times checkpoints (their timeout, their
    creation time) and ``scheduler`` sleeps between looks at one's progress, so a
    ``ManualThreadScheduler`` on a ``ManualClock`` times a checkpoint out without waiting.
    """

    def __init__(
        self,
        scope: str,
        name: str,
        controller: ControllerConnection,
        segments: SegmentStoreConnection,
        *,
        clock: Clock = SYSTEM_CLOCK,
        scheduler: ThreadScheduler = DAEMON_THREADS,
    ) -> None:
        validate_name("scope", scope)
        validate_name("reader group", name)
        self.scope = scope
        self.name = name
        self._controller = controller
        self._segments = segments
        self._clock = clock
        self._scheduler = scheduler
        # ReaderGroupNotFoundError, ScopeNotFoundError, DataCorruptionError, ...
        self._state = ReaderGroupSynchronizer(
            scope, name, controller, segments, scheduler=scheduler
        )

    @property
    def subscriber(self) -> str:
        """The group's name as a subscriber of its streams' retention: ``"scope/name"``."""
        return f"{self.scope}/{self.name}"

    def get_config(self) -> ReaderGroupConfig:
        """The group's current configuration (the last ``reset_to`` config, else its own)."""
        return self._state.fetch()[0].group_config()

    def get_segment_distribution(self) -> ReaderSegmentDistribution:
        """Which reader holds which segments now (one read of the group's state). Raises
        ReaderGroupNotFoundError, DataCorruptionError."""
        state, _ = self._state.fetch()
        readers = {reader: sorted(state.assigned.get(reader, {})) for reader in state.readers}
        return ReaderSegmentDistribution(
            reader_segments=readers,
            unassigned_segments=sorted(state.unassigned),
            waiting_segments=sorted(state.future),
        )

    def get_online_readers(self) -> list[str]:
        """Ids of the readers that are members of the group, sorted."""
        return self._state.update(lambda state: state.readers)  # a read: stores nothing

    def reader_offline(self, reader_id: str, position: Position | None = None) -> bool:
        """Declare a reader gone (its process died without ``close()``); False if not a member.

        Each segment it owns returns to the group at its offset in ``position`` (e.g. the
        ``EventRead.position`` of the last event the application finished with: later
        events are read again, by whichever reader gets the segment). With no
        ``position``, each goes back at its offset in the group's last completed checkpoint
        that holds it (Pravega's ``readerOffline``: what the checkpoint saw processed), else
        at the offset the reader last reported (events it returned after that are read
        again). Offsets in ``position`` of segments the reader no longer owns are ignored.
        A checkpoint under way counts the reader as passed at those offsets. Its id may
        then join again; the old reader object, if it still runs, gets
        ReaderNotInGroupError and stops. InvalidArgumentError for a bad ``reader_id`` or
        ``position``. Not repeated automatically after an outcome-unknown failure
        (SegmentStoreUnavailableError) unless the state shows it landed: check
        ``get_online_readers()`` and call again.
        """
        if not isinstance(reader_id, str) or not reader_id:
            raise InvalidArgumentError("reader_id must be a non-empty str")
        if position is not None and not isinstance(position, Position):
            raise InvalidArgumentError(
                f"position must be a Position or None, got {type(position).__name__}"
            )
        try:
            offsets = None if position is None else Position.from_dict(position.to_dict()).to_dict()
        except (TypeError, ValueError) as e:  # a tampered-with Position
            raise InvalidArgumentError(f"position does not validate: {e}") from None
        # What it acknowledged passing first: a checkpoint keeps the positions it recorded.
        acks = self._state.acks(self._state.fetch()[0])
        own = {pair: ack for pair, ack in acks.items() if pair[1] == reader_id}

        def offline(state: ReaderGroupState) -> bool:
            state.fold_acks(own)
            return state.reader_offline(reader_id, offsets)

        landed = self._state.update(offline, repeat_unknown=False)
        self._state.publish_retention(self._controller)
        return landed

    # --- checkpoints -----------------------------------------------------------------------------
    def initiate_checkpoint(
        self, name: str, timeout_s: float = CHECKPOINT_TIMEOUT_S_DEFAULT
    ) -> Checkpoint:
        """Start checkpoint ``name`` and wait until every reader online at its start passed
        it (returned its marker and called ``read_next_event`` again), left or was declared
        offline; the :class:`Checkpoint` with one cut per stream.

        CheckpointFailedError: the name is in use (outstanding or among the last kept),
        CHECKPOINTS_OUTSTANDING_MAX are under way, the group was reset meanwhile, or
        ``timeout_s`` passed first (the checkpoint is then cancelled). InvalidArgumentError
        for a bad name or timeout. A group with no reader completes it at once.
        """
        check_checkpoint_name(name)
        _check_timeout(timeout_s)
        deadline = self._clock.monotonic() + timeout_s
        tries = 0
        generation = -1

        hint: list[tuple[str, str]] = []  # the acknowledgements it waits for

        def create(state: ReaderGroupState) -> int:
            nonlocal tries
            tries += 1
            existing = state.checkpoints.find(name) or state.checkpoints.get_completed(name)
            if not (tries > 1 and existing is not None):  # else an earlier try of ours landed
                state.create_checkpoint(name, False, self._clock.wall_time_ms())
            created = state.checkpoints.find(name)
            hint[:] = (
                [] if created is None else [(created["id"], r) for r in created["readers_left"]]
            )
            return state.generation

        # Readers watching the state segment see the notice and sync at once.
        generation = self._state.update(create, also=[TableUpdate(NOTICE_KEY, b"")])
        self._state.publish_retention(self._controller)
        pause = 0.001
        while True:
            state, acks = self._state.look(hint)  # one call
            if state.checkpoints.ready(set(state.valid_acks(acks))):
                self._state.fold(hint)  # every reader acknowledged: fold them, look again
                state, acks = self._state.look(hint)
            done = state.checkpoints.get_completed(name)
            if done is not None:
                if state.retention_pending is not None:  # its cut, unless a reader did
                    self._state.publish_retention(self._controller)
                return Checkpoint(name, cuts_of(done["positions"], state.streams))
            if state.generation != generation or state.checkpoints.find(name) is None:
                raise CheckpointFailedError(
                    f"checkpoint {name!r} of {self.subscriber} failed: the group was reset",
                    name=name,
                )
            if self._clock.monotonic() >= deadline:
                self._cancel(name)
                raise CheckpointFailedError(
                    f"checkpoint {name!r} of {self.subscriber}: not every reader passed it "
                    f"within {timeout_s} s",
                    name=name,
                )
            self._scheduler.sleep(pause)
            pause = min(pause * 2, CHECKPOINT_POLL_S_MAX)

    def _cancel(self, name: str) -> None:
        def cancel(state: ReaderGroupState) -> None:
            found = state.checkpoints.find(name)
            if found is not None:
                state.checkpoints.outstanding.remove(found)

        self._state.update(cancel)

    def get_checkpoint(self, name: str) -> Checkpoint | None:
        """Completed checkpoint ``name`` if it is among the last few kept, else None."""
        check_checkpoint_name(name)
        state, _ = self._state.fetch()
        done = state.checkpoints.get_completed(name)
        return None if done is None else Checkpoint(name, cuts_of(done["positions"], state.streams))

    # --- positions -------------------------------------------------------------------------------
    def get_stream_cuts(self) -> dict[str, StreamCut]:
        """The group's current positions, one cut per stream (``"scope/stream"``): each
        segment at the offset its reader last reported (at most
        READER_GROUP_OFFSETS_SAVE_INTERVAL_S behind), unowned ones where they wait."""
        state, _ = self._state.fetch()
        return cuts_of(state.positions(), state.streams)

    def unread_bytes(self) -> int:
        """Bytes between the group's positions (``get_stream_cuts``) and each stream's tail,
        or its end cut: the segments between (the controller's ``get_segments_between``)
        measured by the segment store. Segments truncated or deleted count what is left.
        Also sets the reader lag metric ``pravega_reader_group_unread_bytes`` of this process."""
        state, _ = self._state.fetch()
        positions = state.positions()
        total = 0
        for scoped, cut in cuts_of(positions, state.streams).items():
            scope, stream = parse_scoped_stream(scoped)
            ends = positions_by_id(state.end_offsets).get(scoped, {})
            between = self._controller.get_segments_between(
                scope, stream, cut.positions, ends or None
            )
            for segment in between:
                name = stream_segment_name(scope, stream, segment.segment_id)
                if name in state.completed and name not in positions:
                    continue
                try:
                    info = self._segments.get_info(name).result()
                except SegmentNotFoundError:
                    continue
                end = state.end_offsets.get(name, info.length)
                start = max(positions.get(name, 0), info.start_offset)
                total += max(0, end - start)
        metrics.READER_GROUP_UNREAD_BYTES.set(total, {"scope": self.scope, "group": self.name})
        return total

    def reset_to(self, target: Checkpoint | dict[str, StreamCut] | ReaderGroupConfig) -> None:
        """Restart the group from ``target`` in a new generation: a :class:`Checkpoint`
        (its cuts), a dict ``"scope/stream"`` -> StreamCut (streams left out: their heads),
        or a :class:`ReaderGroupConfig` of the same streams (its start cuts; it becomes the
        group's config, end cuts and retention type included).

        Live readers notice at their next sync, drop everything they buffered and read from
        the new positions: no event from before the reset is returned after it.
        Outstanding checkpoints fail. Retention: a config that changes the type updates the
        group's subscriptions with the new generation (NONE: deleted). InvalidArgumentError
        for anything else, or cuts that are not valid start cuts; nothing changed then.
        """
        current = self.get_config()
        if isinstance(target, ReaderGroupConfig):
            config = check_reader_group_config(target)  # as create_reader_group does
            if tuple(sorted(config.streams)) != tuple(sorted(current.streams)):
                raise InvalidArgumentError(
                    "reset_to a config must name the group's streams "
                    f"{sorted(current.streams)}, got {sorted(config.streams)}"
                )
        else:
            if isinstance(target, Checkpoint):
                cuts = target.cuts
            elif isinstance(target, dict):
                cuts = target
            else:
                raise InvalidArgumentError(
                    "reset_to takes a Checkpoint, a dict of 'scope/stream' -> StreamCut or a "
                    f"ReaderGroupConfig, got {type(target).__name__}"
                )
            try:
                config = ReaderGroupConfig(
                    current.streams,
                    dict(cuts),
                    dict(current.end_cuts),
                    current.automatic_checkpoint_interval_s,
                    current.retention_type,
                    current.raise_on_truncated_data,
                )
            except (TypeError, AttributeError) as e:
                raise InvalidArgumentError(f"reset_to: {e}") from None
            config = check_reader_group_config(config)  # its cuts may be tampered-with
        start, ends = self._controller.get_reader_group_positions(config)

        def reset(state: ReaderGroupState) -> int:
            state.reset(start, config.to_dict())
            state.end_offsets = dict(ends)
            return state.generation

        generation = self._state.update(reset, repeat_unknown=False)
        if config.retention_type is not current.retention_type:
            self._resubscribe(config, generation, cuts_of(start))

    def _resubscribe(
        self, config: ReaderGroupConfig, generation: int, starts: dict[str, StreamCut]
    ) -> None:
        """Follow a change of retention type; a new subscriber acknowledges its start at
        once (retention ignores a subscriber without a cut: docs/design.md, "Retention")."""
        for scoped in config.streams:
            scope, stream = parse_scoped_stream(scoped)
            if config.retention_type is RetentionConfigType.NONE:
                self._controller.delete_subscriber(scope, stream, self.subscriber, generation)
            else:
                self._controller.add_subscriber(scope, stream, self.subscriber, generation)
                self._controller.update_subscriber_stream_cut(
                    scope, stream, self.subscriber, generation, starts[scoped]
                )

    # --- retention -------------------------------------------------------------------------------
    def update_retention_stream_cut(self, cuts: dict[str, StreamCut]) -> None:
        """Publish ``cuts`` (``"scope/stream"`` -> StreamCut: everything before is consumed)
        as this group's acknowledgement for its streams' retention; for a
        MANUAL_RELEASE_AT_USER_STREAMCUT group.

        IllegalStateError for a group of another retention type (NONE: not a subscriber;
        AUTOMATIC: its checkpoints publish). InvalidArgumentError for a stream the group
        does not read, anything but a StreamCut of that stream, a cut that is not a cut of
        the stream or is behind the group's last published one (the controller says so).
        """
        state, _ = self._state.fetch()
        config = state.group_config()
        if config.retention_type is not RetentionConfigType.MANUAL_RELEASE_AT_USER_STREAMCUT:
            raise IllegalStateError(
                f"reader group {self.subscriber} has retention type "
                f"{config.retention_type.value}: only a manual one publishes cuts"
            )
        if not isinstance(cuts, dict) or not cuts:
            raise InvalidArgumentError(
                "cuts must be a non-empty dict of 'scope/stream' -> StreamCut"
            )
        for scoped, cut in cuts.items():
            if scoped not in config.streams:
                raise InvalidArgumentError(f"the group does not read {scoped!r}")
            if not isinstance(cut, StreamCut) or cut.is_unbounded or cut.scoped_stream != scoped:
                raise InvalidArgumentError(f"cuts[{scoped!r}] must be a bounded StreamCut of it")
        for scoped, cut in cuts.items():
            scope, stream = parse_scoped_stream(scoped)
            self._controller.update_subscriber_stream_cut(
                scope, stream, self.subscriber, state.generation, cut
            )


def positions_by_id(positions: dict[str, int]) -> dict[str, dict[int, int]]:
    """Segment name -> offset, grouped by ``"scope/stream"`` and keyed by segment id."""
    out: dict[str, dict[int, int]] = {}
    for segment, offset in positions.items():
        name = parse_segment_name(segment)
        out.setdefault(f"{name.scope}/{name.stream}", {})[name.segment_id] = offset
    return out


def _check_timeout(timeout_s: object) -> None:
    if (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, (int, float))
        or not 0 <= timeout_s < math.inf
    ):
        raise InvalidArgumentError(f"timeout_s must be a number >= 0, got {timeout_s!r}")
