"""The deterministic simulation of the data path (sim/): it replays exactly, the system
passes a fixed set of seeds, and each planted defect is caught within a few seeds."""

from __future__ import annotations

import random

import pytest

import sim
from pravega_ray.errors import InvalidArgumentError
from sim.__main__ import main
from sim.bugs import BUGS, planted
from sim.world import Faults
from tests.unit.sim.feature_checks import ACKS_EARLY_SEED, WITHOUT_FEATURES_ARG, hashes_elsewhere

STEPS = 1000
BEFORE_FEATURES = sim.SimConfig(faults=sim.FAULT_KINDS - sim.FEATURES)
"""Seeds found before the scope delete joined the simulation run as they did then without it."""
WITHOUT_LOSS = sim.SimConfig(faults=sim.FAULT_KINDS - sim.MESSAGE_LOSS)
"""Every fault but lost calls and replies: the planted-defect searches were calibrated so."""

FIXED_SEEDS = (*range(80), 106, 114)
"""Seeds every run must pass: 0 to 79, and two where the controller crashes mid-scale. The
test asks for 3 such crashes; seeds 0 to 79 hold 1 (68) since scales create their segments
in one round (every change of the controller's calls moves them: a search of seeds 0 to 200
found 106 and 114 next)."""

CAUGHT_WITHIN = {
    "writer-resends-acked": 150,
    "reader-rewinds-buffered": 320,
    "container-acks-early": 10,
    "chunk-before-write": 100,
    "log-skips-checksum": 10,
    "time-index-follows-clock": 30,
    "reader-takes-successor-early": 100,
    "delete-keeps-segments": 10,
    "note-skips-pending": 30,
    "watermark-forgets-last": 10,
    "commit-skips-a-segment": 30,
}
"""How many seeds (from 0) each planted defect may take to be caught. It took 2, 11, 2 and
61 when written; 6, 11, 1, 39, 2 and 8 once torn tails, the clock jump and the final
re-read were added (and I/O errors really injected: before, no blocking call was
recognized as a log append or chunk write); 11, 25, 1, 24, 2, 8 and 16 (the new
``reader-takes-successor-early``, under CAUGHT_WITH) once the stream scaled through the
real controller, whose records live in table segments of the simulated containers, and
the reader could start late, with a backlog (sim/controller.py), and the faults stopped at
the end of the faulty phase even inside a blocked call; 6, 46, 1, 9, 4, 8 and 65 once new
streams route keys by Pravega's hash (the simulation's keys ``k0``-``k4`` now leave one of
the three segments without a key). ``reader-rewinds-buffered`` needs a crash while a read-ahead
is pending with events still buffered: 3 of the first 400 seeds (45, 247, 304) caught it,
and 2 (247, 304) once setup_append read its attribute after the barrier (one await moved,
every run's interleaving changed), so its bound is now 320. Once the recursive delete of a
second scope joined (``scope_delete``, drawn in 60% of the seeds, which changed their
runs), the first seed catching each took 9, 194, 2, 5, 3, 8 and 17 seeds (measured over at
most the first 400 seeds; ``reader-takes-successor-early`` runs with delays alone, which
the feature does not change, and took 17 before it too), and the new
``delete-keeps-segments`` 1 (seed 0: the deleted scope's segments remain). Once event time
joined (``watermarks``, drawn in half the seeds, which changed their runs): 5, 25, 1, 8, 2,
8, 17 and 1, and the new ``note-skips-pending`` 5 (a reader past a watermark's cut reads an
event older than its lower bound) and ``watermark-forgets-last`` 1 (the same lower bound
emitted twice). Once transactions joined (``transactions``, drawn in half the seeds, which
changed their runs; measured with the controller's wake after each workflow's property in):
74, 25, 1, 8, 3, 8, 17, 1, 11 and 1 (``writer-resends-acked``'s bound is now 150), and the
new ``commit-skips-a-segment`` 5 (a commit leaves one parent's transaction segment behind)."""

CAUGHT_WITH = {
    "reader-takes-successor-early": sim.SimConfig(faults=frozenset({"delay"})),
}
"""The faults a planted defect is searched under, where not WITHOUT_LOSS.
``reader-takes-successor-early`` needs a read of one predecessor to be slow while the
successor already holds events: a scale's controller calls run while the clients stand
still (sim/controller.py), so the writer rarely fills a successor before the reader is
done with its predecessors, and only a delayed read opens the window. With every fault
(WITHOUT_LOSS) it took 273 seeds; with delays alone, 16 (65 since keys route by Pravega's
hash)."""
ORIGINAL_KINDS = sim.SimConfig(
    faults=sim.FAULT_KINDS - {"torn_tail", "clock_jump", "controller_crash"} - sim.FEATURES,
    scales=False,
)
"""The fault kinds of the first version, and no scaling. (Since the controller runs in the
simulation, its setup and its table segments change every seed's run: no seed runs as it
did then.)"""


