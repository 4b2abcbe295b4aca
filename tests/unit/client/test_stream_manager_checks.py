"""Every stream, key-value table and reader-group call checks its names first (the system's
leading-``_`` names included: ``InvalidNameError``), then that the scope and the stream exist
(``ScopeNotFoundError``, ``StreamNotFoundError``), then its other arguments, as docs/api.md
lists; a refused call changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(120)

BAD_NAMES: list[Any] = ["_sys", "_kvt.t1", "_system", "a/b", "..", ".", "", "a b", "x" * 300, 5]
"""Never a user's stream, table or group name: the system's, paths, empty, too long, not a str."""

Call = Callable[[InProcessCluster, str, Any], Any]


STREAM_CALLS: dict[str, Call] = {
    "get_stream_info": lambda c, s, t: c.stream_manager().get_stream_info(s, t),
    "seal_stream": lambda c, s, t: c.stream_manager().seal_stream(s, t, timeout_s=5),
    "delete_stream": lambda c, s, t: c.stream_manager().delete_stream(s, t, timeout_s=5),
    "update_stream": lambda c, s, t: c.stream_manager().update_stream(
        s, t, pr.StreamConfiguration(), timeout_s=5
    ),
    "scale_stream": lambda c, s, t: c.stream_manager().scale_stream(
        s, t, [0], [(0.0, 0.5), (0.5, 1.0)], timeout_s=5
    ),
    "truncate_stream": lambda c, s, t: c.stream_manager().truncate_stream(
        s, t, pr.StreamCut("sc", "st", {0: 0}), timeout_s=5
    ),
    "get_successors": lambda c, s, t: c.stream_manager().get_successors(s, t, 0),
    "list_segments": lambda c, s, t: c.stream_manager().list_segments(s, t),
    "get_epoch_segments": lambda c, s, t: c.stream_manager().get_epoch_segments(s, t, 0),
    "get_segments_at_time": lambda c, s, t: c.stream_manager().get_segments_at_time(s, t, 0),
    "get_head_cut": lambda c, s, t: c.stream_manager().get_head_cut(s, t),
    "get_tail_cut": lambda c, s, t: c.stream_manager().get_tail_cut(s, t),
    "segment_ranges": lambda c, s, t: c.batch_client().segment_ranges(s, t),
    "list_subscribers": lambda c, s, t: c.core.list_subscribers(s, t),
    "list_transactions": lambda c, s, t: c.core.list_transactions(s, t),
    "list_completed_transactions": lambda c, s, t: c.stream_manager().list_completed_transactions(
        s, t
    ),
    "create_writer": lambda c, s, t: c.create_writer(s, t, pr.BytesSerializer()).close(),
}
"""Calls on an existing stream: bad name -> InvalidNameError, missing -> StreamNotFoundError."""

CREATE_CALLS: dict[str, Call] = {
    "create_stream": lambda c, s, t: c.stream_manager().create_stream(s, t),
    "create_key_value_table": lambda c, s, t: c.stream_manager().create_key_value_table(s, t, 1),
    "get_key_value_table_info": lambda c, s, t: c.stream_manager().get_key_value_table_info(s, t),
    "delete_key_value_table": lambda c, s, t: c.stream_manager().delete_key_value_table(s, t),
    "create_reader_group": lambda c, s, t: c.create_reader_group(
        s, t, pr.ReaderGroupConfig.for_streams("sc/st")
    ),
    "reader_group": lambda c, s, t: c.reader_group(s, t),
    "delete_reader_group": lambda c, s, t: c.delete_reader_group(s, t),
}
"""Calls naming something in a scope: a bad name is InvalidNameError even in a missing scope."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[InProcessCluster]:
    c = InProcessCluster(container_count=2)
    mgr = c.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    mgr.create_key_value_table("sc", "t1", 1)
    yield c
    c.shutdown()


