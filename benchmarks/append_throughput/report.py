"""The report: the result tables, the CPU and recovery tables, the issue's targets against
this run's numbers (PASS/MISS), and the notes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.append_throughput.model import (
    COMPUTING_CALL,
    MIB,
    REFERENCE_EVENT_BYTES,
    CpuRow,
    RecoveryRow,
    Report,
    Row,
)
from benchmarks.append_throughput.pacing import events_for
from benchmarks.append_throughput.recovery import RECOVERY_EVENT_BYTES

TARGET_EVENTS_PER_S = 1_000_000
TARGET_BARE_RAY_FRACTION = 1 / 3
TARGET_REDIS_MULTIPLE = 10.0
TARGET_P50_MS = 3.0
TARGET_P99_RAW_MULTIPLE = 1.5
TARGET_COMPUTING_MULTIPLE = 2.0
"""Ack p50 with a caller computing between writes, at most this times the sleeping caller's."""

DISTURBED_OTHER_CORES = 0.2
"""More CPU than this used by unrelated processes during a run is reported as a disturbance."""


def _cell(value: float | None, fmt: str, mark: str = "") -> str:
    return "-" if value is None else format(value, fmt) + mark


def format_table(rows: Sequence[Row]) -> str:
    """A result table as text, one line per row (``!`` marks an overloaded latency run)."""
    header = (
        f"{'system':<31} {'call':<29} {'events/s':>11} {'MB/s':>8} "
        f"{'ack p50 ms':>11} {'ack p99 ms':>11} {'paced ev/s':>11}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        mark = "!" if r.overloaded else ""
        lines.append(
            f"{r.system:<31} {r.call:<29} {_cell(r.events_per_s, ',.0f'):>11} "
            f"{_cell(r.mb_per_s, ',.1f'):>8} {_cell(r.ack_p50_ms, '.2f', mark):>11} "
            f"{_cell(r.ack_p99_ms, '.2f', mark):>11} {_cell(r.paced_events_per_s, ',.0f'):>11}"
        )
    return "\n".join(lines)


def format_recovery(rows: Sequence[RecoveryRow]) -> str:
    """The recovery table as text."""
    header = (
        f"{'case':<48} {'written MiB':>11} {'in Tier-2 MiB':>13} {'log MiB at kill':>15} "
        f"{'recovery s':>10}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r.case:<48} {r.written_bytes / MIB:>11,.0f} {r.tier2_bytes / MIB:>13,.0f} "
            f"{r.log_bytes_at_kill / MIB:>15,.0f} {r.seconds:>10.2f}"
        )
    return "\n".join(lines)


def format_cpu(rows: Sequence[CpuRow]) -> str:
    """Cores used during each pravega-ray throughput run, by part of the system."""
    header = (
        f"{'throughput run':<42} {'driver':>7} {'containers':>10} {'raylet+gcs':>10} "
        f"{'SeaweedFS':>9} {'other':>6} {'machine':>8}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r.config:<42} {r.driver:>7.2f} {r.containers:>10.2f} {r.ray:>10.2f} "
            f"{r.s3_server:>9.2f} {r.other:>6.2f} {r.system_total:>8.2f}"
        )
    return "\n".join(lines)


def _verdict(ok: bool | None) -> str:
    return "n/a " if ok is None else ("PASS" if ok else "MISS")


def format_targets(report: Report) -> str:
    """The issue's aims against this run's 100-byte numbers, for each pravega-ray call."""
    size = REFERENCE_EVENT_BYTES
    raw = report.find(size, "raw append+fsync")
    bare = report.find(size, "bare Ray")
    redis = report.find(size, "redis")
    candidates = [
        r
        for r in report.rows.get(size, [])
        if r.system.startswith("pravega-ray")
        and " 1 seg" in r.system
        and "FAILED" not in r.system
        and "computing" not in r.call
        and "switch interval" not in r.call
    ]
    if not candidates:
        return f"targets: no pravega-ray 1-segment row with {size}-byte events in this run"
    lines = [f"targets ({size}-byte events, one writer, one segment)"]
    for row in candidates:
        lines.append(f"  {row.system}, {row.call}:")
        checks: list[tuple[str, bool | None, str]] = []
        eps = row.events_per_s
        checks.append(
            (
                f">= {TARGET_EVENTS_PER_S:,} durable events/s",
                None if eps is None else eps >= TARGET_EVENTS_PER_S,
                f"{_cell(eps, ',.0f')} events/s",
            )
        )
        if bare is not None and bare.events_per_s and eps is not None:
            share = eps / bare.events_per_s
            checks.append(
                (
                    f">= 1/3 of the bare Ray ceiling ({bare.events_per_s:,.0f}/s)",
                    share >= TARGET_BARE_RAY_FRACTION,
                    f"{share:.2f}x",
                )
            )
        else:
            checks.append(("  >= 1/3 of the bare Ray ceiling", None, "ceiling not measured"))
        if redis is not None and redis.events_per_s and eps is not None:
            multiple = eps / redis.events_per_s
            checks.append(
                (
                    f">= 10x Redis Streams ({redis.events_per_s:,.0f}/s)",
                    multiple >= TARGET_REDIS_MULTIPLE,
                    f"{multiple:.1f}x",
                )
            )
        else:
            checks.append((">= 10x Redis Streams", None, "Redis not measured"))
        p50 = row.ack_p50_ms
        checks.append(
            (
                f"ack p50 <= {TARGET_P50_MS:g} ms at the paced rate",
                None if p50 is None else p50 <= TARGET_P50_MS and not row.overloaded,
                f"{_cell(p50, '.2f')} ms",
            )
        )
        if raw is not None and raw.ack_p99_ms and row.ack_p99_ms is not None:
            bound = raw.ack_p99_ms * TARGET_P99_RAW_MULTIPLE
            checks.append(
                (
                    f"ack p99 <= 1.5x raw fsync p99 ({raw.ack_p99_ms:.2f} ms -> {bound:.2f})",
                    row.ack_p99_ms <= bound and not row.overloaded,
                    f"{row.ack_p99_ms:.2f} ms ({row.ack_p99_ms / raw.ack_p99_ms:.1f}x)",
                )
            )
        else:
            checks.append(("ack p99 <= 1.5x raw fsync p99", None, "not measured"))
        computing = report.find(size, row.system, COMPUTING_CALL)
        if row.call == "write_event" and computing is not None:
            for what, theirs, ours in (
                ("p50", computing.ack_p50_ms, p50),
                ("p99", computing.ack_p99_ms, row.ack_p99_ms),
            ):
                if theirs is None or not ours:
                    continue
                multiple = theirs / ours
                checks.append(
                    (
                        f"ack {what}, caller computing between writes, "
                        f"<= {TARGET_COMPUTING_MULTIPLE:g}x the sleeping caller's",
                        multiple <= TARGET_COMPUTING_MULTIPLE and not computing.overloaded,
                        f"{theirs:.2f} ms ({multiple:.1f}x)",
                    )
                )
        for text, ok, value in checks:
            lines.append(f"    {_verdict(ok)}  {text.strip():<58} {value}")
    return "\n".join(lines)


def print_report(report: Report, args: Any, header: str) -> None:
    """Everything, to stdout."""
    print()
    print(header)
    for size in args.event_sizes:
        rows = report.rows.get(size)
        if not rows:
            continue
        print()
        print(
            f"{size:,}-byte events: throughput over {events_for(size, args.events):,} events, "
            f"ack latency at {args.latency_rate:,} events/s for {args.latency_seconds:g}s"
        )
        print(format_table(rows))
    if any(r.overloaded for rows in report.rows.values() for r in rows):
        print(
            "! = did not keep up with the paced rate (handed over under 95% of it, acks over "
            "the second half under 90% of it, or 1 s of events unacknowledged): latencies of a "
            "growing queue"
        )
    if any(r.call.startswith("write_events") for rows in report.rows.values() for r in rows):
        print(
            "write_events(N): throughput in calls of N events; latency with one call per 1 ms "
            "burst (its events share one future)"
        )
    print()
    print(format_targets(report))
    if report.cpu:
        print()
        print(
            "CPU (cores; 2 on this machine) during pravega-ray throughput runs; 'other' is "
            "everything else on the machine (should be ~0: another job was running if not)"
        )
        print(format_cpu(report.cpu))
    if report.recovery:
        print()
        print(
            f"container recovery (file Tier-1, 1 container, {RECOVERY_EVENT_BYTES:,}-byte "
            "events): kill the actor, time until it answers again"
        )
        print(format_recovery(report.recovery))
    disturbed = [r for r in report.cpu if r.other > DISTURBED_OTHER_CORES]
    if disturbed:
        report.notes.append(
            "other processes used over "
            f"{DISTURBED_OTHER_CORES:g} cores during: "
            + "; ".join(f"{r.config} ({r.other:.2f})" for r in disturbed)
            + ". Those rows are disturbed; rerun on an idle machine."
        )
    if report.notes:
        print()
        print("notes:")
        for note in report.notes:
            print(f"  - {note}")
