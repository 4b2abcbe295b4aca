"""The controller's gRPC API (pravega_ray/grpc/service.py) served over a real grpcio channel,
on an in-process cluster: statuses, field presence, paging, segments, transactions."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from pravega_ray.errors import InvalidArgumentError
from pravega_ray.grpc import message_class
from pravega_ray.grpc.convert import INT64_MAX, txn_uuid
from pravega_ray.inprocess import InProcessCluster
from tests.unit.grpc.conftest import GATEWAY, Client

pytestmark = pytest.mark.timeout(60)

M = message_class
OK = grpc.StatusCode.OK


def _status(reply: Any) -> str:
    """The name of a reply's ``status`` value."""
    return str(
        reply.DESCRIPTOR.fields_by_name["status"].enum_type.values_by_number[reply.status].name
    )


def _info(scope: str, stream: str) -> Any:
    return M("StreamInfo")(scope=scope, stream=stream)


def _config(scope: str, stream: str, segments: int = 1, tags: list[str] | None = None) -> Any:
    config = M("StreamConfig")()
    config.streamInfo.CopyFrom(_info(scope, stream))
    config.scalingPolicy.minNumSegments = segments
    if tags is not None:
        config.tags.tag.extend(tags)
    return config


def _stream(client: Client, scope: str, stream: str, segments: int = 1) -> None:
    client.call("createScope", M("ScopeInfo")(scope=scope))
    assert _status(client.call("createStream", _config(scope, stream, segments))) == "SUCCESS"


