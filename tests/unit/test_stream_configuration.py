"""Stream and reader-group configuration validate every field, and from_dict every record."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pravega_ray.errors import InvalidArgumentError
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

BAD: dict[str, Any] = {
    "bogus scale type": lambda: ScalingPolicy("bogus", 5, 3, 1),
    "scale type an int": lambda: ScalingPolicy(3, 5, 3, 1),
    "fixed(True)": lambda: ScalingPolicy.fixed(True),
    "fixed(0)": lambda: ScalingPolicy.fixed(0),
    "fixed(1.0)": lambda: ScalingPolicy.fixed(1.0),
    "fixed(10001)": lambda: ScalingPolicy.fixed(10_001),
    "event rate NaN": lambda: ScalingPolicy.by_event_rate(NAN, 2, 1),
    "event rate 0": lambda: ScalingPolicy.by_event_rate(0, 2, 1),
    "scale factor 1": lambda: ScalingPolicy.by_data_rate(10, 1, 1),
    "rates of the wrong type": lambda: ScalingPolicy(ScaleType.FIXED_NUM_SEGMENTS, "abc", "x", 1),
    "negative fixed rate": lambda: ScalingPolicy(ScaleType.FIXED_NUM_SEGMENTS, -1, 0, 1),
    "bogus retention type": lambda: RetentionPolicy("bogus", 0, 0),
    "retention NaN": lambda: RetentionPolicy.by_size(NAN, 5),
    "retention negative": lambda: RetentionPolicy.by_time(-1),
    "retention bool": lambda: RetentionPolicy.by_time(True),
    "retention max below min": lambda: RetentionPolicy.by_size(10, 5),
    "retention past int64": lambda: RetentionPolicy.by_size(0, 2**63),
    "scaling None": lambda: StreamConfiguration(scaling=None),
    "scaling a dict": lambda: StreamConfiguration(scaling={"min_segments": 2}),
    "retention a str": lambda: StreamConfiguration(retention="x"),
    "reader group of no streams": lambda: ReaderGroupConfig.for_streams(),
    "reader group of a bare str": lambda: ReaderGroupConfig("sc/st"),
    "reader group of a bad name": lambda: ReaderGroupConfig.for_streams("sc/../x"),
    "reader group naming a stream twice": lambda: ReaderGroupConfig.for_streams("a/b", "a/b"),
    "reader group of a non-str": lambda: ReaderGroupConfig.for_streams(5),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_configuration_is_refused_with_a_typed_error(name: str) -> None:
    with pytest.raises(InvalidArgumentError):
        BAD[name]()


def test_the_string_value_of_an_enum_is_accepted_and_kept_as_the_enum() -> None:
    policy = ScalingPolicy("fixed", 0, 0, 1)
    assert policy.scale_type is ScaleType.FIXED_NUM_SEGMENTS
    assert RetentionPolicy("size", 1, 2).retention_type is RetentionType.SIZE
    assert ScalingPolicy("events_per_sec", 100, 2, 3) == ScalingPolicy.by_event_rate(100, 2, 3)


@pytest.mark.parametrize(
    "config",
    [
        StreamConfiguration(),
        StreamConfiguration(ScalingPolicy.by_event_rate(1000, 2, 4), RetentionPolicy.by_size(1, 9)),
        StreamConfiguration(ScalingPolicy.by_data_rate(10, 3, 1), RetentionPolicy.by_time(0, 0)),
    ],
)
def test_configuration_round_trips_through_json(config: StreamConfiguration) -> None:
    assert StreamConfiguration.from_dict(json.loads(json.dumps(config.to_dict()))) == config


@pytest.mark.parametrize(
    "record",
    [
        None,
        [],
        "x",
        {},
        {"scaling": None},
        {"scaling": {"scale_type": "bogus", "target_rate": 5, "scale_factor": 3,
                     "min_segments": 1}},
        {"scaling": {"scale_type": "fixed", "target_rate": 0, "scale_factor": 0}},
        {"scaling": {"scale_type": "fixed", "target_rate": 0, "scale_factor": 0,
                     "min_segments": "2"}},
        {"scaling": ScalingPolicy.fixed(1).to_dict(), "retention": "x"},
        {"scaling": ScalingPolicy.fixed(1).to_dict(), "retention": {"retention_type": "size"}},
    ],
)
def test_malformed_record_is_an_invalid_argument_not_a_crash(record: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        StreamConfiguration.from_dict(record)


def test_reader_group_configuration_round_trips_and_refuses_malformed_records() -> None:
    config = ReaderGroupConfig.for_streams("a/b", "a/c")
    assert ReaderGroupConfig.from_dict(config.to_dict()) == config
    assert ReaderGroupConfig(["a/b"]).streams == ("a/b",)
    for record in (None, {}, {"streams": "a/b"}, {"streams": [1]}):
        with pytest.raises(InvalidArgumentError):
            ReaderGroupConfig.from_dict(record)
