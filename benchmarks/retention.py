"""How long one retention cycle takes over many streams, in process.

Run: ``.venv/bin/python -m benchmarks.retention [--streams N]`` (``make bench-retention``).

On an ``InProcessCluster`` (4 containers, memory tiers), ``--streams`` one-segment streams
with a size policy (min 20 bytes, no max), 100 bytes in each. Then, timed, one thread:

- ``baseline``: the same number of plain metadata reads (one ``get`` of each stream's
  record) and of segment-length calls: the floor a cycle cannot go under;
- ``cycle 1``: every stream's first cycle (a tail cut added, nothing to truncate);
- ``cycle 2``: after 100 more bytes in each: a truncation requested for every stream;
- ``cycle 3``: after the truncations completed, nothing new: the steady state.

Before the passes it prints the time to create a stream, the first 100 against the last
100 of the run (did it grow with the number of streams already there).

For each: total seconds, milliseconds per stream, metadata reads and writes per stream
(counted by a wrapper around the store) and truncations requested. Timings are the
in-process cost: on Ray, each metadata or segment call adds an actor round trip.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks.common import print_table
from pravega_ray.controller.retention_service import RetentionService
from pravega_ray.controller.stream_metadata_store import MetadataStore, Versioned
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import stream_segment_name
from pravega_ray.stream_configuration import RetentionPolicy, ScalingPolicy, StreamConfiguration


class CountingStore:
    """A :class:`MetadataStore` that counts the calls made through it."""

    def __init__(self, inner: MetadataStore) -> None:
        self._inner = inner
        self.reads = 0
        self.writes = 0

    def get(self, key: str) -> Versioned | None:
        self.reads += 1
        return self._inner.get(key)

    def put(self, key: str, value: dict[str, Any], expected_version: int | None) -> int:
        self.writes += 1
        return self._inner.put(key, value, expected_version)

    def delete(self, key: str) -> None:
        self.writes += 1
        self._inner.delete(key)

    def list_keys(self, prefix: str) -> list[str]:
        self.reads += 1
        return self._inner.list_keys(prefix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    args = parser.parse_args()
    n = args.streams
    cluster = InProcessCluster(container_count=4)
    try:
        rows = run(cluster, n)
    finally:
        cluster.shutdown()
    print_table(
        f"Retention over {n:,} streams (in process, 4 containers, memory tiers)",
        ["pass", "seconds", "ms/stream", "reads/stream", "writes/stream", "truncations"],
        rows,
    )


def run(cluster: InProcessCluster, n: int) -> list[list[object]]:
    mgr = cluster.stream_manager()
    mgr.create_scope("bench")
    config = StreamConfiguration(ScalingPolicy.fixed(1), RetentionPolicy.by_size(20, 0))
    start = time.perf_counter()
    times = []
    for i in range(n):
        begun = time.perf_counter()
        mgr.create_stream("bench", f"s{i}", config)
        times.append(time.perf_counter() - begun)
    print(f"created {n:,} streams in {time.perf_counter() - start:.1f}s", flush=True)
    # Whether creating a stream slows down as streams accumulate: the first 100 against
    # the last 100 of the same run (each with as many streams before it as its index).
    first, last = times[:100], times[-100:]
    print(
        f"create_stream: {sum(first) / len(first) * 1000:.2f} ms/stream for the first "
        f"{len(first)}, {sum(last) / len(last) * 1000:.2f} ms/stream for the last {len(last)}",
        flush=True,
    )
    names = [
        stream_segment_name(
            "bench", f"s{i}", mgr.get_stream_info("bench", f"s{i}").segments[0].segment_id
        )
        for i in range(n)
    ]
    helper = cluster._segment_helper()

    def append_all() -> None:
        for name in names:
            cluster.segments.append_conditional(name, b"x" * 100).result(30)

    append_all()
    counting = CountingStore(cluster.metadata)
    service = RetentionService(counting, helper)
    rows: list[list[object]] = []

    start = time.perf_counter()
    for i in range(n):
        counting.get(f"streams/bench/s{i}")
        helper.segment_length(names[i])
    rows.append(_row("baseline: 1 read + 1 length", start, n, counting, 0))

    for label in ("cycle 1 (tail cut added)", "cycle 2 (truncation requested)"):
        if label.startswith("cycle 2"):
            append_all()
        counting.reads = counting.writes = 0
        start = time.perf_counter()
        results = service.run_streams()
        rows.append(_row(label, start, n, counting, sum(r.requested for r in results)))
    deadline = time.monotonic() + 600
    while not all(cluster.core.check_truncate("bench", f"s{i}") for i in range(n)):
        assert time.monotonic() < deadline, "truncations did not complete"
        time.sleep(0.2)
    counting.reads = counting.writes = 0
    start = time.perf_counter()
    results = service.run_streams()
    rows.append(
        _row("cycle 3 (steady, nothing new)", start, n, counting, sum(r.requested for r in results))
    )
    return rows


def _row(
    label: str, start: float, n: int, counting: CountingStore, truncations: int
) -> list[object]:
    elapsed = time.perf_counter() - start
    row: list[object] = [
        label,
        elapsed,
        elapsed / n * 1000,
        counting.reads / n,
        counting.writes / n,
    ]
    counting.reads = counting.writes = 0
    return [*row, truncations]


if __name__ == "__main__":
    main()
