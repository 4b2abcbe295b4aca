"""Append throughput and ack latency of pravega-ray, against two baselines measured in the same run.

Workload: 100-byte events, one writer, one segment, acknowledged only once durable (fsynced).

Rows of the table:

- ``pravega-ray``: events/s and MB/s writing ``--events`` events then ``flush()``; ack latency
  p50/p99 at a fixed 10,000 events/s (one burst of 10 events every 1 ms; each event's ack time
  taken by its future's ``add_done_callback``).
- ``raw append+fsync``: the floor set by this disk and plain Python. The same framed bytes
  (8-byte header + 100-byte payload per event) appended to one file in the same data dir, one
  ``write`` + ``fsync`` per group of up to 1 MiB. Latency at the same pacing: the pacing thread
  enqueues, a commit thread writes + fsyncs whatever is queued; latency = fsync done - enqueue.
- ``ray actor call``: the ceiling of one Ray actor: a no-op method on a sync actor. events/s is
  calls/s pipelined (submit many, one ``ray.get``), MB/s is 1 MiB arguments pipelined (16 in
  flight), p50/p99 is the round trip of sequential calls.

MB/s counts payload bytes (100 per event, 1 MiB per large call) in units of 10^6 bytes.

Run: ``make bench`` or ``.venv/bin/python benchmarks/append_throughput.py --help``. Importing this
module has no side effects; the baseline functions take small counts for quick checks.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import functools
import os
import platform
import shutil
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PAYLOAD_BYTES = 100
FRAME_HEADER = struct.pack(">II", 0, PAYLOAD_BYTES)
"""The event frame header: type 0 (plain event), length 100, big-endian (pravega-ray's format)."""

FRAMED_EVENT_BYTES = len(FRAME_HEADER) + PAYLOAD_BYTES
GROUP_COMMIT_BYTES = 1024 * 1024
"""Bytes one write + fsync of the raw baseline carries at most."""

LATENCY_RATE_EVENTS_PER_S = 10_000
BURST_INTERVAL_S = 0.001
"""Pacing: every BURST_INTERVAL_S, write LATENCY_RATE * BURST_INTERVAL_S events (10)."""

DISTINCT_PAYLOADS = 256
"""Payloads are cycled from a pool of this many random ones (a power of two)."""

LARGE_CALL_BYTES = 1024 * 1024
LARGE_CALLS_IN_FLIGHT = 16
ACK_WAIT_S = 120.0
"""Longest wait for outstanding acks (a flush, or the last callbacks) before a phase fails."""

MB = 1_000_000
_T0 = time.perf_counter()


def log(message: str) -> None:
    """Print a progress line (to stderr, so stdout holds only the table)."""
    print(f"[bench {time.perf_counter() - _T0:6.1f}s] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Row:
    """One line of the result table; ``None`` prints as "-" (not applicable or not measured)."""

    system: str
    events_per_s: float | None = None
    mb_per_s: float | None = None
    ack_p50_ms: float | None = None
    ack_p99_ms: float | None = None


@dataclass(frozen=True)
class Throughput:
    """A bulk-write measurement."""

    events: int
    elapsed_s: float

    @property
    def events_per_s(self) -> float:
        return self.events / self.elapsed_s

    @property
    def mb_per_s(self) -> float:
        return self.events * PAYLOAD_BYTES / self.elapsed_s / MB


@dataclass(frozen=True)
class Latency:
    """Ack latencies (seconds, one per event) of a paced run and the rate actually achieved."""

    latencies_s: list[float]
    achieved_events_per_s: float
    failed: int = 0

    @property
    def p50_ms(self) -> float:
        return percentile(self.latencies_s, 0.50) * 1000.0

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies_s, 0.99) * 1000.0

    @property
    def max_ms(self) -> float:
        return max(self.latencies_s) * 1000.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of ``values`` (``q`` in [0, 1]); raises ValueError if empty."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def make_payloads(count: int = DISTINCT_PAYLOADS) -> list[bytes]:
    """``count`` distinct random payloads of PAYLOAD_BYTES each."""
    return [os.urandom(PAYLOAD_BYTES) for _ in range(count)]


def run_paced(
    submit_burst: Callable[[int, int], None], rate_events_per_s: int, seconds: float
) -> float:
    """Call ``submit_burst(first_index, count)`` every BURST_INTERVAL_S for ``seconds``.

    The schedule is absolute (burst k is due at start + k * interval), so a late burst is followed
    by catch-up bursts and the average rate stays at ``rate_events_per_s``. Returns the achieved
    submission rate in events/s.
    """
    per_burst = max(1, round(rate_events_per_s * BURST_INTERVAL_S))
    bursts = max(1, round(seconds / BURST_INTERVAL_S))
    start = time.perf_counter()
    for k in range(bursts):
        delay = start + k * BURST_INTERVAL_S - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        submit_burst(k * per_burst, per_burst)
    elapsed = time.perf_counter() - start
    return bursts * per_burst / elapsed


# --- Baseline 1: raw append + fsync group commit ------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@contextlib.contextmanager
def _open_log(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        yield fd
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


def raw_fsync_throughput(
    path: Path, events: int, group_bytes: int = GROUP_COMMIT_BYTES
) -> Throughput:
    """Frame ``events`` events and append them to ``path`` in fsynced groups of ``group_bytes``.

    The frame work is in the timing, as it is in the writer: a parts list per group, one join.
    The file is removed afterwards.
    """
    payloads = make_payloads()
    mask = len(payloads) - 1
    events_per_group = max(1, group_bytes // FRAMED_EVENT_BYTES)
    header = FRAME_HEADER
    with _open_log(path) as fd:
        start = time.perf_counter()
        parts: list[bytes] = []
        append = parts.append
        for i in range(events):
            append(header)
            append(payloads[i & mask])
            if len(parts) >= 2 * events_per_group:
                _write_all(fd, b"".join(parts))
                os.fsync(fd)
                parts.clear()
        if parts:
            _write_all(fd, b"".join(parts))
            os.fsync(fd)
        elapsed = time.perf_counter() - start
    return Throughput(events, elapsed)


def raw_fsync_latency(
    path: Path,
    seconds: float,
    rate_events_per_s: int = LATENCY_RATE_EVENTS_PER_S,
    group_bytes: int = GROUP_COMMIT_BYTES,
) -> Latency:
    """Ack latency of group commit at a paced rate.

    The calling thread enqueues framed events in bursts (see ``run_paced``); a commit thread
    takes whatever is queued (up to ``group_bytes``), writes and fsyncs it, and stamps every
    event of the group done. Latency = fsync completion - enqueue. The file is removed afterwards.
    """
    payloads = make_payloads()
    mask = len(payloads) - 1
    queue: collections.deque[tuple[int, bytes]] = collections.deque()
    ready = threading.Condition()
    enqueued_at: list[float] = []
    done_at: dict[int, float] = {}
    stopping = False
    max_group = max(1, group_bytes // FRAMED_EVENT_BYTES)
    errors: list[BaseException] = []

    def commit_loop(fd: int) -> None:
        try:
            while True:
                with ready:
                    while not queue and not stopping:
                        ready.wait()
                    if not queue:
                        return
                    group = [queue.popleft() for _ in range(min(len(queue), max_group))]
                _write_all(fd, b"".join(frame for _, frame in group))
                os.fsync(fd)
                now = time.perf_counter()
                for index, _ in group:
                    done_at[index] = now
        except BaseException as e:  # surfaced by the caller after join()
            errors.append(e)

    def submit_burst(first: int, count: int) -> None:
        now = time.perf_counter()
        with ready:
            for index in range(first, first + count):
                enqueued_at.append(now)
                queue.append((index, FRAME_HEADER + payloads[index & mask]))
            ready.notify()

    with _open_log(path) as fd:
        committer = threading.Thread(target=commit_loop, args=(fd,), name="group-commit")
        committer.start()
        try:
            achieved = run_paced(submit_burst, rate_events_per_s, seconds)
        finally:
            with ready:
                stopping = True
                ready.notify()
            committer.join()
    if errors:
        raise errors[0]
    latencies = [done_at[i] - t for i, t in enumerate(enqueued_at)]
    return Latency(latencies, achieved)


# --- Baseline 2: a plain Ray actor --------------------------------------------------------------


class NoopActor:
    """A sync (single-threaded) actor whose method does nothing: the cost of a call itself."""

    def noop(self, payload: Any = None) -> None:
        """Accept and drop ``payload``."""
        return None


@dataclass(frozen=True)
class ActorCallRates:
    """Call rates of one sync Ray actor."""

    pipelined_calls_per_s: float
    sequential_round_trips_s: list[float]
    large_call_mb_per_s: float


def ray_actor_call_rates(
    pipelined_calls: int = 5000, sequential_calls: int = 1000, large_calls: int = 256
) -> ActorCallRates:
    """Measure a no-op sync actor (Ray must be initialized); the actor is killed afterwards.

    Pipelined: submit ``pipelined_calls`` then one ``ray.get`` on the list. Sequential:
    ``ray.get`` each call before the next. Large: ``large_calls`` calls with a 1 MiB bytes
    argument, LARGE_CALLS_IN_FLIGHT outstanding at a time.
    """
    import ray

    actor = ray.remote(num_cpus=0)(NoopActor).remote()  # type: ignore[attr-defined]
    try:
        ray.get([actor.noop.remote() for _ in range(100)])  # warm up the worker and the path

        start = time.perf_counter()
        ray.get([actor.noop.remote() for _ in range(pipelined_calls)])
        pipelined = pipelined_calls / (time.perf_counter() - start)

        round_trips: list[float] = []
        for _ in range(sequential_calls):
            t = time.perf_counter()
            ray.get(actor.noop.remote())
            round_trips.append(time.perf_counter() - t)

        payload = os.urandom(LARGE_CALL_BYTES)
        pending: list[Any] = []
        start = time.perf_counter()
        for _ in range(large_calls):
            if len(pending) >= LARGE_CALLS_IN_FLIGHT:
                ready, pending = ray.wait(pending, num_returns=1)
                ray.get(ready)
            pending.append(actor.noop.remote(payload))
        ray.get(pending)
        large = large_calls * LARGE_CALL_BYTES / (time.perf_counter() - start) / MB
    finally:
        ray.kill(actor)
    return ActorCallRates(pipelined, round_trips, large)


# --- pravega-ray ---------------------------------------------------------------------------------


def pravega_throughput(writer: Any, events: int) -> Throughput:
    """Write ``events`` events with ``writer`` then ``flush()``; every ack is checked.

    Futures are not kept per event (that alone would cost more than the write); every 4096th
    one and the last are checked with ``result()`` after the flush, and ``flush()`` itself fails
    if any event failed. Raises TimeoutError if the flush takes longer than ACK_WAIT_S.
    """
    payloads = make_payloads()
    mask = len(payloads) - 1
    write = writer.write_event
    sampled: list[Any] = []
    start = time.perf_counter()
    future = None
    for i in range(events):
        future = write(payloads[i & mask], routing_key="k")
        if i & 4095 == 0:
            sampled.append(future)
    writer.flush(timeout=ACK_WAIT_S)
    elapsed = time.perf_counter() - start
    sampled.append(future)
    for f in sampled:
        if f is not None:
            f.result(timeout=ACK_WAIT_S)
    return Throughput(events, elapsed)


def pravega_latency(
    writer: Any, seconds: float, rate_events_per_s: int = LATENCY_RATE_EVENTS_PER_S
) -> Latency:
    """Ack latency of ``writer`` at a paced rate, from each event's done callback.

    The callback may run on another thread; it stamps the time and notes a failed event.
    After pacing, ``flush()`` and wait (up to ACK_WAIT_S) until every callback has run.
    """
    payloads = make_payloads()
    mask = len(payloads) - 1
    sent_at: list[float] = []
    done_at: dict[int, float] = {}
    failed: list[int] = []
    write = writer.write_event

    def on_done(index: int, future: Any) -> None:
        done_at[index] = time.perf_counter()
        try:
            future.result(timeout=0)
        except Exception:
            failed.append(index)

    def submit_burst(first: int, count: int) -> None:
        for index in range(first, first + count):
            sent_at.append(time.perf_counter())
            write(payloads[index & mask], routing_key="k").add_done_callback(
                functools.partial(on_done, index)
            )

    achieved = run_paced(submit_burst, rate_events_per_s, seconds)
    writer.flush(timeout=ACK_WAIT_S)
    deadline = time.monotonic() + ACK_WAIT_S
    while len(done_at) < len(sent_at):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(sent_at) - len(done_at)} events never completed")
        time.sleep(0.01)
    latencies = [done_at[i] - t for i, t in enumerate(sent_at)]
    return Latency(latencies, achieved, failed=len(failed))


def run_pravega(data_dir: Path, events: int, latency_seconds: float) -> Row:
    """Start a one-container pravega-ray cluster in ``data_dir`` and measure it (Ray is up).

    The cluster is shut down afterwards. If a phase fails (e.g. a flush times out), the writer is
    abandoned rather than closed, since ``close()`` would wait for the same acks again.
    """
    import pravega_ray as pr

    log(f"pravega-ray: starting a local cluster (1 container) in {data_dir}")
    cluster = pr.start_local(data_dir=data_dir, container_count=1)
    try:
        mgr = cluster.stream_manager()
        mgr.create_scope("bench")
        mgr.create_stream("bench", "s1", pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(1)))
        writer = cluster.create_writer("bench", "s1", serializer=pr.BytesSerializer())
        healthy = False
        try:
            pravega_throughput(writer, min(events, 10_000))  # warm up: connection, actor, caches
            log(f"pravega-ray: max throughput, {events:,} events then flush()")
            bulk = pravega_throughput(writer, events)
            log(
                f"pravega-ray: {bulk.events_per_s:,.0f} events/s in {bulk.elapsed_s:.2f}s; "
                f"ack latency at {LATENCY_RATE_EVENTS_PER_S:,} events/s for {latency_seconds:g}s"
            )
            paced = pravega_latency(writer, latency_seconds)
            log(
                f"pravega-ray: achieved {paced.achieved_events_per_s:,.0f} events/s, "
                f"p50 {paced.p50_ms:.2f} ms, p99 {paced.p99_ms:.2f} ms, "
                f"max {paced.max_ms:.1f} ms, failed {paced.failed}"
            )
            if paced.failed:
                raise RuntimeError(f"pravega-ray: {paced.failed} events failed")
            healthy = True
        finally:
            if healthy:
                writer.close()
    finally:
        log("pravega-ray: shutting down the cluster")
        cluster.shutdown()
    return Row("pravega-ray", bulk.events_per_s, bulk.mb_per_s, paced.p50_ms, paced.p99_ms)


# --- Report --------------------------------------------------------------------------------------


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def format_table(rows: Sequence[Row]) -> str:
    """The result table as text, one line per row."""
    header = f"{'system':<28} {'events/s':>12} {'MB/s':>9} {'ack p50 ms':>11} {'ack p99 ms':>11}"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r.system:<28} {_cell(r.events_per_s, ',.0f'):>12} {_cell(r.mb_per_s, ',.1f'):>9} "
            f"{_cell(r.ack_p50_ms, '.2f'):>11} {_cell(r.ack_p99_ms, '.2f'):>11}"
        )
    return "\n".join(lines)


