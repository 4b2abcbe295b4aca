"""The checkpoint part of a reader group's state, as pure logic: completion, readers leaving,
the freeze of segment moves while a reader has a checkpoint to pass, reset, persistence."""

from __future__ import annotations

import pytest

from pravega_ray.constants import CHECKPOINTS_OUTSTANDING_MAX
from pravega_ray.contracts.checkpoint_state import CHECKPOINTS_KEPT, CheckpointState
from pravega_ray.contracts.reader_group_state import ReaderGroupState
from pravega_ray.errors import CheckpointFailedError

pytestmark = pytest.mark.timeout(10)


def _state() -> ReaderGroupState:
    state = ReaderGroupState.new("sc", "g", ["sc/st"], {"a": 0, "b": 0, "c": 0})
    state.add_reader("r1", "s1")
    state.add_reader("r2", "s2")
    state.sync("r1", "s1", {}, [])
    state.sync("r2", "s2", {}, [])
    return state


def test_checkpoint_completes_when_every_reader_passed() -> None:
    state = _state()
    state.create_checkpoint("cp", False, 1)
    assert state.sync("r1", "s1", {}, []).checkpoint == "cp"
    state.checkpoint_passed("r1", "s1", "cp", {s: 5 for s in state.assigned["r1"]})
    assert state.checkpoints.get_completed("cp") is None
    state.checkpoint_passed("r1", "s1", "cp", {})  # a repeat: no-op
    state.reader_offline("r2", None)
    done = state.checkpoints.get_completed("cp")
    assert done is not None and set(done["positions"]) == {"a", "b", "c"}


def test_no_segment_moves_while_a_checkpoint_is_to_pass() -> None:
    state = _state()
    state.create_checkpoint("cp", False, 1)
    owned = dict(state.assigned["r1"])
    segment = next(iter(owned))
    # Completed segments are not taken while r1 has the checkpoint to pass ...
    answer = state.sync("r1", "s1", {}, {segment: 9})
    assert segment in answer.owned and answer.release_count == 0
    assert not state.release("r1", "s1", segment, 3)
    # ... and are after it passed.
    state.checkpoint_passed("r1", "s1", "cp", {segment: 9})
    answer = state.sync("r1", "s1", {}, {segment: 9})
    assert segment not in answer.owned and segment in state.completed


def test_too_many_outstanding_and_names_in_use() -> None:
    state = _state()
    for n in range(CHECKPOINTS_OUTSTANDING_MAX):
        state.create_checkpoint(f"c{n}", False, n)
    with pytest.raises(CheckpointFailedError):
        state.create_checkpoint("more", False, 9)
    with pytest.raises(CheckpointFailedError):
        state.create_checkpoint("c0", False, 9)


def test_completed_checkpoints_are_bounded() -> None:
    state = ReaderGroupState.new("sc", "g", ["sc/st"], {"a": 0})
    for n in range(CHECKPOINTS_KEPT + 3):
        state.create_checkpoint(f"c{n}", False, n)  # no reader: complete at once
    assert [c["name"] for c in state.checkpoints.completed] == [
        f"c{n}" for n in range(3, CHECKPOINTS_KEPT + 3)
    ]


def test_reset_drops_outstanding_and_ignores_older_generations() -> None:
    state = _state()
    state.create_checkpoint("cp", False, 1)
    old = state.generation
    state.reset({"a": 7, "b": 7, "c": 7})
    assert state.checkpoints.find("cp") is None and state.generation == old + 1
    answer = state.sync("r1", "s1", {"a": 100}, ["a"], generation=old)
    assert "a" not in state.completed
    assert answer.generation == old + 1
    assert state.positions()["a"] == 7  # the stale offset was not taken


def test_state_round_trips_and_old_records_load() -> None:
    state = _state()
    state.create_checkpoint("cp", True, 1)
    again = ReaderGroupState.from_dict(state.to_dict())
    assert again.to_dict() == state.to_dict()
    old = state.to_dict()
    for key in ("config", "generation", "end_offsets", "completed_ends", "checkpoints"):
        del old[key]
    loaded = ReaderGroupState.from_dict(old)
    assert loaded.generation == 0 and not loaded.checkpoints.outstanding
    with pytest.raises(ValueError):
        CheckpointState.from_dict({"outstanding": "x"})
    with pytest.raises(ValueError):
        ReaderGroupState.from_dict({**state.to_dict(), "end_offsets": {"a": -1}})
