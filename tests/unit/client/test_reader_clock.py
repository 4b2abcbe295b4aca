"""The reader's seams: its timeouts and sync interval run on the injected clock, and it
sleeps through the injected scheduler."""

from __future__ import annotations

import time

import pytest

import pravega_ray as pr
from pravega_ray import constants
from pravega_ray.client.reader import EventStreamReader
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.timing import ManualClock, ManualThreadScheduler
from tests.unit.client.test_reader_group_synchronizer import StateCallFaults

pytestmark = pytest.mark.timeout(30)


def test_read_next_event_times_out_on_the_injected_clock_without_waiting() -> None:
    cluster = InProcessCluster(container_count=1)
    try:
        mgr = cluster.stream_manager()
        mgr.create_scope("sc")
        mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
        cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
        owner = cluster.create_reader("owner", "sc", "rg")
        assert owner.read_next_event(timeout_s=0.05) is None  # it owns the one segment
        clock = ManualClock()
        scheduler = ManualThreadScheduler(clock)
        counted = StateCallFaults(cluster)  # no faults: it counts the state reads
        reader: EventStreamReader[bytes] = EventStreamReader(
            "r",
            "sc",
            "rg",
            pr.BytesSerializer(),
            cluster.core,
            SegmentStoreClient(counted),
            clock=clock,
            scheduler=scheduler,
        )
        started = time.monotonic()
        assert reader.read_next_event(timeout_s=30.0) is None
        assert time.monotonic() - started < 5.0  # 30 s of the manual clock, not of real time
        assert sum(scheduler.slept_s) == pytest.approx(30.0)
        assert max(scheduler.slept_s) <= constants.READER_GROUP_SYNC_INTERVAL_S
        assert clock.monotonic() == pytest.approx(30.0)
        # No segment owned: it syncs (reads the group's state) each turn.
        assert counted.calls["table_get"] >= len(scheduler.slept_s)
    finally:
        cluster.shutdown()
