"""Durable append throughput, ack latency and recovery time of pravega-ray, with baselines.

One writer appends events that count only once durable (fsynced). The matrix (each part
selectable, see ``--help``): event sizes (100 B, 10 KiB), segments per stream (1, 16),
Tier-1 durable log (filesystem, S3 on a local SeaweedFS), and the writer call (``write_event``
per event, or ``write_events`` batches). Baselines measured in the same run, on the same disk,
with the same framed events (8-byte header + payload, pravega-ray's format):

- ``raw append+fsync``: the floor set by this disk and plain Python. A loop frames events into
  groups of up to 1 MiB, one ``write`` + ``fsync`` per group. Latency: a pacing thread enqueues,
  a commit thread writes + fsyncs whatever is queued (group commit).
- ``bare Ray ceiling``: one sync Ray actor (``num_cpus=0``) whose only method appends a block
  to a file and fsyncs; the driver frames events into 1 MiB blocks and keeps 16 calls in flight.
  Latency: whatever is batched is sent at each burst when fewer than 4 calls are in flight.
- ``redis streams``: ``redis-server`` started here (``appendonly yes``, ``appendfsync always``,
  so a reply means fsynced), one connection, pipelined ``XADD`` of the same payloads in raw RESP.
  Skipped with a message when ``redis-server`` is not installed.

Columns: events/s and MB/s (payload bytes, 10^6 per second) of a throughput run (write N events
then wait for every ack); ack latency p50/p99 of a paced run at ``--latency-rate`` events/s (a
burst every 1 ms on an absolute schedule; latency from just before the event is handed over to
its ack callback). A latency run that cannot keep up (events handed over at under 95% of the
rate, acks over its second half at under 90% of it, or a second's worth unacknowledged) is marked
``!``: its latencies are those of a growing queue.

pravega-ray runs one cluster per Tier-1 (``--containers`` containers, Tier-2 always on the
filesystem, so only Tier-1 differs), one stream per case, one routing key per segment (events
round robin over them). Between cases every container is flushed to Tier-2, so a case does not pay
for the previous one's backlog. A table of CPU use (driver, containers, raylet + GCS, SeaweedFS,
everything else) is printed for the throughput runs; "everything else" well above zero means
another job disturbed the run.

Also measured: container recovery time (kill the container actor, time until it answers again)
after writing ``--recovery-gib`` GiB, with Tier-2 working (the container checkpoints and
truncates its log) and with Tier-2 unavailable (nothing can be truncated: the log holds it all).

Run: ``make bench`` or ``.venv/bin/python benchmarks/append_throughput.py --help``. Importing this
module starts nothing; the baseline functions take small counts for quick checks.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import datetime
import functools
import importlib.util
import os
import platform
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]

DEFAULT_EVENT_SIZES = (100, 10_240)
DEFAULT_SEGMENTS = (1, 16)
DEFAULT_TIER1 = ("file", "s3")
REFERENCE_EVENT_BYTES = 100
"""``--events`` counts events of this size; larger events get as many payload bytes per run."""

EVENTS_PER_RUN_MIN = 2_000
WARM_UP_EVENTS = 10_000
"""Events (of 100 bytes; scaled by bytes for larger ones) written before a stream is measured."""

GROUP_COMMIT_BYTES = 1024 * 1024
"""Bytes one write + fsync of the raw baseline carries at most."""

BARE_RAY_BLOCK_BYTES = 1024 * 1024
BARE_RAY_IN_FLIGHT = 16
BARE_RAY_LATENCY_IN_FLIGHT = 4
"""Calls the bare Ray ceiling keeps in flight: throughput runs, paced latency runs."""

LATENCY_RATE_EVENTS_PER_S = 10_000
BURST_INTERVAL_S = 0.001
"""Pacing: every BURST_INTERVAL_S, hand over rate * BURST_INTERVAL_S events (10 at 10k/s)."""

OVERLOAD_BACKLOG_S = 1.0
"""A paced run stops once this many seconds' worth of events are unacknowledged."""

KEEP_UP_FRACTION = 0.95
"""A paced run that achieves less than this fraction of its rate is marked overloaded..."""

ACK_KEEP_UP_FRACTION = 0.90
"""...and so is one whose acks, over its second half, arrive at less than this fraction of the
rate events were handed over at (its queue grows)."""

BATCH_BYTES = 100_000
"""``write_events`` throughput rows hand over batches of about this many payload bytes."""

DISTINCT_PAYLOADS = 256
"""Payloads are cycled from a pool of this many random ones (a power of two)."""

ACK_WAIT_S = 180.0
"""Longest wait for outstanding acks (a flush, the last callbacks) before a phase fails."""

