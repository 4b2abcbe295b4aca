"""The controller's record stores over an in-process cluster: puts/s, gets/s and list_keys.

Run: ``.venv/bin/python -m benchmarks.controller_metadata [--records N] [--prefixes P]``.

Measures, one thread, each call waiting for its durable answer:

- ``put``: ``--records`` new records (``put(key, value, None)``), keys spread over
  ``--prefixes`` parents (``streams/sc<i>/st<j>``);
- ``replace``: a CAS update of each record with the version of its put;
- ``get``: every record once;
- ``list_keys``: the children of one prefix (``--records / --prefixes`` of them), repeated.

For ``TableMetadataStore`` (table segments of ``_system`` on an ``InProcessCluster`` of 4
containers, memory tiers) and, as the same-run baseline, ``ChunkMetadataStore`` on memory
chunk storage (what unit tests and the format-5 controller used). Prints a table. Timings
here are the in-process cost only: on Ray each table call adds an actor round trip
(~1-1.5 ms, see docs/stack.md).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.controller.stream_metadata_store import ChunkMetadataStore, MetadataStore
from pravega_ray.controller.table_metadata_store import TableMetadataStore
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.storage.memory import InMemoryChunkStorage

VALUE = {"state": "ACTIVE", "config": {"scaling": "fixed", "min_segments": 4}, "epochs": [[0]]}


def _timed(calls: int, body: Callable[[], None]) -> tuple[float, float]:
    """(calls per second, total seconds) of ``body``."""
    start = time.perf_counter()
    body()
    elapsed = time.perf_counter() - start
    return calls / elapsed, elapsed


def measure(store: MetadataStore, records: int, prefixes: int) -> dict[str, str]:
    keys = [f"streams/sc{i % prefixes}/st{i}" for i in range(records)]
    versions: dict[str, int] = {}

    def put() -> None:
        for key in keys:
            versions[key] = store.put(key, VALUE, None)

    def replace() -> None:
        for key in keys:
            versions[key] = store.put(key, {**VALUE, "state": "SEALED"}, versions[key])

    def get() -> None:
        for key in keys:
            store.get(key)

    repeats = 20

    def list_keys() -> None:
        for _ in range(repeats):
            store.list_keys("streams/sc7")

    put_rate, _ = _timed(records, put)
    replace_rate, _ = _timed(records, replace)
    get_rate, _ = _timed(records, get)
    children = len(store.list_keys("streams/sc7"))
    _, list_s = _timed(repeats, list_keys)
    return {
        "put/s": f"{put_rate:,.0f}",
        "replace/s": f"{replace_rate:,.0f}",
        "get/s": f"{get_rate:,.0f}",
        f"list_keys ({children} of {records}) ms": f"{list_s / repeats * 1000:.1f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--prefixes", type=int, default=1_000)
    args = parser.parse_args()
    rows: list[tuple[str, dict[str, str]]] = []
    cluster = InProcessCluster(4)
    try:
        table = TableMetadataStore(SegmentStoreClient(cluster))
        table.ensure_created()
        rows.append(("TableMetadataStore", measure(table, args.records, args.prefixes)))
    finally:
        cluster.shutdown()
    chunk = ChunkMetadataStore(InMemoryChunkStorage())
    rows.append(("ChunkMetadataStore (memory)", measure(chunk, args.records, args.prefixes)))
    columns = list(rows[0][1])
    widths = [max(len(c), 10) for c in columns]
    print(f"{'store':<30}" + "".join(f"{c:>{w + 2}}" for c, w in zip(columns, widths, strict=True)))
    for name, row in rows:
        cells = "".join(f"{row[c]:>{w + 2}}" for c, w in zip(columns, widths, strict=True))
        print(f"{name:<30}{cells}")


if __name__ == "__main__":
    main()
