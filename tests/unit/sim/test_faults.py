"""The simulation's torn log tails (sim/disk.py), wall-clock jump (sim/clock.py) and the
invariants they are checked by (sim/invariants.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import sim
from pravega_ray.errors import IllegalStateError, InvalidArgumentError
from pravega_ray.logs.durable_data_log import DurableDataLog
from sim.clock import SimClock
from sim.disk import TORN_SHAPES, LogDisk, make_root, remove_root, sanitize
from sim.invariants import Checker
from sim.world import Faults

STEPS = 1000
BEFORE_FEATURES = sim.SimConfig(faults=sim.FAULT_KINDS - sim.FEATURES)
"""The seeds below were found before the scope delete and transactions joined the
simulation; without them they run as they did then (but for the trace's first line)."""
TORN_SEED = 42
"""A seed whose run tears several log appends (found by a search of seeds 0 to 80)."""
JUMP_BACK_SEED = 69
"""A seed whose wall clock jumps back 70.682 s at step 360."""
JUMP_AHEAD_SEED = 20
"""A seed whose wall clock jumps ahead 1188249.067 s (almost 14 days) at step 345."""


class _Drawn(random.Random):
    """A generator whose ``randrange`` answers are given (then its own), for one shape."""

    def __init__(self, *answers: int) -> None:
        super().__init__(7)
        self._answers = list(answers)

    def randrange(self, *args: int, **kwargs: object) -> int:  # type: ignore[override]
        return self._answers.pop(0) if self._answers else super().randrange(*args)


def _records(log: DurableDataLog) -> list[tuple[int, bytes]]:
    return list(log.read_all())


@pytest.mark.parametrize("shape", TORN_SHAPES)
@pytest.mark.parametrize("keep", [0, 5, 30, 60])
def test_a_torn_append_is_cut_on_recovery_and_the_log_goes_on(
    tmp_path: Path, shape: str, keep: int
) -> None:
    disk = LogDisk(tmp_path / "log")
    log = disk.open_log()
    log.initialize()
    for i in range(3):
        log.append(f"record {i}".encode())
    files = sorted((tmp_path / "log").glob("log-*.dat"))
    size = files[-1].stat().st_size
    how = disk.write_torn(log.append, (b"x" * 40,), _Drawn(keep, TORN_SHAPES.index(shape)))
    log.close()
    assert how is not None and how.endswith(f", {shape}") and how.startswith(f"torn, {keep} of")
    frame = int(how.split(" of ")[1].split()[0])
    expected = size + keep if shape == "cut" else size + frame
    assert files[-1].stat().st_size == expected  # the frame's bytes, torn, are on the disk
    successor = disk.open_log()
    successor.initialize()
    assert _records(successor) == [(i, f"record {i}".encode()) for i in range(3)]
    assert successor.append(b"after") == 3  # the torn record's number, never acknowledged
    successor.close()
    again = disk.open_log()
    again.initialize()
    assert _records(again)[-1] == (3, b"after")
    again.close()


def test_a_failed_append_tears_nothing(tmp_path: Path) -> None:
    disk = LogDisk(tmp_path / "log")
    log = disk.open_log()
    log.initialize()

    def failing(payload: bytes) -> int:
        raise OSError("no space left")

    assert disk.write_torn(failing, (b"x",), random.Random(1)) is None
    log.close()


def test_an_in_memory_disk_cannot_be_torn() -> None:
    disk = LogDisk(None)
    log = disk.open_log()
    log.initialize()
    with pytest.raises(IllegalStateError):
        disk.write_torn(log.append, (b"x",), random.Random(1))


def test_a_run_root_is_made_and_removed_and_its_path_kept_out_of_messages() -> None:
    root = make_root()
    assert root.is_dir()
    assert sanitize(f"bad file {root}/container-0/log-1.dat", root) == (
        "bad file tier1/container-0/log-1.dat"
    )
    assert sanitize("as is", None) == "as is"
    remove_root(root)
    remove_root(root)  # twice: nothing
    assert not root.exists()


def test_a_run_with_torn_tails_recovers_and_loses_nothing() -> None:
    result = sim.run(TORN_SEED, STEPS, BEFORE_FEATURES)
    assert result.ok, result.violation
    assert result.stats["torn_writes"] >= 3
    torn = [line for line in result.trace if "log-append torn," in line]
    assert torn and all(" crash (" in line for line in torn)
    assert result.stats["read"] >= result.stats["acked"] > 0


def test_the_wall_clock_jumps_and_the_monotonic_clock_does_not() -> None:
    clock = SimClock()
    wall = clock.wall_time_ms()
    clock.advance(1.5)
    clock.jump_wall(-60_000)
    assert clock.monotonic() == 1.5
    assert clock.wall_time_ms() == wall + 1500 - 60_000
    clock.jump_wall(10)
    assert clock.wall_time_ms() == wall + 1500 - 60_000 + 10
    for bad in (1.5, True, "1"):
        with pytest.raises(InvalidArgumentError):
            clock.jump_wall(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        clock.jump_wall(-clock.wall_time_ms() - 1)


@pytest.mark.parametrize(("seed", "back"), [(JUMP_BACK_SEED, True), (JUMP_AHEAD_SEED, False)])
def test_a_run_with_a_clock_jump_holds_every_invariant(seed: int, back: bool) -> None:
    result = sim.run(seed, STEPS, BEFORE_FEATURES)
    assert result.ok, result.violation
    assert result.faults is not None and (result.faults.clock_jump_ms < 0) == back
    jumps = [line for line in result.trace if "wall clock jumps" in line]
    assert len(jumps) == 1
    assert int(jumps[0].split()[0]) == result.faults.clock_jump_step


def test_leaving_the_new_kinds_out_changes_no_other_draw() -> None:
    kinds = sim.FAULT_KINDS - {"torn_tail", "clock_jump"}
    full = Faults.draw(random.Random(9), sim.FAULT_KINDS, random.Random("x"))
    without = Faults.draw(random.Random(9), kinds, random.Random("x"))
    assert without.torn_tail == 0 and without.clock_jump_step == 0
    assert without.clock_jump_ms == 0
    assert (full.crash, full.delay, full.io_error, full.tick) == (
        without.crash,
        without.delay,
        without.io_error,
        without.tick,
    )
    assert without.active() <= kinds


def test_the_io_kinds_are_recognized_through_to_thread() -> None:
    # asyncio.to_thread hands the loop partial(context.run, function): unwrapped, so log
    # appends and chunk writes can fail (io_error) and be torn.
    trace = sim.run(TORN_SEED, 300, BEFORE_FEATURES).trace
    assert any(" io log-append" in line for line in trace)


def test_the_time_index_check_finds_a_later_time_answering_an_earlier_offset() -> None:
    checker = Checker()
    for offset, key in ((0, "k0:0"), (12, "k0:1"), (24, "k0:2")):
        checker.written["k0"] = checker.written.get("k0", 0) + 1
        assert checker.on_read("s", offset, key.encode()) is None
    assert checker.check_time_index("s", [1, 2, 3], [0, 12, 36], 36) is None
    problem = checker.check_time_index("s", [1, 2, 3], [12, 0, 36], 36)
    assert problem is not None and "offset 0 at 2 ms, but offset 12 at 1 ms" in problem
    problem = checker.check_time_index("s", [1, 2], [7, 36], 36)
    assert problem is not None and "not an event" in problem


def test_the_reread_check_compares_events_and_refuses_a_partial_one() -> None:
    checker = Checker()
    checker.written["k0"] = 2
    assert checker.on_read("s", 0, b"k0:0") is None
    assert checker.on_read("s", 12, b"k0:1") is None
    assert checker.check_reread("s", [(0, b"k0:0"), (12, b"k0:1")], 0) is None
    problem = checker.check_reread("s", [(0, b"k0:0"), (12, b"k0:9")], 0)
    assert problem is not None and "b'k0:9' at 12" in problem
    problem = checker.check_reread("s", [(0, b"k0:0")], 0)
    assert problem is not None and "1 events, 2 were read" in problem
    problem = checker.check_reread("s", [(0, b"k0:0"), (12, b"k0:1")], 5)
    assert problem is not None and "5 bytes of an incomplete event" in problem