RECOVERY_EVENT_BYTES = 10_240
RECOVERY_WAIT_S = 600.0
RECOVERY_POLL_S = 0.005

SEAWEED_BUCKET = "pravega-bench"
REDIS_READY_TIMEOUT_S = 10.0
STOP_GRACE_S = 10.0
LARGE_CALL_BYTES = 1024 * 1024
LARGE_CALLS_IN_FLIGHT = 16

TARGET_EVENTS_PER_S = 1_000_000
TARGET_BARE_RAY_FRACTION = 1 / 3
TARGET_REDIS_MULTIPLE = 10.0
TARGET_P50_MS = 3.0
TARGET_P99_RAW_MULTIPLE = 1.5

DISTURBED_OTHER_CORES = 0.2
"""More CPU than this used by unrelated processes during a run is reported as a disturbance."""

MB = 1_000_000
MIB = 1024 * 1024
GIB = 1024 * MIB
_T0 = time.perf_counter()


def log(message: str) -> None:
    """Print a progress line (to stderr, so stdout holds only the report)."""
    print(f"[bench {time.perf_counter() - _T0:6.1f}s] {message}", file=sys.stderr, flush=True)


# --- Measurements ------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of ``values`` (``q`` in [0, 1]); raises ValueError if empty."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


@dataclass(frozen=True)
class Throughput:
    """A bulk write: ``events`` of ``payload_bytes`` each, all acknowledged in ``elapsed_s``."""

    events: int
    elapsed_s: float
    payload_bytes: int

    @property
    def events_per_s(self) -> float:
        return self.events / self.elapsed_s

    @property
    def mb_per_s(self) -> float:
        return self.events * self.payload_bytes / self.elapsed_s / MB


@dataclass(frozen=True)
class Latency:
    """Ack latencies (seconds, one per event) of a paced run.

    ``achieved_events_per_s`` is the rate events were handed over at; ``overloaded`` says the
    system did not keep up (see KEEP_UP_FRACTION and OVERLOAD_BACKLOG_S), so the latencies are
    those of a growing queue.
    """

    latencies_s: list[float]
    achieved_events_per_s: float
    overloaded: bool = False
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

    def describe(self) -> str:
        """One progress-line summary."""
        return (
            f"achieved {self.achieved_events_per_s:,.0f} events/s, p50 {self.p50_ms:.2f} ms, "
            f"p99 {self.p99_ms:.2f} ms, max {self.max_ms:.1f} ms"
            + (", OVERLOADED" if self.overloaded else "")
            + (f", failed {self.failed}" if self.failed else "")
        )


@dataclass(frozen=True)
class Row:
    """One line of a result table; ``None`` prints as "-" (not applicable or not measured)."""

    system: str
    call: str = "-"
    events_per_s: float | None = None
    mb_per_s: float | None = None
    ack_p50_ms: float | None = None
    ack_p99_ms: float | None = None
    paced_events_per_s: float | None = None
    overloaded: bool = False
    note: str = ""

    @classmethod
    def of(cls, system: str, call: str, bulk: Throughput | None, paced: Latency | None) -> Row:
        """A row from a throughput and a latency measurement (either may be missing)."""
        return cls(
            system,
            call,
            bulk.events_per_s if bulk else None,
            bulk.mb_per_s if bulk else None,
            paced.p50_ms if paced else None,
            paced.p99_ms if paced else None,
            paced.achieved_events_per_s if paced else None,
            paced.overloaded if paced else False,
        )


@dataclass(frozen=True)
class RecoveryRow:
    """One container restart: what the log held and how long until the container answered."""

    case: str
    written_bytes: int
    tier2_bytes: int
    log_bytes_at_kill: int
    seconds: float


@dataclass(frozen=True)
class CpuRow:
    """Cores used (CPU seconds / wall seconds) by each part of the system during one run."""

    config: str
    driver: float
    containers: float
    ray: float
    s3_server: float
    other: float
    system_total: float


@dataclass
class Report:
    """Everything measured in one run, by event size; printed at the end."""

    rows: dict[int, list[Row]] = field(default_factory=dict)
    recovery: list[RecoveryRow] = field(default_factory=list)
    cpu: list[CpuRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, size: int, row: Row) -> None:
        self.rows.setdefault(size, []).append(row)

    def find(self, size: int, prefix: str, call: str | None = None) -> Row | None:
        """The first row for ``size`` whose system starts with ``prefix`` (and has ``call``)."""
        for row in self.rows.get(size, []):
            if row.system.startswith(prefix) and (call is None or row.call == call):
                return row
        return None


# --- Events and pacing -------------------------------------------------------------------------