def _unchanged(c: InProcessCluster) -> None:
    mgr = c.stream_manager()
    assert mgr.list_scopes() == ["sc"]
    assert mgr.list_streams("sc") == ["st"]
    assert mgr.list_key_value_tables("sc") == ["t1"]
    assert mgr.list_reader_groups("sc") == []
    assert mgr.get_stream_info("sc", "st").state is pr.StreamState.ACTIVE
    assert [s.segment_id for s in mgr.list_segments("sc", "st")] == [0]
    table = c.key_value_table("sc", "t1", pr.Utf8Serializer(), pr.Utf8Serializer())
    table.put("k", "v")
    assert table.get("k").value == "v"  # type: ignore[union-attr]


@pytest.mark.parametrize("call", sorted({**STREAM_CALLS, **CREATE_CALLS}))
@pytest.mark.parametrize("scope", ["sc", "nosc"])
def test_a_bad_name_is_invalid_name_before_anything_else(
    cluster: InProcessCluster, call: str, scope: str
) -> None:
    run = {**STREAM_CALLS, **CREATE_CALLS}[call]
    for name in BAD_NAMES:
        with pytest.raises(pr.InvalidNameError):
            run(cluster, scope, name)
    _unchanged(cluster)


@pytest.mark.parametrize("call", sorted({**STREAM_CALLS, **CREATE_CALLS}))
def test_a_bad_scope_name_is_invalid_name(cluster: InProcessCluster, call: str) -> None:
    run = {**STREAM_CALLS, **CREATE_CALLS}[call]
    for scope in ("_system", "_sc", "..", "", "a/b", 7):
        with pytest.raises(pr.InvalidNameError):
            run(cluster, scope, "st")
    _unchanged(cluster)


@pytest.mark.parametrize("call", sorted(STREAM_CALLS))
def test_a_missing_stream_is_stream_not_found(cluster: InProcessCluster, call: str) -> None:
    if call == "delete_stream":
        assert cluster.stream_manager().delete_stream("sc", "nope") is False
    else:
        with pytest.raises(pr.StreamNotFoundError):
            STREAM_CALLS[call](cluster, "sc", "nope")
    with pytest.raises(pr.ScopeNotFoundError):
        STREAM_CALLS[call](cluster, "nosc", "nope")
    _unchanged(cluster)


def test_a_key_value_tables_stream_is_not_a_stream(cluster: InProcessCluster) -> None:
    """``sc/_kvt.t1`` holds table t1's segments: no stream call reaches it."""
    mgr = cluster.stream_manager()
    for call in (mgr.seal_stream, mgr.delete_stream, mgr.get_stream_info, mgr.get_head_cut):
        with pytest.raises(pr.InvalidNameError, match="reserved"):
            call("sc", "_kvt.t1")
    _unchanged(cluster)


@pytest.mark.parametrize("timeout_s", [-1, float("nan"), float("inf"), "5", None, True])
def test_a_bad_workflow_timeout_is_refused_before_the_workflow_is_asked_for(
    cluster: InProcessCluster, timeout_s: Any
) -> None:
    """A timeout that is not a finite number >= 0 used to post the workflow and then fail
    (TimeoutError, TypeError): the stream was sealed by a call that raised."""
    mgr = cluster.stream_manager()
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(2))
    calls: list[Callable[[], Any]] = [
        lambda: mgr.seal_stream("sc", "st", timeout_s=timeout_s),
        lambda: mgr.delete_stream("sc", "st", timeout_s=timeout_s),
        lambda: mgr.update_stream("sc", "st", config, timeout_s=timeout_s),
        lambda: mgr.scale_stream("sc", "st", [0], [(0.0, 0.5), (0.5, 1.0)], timeout_s=timeout_s),
        lambda: mgr.truncate_stream("sc", "st", mgr.get_head_cut("sc", "st"), timeout_s=timeout_s),
    ]
    for call in calls:
        with pytest.raises(pr.InvalidArgumentError, match="timeout_s"):
            call()
    _unchanged(cluster)
    assert mgr.get_stream_info("sc", "st").configuration == pr.StreamConfiguration(
        pr.ScalingPolicy.fixed(1)
    )
