from __future__ import annotations

import pytest

from pravega_ray.contracts.reader_group_state import ReaderGroupState
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
    assert state.completed == set()  # no successor waits for it: not kept
    assert state.sync("r2", "s2", {}, ["c"]).owned == {"a": 11, "b": 21}  # a repeat: nothing


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


# --- across epochs ---------------------------------------------------------------------------
SPLIT = {"a": {"a1": ["a"], "a2": ["a"]}}
MERGE = {"a": {"ab": ["a", "b"]}, "b": {"ab": ["a", "b"]}}


def test_split_successors_are_handed_out_once_their_predecessor_completes() -> None:
    state = ReaderGroupState.new("sc", "rg", ["sc/st"], ["a", "b"])
    state.add_reader("r1", "s1")
    assert state.sync("r1", "s1", {}, []).owned == {"a": 0, "b": 0}
    lookups: list[str] = []

    def successors(segment: str) -> dict[str, list[str]]:
        lookups.append(segment)
        return SPLIT.get(segment, {})

    answer = state.sync("r1", "s1", {"b": 4}, ["a"], successors)
    assert answer.owned == {"b": 4, "a1": 0, "a2": 0}
    assert state.completed == set() and state.future == {}  # its successors are out: dropped
    # A repeated report (a lost reply) looks nothing up and changes nothing.
    assert state.sync("r1", "s1", {}, ["a"], successors).owned == answer.owned
    assert lookups == ["a"]


def test_merge_successor_waits_until_all_predecessors_complete() -> None:
    state = ReaderGroupState.new("sc", "rg", ["sc/st"], ["a", "b"])
    state.add_reader("r1", "s1")
    state.add_reader("r2", "s2")
    assert state.sync("r1", "s1", {}, []).owned == {"a": 0}
    assert state.sync("r2", "s2", {}, []).owned == {"b": 0}
    assert state.sync("r1", "s1", {}, ["a"], MERGE.__getitem__).owned == {}
    assert state.future == {"ab": ["a", "b"]} and state.unassigned == {}
    assert state.completed == {"a"}  # kept: ab waits for it
    assert state.sync("r1", "s1", {}, []).owned == {}  # not before b is done
    assert state.sync("r2", "s2", {}, ["b"], MERGE.__getitem__).owned == {"ab": 0}
    assert state.future == {} and state.completed == set()  # nothing waits: both dropped


def test_future_segments_stay_with_the_group_when_readers_go() -> None:
    state = ReaderGroupState.new("sc", "rg", ["sc/st"], ["a", "b"])
    state.add_reader("r1", "s1")
    state.add_reader("r2", "s2")
    state.sync("r1", "s1", {}, [])
    state.sync("r2", "s2", {}, [])
    state.sync("r1", "s1", {}, ["a"], MERGE.__getitem__)
    assert state.reader_offline("r2", {"b": 7})  # died holding the other predecessor
    assert state.remove_reader("r1", "s1", None)
    assert state.future == {"ab": ["a", "b"]} and state.unassigned == {"b": 7}
    state.add_reader("r3", "s3")
    assert state.sync("r3", "s3", {}, []).owned == {"b": 7}
    assert state.sync("r3", "s3", {}, ["b"], MERGE.__getitem__).owned == {"ab": 0}


def test_a_completion_of_a_segment_not_owned_is_ignored() -> None:
    state = ReaderGroupState.new("sc", "rg", ["sc/st"], ["a", "b"])
    state.add_reader("r1", "s1")
    state.add_reader("r2", "s2")
    state.sync("r1", "s1", {}, [])
    state.sync("r2", "s2", {}, [])
    assert state.sync("r2", "s2", {}, ["a", "zzz"], MERGE.__getitem__).owned == {"b": 0}
    assert state.completed == set() and state.future == {}
    assert state.sync("r1", "s1", {}, []).owned == {"a": 0}


def test_state_with_futures_round_trips_and_older_layouts_load() -> None:
    state = ReaderGroupState.new("sc", "rg", ["sc/st"], ["a", "b"])
    state.add_reader("r1", "s1")
    state.sync("r1", "s1", {}, [])
    state.sync("r1", "s1", {}, ["a"], MERGE.__getitem__)
    stored = state.to_dict()
    assert stored["future"] == {"ab": ["a", "b"]}
    assert ReaderGroupState.from_dict(stored) == state
    older = dict(stored)
    del older["future"]  # a record from before epochs
    assert ReaderGroupState.from_dict(older).future == {}


@pytest.mark.parametrize(
    "change",
    [
        {"future": {"ab": ["a"]}, "unassigned": {"ab": 0}},  # held twice
        {"future": {"ab": []}},  # no predecessors
        {"future": {"ab": "a"}},  # not a list
        {"future": ["ab"]},  # not a dict
        {"completed": ["b"]},  # completed and held
    ],
)
def test_damaged_future_records_are_refused(change: dict[str, object]) -> None:
    state = ReaderGroupState.new("sc", "rg", ["sc/st"], ["a", "b"])
    stored = {**state.to_dict(), **change}
    with pytest.raises(ValueError):
        ReaderGroupState.from_dict(stored)


@pytest.mark.timeout(60)  # 10,000 scales: about 1 s here, 10x that on a loaded CI machine
def test_the_state_stays_as_large_as_the_live_segments_over_ten_thousand_scales() -> None:
    """Splits and merges, 10,000 of them, under a group of two readers that read every
    sealed segment to its end: the state (completed, future and held segments) stays about
    as large as the live segments, not as the streams' history."""
    import json
    import random

    rng = random.Random(26)
    live = ["s0", "s1"]  # in key order
    successors: dict[str, dict[str, list[str]]] = {}
    state = ReaderGroupState.new("sc", "rg", ["sc/st"], list(live))
    sessions = {"r1": "s1", "r2": "s2"}
    for reader, session in sessions.items():
        state.add_reader(reader, session)
    names = 2
    sizes: list[int] = []

    def catch_up() -> None:
        for _ in range(20):
            settled = True
            for reader, session in sessions.items():
                owned = state.sync(reader, session, {}, []).owned
                sealed = [s for s in owned if s not in live]
                if sealed:
                    settled = False
                    state.sync(reader, session, {}, sealed, lambda s: successors.get(s, {}))
            if settled and not state.future and not state.unassigned:
                return
        raise AssertionError(f"the group did not catch up: {state.future}, {state.unassigned}")

    for scale in range(10_000):
        if len(live) < 3 or (len(live) < 6 and rng.random() < 0.5):
            i = rng.randrange(len(live))
            old, new = live[i], [f"s{names}", f"s{names + 1}"]
            names += 2
            successors[old] = {n: [old] for n in new}
            live[i : i + 1] = new
        else:
            i = rng.randrange(len(live) - 1)
            pair, new_name = live[i : i + 2], f"s{names}"
            names += 1
            for old in pair:
                successors[old] = {new_name: list(pair)}
            live[i : i + 2] = [new_name]
        catch_up()
        held = len(state.completed) + len(state.future) + len(state.unassigned)
        held += sum(len(o) for o in state.assigned.values())
        assert held <= 3 * len(live), (scale, held, len(live))
        if scale in (99, 9_999):
            sizes.append(len(json.dumps(state.to_dict())))
    assert sizes[1] < 1.5 * sizes[0], sizes  # flat: only the names' digits grew