def frame_header(payload_bytes: int) -> bytes:
    """The event frame header: type 0 (plain event) and the length, big-endian (pravega-ray's)."""
    return struct.pack(">II", 0, payload_bytes)


def make_payloads(payload_bytes: int, count: int = DISTINCT_PAYLOADS) -> list[bytes]:
    """``count`` distinct random payloads of ``payload_bytes`` each."""
    return [os.urandom(payload_bytes) for _ in range(count)]


def events_for(payload_bytes: int, reference_events: int) -> int:
    """Events of ``payload_bytes`` carrying as many payload bytes as ``reference_events`` 100-byte
    ones (at least EVENTS_PER_RUN_MIN, never more than ``reference_events``)."""
    scaled = reference_events * REFERENCE_EVENT_BYTES // max(1, payload_bytes)
    return max(min(EVENTS_PER_RUN_MIN, reference_events), min(reference_events, scaled))


def run_paced(
    submit_burst: Callable[[int, int], None],
    rate_events_per_s: int,
    seconds: float,
    backlog: Callable[[], int] | None = None,
) -> tuple[float, bool]:
    """Call ``submit_burst(first_index, count)`` every BURST_INTERVAL_S for ``seconds``.

    The schedule is absolute (burst k is due at start + k * interval), so a late burst is followed
    by catch-up bursts and the average rate stays at ``rate_events_per_s`` if the system keeps up.
    Returns (achieved events/s, overloaded). With ``backlog()`` (events handed over, not yet
    acknowledged) given, it stops early once that exceeds OVERLOAD_BACKLOG_S worth of events,
    and the run counts as overloaded if so, if it achieved under KEEP_UP_FRACTION of the rate,
    or if over its second half acks came at under ACK_KEEP_UP_FRACTION of the hand-over rate.
    """
    per_burst = max(1, round(rate_events_per_s * BURST_INTERVAL_S))
    bursts = max(1, round(seconds / BURST_INTERVAL_S))
    backlog_max = rate_events_per_s * OVERLOAD_BACKLOG_S
    overloaded = False
    middle: tuple[float, int, int] | None = None  # (time, handed over, acknowledged)
    start = time.perf_counter()
    sent = 0
    for k in range(bursts):
        delay = start + k * BURST_INTERVAL_S - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        submit_burst(k * per_burst, per_burst)
        sent += per_burst
        if backlog is None:
            continue
        if k == bursts // 2:
            middle = (time.perf_counter(), sent, sent - backlog())
        if k % 100 == 99 and backlog() > backlog_max:
            overloaded = True
            break
    end = time.perf_counter()
    achieved = sent / (end - start)
    if backlog is not None and middle is not None and end > middle[0]:
        handed_over = sent - middle[1]
        acknowledged = sent - backlog() - middle[2]
        overloaded = overloaded or acknowledged < ACK_KEEP_UP_FRACTION * handed_over
    return achieved, overloaded or achieved < KEEP_UP_FRACTION * rate_events_per_s


def wait_all_stamped(done_at: dict[int, float], expected: int, what: str) -> None:
    """Wait (up to ACK_WAIT_S) until ``done_at`` holds ``expected`` acknowledgement times."""
    deadline = time.monotonic() + ACK_WAIT_S
    while len(done_at) < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {expected - len(done_at)} events never acknowledged")
        time.sleep(0.005)


