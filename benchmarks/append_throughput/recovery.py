"""Container recovery: kill a container actor after writing its log full, time until the new
process (which replays the log) answers."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from benchmarks.append_throughput.model import GIB, MIB, RecoveryRow, Report
from benchmarks.append_throughput.pravega_cases import pravega_throughput
from benchmarks.common import drop_page_cache, log, wait_restarted

RECOVERY_EVENT_BYTES = 10_240
RECOVERY_WAIT_S = 600.0
RECOVERY_POLL_S = 0.005


def _log_files(log_dir: Path) -> list[Path]:
    return sorted(log_dir.glob("log-*.dat"))


def log_bytes_on_disk(log_dir: Path) -> int:
    """Bytes of the filesystem durable log's record files in ``log_dir``."""
    return sum(p.stat().st_size for p in _log_files(log_dir))


def time_container_restart(handle: Any, timeout_s: float = RECOVERY_WAIT_S) -> float:
    """Kill the container actor (Ray restarts it; its constructor replays the log) and return
    the seconds until a ``describe`` call is answered by the new process."""
    import ray

    old_pid = ray.get(handle.describe.remote())["pid"]
    start = time.perf_counter()
    ray.kill(handle, no_restart=False)
    wait_restarted(handle, old_pid, start + timeout_s, RECOVERY_POLL_S)
    return time.perf_counter() - start


def write_bytes(cluster: Any, stream: str, total_bytes: int, payload_bytes: int) -> tuple[int, str]:
    """Write ``total_bytes`` of payload to a new one-segment stream and flush.

    Returns (bytes written, the segment's name).
    """
    import pravega_ray as pr

    manager = cluster.stream_manager()
    manager.create_scope("bench")
    manager.create_stream("bench", stream, pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    segment = manager.get_stream_info("bench", stream).segments[0].name
    writer = cluster.create_writer("bench", stream, serializer=pr.BytesSerializer())
    events = max(1, total_bytes // payload_bytes)
    bulk = pravega_throughput(writer, events, payload_bytes, ["k"])
    writer.close()
    log(
        f"recovery: wrote {bulk.events * payload_bytes / MIB:,.0f} MiB at {bulk.mb_per_s:,.0f} MB/s"
    )
    return bulk.events * payload_bytes, segment


def run_recovery(report: Report, work_dir: Path, gib: float, run_id: str) -> None:
    """Recovery time of one container (file Tier-1): empty; after ``gib`` GiB with Tier-2 working
    (checkpoints and truncation keep the log short); after ``gib`` GiB with Tier-2 blocked (no
    chunk can be written, so nothing is checkpointed or truncated), warm and cold page cache."""
    import ray

    import pravega_ray as pr

    total = int(gib * GIB)
    for blocked in (False, True):
        data_dir = work_dir / ("recovery-blocked" if blocked else "recovery")
        tier2 = data_dir / "tier2"
        tier2.mkdir(parents=True, exist_ok=True)
        if blocked:
            # Chunks live under <tier2>/segments/...: a plain file there makes every chunk
            # write fail (even for root), so the storage writer never flushes, checkpoints or
            # truncates; controller records (<tier2>/_system) are unaffected.
            (tier2 / "segments").write_bytes(b"")
        cluster = pr.start_local(
            data_dir=data_dir, container_count=1, namespace=f"bench-recovery-{blocked}-{run_id}"
        )
        try:
            handle = cluster.container_handles()[0]
            log_dir = data_dir / "tier1" / "container-0"
            if not blocked:
                seconds = time_container_restart(handle)
                report.recovery.append(
                    RecoveryRow("empty container (restart only)", 0, 0, 0, seconds)
                )
                log(f"recovery: empty container restarted in {seconds:.2f}s")
            written, segment = write_bytes(cluster, "r", total, RECOVERY_EVENT_BYTES)
            info = ray.get(handle.get_info.remote(segment))
            at_kill = log_bytes_on_disk(log_dir)
            label = "Tier-2 blocked: no truncation" if blocked else "Tier-2 working"
            seconds = time_container_restart(handle)
            report.recovery.append(
                RecoveryRow(f"{gib:g} GiB, {label}", written, info.storage_length, at_kill, seconds)
            )
            log(f"recovery: {label}: log {at_kill / MIB:,.0f} MiB, restarted in {seconds:.2f}s")
            if blocked:
                at_kill = log_bytes_on_disk(log_dir)
                drop_page_cache(_log_files(log_dir))
                seconds = time_container_restart(handle)
                report.recovery.append(
                    RecoveryRow(f"{gib:g} GiB, {label}, cold cache", written, 0, at_kill, seconds)
                )
                log(f"recovery: {label}, cold page cache: restarted in {seconds:.2f}s")
        finally:
            cluster.shutdown()
            shutil.rmtree(data_dir, ignore_errors=True)
