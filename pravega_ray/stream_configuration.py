"""Stream configuration: scaling and retention policies, reader group configuration.

All are frozen dataclasses that validate every field when built and round-trip
through ``to_dict`` / ``from_dict`` (the controller stores them as JSON). A bad value
raises :class:`InvalidArgumentError` naming the field and what it accepts; so does
``from_dict`` of anything malformed (the controller reports such a stored record as
damaged). Enum fields take the enum or its string value.

Both policies are acted upon. The scaling policy's ``min_segments`` fixes the number of
segments a stream is created with and is the floor of automatic merges; a policy by event
or data rate has the containers report hot and cold segments, which the controller splits
and merges (docs/design.md, "Auto-scale detection" and "Auto-scaling"). The retention
policy bounds what the retention cycle keeps (docs/design.md, "Retention").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, TypeVar

from pravega_ray.constants import STREAM_SEGMENTS_MAX
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.naming import parse_scoped_stream
from pravega_ray.stream_cut import StreamCut

__all__ = [
    "ReaderGroupConfig",
    "RetentionConfigType",
    "RetentionPolicy",
    "RetentionType",
    "ScaleType",
    "ScalingPolicy",
    "StreamConfiguration",
    "check_reader_group_config",
    "check_tags",
]

SEGMENTS_MAX = STREAM_SEGMENTS_MAX
_LIMIT_MAX = 2**63 - 1  # every count and limit is stored as a signed 64-bit integer

E = TypeVar("E", bound=Enum)


class ScaleType(str, Enum):
    FIXED_NUM_SEGMENTS = "fixed"
    BY_RATE_IN_EVENTS_PER_SEC = "events_per_sec"
    BY_RATE_IN_KBYTES_PER_SEC = "kbytes_per_sec"


class RetentionType(str, Enum):
    TIME = "time"
    SIZE = "size"


class RetentionConfigType(str, Enum):
    """Whether a reader group's reading holds back its streams' retention.

    ``NONE``: a non-subscriber; its reading never affects retention.
    ``AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT``: a subscriber that publishes the cut of each
    completed checkpoint to the controller as its acknowledgement.
    ``MANUAL_RELEASE_AT_USER_STREAMCUT``: a subscriber whose application publishes cuts
    itself (``ReaderGroup.update_retention_stream_cut``).
    How the retention cycle weighs subscribers' cuts: docs/design.md, "Retention".
    """

    NONE = "none"
    AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT = "automatic_release_at_last_checkpoint"
    MANUAL_RELEASE_AT_USER_STREAMCUT = "manual_release_at_user_streamcut"


def _enum(cls: type[E], name: str, value: object) -> E:
    """``value`` as a member of ``cls`` (a member or its string value)."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        for member in cls:
            if member.value == value:
                return member
    allowed = ", ".join(repr(m.value) for m in cls)
    raise InvalidArgumentError(f"{name} must be one of {allowed}, got {value!r}")


