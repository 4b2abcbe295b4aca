"""What a reader hands back: the event, where it was, and the reader's position."""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from pravega_ray.client.event_pointers import EventPointer
from pravega_ray.contracts.reader_group_state import check_offsets
from pravega_ray.naming import stream_segment_name
from pravega_ray.stream_cut import StreamCut


@dataclass(frozen=True, slots=True)
class Position:
    """A reader's position: for each segment it owns, the offset of the next event to read.

    Opaque to applications except for serialization (``to_dict``/``from_dict``).
    """

    offsets: tuple[tuple[str, int], ...]

    def to_dict(self) -> dict[str, int]:
        return dict(self.offsets)

    @classmethod
    def from_dict(cls, data: dict[str, int]) -> Position:
        """The position ``to_dict`` gave; InvalidArgumentError unless segment name -> int >= 0."""
        return cls(tuple(sorted(check_offsets(data, "a position").items())))


class EventRead(tuple[Any, str, int, "Position", "str | None"]):
    """One event: ``event`` (deserialized), the ``segment`` and ``offset`` of its frame,
    and the reader's ``position`` just after it.

    A checkpoint marker instead has ``checkpoint_name`` set, ``event`` None, ``segment``
    "" and ``offset`` -1, and the reader's ``position`` (every event returned before it):
    the reader records that position for the checkpoint at its next ``read_next_event``.

    Immutable (its fields are read-only properties), equal to another EventRead with equal
    fields, picklable. Built once per event on the reader's hot path, so it is a tuple
    underneath (built in C) and its position is kept as the reader's raw per-segment offsets
    at that event, made into a :class:`Position` when ``position`` is read: the same
    position, whenever it is read. Treat it as a record, not as a sequence.
    """

    __slots__ = ()

    def __new__(
        cls,
        event: Any,
        segment: str,
        offset: int,
        position: Position,
        checkpoint_name: str | None = None,
    ) -> EventRead:
        return tuple.__new__(cls, (event, segment, offset, position, checkpoint_name))

    # Read-only properties over the tuple (itemgetter runs in C); each is annotated with the
    # type it returns, which a type checker cannot see through ``property(itemgetter(i))``.
    event: Any = property(itemgetter(0), doc="The deserialized event (None for a marker).")
    segment: str = property(itemgetter(1), doc="The segment of the event's frame.")  # type: ignore[assignment]
    offset: int = property(itemgetter(2), doc="The offset of the event's frame.")  # type: ignore[assignment]
    checkpoint_name: str | None = property(itemgetter(4), doc="The checkpoint, for a marker.")  # type: ignore[assignment]

    @property
    def position(self) -> Position:
        """The reader's position just after this event (before it, for a marker)."""
        raw = tuple.__getitem__(self, 3)
        if isinstance(raw, Position):
            return raw
        return Position(tuple(sorted(raw)))  # the reader's (segment, offset) pairs

    @property
    def event_pointer(self) -> EventPointer | None:
        """Where this event is stored (its segment, offset and frame length), to read it
        again with ``reader.fetch_event`` (None for a checkpoint marker)."""
        if tuple.__getitem__(self, 4) is not None:
            return None
        raw = tuple.__getitem__(self, 3)
        pairs = raw.offsets if isinstance(raw, Position) else raw
        segment, offset = tuple.__getitem__(self, 1), tuple.__getitem__(self, 2)
        for name, after in pairs:
            if name == segment:
                return EventPointer(segment, offset, after - offset)
        return None

    @property
    def is_checkpoint(self) -> bool:
        return tuple.__getitem__(self, 4) is not None

    def _fields(self) -> tuple[Any, ...]:
        return (self.event, self.segment, self.offset, self.position, self.checkpoint_name)

    def __eq__(self, other: object) -> bool:
        # Never equal to a plain tuple (a tuple's own == would compare the raw items).
        return isinstance(other, EventRead) and self._fields() == other._fields()

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._fields())

    def __lt__(self, other: object) -> bool:
        return NotImplemented

    __le__ = __gt__ = __ge__ = __lt__

    def __reduce__(self) -> tuple[Any, ...]:
        return (EventRead, self._fields())

    def __repr__(self) -> str:
        return (
            f"EventRead(event={self.event!r}, segment={self.segment!r}, offset={self.offset!r}, "
            f"position={self.position!r}, checkpoint_name={self.checkpoint_name!r})"
        )


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A completed checkpoint of a reader group: its ``name`` and, per ``"scope/stream"``,
    the :class:`StreamCut` where the group was (every event before it was processed).

    ``ReaderGroup.reset_to(checkpoint)`` restarts the group there.
    """

    name: str
    cuts: dict[str, StreamCut]


def positions_of(cuts: dict[str, StreamCut]) -> dict[str, int]:
    """The inverse of :func:`cuts_of`: segment name -> offset."""
    return {
        stream_segment_name(cut.scope, cut.stream, sid): offset
        for cut in cuts.values()
        for sid, offset in cut.positions.items()
    }
