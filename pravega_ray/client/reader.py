"""The event reader: one member of a reader group.

A reader owns some of the group's segments (see :mod:`reader_group_state`), keeps one
read outstanding per owned segment (the next one issued as soon as one completes; tail
long-polls), and hands events out one at a time from whichever segment has one ready,
round robin (``read_next_events``: many at once). Per segment, events come in the order
they were written, so per routing key order holds. The reader remembers, per owned
segment, the offset just past the last event it returned; that is what it reports to the
group and where the next owner continues after a release, so no event is skipped or
repeated within the group.

Across epochs: a segment sealed by a scale and read to its end (every event returned) is
reported *completed* at the next sync, which the reader makes at once; the group hands
out its successors only once all their predecessors are completed, so per routing key
order holds across scales. Until reported, a completed segment stays in the reader's
position at its end offset.

The reader syncs with its group (every ``READER_GROUP_SYNC_INTERVAL_S``, and whenever it
owns nothing or finished a segment) by reading and conditionally updating the group's state
segment itself (:mod:`reader_group_synchronizer`); it calls the controller only when it
joins (the group's record) and for the successors of segments it finished. It also keeps a
tail read of the state segment outstanding and syncs at once when a checkpoint's notice is
appended to it; it records passing a checkpoint as an acknowledgement of its own (see
``contracts/checkpoint_state.py``).

Each reader has a *session* in its group: another reader with the same id is refused
(ReaderAlreadyExistsError) while this one is a member, and once this one is declared
offline its calls raise ReaderNotInGroupError instead of touching segments others own.
It also carries the id of the group incarnation it joined: once that group is deleted
(even if one of the same name is created again) its calls raise ReaderGroupNotFoundError.
Either way the reader *stops*: it drops the segments and events it held, and every later
``read_next_event`` raises the same error. (Between two syncs, at most
``READER_GROUP_SYNC_INTERVAL_S`` apart, a reader declared offline while it still runs may
return events it had buffered: declare offline only readers that are gone.)

An event the serializer cannot decode is not consumed: ``read_next_event`` raises
SerializationError (with the raw ``data``, ``segment``, ``offset`` and the reader's
``position``), the reader's position stays before the event, so asking again raises
again, and ``skip_event(error)`` passes over exactly that event. Other segments' events
keep coming in between.

Not thread-safe: one thread uses a reader.

Seams for a deterministic simulation: the reader reads the time from its ``clock``
(timeouts and sync intervals) and sleeps through its ``scheduler``. Waits on read
futures stay in real time: a simulated connection completes its futures itself.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any, Generic, TypeVar

from pravega_ray import constants
from pravega_ray.client.batch_client import BatchClient
from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.client.event_pointers import EventPointer
from pravega_ray.client.events import EventRead, Position
from pravega_ray.client.reader_group_synchronizer import ReaderGroupSynchronizer
from pravega_ray.client.segment_reads import SegmentReadState as _SegmentReader
from pravega_ray.client.segment_reads import skip_truncated, successors_by_name
from pravega_ray.client.serializers import Serializer, check_serializer
from pravega_ray.client.time_windows import TimeWindows
from pravega_ray.contracts.checkpoint_state import NOTICE_KEY
from pravega_ray.contracts.reader_group_state import Assignment, ReaderGroupState
from pravega_ray.contracts.segment_store import ReadResult, SegmentInfo
from pravega_ray.contracts.watermarks import TimeWindow
from pravega_ray.errors import (
    ClientClosedError,
    ConflictingUpdateError,
    IllegalStateError,
    InvalidArgumentError,
    PravegaError,
    ReaderGroupNotFoundError,
    ReaderNotInGroupError,
    ReinitializationRequiredError,
    RetriableError,
    ScopeNotFoundError,
    SegmentNotFoundError,
    SegmentTruncatedError,
    SerializationError,
    TruncatedDataError,
)
from pravega_ray.timing import (
    DAEMON_THREADS,
    SYSTEM_CLOCK,
    Clock,
    ThreadScheduler,
    check_clock,
    check_thread_scheduler,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

_HEADER_BYTES = constants.EVENT_HEADER_BYTES

STATE_WATCH_PAUSE_S = 0.05
"""After the watched state segment changed with no checkpoint notice, the reader waits this
long before watching again: at most 1 / STATE_WATCH_PAUSE_S wake-ups a second per reader,
however many readers change the state (a notice appended meanwhile is read at once then)."""
_new_tuple = tuple.__new__  # EventRead without its Python __new__: the hot path's constructor


class EventStreamReader(Generic[T]):
    """Reads events of a reader group. Create with ``cluster.create_reader``.

    ``clock`` and ``scheduler`` (keyword-only) are the test seams: where the
    reader reads the time and how it sleeps.
    """

    def __init__(
        self,
        reader_id: str,
        scope: str,
        group: str,
        serializer: Serializer[T],
        controller: ControllerConnection,
        segments: SegmentStoreConnection,
        *,
        clock: Clock = SYSTEM_CLOCK,
        scheduler: ThreadScheduler = DAEMON_THREADS,
    ) -> None:
        if not isinstance(reader_id, str) or not reader_id or len(reader_id) > 255:
            raise InvalidArgumentError("reader_id must be a non-empty str of at most 255 chars")
        check_serializer(serializer)
        check_clock(clock)
        check_thread_scheduler(scheduler)
        self.reader_id = reader_id
        self._session = uuid.uuid4().hex
        self.scope = scope
        self.group = group
        self._serializer = serializer
        self._controller = controller
        self._connection = segments
        self._clock = clock
        self._scheduler = scheduler
        self._owned: dict[str, _SegmentReader] = {}
        # Segments read to their end and not yet reported to the group: name -> end offset.
        self._completed: dict[str, int] = {}
        self._successors: dict[str, dict[str, list[str]]] = {}  # asked of the controller
        self._last_sync = 0.0
        self._offsets_reported = -math.inf
        self._turn = 0
        # The hot path's view of _owned (None: rebuild): the owned segments in a fixed order,
        # and per segment (then per completed one) its (name, next offset): an event's
        # position is a snapshot of that list. Reset wherever _owned, _completed or an
        # offset changes off the hot path.
        self._readers: list[_SegmentReader] | None = None
        self._pairs: list[tuple[str, int]] = []
        # Some owned segment may be read to its end: _next_buffered looks for those.
        self._segment_ended = False
        self._deserialize = serializer.deserialize
        self._monotonic = clock.monotonic
        self._closed = False
        self._stopped: PravegaError | None = None  # why the group no longer has this reader
        # Checkpoints: the one learned and not yet recorded (name, id), acknowledged at the
        # next call; the acknowledgements stored and not yet folded into the group's state
        # (id -> the stored value), folded by whoever sees a checkpoint fully acknowledged.
        self._checkpoint_due: str | None = None
        self._checkpoint_due_id: str | None = None
        self._checkpoint_due_readers: tuple[str, ...] = ()  # who it waited for then
        self._acked: dict[str, dict[str, object]] = {}
        # A tail read of the state segment (the watch): a checkpoint's notice appended to it
        # makes the reader sync at once instead of at its next periodic sync.
        self._watch: Future[ReadResult] | Future[SegmentInfo] | None = None
        self._watch_offset: int | None = None  # None: the segment's length is asked first
        self._watch_next = 0.0  # monotonic time before which the watch is not re-armed
        self._fold_next = 0.0  # monotonic time before which a sync does not try to fold
        self._finished = False  # the group's end cuts (or sealed streams) are all read
        self._raise_on_truncated = False
        self._reset_seen: ReinitializationRequiredError | None = None  # to raise, once
        self._truncations: deque[TruncatedDataError] = deque()  # to raise, once each
        # The group's state, in its state segment: joined, synced and left through it.
        self._state = ReaderGroupSynchronizer(
            scope, group, controller, segments, scheduler=scheduler
        )
        session = self._session
        self._windows = TimeWindows(controller, segments, clock)

        def join(state: ReaderGroupState) -> int:
            state.add_reader(reader_id, session)
            self._windows.capture(state)
            return state.generation

        self._generation: int = self._state.update(join)

    # --- public API ----------------------------------------------------------------------------
    def read_next_event(self, timeout_s: float = 1.0) -> EventRead | None:
        """The next event, or None if none arrives within ``timeout_s`` seconds.

        Returns an :class:`EventRead` with the deserialized event, its segment
        and offset, and the reader's position after it. Raises SerializationError for
        an event the serializer cannot decode (not consumed: see :meth:`skip_event`),
        ReinitializationRequiredError once after a ``ReaderGroup.reset_to`` this reader had
        not seen (at its next sync; the next call reads from the new positions),
        ReaderNotInGroupError once the reader was declared offline, ReaderGroupNotFoundError
        once its group was deleted (or deleted and re-created), and again on every later
        call (the reader has stopped); DataCorruptionError if stored data is damaged;
        ClientClosedError after close(); InvalidArgumentError for a bad ``timeout_s``.
        """
        if self._closed:
            raise ClientClosedError("reader is closed")
        if self._stopped is not None:
            raise type(self._stopped)(self._stopped.message, reader_id=self.reader_id)
        if (
            isinstance(timeout_s, bool)
            or not isinstance(timeout_s, (int, float))
            or not timeout_s >= 0  # NaN too
        ):
            raise InvalidArgumentError(f"timeout_s must be a number >= 0, got {timeout_s!r}")
        now = self._monotonic()
        if (
            now - self._last_sync < constants.READER_GROUP_SYNC_INTERVAL_S
            and self._checkpoint_due is None
            and not self._truncations
            and self._owned
        ):
            # The hot path: no sync, checkpoint or truncation is due, so the loop's first
            # pass would return a buffered event if there is one; this returns it directly.
            event = self._next_buffered()
            if event is not None:
                return event
        deadline = now + min(timeout_s, 1e9)
        try:
            self._record_checkpoint()
        except (ReaderNotInGroupError, ReaderGroupNotFoundError, ScopeNotFoundError) as e:
            self._stop(e)
            raise
        while True:
            now = self._clock.monotonic()
            if now - self._last_sync >= constants.READER_GROUP_SYNC_INTERVAL_S or not self._owned:
                try:
                    marker = self._sync()
                except (ReaderNotInGroupError, ReaderGroupNotFoundError, ScopeNotFoundError) as e:
                    self._stop(e)
                    raise
                if marker is not None:
                    return marker
            if self._reset_seen is not None:
                error, self._reset_seen = self._reset_seen, None
                raise error
            if self._truncations:
                raise self._truncations.popleft()
            event = self._next_buffered()
            if event is not None:
                return event
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0 or (self._finished and not self._owned and not self._completed):
                return None
            self._issue_reads()
            pending: list[Future[Any]] = [
                s.pending for s in self._owned.values() if s.pending is not None
            ]
            if pending:  # else it owns nothing and syncs every turn: no watch needed
                self._arm_watch()
                if self._watch is not None:
                    pending.append(self._watch)
            if not pending:
                self._scheduler.sleep(min(remaining, constants.READER_GROUP_SYNC_INTERVAL_S))
                continue
            wait(
                pending,
                timeout=min(remaining, constants.READER_GROUP_SYNC_INTERVAL_S),
                return_when=FIRST_COMPLETED,
            )
            self._collect_reads()
            self._collect_watch()

    def read_next_events(self, max_events: int, timeout_s: float = 1.0) -> list[EventRead]:
        """Up to ``max_events`` events: what as many :meth:`read_next_event` calls would
        return, in order, the per-call work paid once. Waits up to ``timeout_s`` for the
        first (none: ``[]``), then adds only buffered events; ends early when none is left,
        a sync is due, after a checkpoint marker (recorded at the next call, once the caller
        processed the batch), and before an undecodable event (the next call raises it).
        Raises as read_next_event does; InvalidArgumentError unless ``max_events`` is an int
        >= 1."""
        if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1:
            raise InvalidArgumentError(f"max_events must be an int >= 1, got {max_events!r}")
        first = self.read_next_event(timeout_s)
        if first is None:
            return []
        batch = [first]
        if first.is_checkpoint or self._checkpoint_due is not None or self._truncations:
            return batch
        last_sync = self._last_sync
        while (
            len(batch) < max_events
            and self._monotonic() - last_sync < constants.READER_GROUP_SYNC_INTERVAL_S
            and self._take_buffered(batch, max_events)
            and self._last_sync == last_sync  # else a segment was finished: sync first
        ):
            pass
        return batch

    def position(self) -> Position:
        """For each segment the group has this reader hold, the offset of the next event
        not returned (a segment read to its end and not yet reported: its end)."""
        offsets = [(s.name, s.next_offset) for s in self._owned.values()]
        if self._completed:  # a completed segment is no longer in _owned
            offsets.extend(self._completed.items())
        offsets.sort()
        return Position(tuple(offsets))

    def get_current_time_window(self, scoped_stream: str) -> TimeWindow:
        """Where this reader is in event time on ``scoped_stream`` ("scope/stream", a stream
        of its group; Pravega's ``getCurrentTimeWindow``): every event it reads from now on
        has a time of at least ``lower_ms``, given writers that note their times honestly
        (``writer.note_time``); ``upper_ms`` bounds the times noted where it is reading.
        Either is None while unknown (no watermark passed yet; none ahead read yet). Moves
        as the group's position passes the stream's watermarks, seen at each sync and at
        most every ``MARKS_REFRESH_S``. Raises InvalidArgumentError (not a stream of the
        group), StreamNotFoundError (deleted), DataCorruptionError (a damaged watermark),
        ClientClosedError."""
        if self._closed:
            raise ClientClosedError(f"reader {self.reader_id} is closed")
        own = [(s.name, s.next_offset) for s in self._owned.values()]
        own.extend(self._completed.items())
        return self._windows.window(scoped_stream, own)

    def skip_event(self, error: SerializationError) -> None:
        """Pass over the undecodable event ``error`` (from :meth:`read_next_event`) names.

        The reader's position then moves past it, as if it had been returned. Raises
        IllegalStateError unless that event (segment, offset and bytes) is still the next
        one of a segment this reader owns (e.g. it was skipped already, or the segment was
        handed to another reader meanwhile), InvalidArgumentError for anything but a
        SerializationError, ClientClosedError after close().
        """
        if self._closed:
            raise ClientClosedError("reader is closed")
        if not isinstance(error, SerializationError):
            raise InvalidArgumentError("skip_event takes the SerializationError raised")
        name = getattr(error, "segment", None)
        segment = self._owned.get(name) if isinstance(name, str) else None
        offset = getattr(error, "offset", None)
        data = getattr(error, "data", None)
        if (
            segment is None
            or not segment.events
            or segment.events[0][0] != offset
            or (data is not None and segment.events[0][1] != data)
        ):
            raise IllegalStateError(
                "that event is not the next event of a segment this reader owns"
            )
        offset, payload = segment.events.popleft()
        segment.next_offset = offset + constants.EVENT_HEADER_BYTES + len(payload)
        self._readers = None

    def fetch_event(self, pointer: EventPointer) -> T:
        """The one event ``pointer`` points at (an ``EventRead.event_pointer``, kept or
        read back with ``EventPointer.from_base64``), deserialized; the reader's position
        does not move. Any reader of the group can fetch any event of the group's streams.

        Raises InvalidArgumentError for something not an EventPointer or a pointer into a
        stream the group does not read; NoSuchEventError (its segment is gone, the pointer
        goes past the segment's end, or no event of its length starts at its offset),
        SegmentTruncatedError (truncated since), SerializationError, DataCorruptionError;
        ClientClosedError after close() (``client/event_pointers.py``).
        """
        if self._closed:
            raise ClientClosedError("reader is closed")
        if not isinstance(pointer, EventPointer):
            raise InvalidArgumentError(f"fetch_event takes an EventPointer, not {type(pointer)}")
        streams = self._state.fetch()[0].streams
        if pointer.scoped_stream not in streams:
            raise InvalidArgumentError(
                f"{pointer} is an event of {pointer.scoped_stream}, which group "
                f"{self.scope}/{self.group} does not read ({sorted(streams)})"
            )
        batch = BatchClient(self._controller, self._connection, scheduler=self._scheduler)
        event: T = batch.fetch_event(pointer, self._serializer)
        return event

    def close(self) -> None:
        """Leave the group, handing owned segments back at the reader's position.

        Does not raise if the group was deleted or this reader was declared offline
        (logged at INFO). ControllerUnavailableError if the controller stayed unreachable
        (the reader is closed anyway; its segments stay with it until it is declared
        offline).
        """
        if self._closed:
            return
        self._closed = True
        offsets = self.position().to_dict()
        self._owned.clear()
        self._completed.clear()
        self._readers = None
        if self._stopped is not None:
            return  # not a member any more: nothing to hand back
        generation = self._generation
        acks = self._own_acks()

        def leave(state: ReaderGroupState) -> bool:
            state.fold_acks(acks)  # what it passed first: the checkpoint keeps those positions
            return state.remove_reader(self.reader_id, self._session, offsets, generation)

        try:
            self._state.update(leave)
        except (ReaderGroupNotFoundError, ReaderNotInGroupError, ScopeNotFoundError) as e:
            log.info("reader %s closed; its group had gone: %s", self.reader_id, e)
            return
        try:  # leaving may have completed a checkpoint whose cut waits to be published
            self._state.publish_retention(self._controller)
        except PravegaError as e:
            log.info("reader %s closed; retention cut not published: %r", self.reader_id, e)

    def __enter__(self) -> EventStreamReader[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals -----------------------------------------------------------------------------
    def _stop(self, error: PravegaError) -> None:
        """The group no longer has this reader: drop everything it held, never touch it."""
        log.info("reader %s stopped: %s", self.reader_id, error)
        self._stopped = error
        self._owned.clear()
        self._completed.clear()
        self._readers = None

    def _sync(self) -> EventRead | None:
        """Report completed segments (offsets at most every
        READER_GROUP_OFFSETS_SAVE_INTERVAL_S) and take the owned set the group answers; one
        read of the state segment when nothing changed, a conditional update otherwise.

        A checkpoint marker to return if the group has a (not silent) checkpoint this
        reader had not learned of; a silent one is recorded at the next call all the same.
        """
        now = self._clock.monotonic()
        self._last_sync = now
        report = now - self._offsets_reported >= constants.READER_GROUP_OFFSETS_SAVE_INTERVAL_S
        offsets = {s.name: s.next_offset for s in self._owned.values()} if report else {}
        completed = dict(self._completed)
        generation = self._generation
        now_ms = self._clock.wall_time_ms()
        acknowledged = frozenset(self._acked)

        def sync(state: ReaderGroupState) -> Assignment:
            answer = state.sync(
                self.reader_id,
                self._session,
                offsets,
                completed,
                self._successors_of,
                generation,
                now_ms,
                None,
                acknowledged,
            )
            self._windows.capture(state)
            return answer

        assignment = self._state.update(sync)
        # Acknowledgements folded (or of checkpoints gone) are done with.
        self._acked = {i: a for i, a in self._acked.items() if i in assignment.unfolded}
        if assignment.unfolded and now >= self._fold_next:
            self._fold()  # in case the last reader died before folding (at most every 1 s)
        self._readers = None  # the owned set may change below
        self._segment_ended = True  # look for finished segments once per sync
        if report:
            self._offsets_reported = now
        self._raise_on_truncated = assignment.raise_on_truncated_data
        if assignment.generation != self._generation:
            # The group was reset: drop everything from before, read from the new positions.
            log.info(
                "reader %s: group reset (generation %d)", self.reader_id, assignment.generation
            )
            self._generation = assignment.generation
            self._reset_seen = ReinitializationRequiredError(
                f"reader group {self.scope}/{self.group} was reset (generation "
                f"{assignment.generation}): reading goes on from its new positions"
            )
            self._owned.clear()
            self._completed.clear()
            self._truncations.clear()
            self._windows.reset()  # positions may have moved back: windows start again
            self._checkpoint_due = None
            self._checkpoint_due_id = None
            self._acked.clear()
        # Accepted only if the group no longer lists them as owned (a reader with a
        # checkpoint to pass keeps them); if the call failed they are reported again next
        # time (else the group would hand them back to this reader and they would be read
        # again).
        for name in completed:
            if name not in assignment.owned:
                self._successors.pop(name, None)
                self._completed.pop(name, None)
        # The answer is the whole owned set: a segment a lost reply assigned shows up here.
        for name in [n for n in self._owned if n not in assignment.owned]:
            del self._owned[name]
        for name, offset in assignment.owned.items():
            if name not in self._owned and name not in self._completed:
                end = assignment.ends.get(name)
                self._owned[name] = _SegmentReader(name, offset, offset, end_offset=end)
        for _ in range(assignment.release_count):
            # Prefer giving up a segment with nothing buffered: less read work thrown away.
            victim = min(self._owned.values(), key=lambda s: (len(s.events), s.name))
            if not self._release(victim.name, victim.next_offset):
                break  # the group keeps it with this reader for now (a checkpoint to pass)
            del self._owned[victim.name]
        self._finished = assignment.finished
        if assignment.publish:
            self._state.publish_retention(self._controller)
        checkpoint = assignment.checkpoint
        if checkpoint is None or checkpoint == self._checkpoint_due:
            return None
        self._checkpoint_due = checkpoint  # recorded at the next call: all before it processed
        self._checkpoint_due_id = assignment.checkpoint_id
        self._checkpoint_due_readers = assignment.checkpoint_readers
        if assignment.silent:
            return None
        return EventRead(None, "", -1, self.position(), checkpoint_name=checkpoint)

    def _record_checkpoint(self) -> None:
        """Record this reader's position for the checkpoint it returned (or learned of,
        if silent) at the call before: an acknowledgement under a key of its own (no race
        with the other readers), then a look that folds the acknowledgements into the
        group's state if every reader's is there. If the store fails the checkpoint stays
        due: the next call records it again."""
        name, checkpoint_id = self._checkpoint_due, self._checkpoint_due_id
        if name is None or checkpoint_id is None:
            return
        positions = self.position().to_dict()
        ack: dict[str, object] = {
            "session": self._session,
            "generation": self._generation,
            "positions": positions,
        }
        hint = [(checkpoint_id, r) for r in self._checkpoint_due_readers]
        own: dict[tuple[str, str], object] = {(checkpoint_id, self.reader_id): ack}
        # The only reader it waits for folds at once with its acknowledgement unstored; the
        # others store theirs, then look (one call) whether every reader's is there: of
        # readers passing at once, the one storing last sees them all.
        if self._checkpoint_due_readers != (self.reader_id,) or name not in self._fold(hint, own):
            self._state.acknowledge(
                checkpoint_id, self.reader_id, self._session, self._generation, positions
            )
            self._acked[checkpoint_id] = ack
            self._fold(hint)
        self._checkpoint_due = None
        self._checkpoint_due_id = None
        self._checkpoint_due_readers = ()

    def _arm_watch(self) -> None:
        """Keep one tail read of the state segment outstanding (first: a call asking for
        its length), unless paused after a change without a notice."""
        if self._watch is not None or self._clock.monotonic() < self._watch_next:
            return
        segment = self._state.segment
        if self._watch_offset is None:
            self._watch = self._connection.get_info(segment)
        else:
            offset, wait_s = self._watch_offset, constants.READER_LONG_POLL_S
            want = constants.READER_READ_BYTES
            self._watch = self._connection.read(segment, offset, want, wait_s)

    def _collect_watch(self) -> None:
        """A completed watch read: sync at once if a checkpoint notice was appended. The
        watch only hastens a sync; a failed read is dropped and tried again later."""
        future = self._watch
        if future is None or not future.done():
            return
        self._watch = None
        try:
            result = future.result()
        except Exception as e:  # e.g. the container restarting, or the group deleted
            log.debug("reader %s: watching the group's state failed: %r", self.reader_id, e)
            self._watch_offset = None
            self._watch_next = self._clock.monotonic() + constants.READER_GROUP_SYNC_INTERVAL_S
            return
        if isinstance(result, SegmentInfo):  # the first call: watch from the tail
            self._watch_offset = result.length
            return
        if result.offset != self._watch_offset:
            return  # a read from before a failure reset the watch
        self._watch_offset = result.offset + len(result.data)
        if NOTICE_KEY in result.data:
            self._last_sync = -math.inf
        elif result.data:
            self._watch_next = self._clock.monotonic() + STATE_WATCH_PAUSE_S

    def _own_acks(self) -> dict[tuple[str, str], object]:
        """This reader's acknowledgements not yet folded, as ``fold_acks`` takes them."""
        return {(i, self.reader_id): dict(a) for i, a in self._acked.items()}

    def _fold(
        self,
        hint: list[tuple[str, str]] | None = None,
        own: dict[tuple[str, str], object] | None = None,
    ) -> list[str]:
        """Fold the group's acknowledgements (and ``own``, not stored) if a checkpoint has
        them all (``hint``: see ReaderGroupSynchronizer.fold); the checkpoints completed. A
        failure is logged (none completed): the next sync, or the initiator, folds them."""
        self._fold_next = self._clock.monotonic() + constants.READER_GROUP_OFFSETS_SAVE_INTERVAL_S
        try:
            names = self._state.fold(hint or (), own)
            if names:  # it completed one: publish its cut if it waits to be
                self._state.publish_retention(self._controller)
            return names
        except (RetriableError, ConflictingUpdateError) as e:
            log.info("reader %s: folding checkpoint acks failed: %r", self.reader_id, e)
            return []

    def _release(self, segment: str, offset: int) -> bool:
        """Give ``segment`` back at ``offset``; whether the group no longer lists it as this
        reader's (released now, or by an earlier try of a repeated update). False: the group
        keeps it with this reader (a checkpoint became due meanwhile), which must then go on
        reading it: dropped anyway, it would be handed out again at the offset last synced,
        and what this reader returned since would be read twice (found by the chaos run)."""
        generation, reader_id, session = self._generation, self.reader_id, self._session

        def release(state: ReaderGroupState) -> bool:
            state.release(reader_id, session, segment, offset, generation)
            return segment not in state.assigned.get(reader_id, {})

        return self._state.update(release)

    def _successors_of(self, segment: str) -> dict[str, list[str]]:
        """Successors of ``segment`` (read to its end), each with all its predecessors, by
        name: asked of the controller once per segment (a state change may be applied
        again after a lost race)."""
        if segment not in self._successors:
            self._successors[segment] = successors_by_name(self._controller, segment)
        return self._successors[segment]

    def _current_readers(self) -> list[_SegmentReader]:
        """The owned segments in turn order, once segments read to their end are completed."""
        if self._segment_ended:
            self._complete_ended()
        readers = self._readers
        return self._refresh() if readers is None else readers

    def _next_buffered(self) -> EventRead | None:
        """The next buffered event, round robin over the owned segments (None if none)."""
        readers = self._current_readers()
        count = len(readers)
        turn = self._turn
        for i in range(count):
            index = (turn + i) % count
            segment = readers[index]
            events = segment.events
            if events:
                self._turn = index + 1
                offset, payload = events[0]
                try:
                    event = self._deserialize(payload)
                except Exception as e:  # not consumed: raised again until skipped
                    raise SerializationError(
                        f"event at offset {offset} of {segment.name} cannot be deserialized "
                        f"({e}); reader.skip_event(error) passes over it",
                        data=payload,
                        segment=segment.name,
                        offset=offset,
                        position=self.position(),
                    ) from e
                events.popleft()
                next_offset = offset + _HEADER_BYTES + len(payload)
                segment.next_offset = next_offset
                pairs = self._pairs
                pairs[index] = (segment.name, next_offset)
                # The position as raw pairs, made a Position only if the caller reads it.
                return _new_tuple(EventRead, (event, segment.name, offset, tuple(pairs), None))
        return None

    def _take_buffered(self, batch: list[EventRead], limit: int) -> bool:
        """Append to ``batch`` (up to ``limit`` long) up to 256 buffered events of the next
        segment in turn that has some, as :meth:`_next_buffered` would return them; False
        if there were none or one cannot be decoded (left for the next call to raise)."""
        readers = self._current_readers()
        count = len(readers)
        for i in range(count):
            index = (self._turn + i) % count
            segment = readers[index]
            events = segment.events
            if events:
                break
        else:
            return False
        self._turn = index + 1
        name, pairs, append = segment.name, self._pairs, batch.append
        deserialize = self._deserialize
        next_offset = segment.next_offset
        decoded = True
        for _ in range(min(limit - len(batch), len(events), 256)):
            offset, payload = events[0]
            try:
                event = deserialize(payload)
            except Exception:
                decoded = False
                break
            events.popleft()
            next_offset = offset + _HEADER_BYTES + len(payload)
            pairs[index] = (name, next_offset)
            append(_new_tuple(EventRead, (event, name, offset, tuple(pairs), None)))
        segment.next_offset = next_offset
        return decoded

    def _refresh(self) -> list[_SegmentReader]:
        """Rebuild the hot path's view of the owned segments and their offsets."""
        readers = list(self._owned.values())
        self._readers = readers
        pairs = [(s.name, s.next_offset) for s in readers]
        pairs.extend(self._completed.items())
        self._pairs = pairs
        return readers

    def _complete_ended(self) -> None:
        """Move segments read to their end, every event returned, to _completed: reported
        at a sync due at once, so their successors (held by the group) come soon."""
        self._segment_ended = False
        for segment in list(self._owned.values()):
            if not segment.end_of_segment:
                continue
            if segment.events or segment.pending is not None:
                self._segment_ended = True  # look again once its events are returned
                continue
            del self._owned[segment.name]
            self._completed[segment.name] = segment.next_offset
            self._last_sync = -math.inf
            self._readers = None

    def _issue_reads(self) -> None:
        """A read of each owned segment that has none outstanding and nothing buffered.
        Each waits at the tail up to READER_LONG_POLL_S whatever the caller's timeout, and
        stays outstanding past the call that issued it: a reader polling with short
        timeouts keeps one read per segment in flight, not one per call (at 16 readers
        calling ``read_next_event(0.05)`` at the tail, per-call reads were 220 container
        calls a second)."""
        for segment in self._owned.values():
            if segment.pending is None and not segment.end_of_segment and not segment.events:
                self._issue_read(segment, constants.READER_LONG_POLL_S)

    def _issue_read(self, segment: _SegmentReader, wait_s: float) -> None:
        """Start the next read of ``segment`` (it has none outstanding), up to the group's
        end cut in it, if any (reaching that: the segment is read to its end)."""
        # Assembling a large event: ask for the rest of it, up to the read limit.
        want = min(
            constants.READ_BYTES_MAX,
            max(constants.READER_READ_BYTES, segment.frames.missing_bytes),
        )
        if segment.end_offset is not None:  # never read past the group's end cut
            want = min(want, segment.end_offset - segment.fetch_offset)
            if want <= 0:
                segment.end_of_segment = True
                self._segment_ended = True
                return
        segment.pending = self._connection.read(segment.name, segment.fetch_offset, want, wait_s)

    def _collect_reads(self) -> None:
        for segment in self._owned.values():
            future = segment.pending
            if future is None or not future.done():
                continue
            segment.pending = None
            error = future.exception()
            if error is not None:
                if isinstance(error, RetriableError):
                    log.info("read of %s failed (%r); retrying", segment.name, error)
                    continue
                if isinstance(error, (SegmentTruncatedError, SegmentNotFoundError)):
                    self._truncated(segment, error)
                    continue
                raise error
            result = future.result()
            if result.offset != segment.fetch_offset:
                continue  # a stale read from before a release/re-acquire
            segment.events.extend(segment.frames.feed(result.data, result.offset))
            segment.fetch_offset = result.offset + len(result.data)
            segment.end_of_segment = result.end_of_segment or (
                segment.end_offset is not None and segment.fetch_offset >= segment.end_offset
            )
            if segment.end_of_segment:
                self._segment_ended = True
            elif result.data:
                # Read ahead: the next read is under way while these events are handed out,
                # so a reader with a backlog does not wait a round trip per read. Still at
                # most one read per segment outstanding: at most two reads' bytes buffered.
                self._issue_read(segment, constants.READER_LONG_POLL_S)

    def _truncated(self, segment: _SegmentReader, error: PravegaError) -> None:
        """The next bytes of ``segment`` were truncated away: go on past them (see
        :func:`skip_truncated`) and, if the group says so, raise TruncatedDataError once."""
        truncation = skip_truncated(segment, error, self._controller, self.reader_id)
        if self._raise_on_truncated:
            self._truncations.append(truncation)
        self._readers = None
        self._segment_ended = self._segment_ended or segment.end_of_segment
