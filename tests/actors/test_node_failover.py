"""Containers spread over Ray nodes move when a node goes; writers lose nothing.

The scenario runs in its own process: it needs a multi-node Ray of its own
(``ray.cluster_utils.Cluster``), which cannot share the session's Ray.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.timeout(420)]

SCRIPT = Path(__file__).with_name("node_failover_scenario.py")
ROOT = Path(__file__).resolve().parents[2]


def run_scenario(*args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, (
        f"scenario failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    )
    return json.loads(lines[-1])


def check(result: dict) -> None:
    assert result["writer_finished"], result
    # start_local asks for one container per node; Ray's soft node affinity is best effort.
    assert result["nodes_used"] >= 2, "containers were not spread over the nodes"
    assert result["moved"], "the removed node held no container"
    assert result["moved_off_removed_node"], result
    assert result["read"] == result["distinct"] == result["expected"], result
    assert not result["extra"] and result["in_order"], result


def test_removing_a_node_moves_its_containers_and_writers_lose_nothing(tmp_path: Path) -> None:
    check(run_scenario(str(tmp_path)))
