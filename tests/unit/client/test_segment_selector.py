"""The segment selector: routing keys to key ranges by a stream's routing rule, the key
cache, random choice."""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from pravega_ray.client import segment_selector
from pravega_ray.client.segment_selector import SegmentSelector
from pravega_ray.contracts.records import KeyHash
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.naming import routing_key_hash
from pravega_ray.wire.routing import pravega_key_hash

pytestmark = pytest.mark.timeout(30)

QUARTERS = [(0.0, "s0"), (0.25, "s1"), (0.5, "s2"), (0.75, "s3")]
HASHES = {KeyHash.PRAVEGA: pravega_key_hash, KeyHash.LEGACY: routing_key_hash}

legacy = functools.partial(SegmentSelector, key_hash=KeyHash.LEGACY)
"""A selector with the legacy rule, for the tests about anything but the rule."""


def owner(rule: KeyHash, point: float, ranges: Sequence[tuple[float, float, str]]) -> str:
    """The segment owning ``point`` under ``rule``, found by a linear scan of ``ranges``
    (``(low, high, segment)``), independently of the selector's binary search."""
    if rule is KeyHash.PRAVEGA:  # (low, high]; 0.0 to the first
        return next(s for low, high, s in ranges if point <= high)
    return next(s for low, high, s in ranges if low <= point < high)


def expected_segment(key: str, rule: KeyHash = KeyHash.LEGACY) -> str:
    return owner(rule, HASHES[rule](key), SegmentSelector(QUARTERS, key_hash=rule).ranges)


@pytest.mark.parametrize("rule", list(KeyHash))
def test_select_maps_a_key_to_the_segment_whose_range_holds_its_hash(rule: KeyHash) -> None:
    selector = SegmentSelector(QUARTERS, key_hash=rule)
    keys = [f"key-{i}" for i in range(300)]
    chosen = [selector.select(k) for k in keys]
    assert chosen == [expected_segment(k, rule) for k in keys]
    assert chosen == [f"s{int(HASHES[rule](k) * 4)}" for k in keys]  # no key on a boundary
    assert len(set(chosen)) == 4


def test_select_by_the_two_rules_differs_for_most_keys() -> None:
    keys = [f"key-{i}" for i in range(300)]
    pravega = SegmentSelector(QUARTERS, key_hash=KeyHash.PRAVEGA)
    old = legacy(QUARTERS)
    assert pravega.key_hash is KeyHash.PRAVEGA and old.key_hash is KeyHash.LEGACY
    differing = sum(pravega.select(k) != old.select(k) for k in keys)
    assert differing > 150  # about 3/4 of them: two unrelated hashes


def test_select_pravega_rule_matches_the_official_clients_values() -> None:
    # tests/unit/wire/test_routing.py: "hello" is 0.658716230571337 in the Rust client's own
    # unit test, so it belongs to the third quarter (0.5, 0.75].
    selector = SegmentSelector(QUARTERS, key_hash=KeyHash.PRAVEGA)
    assert selector.select("hello") == "s2"


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        # Pravega's rule: a segment owns (low, high], and 0.0 goes to the first one.
        (KeyHash.PRAVEGA, {0.0: "s0", 0.25: "s0", 0.5: "s1", 0.75: "s2", 0.9999: "s3"}),
        # The legacy rule: a segment owns [low, high).
        (KeyHash.LEGACY, {0.0: "s0", 0.25: "s1", 0.5: "s2", 0.75: "s3", 0.9999: "s3"}),
    ],
)
def test_segment_at_a_boundary_goes_to_the_side_the_rule_says(
    rule: KeyHash, expected: dict[float, str]
) -> None:
    selector = SegmentSelector(QUARTERS, key_hash=rule)
    assert {point: selector.segment_at(point) for point in expected} == expected
    assert selector.segment_at(0.25 + 2.0**-52) == "s1"
    assert selector.segment_at(0.25 - 2.0**-54) == "s0"
    smallest = 2.0**-52  # the smallest nonzero Pravega hash
    assert selector.segment_at(smallest) == "s0"


@pytest.mark.parametrize("rule", list(KeyHash))
def test_select_of_a_key_hashing_exactly_to_a_boundary(rule: KeyHash) -> None:
    """Ranges split exactly at a key's hash, as a scale may: Pravega's rule gives the key
    to the segment below the boundary, the legacy rule to the one above."""
    point = HASHES[rule]("sensor-17")
    selector = SegmentSelector([(0.0, "below"), (point, "above")], key_hash=rule)
    want = "below" if rule is KeyHash.PRAVEGA else "above"
    assert selector.select("sensor-17") == want
    selector.replace("below", [(0.0, point / 2, "x"), (point / 2, point, "y")])
    assert selector.select("sensor-17") == ("y" if rule is KeyHash.PRAVEGA else "above")