def test_a_seed_replays_exactly() -> None:
    first = sim.run(3, STEPS)
    again = sim.run(3, STEPS)
    assert first.trace == again.trace
    assert first.trace_hash == again.trace_hash
    assert first.stats == again.stats
    assert sim.run(4, STEPS).trace_hash != first.trace_hash


def test_a_seed_replays_exactly_in_another_process_with_other_string_hashes() -> None:
    """Nothing in a run may depend on set or dict order of strings (PYTHONHASHSEED)."""
    hashes = hashes_elsewhere(5, 600)
    assert hashes == {sim.run(5, 600).trace_hash}


def test_a_run_writes_reads_and_injects_faults() -> None:
    result = sim.run(1, STEPS)
    assert result.ok, result.violation
    assert result.stats["written"] == sim.SimConfig().events
    assert result.stats["read"] == result.stats["acked"] > 0
    assert any(" crash" in line for line in result.trace)


def test_seeds_with_the_controller_s_tables_compacting_pass() -> None:
    """Table compaction under the simulation's faults: the controller's records live in
    compacted table segments while containers crash, replies are lost and the stream scales
    (a compaction that drops live entries fails seed 1: the controller cannot answer)."""
    config = sim.SimConfig(compaction=True)
    rounds = 0
    for seed in range(1, 21):
        result = sim.run(seed, STEPS, config)
        assert result.ok, (seed, result.violation)
        rounds += result.stats["compaction_rounds"]
    assert rounds > 20, rounds


def test_the_system_passes_the_fixed_seeds() -> None:
    """And among them, the stream scales (split and merge) through the controller's
    workflows, some seeds with the controller crashing mid-scale; each scale completes
    exactly once (the final check) and the reader reads across epochs in order."""
    failed, scales, crashed_mid_scale = [], 0, 0
    for seed in FIXED_SEEDS:
        result = sim.run(seed, STEPS)
        if not result.ok:
            failed.append((seed, result.violation))
        scales += result.stats.get("scales", 0)
        crashed_mid_scale += any("controller task: controller crash" in t for t in result.trace)
    assert not failed
    assert scales >= 20
    assert crashed_mid_scale >= 3


@pytest.mark.parametrize("bug", BUGS)
def test_each_planted_defect_is_caught(bug: str, capsys: pytest.CaptureFixture[str]) -> None:
    config = CAUGHT_WITH.get(bug, WITHOUT_LOSS)
    with planted(bug):
        for seed in range(CAUGHT_WITHIN[bug]):
            result = sim.run(seed, STEPS, config)
            if not result.ok:
                break
    assert not result.ok, f"{bug} not caught in {CAUGHT_WITHIN[bug]} seeds"
    with capsys.disabled():
        print(f"\n{bug}: caught after {seed + 1} seeds: {result.violation}")
    assert result.violation_step is not None
    assert result.trace[-1].endswith(f"VIOLATION: {result.violation}")
    with planted(bug):  # the failing seed replays to the same violation
        assert sim.run(seed, STEPS, config).trace == result.trace
    assert sim.run(seed, STEPS, config).ok  # and passes without the defect


def test_a_lost_answer_does_not_stall_the_writer() -> None:
    # Seed 7 found it: SegmentOutputStream.give_up_on_stuck_calls skipped a segment already
    # reconnecting, so an append whose answer was lost while another append of the segment
    # failed stalled the segment for good (the run never settled). Its run has changed
    # since (the controller and its table segments joined the simulation), so this is now
    # a run with lost answers, no longer that exact interleaving.
    result = sim.run(7, STEPS, ORIGINAL_KINDS)
    assert result.ok, result.violation
    assert result.stats["dropped_replies"] > 0


@pytest.mark.parametrize(
    ("seed", "steps"),
    [(-1, 10), (1.5, 10), ("1", 10), (True, 10), (1, 0), (1, -3), (1, 2.0), (1, False)],
)
def test_bad_run_arguments_are_refused(seed: object, steps: object) -> None:
    with pytest.raises(InvalidArgumentError):
        sim.run(seed, steps)  # type: ignore[arg-type]


