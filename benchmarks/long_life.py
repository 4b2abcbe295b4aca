"""An accelerated life of a table segment: does its size follow its live data?

Run: ``.venv/bin/python -m benchmarks.long_life [--updates N] [--keys K]``
(``make bench-long-life``).

One segment container on the local disk (file Tier-1 and Tier-2 in a temporary directory),
one table segment, ``--updates`` unconditional puts of ``--value-bytes`` values over
``--keys`` keys (random keys, ``--in-flight`` updates at once, as a busy key-value table or
the controller's records see them). Run twice in the same process: first with compaction off
(every entry ever written is kept), then on (the defaults of ``ContainerConfig``).

A third run writes every key once: the same live data without its history (``fresh``), the
baseline of size and recovery.

Printed for each run, at ``--points`` steps of the work: the segment's stored bytes (length
minus start) against its live bytes (one entry per key), the Tier-2 bytes on disk, and the
update rate. Then a clean shutdown (everything flushed, a checkpoint) and:

- ``recover s``: a new container taking over the directory, then a get of every key (what
  a restart costs before the table serves again), the best of 5;
- ``read all s``: the table's changes read from 0 to its end (what a reader rebuilding from
  the change log, or a delta read of the wire protocol, costs);
- goals, compaction on: ``stored / live`` at most 2 (once the segment is past the compaction
  minimum); recovery within 1.5 x the fresh table's.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import tempfile
import time
from pathlib import Path

from benchmarks.common import log, print_table
from pravega_ray.contracts.segment_store import TableUpdate
from pravega_ray.segmentstore.builder import build_container_on
from pravega_ray.segmentstore.config import ContainerConfig
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.segmentstore.table_segment import HEADER_BYTES

SEGMENT = "bench/_kvt.life/0.#epoch.0"
RECOVERIES = 5


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


async def one_run(args: argparse.Namespace, root: Path, mode: str) -> dict[str, object]:
    """``mode``: "off" or "on" (compaction), or "fresh" (every key written once: the table
    without its history, the baseline of recovery and size)."""
    compaction = mode != "off"
    updates = args.keys if mode == "fresh" else args.updates
    tier1, tier2 = root / "tier1", root / "tier2"
    urls = f"file://{tier1}", f"file://{tier2}"
    utilization = args.min_utilization if compaction else 0.0
    config = ContainerConfig(0, table_compaction_min_utilization=utilization)
    container = build_container_on(*urls, config)
    container.recover()
    await container.table_create(SEGMENT)
    rng = random.Random(args.seed)
    keys = [b"key-%08d" % i for i in range(args.keys)]
    value = b"v" * args.value_bytes
    live = args.keys * (HEADER_BYTES + len(keys[0]) + len(value))
    step = max(updates // args.points, 1)
    curve: list[list[object]] = []
    done, started, last = 0, time.perf_counter(), time.perf_counter()

    async def put(key: bytes) -> None:
        await container.table_update(SEGMENT, [TableUpdate(key, value)])

    while done < updates:
        wave = min(args.in_flight, updates - done)
        chosen = keys[done : done + wave] if mode == "fresh" else rng.choices(keys, k=wave)
        await asyncio.gather(*(put(key) for key in chosen))
        done += wave
        if done % step < wave or done == updates:
            info = await container.get_info(SEGMENT)
            now = time.perf_counter()
            stored = info.length - info.start_offset
            curve.append(
                [
                    done,
                    stored,
                    live,
                    round(stored / live, 2),
                    disk_bytes(tier2),
                    round(step / (now - last)),
                ]
            )
            last = now
            log(f"{mode}: {done:,} updates, {stored:,} bytes stored")
    rate = updates / (time.perf_counter() - started)
    rounds = container.table_compactor.rounds
    await container.checkpoint()  # a clean shutdown: Tier-1 holds nothing to replay
    await container.close()

    recover_s = math.inf
    for _ in range(RECOVERIES):  # the best of a few: each is milliseconds
        began = time.perf_counter()
        again: SegmentContainer = build_container_on(*urls, config)
        again.recover()
        for first in range(0, len(keys), 500):
            found = await again.table_get(SEGMENT, keys[first : first + 500])
            assert all(entry is not None for entry in found)
        recover_s = min(recover_s, time.perf_counter() - began)
        await again.close()
    again = build_container_on(*urls, config)
    again.recover()
    began = time.perf_counter()
    position, entries = 0, 0
    length = (await again.get_info(SEGMENT)).length
    while position < length:
        found, position = await again.table_read_changes(SEGMENT, position, 4 << 20)
        entries += len(found)
    read_all_s = time.perf_counter() - began
    info = await again.get_info(SEGMENT)
    await again.close()
    print_table(
        f"{mode}: {updates:,} updates over {args.keys:,} keys of {args.value_bytes} B",
        ["updates", "stored B", "live B", "stored/live", "tier-2 B on disk", "updates/s"],
        curve,
    )
    return {
        "table": mode,
        "updates/s": round(rate),
        "rounds": rounds,
        "stored B": info.length - info.start_offset,
        "stored/live": round((info.length - info.start_offset) / live, 2),
        "tier-2 B": disk_bytes(tier2),
        "entries read": entries,
        "recover s": round(recover_s, 3),
        "read all s": round(read_all_s, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--in-flight", type=int, default=256)
    parser.add_argument("--points", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--min-utilization",
        type=float,
        default=ContainerConfig(0).table_compaction_min_utilization,
        help="compaction's live-entry ratio (ContainerConfig's default)",
    )
    args = parser.parse_args()
    results = []
    for mode in ("fresh", "off", "on"):
        with tempfile.TemporaryDirectory(prefix="pravega-long-life-") as root:
            results.append(asyncio.run(one_run(args, Path(root), mode)))
    header = list(results[0])
    print_table(
        "summary (baselines of the same run: fresh = every key written once; off = no compaction)",
        header,
        [[r[h] for h in header] for r in results],
    )
    fresh, on = results[0], results[2]
    goals = [
        ["stored <= 2 x live", on["stored/live"], 2.0, _verdict(float(on["stored/live"]) <= 2)],
        [
            "recovery <= 1.5 x fresh",
            on["recover s"],
            round(1.5 * float(fresh["recover s"]), 3),
            _verdict(float(on["recover s"]) <= 1.5 * float(fresh["recover s"])),
        ],
    ]
    print_table("goals (compaction on)", ["goal", "measured", "bound", "verdict"], goals)


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


if __name__ == "__main__":
    main()
