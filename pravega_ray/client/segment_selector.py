"""The segment selector: which segment of a stream an event goes to.

*design* (after Pravega's ``SegmentSelector``) A stream's current segments split the
routing-key space [0, 1) into ranges without gaps or overlap. A routing key is
hashed to a point of that space (``naming.routing_key_hash``) and the event goes to
the segment whose range holds the point, so one key always maps to one segment and
its events keep their order. An event without a key goes to a segment chosen at
random. Answers for keys are cached, up to ``ROUTING_KEY_CACHE_ENTRIES_MAX`` keys
(the cache is emptied when full: keys repeat, and a hash is cheap to redo).

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
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.invariant import invariant
from pravega_ray.naming import routing_key_hash

__all__ = ["SegmentSelector"]

S = TypeVar("S")


class SegmentSelector(Generic[S]):
    """Maps routing keys to segments, given as ``(key_low, segment)`` pairs.

    ``key_low`` is where the segment's range starts; each range ends where the next
    one starts, and the lowest must start at 0. ``rng`` chooses the segment of an
    event without a routing key; None means the ``random`` module's shared generator
    (so ``random.seed`` applies, as it always did). Pass a seeded ``random.Random``
    for a reproducible run.
    """

    __slots__ = ("_choice", "_distinct", "_lows", "_segments", "key_cache")

    def __init__(
        self, segments: Sequence[tuple[float, S]], rng: random.Random | None = None
    ) -> None:
        self.key_cache: dict[str, S] = {}
        """Segments by routing key. Callers on a hot path may read it directly
        (``key_cache.get(key)``) and call :meth:`select` on a miss; only the selector
        changes it, and always in place, so a reference to it stays valid."""
        self._choice: Callable[[Sequence[S]], S] = random.choice if rng is None else rng.choice
        self._lows: list[float] = []
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
        highs = [*self._lows[1:], 1.0]
        return list(zip(self._lows, highs, self._segments, strict=True))

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

    def select(self, routing_key: str | None) -> S:
        """The segment for ``routing_key``, a random one for None.

        InvalidArgumentError for a key that is not a str (or None) or is not encodable
        as UTF-8 (e.g. a lone surrogate).
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
                point = routing_key_hash(routing_key)
            except UnicodeEncodeError:
                raise InvalidArgumentError(
                    f"routing_key {routing_key!r} is not encodable as UTF-8"
                ) from None
            segment = self._segments[bisect.bisect_right(self._lows, point) - 1]
            if len(self.key_cache) >= ROUTING_KEY_CACHE_ENTRIES_MAX:
                self.key_cache.clear()
            self.key_cache[routing_key] = segment
        return segment
