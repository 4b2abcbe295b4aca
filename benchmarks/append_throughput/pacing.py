"""Events and pacing: the framed payloads every system is given, how many events a run of a
given size gets, and the absolute schedule of the paced latency runs."""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable

from benchmarks.append_throughput.model import ACK_WAIT_S, DISTINCT_PAYLOADS, REFERENCE_EVENT_BYTES

EVENTS_PER_RUN_MIN = 2_000

BURST_INTERVAL_S = 0.001
"""Pacing: every BURST_INTERVAL_S, hand over rate * BURST_INTERVAL_S events (10 at 10k/s)."""

OVERLOAD_BACKLOG_S = 1.0
"""A paced run stops once this many seconds' worth of events are unacknowledged."""

KEEP_UP_FRACTION = 0.95
"""A paced run that achieves less than this fraction of its rate is marked overloaded..."""

ACK_KEEP_UP_FRACTION = 0.90
"""...and so is one whose acks, over its second half, arrive at less than this fraction of the
rate events were handed over at (its queue grows)."""


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
    *,
    computing: bool = False,
) -> tuple[float, bool]:
    """Call ``submit_burst(first_index, count)`` every BURST_INTERVAL_S for ``seconds``.

    ``computing``: the calling thread computes (pure Python, holding the interpreter lock)
    until each burst is due instead of sleeping, as a program doing work between writes does.

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
        due = start + k * BURST_INTERVAL_S
        if computing:
            _compute_until(due)
        else:
            delay = due - time.perf_counter()
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


def _compute_until(due: float) -> int:
    """Busy work in Python bytecode (the interpreter lock held throughout) until ``due``."""
    total = 0
    clock = time.perf_counter
    while clock() < due:
        for i in range(50):
            total += i * i
    return total


def wait_all_stamped(done_at: dict[int, float], expected: int, what: str) -> None:
    """Wait (up to ACK_WAIT_S) until ``done_at`` holds ``expected`` acknowledgement times."""
    deadline = time.monotonic() + ACK_WAIT_S
    while len(done_at) < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {expected - len(done_at)} events never acknowledged")
        time.sleep(0.005)
