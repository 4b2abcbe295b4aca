"""The reader's seams: its timeouts and sync interval run on the injected clock, and it
sleeps through the injected scheduler."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray import constants
from pravega_ray.client.reader import EventStreamReader
from pravega_ray.timing import ManualClock, ManualThreadScheduler

pytestmark = pytest.mark.timeout(30)


class IdleGroupController:
    """A reader group that never gives its reader a segment; counts syncs."""

    def __init__(self) -> None:
        self.syncs = 0

    def reader_group_add_reader(self, scope: str, group: str, reader_id: str, session: str) -> str:
        return "group-id"

    def reader_group_sync(self, *args: Any, **kwargs: Any) -> Any:
        self.syncs += 1
        return SimpleNamespace(owned={}, release_count=0)


def test_read_next_event_times_out_on_the_injected_clock_without_waiting() -> None:
    clock = ManualClock()
    scheduler = ManualThreadScheduler(clock)
    controller = IdleGroupController()
    reader: EventStreamReader[bytes] = EventStreamReader(
        "r",
        "sc",
        "rg",
        pr.BytesSerializer(),
        controller,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]  # no segment is ever read
        clock=clock,
        scheduler=scheduler,
    )
    started = time.monotonic()
    assert reader.read_next_event(timeout_s=30.0) is None
    assert time.monotonic() - started < 5.0  # 30 s of the manual clock, not of real time
    assert sum(scheduler.slept_s) == pytest.approx(30.0)
    assert max(scheduler.slept_s) <= constants.READER_GROUP_SYNC_INTERVAL_S
    assert clock.monotonic() == pytest.approx(30.0)
    assert controller.syncs >= len(scheduler.slept_s)  # no segment owned: it syncs each turn
