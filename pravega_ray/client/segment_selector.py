"""The segment selector: which segment of a stream an event goes to.

*design* (after Pravega's ``SegmentSelector``) A stream's current segments split the
routing-key space [0, 1) into ranges without gaps or overlap. A routing key is
hashed to a point of that space and the event goes to the segment whose range holds
the point, so one key always maps to one segment and its events keep their order. The
hash and which side of a boundary a point on it goes to are the stream's routing rule
(``records.KeyHash``, from ``StreamInfo.key_hash``):

* ``PRAVEGA`` (streams created since streams record their rule): Pravega's clients'
  ``wire.routing.pravega_key_hash``, and the segment with the smallest ``key_high`` >=
  the point (Pravega's ``StreamSegments.getSegmentForKey``): a segment owns
  ``(key_low, key_high]``, and 0.0 goes to the first segment. A key thus lands where the
  official clients put it.
* ``LEGACY`` (streams created before): ``naming.routing_key_hash``, and a segment owns
  ``[key_low, key_high)``.

An event without a key goes to a segment chosen at random. Answers for keys are cached,
up to ``ROUTING_KEY_CACHE_ENTRIES_MAX`` keys (the cache is emptied when full: keys repeat,
and a hash is cheap to redo: about 1 us for the legacy hash, 3.5 us for Pravega's).

The selector is generic in what it hands out (the writer's per-segment output
streams). :meth:`SegmentSelector.set_segments` replaces the whole table at once;
:meth:`SegmentSelector.replace` puts the successors of a sealed segment in its place
(after Pravega's ``SegmentSelector.refreshSegmentEventWritersUponSealed``): each range
the sealed segment had is split into its overlaps with the successors' ranges, so keys
outside it keep their segment. Both empty the key cache.

Not thread-safe by itself: the writer calls it under its lock.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from pravega_ray.constants import ROUTING_KEY_CACHE_ENTRIES_MAX
from pravega_ray.contracts.records import KeyHash
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.invariant import invariant
from pravega_ray.naming import routing_key_hash

__all__ = ["SegmentSelector"]

S = TypeVar("S")


def _hash_of(rule: KeyHash) -> Callable[[str], float]:
    """Routing rule ``rule``'s hash: a routing key -> a point of [0, 1). Both hashes raise
    UnicodeEncodeError for a key holding a lone surrogate."""
    if rule is KeyHash.LEGACY:
        return routing_key_hash
    # Imported on first use, not with this module: importing ``pravega_ray.wire`` loads the
    # whole wire codec (about 40 ms, a third of ``import pravega_ray``), which a process
    # that never writes to a stream (a reader, the CLI) need not pay for.
    from pravega_ray.wire.routing import pravega_key_hash

    return pravega_key_hash


class SegmentSelector(Generic[S]):
    """Maps routing keys to segments, given as ``(key_low, segment)`` pairs, by the
    stream's routing rule ``key_hash`` (module docstring).

    ``key_low`` is where the segment's range starts; each range ends where the next
    one starts (the last at 1.0), and the lowest must start at 0. ``rng`` chooses the
    segment of an event without a routing key; None means the ``random`` module's shared
    generator (so ``random.seed`` applies, as it always did). Pass a seeded
    ``random.Random`` for a reproducible run. InvalidArgumentError if ``key_hash`` names
    no rule.
    """

    __slots__ = (
        "_choice",
        "_distinct",
        "_hash",
        "_highs",
        "_lows",
        "_owns_high",
        "_segments",
        "key_cache",
        "key_hash",
    )

    def __init__(
        self,
        segments: Sequence[tuple[float, S]],
        rng: random.Random | None = None,
        *,
        key_hash: KeyHash,
    ) -> None:
        try:
            rule = KeyHash(key_hash)
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"key_hash must be a KeyHash, got {key_hash!r}") from None
        self.key_hash = rule
        """The routing rule: fixed for the selector's life, as it is for its stream's."""
        self._hash = _hash_of(rule)
        # Which end of its range a segment owns: the high one for Pravega's rule.
        self._owns_high = rule is KeyHash.PRAVEGA
        self.key_cache: dict[str, S] = {}
        """Segments by routing key. Callers on a hot path may read it directly
        (``key_cache.get(key)``) and call :meth:`select` on a miss; only the selector
        changes it, and always in place, so a reference to it stays valid."""
        self._choice: Callable[[Sequence[S]], S] = random.choice if rng is None else rng.choice
        self._lows: list[float] = []
        self._highs: list[float] = []
        self._segments: list[S] = []
        self._distinct: list[S] = []
        self.set_segments(segments)

    @property
    def segments(self) -> list[S]:
        """The current segments, in key-range order, each once."""
        return list(self._distinct)

    @property
    def ranges(self) -> list[tuple[float, float, S]]:
        """The routing table: ``(key_low, key_high, segment)`` in key order."""
        return list(zip(self._lows, self._highs, self._segments, strict=True))

    def set_segments(self, segments: Sequence[tuple[float, S]]) -> None:
        """Route to ``segments`` from now on; forget every cached key.

        Neighbouring ranges of one segment are joined into one.
        """
        ordered = sorted(segments, key=lambda pair: pair[0])
        lows: list[float] = []
        routed: list[S] = []
        for low, segment in ordered:
            if routed and routed[-1] is segment:
                continue
            lows.append(low)
            routed.append(segment)
        self._lows = lows
        self._highs = [*lows[1:], 1.0]
        self._segments = routed
        self._distinct = list({id(s): s for s in routed}.values())
        self.key_cache.clear()

    def replace(self, sealed: S, successors: Sequence[tuple[float, float, S]]) -> None:
        """Route the keys of ``sealed`` to ``successors``, given as ``(key_low, key_high,
        segment)``; forget every cached key.

        Each range routed to ``sealed`` is split into its overlaps with the successors'
        ranges, which must cover it exactly (they come from the controller, which
        guarantees that a scale's new ranges cover the sealed ones); a successor that
        overlaps none of them is not routed to. Nothing changes if ``sealed`` is not
        routed to.
        """
        table: list[tuple[float, S]] = []
        for low, high, segment in self.ranges:
            if segment is not sealed:
                table.append((low, segment))
                continue
            covered = low
            for s_low, s_high, successor in sorted(successors, key=lambda r: r[0]):
                start, end = max(low, s_low), min(high, s_high)
                if start < end:
                    invariant(start == covered, "successors cover a sealed range without gaps")
                    table.append((start, successor))
                    covered = end
            invariant(covered == high, "successors cover the whole sealed range")
        self.set_segments(table)

    def choose(self, segments: Sequence[S]) -> S:
        """One of ``segments`` at random (the selector's ``rng``): for an event without a
        routing key."""
        return self._choice(segments)

    def segment_at(self, point: float) -> S:
        """The segment owning ``point`` of the key space [0, 1) under the selector's rule:
        for ``PRAVEGA`` the first range whose ``key_high`` is >= ``point`` (a point on a
        boundary goes to the lower segment, 0.0 to the first), for ``LEGACY`` the last
        range whose ``key_low`` is <= ``point`` (a point on a boundary goes to the upper
        segment)."""
        if self._owns_high:
            return self._segments[bisect.bisect_left(self._highs, point)]
        return self._segments[bisect.bisect_right(self._lows, point) - 1]

    def select(self, routing_key: str | None) -> S:
        """The segment for ``routing_key`` under the selector's rule, a random one for None.

        InvalidArgumentError for a key that is not a str (or None) or is not encodable
        as UTF-8 (e.g. a lone surrogate), under either rule.
        """
        if routing_key is None:
            return self._choice(self._distinct)
        if not isinstance(routing_key, str):
            raise InvalidArgumentError(
                f"routing_key must be a str or None, got {type(routing_key).__name__}"
            )
        segment = self.key_cache.get(routing_key)
        if segment is None:
            try:
                point = self._hash(routing_key)
            except UnicodeEncodeError:
                raise InvalidArgumentError(
                    f"routing_key {routing_key!r} is not encodable as UTF-8"
                ) from None
            segment = self.segment_at(point)
            if len(self.key_cache) >= ROUTING_KEY_CACHE_ENTRIES_MAX:
                self.key_cache.clear()
            self.key_cache[routing_key] = segment
        return segment