@pytest.mark.parametrize("bad", ["murmur", None, 3, ["pravega"]])
def test_selector_with_an_unknown_rule_raises_invalid_argument(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="key_hash"):
        SegmentSelector(QUARTERS, key_hash=bad)


def test_selector_takes_the_rule_by_its_stored_name() -> None:
    assert SegmentSelector(QUARTERS, key_hash="pravega").key_hash is KeyHash.PRAVEGA  # type: ignore[arg-type]


def test_select_with_segments_out_of_order_sorts_them_by_range() -> None:
    selector = legacy(list(reversed(QUARTERS)))
    assert selector.segments == ["s0", "s1", "s2", "s3"]
    assert selector.select("k") == expected_segment("k")


def test_select_caches_each_key_in_place() -> None:
    selector = legacy(QUARTERS)
    cache = selector.key_cache
    segment = selector.select("sensor-7")
    assert cache == {"sensor-7": segment} and selector.key_cache is cache


def test_select_with_a_full_cache_empties_it_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segment_selector, "ROUTING_KEY_CACHE_ENTRIES_MAX", 3)
    selector = legacy(QUARTERS)
    for key in ("a", "b", "c", "d"):
        selector.select(key)
    assert list(selector.key_cache) == ["d"]


@pytest.mark.parametrize("rule", list(KeyHash))
@pytest.mark.parametrize("key", [["x"], {"x": 1}, b"k", 5, "\ud800", "a\udfffb"])
def test_select_with_a_bad_key_raises_invalid_argument_and_caches_nothing(
    key: Any, rule: KeyHash
) -> None:
    selector = SegmentSelector(QUARTERS, key_hash=rule)
    with pytest.raises(InvalidArgumentError, match="routing_key"):
        selector.select(key)
    assert selector.key_cache == {}


def test_select_without_a_key_chooses_with_the_injected_rng() -> None:
    first = legacy(QUARTERS, random.Random(7))
    second = legacy(QUARTERS, random.Random(7))
    choices = [first.select(None) for _ in range(400)]
    assert choices == [second.select(None) for _ in range(400)]
    assert set(Counter(choices)) == {"s0", "s1", "s2", "s3"}
    assert first.key_cache == {}


def test_select_without_a_key_or_rng_follows_the_random_module_seed() -> None:
    random.seed(11)
    choices = [legacy(QUARTERS).select(None) for _ in range(50)]
    random.seed(11)
    assert choices == [legacy(QUARTERS).select(None) for _ in range(50)]


def test_set_segments_replaces_the_table_and_forgets_cached_keys() -> None:
    selector = legacy([(0.0, "old")])
    cache = selector.key_cache
    assert selector.select("k") == "old"
    # As a scale would: the sealed segment's range is now split between two successors.
    selector.set_segments([(0.0, "low"), (0.5, "high")])
    assert selector.key_cache is cache and cache == {}
    assert selector.select("k") == ("low" if routing_key_hash("k") < 0.5 else "high")
    assert selector.segments == ["low", "high"]


# --- successors in a sealed segment's place ---------------------------------------------------


@pytest.mark.parametrize("rule", list(KeyHash))
def test_replace_splits_a_sealed_range_among_its_successors(rule: KeyHash) -> None:
    selector = SegmentSelector(QUARTERS, key_hash=rule)
    assert selector.select("key-1") == expected_segment("key-1", rule)  # cached
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
        assert selector.select(key) == owner(rule, HASHES[rule](key), selector.ranges)


def test_replace_of_merged_segments_routes_both_ranges_to_one_successor() -> None:
    selector = legacy(QUARTERS)
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
    selector = legacy(QUARTERS)
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
    selector = legacy(QUARTERS)
    with pytest.raises(AssertionError):  # InvariantViolation: the controller guarantees cover
        selector.replace("s1", successors)
    assert selector.ranges == legacy(QUARTERS).ranges


def test_random_choice_counts_a_segment_with_two_ranges_once() -> None:
    selector = legacy([(0.0, "a"), (0.5, "b")], random.Random(3))
    selector.replace("b", [(0.0, 1.0, "a")])  # a now owns both halves
    assert selector.ranges == [(0.0, 1.0, "a")]
    selector = legacy([(0.0, "a"), (0.25, "b"), (0.5, "c")], random.Random(3))
    selector.replace("c", [(0.5, 1.0, "a")])  # a owns two ranges, not neighbours
    assert selector.segments == ["a", "b"]
    counts = Counter(selector.select(None) for _ in range(2000))
    assert 800 < counts["a"] < 1200 and 800 < counts["b"] < 1200
    assert selector.choose(["x"]) == "x"
