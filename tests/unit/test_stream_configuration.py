"""Stream and reader-group configuration validate every field, and from_dict every record."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from pravega_ray.errors import InvalidArgumentError, InvalidNameError
from pravega_ray.stream_configuration import (
    ReaderGroupConfig,
    RetentionPolicy,
    RetentionType,
    ScaleType,
    ScalingPolicy,
    StreamConfiguration,
)

pytestmark = pytest.mark.timeout(10)

NAN = float("nan")

# What each bad configuration must name in its error.
BAD: dict[str, tuple[Callable[[], object], str]] = {
    "bogus scale type": (lambda: ScalingPolicy("bogus", 5, 3, 1), "scale_type"),
    "scale type an int": (lambda: ScalingPolicy(3, 5, 3, 1), "scale_type"),
    "scale type None": (lambda: ScalingPolicy(None, 5, 3, 1), "scale_type"),
    "fixed(True)": (lambda: ScalingPolicy.fixed(True), "min_segments"),
    "fixed(0)": (lambda: ScalingPolicy.fixed(0), "min_segments"),
    "fixed(1.0)": (lambda: ScalingPolicy.fixed(1.0), "min_segments"),
    "fixed('2')": (lambda: ScalingPolicy.fixed("2"), "min_segments"),
    "fixed(10001)": (lambda: ScalingPolicy.fixed(10_001), "min_segments"),
    "event rate NaN": (lambda: ScalingPolicy.by_event_rate(NAN, 2, 1), "target_rate"),
    "event rate 0": (lambda: ScalingPolicy.by_event_rate(0, 2, 1), "target_rate"),
    "event rate 2**63": (lambda: ScalingPolicy.by_event_rate(2**63, 2, 1), "target_rate"),
    "data rate inf": (lambda: ScalingPolicy.by_data_rate(float("inf"), 2, 1), "target_rate"),
    "scale factor 1": (lambda: ScalingPolicy.by_data_rate(10, 1, 1), "scale_factor"),
    "scale factor 0 by rate": (lambda: ScalingPolicy.by_event_rate(10, 0, 1), "scale_factor"),
    "rates of the wrong type": (
        lambda: ScalingPolicy(ScaleType.FIXED_NUM_SEGMENTS, "abc", "x", 1),
        "target_rate",
    ),
    "negative fixed rate": (
        lambda: ScalingPolicy(ScaleType.FIXED_NUM_SEGMENTS, -1, 0, 1),
        "target_rate",
    ),
    "bogus retention type": (lambda: RetentionPolicy("bogus", 0, 0), "retention_type"),
    "retention NaN": (lambda: RetentionPolicy.by_size(NAN, 5), "min_limit"),
    "retention negative": (lambda: RetentionPolicy.by_time(-1), "min_limit"),
    "retention bool": (lambda: RetentionPolicy.by_time(True), "min_limit"),
    "retention float": (lambda: RetentionPolicy.by_time(0, 1.5), "max_limit"),
    "retention max below min": (lambda: RetentionPolicy.by_size(10, 5), "max_limit"),
    "retention past int64": (lambda: RetentionPolicy.by_size(0, 2**63), "max_limit"),
    "scaling None": (lambda: StreamConfiguration(scaling=None), "ScalingPolicy.fixed"),
    "scaling a dict": (lambda: StreamConfiguration(scaling={"min_segments": 2}), "scaling"),
    "retention a str": (lambda: StreamConfiguration(retention="x"), "retention"),
    "reader group of no streams": (lambda: ReaderGroupConfig.for_streams(), "stream"),
    "reader group of a bare str": (lambda: ReaderGroupConfig("sc/st"), "for_streams"),
    "reader group of a set": (lambda: ReaderGroupConfig({"sc/st"}), "streams"),
    "reader group of a bad name": (lambda: ReaderGroupConfig.for_streams("sc/../x"), "stream"),
    "reader group of no scope": (lambda: ReaderGroupConfig.for_streams("st"), "scope/stream"),
    "reader group naming a stream twice": (
        lambda: ReaderGroupConfig.for_streams("a/b", "a/b"),
        "twice",
    ),
    "reader group of a non-str": (lambda: ReaderGroupConfig.for_streams(5), "scope/stream"),
    "reader group of a list": (lambda: ReaderGroupConfig.for_streams(["a/b"]), "scope/stream"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_construct_with_a_bad_field_raises_invalid_argument_naming_it(name: str) -> None:
    build, names = BAD[name]
    with pytest.raises(InvalidArgumentError, match=names):
        build()


def test_construct_reader_group_with_a_bad_name_raises_invalid_name() -> None:
    with pytest.raises(InvalidNameError):
        ReaderGroupConfig.for_streams("sc/_system")


def test_construct_with_the_string_value_of_an_enum_keeps_the_enum() -> None:
    policy = ScalingPolicy("fixed", 0, 0, 1)
    assert policy.scale_type is ScaleType.FIXED_NUM_SEGMENTS
    assert RetentionPolicy("size", 1, 2).retention_type is RetentionType.SIZE
    assert ScalingPolicy("events_per_sec", 100, 2, 3) == ScalingPolicy.by_event_rate(100, 2, 3)
    assert ScalingPolicy("kbytes_per_sec", 1, 2, 1).scale_type is (
        ScaleType.BY_RATE_IN_KBYTES_PER_SEC
    )


def test_construct_at_the_bounds_is_accepted() -> None:
    assert ScalingPolicy.fixed(10_000).min_segments == 10_000
    assert ScalingPolicy(ScaleType.FIXED_NUM_SEGMENTS, 0, 0, 1) == ScalingPolicy()
    ScalingPolicy.by_event_rate(1, 2, 1)
    ScalingPolicy.by_data_rate(2**63 - 1, 10_000, 1)
    RetentionPolicy.by_size(2**63 - 1, 0)  # max 0: no upper limit
    RetentionPolicy.by_time(5, 5)
    assert ReaderGroupConfig(["a/b", "a/c"]).streams == ("a/b", "a/c")
    assert StreamConfiguration().scaling == ScalingPolicy.fixed(1)


CONFIGS = [
    StreamConfiguration(),
    StreamConfiguration(ScalingPolicy.fixed(7)),
    StreamConfiguration(ScalingPolicy.by_event_rate(1000, 2, 4), RetentionPolicy.by_size(1, 9)),
    StreamConfiguration(ScalingPolicy.by_data_rate(10, 3, 1), RetentionPolicy.by_time(0, 0)),
]


@pytest.mark.parametrize("config", CONFIGS)
def test_to_dict_then_from_dict_round_trips_exactly(config: StreamConfiguration) -> None:
    record = json.loads(json.dumps(config.to_dict()))
    again = StreamConfiguration.from_dict(record)
    assert again == config
    assert again.to_dict() == config.to_dict()
    assert ScalingPolicy.from_dict(config.scaling.to_dict()) == config.scaling
    if config.retention is not None:
        assert RetentionPolicy.from_dict(config.retention.to_dict()) == config.retention
    assert pickle.loads(pickle.dumps(config)) == config


FIXED = ScalingPolicy.fixed(1).to_dict()


@pytest.mark.parametrize(
    "record",
    [
        None,
        [],
        "x",
        5,
        {},
        {"scaling": None},
        {"scaling": []},
        {
            "scaling": {
                "scale_type": "bogus",
                "target_rate": 5,
                "scale_factor": 3,
                "min_segments": 1,
            }
        },
        {"scaling": {"scale_type": "fixed", "target_rate": 0, "scale_factor": 0}},
        {"scaling": {**FIXED, "min_segments": "2"}},
        {"scaling": {**FIXED, "min_segments": 2.0}},
        {"scaling": {**FIXED, "scale_type": ["fixed"]}},
        {"scaling": FIXED, "retention": "x"},
        {"scaling": FIXED, "retention": {"retention_type": "size"}},
        {
            "scaling": FIXED,
            "retention": {"retention_type": "size", "min_limit": 1, "max_limit": None},
        },
    ],
)
def test_stream_configuration_from_dict_of_a_malformed_record_raises_invalid_argument(
    record: Any,
) -> None:
    with pytest.raises(InvalidArgumentError):
        StreamConfiguration.from_dict(record)


@pytest.mark.parametrize("record", [None, "x", {}, {"scale_type": "fixed"}])
def test_scaling_policy_from_dict_of_a_malformed_record_raises_invalid_argument(
    record: Any,
) -> None:
    with pytest.raises(InvalidArgumentError):
        ScalingPolicy.from_dict(record)


def test_scaling_policy_from_dict_with_an_unknown_key_ignores_it() -> None:
    assert ScalingPolicy.from_dict({**FIXED, "later": 1}) == ScalingPolicy.fixed(1)


@pytest.mark.parametrize("record", [None, (), {}, {"retention_type": "time", "min_limit": 0}])
def test_retention_policy_from_dict_of_a_malformed_record_raises_invalid_argument(
    record: Any,
) -> None:
    with pytest.raises(InvalidArgumentError):
        RetentionPolicy.from_dict(record)


def test_reader_group_config_round_trips_and_from_dict_refuses_malformed_records() -> None:
    config = ReaderGroupConfig.for_streams("a/b", "a/c")
    assert ReaderGroupConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    for record in (
        None,
        {},
        {"streams": "a/b"},
        {"streams": [1]},
        {"streams": {"a/b": 1}},
        {"streams": ["a/b", "a/b"]},
        {"streams": []},
    ):
        with pytest.raises(InvalidArgumentError):
            ReaderGroupConfig.from_dict(record)


def test_tags_are_kept_in_order_each_once_and_round_trip() -> None:
    config = StreamConfiguration(tags=["b", "a", "b"])
    assert config.tags == ("b", "a")
    assert StreamConfiguration.from_dict(config.to_dict()) == config
    assert "tags" not in StreamConfiguration().to_dict()  # as records written before tags
    assert StreamConfiguration.from_dict(StreamConfiguration().to_dict()).tags == ()


@pytest.mark.parametrize(
    "tags",
    ["ab", ["a", 1], [""], ["x" * 257], [f"t{i}" for i in range(129)], [["unhashable"]], None],
    ids=["str", "int", "empty", "too-long", "too-many", "unhashable", "none"],
)
def test_bad_tags_raise_invalid_argument(tags: object) -> None:
    with pytest.raises(InvalidArgumentError):
        StreamConfiguration(tags=tags)  # type: ignore[arg-type]
    if tags is not None:  # a stored "tags": null reads as no tags
        with pytest.raises(InvalidArgumentError):
            StreamConfiguration.from_dict({**StreamConfiguration().to_dict(), "tags": tags})
