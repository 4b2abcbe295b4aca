"""The simulation's features beyond the data path (sim/scope.py): the recursive delete of a
scope, drawn per seed and left out with ``--without``."""

from __future__ import annotations

import pytest

import sim
from sim.scope import DOOMED

STEPS = 1000
EVERY_KIND = sim.SimConfig()
BEFORE_WATERMARKS = sim.SimConfig(faults=sim.FAULT_KINDS - {"transactions", "watermarks"})
"""Every kind but event time and transactions: seeds found before they joined run as they
did then."""

SCOPE_CRASH_SEEDS = (68, 106, 116, 134, 138, 169)
"""Seeds (every kind, 1000 steps) whose controller crashes between two steps of the
scope's recursive delete or of the seal and delete of one of its streams; they run without
``watermarks`` and ``transactions``, which joined later. Found by a search of seeds 0 to
200, again each time the controller's calls change (last: scales creating their segments in
one round)."""


def test_seeds_with_a_recursive_scope_delete_pass() -> None:
    """The operator deletes the second scope (and in half the seeds a create races it): the
    scope, its records and its segments are gone at the end, the delete ran once, and the
    main stream held every invariant meanwhile. (The racing create succeeded in 2 of seeds 0
    to 23 until transactions joined, whose calls changed the runs, in 1 until scales created
    their segments in one round, in none since: seed 62, the first of 0 to 400 where it
    does, joins them.)"""
    deleted = refused = created = 0
    for seed in (*range(24), 62):
        result = sim.run(seed, STEPS, EVERY_KIND)
        assert result.ok, (seed, result.violation)
        deleted += result.stats.get("scope_deletes", 0)
        refused += any(f"create {DOOMED}/late: refused" in t for t in result.trace)
        created += any(f"create {DOOMED}/late: True" in t for t in result.trace)
    assert deleted >= 15, deleted
    assert refused >= 3, refused
    assert created >= 1, created


@pytest.mark.parametrize("seed", SCOPE_CRASH_SEEDS)
def test_a_controller_crash_mid_scope_delete_resumes_and_deletes_once(seed: int) -> None:
    result = sim.run(seed, STEPS, BEFORE_WATERMARKS)
    assert result.ok, result.violation
    assert result.stats.get("scope_deletes", 0) == 1
    assert any("controller task: controller crash (at" in t for t in result.trace)


def test_a_seed_without_the_features_runs_as_if_they_did_not_exist() -> None:
    """Leaving out a feature a seed did not draw changes nothing of its run; leaving out one
    it drew removes it and nothing else of the draw."""
    without = sim.SimConfig(faults=sim.FAULT_KINDS - sim.FEATURES)
    for seed in range(6):
        full = sim.run(seed, 300)
        assert full.faults is not None
        drawn = full.faults.active() & sim.FEATURES
        if not drawn:
            assert sim.run(seed, 300, without).trace == full.trace
        less = sim.run(seed, 300, without)
        assert less.faults is not None
        assert less.faults.active() == full.faults.active() - sim.FEATURES
