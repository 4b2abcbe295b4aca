"""pravega-ray's cases: one cluster per Tier-1, one stream per case of the matrix, a throughput
run and a paced latency run with one writer."""

from __future__ import annotations

import functools
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.append_throughput.cpu import CpuSnapshot, cpu_row
from benchmarks.append_throughput.model import (
    ACK_WAIT_S,
    COMPUTING_CALL,
    COMPUTING_SHORT_SWITCH_CALL,
    DISTINCT_PAYLOADS,
    LATENCY_RATE_EVENTS_PER_S,
    WARM_UP_EVENTS,
    Latency,
    Report,
    Row,
    Throughput,
)
from benchmarks.append_throughput.pacing import (
    events_for,
    make_payloads,
    run_paced,
    wait_all_stamped,
)
from benchmarks.common import log

BATCH_BYTES = 100_000
"""``write_events`` throughput rows hand over batches of about this many payload bytes."""


def routing_keys_per_segment(cluster: Any, scope: str, stream: str) -> list[str]:
    """One routing key landing in each segment of the stream, in key-range order, by the
    stream's own routing rule (``StreamInfo.key_hash``), as its writers route."""
    from pravega_ray.client.segment_selector import SegmentSelector

    info = cluster.stream_manager().get_stream_info(scope, stream)
    ranges = sorted(info.segments, key=lambda s: s.key_low)
    selector = SegmentSelector(
        [(r.key_low, i) for i, r in enumerate(ranges)], key_hash=info.key_hash
    )
    keys: list[str | None] = [None] * len(ranges)
    candidate = 0
    while any(k is None for k in keys):
        key = f"k{candidate}"
        i = selector.select(key)
        if keys[i] is None:
            keys[i] = key
        candidate += 1
    return [k for k in keys if k is not None]


def _key_cycle(keys: Sequence[str]) -> list[str]:
    """DISTINCT_PAYLOADS routing keys cycling over ``keys`` (indexed with the payload mask)."""
    return [keys[i % len(keys)] for i in range(DISTINCT_PAYLOADS)]


