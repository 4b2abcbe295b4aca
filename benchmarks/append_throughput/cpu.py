"""CPU accounting from Linux /proc: the cores each part of the system used during a run."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from benchmarks.append_throughput.model import CpuRow
from benchmarks.common import log

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _process_table() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, command name, CPU seconds) of every readable process."""
    table: dict[int, tuple[int, str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        table[int(entry)] = (
            int(fields[1]),
            name,
            (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS,
        )
    return table


def _system_busy_s() -> float:
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values[:8]) - idle) / _CLOCK_TICKS


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU seconds so far of every process, and of the whole machine."""

    taken_at: float
    processes: dict[int, tuple[int, str, float]]
    system_busy_s: float

    @classmethod
    def take(cls) -> CpuSnapshot | None:
        """A snapshot, or None where /proc is not available."""
        if not os.path.exists("/proc/stat"):
            return None
        return cls(time.perf_counter(), _process_table(), _system_busy_s())


RAY_SYSTEM_PROCESSES = frozenset({"raylet", "gcs_server"})
S3_SERVER_PROCESSES = frozenset({"weed"})


def cpu_row(
    config: str, before: CpuSnapshot | None, after: CpuSnapshot | None, container_pids: set[int]
) -> CpuRow | None:
    """Cores used between two snapshots by this driver, the container actors, Ray's raylet and
    GCS, SeaweedFS, every other process, and the machine (which also counts interrupts etc.).

    The biggest "other" consumers are logged, to see what they are.
    """
    if before is None or after is None:
        return None
    wall = after.taken_at - before.taken_at
    me = os.getpid()
    used: dict[int, float] = {}
    for pid, (_, _, seconds) in after.processes.items():
        delta = seconds - before.processes.get(pid, (0, "", 0.0))[2]
        if delta > 0:
            used[pid] = delta
    driver = used.pop(me, 0.0)
    containers = sum(used.pop(p, 0.0) for p in container_pids)
    ray_system = [p for p in used if after.processes[p][1] in RAY_SYSTEM_PROCESSES]
    ray = sum(used.pop(p) for p in ray_system)
    s3_server = [p for p in used if after.processes[p][1] in S3_SERVER_PROCESSES]
    s3 = sum(used.pop(p) for p in s3_server)
    top = sorted(used.items(), key=lambda item: -item[1])[:5]
    log("  other CPU: " + ", ".join(f"{after.processes[p][1]}({p}) {s / wall:.2f}" for p, s in top))
    return CpuRow(
        config,
        driver / wall,
        containers / wall,
        ray / wall,
        s3 / wall,
        sum(used.values()) / wall,
        (after.system_busy_s - before.system_busy_s) / wall,
    )
