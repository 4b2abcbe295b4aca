"""Container metadata: what a segment container knows of each of its segments.

Pravega's ``ContainerMetadata`` and ``SegmentMetadata``. Each segment has two
views of the same facts:

* the **durable** view (``length``, ``sealed``, ``attributes``, ...): operations
  whose log record is durable, applied in log order by the durable log. Readers,
  ``get_info`` and checkpoints' consistency checks see only this view.
* the **pending** view (``pending_length``, ``pending_sealed``,
  ``pending_attributes``, ...): the durable view plus every operation accepted
  but not yet durable. Operations are validated against it and then update it
  (Pravega's metadata update transaction), so pipelined appends of one writer
  chain correctly. If the durable log fails, the pending view is ahead of the
  durable one and the container stops; recovery rebuilds both from the log.

Extended attributes are a cache over the attribute index
(:mod:`~pravega_ray.segmentstore.attribute_cache`): values applied but not yet in
the index are *dirty* and never evicted; ``attributes_complete`` says nothing of
the segment lives only in the index. Core attributes (event count, creation time)
are plain fields.

Not thread-safe: the container's event loop owns it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pravega_ray.constants import TRAFFIC_TIME_CONSTANT_S
from pravega_ray.contracts.attributes import is_core_key
from pravega_ray.contracts.segment_store import SegmentInfo, SegmentRole, SegmentTraffic
from pravega_ray.errors import (
    IllegalStateError,
    InvalidArgumentError,
    SegmentNotFoundError,
    SegmentSealedError,
    SegmentTruncatedError,
)
from pravega_ray.invariant import invariant
from pravega_ray.naming import validate_segment_name
from pravega_ray.segmentstore import operations as ops
from pravega_ray.segmentstore.chunk_layout import ChunkLayout
from pravega_ray.segmentstore.traffic import RateTracker

__all__ = [
    "ContainerMetadata",
    "SegmentMetadata",
    "segment_of_storage_name",
    "wait_on",
    "wake_all",
]

_INCARNATION = "#incarnation."


def segment_of_storage_name(storage_name: str) -> str:
    """The segment a Tier-2 name (``SegmentMetadata.storage_name``) belongs to."""
    return storage_name.split(_INCARNATION, 1)[0]


def wake_all(waiters: list[asyncio.Future[None]]) -> None:
    """Resolve every waiter (each re-checks what it waits for) and forget them."""
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)
    waiters.clear()


async def wait_on(waiters: list[asyncio.Future[None]], timeout_s: float) -> None:
    """Wait until :func:`wake_all` wakes ``waiters`` or ``timeout_s`` passes.

    A waiter that times out (or is cancelled) leaves the list, so waiting on an idle
    segment again and again does not grow it.
    """
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiters.append(waiter)
    try:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(waiter, timeout_s)
    finally:
        if not waiter.done() or waiter.cancelled():
            with contextlib.suppress(ValueError):
                waiters.remove(waiter)


@dataclass(slots=True)
class SegmentMetadata:
    """Metadata of one segment. ``pending_*`` include queued, not yet durable operations."""

    name: str
    creation_time_ms: int
    role: str = "normal"
    durable: bool = True  # False while its CreateSegment is queued, not yet durable
    # Tells this segment from earlier ones of the same name in Tier-2 (None: created before
    # data format 5, stored under its bare name).
    incarnation: str | None = None
    start_offset: int = 0
    length: int = 0
    sealed: bool = False
    event_count: int = 0
    attributes: dict[bytes, int] = field(default_factory=dict)
    storage_length: int = 0
    chunks: ChunkLayout = field(default_factory=ChunkLayout)
    pending_length: int = 0
    pending_sealed: bool = False
    pending_attributes: dict[bytes, int] = field(default_factory=dict)
    pending_event_count: int = 0
    pending_start_offset: int = 0
    pending_deleted: bool = False
    dirty_attributes: dict[bytes, int] = field(default_factory=dict)
    attributes_complete: bool = True
    attributes_dirty_since: float | None = None  # when the cache first saw them dirty
    # Root of the newest attribute-index state known durable (-1: none recorded); recovery
    # hands it to the index, which refuses to serve an older state (lost or cut chunks).
    attribute_root: int = -1
    attribute_index_damaged: bool = False  # reported once; its flushes are skipped
    unflushed_since: float | None = None
    # (offset, log sequence) of each durable append not yet in Tier-2, oldest first: the log
    # may be truncated only below the oldest sequence over all segments.
    unflushed_appends: deque[tuple[int, int]] = field(default_factory=deque)
    traffic: RateTracker | None = None
    # When data was last appended live (monotonic seconds); "long ago" after a recovery, so
    # the transient-segment cleanup deletes unmerged transient segments at once.
    last_used_s: float = -math.inf
    # Futures resolved whenever durable data or a seal is applied (tail reads wait on them).
    data_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    # Futures resolved whenever a pending attribute changes (reordered appends wait on them).
    attribute_waiters: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def storage_name(self) -> str:
        """The name of this segment's Tier-2 objects (chunks, attribute index).

        Unique per incarnation, so a segment deleted and created again never shares a chunk
        or an index with its predecessor, whose deletion may still be under way (or be
        replayed after a restart).
        """
        if self.incarnation is None:
            return self.name
        return f"{self.name}{_INCARNATION}{self.incarnation}"

    # --- the pending view ----------------------------------------------------------------------
    def check_not_sealed(self) -> None:
        """SegmentSealedError if the segment is sealed or a seal is queued."""
        if self.pending_sealed:
            raise SegmentSealedError(f"segment {self.name} is sealed")

    def check_attribute_keys(self, keys: Iterable[bytes]) -> None:
        """InvalidArgumentError if this is a transient segment and a key is an extended one.

        Transient segments (large events) take no extended attributes; core ones
        (event count, ...) are allowed. Checked before anything changes.
        """
        if self.role == SegmentRole.TRANSIENT.value:
            for key in keys:
                if not is_core_key(key):
                    raise InvalidArgumentError(
                        f"transient segment {self.name} takes no extended attributes "
                        f"(key {key.hex()})"
                    )

    def reserve(self, length: int, attributes: dict[bytes, int], event_count: int) -> int:
        """Take ``length`` bytes at the pending end and the attribute values; returns the offset.

        Wakes appends waiting for an attribute to move (reordered blocks of a writer).
        """
        offset = self.pending_length
        self.pending_length += length
        self.pending_attributes.update(attributes)
        self.pending_event_count += event_count
        wake_all(self.attribute_waiters)
        return offset

    def start_pending_view(self, now: float) -> None:
        """After recovery: the pending view starts equal to the durable one."""
        self.pending_length = self.length
        self.pending_sealed = self.sealed
        self.pending_attributes = dict(self.attributes)
        self.attributes_complete = False  # the attribute index may hold more
        self.pending_event_count = self.event_count
        self.pending_start_offset = self.start_offset
        self.traffic = RateTracker(TRAFFIC_TIME_CONSTANT_S, now)

    # --- the durable view ----------------------------------------------------------------------
    def check_not_truncated(self, offset: int) -> None:
        if offset < self.start_offset:
            raise SegmentTruncatedError(
                f"{self.name} is truncated at {self.start_offset}; cannot read at {offset}",
                start_offset=self.start_offset,
            )

    def info(self) -> SegmentInfo:
        return SegmentInfo(
            self.name,
            self.length,
            self.start_offset,
            self.sealed,
            self.event_count,
            self.storage_length,
            self.creation_time_ms,
        )

    # --- checkpoints ---------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The segment's durable view, for a checkpoint.

        Attributes: only the values the attribute index may lack (applied, not yet
        flushed: ``dirty_attributes``); the index serves the rest after recovery.
        """
        return {
            "n": self.name,
            "t": self.creation_time_ms,
            "so": self.start_offset,
            "r": self.role,
            "l": self.length,
            "s": self.sealed,
            "e": self.event_count,
            "a": {k.hex(): v for k, v in self.dirty_attributes.items()},
            "sl": self.storage_length,
            "ar": self.attribute_root,
            "c": self.chunks.to_records(),
            **({"i": self.incarnation} if self.incarnation is not None else {}),
        }

    @classmethod
    def from_snapshot(cls, entry: dict[str, Any], sequence: int) -> SegmentMetadata:
        """The segment a checkpoint (in log record ``sequence``) recorded."""
        state = cls(
            entry["n"],
            entry["t"],
            role=entry["r"],
            start_offset=entry["so"],
            length=entry["l"],
            sealed=entry["s"],
            event_count=entry["e"],
            storage_length=entry["sl"],
            attribute_root=entry.get("ar", -1),
            chunks=ChunkLayout.from_records(entry["c"], entry["n"]),
            incarnation=entry.get("i"),
        )
        state.attributes = {bytes.fromhex(k): v for k, v in entry["a"].items()}
        state.dirty_attributes = dict(state.attributes)
        if state.storage_length < state.length:
            # Flushed by ChunkAdded records after this checkpoint (else no truncation).
            state.unflushed_appends.append((state.storage_length, sequence))
        return state

    def matches_snapshot(self, entry: dict[str, Any]) -> bool:
        """Whether the durable view equals what a checkpoint recorded (replay's paired check)."""
        return (self.length, self.sealed, self.event_count, self.storage_length) == (
            entry["l"],
            entry["s"],
            entry["e"],
            entry["sl"],
        )