def pravega_throughput(
    writer: Any, events: int, payload_bytes: int, keys: Sequence[str], batch: int = 0
) -> Throughput:
    """Write ``events`` events with ``writer`` (round robin over ``keys``), then ``flush()``.

    ``batch == 0``: one ``write_event`` per event. ``batch > 0``: ``write_events`` calls of
    ``batch`` events each, one routing key per call. Futures are not kept per event (that alone
    would cost more than the write); every 4096th call's and the last are checked after the
    flush, and ``flush()`` itself fails if any event failed. Raises TimeoutError if the flush
    takes longer than ACK_WAIT_S.
    """
    payloads = make_payloads(payload_bytes)
    mask = len(payloads) - 1
    cycle = _key_cycle(keys)
    sampled: list[Any] = []
    future = None
    start = time.perf_counter()
    if batch <= 0:
        write = writer.write_event
        for i in range(events):
            future = write(payloads[i & mask], routing_key=cycle[i & mask])
            if i & 4095 == 0:
                sampled.append(future)
    else:
        write_events = writer.write_events
        batches = [[payloads[(j * batch + k) & mask] for k in range(batch)] for j in range(16)]
        calls = max(1, events // batch)
        for i in range(calls):
            future = write_events(batches[i & 15], routing_key=cycle[i & mask])
            if i & 255 == 0:
                sampled.append(future)
        events = calls * batch
    writer.flush(timeout=ACK_WAIT_S)
    elapsed = time.perf_counter() - start
    sampled.append(future)
    for f in sampled:
        if f is not None:
            f.result(timeout=ACK_WAIT_S)
    return Throughput(events, elapsed, payload_bytes)


def pravega_latency(
    writer: Any,
    seconds: float,
    payload_bytes: int,
    keys: Sequence[str],
    rate_events_per_s: int = LATENCY_RATE_EVENTS_PER_S,
    batched: bool = False,
    computing: bool = False,
) -> Latency:
    """Ack latency of ``writer`` at a paced rate, from each event's done callback.

    ``computing``: the caller computes between bursts instead of sleeping (``run_paced``).

    ``batched``: each burst is one ``write_events`` call (so its events share one future and
    one routing key), else one ``write_event`` per event. The callback may run on another
    thread; it stamps the time and notes a failure. After pacing, ``flush()`` and wait (up to
    ACK_WAIT_S) until every callback has run.
    """
    payloads = make_payloads(payload_bytes)
    mask = len(payloads) - 1
    cycle = _key_cycle(keys)
    sent_at: list[float] = []
    done_at: dict[int, float] = {}
    failed: list[int] = []
    write = writer.write_event

    def on_done(first: int, count: int, future: Any) -> None:
        now = time.perf_counter()
        try:
            future.result(timeout=0)
        except Exception:
            failed.append(first)
        for index in range(first, first + count):
            done_at[index] = now

    def submit_burst(first: int, count: int) -> None:
        if batched:
            now = time.perf_counter()
            sent_at.extend([now] * count)
            events = [payloads[i & mask] for i in range(first, first + count)]
            future = writer.write_events(events, routing_key=cycle[(first // count) & mask])
            future.add_done_callback(functools.partial(on_done, first, count))
            return
        for index in range(first, first + count):
            sent_at.append(time.perf_counter())
            write(payloads[index & mask], routing_key=cycle[index & mask]).add_done_callback(
                functools.partial(on_done, index, 1)
            )

    achieved, overloaded = run_paced(
        submit_burst,
        rate_events_per_s,
        seconds,
        backlog=lambda: len(sent_at) - len(done_at),
        computing=computing,
    )
    writer.flush(timeout=ACK_WAIT_S)
    wait_all_stamped(done_at, len(sent_at), "pravega-ray")
    latencies = [done_at[i] - t for i, t in enumerate(sent_at)]
    return Latency(latencies, achieved, overloaded, failed=len(failed))


@dataclass(frozen=True)
class PravegaCase:
    """One pravega-ray configuration of the matrix."""

    tier1: str
    payload_bytes: int
    segments: int
    batch: int  # 0: write_event; else write_events of this many events

    @property
    def system(self) -> str:
        return f"pravega-ray {self.tier1} {self.segments} seg"

    @property
    def call(self) -> str:
        return "write_event" if self.batch == 0 else f"write_events({self.batch})"


def measure_pravega_case(
    cluster: Any, case: PravegaCase, stream: str, events: int, args: Any, report: Report
) -> None:
    """Create ``stream`` with ``case.segments`` segments, measure it; the row goes to ``report``.

    If a phase fails (e.g. a flush times out), the writer is abandoned rather than closed, since
    ``close()`` would wait for the same acks again; the exception propagates.
    """
    import ray

    import pravega_ray as pr

    scope = "bench"
    manager = cluster.stream_manager()
    manager.create_scope(scope)
    manager.create_stream(
        scope, stream, pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(case.segments))
    )
    keys = routing_keys_per_segment(cluster, scope, stream)
    writer = cluster.create_writer(scope, stream, serializer=pr.BytesSerializer())
    size = case.payload_bytes
    count = events_for(size, events)
    healthy = False
    try:
        pravega_throughput(writer, min(count, events_for(size, WARM_UP_EVENTS)), size, keys)
        label = f"pravega-ray {case.tier1}, {case.segments} seg, {size:,} B, {case.call}"
        log(f"{label}: {count:,} events then flush()")
        described = ray.get([h.describe.remote() for h in cluster.container_handles()])
        pids = {int(d["pid"]) for d in described}
        before = CpuSnapshot.take()
        bulk = pravega_throughput(writer, count, size, keys, batch=case.batch)
        config = f"{case.tier1}, {case.segments} seg, {size:,} B, {case.call}"
        cpu = cpu_row(config, before, CpuSnapshot.take(), pids)
        if cpu is not None:
            report.cpu.append(cpu)
        log(f"{label}: {bulk.events_per_s:,.0f} events/s, {bulk.mb_per_s:,.1f} MB/s")
        paced = pravega_latency(
            writer, args.latency_seconds, size, keys, args.latency_rate, batched=case.batch > 0
        )
        log(f"{label}: {paced.describe()}")
        if paced.failed:
            raise RuntimeError(f"{paced.failed} events failed")
        report.add(size, Row.of(case.system, case.call, bulk, paced))
        if case.batch == 0 and case.segments == 1:
            # The caller computes between writes: as configured (the interpreter's interval),
            # then with 1 ms, as WriterConfig(switch_interval_s=0.001) keeps it (opt-in).
            for call, interval in ((COMPUTING_CALL, None), (COMPUTING_SHORT_SWITCH_CALL, 0.001)):
                kept = sys.getswitchinterval()
                if interval is not None:
                    sys.setswitchinterval(interval)
                try:
                    computing = pravega_latency(
                        writer, args.latency_seconds, size, keys, args.latency_rate, computing=True
                    )
                finally:
                    sys.setswitchinterval(kept)
                log(f"{label}, {call}: {computing.describe()}")
                if computing.failed:
                    raise RuntimeError(f"{computing.failed} events failed")
                report.add(size, Row.of(case.system, call, None, computing))
        healthy = True
    finally:
        if healthy:
            writer.close()


def pravega_cases(args: Any, tier1: str) -> list[PravegaCase]:
    """The matrix on one Tier-1: every size and segment count with ``write_event``, plus
    ``write_events`` on one segment for every size (on the first Tier-1 of the run)."""
    cases = [
        PravegaCase(tier1, size, segments, 0)
        for size in args.event_sizes
        for segments in args.segments
    ]
    if tier1 == args.tier1[0] and not args.skip_write_events:
        cases += [
            PravegaCase(tier1, size, 1, max(1, BATCH_BYTES // size)) for size in args.event_sizes
        ]
    return cases


def drain_tier2(cluster: Any) -> None:
    """Flush every container's data to Tier-2 so the next case starts without a backlog.

    The storage writer drains in the background, slower than a writer fills the log; without
    this, a case would pay for the previous cases' Tier-2 flushes. Logs how long it took.
    """
    import ray

    start = time.perf_counter()
    ray.get([h.flush_to_storage.remote() for h in cluster.container_handles()], timeout=ACK_WAIT_S)
    log(f"  Tier-2 caught up in {time.perf_counter() - start:.1f}s")


def run_pravega_tier(
    report: Report, tier1: str, tier1_url: str | None, work_dir: Path, args: Any, run_id: str
) -> bool:
    """Start a cluster on ``tier1`` (Tier-2 on the filesystem), measure its cases, shut it down.

    Returns False if a case failed (its row then says FAILED; the other cases still run).
    """
    import pravega_ray as pr

    data_dir = work_dir / f"pravega-{tier1}"
    log(f"pravega-ray: starting a cluster, {args.containers} containers, Tier-1 {tier1}")
    cluster = pr.start_local(
        data_dir=data_dir,
        container_count=args.containers,
        tier1=tier1_url,
        namespace=f"bench-{tier1}-{run_id}",
    )
    ok = True
    try:
        for n, case in enumerate(pravega_cases(args, tier1)):
            try:
                measure_pravega_case(cluster, case, f"s{n}", args.events, args, report)
            except Exception as e:  # report the other rows anyway, and fail the run
                log(f"{case.system} {case.payload_bytes} B {case.call}: FAILED: {e!r}")
                report.add(case.payload_bytes, Row(f"{case.system} (FAILED)", case.call))
                report.notes.append(f"{case.system}, {case.payload_bytes} B, {case.call}: {e!r}")
                ok = False
            drain_tier2(cluster)
    finally:
        log(f"pravega-ray: shutting down the {tier1} cluster")
        cluster.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)
    return ok
