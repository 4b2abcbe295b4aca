"""Event time in the simulation (sim/watermarks.py, the ``watermarks`` feature): writers note
times, the controller's watermark workflow runs (and crashes between its steps), and the
reader's time window is checked against every event it reads."""

from __future__ import annotations

import pytest

import sim
from pravega_ray.contracts.watermarks import Watermark
from sim.bugs import planted
from sim.watermarks import EventTime, _ordered
from tests.unit.sim.feature_checks import assert_left_out_cleanly, hashes_elsewhere

STEPS = 1000
WITHOUT_LOSS = sim.SimConfig(faults=sim.FAULT_KINDS - sim.MESSAGE_LOSS)
BEFORE_TRANSACTIONS = sim.SimConfig(faults=sim.FAULT_KINDS - {"transactions"})
"""Every kind but transactions: the seeds below were found before they joined."""

REPLAY_SEED = 0
"""A seed that draws the feature and emits watermarks within 600 steps."""
WATERMARK_CRASH_SEEDS = (10, 20, 27, 52, 56)
"""Seeds (every kind but transactions, 1000 steps) whose controller crashes between two
steps of a watermark run: after reading the marks (27), the last watermark (52), after
computing one (10), after appending one to the mark segment, before its record (20: the
next run finds it in the segment and emits no second copy), after its record (56). Found
by a search of seeds 0 to 200, again each time the controller's calls change (last: scales
creating their segments in one round)."""


def test_seeds_with_event_time_pass_and_check_windows() -> None:
    """About half the seeds draw the feature; in those, watermarks are emitted, the reader's
    window has a lower bound for most events it reads, and every invariant holds."""
    drawn = emitted = checked = seeds_checked = 0
    for seed in range(24):
        result = sim.run(seed, STEPS)
        assert result.ok, (seed, result.violation)
        assert result.faults is not None
        if not result.faults.watermarks:
            assert "watermarks" not in result.stats
            continue
        drawn += 1
        emitted += result.stats.get("watermarks", 0)
        checked += result.stats.get("window_checked", 0)
        seeds_checked += result.stats.get("window_checked", 0) > 0
        assert result.stats.get("watermarks_in_segment", 0) >= result.stats.get("watermarks", 0)
    assert 6 <= drawn <= 18, drawn
    assert emitted >= 5 * drawn, (emitted, drawn)
    assert seeds_checked >= drawn // 2, (seeds_checked, drawn)
    assert checked >= 200, checked


@pytest.mark.parametrize("seed", WATERMARK_CRASH_SEEDS)
def test_a_controller_crash_mid_run_emits_each_watermark_once(seed: int) -> None:
    """The controller dies between two steps of a run; the next run starts again from the
    mark segment, and the final check finds its lower bounds strictly increasing."""
    result = sim.run(seed, STEPS, BEFORE_TRANSACTIONS)
    assert result.ok, result.violation
    assert any("watermark run: controller crash (at" in t for t in result.trace)
    assert result.stats.get("watermarks_in_segment", 0) >= 1
    if any("crash (at appended)" in t for t in result.trace):  # appended, never returned
        assert result.stats["watermarks_in_segment"] == result.stats.get("watermarks", 0) + 1


def test_a_seed_with_event_time_replays_exactly_in_any_process() -> None:
    """Same seed, same trace (hash), also in processes with other string hashes."""
    first = sim.run(REPLAY_SEED, 600)
    assert first.faults is not None and first.faults.watermarks
    assert any("note time" in t for t in first.trace)
    assert any("watermark run: [" in t for t in first.trace)
    again = sim.run(REPLAY_SEED, 600)
    assert first.trace_hash == again.trace_hash
    assert first.stats == again.stats
    hashes = hashes_elsewhere(REPLAY_SEED, 600)
    assert hashes == {first.trace_hash}


def test_leaving_the_feature_out_runs_the_seed_as_if_it_did_not_exist() -> None:
    """Its draws come last and from generators of its own: without it, a seed that drew it
    runs as a seed that did not (the trace differs only in its first line's field)."""
    assert_left_out_cleanly("watermarks", ("note time", "watermark run"))


@pytest.mark.parametrize(
    ("bug", "message"),
    [
        ("note-skips-pending", "after the time window's lower bound reached"),
        ("watermark-forgets-last", "watermark lower bounds do not increase"),
    ],
)
def test_each_watermark_defect_is_caught_by_its_check(bug: str, message: str) -> None:
    with planted(bug):
        for seed in range(30):
            result = sim.run(seed, STEPS, WITHOUT_LOSS)
            if not result.ok:
                break
    assert result.violation is not None and message in result.violation, result.violation
    assert sim.run(seed, STEPS, WITHOUT_LOSS).ok


def test_the_final_check_orders_watermarks() -> None:
    ranges = {0: (0.0, 0.5), 1: (0.5, 1.0), 1 << 32: (0.0, 1.0)}
    first = Watermark(10, 12, {0: 5, 1: 7}, {0: ranges[0], 1: ranges[1]})
    assert _ordered(first, Watermark(11, 11, {0: 5, 1: 9}, first.ranges)) is None
    later_epoch = Watermark(11, 11, {1 << 32: 0}, {1 << 32: ranges[1 << 32]})
    assert _ordered(first, later_epoch) is None
    again = _ordered(first, Watermark(10, 15, {0: 6, 1: 7}, first.ranges))
    assert again is not None and "do not increase" in again
    back = _ordered(first, Watermark(11, 15, {0: 4, 1: 7}, first.ranges))
    assert back is not None and "goes back" in back
    assert _ordered(later_epoch, Watermark(12, 12, {0: 9, 1: 9}, first.ranges)) is not None


def test_an_event_time_is_never_below_the_writer_s_last_note() -> None:
    event_time = EventTime(3, runs=5)
    assert event_time.on
    event_time.noted_ms = 5000
    event_time.on_write("k1", 0, 2.0)  # the clock at 2000 ms: the note is later
    event_time.on_write("k1", 1, 7.5)
    assert event_time.times == {("k1", 0): 5000, ("k1", 1): 7500}
    off = EventTime(3, runs=0)
    off.on_write("k1", 0, 2.0)
    assert not off.on and not off.times and not off.run_steps