def _int(name: str, value: object, low: int, high: int = _LIMIT_MAX) -> int:
    """``value`` if it is an int (not a bool) in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgumentError(f"{name} must be an int in [{low}, {high}], got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    """How many segments a stream has and, later, when it scales.

    ``FIXED_NUM_SEGMENTS``: ``min_segments`` segments (1 to ``STREAM_SEGMENTS_MAX``,
    10,000); ``target_rate`` and ``scale_factor`` are unused (0, any int in [0, 2**63)
    is kept). By rate: ``target_rate`` (events/s or KiB/s per segment) in [1, 2**63),
    ``scale_factor`` (segments a hot one splits into) in [2, 10,000]. ``scale_type`` is a
    :class:`ScaleType` or its value (``"fixed"``, ``"events_per_sec"``,
    ``"kbytes_per_sec"``). Every number must be an int (not a bool, float or str).
    Anything else raises InvalidArgumentError naming the field.
    """

    scale_type: ScaleType = ScaleType.FIXED_NUM_SEGMENTS
    target_rate: int = 0
    scale_factor: int = 0
    min_segments: int = 1

    def __post_init__(self) -> None:
        scale_type = _enum(ScaleType, "ScalingPolicy.scale_type", self.scale_type)
        object.__setattr__(self, "scale_type", scale_type)
        _int("ScalingPolicy.min_segments", self.min_segments, 1, SEGMENTS_MAX)
        if scale_type is ScaleType.FIXED_NUM_SEGMENTS:
            _int("ScalingPolicy.target_rate", self.target_rate, 0)
            _int("ScalingPolicy.scale_factor", self.scale_factor, 0)
        else:
            _int("ScalingPolicy.target_rate", self.target_rate, 1)
            _int("ScalingPolicy.scale_factor", self.scale_factor, 2, SEGMENTS_MAX)

    @classmethod
    def fixed(cls, segments: int) -> ScalingPolicy:
        return cls(ScaleType.FIXED_NUM_SEGMENTS, 0, 0, segments)

    @classmethod
    def by_event_rate(cls, target_rate: int, scale_factor: int, min_segments: int) -> ScalingPolicy:
        return cls(ScaleType.BY_RATE_IN_EVENTS_PER_SEC, target_rate, scale_factor, min_segments)

    @classmethod
    def by_data_rate(cls, target_kbps: int, scale_factor: int, min_segments: int) -> ScalingPolicy:
        return cls(ScaleType.BY_RATE_IN_KBYTES_PER_SEC, target_kbps, scale_factor, min_segments)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scale_type": self.scale_type.value,
            "target_rate": self.target_rate,
            "scale_factor": self.scale_factor,
            "min_segments": self.min_segments,
        }

    @classmethod
    def from_dict(cls, data: object) -> ScalingPolicy:
        fields = _fields(
            data, "scaling policy", ("scale_type", "target_rate", "scale_factor", "min_segments")
        )
        return cls(*fields)


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How much of a stream to keep: the retention cycle truncates the stream within these limits.

    ``SIZE``: limits in bytes; ``TIME``: limits in milliseconds. ``retention_type`` is a
    :class:`RetentionType` or its value (``"size"``, ``"time"``). ``min_limit`` and
    ``max_limit`` are ints (not bools, floats or strs) in [0, 2**63); ``max_limit`` 0
    means no upper limit, else it must be at least ``min_limit``. Anything else raises
    InvalidArgumentError naming the field. Each stream bucket runs the cycle every
    ``retention_period_s`` (docs/design.md, "Retention").
    """

    retention_type: RetentionType
    min_limit: int
    max_limit: int

    def __post_init__(self) -> None:
        retention_type = _enum(RetentionType, "RetentionPolicy.retention_type", self.retention_type)
        object.__setattr__(self, "retention_type", retention_type)
        _int("RetentionPolicy.min_limit", self.min_limit, 0)
        _int("RetentionPolicy.max_limit", self.max_limit, 0)
        if self.max_limit and self.max_limit < self.min_limit:
            raise InvalidArgumentError(
                f"RetentionPolicy.max_limit {self.max_limit} is below min_limit {self.min_limit} "
                "(0 means no upper limit)"
            )

    @classmethod
    def by_size(cls, min_bytes: int = 0, max_bytes: int = 0) -> RetentionPolicy:
        return cls(RetentionType.SIZE, min_bytes, max_bytes)

    @classmethod
    def by_time(cls, min_ms: int = 0, max_ms: int = 0) -> RetentionPolicy:
        return cls(RetentionType.TIME, min_ms, max_ms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "retention_type": self.retention_type.value,
            "min_limit": self.min_limit,
            "max_limit": self.max_limit,
        }

    @classmethod
    def from_dict(cls, data: object) -> RetentionPolicy:
        return cls(*_fields(data, "retention policy", ("retention_type", "min_limit", "max_limit")))


@dataclass(frozen=True, slots=True)
class StreamConfiguration:
    """A stream's scaling policy (default: one fixed segment), retention policy (or None)
    and tags (Pravega's stream tags: labels to find streams by, ``StreamManager.list_streams
    (scope, tag=...)``).

    InvalidArgumentError if ``scaling`` is not a ScalingPolicy (None included: omit it for
    the default), ``retention`` is neither None nor a RetentionPolicy, or ``tags`` is not a
    list or tuple of at most TAGS_MAX strs of 1 to TAG_CHARS_MAX characters. Tags are kept
    in their order, each once (a repeat is dropped), as a tuple.
    """

    scaling: ScalingPolicy = field(default_factory=lambda: ScalingPolicy.fixed(1))
    retention: RetentionPolicy | None = None
    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.scaling, ScalingPolicy):
            raise InvalidArgumentError(
                "StreamConfiguration.scaling must be a ScalingPolicy (e.g. ScalingPolicy.fixed(1),"
                f" the default), got {type(self.scaling).__name__}"
            )
        if self.retention is not None and not isinstance(self.retention, RetentionPolicy):
            raise InvalidArgumentError(
                "StreamConfiguration.retention must be a RetentionPolicy or None, "
                f"got {type(self.retention).__name__}"
            )
        object.__setattr__(self, "tags", check_tags(self.tags))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "scaling": self.scaling.to_dict(),
            "retention": None if self.retention is None else self.retention.to_dict(),
        }
        if self.tags:  # absent in records written before tags existed, and when empty
            data["tags"] = list(self.tags)
        return data

    @classmethod
    def from_dict(cls, data: object) -> StreamConfiguration:
        scaling, retention, tags = _fields(
            data,
            "stream configuration",
            ("scaling", "retention", "tags"),
            optional=("retention", "tags"),
        )
        return cls(
            ScalingPolicy.from_dict(scaling),
            None if retention is None else RetentionPolicy.from_dict(retention),
            () if tags is None else tags,
        )


