"""The time and scheduling seams (timing.py): manual time, and bad seams refused early."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.reader import EventStreamReader
from pravega_ray.client.writer import EventStreamWriter
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.timing import (
    SYSTEM_CLOCK,
    AsyncioScheduler,
    ManualClock,
    ManualThreadScheduler,
    check_clock,
    check_rng,
    check_scheduler,
    check_thread_scheduler,
)
from tests.checks import stable_id
from tests.containers import new_container

pytestmark = pytest.mark.timeout(30)

NOT_SEAMS: list[Any] = [None, "x", 5, float("nan"), object(), ManualClock, [], b"clock"]


def test_manual_clock_moves_only_forward_and_drags_wall_time() -> None:
    clock = ManualClock(start_s=10.0, wall_start_ms=1_000)
    clock.advance(1.5)
    assert (clock.monotonic(), clock.wall_time_ms()) == (11.5, 2_500)
    clock.set(20.0)
    assert clock.wall_time_ms() == 11_000
    with pytest.raises(ValueError):
        clock.advance(-0.1)
    with pytest.raises(ValueError):
        clock.set(19.0)
    assert clock.monotonic() == 20.0


def test_checks_accept_the_real_and_manual_seams() -> None:
    assert check_clock(SYSTEM_CLOCK) is SYSTEM_CLOCK
    assert isinstance(check_clock(ManualClock()), ManualClock)
    assert isinstance(check_scheduler(AsyncioScheduler()), AsyncioScheduler)
    assert isinstance(check_thread_scheduler(ManualThreadScheduler()), ManualThreadScheduler)
    assert check_rng(None) is None and isinstance(check_rng(random.Random(3)), random.Random)


@pytest.mark.parametrize("value", NOT_SEAMS, ids=stable_id)
def test_checks_refuse_what_is_not_a_seam(value: Any) -> None:
    for check in (check_clock, check_scheduler, check_thread_scheduler):
        with pytest.raises(pr.InvalidArgumentError):
            check(value)
    if value is not None:
        with pytest.raises(pr.InvalidArgumentError, match="rng"):
            check_rng(value)


@pytest.fixture(scope="module")
def cluster() -> Iterator[InProcessCluster]:
    c = InProcessCluster(container_count=2)
    c.stream_manager().create_scope("sc")
    c.stream_manager().create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    c.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    yield c
    c.shutdown()


def _pumps() -> int:
    return sum(t.name.startswith("pravega-writer") for t in threading.enumerate())


@pytest.mark.parametrize(
    "seams", [{"clock": "x"}, {"rng": 5}, {"scheduler": object()}, {"clock": None}], ids=stable_id
)
def test_writer_refuses_a_bad_seam_before_starting_anything(
    cluster: InProcessCluster, seams: dict[str, Any]
) -> None:
    before = _pumps()
    with pytest.raises(pr.InvalidArgumentError):
        EventStreamWriter(
            "sc", "st", pr.BytesSerializer(), cluster._controller, cluster._segments, **seams
        )
    assert _pumps() == before


@pytest.mark.parametrize("seams", [{"clock": 1.0}, {"scheduler": "threads"}], ids=stable_id)
def test_reader_refuses_a_bad_seam_before_joining_its_group(
    cluster: InProcessCluster, seams: dict[str, Any]
) -> None:
    with pytest.raises(pr.InvalidArgumentError):
        EventStreamReader(
            "r1", "sc", "rg", pr.BytesSerializer(), cluster._controller, cluster._segments, **seams
        )
    assert cluster.reader_group("sc", "rg").get_online_readers() == []


def test_builder_refuses_a_bad_clock_or_scheduler() -> None:
    with pytest.raises(pr.InvalidArgumentError, match="clock"):
        new_container(clock="now", recover=False)
    with pytest.raises(pr.InvalidArgumentError, match="scheduler"):
        new_container(scheduler=ManualThreadScheduler(), recover=False)
