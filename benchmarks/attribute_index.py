"""Size and speed of the B+tree attribute index, against Tables 1 and 2 of Pravega's blog post.

Pravega's blog post "Segment Attributes" (docs/design.md, "Sources") reports the Tier-2 size
of a 1,000,000-attribute index built with update batches of 10, 100 and 1,000 keys, with and
without progressive compaction:

- ``sorted`` (Table 1): insert N keys in ascending key order, ``--batch`` keys per update.
- ``bulk-random-update`` (Table 2): bulk-load the N keys in ascending order in batches of
  ``--bulk-batch`` (10,000 by default; the blog post does not say its bulk-load batch), then
  update every key exactly once, in a random order, ``--batch`` keys per update.

Keys are N distinct random 16-byte strings (like writer ids; ``--seed``), values 8-byte ints.
The index is the real :class:`BTreeAttributeIndex` (32 KiB pages) over an
:class:`InMemoryChunkStorage` that also counts every byte it is asked to create: one chunk
per update batch, and after every batch each chunk wholly below the tree's lowest live offset
is deleted (real head truncation), in both compaction settings.

What is measured, in bytes (MB = 10^6 bytes, as the blog post's tables are compared in MB):

- ``written``: every byte ever appended to the attribute segment (all chunks created).
- ``stored``: bytes of the chunks still in Tier-2 at the end, after head truncation
  (``BTreeAttributeIndex.stored_bytes``); ``peak`` is its maximum after any batch.
- ``live``: bytes of the pages reachable from the root (``live_bytes``).
- ``index``: the figure compared with the blog post's. With ``--compaction on`` it is ``stored``
  (the blog post's "Progressive Compaction" column: what Tier-2 holds). With ``--compaction off``
  it is ``written``: the blog post's "No Compaction" column is the size of a never-truncated
  attribute segment (its 32,990 MB for random updates in batches of 10 is about everything a
  1M-key tree appends; head truncation alone keeps a few hundred MB of that at most, since
  random updates rewrite every page sooner or later). ``stored`` is still shown, so the
  effect of head truncation alone is visible.
  Nothing is estimated: the storage really holds ``stored`` bytes, the tree reads its pages
  back from it, and a ``--stored-limit-mb`` guard stops the run if it would outgrow memory.

The aim checked per compaction-on row: index bytes at most the blog post's compaction-on figure
*and* at most 2x the live tree. Compaction-off rows show the blog post's figure and the ratio only.
The output calls the blog post's figure ``seed MB`` and ``seed`` in its aim column.

Lookups of random existing keys, each a one-key ``get``, measured after the build:

- ``cold``: on a second index object over the same storage, ``clear_cache()`` before every
  lookup, so each one opens the tree (one ``list``, one footer read) and reads root to leaf.
- ``warm``: on a third index object with the index's default page cache: a warm-up pass over
  the ``--lookups`` probe keys in another order, then the probes are timed.
- ``dict``: a plain Python dict of the same keys, same probes (the in-memory ceiling).

Tier-2 reads per lookup are ``BTreeAttributeIndex.reads`` deltas. Finally the tree is checked:
``verify`` on the index, and a separate read-only ``BTree`` opened on the remaining chunks is
walked (``BTree.verify``) to check that every live page lies at or above the first stored
chunk, i.e. nothing truncated is still referenced, and that it holds exactly N keys.

Run (one cell per run; progress goes to stderr, the table to stdout, and the very last stdout
line is ``index_bytes=<n> live_bytes=<n>``)::

    .venv/bin/python -m benchmarks.attribute_index --count 1000000 --batch 100 \\
        --workload bulk-random-update --compaction on
"""

from __future__ import annotations

import argparse
import bisect
import datetime
import gc
import os
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmarks.common import log
from pravega_ray.btree import BTree, TreeStats
from pravega_ray.segmentstore.btree_attribute_index import (
    CHUNK_PREFIX,
    COMPACTION_RATIO,
    BTreeAttributeIndex,
)
from pravega_ray.storage.memory import InMemoryChunkStorage

SEGMENT = "bench/attributes/0.#epoch.0"
MB = 1_000_000
PROGRESS_STEPS = 10
"""Progress lines per phase (to stderr)."""

