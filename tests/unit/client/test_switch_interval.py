"""While a writer configured so is open, the process's thread switch interval is at most its
``WriterConfig.switch_interval_s`` (opt-in; pravega_ray/client/switch_interval.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

import pravega_ray as pr
from pravega_ray.client import switch_interval
from pravega_ray.client.switch_interval import hold_switch_interval, release_switch_interval
from pravega_ray.constants import WRITER_SWITCH_INTERVAL_S
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(60)

PYTHON_DEFAULT_S = 0.005


@pytest.fixture
def fresh() -> Iterator[None]:
    """No holder and Python's default interval; everything as it was afterwards (a writer
    another test left open in this process must not decide these tests)."""
    saved = (switch_interval._holders, switch_interval._previous, switch_interval._lowered_to)
    interval = sys.getswitchinterval()
    switch_interval._holders, switch_interval._previous, switch_interval._lowered_to = 0, None, None
    sys.setswitchinterval(PYTHON_DEFAULT_S)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        switch_interval._holders, switch_interval._previous, switch_interval._lowered_to = saved


def test_lowered_while_held_and_set_back_by_the_last_release(fresh: None) -> None:
    hold_switch_interval(0.001)
    assert sys.getswitchinterval() == pytest.approx(0.001)
    hold_switch_interval(0.001)
    release_switch_interval()
    assert sys.getswitchinterval() == pytest.approx(0.001), "one holder is left"
    release_switch_interval()
    assert sys.getswitchinterval() == pytest.approx(PYTHON_DEFAULT_S)
    release_switch_interval()  # one release too many changes nothing
    assert sys.getswitchinterval() == pytest.approx(PYTHON_DEFAULT_S)


def test_a_shorter_interval_already_set_is_left_alone(fresh: None) -> None:
    sys.setswitchinterval(0.0002)
    hold_switch_interval(0.001)
    assert sys.getswitchinterval() == pytest.approx(0.0002)
    release_switch_interval()
    assert sys.getswitchinterval() == pytest.approx(0.0002)


def test_an_interval_the_program_set_meanwhile_is_not_overwritten(fresh: None) -> None:
    hold_switch_interval(0.001)
    sys.setswitchinterval(0.002)  # the program's own choice, while a writer is open
    release_switch_interval()
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_the_lowest_of_several_writers_wins_and_the_first_value_comes_back(fresh: None) -> None:
    hold_switch_interval(0.002)
    hold_switch_interval(0.001)
    assert sys.getswitchinterval() == pytest.approx(0.001)
    release_switch_interval()
    release_switch_interval()
    assert sys.getswitchinterval() == pytest.approx(PYTHON_DEFAULT_S)


@pytest.fixture
def cluster() -> Iterator[InProcessCluster]:
    c = InProcessCluster(container_count=1)
    c.stream_manager().create_scope("sc")
    c.stream_manager().create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    yield c
    c.shutdown()


def test_a_writer_configured_so_holds_the_interval_while_open(
    fresh: None, cluster: InProcessCluster
) -> None:
    config = pr.WriterConfig(switch_interval_s=WRITER_SWITCH_INTERVAL_S)
    writer = cluster.create_writer("sc", "st", pr.BytesSerializer(), config=config)
    assert sys.getswitchinterval() == pytest.approx(WRITER_SWITCH_INTERVAL_S)
    writer.write_event(b"x").result(timeout=10)
    writer.close()
    assert sys.getswitchinterval() == pytest.approx(PYTHON_DEFAULT_S)
    writer.close()  # closing again releases nothing more
    assert switch_interval._holders == 0


def test_by_default_a_writer_leaves_the_interval_alone(
    fresh: None, cluster: InProcessCluster
) -> None:
    """Opt-in: the interval is the whole process's (the module docstring says what a 1 ms
    default broke)."""
    assert pr.WriterConfig().switch_interval_s is None
    with cluster.create_writer("sc", "st", pr.BytesSerializer()) as writer:
        assert sys.getswitchinterval() == pytest.approx(PYTHON_DEFAULT_S)
        writer.write_event(b"x").result(timeout=10)
    assert switch_interval._holders == 0
