"""Reader group state: which reader owns which segment, at which offset. Pure logic.

Readers of a group share the segments of its streams; each segment is owned by
at most one reader at a time, so each event is delivered to one reader of the
group. Rebalancing is cooperative (Pravega's ``ReaderGroupStateManager``):

* a reader ``sync``\\ s periodically, reporting the offsets it has reached and
  the segments it read to the end; the answer lists segments it may acquire
  (with their offsets) and how many it should give up;
* a reader gives a segment up with ``release(segment, offset)``, where
  ``offset`` is the offset of the next event it has *not* returned, so the next
  owner continues exactly there: nothing is skipped or read twice;
* fair share is ``ceil(live segments / readers)``.

A reader that leaves returns its segments at the offsets it reports. The state
is a plain value (``to_dict``/``from_dict``) that its host persists after every
change of ownership.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pravega_ray.errors import IllegalStateError, InvalidArgumentError
from pravega_ray.invariant import invariant


@dataclass(frozen=True, slots=True)
class Assignment:
    """Answer to a sync: segments newly acquired (with start offsets) and how many to release."""

    acquired: dict[str, int]
    release_count: int


@dataclass
class ReaderGroupState:
    scope: str
    name: str
    streams: list[str]
    unassigned: dict[str, int] = field(default_factory=dict)
    assigned: dict[str, dict[str, int]] = field(default_factory=dict)
    completed: set[str] = field(default_factory=set)

    @classmethod
    def new(
        cls, scope: str, name: str, streams: list[str], segments: list[str]
    ) -> ReaderGroupState:
        return cls(scope, name, list(streams), {s: 0 for s in segments})

    # --- membership --------------------------------------------------------------------------
    def add_reader(self, reader_id: str) -> None:
        """Join the group (idempotent: a reader that rejoins keeps what it owns)."""
        if not reader_id:
            raise InvalidArgumentError("reader id must not be empty")
        self.assigned.setdefault(reader_id, {})

    def remove_reader(self, reader_id: str, offsets: dict[str, int] | None) -> None:
        """Leave; owned segments return to the pool at ``offsets`` (else the last synced ones)."""
        owned = self.assigned.pop(reader_id, None)
        if owned is None:
            return
        for segment, offset in owned.items():
            self.unassigned[segment] = max(offset, (offsets or {}).get(segment, offset))

    @property
    def readers(self) -> list[str]:
        return sorted(self.assigned)

    # --- reading -----------------------------------------------------------------------------
    def _owned(self, reader_id: str) -> dict[str, int]:
        owned = self.assigned.get(reader_id)
        if owned is None:
            raise IllegalStateError(f"reader {reader_id} is not in group {self.name}")
        return owned

    def sync(self, reader_id: str, offsets: dict[str, int], completed: list[str]) -> Assignment:
        owned = self._owned(reader_id)
        for segment, offset in offsets.items():
            if segment in owned:
                owned[segment] = max(owned[segment], offset)
        for segment in completed:
            if segment in owned:
                del owned[segment]
                self.completed.add(segment)
        live = len(self.unassigned) + sum(len(o) for o in self.assigned.values())
        fair = math.ceil(live / len(self.assigned)) if live else 0
        acquired: dict[str, int] = {}
        while len(owned) < fair and self.unassigned:
            segment = min(self.unassigned)
            offset = self.unassigned.pop(segment)
            owned[segment] = offset
            acquired[segment] = offset
        return Assignment(acquired, max(0, len(owned) - fair))

    def release(self, reader_id: str, segment: str, offset: int) -> None:
        owned = self._owned(reader_id)
        if segment not in owned:
            raise IllegalStateError(f"reader {reader_id} does not own {segment}")
        invariant(offset >= 0, "negative release offset")
        del owned[segment]
        self.unassigned[segment] = offset

    # --- persistence -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "name": self.name,
            "streams": self.streams,
            "unassigned": self.unassigned,
            "assigned": self.assigned,
            "completed": sorted(self.completed),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReaderGroupState:
        return cls(
            d["scope"],
            d["name"],
            list(d["streams"]),
            dict(d["unassigned"]),
            {k: dict(v) for k, v in d["assigned"].items()},
            set(d["completed"]),
        )
