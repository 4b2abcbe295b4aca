"""The segment selector: which segment of a stream an event goes to.

*design* (after Pravega's ``SegmentSelector``) A stream's current segments split the
routing-key space [0, 1) into ranges without gaps or overlap. A routing key is
hashed to a point of that space (``naming.routing_key_hash``) and the event goes to
the segment whose range holds the point, so one key always maps to one segment and
its events keep their order. An event without a key goes to a segment chosen at
random. Answers for keys are cached, up to ``ROUTING_KEY_CACHE_ENTRIES_MAX`` keys
(the cache is emptied when full: keys repeat, and a hash is cheap to redo).

The selector is generic in what it hands out (the writer's per-segment output
streams). :meth:`SegmentSelector.set_segments` replaces the whole table at once and
empties the cache, which is how a later change will put the successors of a sealed
segment in its place.

Not thread-safe by itself: the writer calls it under its lock.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from pravega_ray.constants import ROUTING_KEY_CACHE_ENTRIES_MAX
from pravega_ray.errors import InvalidArgumentError
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

    __slots__ = ("_choice", "_lows", "_segments", "key_cache")

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
        self.set_segments(segments)

    @property
    def segments(self) -> list[S]:
        """The current segments, in key-range order."""
        return list(self._segments)

    def set_segments(self, segments: Sequence[tuple[float, S]]) -> None:
        """Route to ``segments`` from now on; forget every cached key."""
        ordered = sorted(segments, key=lambda pair: pair[0])
        self._lows = [low for low, _ in ordered]
        self._segments = [segment for _, segment in ordered]
        self.key_cache.clear()

    def select(self, routing_key: str | None) -> S:
        """The segment for ``routing_key``, a random one for None.

        InvalidArgumentError for a key that is not a str (or None) or is not encodable
        as UTF-8 (e.g. a lone surrogate).
        """
        if routing_key is None:
            return self._choice(self._segments)
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