# --- Baseline: raw append + fsync group commit -------------------------------------------------


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
    path: Path, events: int, payload_bytes: int = 100, group_bytes: int = GROUP_COMMIT_BYTES
) -> Throughput:
    """Frame ``events`` events and append them to ``path`` in fsynced groups of ``group_bytes``.

    The frame work is in the timing, as it is in the writer: a parts list per group, one join.
    The file is removed afterwards.
    """
    payloads = make_payloads(payload_bytes)
    mask = len(payloads) - 1
    events_per_group = max(1, group_bytes // (payload_bytes + 8))
    header = frame_header(payload_bytes)
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
    return Throughput(events, elapsed, payload_bytes)


def raw_fsync_latency(
    path: Path,
    seconds: float,
    payload_bytes: int = 100,
    rate_events_per_s: int = LATENCY_RATE_EVENTS_PER_S,
    group_bytes: int = GROUP_COMMIT_BYTES,
) -> Latency:
    """Ack latency of group commit at a paced rate.

    The calling thread enqueues framed events in bursts (see ``run_paced``); a commit thread
    takes whatever is queued (up to ``group_bytes``), writes and fsyncs it, and stamps every
    event of the group done. Latency = fsync completion - enqueue. The file is removed afterwards.
    """
    payloads = make_payloads(payload_bytes)
    header = frame_header(payload_bytes)
    mask = len(payloads) - 1
    queue: collections.deque[tuple[int, bytes]] = collections.deque()
    ready = threading.Condition()
    enqueued_at: list[float] = []
    done_at: dict[int, float] = {}
    stopping = False
    max_group = max(1, group_bytes // (payload_bytes + 8))
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
                queue.append((index, header + payloads[index & mask]))
            ready.notify()

    with _open_log(path) as fd:
        committer = threading.Thread(target=commit_loop, args=(fd,), name="group-commit")
        committer.start()
        try:
            achieved, overloaded = run_paced(
                submit_burst,
                rate_events_per_s,
                seconds,
                backlog=lambda: len(enqueued_at) - len(done_at),
            )
        finally:
            with ready:
                stopping = True
                ready.notify()
            committer.join()
    if errors:
        raise errors[0]
    latencies = [done_at[i] - t for i, t in enumerate(enqueued_at)]
    return Latency(latencies, achieved, overloaded)


# --- Baseline: Redis Streams -------------------------------------------------------------------


def _die_with_parent() -> None:
    """Runs in a child before exec: ask Linux to SIGTERM it when this process dies."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def redis_command(*args: bytes) -> bytes:
    """One command in RESP (an array of bulk strings)."""
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


@contextlib.contextmanager
def running_redis(binary: str, directory: Path) -> Iterator[int]:
    """Start ``redis-server`` (AOF on, fsync on every write, no RDB) on a free loopback port.

    Yields the port once it answers PING; stops it (SIGTERM, SIGKILL after STOP_GRACE_S) and
    leaves ``directory`` to the caller. Raises RuntimeError if it does not come up.
    """
    port = _free_port()
    directory.mkdir(parents=True, exist_ok=True)
    command = [
        binary,
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--dir", str(directory),
        "--appendonly", "yes",
        "--appendfsync", "always",
        "--save", "",
        "--protected-mode", "no",
        "--daemonize", "no",
        "--logfile", str(directory / "redis.log"),
    ]  # fmt: skip
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    try:
        deadline = time.monotonic() + REDIS_READY_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"redis-server exited with code {process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(redis_command(b"PING"))
                    if s.recv(64).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not answer PING in time")
            time.sleep(0.05)
        yield port
    finally:
        _stop_process(process)


class _ReplyCounter:
    """Counts RESP replies to XADD (bulk strings: two CRLFs each) as bytes arrive.

    An error reply (a line starting with "-"; stream ids start with a digit) raises RuntimeError.
    """

    def __init__(self) -> None:
        self.crlf = 0
        self._carry = b""
        self._last = b"\n"

    def feed(self, data: bytes) -> int:
        """Add received bytes; returns the number of complete replies so far."""
        if b"\n-" in self._last + data[:1] or b"\n-" in data:
            raise RuntimeError(f"redis error reply: {data[:200]!r}")
        buffer = self._carry + data
        self.crlf += buffer.count(b"\r\n")
        self._carry = b"\r" if buffer.endswith(b"\r") else b""
        self._last = data[-1:]
        return self.crlf // 2


def _xadd_commands(key: bytes, payloads: list[bytes]) -> list[bytes]:
    return [redis_command(b"XADD", key, b"*", b"d", p) for p in payloads]


def redis_throughput(port: int, events: int, payload_bytes: int, key: bytes) -> Throughput:
    """Pipelined XADD of ``events`` payloads on one connection; timed until the last reply.

    A sender thread writes batches of commands (TCP flow control bounds how far it runs
    ahead); this thread counts replies. Each reply comes after Redis fsynced its AOF.
    """
    commands = _xadd_commands(key, make_payloads(payload_bytes))
    mask = len(commands) - 1
    per_chunk = max(1, 64 * 1024 // len(commands[0]))
    errors: list[BaseException] = []
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def send_all() -> None:
            try:
                for first in range(0, events, per_chunk):
                    last = min(events, first + per_chunk)
                    sock.sendall(b"".join([commands[i & mask] for i in range(first, last)]))
            except BaseException as e:  # surfaced after the reply loop
                errors.append(e)

        counter = _ReplyCounter()
        start = time.perf_counter()
        sender = threading.Thread(target=send_all, name="redis-sender", daemon=True)
        sender.start()
        replies = 0
        sock.settimeout(ACK_WAIT_S)
        while replies < events:
            data = sock.recv(1 << 20)
            if not data:
                raise RuntimeError("redis closed the connection")
            replies = counter.feed(data)
        elapsed = time.perf_counter() - start
        sender.join()
    if errors:
        raise errors[0]
    return Throughput(events, elapsed, payload_bytes)


def redis_latency(
    port: int, seconds: float, payload_bytes: int, key: bytes, rate_events_per_s: int
) -> Latency:
    """XADD in paced bursts on one connection; a reader thread stamps replies (in order)."""
    commands = _xadd_commands(key, make_payloads(payload_bytes))
    mask = len(commands) - 1
    sent_at: list[float] = []
    done_at: dict[int, float] = {}
    errors: list[BaseException] = []
    stop = threading.Event()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def read_replies() -> None:
            counter = _ReplyCounter()
            done = 0
            try:
                while True:
                    data = sock.recv(1 << 20)
                    if not data:
                        if stop.is_set():
                            return
                        raise RuntimeError("redis closed the connection")
                    now = time.perf_counter()
                    replies = counter.feed(data)
                    for index in range(done, replies):
                        done_at[index] = now
                    done = replies
            except BaseException as e:  # surfaced after pacing
                errors.append(e)

        reader = threading.Thread(target=read_replies, name="redis-replies", daemon=True)
        reader.start()

        def submit_burst(first: int, count: int) -> None:
            now = time.perf_counter()
            sent_at.extend([now] * count)
            sock.sendall(b"".join([commands[i & mask] for i in range(first, first + count)]))

        achieved, overloaded = run_paced(
            submit_burst, rate_events_per_s, seconds, backlog=lambda: len(sent_at) - len(done_at)
        )
        deadline = time.monotonic() + ACK_WAIT_S
        while len(done_at) < len(sent_at) and not errors and time.monotonic() < deadline:
            time.sleep(0.005)
        stop.set()
        sock.shutdown(socket.SHUT_RDWR)  # ends the reader's recv
        reader.join(ACK_WAIT_S)
    if errors:
        raise errors[0]
    wait_all_stamped(done_at, len(sent_at), "redis")
    return Latency([done_at[i] - t for i, t in enumerate(sent_at)], achieved, overloaded)


def run_redis(
    report: Report, binary: str, work_dir: Path, sizes: Sequence[int], events: int, args: Any
) -> None:
    """Start Redis, measure every event size, stop it; rows go to ``report``."""
    with running_redis(binary, work_dir / "redis") as port:
        for size in sizes:
            count = events_for(size, events)
            key = b"bench:%d" % size
            log(f"redis: {count:,} pipelined XADD of {size:,}-byte events")
            bulk = redis_throughput(port, count, size, key)
            log(f"redis: {bulk.events_per_s:,.0f} events/s, {bulk.mb_per_s:,.1f} MB/s")
            paced = redis_latency(
                port, args.latency_seconds, size, key + b":lat", args.latency_rate
            )
            log(f"redis: {paced.describe()}")
            report.add(size, Row.of("redis streams (AOF always)", "XADD pipelined", bulk, paced))
    shutil.rmtree(work_dir / "redis", ignore_errors=True)


# --- Baseline: bare Ray ceiling and a no-op actor call -----------------------------------------


class FsyncActor:
    """A sync (single-threaded) actor that appends each block it is given to a file and fsyncs.

    The least a Ray-based durable log can do per block: what is left between this and
    pravega-ray is the cost of pravega-ray's own work (writer, container, log format).
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)

    def append(self, block: bytes) -> int:
        """Append ``block`` and fsync; returns its length once durable."""
        view = memoryview(block)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)
        return len(block)

    def close(self) -> None:
        """Close and remove the file."""
        os.close(self._fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path)


