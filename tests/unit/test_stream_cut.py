"""StreamCut: serialized form (stable across versions), UNBOUNDED, order, bad input."""

from __future__ import annotations

import pickle

import pytest

import pravega_ray as pr

E1 = 1 << 32  # the first segment id of epoch 1


def test_base64_round_trip_and_stable_format() -> None:
    cut = pr.StreamCut("iot", "sensors", {0: 10, 1: 0, E1 | 2: 7})
    assert pr.StreamCut.from_base64(cut.to_base64()) == cut
    # Written by version 1: must stay readable by every later version.
    v1 = "eyJwb3NpdGlvbnMiOltbMSw1XSxbMiwwXV0sInNjb3BlIjoiYSIsInN0cmVhbSI6ImIiLCJ2IjoxfQ=="
    assert pr.StreamCut.from_base64(v1) == pr.StreamCut("a", "b", {1: 5, 2: 0})


def test_unbounded_round_trips_and_pickles() -> None:
    u = pr.StreamCut.UNBOUNDED
    assert pr.StreamCut.from_base64(u.to_base64()) is u
    assert pickle.loads(pickle.dumps(u)) == u and pickle.loads(pickle.dumps(u)).is_unbounded
    assert repr(u) == "StreamCut.UNBOUNDED"
    with pytest.raises(pr.InvalidArgumentError):
        _ = u <= pr.StreamCut("a", "b", {0: 0})


@pytest.mark.parametrize(
    "text",
    ["", "not base64!", "bnVsbA==", "e30=", "eyJ2IjoyfQ==", 5, None],
)
def test_from_base64_refuses_anything_else(text: object) -> None:
    with pytest.raises(pr.InvalidArgumentError):
        pr.StreamCut.from_base64(text)  # type: ignore[arg-type]


@pytest.mark.parametrize("positions", [{0: -1}, {-1: 0}, {0: 1.5}, {0: True}, [(0, 1)], {"0": 1}])
def test_bad_positions_are_refused(positions: object) -> None:
    with pytest.raises(pr.InvalidArgumentError):
        pr.StreamCut("a", "b", positions)  # type: ignore[arg-type]


def test_order_on_the_same_segments_is_by_offset() -> None:
    a = pr.StreamCut("a", "b", {0: 5, 1: 5})
    b = pr.StreamCut("a", "b", {0: 6, 1: 5})
    c = pr.StreamCut("a", "b", {0: 4, 1: 9})
    assert a <= b and a < b and b > a and b >= a and not b <= a
    assert a <= a and not a < a
    assert not a <= c and not c <= a  # ahead in one segment, behind in the other


def test_order_across_a_scale_uses_epochs() -> None:
    before = pr.StreamCut("a", "b", {0: 100, 1: 100})
    after = pr.StreamCut("a", "b", {0: 100, E1 | 2: 0})  # segment 1 replaced by 2 in epoch 1
    assert before < after and not after <= before
    mixed = pr.StreamCut("a", "b", {E1 | 3: 0, 1: 0})  # 0 replaced by 3, 1 still at 0
    assert not mixed <= after and not after <= mixed


def test_cuts_of_other_streams_do_not_compare() -> None:
    with pytest.raises(pr.InvalidArgumentError):
        _ = pr.StreamCut("a", "b", {0: 0}) <= pr.StreamCut("a", "c", {0: 0})
    assert pr.StreamCut("a", "b", {0: 0}) != pr.StreamCut("a", "c", {0: 0})
