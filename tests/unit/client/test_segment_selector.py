"""The segment selector: routing keys to key ranges, the key cache, random choice."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from pravega_ray.client import segment_selector
from pravega_ray.client.segment_selector import SegmentSelector
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.naming import routing_key_hash

pytestmark = pytest.mark.timeout(30)

QUARTERS = [(0.0, "s0"), (0.25, "s1"), (0.5, "s2"), (0.75, "s3")]


def expected_segment(key: str) -> str:
    return f"s{int(routing_key_hash(key) * 4)}"


def test_select_maps_a_key_to_the_segment_whose_range_holds_its_hash() -> None:
    selector = SegmentSelector(QUARTERS)
    keys = [f"key-{i}" for i in range(200)]
    assert [selector.select(k) for k in keys] == [expected_segment(k) for k in keys]
    assert len({selector.select(k) for k in keys}) == 4


def test_select_with_segments_out_of_order_sorts_them_by_range() -> None:
    selector = SegmentSelector(list(reversed(QUARTERS)))
    assert selector.segments == ["s0", "s1", "s2", "s3"]
    assert selector.select("k") == expected_segment("k")


def test_select_caches_each_key_in_place() -> None:
    selector = SegmentSelector(QUARTERS)
    cache = selector.key_cache
    segment = selector.select("sensor-7")
    assert cache == {"sensor-7": segment} and selector.key_cache is cache


def test_select_with_a_full_cache_empties_it_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segment_selector, "ROUTING_KEY_CACHE_ENTRIES_MAX", 3)
    selector = SegmentSelector(QUARTERS)
    for key in ("a", "b", "c", "d"):
        selector.select(key)
    assert list(selector.key_cache) == ["d"]


@pytest.mark.parametrize("key", [["x"], {"x": 1}, b"k", 5, "\ud800", "a\udfffb"])
def test_select_with_a_bad_key_raises_invalid_argument_and_caches_nothing(key: Any) -> None:
    selector = SegmentSelector(QUARTERS)
    with pytest.raises(InvalidArgumentError, match="routing_key"):
        selector.select(key)
    assert selector.key_cache == {}


def test_select_without_a_key_chooses_with_the_injected_rng() -> None:
    first = SegmentSelector(QUARTERS, random.Random(7))
    second = SegmentSelector(QUARTERS, random.Random(7))
    choices = [first.select(None) for _ in range(400)]
    assert choices == [second.select(None) for _ in range(400)]
    assert set(Counter(choices)) == {"s0", "s1", "s2", "s3"}
    assert first.key_cache == {}


def test_select_without_a_key_or_rng_follows_the_random_module_seed() -> None:
    random.seed(11)
    choices = [SegmentSelector(QUARTERS).select(None) for _ in range(50)]
    random.seed(11)
    assert choices == [SegmentSelector(QUARTERS).select(None) for _ in range(50)]


def test_set_segments_replaces_the_table_and_forgets_cached_keys() -> None:
    selector = SegmentSelector([(0.0, "old")])
    cache = selector.key_cache
    assert selector.select("k") == "old"
    # As a scale would: the sealed segment's range is now split between two successors.
    selector.set_segments([(0.0, "low"), (0.5, "high")])
    assert selector.key_cache is cache and cache == {}
    assert selector.select("k") == ("low" if routing_key_hash("k") < 0.5 else "high")
    assert selector.segments == ["low", "high"]


# --- successors in a sealed segment's place ---------------------------------------------------


def test_replace_splits_a_sealed_range_among_its_successors() -> None:
    selector = SegmentSelector(QUARTERS)
    assert selector.select("key-1") == expected_segment("key-1")  # cached
    selector.replace("s1", [(0.25, 0.4, "a"), (0.4, 0.5, "b")])
    assert selector.key_cache == {}
    assert selector.ranges == [
        (0.0, 0.25, "s0"),
        (0.25, 0.4, "a"),
        (0.4, 0.5, "b"),
        (0.5, 0.75, "s2"),
        (0.75, 1.0, "s3"),
    ]
    for key in (f"key-{i}" for i in range(300)):
        point = routing_key_hash(key)
        want = "a" if 0.25 <= point < 0.4 else "b" if 0.4 <= point < 0.5 else expected_segment(key)
        assert selector.select(key) == want


def test_replace_of_merged_segments_routes_both_ranges_to_one_successor() -> None:
    selector = SegmentSelector(QUARTERS)
    # s1 and s2 merged into m, which covers more than either; each keeps only its own range.
    selector.replace("s1", [(0.25, 0.75, "m")])
    assert selector.ranges[1] == (0.25, 0.5, "m")
    selector.replace("s2", [(0.25, 0.75, "m")])
    assert selector.ranges == [(0.0, 0.25, "s0"), (0.25, 0.75, "m"), (0.75, 1.0, "s3")]
    assert selector.segments == ["s0", "m", "s3"]
    # A successor of the merged one, after a later split: only the part it covers.
    selector.replace("m", [(0.25, 0.6, "x"), (0.6, 0.75, "y")])
    assert [s for _, _, s in selector.ranges] == ["s0", "x", "y", "s3"]


def test_replace_ignores_successors_outside_the_sealed_range_and_unknown_segments() -> None:
    selector = SegmentSelector(QUARTERS)
    selector.replace("s0", [(0.0, 0.25, "a"), (0.25, 0.5, "elsewhere")])
    assert [s for _, _, s in selector.ranges] == ["a", "s1", "s2", "s3"]
    before = selector.ranges
    selector.replace("gone", [(0.0, 1.0, "z")])
    assert selector.ranges == before


@pytest.mark.parametrize(
    "successors",
    [
        [(0.25, 0.3, "a"), (0.35, 0.5, "b")],  # a gap
        [(0.25, 0.45, "a")],  # short of the end
        [(0.3, 0.5, "a")],  # short of the start
    ],
)
def test_replace_with_successors_that_do_not_cover_the_range_changes_nothing(successors) -> None:  # type: ignore[no-untyped-def]
    selector = SegmentSelector(QUARTERS)
    with pytest.raises(AssertionError):  # InvariantViolation: the controller guarantees cover
        selector.replace("s1", successors)
    assert selector.ranges == SegmentSelector(QUARTERS).ranges


def test_random_choice_counts_a_segment_with_two_ranges_once() -> None:
    selector = SegmentSelector([(0.0, "a"), (0.5, "b")], random.Random(3))
    selector.replace("b", [(0.0, 1.0, "a")])  # a now owns both halves
    assert selector.ranges == [(0.0, 1.0, "a")]
    selector = SegmentSelector([(0.0, "a"), (0.25, "b"), (0.5, "c")], random.Random(3))
    selector.replace("c", [(0.5, 1.0, "a")])  # a owns two ranges, not neighbours
    assert selector.segments == ["a", "b"]
    counts = Counter(selector.select(None) for _ in range(2000))
    assert 800 < counts["a"] < 1200 and 800 < counts["b"] < 1200
    assert selector.choose(["x"]) == "x"
