"""The REST API's JSON shapes (pravega_ray/rest/models.py, scaling_events.py) without a server:
round trips to pravega-ray's configuration, and the scaling-event window."""

from __future__ import annotations

from typing import Any

import pytest

from pravega_ray.contracts.records import SegmentRange
from pravega_ray.errors import (
    ConflictingUpdateError,
    InvalidArgumentError,
    InvalidNameError,
    ReaderGroupNotFoundError,
    ScopeNotEmptyError,
    StreamNotSealedError,
    StreamSealedError,
)
from pravega_ray.rest import http_status
from pravega_ray.rest.models import (
    MIB,
    config_from_request,
    json_object,
    retention_config,
    retention_from_json,
    scaling_config,
    scaling_from_json,
)
from pravega_ray.rest.scaling_events import Epoch, scale_metadata, select
from pravega_ray.stream_configuration import RetentionPolicy, ScalingPolicy, StreamConfiguration

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize(
    "policy",
    [
        ScalingPolicy.fixed(1),
        ScalingPolicy.fixed(10_000),
        ScalingPolicy.by_event_rate(1, 2, 1),
        ScalingPolicy.by_data_rate(2**40, 10_000, 7),
    ],
)
def test_scaling_config_round_trips(policy: ScalingPolicy) -> None:
    assert scaling_from_json(scaling_config(policy)) == policy


@pytest.mark.parametrize(
    "policy",
    [
        None,
        RetentionPolicy.by_size(0),
        RetentionPolicy.by_size(5 * MIB, 9 * MIB),
        RetentionPolicy.by_time(86_400_000),
        RetentionPolicy.by_time(3 * 60_000, 25 * 3_600_000),
        RetentionPolicy.by_time(30 * 86_400_000 + 60_000),
    ],
)
def test_retention_config_round_trips_whole_mib_and_minutes(policy: RetentionPolicy | None) -> None:
    assert retention_from_json(retention_config(policy)) == policy


def test_retention_config_rounds_down_to_whole_mib_and_minutes() -> None:
    size = retention_config(RetentionPolicy.by_size(MIB + 1))
    assert size == {"type": "LIMITED_SIZE_MB", "value": 1}
    time = retention_config(RetentionPolicy.by_time(61_999))
    assert time == {
        "type": "LIMITED_DAYS",
        "value": 0,
        "timeBasedRetention": {"days": 0, "hours": 0, "minutes": 1},
    }


def test_fixed_scaling_ignores_rates_as_java_does() -> None:
    sent = {"type": "FIXED_NUM_SEGMENTS", "targetRate": 5, "scaleFactor": 9, "minSegments": 4}
    assert scaling_from_json(sent) == ScalingPolicy.fixed(4)


def test_an_update_keeps_what_it_does_not_name() -> None:
    current = StreamConfiguration(ScalingPolicy.fixed(3), RetentionPolicy.by_size(MIB), ("t",))
    assert config_from_request({}, current) == current
    assert config_from_request({"retentionPolicy": None}, current).retention is None
    assert config_from_request({"streamTags": []}, current).tags == ()
    assert config_from_request({"scalingPolicy": None}, current).scaling == ScalingPolicy.fixed(3)


@pytest.mark.parametrize("body", [b"", b"{", b"[1]", b"\xc3\x28", b"1e999999", b'{"a": NaN'])
def test_json_object_refuses_anything_but_an_object(body: bytes) -> None:
    with pytest.raises(InvalidArgumentError):
        json_object(body, "test")


def test_a_huge_integer_is_refused_not_crashed() -> None:
    with pytest.raises(InvalidArgumentError):
        json_object(b'{"value": ' + b"9" * 10_000 + b"}", "test")
    with pytest.raises(InvalidArgumentError):
        retention_from_json({"type": "LIMITED_DAYS", "value": 2**63})


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (InvalidNameError("x"), 400),
        (InvalidArgumentError("x"), 400),
        (ReaderGroupNotFoundError("x"), 404),
        (ScopeNotEmptyError("x"), 412),
        (StreamNotSealedError("x"), 412),
        (StreamSealedError("x"), 500),
        (ConflictingUpdateError("x"), 500),
        (TimeoutError("x"), 500),
        (KeyError("x"), 500),
    ],
)
def test_http_status(error: BaseException, status: int) -> None:
    assert http_status(error) == status


def _segment(number: int, epoch: int, low: float, high: float) -> SegmentRange:
    segment_id = epoch << 32 | number
    return SegmentRange("sc", "st", segment_id, f"sc/st/{number}.#epoch.{epoch}", low, high)


S0, S1 = _segment(0, 0, 0.0, 0.5), _segment(1, 0, 0.5, 1.0)
S2, S3 = _segment(2, 1, 0.0, 0.25), _segment(3, 1, 0.25, 0.5)
S4 = _segment(4, 2, 0.0, 0.5)
HISTORY = [
    Epoch(0, 100, (S0, S1)),
    Epoch(1, 200, (S2, S3, S1)),  # 0 split in two
    Epoch(2, 300, (S4, S1)),  # 2 and 3 merged
]


def test_scale_metadata_counts_splits_and_merges() -> None:
    events = scale_metadata(HISTORY)
    assert [(e["epoch"], e["timestamp"], e["splits"], e["merges"]) for e in events] == [
        (0, 100, 0, 0),
        (1, 200, 1, 0),
        (2, 300, 0, 1),
    ]
    assert [s["startTime"] for s in events[2]["segmentList"]] == [300, 100]


def _epochs(events: list[dict[str, Any]]) -> list[int]:
    return [e["epoch"] for e in events]


@pytest.mark.parametrize(
    ("window", "epochs"),
    [
        ((0, 1000), [0, 1, 2]),
        ((150, 250), [0, 1]),  # the layout current at 150 first, as Java answers
        ((200, 200), [0, 1]),  # Java adds the one before even then
        ((250, 1000), [1, 2]),
        ((0, 50), []),
        ((400, 500), [2]),
    ],
)
def test_select_answers_the_window_and_the_layout_current_at_its_start(
    window: tuple[int, int], epochs: list[int]
) -> None:
    assert _epochs(select(scale_metadata(HISTORY), *window)) == epochs


def test_select_keeps_events_of_unknown_time() -> None:
    history = [Epoch(0, 100, (S0, S1)), Epoch(1, None, (S2, S3, S1))]
    assert _epochs(select(scale_metadata(history), 0, 50)) == [1]
    assert _epochs(select(scale_metadata(history), 150, 160)) == [0, 1]