WORKLOADS = ("sorted", "bulk-random-update")

SEED_MB: dict[tuple[str, int, bool], int] = {
    # The blog post's Table 1: 1,000,000 attributes inserted in sorted order.
    ("sorted", 10, False): 3_991,
    ("sorted", 100, False): 416,
    ("sorted", 1000, False): 60,
    ("sorted", 10, True): 115,
    ("sorted", 100, True): 97,
    ("sorted", 1000, True): 54,
    # Its Table 2: bulk-load 1,000,000 attributes, then update all in a random order.
    ("bulk-random-update", 10, False): 32_990,
    ("bulk-random-update", 100, False): 29_402,
    ("bulk-random-update", 1000, False): 17_083,
    ("bulk-random-update", 10, True): 72,
    ("bulk-random-update", 100, True): 103,
    ("bulk-random-update", 1000, True): 91,
}
SEED_COUNT = 1_000_000
"""The blog post's tables are for this many attributes; other counts have nothing to compare."""

LIVE_RATIO_MAX = 2.0
"""Aim: the stored index stays within this multiple of the live tree."""


class CountingStorage(InMemoryChunkStorage):
    """An in-memory ChunkStorage that counts created bytes and guards its own size."""

    def __init__(self, stored_limit_bytes: int) -> None:
        super().__init__()
        self.written_bytes = 0
        self.stored_bytes = 0
        self.stored_limit_bytes = stored_limit_bytes

    def create(self, name: str, data: bytes) -> None:
        if self.stored_bytes + len(data) > self.stored_limit_bytes:
            raise SystemExit(
                f"storage would hold {(self.stored_bytes + len(data)) / MB:,.0f} MB, over "
                f"--stored-limit-mb {self.stored_limit_bytes / MB:,.0f}: stopping"
            )
        super().create(name, data)
        self.written_bytes += len(data)
        self.stored_bytes += len(data)

    def delete(self, name: str) -> None:
        if self.exists(name):
            self.stored_bytes -= self.length(name)
        super().delete(name)


class ChunkView:
    """Read-only ``read``/``length`` over a segment's attribute chunks, to open a BTree on them.

    Independent of :class:`BTreeAttributeIndex`'s own reader: it only assumes the documented
    layout (``attributes-btree/<segment>/<start offset, 20 digits>``, contiguous chunks).
    Reading below the first stored chunk raises, so a tree walk proves nothing truncated is
    still referenced.
    """

    def __init__(self, storage: InMemoryChunkStorage, segment: str) -> None:
        self.storage = storage
        self.prefix = f"{CHUNK_PREFIX}{segment}/"
        names = storage.list(self.prefix)
        self.starts = sorted(int(name[len(self.prefix) :]) for name in names)
        if not self.starts:
            raise SystemExit("no attribute chunks stored")
        self.end = self.starts[-1] + storage.length(self.name(self.starts[-1]))

    def name(self, start: int) -> str:
        return f"{self.prefix}{start:020d}"

    def read(self, offset: int, length: int) -> bytes:
        if offset < self.starts[0]:
            raise AssertionError(f"read at {offset}, below the first stored chunk {self.starts[0]}")
        out = bytearray()
        position, stop = offset, min(offset + length, self.end)
        i = bisect.bisect_right(self.starts, position) - 1
        while position < stop:
            start = self.starts[i]
            chunk_end = self.starts[i + 1] if i + 1 < len(self.starts) else self.end
            want = min(stop, chunk_end) - position
            out += self.storage.read(self.name(start), position - start, want)
            position += want
            i += 1
        return bytes(out)

    def length(self) -> int:
        return self.end

    @staticmethod
    def append(data: bytes) -> int:
        raise AssertionError("the verification view is read-only")


@dataclass
class BuildResult:
    batches: int
    load_batches: int
    load_seconds: float
    seconds: float
    written_bytes: int
    stored_bytes: int
    peak_stored_bytes: int
    live_bytes: int
    chunks: int


@dataclass
class LookupResult:
    name: str
    lookups: int
    seconds: float
    reads: int


