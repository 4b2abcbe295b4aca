"""Stream configuration: scaling and retention policies, reader group configuration.

All are frozen, validated dataclasses that round-trip through ``to_dict`` /
``from_dict`` (the controller stores them as JSON).

What is enforced today: the scaling policy's ``min_segments`` fixes the number
of segments a stream is created with. Auto-scaling by event or data rate and
retention are stored with the stream but not yet acted upon; the controller
issues that add them keep these names (see docs/api.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from pravega_ray.errors import InvalidArgumentError
from pravega_ray.naming import parse_scoped_stream

__all__ = [
    "ReaderGroupConfig",
    "RetentionPolicy",
    "RetentionType",
    "ScaleType",
    "ScalingPolicy",
    "StreamConfiguration",
]


class ScaleType(str, Enum):
    FIXED_NUM_SEGMENTS = "fixed"
    BY_RATE_IN_EVENTS_PER_SEC = "events_per_sec"
    BY_RATE_IN_KBYTES_PER_SEC = "kbytes_per_sec"


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    """How many segments a stream has and, later, when it scales."""

    scale_type: ScaleType = ScaleType.FIXED_NUM_SEGMENTS
    target_rate: int = 0
    scale_factor: int = 0
    min_segments: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.min_segments, int) or not 1 <= self.min_segments <= 10_000:
            raise InvalidArgumentError("min_segments must be an int in [1, 10000]")
        if self.scale_type is not ScaleType.FIXED_NUM_SEGMENTS:
            if self.target_rate <= 0:
                raise InvalidArgumentError("target_rate must be positive")
            if self.scale_factor < 2:
                raise InvalidArgumentError("scale_factor must be at least 2")

    @classmethod
    def fixed(cls, segments: int) -> ScalingPolicy:
        return cls(ScaleType.FIXED_NUM_SEGMENTS, 0, 0, segments)

    @classmethod
    def by_event_rate(cls, target_rate: int, scale_factor: int, min_segments: int) -> ScalingPolicy:
        return cls(ScaleType.BY_RATE_IN_EVENTS_PER_SEC, target_rate, scale_factor, min_segments)

    @classmethod
    def by_data_rate(cls, target_kbps: int, scale_factor: int, min_segments: int) -> ScalingPolicy:
        return cls(ScaleType.BY_RATE_IN_KBYTES_PER_SEC, target_kbps, scale_factor, min_segments)


class RetentionType(str, Enum):
    TIME = "time"
    SIZE = "size"


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How much of a stream to keep (stored; enforced by a later issue)."""

    retention_type: RetentionType
    min_limit: int
    max_limit: int

    def __post_init__(self) -> None:
        if self.min_limit < 0 or self.max_limit < 0:
            raise InvalidArgumentError("retention limits must be non-negative")
        if self.max_limit and self.max_limit < self.min_limit:
            raise InvalidArgumentError("retention max limit is below its min limit")

    @classmethod
    def by_size(cls, min_bytes: int = 0, max_bytes: int = 0) -> RetentionPolicy:
        return cls(RetentionType.SIZE, min_bytes, max_bytes)

    @classmethod
    def by_time(cls, min_ms: int = 0, max_ms: int = 0) -> RetentionPolicy:
        return cls(RetentionType.TIME, min_ms, max_ms)


@dataclass(frozen=True, slots=True)
class StreamConfiguration:
    scaling: ScalingPolicy = field(default_factory=lambda: ScalingPolicy.fixed(1))
    retention: RetentionPolicy | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StreamConfiguration:
        scaling = data["scaling"]
        retention = data.get("retention")
        return cls(
            scaling=ScalingPolicy(
                ScaleType(scaling["scale_type"]),
                scaling["target_rate"],
                scaling["scale_factor"],
                scaling["min_segments"],
            ),
            retention=None
            if retention is None
            else RetentionPolicy(
                RetentionType(retention["retention_type"]),
                retention["min_limit"],
                retention["max_limit"],
            ),
        )


@dataclass(frozen=True, slots=True)
class ReaderGroupConfig:
    """Which streams a reader group reads. Readers start at the head of each stream."""

    streams: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.streams:
            raise InvalidArgumentError("a reader group needs at least one stream")
        for scoped in self.streams:
            parse_scoped_stream(scoped)

    @classmethod
    def for_streams(cls, *scoped_streams: str) -> ReaderGroupConfig:
        """``ReaderGroupConfig.for_streams("scope/stream", ...)``."""
        return cls(tuple(scoped_streams))

    def to_dict(self) -> dict[str, Any]:
        return {"streams": list(self.streams)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReaderGroupConfig:
        return cls(tuple(data["streams"]))