def bare_ray_throughput(
    actor: Any,
    events: int,
    payload_bytes: int,
    block_bytes: int = BARE_RAY_BLOCK_BYTES,
    in_flight: int = BARE_RAY_IN_FLIGHT,
) -> Throughput:
    """Frame ``events`` events into blocks of ``block_bytes``, keep ``in_flight`` appends going."""
    import ray

    payloads = make_payloads(payload_bytes)
    mask = len(payloads) - 1
    header = frame_header(payload_bytes)
    parts_per_block = 2 * max(1, block_bytes // (payload_bytes + 8))
    pending: list[Any] = []
    parts: list[bytes] = []
    append = parts.append

    def send() -> None:
        nonlocal pending
        if len(pending) >= in_flight:
            ready, pending = ray.wait(pending, num_returns=1)
            ray.get(ready)
        pending.append(actor.append.remote(b"".join(parts)))
        parts.clear()

    start = time.perf_counter()
    for i in range(events):
        append(header)
        append(payloads[i & mask])
        if len(parts) >= parts_per_block:
            send()
    if parts:
        send()
    ray.get(pending)
    return Throughput(events, time.perf_counter() - start, payload_bytes)


def bare_ray_latency(
    actor: Any,
    seconds: float,
    payload_bytes: int,
    rate_events_per_s: int = LATENCY_RATE_EVENTS_PER_S,
    in_flight: int = BARE_RAY_LATENCY_IN_FLIGHT,
) -> Latency:
    """Paced events; at each burst, everything batched is sent if fewer than ``in_flight`` calls
    are outstanding. Each event's latency runs from its burst to its block's completion."""
    payloads = make_payloads(payload_bytes)
    mask = len(payloads) - 1
    header = frame_header(payload_bytes)
    sent_at: list[float] = []
    done_at: dict[int, float] = {}
    lock = threading.Lock()
    outstanding: dict[int, Any] = {}  # keeps each ObjectRef alive until its call completes
    parts: list[bytes] = []
    batched: list[int] = []
    call_ids = iter(range(1 << 62))
    failures: list[BaseException] = []

    def on_done(call_id: int, indices: list[int], future: Any) -> None:
        now = time.perf_counter()
        if future.exception() is not None:
            failures.append(future.exception())
        for index in indices:
            done_at[index] = now
        with lock:
            outstanding.pop(call_id, None)

    def send_batched() -> None:
        with lock:
            if not batched or len(outstanding) >= in_flight:
                return
            call_id = next(call_ids)
            ref = actor.append.remote(b"".join(parts))
            outstanding[call_id] = ref
            indices = batched.copy()
            parts.clear()
            batched.clear()
        ref.future().add_done_callback(functools.partial(on_done, call_id, indices))

    def submit_burst(first: int, count: int) -> None:
        now = time.perf_counter()
        for index in range(first, first + count):
            sent_at.append(now)
            parts.append(header)
            parts.append(payloads[index & mask])
            batched.append(index)
        send_batched()

    achieved, overloaded = run_paced(
        submit_burst, rate_events_per_s, seconds, backlog=lambda: len(sent_at) - len(done_at)
    )
    deadline = time.monotonic() + ACK_WAIT_S
    while batched and time.monotonic() < deadline:
        send_batched()
        time.sleep(0.0005)
    wait_all_stamped(done_at, len(sent_at), "bare Ray")
    if failures:
        raise failures[0]
    return Latency([done_at[i] - t for i, t in enumerate(sent_at)], achieved, overloaded)


def run_bare_ray(
    report: Report, work_dir: Path, sizes: Sequence[int], events: int, args: Any
) -> None:
    """Measure the bare Ray ceiling for every event size (Ray must be up)."""
    import ray

    for size in sizes:
        path = work_dir / f"bare-ray-{size}.log"
        actor = ray.remote(num_cpus=0)(FsyncActor).remote(str(path))  # type: ignore[attr-defined]
        try:
            count = events_for(size, events)
            bare_ray_throughput(actor, min(count, WARM_UP_EVENTS), size)
            log(f"bare Ray: {count:,} {size:,}-byte events, 1 MiB blocks, 16 in flight")
            bulk = bare_ray_throughput(actor, count, size)
            log(f"bare Ray: {bulk.events_per_s:,.0f} events/s, {bulk.mb_per_s:,.1f} MB/s")
            paced = bare_ray_latency(actor, args.latency_seconds, size, args.latency_rate)
            log(f"bare Ray: {paced.describe()}")
            report.add(size, Row.of("bare Ray ceiling (sync actor)", "actor.append", bulk, paced))
            ray.get(actor.close.remote())
        finally:
            ray.kill(actor)


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


# --- CPU accounting (Linux /proc) --------------------------------------------------------------


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


# --- pravega-ray -------------------------------------------------------------------------------


def routing_keys_per_segment(cluster: Any, scope: str, stream: str) -> list[str]:
    """One routing key landing in each segment of the stream, in key-range order."""
    from pravega_ray.naming import routing_key_hash

    ranges = sorted(
        cluster.stream_manager().get_stream_info(scope, stream).segments, key=lambda s: s.key_low
    )
    keys: list[str | None] = [None] * len(ranges)
    candidate = 0
    while any(k is None for k in keys):
        key = f"k{candidate}"
        point = routing_key_hash(key)
        for i, r in enumerate(ranges):
            if keys[i] is None and r.key_low <= point < r.key_high:
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
) -> Latency:
    """Ack latency of ``writer`` at a paced rate, from each event's done callback.

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
        submit_burst, rate_events_per_s, seconds, backlog=lambda: len(sent_at) - len(done_at)
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


# --- Container recovery ------------------------------------------------------------------------


def _log_files(log_dir: Path) -> list[Path]:
    return sorted(log_dir.glob("log-*.dat"))


def log_bytes_on_disk(log_dir: Path) -> int:
    """Bytes of the filesystem durable log's record files in ``log_dir``."""
    return sum(p.stat().st_size for p in _log_files(log_dir))


