from __future__ import annotations

import pytest

from pravega_ray.client.reader_group_state import ReaderGroupState
from pravega_ray.errors import IllegalStateError

pytestmark = pytest.mark.timeout(10)


def test_segments_are_shared_fairly_and_handed_over_at_the_release_offset() -> None:
    state = ReaderGroupState.new("sc", "rg", ["sc/st"], ["a", "b", "c"])
    state.add_reader("r1")
    first = state.sync("r1", {}, [])
    assert first.acquired == {"a": 0, "b": 0, "c": 0}
    state.add_reader("r2")
    assert state.sync("r2", {}, []).acquired == {}
    ask = state.sync("r1", {"a": 10, "b": 20, "c": 30}, [])
    assert ask.release_count == 1
    state.release("r1", "c", 35)
    assert state.sync("r2", {}, []).acquired == {"c": 35}
    state.remove_reader("r1", {"a": 11, "b": 21})
    assert state.unassigned == {"a": 11, "b": 21}
    assert state.sync("r2", {}, ["c"]).acquired == {"a": 11, "b": 21}
    assert state.completed == {"c"}


def test_releasing_a_segment_not_owned_is_an_illegal_state() -> None:
    state = ReaderGroupState.new("sc", "rg", ["sc/st"], ["a"])
    state.add_reader("r1")
    with pytest.raises(IllegalStateError):
        state.release("r1", "a", 0)
    with pytest.raises(IllegalStateError):
        state.sync("ghost", {}, [])


def test_state_round_trips_through_a_dict() -> None:
    state = ReaderGroupState.new("sc", "rg", ["sc/st"], ["a", "b"])
    state.add_reader("r1")
    state.sync("r1", {}, [])
    assert ReaderGroupState.from_dict(state.to_dict()) == state
