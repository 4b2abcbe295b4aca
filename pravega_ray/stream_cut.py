"""Stream cuts: a position in every segment of a stream at once (Pravega's ``StreamCut``).

A cut maps segment ids (``epoch << 32 | number``) to byte offsets within them. The
controller returns one for ``StreamManager.get_segments_at_time``
(the segments of the epoch that was current then, each from offset 0). The reader-group
and retention issue adds head and tail cuts, comparison and a serialized form on top of
this class; its fields stay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pravega_ray.errors import InvalidArgumentError

__all__ = ["StreamCut"]


@dataclass(frozen=True, slots=True, init=False)
class StreamCut:
    """``scope/stream`` at ``positions`` (segment id -> offset). Immutable and hashable."""

    scope: str
    stream: str
    _positions: tuple[tuple[int, int], ...]

    def __init__(self, scope: str, stream: str, positions: Mapping[int, int]) -> None:
        if not isinstance(positions, Mapping):
            raise InvalidArgumentError("a stream cut's positions must be a mapping")
        pairs = []
        for sid, offset in positions.items():
            for what, value in (("segment id", sid), ("offset", offset)):
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise InvalidArgumentError(f"a stream cut's {what} must be an int >= 0")
            pairs.append((sid, offset))
        object.__setattr__(self, "scope", scope)
        object.__setattr__(self, "stream", stream)
        object.__setattr__(self, "_positions", tuple(sorted(pairs)))

    @property
    def positions(self) -> dict[int, int]:
        """Segment id -> offset, a fresh dict."""
        return dict(self._positions)

    @property
    def segment_ids(self) -> list[int]:
        return [sid for sid, _ in self._positions]