def _eventually(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def _list_scopes(client: Client) -> list[list[str]]:
    """Every page of listScopes up to the first empty one, checking the tokens."""
    pages, token = [], ""
    for _ in range(20):
        request = M("ScopesRequest")()
        request.continuationToken.token = token
        reply = client.call("listScopes", request)
        pages.append(list(reply.scopes))
        if not reply.scopes:
            return pages
        assert reply.HasField("continuationToken") and reply.continuationToken.token
        token = reply.continuationToken.token
    raise AssertionError("listScopes never reached an empty page")


def _list_streams(client: Client, scope: str) -> tuple[list[list[str]], str]:
    pages, token = [], ""
    for _ in range(20):
        request = M("StreamsInScopeRequest")()
        request.scope.scope = scope
        request.continuationToken.token = token
        reply = client.call("listStreamsInScope", request)
        pages.append([s.stream for s in reply.streams])
        assert all(s.scope == scope for s in reply.streams)
        if not reply.streams:
            return pages, _status(reply)
        assert reply.HasField("continuationToken") and reply.continuationToken.token
        token = reply.continuationToken.token
    raise AssertionError("listStreamsInScope never reached an empty page")


# --- scopes ---------------------------------------------------------------------------------------
def test_create_scope_answers_success_exists_and_invalid_name(client: Client) -> None:
    assert _status(client.call("createScope", M("ScopeInfo")(scope="sc"))) == "SUCCESS"
    assert _status(client.call("createScope", M("ScopeInfo")(scope="sc"))) == "SCOPE_EXISTS"
    for bad in ("", "a/b", "_system"):
        reply = client.call("createScope", M("ScopeInfo")(scope=bad))
        assert _status(reply) == "INVALID_SCOPE_NAME"


def test_delete_scope_answers_success_not_found_and_not_empty(client: Client) -> None:
    _stream(client, "full", "st")
    client.call("createScope", M("ScopeInfo")(scope="empty"))
    assert _status(client.call("deleteScope", M("ScopeInfo")(scope="full"))) == "SCOPE_NOT_EMPTY"
    assert _status(client.call("deleteScope", M("ScopeInfo")(scope="empty"))) == "SUCCESS"
    for absent in ("empty", "never", ""):
        reply = client.call("deleteScope", M("ScopeInfo")(scope=absent))
        assert _status(reply) == "SCOPE_NOT_FOUND"


def test_list_scopes_pages_to_an_empty_page_system_scope_first(client: Client) -> None:
    for scope in ("zeta", "0digit", "alpha"):
        client.call("createScope", M("ScopeInfo")(scope=scope))
    pages = _list_scopes(client)  # page size 2 (conftest)
    assert pages == [["_system", "0digit"], ["alpha", "zeta"], []]
    # The first scope listed has a stream (the client's test_tags lists it).
    streams, status = _list_streams(client, pages[0][0])
    assert streams[0] and status == "SUCCESS"


def test_list_scopes_past_the_end_or_after_a_deleted_name(client: Client) -> None:
    for scope in ("a", "b", "c"):
        client.call("createScope", M("ScopeInfo")(scope=scope))
    request = M("ScopesRequest")()
    request.continuationToken.token = "zzz"
    reply = client.call("listScopes", request)
    assert list(reply.scopes) == [] and reply.continuationToken.token == "zzz"
    request.continuationToken.token = "aa"  # not a scope: resumes where it sorts
    assert list(client.call("listScopes", request).scopes) == ["b", "c"]


def test_check_scope_and_stream_exists(client: Client) -> None:
    _stream(client, "sc", "st")
    exists = [
        client.call("checkScopeExists", M("ScopeInfo")(scope=s)).exists
        for s in ("sc", "_system", "nope", "")
    ]
    assert exists == [True, True, False, False]
    exists = [
        client.call("checkStreamExists", _info(*names)).exists
        for names in (("sc", "st"), ("sc", "nope"), ("nope", "st"), ("", ""))
    ]
    assert exists == [True, False, False, False]


# --- streams --------------------------------------------------------------------------------------
def test_list_streams_pages_and_unknown_scope_is_a_status(client: Client) -> None:
    for name in ("s3", "s1", "s2"):
        _stream(client, "sc", name)
    assert _list_streams(client, "sc") == ([["s1", "s2"], ["s3"], []], "SUCCESS")
    for scope in ("falsescope", "", "a/b"):
        assert _list_streams(client, scope) == ([[]], "SCOPE_NOT_FOUND")


def test_create_stream_statuses(client: Client) -> None:
    client.call("createScope", M("ScopeInfo")(scope="sc"))
    assert _status(client.call("createStream", _config("sc", "st", 2))) == "SUCCESS"
    assert _status(client.call("createStream", _config("sc", "st", 2))) == "STREAM_EXISTS"
    assert _status(client.call("createStream", _config("nope", "st"))) == "SCOPE_NOT_FOUND"
    assert _status(client.call("createStream", _config("", "st"))) == "SCOPE_NOT_FOUND"
    for bad in ("", "a/b", "_x"):
        reply = client.call("createStream", _config("sc", bad))
        assert _status(reply) == "INVALID_STREAM_NAME"


def test_create_stream_refuses_missing_or_bad_configuration(client: Client) -> None:
    client.call("createScope", M("ScopeInfo")(scope="sc"))
    no_info = _config("sc", "st")
    no_info.ClearField("streamInfo")
    no_policy = _config("sc", "st")
    no_policy.ClearField("scalingPolicy")
    zero_segments = _config("sc", "st", segments=0)
    unknown_type = _config("sc", "st")
    unknown_type.scalingPolicy.scaleType = 7
    bad_retention = _config("sc", "st")
    bad_retention.retentionPolicy.retentionType = 9
    too_many_tags = _config("sc", "st", tags=[f"t{i}" for i in range(129)])
    for request in (no_info, no_policy, zero_segments, unknown_type, bad_retention, too_many_tags):
        assert client.code("createStream", request) == grpc.StatusCode.INVALID_ARGUMENT
    assert not client.call("checkStreamExists", _info("sc", "st")).exists


def test_stream_configuration_always_carries_tags_and_policies(client: Client) -> None:
    _stream(client, "sc", "st")
    config = client.call("getStreamConfiguration", _info("sc", "st"))
    for field in ("streamInfo", "scalingPolicy", "retentionPolicy", "tags"):
        assert config.HasField(field), field
    assert (config.streamInfo.scope, config.streamInfo.stream) == ("sc", "st")
    assert list(config.tags.tag) == [] and config.scalingPolicy.minNumSegments == 1

    update = _config("sc", "st", tags=["t1", "t2", "t1"])
    update.scalingPolicy.scaleType = 1  # BY_RATE_IN_KBYTES_PER_SEC
    update.scalingPolicy.targetRate, update.scalingPolicy.scaleFactor = 10, 2
    assert _status(client.call("updateStream", update)) == "SUCCESS"
    config = client.call("getStreamConfiguration", _info("sc", "st"))
    assert list(config.tags.tag) == ["t1", "t2"]  # in order, de-duplicated
    assert (config.scalingPolicy.scaleType, config.scalingPolicy.targetRate) == (1, 10)

    retention = _config("sc", "st")  # no tags field: the tags stay
    retention.retentionPolicy.retentionType = 2  # SIZE
    retention.retentionPolicy.retentionParam = 10 * 2**30
    retention.retentionPolicy.retentionMax = INT64_MAX
    assert _status(client.call("updateStream", retention)) == "SUCCESS"
    config = client.call("getStreamConfiguration", _info("sc", "st"))
    assert list(config.tags.tag) == ["t1", "t2"]
    policy = config.retentionPolicy
    assert (policy.retentionType, policy.retentionParam, policy.retentionMax) == (
        2,
        10 * 2**30,
        INT64_MAX,
    )


def test_create_stream_stores_tags_and_update_of_a_missing_stream(client: Client) -> None:
    client.call("createScope", M("ScopeInfo")(scope="sc"))
    client.call("createStream", _config("sc", "st", tags=["b", "a"]))
    assert list(client.call("getStreamConfiguration", _info("sc", "st")).tags.tag) == ["b", "a"]
    assert _status(client.call("updateStream", _config("sc", "nope"))) == "STREAM_NOT_FOUND"
    assert _status(client.call("updateStream", _config("nope", "st"))) == "SCOPE_NOT_FOUND"
    assert client.code("getStreamConfiguration", _info("sc", "nope")) == grpc.StatusCode.NOT_FOUND
    assert client.code("getStreamConfiguration", _info("", "")) == grpc.StatusCode.INVALID_ARGUMENT


def test_tags_are_the_stream_configurations_seen_by_pravega_ray_and_kept_across_restarts(
    cluster: InProcessCluster, client: Client
) -> None:
    """Tags live in the stream's configuration record, not in the server: pravega-ray's own
    clients see what the gRPC API set, and a restart keeps them."""
    client.call("createScope", M("ScopeInfo")(scope="sc"))
    client.call("createStream", _config("sc", "st", tags=["b", "a"]))
    client.call("createStream", _config("sc", "other", tags=["a"]))
    manager = cluster.stream_manager()
    assert manager.get_stream_info("sc", "st").configuration.tags == ("b", "a")
    assert manager.list_streams("sc", tag="b") == ["st"]
    assert manager.list_streams("sc", tag="a") == ["other", "st"]
    with pytest.raises(InvalidArgumentError):
        manager.list_streams("sc", tag=5)  # type: ignore[arg-type]
    cluster.restart()
    assert list(client.call("getStreamConfiguration", _info("sc", "st")).tags.tag) == ["b", "a"]


def test_seal_then_delete_with_no_segments_or_successors_between(client: Client) -> None:
    _stream(client, "sc", "st", segments=2)
    assert _status(client.call("deleteStream", _info("sc", "st"))) == "STREAM_NOT_SEALED"
    assert _status(client.call("sealStream", _info("sc", "st"))) == "SUCCESS"
    assert _status(client.call("sealStream", _info("sc", "st"))) == "SUCCESS"
    assert list(client.call("getCurrentSegments", _info("sc", "st")).segmentRanges) == []
    segment = M("SegmentId")(segmentId=0)
    segment.streamInfo.CopyFrom(_info("sc", "st"))
    assert list(client.call("getSegmentsImmediatelyFollowing", segment).segments) == []
    assert _status(client.call("deleteStream", _info("sc", "st"))) == "SUCCESS"
    assert not client.call("checkStreamExists", _info("sc", "st")).exists
    assert _status(client.call("deleteStream", _info("sc", "st"))) == "STREAM_NOT_FOUND"
    assert _status(client.call("sealStream", _info("sc", "st"))) == "STREAM_NOT_FOUND"
    assert _status(client.call("sealStream", _info("nope", "st"))) == "SCOPE_NOT_FOUND"
    assert _status(client.call("deleteStream", _info("", ""))) == "STREAM_NOT_FOUND"


def test_truncate_stream_at_its_head(client: Client) -> None:
    _stream(client, "sc", "st", segments=2)
    cut = M("StreamCut")()
    cut.streamInfo.CopyFrom(_info("sc", "st"))
    cut.cut.update({0: 0, 1: 0})
    assert _status(client.call("truncateStream", cut)) == "SUCCESS"
    cut.cut.clear()
    cut.cut.update({7: 0})
    assert client.code("truncateStream", cut) == grpc.StatusCode.INVALID_ARGUMENT
    cut.streamInfo.stream = "nope"
    assert _status(client.call("truncateStream", cut)) == "STREAM_NOT_FOUND"


# --- segments -------------------------------------------------------------------------------------
def test_current_segments_cover_zero_to_exactly_one(client: Client) -> None:
    _stream(client, "sc", "st", segments=3)
    ranges = list(client.call("getCurrentSegments", _info("sc", "st")).segmentRanges)
    assert [r.segmentId.segmentId for r in ranges] == [0, 1, 2]
    assert all(r.segmentId.HasField("streamInfo") for r in ranges)
    assert {(r.segmentId.streamInfo.scope, r.segmentId.streamInfo.stream) for r in ranges} == {
        ("sc", "st")
    }
    assert ranges[0].minKey == 0.0 and ranges[-1].maxKey == 1.0
    assert all(a.maxKey == b.minKey for a, b in itertools.pairwise(ranges))
    assert client.code("getCurrentSegments", _info("sc", "nope")) == grpc.StatusCode.NOT_FOUND


def test_get_segments_answers_the_head_cut(client: Client) -> None:
    _stream(client, "sc", "st", segments=2)
    request = M("GetSegmentsRequest")(timestamp=0)
    request.streamInfo.CopyFrom(_info("sc", "st"))
    reply = client.call("getSegments", request)
    assert [(s.segmentId.segmentId, s.offset) for s in reply.segments] == [(0, 0), (1, 0)]
    assert all(s.segmentId.streamInfo.stream == "st" for s in reply.segments)
    assert client.code("getSegments", M("GetSegmentsRequest")()) == grpc.StatusCode.INVALID_ARGUMENT


def test_get_uri_answers_for_any_segment(client: Client) -> None:
    segment = M("SegmentId")(segmentId=(3 << 32) | 5)
    segment.streamInfo.CopyFrom(_info("sc", "rg_kvtable"))  # a stream nobody created
    reply = client.call("getURI", segment)
    assert (reply.endpoint, reply.port) == GATEWAY
    assert client.uri_requests == ["sc/rg_kvtable/5.#epoch.3"]


def test_successors_after_a_scale(client: Client, cluster: InProcessCluster) -> None:
    _stream(client, "sc", "st")
    epoch = cluster.core.scale_stream("sc", "st", [0], [(0.0, 0.5), (0.5, 1.0)])
    _eventually(lambda: cluster.core.check_scale("sc", "st", epoch))
    segment = M("SegmentId")(segmentId=0)
    segment.streamInfo.CopyFrom(_info("sc", "st"))
    entries = list(client.call("getSegmentsImmediatelyFollowing", segment).segments)
    assert [(e.segment.minKey, e.segment.maxKey, list(e.value)) for e in entries] == [
        (0.0, 0.5, [0]),
        (0.5, 1.0, [0]),
    ]
    assert all(e.segment.segmentId.segmentId >> 32 == 1 for e in entries)
    current = client.call("getCurrentSegments", _info("sc", "st")).segmentRanges
    assert [r.segmentId.segmentId for r in current] == [
        e.segment.segmentId.segmentId for e in entries
    ]
    epoch0 = M("GetEpochSegmentsRequest")(epoch=0)
    epoch0.streamInfo.CopyFrom(_info("sc", "st"))
    assert [
        r.segmentId.segmentId for r in client.call("getEpochSegments", epoch0).segmentRanges
    ] == [0]
    epoch0.epoch = 9
    assert client.code("getEpochSegments", epoch0) == grpc.StatusCode.NOT_FOUND


# --- transactions ---------------------------------------------------------------------------------
def _txn_request(kind: str, scope: str, stream: str, txn_id: Any) -> Any:
    request = M(kind)()
    request.streamInfo.CopyFrom(_info(scope, stream))
    request.txnId.CopyFrom(txn_id)
    return request


def _state(client: Client, scope: str, stream: str, txn_id: Any) -> str:
    reply = client.call("checkTransactionState", _txn_request("TxnRequest", scope, stream, txn_id))
    return str(
        reply.DESCRIPTOR.fields_by_name["state"].enum_type.values_by_number[reply.state].name
    )


def _create_txn(client: Client, scope: str, stream: str) -> Any:
    request = M("CreateTxnRequest")(lease=90_000)
    request.streamInfo.CopyFrom(_info(scope, stream))
    return client.call("createTransaction", request)


def test_transaction_create_ping_commit_and_abort(
    client: Client, cluster: InProcessCluster
) -> None:
    _stream(client, "sc", "st", segments=2)
    created = _create_txn(client, "sc", "st")
    assert created.HasField("txnId")
    assert [r.segmentId.segmentId for r in created.activeSegments] == [0, 1]
    txn = created.txnId
    assert set(cluster.core.list_transactions("sc", "st")) == {txn_uuid(txn)}
    assert _state(client, "sc", "st", txn) == "OPEN"
    ping = _txn_request("PingTxnRequest", "sc", "st", txn)
    ping.lease = 90_000
    assert _status(client.call("pingTransaction", ping)) == "OK"
    ping.lease = 10**9
    assert _status(client.call("pingTransaction", ping)) == "LEASE_TOO_LARGE"
    commit = _txn_request("TxnRequest", "sc", "st", txn)
    commit.writerId, commit.timestamp = "1", -(2**63)
    assert _status(client.call("commitTransaction", commit)) == "SUCCESS"
    assert _state(client, "sc", "st", txn) in ("COMMITTING", "COMMITTED")
    _eventually(lambda: _state(client, "sc", "st", txn) == "COMMITTED")
    ping.lease = 90_000
    assert _status(client.call("pingTransaction", ping)) == "COMMITTED"

    second = _create_txn(client, "sc", "st").txnId
    assert (
        _status(client.call("abortTransaction", _txn_request("TxnRequest", "sc", "st", second)))
        == "SUCCESS"
    )
    assert _state(client, "sc", "st", second) in ("ABORTING", "ABORTED")
    assert client.code("commitTransaction", _txn_request("TxnRequest", "sc", "st", second)) == (
        grpc.StatusCode.FAILED_PRECONDITION
    )


def test_transaction_of_unknown_id_or_stream(client: Client) -> None:
    _stream(client, "sc", "st")
    unknown = M("TxnId")(highBits=-5, lowBits=7)
    request = _txn_request("TxnRequest", "sc", "st", unknown)
    assert _status(client.call("commitTransaction", request)) == "TRANSACTION_NOT_FOUND"
    assert _status(client.call("abortTransaction", request)) == "TRANSACTION_NOT_FOUND"
    assert client.code("checkTransactionState", request) == grpc.StatusCode.NOT_FOUND
    ping = _txn_request("PingTxnRequest", "sc", "st", unknown)
    ping.lease = 1000
    assert _status(client.call("pingTransaction", ping)) == "UNKNOWN"
    other = _txn_request("TxnRequest", "sc", "nope", unknown)
    assert _status(client.call("commitTransaction", other)) == "STREAM_NOT_FOUND"
    create = M("CreateTxnRequest")(lease=90_000)
    create.streamInfo.CopyFrom(_info("sc", "nope"))
    assert client.code("createTransaction", create) == grpc.StatusCode.NOT_FOUND
    create.streamInfo.stream, create.lease = "st", 0
    assert client.code("createTransaction", create) == grpc.StatusCode.INVALID_ARGUMENT


def test_transaction_on_a_sealed_stream_is_refused(client: Client) -> None:
    _stream(client, "sc", "st")
    client.call("sealStream", _info("sc", "st"))
    create = M("CreateTxnRequest")(lease=90_000)
    create.streamInfo.CopyFrom(_info("sc", "st"))
    assert client.code("createTransaction", create) == grpc.StatusCode.FAILED_PRECONDITION


# --- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("rpc", "request_type"),
    [
        ("createStream", "StreamConfig"),
        ("updateStream", "StreamConfig"),
        ("truncateStream", "StreamCut"),
        ("getEpochSegments", "GetEpochSegmentsRequest"),
        ("getSegments", "GetSegmentsRequest"),
        ("getSegmentsImmediatelyFollowing", "SegmentId"),
        ("createTransaction", "CreateTxnRequest"),
        ("commitTransaction", "TxnRequest"),
        ("abortTransaction", "TxnRequest"),
        ("checkTransactionState", "TxnRequest"),
        ("pingTransaction", "PingTxnRequest"),
    ],
)
def test_missing_required_fields_are_invalid_argument(
    client: Client, rpc: str, request_type: str
) -> None:
    assert client.code(rpc, M(request_type)()) == grpc.StatusCode.INVALID_ARGUMENT


def test_empty_requests_never_answer_unknown(client: Client) -> None:
    from pravega_ray.grpc.schema import RPCS

    for rpc in RPCS:
        code = client.code(rpc.name, M(rpc.request)())
        assert code not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL), rpc.name
        if not rpc.served:
            assert code == grpc.StatusCode.UNIMPLEMENTED, rpc.name


def test_system_streams_listed_are_the_controllers_own() -> None:
    from pravega_ray.controller.request_stream import REQUEST_SEGMENT
    from pravega_ray.controller.transaction_workflows import ABORT_SEGMENT, COMMIT_SEGMENT
    from pravega_ray.grpc.service import SYSTEM_STREAMS
    from pravega_ray.naming import parse_segment_name

    segments = (REQUEST_SEGMENT, COMMIT_SEGMENT, ABORT_SEGMENT)
    assert {parse_segment_name(s).stream for s in segments} == set(SYSTEM_STREAMS)
