"""What a reader hands back: the event, where it was, and the reader's position."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pravega_ray.controller.reader_group_state import check_offsets
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


@dataclass(frozen=True, slots=True)
class EventRead:
    """One event: ``event`` (deserialized), the ``segment`` and ``offset`` of its frame,
    and the reader's ``position`` just after it.

    A checkpoint marker instead has ``checkpoint_name`` set, ``event`` None, ``segment``
    "" and ``offset`` -1, and the reader's ``position`` (every event returned before it):
    the reader records that position for the checkpoint at its next ``read_next_event``.
    """

    event: Any
    segment: str
    offset: int
    position: Position
    checkpoint_name: str | None = None

    @property
    def is_checkpoint(self) -> bool:
        return self.checkpoint_name is not None


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
