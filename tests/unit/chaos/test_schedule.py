"""The chaos schedule is a pure function of its seed, fits every fault kind, and refuses
counts that do not fit (chaos/schedule.py)."""

from __future__ import annotations

import math

import pytest

from chaos.schedule import (
    CONTAINER_KILL,
    CONTROLLER_ACTORS,
    NODE_ADD,
    NODE_REMOVE,
    READER_KILL,
    ZOMBIE,
    build_schedule,
    per_ten_minutes,
)
from pravega_ray.errors import InvalidArgumentError


def test_ten_minutes_has_the_issues_counts_and_a_short_run_every_kind_once() -> None:
    ten = per_ten_minutes(600)
    assert ten[CONTAINER_KILL] == 20 and ten[NODE_REMOVE] == ten[NODE_ADD] == ten[ZOMBIE] == 1
    assert all(ten[f"kill:{actor}"] == 5 for actor in CONTROLLER_ACTORS)
    short = per_ten_minutes(90)
    assert set(short) == set(ten) and all(n >= 1 for n in short.values())


@pytest.mark.parametrize("seconds", [90.0, 120.0, 600.0])
def test_the_same_seed_gives_the_same_schedule_spread_over_the_run(seconds: float) -> None:
    counts = per_ten_minutes(seconds)
    first = build_schedule(7, seconds, counts)
    assert first == build_schedule(7, seconds, counts)
    assert first != build_schedule(8, seconds, counts)
    assert len(first) == sum(counts.values())
    times = [f.at_s for f in first]
    assert times == sorted(times) and times[0] >= 10.0 and times[-1] <= seconds - 10.0
    kinds = [f.kind for f in first]
    assert kinds.index(NODE_REMOVE) < kinds.index(NODE_ADD)
    assert kinds.count(READER_KILL) == counts[READER_KILL]


def test_faults_keep_their_minimum_gap() -> None:
    schedule = build_schedule(3, 90.0, per_ten_minutes(90.0), min_gap_s=2.0)
    # Each fault sits in its own slot, at most `slot - min_gap` into it.
    slot = 70.0 / len(schedule)
    for i, fault in enumerate(schedule):
        assert 10.0 + i * slot <= fault.at_s <= 10.0 + (i + 1) * slot - 2.0 + 1e-9


@pytest.mark.parametrize(
    ("seed", "seconds", "counts"),
    [
        (True, 60.0, {}),
        ("1", 60.0, {}),
        (1, math.nan, {}),
        (1, -5.0, {}),
        (1, 60.0, {"x": -1}),
        (1, 30.0, {CONTAINER_KILL: 100}),  # does not fit
    ],
)
def test_bad_arguments_are_refused(seed: object, seconds: float, counts: dict[str, int]) -> None:
    with pytest.raises(InvalidArgumentError):
        build_schedule(seed, seconds, counts)  # type: ignore[arg-type]
