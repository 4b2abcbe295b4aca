"""The one percentile every benchmark uses (benchmarks/common.py): linear interpolation between
the closest ranks, numpy's default."""

from __future__ import annotations

import random
import statistics

import numpy
import pytest

from benchmarks.common import percentile

pytestmark = pytest.mark.timeout(30)


def test_percentile_of_one_value_is_that_value_for_every_q() -> None:
    for q in (0.0, 0.01, 0.5, 0.99, 1.0):
        assert percentile([7.5], q) == 7.5


def test_percentile_p0_is_the_minimum_and_p100_the_maximum() -> None:
    values = [3.0, -1.0, 9.5, 4.0, 0.25]
    assert percentile(values, 0.0) == -1.0
    assert percentile(values, 1.0) == 9.5


def test_percentile_p50_of_an_even_count_is_the_mean_of_the_middle_two() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert percentile([1, 2], 0.5) == 1.5


def test_percentile_p50_of_an_odd_count_is_the_middle_value() -> None:
    assert percentile([5.0, 1.0, 3.0], 0.5) == 3.0


def test_percentile_interpolates_between_the_closest_ranks() -> None:
    # Ranks 0..4; q = 0.9 sits at rank 3.6: 40 + 0.6 * (50 - 40).
    assert percentile([10.0, 20.0, 30.0, 40.0, 50.0], 0.9) == pytest.approx(46.0)
    # 100 values 1..100: p99 sits at rank 98.01, between 99 and 100.
    assert percentile([float(v) for v in range(1, 101)], 0.99) == pytest.approx(99.01)


def test_percentile_matches_numpy_and_the_median_on_random_samples() -> None:
    rng = random.Random(22)
    for n in (1, 2, 3, 10, 101, 1000):
        values = [rng.expovariate(1.0) for _ in range(n)]
        assert percentile(values, 0.5) == pytest.approx(statistics.median(values))
        for q in (0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0):
            assert percentile(values, q) == pytest.approx(numpy.percentile(values, 100 * q))


def test_percentile_leaves_its_input_unsorted() -> None:
    values = [3.0, 1.0, 2.0]
    percentile(values, 0.5)
    assert values == [3.0, 1.0, 2.0]


def test_percentile_of_no_values_raises() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.5)


@pytest.mark.parametrize("q", [-0.01, 1.01, 50.0])
def test_percentile_q_outside_0_1_raises(q: float) -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        percentile([1.0, 2.0], q)