def test_every_fault_kind_can_be_left_out() -> None:
    assert {"torn_tail", "clock_jump", "controller_crash", "tier2_outage"} <= sim.FAULT_KINDS
    assert sim.FEATURES == {"scope_delete", "transactions", "watermarks"} <= sim.FAULT_KINDS
    seen: set[str] = set()
    for seed in range(20):

        def generators(seed: int = seed) -> tuple[random.Random, ...]:
            return (
                random.Random(-seed),
                random.Random(seed + 100),
                random.Random(seed + 200),
                random.Random(seed + 300),
            )

        seen |= Faults.draw(random.Random(seed), sim.FAULT_KINDS, *generators()).active()
        for kind in sim.FAULT_KINDS:
            kinds = sim.FAULT_KINDS - {kind}
            faults = Faults.draw(random.Random(seed), kinds, *generators())
            assert kind not in faults.active()
    assert seen == sim.FAULT_KINDS  # each kind is drawn by some seeds (swarm testing)


def test_bad_configurations_are_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        sim.run(1, 10, config={"containers": 2})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        sim.SimConfig(containers=0)
    with pytest.raises(InvalidArgumentError):
        sim.SimConfig(faults=frozenset({"meteor"}))
    with pytest.raises(KeyError), planted("no-such-bug"):
        pass


def test_the_command_line_runs_seeds_and_reports_a_failure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--seeds", "2", "--start", "5", "--steps", "300"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("first seed 5, 2 seeds, 300 steps")
    assert "2/2 seeds passed, 0 failed" in out
    start = str(ACKS_EARLY_SEED - 1)  # the seed before it (which passes), and it
    argv = ["--seeds", "2", "--start", start, "--steps", str(STEPS)]
    argv += ["--bug", "container-acks-early"]
    assert main([*argv, "--without", WITHOUT_FEATURES_ARG, "--no-shrink"]) == 1
    out = capsys.readouterr().out
    assert f"seed {ACKS_EARLY_SEED}: step" in out and "1/2 seeds passed, 1 failed" in out
    assert "VIOLATION" in out and "replay: python -m sim" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--seeds", "0"],
        ["--seeds", "1", "--steps", "0"],
        ["--seeds", "1", "--start", "-2"],
        ["--seeds", "1", "--without", "meteor"],
        ["--seeds", "x"],
        ["--seeds", "1", "--bug", "x"],
        ["--seeds", "1", "--shrink-runs", "-1"],
    ],
)
def test_the_command_line_refuses_bad_arguments(argv: list[str]) -> None:
    try:
        status = main(argv)
    except SystemExit as e:  # argparse's own checks
        status = e.code  # type: ignore[assignment]
    assert status == 2


def test_a_reader_without_predecessors_done_is_caught_only_when_planted() -> None:
    assert "reader-takes-successor-early" in BUGS
    config = sim.SimConfig(scales=False)
    with planted("reader-takes-successor-early"):  # without scales it changes nothing
        assert sim.run(2, 400, config).ok
    with pytest.raises(InvalidArgumentError):
        sim.SimConfig(scales=1)  # type: ignore[arg-type]


def test_a_late_answer_after_a_reconnect_does_not_store_an_event_twice() -> None:
    # Seed 238155196 found it (`make simulate SEEDS=300`): an append given up on as
    # unanswered landed after the reconnect had queued its block again; a late failure of
    # another given-up call made the writer reconnect once more before the block went out,
    # and that reconnect found the segment sealed for a split and re-routed the block, whose
    # events the segment already held, to the successors. The unit tests of
    # SegmentOutputStream hold both halves of the fix; this was the run that found it (since
    # streams route keys by Pravega's hash, the seed's run is another one: it stays as a run
    # with a scale).
    result = sim.run(238155196, 644, BEFORE_FEATURES)
    assert result.ok, result.violation
    assert result.stats.get("scales", 0) >= 1


def test_a_wall_clock_set_back_does_not_hold_an_orphaned_scale_request() -> None:
    # Seed 1493602092 found it: a controller crash left a scale request posted without its
    # property, and the wall clock then went back 17 hours; the request's expiry counted
    # by the wall clock alone, so it stayed postponed (the run never settled). The unit
    # test of the request processor holds the fix; this was the run that found it (keys
    # route by Pravega's hash since, which changed the run; it still jumps the clock).
    result = sim.run(1493602092, 1500, BEFORE_FEATURES)
    assert result.ok, result.violation
    assert result.stats.get("clock_jumps", 0) == 1


def test_seeds_with_a_tier2_outage_lose_nothing() -> None:
    """The ``tier2_outage`` fault: for 50 to 400 steps every chunk call fails; the log holds
    what is acknowledged, the storage writers flush it once Tier-2 is back, and the final
    re-read of every segment finds everything."""
    outages = 0
    for seed in range(40):
        result = sim.run(seed, STEPS, sim.SimConfig(faults=frozenset({"tier2_outage", "crash"})))
        assert result.ok, (seed, result.violation)
        outages += result.stats.get("tier2_outage_failures", 0) > 0
    assert outages >= 5, outages