TAGS_MAX = 128
"""Most tags a stream has (Pravega's limit)."""
TAG_CHARS_MAX = 256
"""Longest tag, in characters (Pravega's limit)."""


def check_tags(tags: object) -> tuple[str, ...]:
    """``tags`` as a tuple, each once, in order; InvalidArgumentError unless it is a list or
    tuple of at most TAGS_MAX strs of 1 to TAG_CHARS_MAX characters (a str alone is
    refused, not split)."""
    if not isinstance(tags, list | tuple):
        raise InvalidArgumentError(
            f"StreamConfiguration.tags must be a list or tuple of str, got {type(tags).__name__}"
        )
    for tag in tags:
        if not isinstance(tag, str) or not 1 <= len(tag) <= TAG_CHARS_MAX:
            raise InvalidArgumentError(
                f"a stream tag must be a str of 1 to {TAG_CHARS_MAX} characters, got {tag!r:.80}"
            )
    kept = tuple(dict.fromkeys(tags))
    if len(kept) > TAGS_MAX:
        raise InvalidArgumentError(f"a stream has at most {TAGS_MAX} tags, got {len(kept)}")
    return kept


@dataclass(frozen=True, slots=True)
class ReaderGroupConfig:
    """Which streams a reader group reads, from where to where, and how it checkpoints.

    * ``streams``: ``"scope/stream"`` names, a tuple or list (kept as a tuple) of at least
      one, no repeats; a bare str is refused rather than split into characters.
    * ``start_cuts`` / ``end_cuts``: ``"scope/stream"`` -> :class:`StreamCut` of that
      stream, or ``StreamCut.UNBOUNDED``; a stream left out (or UNBOUNDED) starts at its
      head / has no end. Readers return ``None`` for ever once every segment reached its
      end cut.
    * ``automatic_checkpoint_interval_s``: a checkpoint every that many seconds (> 0,
      finite), or None (the default): no automatic checkpoints. Automatic checkpoints are
      silent (readers return no marker for them; Pravega's default is 30 s, returned to
      readers, which would change what every existing reader returns).
    * ``retention_type``: a :class:`RetentionConfigType` or its value (default NONE).
    * ``raise_on_truncated_data``: a reader whose next event was truncated away raises
      TruncatedDataError once, then goes on from the stream's head; False (the default):
      it skips to the head, logging what it skipped.

    InvalidArgumentError for anything else (InvalidNameError, an InvalidArgumentError, for
    a bad name; a cut keyed by another stream than its own).
    """

    streams: tuple[str, ...]
    start_cuts: Mapping[str, StreamCut] = field(default_factory=dict)
    end_cuts: Mapping[str, StreamCut] = field(default_factory=dict)
    automatic_checkpoint_interval_s: float | None = None
    retention_type: RetentionConfigType = RetentionConfigType.NONE
    raise_on_truncated_data: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.streams, str) or not isinstance(self.streams, (tuple, list)):
            raise InvalidArgumentError(
                "ReaderGroupConfig.streams must be a tuple or list of 'scope/stream' names "
                "(use ReaderGroupConfig.for_streams('scope/stream', ...)), "
                f"got {type(self.streams).__name__}"
            )
        object.__setattr__(self, "streams", tuple(self.streams))
        if not self.streams:
            raise InvalidArgumentError("a reader group needs at least one stream")
        for scoped in self.streams:
            parse_scoped_stream(scoped)
        if len(set(self.streams)) != len(self.streams):
            raise InvalidArgumentError(f"a reader group names a stream twice: {self.streams}")
        for what in ("start_cuts", "end_cuts"):
            object.__setattr__(self, what, self._cuts(what, getattr(self, what)))
        interval = self.automatic_checkpoint_interval_s
        if interval is not None and (
            isinstance(interval, bool)
            or not isinstance(interval, (int, float))
            or not 0 < interval < 1e9  # NaN and inf too
        ):
            raise InvalidArgumentError(
                "ReaderGroupConfig.automatic_checkpoint_interval_s must be None or a number of "
                f"seconds > 0, got {interval!r}"
            )
        retention = _enum(
            RetentionConfigType, "ReaderGroupConfig.retention_type", self.retention_type
        )
        object.__setattr__(self, "retention_type", retention)
        if not isinstance(self.raise_on_truncated_data, bool):
            raise InvalidArgumentError("ReaderGroupConfig.raise_on_truncated_data must be a bool")

    def _cuts(self, what: str, cuts: object) -> dict[str, StreamCut]:
        if not isinstance(cuts, Mapping):
            raise InvalidArgumentError(
                f"ReaderGroupConfig.{what} must be a mapping of 'scope/stream' -> StreamCut"
            )
        out: dict[str, StreamCut] = {}
        for scoped, cut in cuts.items():
            if scoped not in self.streams:
                raise InvalidArgumentError(f"ReaderGroupConfig.{what} names {scoped!r}, not read")
            if not isinstance(cut, StreamCut):
                raise InvalidArgumentError(
                    f"ReaderGroupConfig.{what}[{scoped!r}] must be a StreamCut, "
                    f"got {type(cut).__name__}"
                )
            if cut.is_unbounded:
                continue  # the same as leaving it out
            if cut.scoped_stream != scoped:
                raise InvalidArgumentError(
                    f"ReaderGroupConfig.{what}[{scoped!r}] is a cut of {cut.scoped_stream}"
                )
            out[scoped] = cut
        return out

    @classmethod
    def for_streams(
        cls,
        *scoped_streams: str,
        start_cuts: Mapping[str, StreamCut] | None = None,
        end_cuts: Mapping[str, StreamCut] | None = None,
        automatic_checkpoint_interval_s: float | None = None,
        retention_type: RetentionConfigType | str = RetentionConfigType.NONE,
        raise_on_truncated_data: bool = False,
    ) -> ReaderGroupConfig:
        """``ReaderGroupConfig.for_streams("scope/stream", ..., start_cuts=..., ...)``."""
        return cls(
            tuple(scoped_streams),
            dict(start_cuts or {}),
            dict(end_cuts or {}),
            automatic_checkpoint_interval_s,
            retention_type,  # type: ignore[arg-type]  # validated to the enum
            raise_on_truncated_data,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "streams": list(self.streams),
            "start_cuts": {k: c.to_dict() for k, c in sorted(self.start_cuts.items())},
            "end_cuts": {k: c.to_dict() for k, c in sorted(self.end_cuts.items())},
            "automatic_checkpoint_interval_s": self.automatic_checkpoint_interval_s,
            "retention_type": self.retention_type.value,
            "raise_on_truncated_data": self.raise_on_truncated_data,
        }

    @classmethod
    def from_dict(cls, data: object) -> ReaderGroupConfig:
        """What ``to_dict`` gave; records from before cuts and checkpoints hold only
        ``streams`` and load with the defaults."""
        optional = (
            "start_cuts",
            "end_cuts",
            "automatic_checkpoint_interval_s",
            "retention_type",
            "raise_on_truncated_data",
        )
        streams, start, end, interval, retention, raise_on = _fields(
            data, "reader group configuration", ("streams", *optional), optional=optional
        )
        if not isinstance(streams, list):
            raise InvalidArgumentError("reader group configuration: streams must be a list")
        cuts = []
        for what, value in (("start_cuts", start), ("end_cuts", end)):
            if value is not None and not isinstance(value, Mapping):
                raise InvalidArgumentError(f"reader group configuration: {what} must be a mapping")
            cuts.append({k: StreamCut.from_dict(v) for k, v in (value or {}).items()})
        return cls(
            tuple(streams),
            cuts[0],
            cuts[1],
            interval,
            RetentionConfigType.NONE if retention is None else retention,
            False if raise_on is None else raise_on,
        )


