"""The REST API's JSON shapes (Pravega's ``Controller.yaml`` definitions) and their mapping
to and from pravega-ray's records.

Reading a request: every function that takes decoded JSON raises
:class:`~pravega_ray.errors.InvalidArgumentError` (the server answers 400) for anything it
cannot use, naming the field, and never anything else; nothing is built from a value it did
not check. Numbers must be JSON integers (``true``, ``1.5`` and ``"1"`` are refused).

Writing a reply: plain dicts and lists of str, int, float, bool and None, ready for
``json.dumps``.

Shapes (field names as Pravega spells them):

* ``ScalingConfig``: ``{type, targetRate, scaleFactor, minSegments}``, ``type`` one of
  FIXED_NUM_SEGMENTS, BY_RATE_IN_KBYTES_PER_SEC, BY_RATE_IN_EVENTS_PER_SEC.
* ``RetentionConfig``: ``{type, value, timeBasedRetention: {days, hours, minutes}, maxValue,
  maxTimeBasedRetention}``: LIMITED_SIZE_MB counts MiB; LIMITED_DAYS counts days in
  ``value``, or, when ``value`` is 0, the duration in ``timeBasedRetention`` (the same for
  the maximum). pravega-ray keeps bytes and milliseconds, so a reply rounds down to whole
  MiB and minutes, as Java's controller does.
* ``StreamProperty``: ``{scopeName, streamName, scalingPolicy, retentionPolicy, tags,
  timestampAggregationTimeout, rolloverSizeBytes}``; the last two are always 0
  (pravega-ray has neither setting).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pravega_ray.errors import InvalidArgumentError
from pravega_ray.stream_configuration import (
    RetentionPolicy,
    RetentionType,
    ScaleType,
    ScalingPolicy,
    StreamConfiguration,
    check_tags,
)

__all__ = [
    "MIB",
    "config_from_request",
    "json_object",
    "optional_int",
    "required_str",
    "retention_config",
    "retention_from_json",
    "scaling_config",
    "scaling_from_json",
    "stream_property",
]

MIB = 1024 * 1024
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS
INT64_MAX = 2**63 - 1

_SCALE_TYPES = {
    "FIXED_NUM_SEGMENTS": ScaleType.FIXED_NUM_SEGMENTS,
    "BY_RATE_IN_KBYTES_PER_SEC": ScaleType.BY_RATE_IN_KBYTES_PER_SEC,
    "BY_RATE_IN_EVENTS_PER_SEC": ScaleType.BY_RATE_IN_EVENTS_PER_SEC,
}
_SCALE_NAMES = {scale_type: name for name, scale_type in _SCALE_TYPES.items()}

UNSUPPORTED_SETTINGS = ("timestampAggregationTimeout", "rolloverSizeBytes")
"""Settings of Pravega's stream configuration pravega-ray does not have: accepted when
absent, null or 0, refused otherwise (a setting silently ignored would mislead)."""


# --- reading requests ---------------------------------------------------------------------------
def json_object(body: bytes, what: str) -> dict[str, Any]:
    """``body`` decoded as a JSON object (UTF-8); InvalidArgumentError for anything else."""
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:  # JSONDecodeError is a ValueError
        raise InvalidArgumentError(f"{what}: the body is not valid JSON: {e}") from None
    except RecursionError:  # nested deeper than the decoder's stack allows
        raise InvalidArgumentError(f"{what}: the body is nested too deeply") from None
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"{what}: the body must be a JSON object")
    return value


def _object(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"{field} must be a JSON object, got {_kind(value)}")
    return value


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def required_str(data: Mapping[str, Any], field: str) -> str:
    """``data[field]``, which must be a JSON string."""
    value = data.get(field)
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{field} is required, a string; got {_kind(value)}")
    return value


def optional_int(data: Mapping[str, Any], field: str, default: int, low: int = 0) -> int:
    """``data[field]`` as an int in [low, 2**63), ``default`` if absent or null."""
    value = data.get(field)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= INT64_MAX:
        raise InvalidArgumentError(
            f"{field} must be an integer in [{low}, {INT64_MAX}], got {value!r:.40}"
        )
    return value


def scaling_from_json(value: object) -> ScalingPolicy:
    """The :class:`ScalingPolicy` of a ``ScalingConfig``. ``type`` is required; an absent
    number is 0 (``minSegments``: 1). FIXED_NUM_SEGMENTS ignores ``targetRate`` and
    ``scaleFactor``, as Java's controller does; the policy's own checks apply (a rate
    policy needs ``targetRate`` >= 1 and ``scaleFactor`` >= 2)."""
    data = _object(value, "scalingPolicy")
    name = data.get("type")
    scale_type = _SCALE_TYPES.get(name) if isinstance(name, str) else None
    if scale_type is None:
        raise InvalidArgumentError(
            f"scalingPolicy.type must be one of {', '.join(_SCALE_TYPES)}, got {name!r:.40}"
        )
    min_segments = optional_int(data, "minSegments", 1)
    if scale_type is ScaleType.FIXED_NUM_SEGMENTS:
        return ScalingPolicy.fixed(min_segments)
    rate = optional_int(data, "targetRate", 0)
    factor = optional_int(data, "scaleFactor", 0)
    return ScalingPolicy(scale_type, rate, factor, min_segments)


def _duration_ms(data: Mapping[str, Any], days_field: str, time_field: str) -> int:
    """Pravega's time retention: ``days_field`` days, or, when that is 0 or absent and
    ``time_field`` is given, its ``{days, hours, minutes}``."""
    days = optional_int(data, days_field, 0)
    time_based = data.get(time_field)
    if days == 0 and time_based is not None:
        parts = _object(time_based, time_field)
        total = (
            optional_int(parts, "days", 0) * DAY_MS
            + optional_int(parts, "hours", 0) * HOUR_MS
            + optional_int(parts, "minutes", 0) * MINUTE_MS
        )
    else:
        total = days * DAY_MS
    if total > INT64_MAX:
        raise InvalidArgumentError(f"{days_field}/{time_field}: the duration is too long")
    return total


def retention_from_json(value: object) -> RetentionPolicy | None:
    """The :class:`RetentionPolicy` of a ``RetentionConfig`` (None for null): LIMITED_SIZE_MB
    keeps ``value`` to ``maxValue`` MiB (no ``maxValue``: no upper limit); LIMITED_DAYS keeps
    ``value`` days (or ``timeBasedRetention``) to ``maxValue`` days (or
    ``maxTimeBasedRetention``; neither: no upper limit)."""
    if value is None:
        return None
    data = _object(value, "retentionPolicy")
    kind = data.get("type")
    if kind == "LIMITED_SIZE_MB":
        low = optional_int(data, "value", 0)
        high = optional_int(data, "maxValue", 0)
        if max(low, high) > INT64_MAX // MIB:
            raise InvalidArgumentError("retentionPolicy: the size is too large")
        return RetentionPolicy.by_size(low * MIB, high * MIB)
    if kind == "LIMITED_DAYS":
        low_ms = _duration_ms(data, "value", "timeBasedRetention")
        high_ms = _duration_ms(data, "maxValue", "maxTimeBasedRetention")
        return RetentionPolicy.by_time(low_ms, high_ms)
    raise InvalidArgumentError(
        f"retentionPolicy.type must be LIMITED_DAYS or LIMITED_SIZE_MB, got {kind!r:.40}"
    )


def config_from_request(
    body: Mapping[str, Any], current: StreamConfiguration | None
) -> StreamConfiguration:
    """The configuration a createStream (``current`` None) or updateStream body asks for.

    A create takes ``scalingPolicy`` (default: one fixed segment), ``retentionPolicy``
    (default: none) and ``streamTags`` (default: none). An update keeps each of the three
    the body leaves out; ``"retentionPolicy": null`` removes the retention policy.
    ``timestampAggregationTimeout`` and ``rolloverSizeBytes`` must be absent, null or 0
    (:data:`UNSUPPORTED_SETTINGS`). InvalidArgumentError for anything else.
    """
    for field in UNSUPPORTED_SETTINGS:
        if optional_int(body, field, 0) != 0:
            raise InvalidArgumentError(f"{field} is not supported by pravega-ray: leave it 0")
    base = current if current is not None else StreamConfiguration()
    scaling = base.scaling
    if body.get("scalingPolicy") is not None:
        scaling = scaling_from_json(body["scalingPolicy"])
    retention = base.retention
    if "retentionPolicy" in body:
        retention = retention_from_json(body["retentionPolicy"])
    tags = base.tags
    if body.get("streamTags") is not None:
        tags = check_tags(body["streamTags"])
    return StreamConfiguration(scaling, retention, tags)


# --- writing replies ----------------------------------------------------------------------------
def scaling_config(policy: ScalingPolicy) -> dict[str, Any]:
    """A ``ScalingConfig``."""
    return {
        "type": _SCALE_NAMES[policy.scale_type],
        "targetRate": policy.target_rate,
        "scaleFactor": policy.scale_factor,
        "minSegments": policy.min_segments,
    }


def _time_based(ms: int) -> dict[str, int]:
    return {
        "days": ms // DAY_MS,
        "hours": ms % DAY_MS // HOUR_MS,
        "minutes": ms % HOUR_MS // MINUTE_MS,
    }


def retention_config(policy: RetentionPolicy | None) -> dict[str, Any] | None:
    """A ``RetentionConfig``, or None for no retention. A time in whole days is in
    ``value`` (and ``timeBasedRetention``); any other in ``timeBasedRetention``, ``value``
    0. ``maxValue``/``maxTimeBasedRetention`` only when there is an upper limit."""
    if policy is None:
        return None
    if policy.retention_type is RetentionType.SIZE:
        out: dict[str, Any] = {"type": "LIMITED_SIZE_MB", "value": policy.min_limit // MIB}
        if policy.max_limit:
            out["maxValue"] = policy.max_limit // MIB
        return out
    out = {"type": "LIMITED_DAYS"}
    for value_field, time_field, ms in (
        ("value", "timeBasedRetention", policy.min_limit),
        ("maxValue", "maxTimeBasedRetention", policy.max_limit),
    ):
        if value_field == "maxValue" and not ms:
            break
        out[value_field] = ms // DAY_MS if ms % DAY_MS == 0 else 0
        out[time_field] = _time_based(ms)
    return out


def stream_property(scope: str, stream: str, config: StreamConfiguration) -> dict[str, Any]:
    """A ``StreamProperty``."""
    return {
        "scopeName": scope,
        "streamName": stream,
        "scalingPolicy": scaling_config(config.scaling),
        "retentionPolicy": retention_config(config.retention),
        "tags": list(config.tags),
        "timestampAggregationTimeout": 0,
        "rolloverSizeBytes": 0,
    }
