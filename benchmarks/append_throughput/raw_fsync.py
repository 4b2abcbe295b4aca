"""Baseline: raw append + fsync group commit, the floor set by this disk and plain Python."""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.append_throughput.model import (
    LATENCY_RATE_EVENTS_PER_S,
    Latency,
    Report,
    Row,
    Throughput,
)
from benchmarks.append_throughput.pacing import events_for, frame_header, make_payloads, run_paced
from benchmarks.common import log

GROUP_COMMIT_BYTES = 1024 * 1024
"""Bytes one write + fsync of the raw baseline carries at most."""


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


def run_raw_fsync(
    report: Report, work_dir: Path, sizes: Sequence[int], events: int, args: Any
) -> None:
    """Measure raw append+fsync for every event size; rows go to ``report``."""
    for size in sizes:
        count = events_for(size, events)
        path = work_dir / f"raw-{size}.log"
        log(f"raw append+fsync: {count:,} {size:,}-byte events, groups of up to 1 MiB")
        bulk = raw_fsync_throughput(path, count, size)
        log(f"raw append+fsync: {bulk.events_per_s:,.0f} events/s")
        paced = raw_fsync_latency(path, args.latency_seconds, size, args.latency_rate)
        log(f"raw append+fsync: {paced.describe()}")
        report.add(size, Row.of("raw append+fsync (group commit)", "write+fsync", bulk, paced))
