"""A run's trace hash computed in other processes, with other string hashes: nothing in a run
may depend on set or dict order of strings (``PYTHONHASHSEED``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


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