def drop_page_cache(paths: Sequence[Path]) -> None:
    """Ask the kernel to drop cached pages of ``paths`` (they are clean: fsynced)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def time_container_restart(handle: Any, timeout_s: float = RECOVERY_WAIT_S) -> float:
    """Kill the container actor (Ray restarts it; its constructor replays the log) and return
    the seconds until a ``describe`` call is answered by the new process."""
    import ray
    from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

    old_pid = ray.get(handle.describe.remote())["pid"]
    start = time.perf_counter()
    ray.kill(handle, no_restart=False)
    deadline = start + timeout_s
    while time.perf_counter() < deadline:
        try:
            answer = ray.get(handle.describe.remote(), timeout=deadline - time.perf_counter())
            if answer["pid"] != old_pid:
                return time.perf_counter() - start
        except (RayActorError, ActorUnavailableError, GetTimeoutError):
            pass
        time.sleep(RECOVERY_POLL_S)
    raise TimeoutError(f"container did not answer within {timeout_s:.0f}s of its restart")


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


# --- S3 (SeaweedFS) ----------------------------------------------------------------------------


@contextlib.contextmanager
def s3_environment() -> Iterator[str]:
    """Start SeaweedFS (tests/s3_server.py), create the bucket, point boto3's standard chain at it
    in ``os.environ`` (Ray workers started afterwards inherit it); yields the Tier-1 URL.

    Everything is undone on exit. Raises RuntimeError if the server cannot start.
    """
    path = REPO_ROOT / "tests" / "s3_server.py"
    spec = importlib.util.spec_from_file_location("pravega_bench_s3_server", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    with module.running_s3_server() as server:
        server.client().create_bucket(Bucket=SEAWEED_BUCKET)
        saved = {k: os.environ.get(k) for k in server.environment()}
        os.environ.update(server.environment())
        try:
            yield f"s3://{SEAWEED_BUCKET}/tier1"
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


# --- Report ------------------------------------------------------------------------------------


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
        if r.system.startswith("pravega-ray") and " 1 seg" in r.system and "FAILED" not in r.system
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


# --- Command line ------------------------------------------------------------------------------


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not comma-separated integers: {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"need positive integers: {text!r}")
    return values


def _tier_list(text: str) -> list[str]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not values or any(v not in ("file", "s3") for v in values):
        raise argparse.ArgumentTypeError(f"Tier-1 kinds are file and s3: {text!r}")
    return values


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Durable append throughput, ack latency and recovery time of pravega-ray "
        "(one writer), against raw fsync group commit, a bare Ray actor and Redis Streams.",
    )
    parser.add_argument(
        "--events",
        type=int,
        default=1_000_000,
        help="events per throughput run of 100-byte events; larger events get the same payload "
        "bytes (default 1M, i.e. ~100 MB per run)",
    )
    parser.add_argument(
        "--latency-seconds",
        type=float,
        default=5.0,
        help="length of each paced latency run (default 5)",
    )
    parser.add_argument(
        "--latency-rate",
        type=int,
        default=LATENCY_RATE_EVENTS_PER_S,
        help=f"events/s of the paced latency runs (default {LATENCY_RATE_EVENTS_PER_S:,})",
    )
    parser.add_argument(
        "--event-sizes",
        type=_int_list,
        default=list(DEFAULT_EVENT_SIZES),
        help="payload sizes in bytes, comma-separated (default 100,10240)",
    )
    parser.add_argument(
        "--segments",
        type=_int_list,
        default=list(DEFAULT_SEGMENTS),
        help="segments per stream, comma-separated (default 1,16)",
    )
    parser.add_argument(
        "--tier1",
        type=_tier_list,
        default=list(DEFAULT_TIER1),
        help="Tier-1 durable logs to measure: file, s3 (SeaweedFS started here); default file,s3",
    )
    parser.add_argument(
        "--containers",
        type=int,
        default=4,
        help="segment containers of the measured clusters (default 4, pravega-ray's default)",
    )
    parser.add_argument(
        "--recovery-gib",
        type=float,
        default=1.0,
        help="GiB written before the container recovery measurements; 0 skips them (default 1)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where files are written (default: a temporary directory). Everything the run "
        "writes there is removed afterwards. Use a directory on the disk you want to measure.",
    )
    parser.add_argument(
        "--actor-calls", type=int, default=5000, help="pipelined no-op actor calls (default 5000)"
    )
    parser.add_argument("--skip-pravega", action="store_true", help="measure the baselines only")
    parser.add_argument("--skip-redis", action="store_true", help="no Redis Streams baseline")
    parser.add_argument("--skip-bare-ray", action="store_true", help="no bare Ray ceiling")
    parser.add_argument(
        "--skip-write-events", action="store_true", help="no write_events (batch) rows"
    )
    args = parser.parse_args(argv)
    if args.events < 1 or args.latency_seconds <= 0 or args.actor_calls < 1:
        parser.error("--events, --latency-seconds and --actor-calls must be positive")
    if args.latency_rate < 1 or args.containers < 1 or args.recovery_gib < 0:
        parser.error("--latency-rate and --containers must be positive, --recovery-gib >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run every selected phase and print the report; returns the process exit code."""
    args = parse_args(argv)
    run_id = f"{os.getpid()}-{int(time.time())}"
    base = args.data_dir if args.data_dir is not None else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix="pravega-bench-", dir=base))
    report = Report()
    exit_code = 0
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, work_dir, True)
        try:
            for size in args.event_sizes:
                count = events_for(size, args.events)
                path = work_dir / f"raw-{size}.log"
                log(f"raw append+fsync: {count:,} {size:,}-byte events, groups of up to 1 MiB")
                bulk = raw_fsync_throughput(path, count, size)
                log(f"raw append+fsync: {bulk.events_per_s:,.0f} events/s")
                paced = raw_fsync_latency(path, args.latency_seconds, size, args.latency_rate)
                log(f"raw append+fsync: {paced.describe()}")
                report.add(
                    size, Row.of("raw append+fsync (group commit)", "write+fsync", bulk, paced)
                )

            redis_binary = shutil.which("redis-server")
            if args.skip_redis:
                report.notes.append("Redis Streams skipped (--skip-redis)")
            elif redis_binary is None:
                message = (
                    "Redis Streams skipped: redis-server not found (apt-get install redis-server)"
                )
                log(message)
                report.notes.append(message)
            else:
                try:
                    run_redis(report, redis_binary, work_dir, args.event_sizes, args.events, args)
                except Exception as e:  # a baseline failing is reported, not fatal
                    log(f"redis: FAILED: {e!r}")
                    report.notes.append(f"Redis Streams failed: {e!r}")

            s3_url: str | None = None
            if "s3" in args.tier1 and not args.skip_pravega:
                try:
                    log("s3: starting SeaweedFS (tests/s3_server.py)")
                    s3_url = stack.enter_context(s3_environment())
                except Exception as e:
                    log(f"s3: FAILED to start: {e!r}")
                    report.notes.append(f"S3 Tier-1 skipped: SeaweedFS did not start: {e!r}")

            import ray

            log("starting Ray: ray.init(num_cpus=2)")
            os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
            ray.init(
                address="local",
                num_cpus=2,
                namespace="pravega-bench",
                include_dashboard=False,
                logging_level="WARNING",
            )
            stack.callback(ray.shutdown)

            calls = ray_actor_call_rates(pipelined_calls=args.actor_calls)
            round_trip = Latency(calls.sequential_round_trips_s, 0.0)
            report.notes.append(
                f"one sync Ray actor, no-op method: {calls.pipelined_calls_per_s:,.0f} calls/s "
                f"pipelined, round trip p50 {round_trip.p50_ms:.2f} ms / p99 "
                f"{round_trip.p99_ms:.2f} ms, 1 MiB arguments {calls.large_call_mb_per_s:,.0f} MB/s"
            )
            log(report.notes[-1])

            if not args.skip_bare_ray:
                run_bare_ray(report, work_dir, args.event_sizes, args.events, args)

            if args.skip_pravega:
                report.notes.append("pravega-ray skipped (--skip-pravega)")
            else:
                for tier1 in args.tier1:
                    if tier1 == "s3" and s3_url is None:
                        continue
                    url = s3_url if tier1 == "s3" else None
                    try:
                        if not run_pravega_tier(report, tier1, url, work_dir, args, run_id):
                            exit_code = 1
                    except Exception as e:
                        log(f"pravega-ray on {tier1}: FAILED: {e!r}")
                        report.notes.append(f"pravega-ray on Tier-1 {tier1} failed: {e!r}")
                        exit_code = 1
                if args.recovery_gib > 0:
                    try:
                        run_recovery(report, work_dir, args.recovery_gib, run_id)
                    except Exception as e:
                        log(f"recovery: FAILED: {e!r}")
                        report.notes.append(f"container recovery failed: {e!r}")
                        exit_code = 1
        finally:
            log("stopping Ray and the servers started here; removing files")

    import ray

    print_report(
        report,
        args,
        f"append_throughput  {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}  "
        f"{os.cpu_count()} CPUs  Python {platform.python_version()}  Ray {ray.__version__}  "
        f"{args.containers} containers; one writer; acks mean fsynced",
    )
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
