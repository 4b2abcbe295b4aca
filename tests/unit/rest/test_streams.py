"""Streams over REST (pravega_ray/rest/resources.py): create, get, list with filters, update,
seal, delete, scaling events, and the requests refused before anything changes."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from pravega_ray.inprocess import InProcessCluster
from pravega_ray.rest.models import MIB
from pravega_ray.stream_configuration import (
    RetentionPolicy,
    ScalingPolicy,
    StreamConfiguration,
)
from tests.unit.rest.conftest import Http, Reply

pytestmark = pytest.mark.timeout(30)

BY_RATE = {
    "type": "BY_RATE_IN_EVENTS_PER_SEC",
    "targetRate": 100,
    "scaleFactor": 2,
    "minSegments": 3,
}
FIXED_2 = {"type": "FIXED_NUM_SEGMENTS", "targetRate": 0, "scaleFactor": 0, "minSegments": 2}
DAY_MS = 86_400_000


def create(client: Http, scope: str, stream: str, **fields: Any) -> Any:
    reply = client.post(f"/v1/scopes/{scope}/streams", {"streamName": stream, **fields})
    assert reply.status == 201, reply.body
    return reply.body


def test_create_stream_answers_201_with_its_stream_property(
    client: Http, scope: str, rest_cluster: InProcessCluster
) -> None:
    body = create(
        client,
        scope,
        "st",
        scalingPolicy=BY_RATE,
        retentionPolicy={"type": "LIMITED_SIZE_MB", "value": 10, "maxValue": 20},
        streamTags=["a", "b", "a"],
        timestampAggregationTimeout=0,
        rolloverSizeBytes=None,
    )
    assert body == {
        "scopeName": scope,
        "streamName": "st",
        "scalingPolicy": BY_RATE,
        "retentionPolicy": {"type": "LIMITED_SIZE_MB", "value": 10, "maxValue": 20},
        "tags": ["a", "b"],
        "timestampAggregationTimeout": 0,
        "rolloverSizeBytes": 0,
    }
    assert rest_cluster.core.get_stream_info(scope, "st").configuration == StreamConfiguration(
        ScalingPolicy.by_event_rate(100, 2, 3),
        RetentionPolicy.by_size(10 * MIB, 20 * MIB),
        ("a", "b"),
    )
    assert client.get(f"/v1/scopes/{scope}/streams/st").body == body


def test_create_stream_defaults_to_one_fixed_segment(client: Http, scope: str) -> None:
    body = create(client, scope, "st")
    assert body["scalingPolicy"] == {**FIXED_2, "minSegments": 1}
    assert (body["retentionPolicy"], body["tags"]) == (None, [])


@pytest.mark.parametrize(
    ("sent", "stored_ms"),
    [
        ({"type": "LIMITED_DAYS", "value": 2}, 2 * DAY_MS),
        (
            {
                "type": "LIMITED_DAYS",
                "value": 0,
                "timeBasedRetention": {"days": 1, "hours": 2, "minutes": 3},
            },
            DAY_MS + 2 * 3_600_000 + 3 * 60_000,
        ),
        ({"type": "LIMITED_DAYS", "timeBasedRetention": {"minutes": 90}}, 5_400_000),
    ],
)
def test_time_retention_is_read_as_days_or_days_hours_minutes(
    client: Http,
    scope: str,
    rest_cluster: InProcessCluster,
    sent: dict[str, Any],
    stored_ms: int,
) -> None:
    body = create(client, scope, "st", retentionPolicy=sent)
    retention = rest_cluster.core.get_stream_info(scope, "st").configuration.retention
    assert retention == RetentionPolicy.by_time(stored_ms)
    days, rest = divmod(stored_ms, DAY_MS)
    assert body["retentionPolicy"] == {
        "type": "LIMITED_DAYS",
        "value": 0 if rest else days,
        "timeBasedRetention": {
            "days": days,
            "hours": rest // 3_600_000,
            "minutes": rest % 3_600_000 // 60_000,
        },
    }


def test_time_retention_keeps_its_maximum(
    client: Http, scope: str, rest_cluster: InProcessCluster
) -> None:
    sent = {"type": "LIMITED_DAYS", "value": 1, "maxValue": 0, "maxTimeBasedRetention": {"days": 3}}
    body = create(client, scope, "st", retentionPolicy=sent)
    assert rest_cluster.core.get_stream_info(scope, "st").configuration.retention == (
        RetentionPolicy.by_time(DAY_MS, 3 * DAY_MS)
    )
    assert body["retentionPolicy"]["maxValue"] == 3
    assert body["retentionPolicy"]["maxTimeBasedRetention"] == {"days": 3, "hours": 0, "minutes": 0}


def test_create_stream_in_a_missing_scope_answers_404_then_409_when_it_exists(
    client: Http, scope: str
) -> None:
    reply = client.post("/v1/scopes/no-such-scope/streams", {"streamName": "st"})
    assert (reply.status, reply.body["error"]) == (404, "ScopeNotFoundError")
    create(client, scope, "st")
    again = client.post(
        f"/v1/scopes/{scope}/streams", {"streamName": "st", "scalingPolicy": BY_RATE}
    )
    assert again.status == 409
    assert client.get(f"/v1/scopes/{scope}/streams/st").body["scalingPolicy"]["minSegments"] == 1


@pytest.mark.parametrize(
    "fields",
    [
        {"streamName": "../x"},
        {"streamName": ""},
        {"streamName": "s" * 300},
        {"streamName": "_internal"},
        {},
        {"streamName": 5},
        {"streamName": "st", "scalingPolicy": "fixed"},
        {"streamName": "st", "scalingPolicy": {"type": "NOPE"}},
        {"streamName": "st", "scalingPolicy": {"minSegments": 2}},
        {"streamName": "st", "scalingPolicy": {"type": "FIXED_NUM_SEGMENTS", "minSegments": 0}},
        {"streamName": "st", "scalingPolicy": {"type": "FIXED_NUM_SEGMENTS", "minSegments": 2.0}},
        {"streamName": "st", "scalingPolicy": {"type": "FIXED_NUM_SEGMENTS", "minSegments": True}},
        {"streamName": "st", "scalingPolicy": {"type": "FIXED_NUM_SEGMENTS", "minSegments": "2"}},
        {
            "streamName": "st",
            "scalingPolicy": {"type": "FIXED_NUM_SEGMENTS", "minSegments": 10**30},
        },
        {
            "streamName": "st",
            "scalingPolicy": {"type": "BY_RATE_IN_KBYTES_PER_SEC", "targetRate": 1},
        },
        {"streamName": "st", "retentionPolicy": {"type": "LIMITED_HOURS", "value": 1}},
        {"streamName": "st", "retentionPolicy": {"type": "LIMITED_SIZE_MB", "value": -1}},
        {"streamName": "st", "retentionPolicy": {"type": "LIMITED_SIZE_MB", "value": 2**62}},
        {
            "streamName": "st",
            "retentionPolicy": {"type": "LIMITED_SIZE_MB", "value": 5, "maxValue": 1},
        },
        {
            "streamName": "st",
            "retentionPolicy": {"type": "LIMITED_DAYS", "timeBasedRetention": [1]},
        },
        {"streamName": "st", "retentionPolicy": []},
        {"streamName": "st", "streamTags": "a"},
        {"streamName": "st", "streamTags": [""]},
        {"streamName": "st", "streamTags": ["t" * 257]},
        {"streamName": "st", "streamTags": [f"t{i}" for i in range(129)]},
        {"streamName": "st", "timestampAggregationTimeout": 1000},
        {"streamName": "st", "rolloverSizeBytes": 1024},
    ],
    ids=lambda f: repr(f)[:60],
)
def test_create_stream_with_a_bad_body_answers_400_and_creates_nothing(
    client: Http, scope: str, fields: dict[str, Any], rest_cluster: InProcessCluster
) -> None:
    reply = client.post(f"/v1/scopes/{scope}/streams", fields)
    assert reply.status == 400, reply.body
    assert reply.body["message"]
    assert rest_cluster.core.list_streams(scope) == []


def test_get_stream_of_a_missing_stream_or_scope_answers_404(client: Http, scope: str) -> None:
    assert client.get(f"/v1/scopes/{scope}/streams/nope").body["error"] == "StreamNotFoundError"
    assert client.get("/v1/scopes/nope/streams/nope").status == 404


def test_list_streams_filters_by_tag_and_internal_names(client: Http, scope: str) -> None:
    create(client, scope, "b", streamTags=["red"])
    create(client, scope, "a", streamTags=["red", "blue"])
    create(client, scope, "c")
    path = f"/v1/scopes/{scope}/streams"

    def names(reply: Reply) -> list[str]:
        return [s["streamName"] for s in reply.body["streams"]]

    assert names(client.get(path)) == ["a", "b", "c"]
    assert names(client.get(path + "?filter_type=tag&filter_value=red")) == ["a", "b"]
    assert names(client.get(path + "?filter_type=tag&filter_value=blue")) == ["a"]
    assert names(client.get(path + "?filter_type=tag&filter_value=green")) == []
    assert names(client.get(path + "?filter_type=showInternalStreams")) == []
    assert client.get(path).body["streams"][0]["tags"] == ["red", "blue"]


@pytest.mark.parametrize(
    "query", ["?filter_type=tag", "?filter_type=tag&filter_value=", "?filter_type=size"]
)
def test_list_streams_with_a_bad_filter_answers_400(client: Http, scope: str, query: str) -> None:
    assert client.get(f"/v1/scopes/{scope}/streams{query}").status == 400


def test_list_streams_of_a_missing_scope_answers_404(client: Http) -> None:
    assert client.get("/v1/scopes/nope/streams").status == 404


def test_update_stream_changes_what_the_body_names_and_keeps_the_rest(
    client: Http, scope: str, rest_cluster: InProcessCluster
) -> None:
    retention = {"type": "LIMITED_SIZE_MB", "value": 1}
    create(client, scope, "st", scalingPolicy=FIXED_2, retentionPolicy=retention, streamTags=["x"])
    path = f"/v1/scopes/{scope}/streams/st"
    reply = client.put(path, {"scalingPolicy": BY_RATE})
    assert reply.status == 200, reply.body
    assert (reply.body["scalingPolicy"], reply.body["retentionPolicy"], reply.body["tags"]) == (
        BY_RATE,
        retention,
        ["x"],
    )
    assert client.get(path).body == reply.body  # done when answered
    reply = client.put(path, {"retentionPolicy": None, "streamTags": ["y", "z"]})
    assert (reply.body["retentionPolicy"], reply.body["tags"]) == (None, ["y", "z"])
    config = rest_cluster.core.get_stream_info(scope, "st").configuration
    assert config == StreamConfiguration(ScalingPolicy.by_event_rate(100, 2, 3), None, ("y", "z"))


def test_update_stream_refused_changes_nothing(client: Http, scope: str) -> None:
    create(client, scope, "st", scalingPolicy=FIXED_2)
    path = f"/v1/scopes/{scope}/streams/st"
    before = client.get(path).body
    assert (
        client.put(
            path, {"scalingPolicy": {"type": "FIXED_NUM_SEGMENTS", "minSegments": -1}}
        ).status
        == 400
    )
    assert client.request("PUT", path, raw=b"{oops").status == 400
    assert (
        client.put(path, {"retentionPolicy": {"type": "LIMITED_DAYS", "value": "1"}}).status == 400
    )
    assert client.get(path).body == before
    assert client.put(f"/v1/scopes/{scope}/streams/nope", {"scalingPolicy": FIXED_2}).status == 404


def test_seal_then_delete(client: Http, scope: str, rest_cluster: InProcessCluster) -> None:
    create(client, scope, "st")
    path = f"/v1/scopes/{scope}/streams/st"
    unsealed = client.delete(path)
    assert (unsealed.status, unsealed.body["error"]) == (412, "StreamNotSealedError")
    reply = client.put(path + "/state", {"streamState": "SEALED"})
    assert (reply.status, reply.body) == (200, {"streamState": "SEALED"})
    assert rest_cluster.core.get_stream_info(scope, "st").sealed
    assert client.put(path + "/state", {"streamState": "SEALED"}).status == 200  # again
    assert client.delete(path).status == 204
    assert client.get(path).status == 404
    assert client.get(f"/v1/scopes/{scope}/streams").body == {"streams": []}
    assert client.delete(path).status == 404
    assert client.delete(f"/v1/scopes/{scope}").status == 204


@pytest.mark.parametrize(
    "body", [{"streamState": "ACTIVE"}, {"streamState": "sealed"}, {}, {"streamState": None}]
)
def test_update_stream_state_other_than_sealed_answers_400(
    client: Http, scope: str, body: dict[str, Any], rest_cluster: InProcessCluster
) -> None:
    create(client, scope, "st")
    assert client.put(f"/v1/scopes/{scope}/streams/st/state", body).status == 400
    assert not rest_cluster.core.get_stream_info(scope, "st").sealed


def test_seal_a_missing_stream_answers_404(client: Http, scope: str) -> None:
    assert (
        client.put(f"/v1/scopes/{scope}/streams/nope/state", {"streamState": "SEALED"}).status
        == 404
    )


def test_scaling_events_list_the_epochs_with_their_segments(
    client: Http, scope: str, rest_cluster: InProcessCluster
) -> None:
    create(client, scope, "st", scalingPolicy=FIXED_2)
    core = rest_cluster.core
    created_ms = core.get_stream_info(scope, "st").creation_time_ms
    epoch = core.scale_stream(scope, "st", [0], [(0.0, 0.25), (0.25, 0.5)])  # split segment 0
    while not core.check_scale(scope, "st", epoch):
        time.sleep(0.01)
    path = f"/v1/scopes/{scope}/streams/st/scaling-events"
    reply = client.get(f"{path}?from=0&to={2**62}")
    assert reply.status == 200, reply.body
    events = reply.body["scalingEvents"]
    assert [e["epoch"] for e in events] == [0, 1]
    assert events[0]["timestamp"] == created_ms
    assert [(s["number"], s["keyStart"], s["keyEnd"]) for s in events[0]["segmentList"]] == [
        (0, 0.0, 0.5),
        (1, 0.5, 1.0),
    ]
    assert events[0]["segmentList"][0]["startTime"] == created_ms
    assert (events[1]["splits"], events[1]["merges"]) == (1, 0)
    assert [(s["number"], s["creationEpoch"], s["keyStart"]) for s in events[1]["segmentList"]] == [
        (2, 1, 0.0),
        (3, 1, 0.25),
        (1, 0, 0.5),
    ]
    scaled_ms = core.get_epoch(scope, "st", 1).created_ms
    assert events[1]["timestamp"] == scaled_ms >= created_ms
    assert events[1]["segmentList"][0]["startTime"] == scaled_ms  # a segment of epoch 1
    # A window after the scale keeps epoch 1 as the layout current at its start.
    later = client.get(f"{path}?from={scaled_ms + 1}&to={scaled_ms + 2}").body["scalingEvents"]
    assert [e["epoch"] for e in later] == [1]
    # A window before the creation has nothing.
    before = client.get(f"{path}?from=0&to={created_ms - 1}").body["scalingEvents"]
    assert before == []


def test_scaling_events_of_a_merge(
    client: Http, scope: str, rest_cluster: InProcessCluster
) -> None:
    create(client, scope, "st", scalingPolicy=FIXED_2)
    core = rest_cluster.core
    epoch = core.scale_stream(scope, "st", [0, 1], [(0.0, 1.0)])
    while not core.check_scale(scope, "st", epoch):
        time.sleep(0.01)
    path = f"/v1/scopes/{scope}/streams/st/scaling-events"
    events = client.get(f"{path}?from=0&to={2**62}").body["scalingEvents"]
    assert [(e["epoch"], e["splits"], e["merges"]) for e in events] == [(0, 0, 0), (1, 0, 1)]


@pytest.mark.parametrize(
    "query",
    ["", "?from=0", "?to=5", "?from=-1&to=5", "?from=5&to=4", "?from=a&to=5", "?from=1e3&to=5000"],
)
def test_scaling_events_with_a_bad_window_answers_400(client: Http, scope: str, query: str) -> None:
    create(client, scope, "st")
    assert client.get(f"/v1/scopes/{scope}/streams/st/scaling-events{query}").status == 400


def test_scaling_events_of_a_missing_stream_answers_404(client: Http, scope: str) -> None:
    assert client.get(f"/v1/scopes/{scope}/streams/nope/scaling-events?from=0&to=1").status == 404


def test_concurrent_creates_of_one_stream_answer_one_201(client: Http, scope: str) -> None:
    statuses: list[int] = []
    lock = threading.Lock()

    def post() -> None:
        reply = client.post(f"/v1/scopes/{scope}/streams", {"streamName": "same"})
        with lock:
            statuses.append(reply.status)

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert sorted(statuses) == [201] + [409] * 7
