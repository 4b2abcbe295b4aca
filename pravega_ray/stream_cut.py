"""Stream cuts: a position in every segment of a stream at once (Pravega's ``StreamCut``).

A cut maps segment ids (``epoch << 32 | number``) to byte offsets within them, at event
boundaries, covering the stream's key space once. ``StreamCut.UNBOUNDED`` stands for "no
bound": the head where a start is expected, the tail where an end is.

* **Serialized form.** ``to_base64()`` / ``from_base64()``: URL-safe base64 of a versioned
  JSON document (``{"v": 1, "scope", "stream", "positions": [[id, offset], ...]}``). The
  format is stable: version 1 strings stay readable by every later version
  (``tests/unit/test_stream_cut.py`` holds a literal one). Anything else is
  InvalidArgumentError, never a half-read cut.
* **Order.** Cuts of one stream are partially ordered: ``a <= b`` when ``b`` is certainly
  not behind ``a`` anywhere in the key space. Where both cuts hold a segment, the offsets
  decide; where they differ, ``a <= b`` requires every segment only ``a`` holds to come from
  an earlier epoch than every segment only ``b`` holds (a segment created later that
  overlaps an earlier one's key range descends from it). Cuts whose differing segments
  interleave in epochs may be neither ``<=`` nor ``>=`` even when one is ahead: the order
  never claims more than the ids prove (the controller, which knows the key ranges, is
  exact). Cuts of different streams, and UNBOUNDED, compare only with ``==``; ``<`` etc.
  raise InvalidArgumentError for them.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pravega_ray.errors import InvalidArgumentError
from pravega_ray.naming import parse_segment_name

__all__ = ["StreamCut", "cuts_of"]

FORMAT_VERSION = 1
"""Version of the serialized form ``to_base64`` writes."""


def _epoch(segment_id: int) -> int:
    return segment_id >> 32


@dataclass(frozen=True, slots=True, init=False)
class StreamCut:
    """``scope/stream`` at ``positions`` (segment id -> offset). Immutable and hashable."""

    UNBOUNDED: ClassVar[StreamCut]
    """No bound: a reader group's start at the head, its end at the (moving) tail."""

    scope: str
    stream: str
    _positions: tuple[tuple[int, int], ...]

    def __init__(self, scope: str, stream: str, positions: Mapping[int, int]) -> None:
        if not isinstance(scope, str) or not isinstance(stream, str):
            raise InvalidArgumentError("a stream cut's scope and stream must be strs")
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

    @property
    def is_unbounded(self) -> bool:
        return self is StreamCut.UNBOUNDED or (not self.scope and not self._positions)

    @property
    def scoped_stream(self) -> str:
        """``"scope/stream"`` ("" for UNBOUNDED)."""
        return f"{self.scope}/{self.stream}" if self.scope else ""

    # --- serialized form -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON-able form ``from_dict`` reads (the body of ``to_base64``)."""
        return {
            "v": FORMAT_VERSION,
            "scope": self.scope,
            "stream": self.stream,
            "positions": [list(p) for p in self._positions],
        }

    @classmethod
    def from_dict(cls, data: object) -> StreamCut:
        """The cut ``to_dict`` gave; InvalidArgumentError for anything malformed."""
        if not isinstance(data, Mapping):
            raise InvalidArgumentError("a serialized stream cut must be a mapping")
        version = data.get("v")
        if version != FORMAT_VERSION:
            raise InvalidArgumentError(f"unknown stream cut format version {version!r}")
        scope, stream, pairs = data.get("scope"), data.get("stream"), data.get("positions")
        if not isinstance(pairs, list) or not all(
            isinstance(p, list) and len(p) == 2 for p in pairs
        ):
            raise InvalidArgumentError(
                "a serialized stream cut's positions must be [id, offset] pairs"
            )
        positions = dict((p[0], p[1]) for p in pairs)
        if len(positions) != len(pairs):
            raise InvalidArgumentError("a serialized stream cut names a segment twice")
        if scope == "" and stream == "" and not positions:
            return cls.UNBOUNDED
        if not isinstance(scope, str) or not scope or not isinstance(stream, str) or not stream:
            raise InvalidArgumentError("a serialized stream cut lacks its scope or stream")
        return cls(scope, stream, positions)

    def to_base64(self) -> str:
        """This cut as a URL-safe base64 str; ``StreamCut.from_base64(s) == self``."""
        body = json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)
        return base64.urlsafe_b64encode(body.encode()).decode("ascii")

    @classmethod
    def from_base64(cls, text: str) -> StreamCut:
        """The cut ``to_base64`` gave; InvalidArgumentError for anything else."""
        if not isinstance(text, str):
            raise InvalidArgumentError(f"from_base64 takes a str, got {type(text).__name__}")
        try:
            body = json.loads(base64.urlsafe_b64decode(text.encode("ascii")).decode())
        except (ValueError, UnicodeError, binascii.Error) as e:
            raise InvalidArgumentError(f"not a serialized stream cut: {e}") from None
        return cls.from_dict(body)

    # --- order -----------------------------------------------------------------------------------
    def _comparable(self, other: object) -> StreamCut:
        if not isinstance(other, StreamCut):
            raise InvalidArgumentError(f"a StreamCut compares with a StreamCut, not {other!r}")
        if self.is_unbounded or other.is_unbounded:
            raise InvalidArgumentError("StreamCut.UNBOUNDED has no order; compare with ==")
        if (self.scope, self.stream) != (other.scope, other.stream):
            raise InvalidArgumentError(
                f"cuts of {self.scoped_stream} and {other.scoped_stream} do not compare"
            )
        return other

    def __le__(self, other: object) -> bool:
        other = self._comparable(other)
        mine, theirs = self.positions, other.positions
        for sid in mine.keys() & theirs.keys():
            if mine[sid] > theirs[sid]:
                return False
        only_mine = [_epoch(s) for s in mine.keys() - theirs.keys()]
        only_theirs = [_epoch(s) for s in theirs.keys() - mine.keys()]
        if not only_mine and not only_theirs:
            return True
        return bool(only_mine and only_theirs) and max(only_mine) < min(only_theirs)

    def __ge__(self, other: object) -> bool:
        return self._comparable(other).__le__(self)

    def __lt__(self, other: object) -> bool:
        return self.__le__(other) and self != other

    def __gt__(self, other: object) -> bool:
        return self.__ge__(other) and self != other

    def __repr__(self) -> str:
        if self.is_unbounded:
            return "StreamCut.UNBOUNDED"
        return f"StreamCut({self.scope}/{self.stream}, {dict(self._positions)})"


def cuts_of(
    positions: Mapping[str, int], streams: list[str] | tuple[str, ...] | None = None
) -> dict[str, StreamCut]:
    """Segment name -> offset, grouped into one cut per ``"scope/stream"`` (of ``streams``
    only, when given; a stream with no segment in ``positions`` gets none)."""
    grouped: dict[tuple[str, str], dict[int, int]] = {}
    for segment, offset in positions.items():
        name = parse_segment_name(segment)
        if streams is None or f"{name.scope}/{name.stream}" in streams:
            grouped.setdefault((name.scope, name.stream), {})[name.segment_id] = offset
    return {f"{s}/{t}": StreamCut(s, t, pos) for (s, t), pos in grouped.items()}


_unbounded = object.__new__(StreamCut)
object.__setattr__(_unbounded, "scope", "")
object.__setattr__(_unbounded, "stream", "")
object.__setattr__(_unbounded, "_positions", ())
StreamCut.UNBOUNDED = _unbounded
