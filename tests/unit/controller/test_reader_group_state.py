from __future__ import annotations

import pytest

from pravega_ray.controller.reader_group_state import ReaderGroupState
from pravega_ray.errors import ReaderAlreadyExistsError, ReaderNotInGroupError

pytestmark = pytest.mark.timeout(10)


def test_segments_are_shared_fairly_and_handed_over_at_the_release_offset() -> None:
    state = ReaderGroupState.new("sc", "rg", ["sc/st"], ["a", "b", "c"])
    state.add_reader("r1", "s1")
    first = state.sync("r1", "s1", {}, [])
    assert first.owned == {"a": 0, "b": 0, "c": 0}
    state.add_reader("r2", "s2")
    assert state.sync("r2", "s2", {}, []).owned == {}
    ask = state.sync("r1", "s1", {"a": 10, "b": 20, "c": 30}, [])
    assert ask.release_count == 1
    assert state.release("r1", "s1", "c", 35)
    assert state.sync("r2", "s2", {}, []).owned == {"c": 35}
    assert state.remove_reader("r1", "s1", {"a": 11, "b": 21})
    assert state.unassigned == {"a": 11, "b": 21}
    assert state.sync("r2", "s2", {}, ["c"]).owned == {"a": 11, "b": 21}
    assert state.completed == {"c"}


def test_a_reader_id_online_is_refused_until_declared_offline() -> None:
    state = ReaderGroupState.new("sc", "rg", ["sc/st"], ["a", "b"])
    state.add_reader("dup", "first")
    state.sync("dup", "first", {"a": 0}, [])
    state.add_reader("dup", "first")  # the same session again: a repeated join, a no-op
    with pytest.raises(ReaderAlreadyExistsError):
        state.add_reader("dup", "second")
    state.sync("dup", "first", {"a": 7, "b": 9}, [])
    assert state.reader_offline("dup", {"a": 8})
    assert state.unassigned == {"a": 8, "b": 9}
    state.add_reader("dup", "second")
    # The first reader object, still running, can no longer touch anything.
    for call in (
        lambda: state.sync("dup", "first", {}, []),
        lambda: state.release("dup", "first", "a", 100),
    ):
        with pytest.raises(ReaderNotInGroupError):
            call()
    assert not state.remove_reader("dup", "first", {"a": 100})
    assert state.sync("dup", "second", {}, []).owned == {"a": 8, "b": 9}


def test_repeated_calls_after_a_lost_reply_change_nothing_more() -> None:
    state = ReaderGroupState.new("sc", "rg", ["sc/st"], ["a", "b"])
    state.add_reader("r1", "s1")
    assert state.sync("r1", "s1", {}, []).owned == {"a": 0, "b": 0}
    assert state.sync("r1", "s1", {}, []).owned == {"a": 0, "b": 0}  # the reply was lost
    assert state.release("r1", "s1", "a", 5)
    assert not state.release("r1", "s1", "a", 5)  # repeated: a no-op, not an error
    assert state.unassigned == {"a": 5}
    assert state.remove_reader("r1", "s1", None)
    assert not state.remove_reader("r1", "s1", None)
    assert not state.reader_offline("ghost", None)
    with pytest.raises(ReaderNotInGroupError):
        state.sync("ghost", "x", {}, [])


def test_state_round_trips_through_a_dict() -> None:
    state = ReaderGroupState.new("sc", "rg", ["sc/st"], ["a", "b"])
    state.add_reader("r1", "s1")
    state.sync("r1", "s1", {}, [])
    assert ReaderGroupState.from_dict(state.to_dict()) == state
    legacy = state.to_dict()
    del legacy["sessions"]  # a record from before sessions
    old = ReaderGroupState.from_dict(legacy)
    with pytest.raises(ReaderAlreadyExistsError):
        old.add_reader("r1", "new")
