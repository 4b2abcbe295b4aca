"""Readers meeting truncated data (``mgr.truncate_stream`` on an in-process cluster): they skip
to the segment's start, or raise TruncatedDataError once when the group says so; segments
deleted by a truncation count as read to their ends."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import parse_segment_name
from tests.checks import group_test_cluster, read_count, write_numbered

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = group_test_cluster(1)
    yield c
    c.shutdown()


def _write(cluster: InProcessCluster, start: int, count: int) -> None:
    write_numbered(cluster, start, count)


def _offsets(cluster: InProcessCluster, expected: int) -> list[tuple[int, int, int]]:
    """(segment id, offset, n) of every event (``expected`` of them), read by a throwaway
    group."""
    cluster.create_reader_group("sc", "scan", pr.ReaderGroupConfig.for_streams("sc/st"))
    with cluster.create_reader("scan", "sc", "scan", pr.JsonSerializer()) as reader:
        events = read_count(reader, expected)
    cluster.delete_reader_group("sc", "scan")
    return [(parse_segment_name(e.segment).segment_id, e.offset, e.event["n"]) for e in events]


def _truncate_at_event(cluster: InProcessCluster, events: list[Any], n: int) -> None:
    sid, offset, _ = next(e for e in events if e[2] == n)
    cluster.stream_manager().truncate_stream("sc", "st", pr.StreamCut("sc", "st", {sid: offset}))


def _reader_at_head(cluster: InProcessCluster, raise_on_truncated: bool) -> Any:
    config = pr.ReaderGroupConfig.for_streams("sc/st", raise_on_truncated_data=raise_on_truncated)
    cluster.create_reader_group("sc", "g", config)
    return cluster.create_reader("r", "sc", "g", pr.JsonSerializer())


def _read_rest(reader: Any, expected: int) -> list[int]:
    return [ev.event["n"] for ev in read_count(reader, expected)]


def test_truncated_data_is_skipped_with_a_warning(
    cluster: InProcessCluster, caplog: pytest.LogCaptureFixture
) -> None:
    _write(cluster, 0, 30)
    events = _offsets(cluster, 30)
    reader = _reader_at_head(cluster, False)  # made before the truncation: at offset 0
    _truncate_at_event(cluster, events, 10)
    with caplog.at_level(logging.WARNING):
        got = _read_rest(reader, 20)
    assert got == list(range(10, 30))
    assert any("truncated" in r.message for r in caplog.records)
    reader.close()


def test_truncated_data_raises_once_then_goes_on(cluster: InProcessCluster) -> None:
    _write(cluster, 0, 30)
    events = _offsets(cluster, 30)
    reader = _reader_at_head(cluster, True)
    _truncate_at_event(cluster, events, 12)
    deadline = time.monotonic() + 30
    with pytest.raises(pr.TruncatedDataError) as info:
        while time.monotonic() < deadline:  # it raises as soon as it reaches the gap
            reader.read_next_event(0.5)
    error = info.value
    start = next(e for e in events if e[2] == 12)[1]
    assert error.offset == 0 and error.start_offset == start  # type: ignore[attr-defined]
    assert error.segment.endswith("0.#epoch.0")  # type: ignore[attr-defined]
    assert _read_rest(reader, 18) == list(range(12, 30))  # raised once only
    reader.close()


def test_segment_deleted_by_truncation_counts_as_read(cluster: InProcessCluster) -> None:
    mgr = cluster.stream_manager()
    _write(cluster, 0, 20)
    segment = mgr.get_stream_info("sc", "st").segments[0]
    assert mgr.scale_stream("sc", "st", [segment.segment_id], [(0.0, 0.5), (0.5, 1.0)])
    _write(cluster, 20, 20)
    reader = _reader_at_head(cluster, False)  # at epoch 0, offset 0
    events = _offsets(cluster, 40)
    later = {
        sid: min(o for s, o, _ in events if s == sid) for sid, _, _ in events if sid >> 32 == 1
    }
    assert len(later) == 2
    mgr.truncate_stream("sc", "st", pr.StreamCut("sc", "st", later))  # deletes epoch 0
    got = _read_rest(reader, 20)
    assert sorted(got) == list(range(20, 40))
    reader.close()
