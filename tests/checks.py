"""Shared checkers: read a group back with one thread per reader, and the invariants
every acknowledged event must satisfy (read once, in order per routing key).

Events in these tests are JSON objects ``{"k": routing key, "n": write sequence}``.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any


def read_with_threads(readers: list[Any], expected: int, timeout_s: float = 60.0) -> list[Any]:
    """Each reader in its own thread (as applications do) until ``expected`` events arrived."""
    got: list[Any] = []
    lock = threading.Lock()
    deadline = time.monotonic() + timeout_s

    def run(reader: Any) -> None:
        while time.monotonic() < deadline:
            with lock:
                if len(got) >= expected:
                    return
            event = reader.read_next_event(timeout_s=0.1)
            if event is not None:
                with lock:
                    got.append(event)

    threads = [threading.Thread(target=run, args=(r,)) for r in readers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got


def assert_exactly_once_in_key_order(events: list[Any], n: int) -> None:
    """Events ``0..n-1`` each read exactly once, and in write order per routing key."""
    numbers = [e.event["n"] for e in events]
    assert len(numbers) == n, f"read {len(numbers)} events, wrote {n}"
    assert sorted(numbers) == list(range(n)), "lost or duplicated events"
    per_key: dict[str, list[int]] = defaultdict(list)
    for e in events:
        per_key[e.event["k"]].append(e.event["n"])
    for key, seq in per_key.items():
        assert seq == sorted(seq), f"routing key {key} out of order"
