"""Shrinking a failing seed (sim/shrink.py) and the command line that prints the result."""

from __future__ import annotations

import shlex

import pytest

import sim
from pravega_ray.errors import InvalidArgumentError
from sim.__main__ import main
from sim.shrink import Shrunk, shrink
from sim.world import Faults
from tests.unit.sim.feature_checks import ACKS_EARLY_SEED, WITHOUT_FEATURES_ARG

FAULTS = Faults(
    crash=0.001,
    delay=0.01,
    drop_call=0.0,
    drop_reply=0.002,
    io_error=0.01,
    tick=0.5,
    torn_tail=0.01,
    clock_jump_step=0,
    clock_jump_ms=0,
)
"""A seed's faults: every kind but drop_call and clock_jump."""


class _Model:
    """A deterministic stand-in for a seed: it fails once it has run ``needs`` steps, unless
    a kind in ``essential`` is left out; ``needs`` is lower without ``speeds_up``."""

    def __init__(self, needs: int, essential: set[str], speeds_up: str | None = None) -> None:
        self.needs = needs
        self.essential = essential
        self.speeds_up = speeds_up
        self.calls: list[tuple[int, frozenset[str]]] = []

    def __call__(self, steps: int, without: frozenset[str]) -> sim.Result:
        self.calls.append((steps, without))
        needs = self.needs // 2 if self.speeds_up in without else self.needs
        fails = steps >= needs and not (self.essential & without)
        trace = [f"{i:6d} step" for i in range(min(steps, needs) + 1)]
        if not fails:
            return sim.Result(3, steps + 100, None, None, trace, {}, FAULTS)
        return sim.Result(3, needs, "broken", needs, trace, {}, FAULTS)


def test_shrinking_finds_the_fewest_steps_and_leaves_out_what_is_not_needed() -> None:
    model = _Model(needs=437, essential={"crash", "torn_tail"})
    failed = model(1500, frozenset())
    shrunk = shrink(model, failed, 1500)
    assert shrunk.steps == 437
    assert shrunk.without == {"delay", "drop_reply", "io_error"}  # only kinds the seed has
    assert shrunk.result.violation_step == 437 and not shrunk.result.ok
    assert shrunk.runs == len(model.calls) - 1 <= 40
    assert len(set(model.calls)) == len(model.calls)  # each candidate run once
    again = _Model(needs=437, essential={"crash", "torn_tail"})
    assert shrink(again, again(1500, frozenset()), 1500) == shrunk  # deterministic


def test_leaving_a_kind_out_that_makes_it_fail_sooner_shrinks_the_steps_again() -> None:
    model = _Model(needs=800, essential={"crash"}, speeds_up="delay")
    shrunk = shrink(model, model(1500, frozenset({"drop_call"})), 1500, frozenset({"drop_call"}))
    assert shrunk.steps == 400
    assert "delay" in shrunk.without and "drop_call" in shrunk.without
    assert "crash" not in shrunk.without


def test_shrinking_is_bounded_by_its_runs() -> None:
    model = _Model(needs=437, essential=set())
    failed = model(1500, frozenset())
    shrunk = shrink(model, failed, 1500, runs_max=3)
    assert shrunk.runs == 3 == len(model.calls) - 1
    assert not shrunk.result.ok and shrunk.steps >= 437
    unshrunk = shrink(model, failed, 1500, runs_max=0)
    assert unshrunk == Shrunk(failed, 1500, frozenset(), 0)


def test_only_a_failing_run_is_shrunk() -> None:
    model = _Model(needs=437, essential=set())
    with pytest.raises(InvalidArgumentError):
        shrink(model, model(10, frozenset()), 10)
    with pytest.raises(InvalidArgumentError):
        shrink(model, model(1500, frozenset()), 1500, runs_max=-1)


def test_the_command_line_shrinks_the_first_failure_and_its_replay_fails_alike(
    capsys: pytest.CaptureFixture[str],
) -> None:
    seed = ACKS_EARLY_SEED
    argv = ["--seeds", "1", "--start", str(seed), "--steps", "1000"]
    without = ["--without", WITHOUT_FEATURES_ARG, "--bug", "container-acks-early"]
    assert main([*argv, *without, "--trace-lines", "5"]) == 1
    out = capsys.readouterr().out
    assert f"shrinking seed {seed} (at most 40 runs)" in out
    assert "original violation at step " in out and "shrunk violation at step " in out
    shrunk_line = next(line for line in out.splitlines() if line.startswith("shrunk violation"))
    step = shrunk_line.split()[4].rstrip(":")
    replay = next(line for line in out.splitlines() if line.startswith("replay: "))
    command = shlex.split(replay.removeprefix("replay: "))
    assert command[:3] == ["python", "-m", "sim"] and "--no-shrink" in command
    steps = int(command[command.index("--steps") + 1])
    assert steps < 1000
    assert main(command[3:]) == 1  # the shrunk run, replayed: the same violation, same step
    replayed = capsys.readouterr().out
    assert f"seed {seed}: step {step}: " in replayed
    assert shrunk_line.split(": ", 1)[1] in replayed
    assert "shrinking" not in replayed


def test_no_shrink_prints_the_original_run(capsys: pytest.CaptureFixture[str]) -> None:
    seed = ACKS_EARLY_SEED
    argv = ["--seeds", "1", "--start", str(seed), "--steps", "1000"]
    bug = ["--bug", "container-acks-early"]
    assert main([*argv, "--without", WITHOUT_FEATURES_ARG, *bug, "--no-shrink"]) == 1
    out = capsys.readouterr().out
    assert "shrinking" not in out
    assert f"replay: python -m sim --seeds 1 --start {seed} --steps 1000" in out
    without = f"--without {WITHOUT_FEATURES_ARG}"
    assert f"{without} --bug container-acks-early --no-shrink" in out
