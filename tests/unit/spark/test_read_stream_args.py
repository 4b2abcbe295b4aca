"""``pr.spark.read_stream``'s ``start``/``end`` aliases of ``start_cut``/``end_cut``."""

from __future__ import annotations

import pytest

import pravega_ray as pr
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.spark.stream_reader import cut_alias

CUT = pr.StreamCut("s", "a", {0: 0})


def test_the_alias_stands_in_for_the_cut() -> None:
    assert cut_alias("start", None, CUT) is CUT
    assert cut_alias("start", CUT, None) is CUT
    assert cut_alias("end", None, None) is None


def test_both_spellings_of_one_bound_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="start_cut or start"):
        cut_alias("start", CUT, CUT)