def check_reader_group_config(config: object) -> ReaderGroupConfig:
    """``config`` as it will be stored, if it is a valid :class:`ReaderGroupConfig`.

    A frozen dataclass can still be changed after construction (``object.__setattr__``),
    and what is stored must load again, or the group would be unusable for good. So its
    fields are checked again, as the constructor checks them (a valid enum value as a
    str is taken, as there), and the result must survive ``from_dict(to_dict())`` (which
    checks its stream cuts' fields too). InvalidArgumentError naming the field otherwise;
    the config returned is a fresh one.
    """
    if not isinstance(config, ReaderGroupConfig):
        raise InvalidArgumentError(
            f"config must be a ReaderGroupConfig, got {type(config).__name__}"
        )
    try:
        fresh = ReaderGroupConfig(**{f.name: getattr(config, f.name) for f in fields(config)})
        return ReaderGroupConfig.from_dict(fresh.to_dict())
    except InvalidArgumentError:
        raise
    except (AttributeError, TypeError, ValueError) as e:  # a tampered-with object
        raise InvalidArgumentError(f"config does not validate: {e!r}") from None


def _fields(
    data: object, what: str, names: tuple[str, ...], optional: tuple[str, ...] = ()
) -> list[Any]:
    """The values of ``names`` in mapping ``data``; InvalidArgumentError if it is malformed."""
    if not isinstance(data, Mapping):
        raise InvalidArgumentError(f"{what} must be a mapping, got {type(data).__name__}")
    missing = [n for n in names if n not in data and n not in optional]
    if missing:
        raise InvalidArgumentError(f"{what} lacks {', '.join(missing)}")
    return [data.get(n) for n in names]
