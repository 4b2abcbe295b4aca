"""Baseline: the bare Ray ceiling (one sync actor that appends and fsyncs each block), and the
call rates of a no-op actor (a context line in the notes)."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.append_throughput.model import (
    ACK_WAIT_S,
    LATENCY_RATE_EVENTS_PER_S,
    MB,
    WARM_UP_EVENTS,
    Latency,
    Report,
    Row,
    Throughput,
)
from benchmarks.append_throughput.pacing import (
    events_for,
    frame_header,
    make_payloads,
    run_paced,
    wait_all_stamped,
)
from benchmarks.common import log

BARE_RAY_BLOCK_BYTES = 1024 * 1024
BARE_RAY_IN_FLIGHT = 16
BARE_RAY_LATENCY_IN_FLIGHT = 4
"""Calls the bare Ray ceiling keeps in flight: throughput runs, paced latency runs."""

LARGE_CALL_BYTES = 1024 * 1024
LARGE_CALLS_IN_FLIGHT = 16


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
