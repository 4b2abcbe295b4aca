"""What a reader hands back: the event, where it was, and the reader's position."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pravega_ray.controller.reader_group_state import check_offsets


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
    and the reader's ``position`` just after it."""

    event: Any
    segment: str
    offset: int
    position: Position