def make_keys(count: int, seed: int) -> list[bytes]:
    """``count`` distinct random 16-byte keys, in ascending order."""
    rng = random.Random(seed)
    keys: set[bytes] = set()
    while len(keys) < count:
        keys.add(rng.randbytes(16))
    return sorted(keys)


def apply_batches(
    index: BTreeAttributeIndex,
    storage: CountingStorage,
    keys: Sequence[bytes],
    batch: int,
    value: Callable[[int], int],
    phase: str,
    peak: list[int],
) -> int:
    """Update ``keys`` in order, ``batch`` per update; return the number of updates applied."""
    batches = -(-len(keys) // batch)
    step = max(1, batches // PROGRESS_STEPS)
    start = time.perf_counter()
    for number, first in enumerate(range(0, len(keys), batch), 1):
        index.update(
            SEGMENT, {key: value(first + i) for i, key in enumerate(keys[first : first + batch])}
        )
        peak[0] = max(peak[0], storage.stored_bytes)
        if number % step == 0 or number == batches:
            elapsed = time.perf_counter() - start
            log(
                f"{phase}: {number:,}/{batches:,} batches, {elapsed:,.1f}s, "
                f"{first + batch:,} keys ({min(first + batch, len(keys)) / elapsed:,.0f}/s), "
                f"written {storage.written_bytes / MB:,.1f} MB, "
                f"stored {storage.stored_bytes / MB:,.1f} MB"
            )
    return batches


def build(
    storage: CountingStorage,
    keys: list[bytes],
    *,
    workload: str,
    batch: int,
    bulk_batch: int,
    compaction: bool,
    cache_pages_max: int,
    seed: int,
    compaction_ratio: float = 0.0,
) -> BuildResult:
    index = BTreeAttributeIndex(
        storage,
        compaction=compaction,
        cached_trees_max=1,
        cache_pages_max=cache_pages_max,
        compaction_ratio=compaction_ratio,
    )
    peak = [0]
    load_batches, load_seconds = 0, 0.0
    start = time.perf_counter()
    if workload == "sorted":
        batches = apply_batches(index, storage, keys, batch, lambda i: i, "sorted insert", peak)
    else:
        load_batches = apply_batches(
            index, storage, keys, bulk_batch, lambda i: i, "bulk load", peak
        )
        load_seconds = time.perf_counter() - start
        order = list(keys)
        random.Random(seed + 1).shuffle(order)
        count = len(keys)
        start = time.perf_counter()
        batches = apply_batches(
            index, storage, order, batch, lambda i: count + i, "random update", peak
        )
    seconds = time.perf_counter() - start
    stored = index.stored_bytes(SEGMENT)
    if stored != storage.stored_bytes:
        raise AssertionError(
            f"index says {stored} bytes stored, the storage holds {storage.stored_bytes}"
        )
    return BuildResult(
        batches=batches,
        load_batches=load_batches,
        load_seconds=load_seconds,
        seconds=seconds,
        written_bytes=storage.written_bytes,
        stored_bytes=stored,
        peak_stored_bytes=peak[0],
        live_bytes=index.live_bytes(SEGMENT),
        chunks=len(storage.list(f"{CHUNK_PREFIX}{SEGMENT}/")),
    )


def measure_lookups(
    storage: CountingStorage, probes: list[bytes], cold_probes: list[bytes], compaction: bool
) -> list[LookupResult]:
    results = []
    cold = BTreeAttributeIndex(storage, compaction=compaction, cached_trees_max=1)
    start = time.perf_counter()
    for key in cold_probes:
        cold.clear_cache()
        if len(cold.get(SEGMENT, [key])) != 1:
            raise AssertionError(f"cold lookup missed {key.hex()}")
    results.append(
        LookupResult(
            "cold (clear_cache each)", len(cold_probes), time.perf_counter() - start, cold.reads
        )
    )

    warm = BTreeAttributeIndex(storage, compaction=compaction, cached_trees_max=1)
    rng = random.Random(len(probes))
    for key in rng.sample(probes, len(probes)):  # warm-up pass: same keys, another order
        warm.get(SEGMENT, [key])
    before = warm.reads
    start = time.perf_counter()
    for key in probes:
        if len(warm.get(SEGMENT, [key])) != 1:
            raise AssertionError(f"warm lookup missed {key.hex()}")
    results.append(
        LookupResult(
            f"warm (default cache, {warm.cache_pages_max} pages)",
            len(probes),
            time.perf_counter() - start,
            warm.reads - before,
        )
    )
    return results


def measure_dict(keys: list[bytes], probes: list[bytes]) -> LookupResult:
    table = {key: i for i, key in enumerate(keys)}
    start = time.perf_counter()
    for key in probes:
        if table.get(key) is None:
            raise AssertionError("dict lookup missed")
    return LookupResult("dict baseline", len(probes), time.perf_counter() - start, 0)


def verify(storage: CountingStorage, count: int, compaction: bool) -> tuple[TreeStats, int]:
    """Check the stored tree; return its stats and the first stored chunk's start."""
    BTreeAttributeIndex(storage, compaction=compaction, cached_trees_max=1).verify(SEGMENT)
    view = ChunkView(storage, SEGMENT)
    tree = BTree(view.read, ChunkView.append, view.length, compaction=compaction, cache_pages_max=0)
    stats = tree.verify()
    if stats.entries != count:
        raise AssertionError(f"tree holds {stats.entries} keys, expected {count}")
    if stats.lowest_offset is None or stats.lowest_offset < view.starts[0]:
        raise AssertionError(
            f"live page at {stats.lowest_offset} below first chunk {view.starts[0]}"
        )
    return stats, view.starts[0]


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = [" | ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def aim(
    workload: str, batch: int, compaction: bool, count: int, index: int, live: int
) -> tuple[str, str]:
    """(seed figure, verdict) for one cell."""
    seed = SEED_MB.get((workload, batch, compaction)) if count == SEED_COUNT else None
    seed_text = f"{seed:,}" if seed is not None else "-"
    if not compaction:
        return seed_text, f"{index / (seed * MB):.2f}x seed" if seed else "n/a"
    within_live = index <= LIVE_RATIO_MAX * live
    if seed is None:
        return seed_text, "pass (<=2x live)" if within_live else "MISS (>2x live)"
    beats_seed = index <= seed * MB
    if beats_seed and within_live:
        return seed_text, "pass"
    misses = [m for m, ok in (("> seed", beats_seed), ("> 2x live", within_live)) if not ok]
    return seed_text, "MISS (" + ", ".join(misses) + ")"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="B+tree attribute index size and speed vs Pravega's Tables 1 and 2."
    )
    parser.add_argument("--count", type=int, default=100_000, help="attributes (default 100000)")
    parser.add_argument("--batch", type=int, default=100, help="keys per update (default 100)")
    parser.add_argument("--workload", choices=WORKLOADS, default="sorted")
    parser.add_argument("--compaction", choices=("on", "off"), default="on")
    parser.add_argument(
        "--compaction-ratio",
        type=float,
        default=COMPACTION_RATIO,
        help="extra pages moved per batch, as a fraction of the bytes the batch rewrites "
        "(0: one page per batch, Pravega's rule; default: the index's default)",
    )
    parser.add_argument(
        "--bulk-batch", type=int, default=10_000, help="bulk-load batch (default 10000)"
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument(
        "--lookups", type=int, default=10_000, help="warm lookups, after as many warm-up ones"
    )
    parser.add_argument("--cold-lookups", type=int, default=1_000, help="cold lookups")
    parser.add_argument(
        "--cache-pages",
        type=int,
        default=4096,
        help="page cache of the building index (speed only, sizes do not depend on it)",
    )
    parser.add_argument(
        "--verify",
        choices=("auto", "yes", "no"),
        default="auto",
        help="walk and check the final tree (auto: when count <= 1,000,000)",
    )
    parser.add_argument(
        "--stored-limit-mb", type=int, default=8_000, help="stop if Tier-2 would hold more"
    )
    args = parser.parse_args(argv)
    for name in ("count", "batch", "bulk_batch", "lookups", "cold_lookups", "cache_pages"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    compaction = args.compaction == "on"
    log(f"generating {args.count:,} keys")
    keys = make_keys(args.count, args.seed)
    storage = CountingStorage(args.stored_limit_mb * MB)
    log(f"building: {args.workload}, batch {args.batch}, compaction {args.compaction}")
    gc.freeze()  # the key list is long-lived; keep the collector from rescanning it
    result = build(
        storage,
        keys,
        workload=args.workload,
        batch=args.batch,
        bulk_batch=args.bulk_batch,
        compaction=compaction,
        cache_pages_max=args.cache_pages,
        seed=args.seed,
        compaction_ratio=args.compaction_ratio,
    )
    log(f"built in {result.load_seconds + result.seconds:,.1f}s; lookups")
    rng = random.Random(args.seed + 2)
    probes = [rng.choice(keys) for _ in range(args.lookups)]
    cold_probes = [rng.choice(keys) for _ in range(args.cold_lookups)]
    lookups = measure_lookups(storage, probes, cold_probes, compaction)
    lookups.append(measure_dict(keys, probes))
    stats, first_chunk = None, None
    if args.verify == "yes" or (args.verify == "auto" and args.count <= SEED_COUNT):
        log("verifying")
        stats, first_chunk = verify(storage, args.count, compaction)

    index_bytes = result.stored_bytes if compaction else result.written_bytes
    seed_text, verdict = aim(
        args.workload, args.batch, compaction, args.count, index_bytes, result.live_bytes
    )
    updates = args.count
    phase = "sorted inserts" if args.workload == "sorted" else "random updates"
    print(
        f"attribute index benchmark, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} "
        f"UTC, {platform.node()}, {os.cpu_count()} cpus, Python {platform.python_version()}"
    )
    print(
        f"32 KiB pages, compaction ratio {args.compaction_ratio:g}, InMemoryChunkStorage, one "
        "chunk per batch, head truncation after every batch; "
        f"index = {'stored' if compaction else 'written'} bytes; MB = 10^6 bytes; "
        f"seconds and updates/s are for the {phase}"
        + (
            f" (bulk load: {result.load_batches:,} batches of {args.bulk_batch:,} in "
            f"{result.load_seconds:,.1f}s, not included)"
            if args.workload != "sorted"
            else ""
        )
    )
    print()
    headers = [
        "count", "batch", "workload", "compaction", "batches", "seconds", "updates/s",
        "written MB", "stored MB", "peak MB", "index MB", "live MB", "index/live",
        "seed MB", "aim",
    ]  # fmt: skip
    row = [
        f"{args.count:,}",
        f"{args.batch:,}",
        args.workload,
        args.compaction,
        f"{result.batches:,}",
        f"{result.seconds:,.1f}",
        f"{updates / result.seconds:,.0f}",
        f"{result.written_bytes / MB:,.1f}",
        f"{result.stored_bytes / MB:,.1f}",
        f"{result.peak_stored_bytes / MB:,.1f}",
        f"{index_bytes / MB:,.1f}",
        f"{result.live_bytes / MB:,.1f}",
        f"{index_bytes / result.live_bytes:,.2f}",
        seed_text,
        verdict,
    ]
    print(format_table(headers, [row]))
    print()
    lookup_rows = [
        [
            lookup.name,
            f"{lookup.lookups:,}",
            f"{lookup.seconds:,.3f}",
            f"{lookup.lookups / lookup.seconds:,.0f}",
            f"{lookup.reads / lookup.lookups:.2f}" if lookup.name != "dict baseline" else "-",
        ]
        for lookup in lookups
    ]
    print(
        format_table(
            ["lookups", "count", "seconds", "lookups/s", "Tier-2 reads/lookup"], lookup_rows
        )
    )
    print()
    print(f"chunks stored: {result.chunks:,}")
    if stats is not None:
        print(
            f"verify: ok, {stats.entries:,} keys, depth {stats.depth}, {stats.pages:,} pages "
            f"({stats.leaves:,} leaves), lowest live page at {stats.lowest_offset:,} >= first "
            f"stored chunk at {first_chunk:,}"
        )
    else:
        print("verify: skipped")
    print(f"index_bytes={index_bytes} live_bytes={result.live_bytes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