class ContainerMetadata:
    """Every segment of one container, by name, and the *busy* ones among them: those that
    may hold durable data, log positions (``unflushed_appends``) or attribute values not yet
    in Tier-2. The storage writer's and the attribute cache's rounds visit only the busy
    segments, so an idle container's rounds cost what its busy segments cost, not what all
    its segments do (25,000 idle segments cost 12-19% of a core when every round visited them).

    A segment is busy from when it is added, and again each time the durable log applies a
    change that gives it such work (:meth:`touch`); a round drops the clean ones
    (:meth:`drop_clean`). :meth:`revisit_all` is the check that nothing escaped: it makes
    every segment busy again, and names any not clean that was not busy.
    """

    def __init__(self, container_id: int) -> None:
        self.container_id = container_id
        self._segments: dict[str, SegmentMetadata] = {}
        self._busy: dict[str, SegmentMetadata] = {}
        # Attribute values applied by the durable log, ever (the attribute cache bounds what
        # it holds from it without counting every segment's values).
        self.values_applied = 0

    def __contains__(self, segment: str) -> bool:
        return segment in self._segments

    def __iter__(self) -> Iterator[SegmentMetadata]:
        return iter(self._segments.values())

    def __len__(self) -> int:
        return len(self._segments)

    def get(self, segment: str) -> SegmentMetadata:
        """The live segment (not deleted, nor being deleted); SegmentNotFoundError otherwise.

        An invalid name is InvalidNameError rather than "not found".
        """
        state = self._segments.get(segment)
        if state is None or state.pending_deleted:
            validate_segment_name(segment)
            raise SegmentNotFoundError(f"segment {segment} does not exist")
        return state

    def find(self, segment: str) -> SegmentMetadata | None:
        """The segment's metadata even while a delete is queued; None once it is gone."""
        return self._segments.get(segment)

    def add(self, state: SegmentMetadata) -> None:
        invariant(state.name not in self._segments, f"segment {state.name} added twice")
        self._segments[state.name] = state
        self._busy[state.name] = state  # recovered ones may hold data not in Tier-2

    def remove(self, segment: str) -> SegmentMetadata:
        self._busy.pop(segment, None)
        return self._segments.pop(segment)

    def pending_attribute_maps(self) -> Iterator[dict[bytes, int]]:
        """Each segment's cached attribute values (``pending_attributes``)."""
        return (s.pending_attributes for s in self._segments.values())

    # --- busy segments (class docstring) ---------------------------------------------------------
    def touch(self, state: SegmentMetadata, values: int = 0) -> None:
        """``state`` may have gained data, log positions or attribute values not in Tier-2
        (``values`` of them applied: counted in :attr:`values_applied`): the durable log
        calls this for each change it applies that adds some."""
        self.values_applied += values
        if self._segments.get(state.name) is state:
            self._busy[state.name] = state

    def tier2_lag(self) -> int:
        """Durable bytes of every segment not yet in Tier-2 (the storage writer's lag)."""
        return sum(max(0, s.length - s.storage_length) for s in self._busy.values())

    def busy(self) -> list[SegmentMetadata]:
        """Every segment that may have work for the background rounds (a superset of those
        that have: a segment leaves the set only in :meth:`drop_clean`)."""
        return list(self._busy.values())

    def drop_clean(self) -> None:
        """Forget the busy segments that are clean now: every durable byte, log position and
        attribute value of theirs is in Tier-2."""
        for name, state in list(self._busy.items()):
            if _clean(state):
                del self._busy[name]

    def revisit_all(self) -> list[str]:
        """Make every segment busy again (the rounds look at each once more); the names of
        those not clean that were not busy, which would be a change applied without
        :meth:`touch` (the caller reports them)."""
        escaped = [n for n, s in self._segments.items() if n not in self._busy and not _clean(s)]
        self._busy = dict(self._segments)
        return escaped

    def names(self) -> list[str]:
        return sorted(self._segments)

    def merge_pair(self, target: str, source: str) -> tuple[SegmentMetadata, SegmentMetadata]:
        """The target and source of a merge, if the pending view allows it.

        IllegalStateError if the source is not sealed or is truncated, SegmentSealedError
        if the target is sealed, SegmentNotFoundError if either is missing.
        """
        t, s = self.get(target), self.get(source)
        if not s.pending_sealed:
            raise IllegalStateError(f"cannot merge {source}: it is not sealed")
        if s.pending_start_offset > 0:
            raise IllegalStateError(f"cannot merge {source}: it is truncated")
        if t.pending_sealed:
            raise SegmentSealedError(f"cannot merge into {target}: it is sealed")
        return t, s

    def snapshot(self) -> ops.MetadataCheckpoint:
        """A checkpoint of the durable view: every segment whose creation is durable.

        Taken by the operation processor when the checkpoint's record is written, so it
        is the state right at the checkpoint's place in the log (queued operations, such
        as a create, a delete or a merge, come after it and are not in it).
        """
        return ops.MetadataCheckpoint(
            tuple(s.snapshot() for s in self._segments.values() if s.durable)
        )

    def oldest_unflushed_sequence(self) -> int | None:
        """The log sequence of the oldest durable append not yet in Tier-2 (None: all are)."""
        return min(
            (s.unflushed_appends[0][1] for s in self._busy.values() if s.unflushed_appends),
            default=None,
        )

    def traffic(self, now: float) -> list[SegmentTraffic]:
        result = []
        for state in self._segments.values():
            events, size = state.traffic.rates(now) if state.traffic else (0.0, 0.0)
            result.append(SegmentTraffic(state.name, events, size))
        return result

    def wake_all_waiters(self) -> None:
        """Every waiter re-checks (e.g. finds the container closed)."""
        for state in self._segments.values():
            wake_all(state.attribute_waiters)
            wake_all(state.data_waiters)


def _clean(state: SegmentMetadata) -> bool:
    """Whether nothing of ``state`` waits for Tier-2 (data, log positions, attributes)."""
    return (
        state.length <= state.storage_length
        and not state.unflushed_appends
        and not state.dirty_attributes
    )
