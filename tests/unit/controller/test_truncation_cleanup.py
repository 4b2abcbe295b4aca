"""A stream truncation removes the time-index entries below the cut that no lookup needs
(segmentstore/time_index.py, *cleanup*), and stream cuts at a time still answer exactly, on
an in-process cluster and after its restart."""

from __future__ import annotations

import time

import pytest

from pravega_ray.constants import TIME_INDEX_RESOLUTION_MS
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.segmentstore import time_index
from tests.containers import QUIET
from tests.unit.controller.test_stream_cuts import _now_ms, _owner, _read, _stream, _write

pytestmark = pytest.mark.timeout(90)


def _time_entries(cluster: InProcessCluster, segment: str) -> dict[bytes, int]:
    owner = _owner(cluster, segment)
    low, high = time_index.time_key(0), time_index.time_key((1 << 62) - 1)
    entries: dict[bytes, int] = {}
    after = None
    while True:
        page, after = cluster.run(
            owner._attributes.iterate_range(segment, low, high, after, 100)  # type: ignore[attr-defined]
        ).result(10)
        entries.update(page)
        if after is None:
            return entries


def test_truncate_stream_drops_time_entries_below_the_cut_and_cuts_at_times_stay_exact() -> None:
    cluster = InProcessCluster(container_count=2, **QUIET)
    try:
        mgr = _stream(cluster, 1)
        (s0,) = mgr.get_stream_info("sc", "st").segments
        batches, times = [], []
        for b in range(12):  # a batch per few time slots
            times.append(_now_ms())
            time.sleep(2 * TIME_INDEX_RESOLUTION_MS / 1000)
            batches.append(_write(cluster, 10 * b, 10))
            time.sleep(2 * TIME_INDEX_RESOLUTION_MS / 1000)
        before = len(_time_entries(cluster, s0.name))
        assert before >= 12
        cuts = [mgr.get_segments_at_time("sc", "st", t) for t in times]
        assert mgr.truncate_stream("sc", "st", cuts[8])
        start = cuts[8].positions[s0.segment_id]
        entries = _time_entries(cluster, s0.name)
        assert len(entries) < before - 6  # the slots of batches 0 to 7 are gone but one
        assert sum(offset <= start for offset in entries.values()) == 1

        def check() -> None:
            for b in range(12):  # before the cut: the head; after it: exact to the event
                cut = mgr.get_segments_at_time("sc", "st", times[b])
                assert cut == (cuts[b] if b >= 8 else cuts[8]), b
                if b >= 8:
                    assert sorted(_read(cluster, cut)) == sorted(
                        e for batch in batches[b:] for e in batch
                    )

        check()
        cluster.restart()
        assert _time_entries(cluster, s0.name) == entries
        check()
    finally:
        cluster.shutdown()
