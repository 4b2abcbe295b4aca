"""Checks the simulation's feature tests share: a run's trace hash computed in other processes
(nothing in a run may depend on set or dict order of strings, ``PYTHONHASHSEED``), and a
feature left out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import sim

ROOT = Path(__file__).resolve().parents[3]

ACKS_EARLY_SEED = 2
"""A seed whose run (1000 steps, without ``WITHOUT_FEATURES_ARG``) catches the planted defect
``container-acks-early``: the command-line tests report and shrink it. Found again each time
the controller's calls change (1 until a stream's create made fewer); the seed before it
must pass (test_sim.py runs both)."""
WITHOUT_FEATURES_ARG = "drop_call,drop_reply,scope_delete,tier2_outage,transactions,watermarks"
"""The ``--without`` argument that leaves out the kinds added since: a seed runs as it did
before they existed."""


def hashes_elsewhere(seed: int, steps: int) -> set[str]:
    """``sim.run(seed, steps).trace_hash`` from two fresh interpreters (PYTHONHASHSEED 1, 2)."""
    code = f"import sim; print(sim.run({seed}, {steps}).trace_hash)"
    return {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for hash_seed in ("1", "2")
    }


def assert_left_out_cleanly(feature: str, markers: tuple[str, ...], seeds: int = 4) -> None:
    """Run seeds ``0 .. seeds-1`` with and without ``feature`` (300 steps): a seed that did not
    draw it runs the same without it; one that did runs without any trace line holding one
    of ``markers`` (the feature's own)."""
    without = sim.SimConfig(faults=sim.FAULT_KINDS - {feature})
    for seed in range(seeds):
        full = sim.run(seed, 300)
        assert full.faults is not None
        less = sim.run(seed, 300, without)
        assert less.faults is not None and not getattr(less.faults, feature)
        if not getattr(full.faults, feature):
            assert less.trace == full.trace
        else:
            assert not any(marker in t for t in less.trace for marker in markers)
