"""Baseline: Redis Streams (``redis-server`` with an fsync per write), pipelined ``XADD``."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.append_throughput.model import ACK_WAIT_S, Latency, Report, Row, Throughput
from benchmarks.append_throughput.pacing import (
    events_for,
    make_payloads,
    run_paced,
    wait_all_stamped,
)
from benchmarks.common import log
from benchmarks.redis_server import redis_command, running_redis


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