def format_ratio(system: Row, baseline: Row) -> str:
    """How ``system`` compares to ``baseline``: throughput share and latency multiples."""

    def ratio(a: float | None, b: float | None) -> str:
        return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"

    return (
        f"{system.system} / {baseline.system}: "
        f"events/s {ratio(system.events_per_s, baseline.events_per_s)}, "
        f"ack p50 {ratio(system.ack_p50_ms, baseline.ack_p50_ms)}, "
        f"ack p99 {ratio(system.ack_p99_ms, baseline.ack_p99_ms)}"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Durable append throughput and ack latency of pravega-ray (100-byte events, "
        "one writer, one segment) against raw fsync group commit and a plain Ray actor call.",
    )
    parser.add_argument(
        "--events", type=int, default=1_000_000, help="events per throughput run (default 1M)"
    )
    parser.add_argument(
        "--latency-seconds",
        type=float,
        default=10.0,
        help=f"length of each latency run at {LATENCY_RATE_EVENTS_PER_S:,} events/s (default 10)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the fsync baseline file and pravega-ray's data go (default: a temporary "
        "directory, removed afterwards). Use a directory on the disk you want to measure.",
    )
    parser.add_argument(
        "--actor-calls", type=int, default=5000, help="pipelined no-op actor calls (default 5000)"
    )
    parser.add_argument("--skip-pravega", action="store_true", help="measure the baselines only")
    args = parser.parse_args(argv)
    if args.events < 1 or args.latency_seconds <= 0 or args.actor_calls < 1:
        parser.error("--events, --latency-seconds and --actor-calls must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run every phase, print the table; returns the process exit code."""
    args = parse_args(argv)
    temporary = args.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="pravega-bench-")) if temporary else args.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    raw_path = data_dir / "raw-fsync-baseline.log"
    rows: list[Row] = []
    ray_started = False
    exit_code = 0
    try:
        log(f"raw append+fsync: {args.events:,} events in groups of {GROUP_COMMIT_BYTES:,} bytes")
        bulk = raw_fsync_throughput(raw_path, args.events)
        log(
            f"raw append+fsync: {bulk.events_per_s:,.0f} events/s; ack latency at "
            f"{LATENCY_RATE_EVENTS_PER_S:,} events/s for {args.latency_seconds:g}s"
        )
        paced = raw_fsync_latency(raw_path, args.latency_seconds)
        log(
            f"raw append+fsync: achieved {paced.achieved_events_per_s:,.0f} events/s, "
            f"p50 {paced.p50_ms:.2f} ms, p99 {paced.p99_ms:.2f} ms, max {paced.max_ms:.1f} ms"
        )
        raw_row = Row(
            "raw append+fsync (1 MiB)", bulk.events_per_s, bulk.mb_per_s, paced.p50_ms, paced.p99_ms
        )

        import ray

        log("starting Ray: ray.init(num_cpus=2)")
        ray.init(
            address="local",
            num_cpus=2,
            namespace="pravega",
            include_dashboard=False,
            logging_level="WARNING",
        )
        ray_started = True
        log(f"ray actor: {args.actor_calls:,} pipelined no-op calls, 1000 sequential, 256 x 1 MiB")
        calls = ray_actor_call_rates(pipelined_calls=args.actor_calls)
        round_trip = Latency(calls.sequential_round_trips_s, 0.0)
        actor_row = Row(
            "ray actor call (no-op)",
            calls.pipelined_calls_per_s,
            calls.large_call_mb_per_s,
            round_trip.p50_ms,
            round_trip.p99_ms,
        )
        log(
            f"ray actor: {calls.pipelined_calls_per_s:,.0f} calls/s pipelined, round trip p50 "
            f"{round_trip.p50_ms:.2f} ms, 1 MiB calls {calls.large_call_mb_per_s:,.0f} MB/s"
        )

        if args.skip_pravega:
            pravega_row = Row("pravega-ray (skipped)")
        else:
            try:
                pravega_row = run_pravega(data_dir / "pravega", args.events, args.latency_seconds)
            except Exception as e:  # report the baselines anyway, and fail the run
                log(f"pravega-ray: FAILED: {e!r}")
                pravega_row = Row("pravega-ray (FAILED)")
                exit_code = 1
        rows = [pravega_row, raw_row, actor_row]
    finally:
        if ray_started:
            import ray

            log("stopping Ray")
            ray.shutdown()
        if temporary:
            shutil.rmtree(data_dir, ignore_errors=True)

    import ray

    print()
    print(
        f"append_throughput  {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}  "
        f"{os.cpu_count()} CPUs  Python {platform.python_version()}  Ray {ray.__version__}"
    )
    print(
        f"{PAYLOAD_BYTES}-byte events, 1 writer, 1 segment, durable acks; throughput over "
        f"{args.events:,} events; latency at {LATENCY_RATE_EVENTS_PER_S:,} events/s for "
        f"{args.latency_seconds:g}s"
    )
    print()
    print(format_table(rows))
    print()
    print(format_ratio(rows[0], rows[1]))
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
