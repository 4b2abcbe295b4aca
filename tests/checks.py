"""Shared checkers: read a group back with one thread per reader, read a stream back
exactly (one reader), and the invariants every acknowledged event must satisfy (read
once, in order per routing key).

Events in these tests are JSON objects ``{"k": routing key, "n": write sequence}``.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import defaultdict
from typing import Any

import pravega_ray as pr
from pravega_ray.inprocess import InProcessCluster


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


JSON = pr.JsonSerializer()
"""The serializer :func:`read_exactly` decodes with unless told."""


def read_exactly(
    cluster: Any,
    scope: str,
    stream: str,
    expected: int,
    *,
    timeout_s: float = 30.0,
    poll_s: float = 0.2,
    extra_wait_s: float = 0.3,
    serializer: Any = JSON,
) -> list[Any]:
    """Every event of ``scope/stream``, read by one reader of a fresh group: exactly
    ``expected`` of them (waits up to ``timeout_s`` for them, then ``extra_wait_s`` more to
    check that nothing else arrives). Events decode with ``serializer`` (JSON unless told;
    None: bytes)."""
    group = "rg" + uuid.uuid4().hex[:8]
    cluster.create_reader_group(scope, group, pr.ReaderGroupConfig.for_streams(f"{scope}/{stream}"))
    with cluster.create_reader("r", scope, group, serializer) as reader:
        return read_count(
            reader, expected, timeout_s=timeout_s, poll_s=poll_s, extra_wait_s=extra_wait_s
        )


def read_count(
    reader: Any,
    expected: int,
    *,
    timeout_s: float = 30.0,
    poll_s: float = 0.5,
    extra_wait_s: float = 0.5,
) -> list[Any]:
    """Exactly ``expected`` events (``EventRead``) from ``reader``: waits up to ``timeout_s``
    for them (reads of ``poll_s``; on a loaded machine a reader can take longer than one read
    to be handed its successors), then ``extra_wait_s`` more to see that nothing else
    arrives."""
    events: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(events) < expected and time.monotonic() < deadline:
        if (event := reader.read_next_event(timeout_s=poll_s)) is not None:
            events.append(event)
    extra = reader.read_next_event(timeout_s=extra_wait_s)
    assert extra is None, f"an event beyond the {expected} expected: {extra.event}"
    assert len(events) == expected, f"read {len(events)} events, expected {expected}"
    return events


def by_segment(events: list[Any]) -> dict[str, list[Any]]:
    """Each segment's events (their decoded values) in offset order."""
    segments: dict[str, list[Any]] = defaultdict(list)
    for e in events:
        segments[e.segment].append(e)
    return {s: [e.event for e in sorted(es, key=lambda e: e.offset)] for s, es in segments.items()}


def group_test_cluster(segments: int, **others: int) -> InProcessCluster:
    """An in-process cluster (2 containers, Tier-2 flushed every 50 ms) with scope ``sc``,
    stream ``sc/st`` of ``segments`` fixed segments, and each of ``others`` (stream name ->
    segments): the reader-group tests' cluster."""
    cluster = InProcessCluster(container_count=2, storage_flush_interval_s=0.05)
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    for stream, count in {"st": segments, **others}.items():
        mgr.create_stream("sc", stream, pr.StreamConfiguration(pr.ScalingPolicy.fixed(count)))
    return cluster


def write_numbered(
    cluster: Any, start: int, count: int, *, stream: str = "st", keys: int = 23
) -> None:
    """Write ``{"n": n}`` for n in [start, start + count) to ``sc/<stream>`` over ``keys``
    routing keys, and flush."""
    with cluster.create_writer("sc", stream, pr.JsonSerializer()) as writer:
        for n in range(start, start + count):
            writer.write_event({"n": n}, routing_key=f"k{n % keys}")
        writer.flush()


def stable_id(value: object) -> str:
    """A parametrized test's id for ``value``: its repr without memory addresses, so every
    process (pytest-xdist's workers) collects the same ids."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))
