"""An accelerated life of the controller: do its records and a reader group's state follow
the live data, not the history?

Run: ``.venv/bin/python -m benchmarks.long_life_controller [--scales N] [--txns N]``
(``make bench-long-life`` runs it after ``long_life``).

An in-process cluster (memory backends, 3 containers, table compaction at the defaults of
``ContainerConfig``). Two parts, each printing a curve at ``--points`` steps of its work:

1. ``--scales`` scales of a stream (its first segment split, or its first two merged back
   once it has 4: the segment count stays small, the epochs grow) while one writer writes
   an event per scale on 8 keys and a reader of a reader group reads them all: the stored
   bytes (length minus start) of the group's state segment and of the controller's record
   table segments, against the scales done;
2. ``--txns`` transactions of one event on a 2-segment stream (``commit(wait=False)``, a
   scale every ``--scale-every`` of them, split and merge as in 1., so some commit by
   rolling): the controller's record bytes against the transactions done. Completed
   transaction records are kept ``TXN_COMPLETED_KEEP_S`` (10 minutes) by design, so this
   curve is expected to grow for a run shorter than that, by about one small record per
   transaction.

At each point of both curves the whole cluster restarts (every container recovers, the
controller reopens its records and answers a call; stopping the old processors is not
counted): its ``recover s``, against the work done. At the end it restarts three times
more (the least of three). A container's recovery replays the metadata of every segment it
holds, so while the streams keep every sealed segment it follows them (they are live
data: readable from the head); then retention is applied as a deployment's would have
(:func:`apply_retention`: both streams truncated at their tails, completed transaction
records aged out, the storage writer's checkpoint), and the cluster restarts three times
again. A fresh cluster with one stream, after the same steps, does the same. Goals: the
group's state bytes flat (last point within 2x of the first); the controller's record
table segments' stored bytes within 2x of what their records hold at the end (the records
themselves grow with the history a stream keeps: its epochs, their index, sealed sizes);
recovery after retention within 1.5x of the fresh cluster's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time

import pravega_ray as pr
from benchmarks.common import log, print_table
from pravega_ray.constants import TXN_COMPLETED_KEEP_S
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.segmentstore.table_segment import HEADER_BYTES

SCOPE = "life"


def stored_bytes(cluster: InProcessCluster, segments: list[str]) -> int:
    """Length minus start of each of ``segments`` (absent ones: 0), summed."""
    total = 0
    for segment in segments:
        with contextlib.suppress(pr.SegmentNotFoundError):
            info = cluster.segments.get_info(segment).result(30)
            total += info.length - info.start_offset
    return total


def record_bytes(cluster: InProcessCluster) -> int:
    """The controller's record table segments' stored bytes."""
    return stored_bytes(cluster, list(cluster.metadata.segments))


def live_record_bytes(cluster: InProcessCluster) -> int:
    """What the controller's records hold now: per record its key, its value as JSON and an
    entry header (about what one entry of each takes in its table segment)."""
    total = 0
    for key in cluster.metadata.all_keys():
        record = cluster.metadata.get(key)
        if record is not None:
            total += HEADER_BYTES + len(key.encode()) + len(json.dumps(record.value).encode())
    return total


def timed_restart(cluster: InProcessCluster) -> float:
    """Seconds from the restart to the controller's first answer: every container recovers,
    the controller reopens its records. Stopping the old processors and timer comes first and
    is not counted (on Ray their actors die; in process a sweep under way is waited for)."""
    cluster._stop_processors()
    started = time.perf_counter()
    cluster.restart()
    cluster.stream_manager().list_scopes()  # the controller answers again
    return time.perf_counter() - started


def split_or_merge(mgr: pr.StreamManager, stream: str) -> None:
    """Scale ``stream`` once: its first segment split, or its first two merged back once it
    has 4 (the segment count stays small while the epochs grow)."""
    segments = mgr.get_stream_info(SCOPE, stream).segments
    first = segments[0]
    if len(segments) >= 4:
        second = segments[1]
        mgr.scale_stream(
            SCOPE, stream, [first.segment_id, second.segment_id], [(first.key_low, second.key_high)]
        )
    else:
        mid = (first.key_low + first.key_high) / 2
        mgr.scale_stream(
            SCOPE, stream, [first.segment_id], [(first.key_low, mid), (mid, first.key_high)]
        )


def scales_part(
    cluster: InProcessCluster, args: argparse.Namespace
) -> tuple[list[list[int | str]], int]:
    """The curve (scales, group state bytes, record bytes, scales/s) and the events read."""
    mgr = cluster.stream_manager()
    mgr.create_stream(SCOPE, "scaled", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    cluster.create_reader_group(SCOPE, "g", pr.ReaderGroupConfig.for_streams(f"{SCOPE}/scaled"))
    state = cluster.core._store.get_reader_group(SCOPE, "g")[0].state_segment or ""
    writer = cluster.create_writer(SCOPE, "scaled", pr.BytesSerializer())
    reader = cluster.create_reader("r", SCOPE, "g", pr.BytesSerializer())
    stop, read = threading.Event(), [0]

    def read_all() -> None:
        while not stop.is_set():
            event = reader.read_next_event(0.2)
            if event is not None and event.event is not None:
                read[0] += 1

    thread = threading.Thread(target=read_all, daemon=True)
    thread.start()
    step = max(args.scales // args.points, 1)
    curve: list[list[int | str]] = []
    started = time.perf_counter()
    for n in range(1, args.scales + 1):
        split_or_merge(mgr, "scaled")
        writer.write_event(b"e%d" % n, routing_key=f"k{n % 8}")
        if n % step == 0 or n == args.scales:
            writer.flush()
            elapsed = time.perf_counter() - started
            recover = timed_restart(cluster)
            curve.append(
                [
                    n,
                    stored_bytes(cluster, [state]),
                    record_bytes(cluster),
                    f"{n / elapsed:.1f}",
                    f"{recover:.3f}",
                ]
            )
            log(f"scales: {n:,} done, {read[0]:,} events read")
    writer.close()
    deadline = time.monotonic() + 60
    while read[0] < args.scales and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    thread.join(5)
    reader.close()
    return curve, read[0]


def txns_part(cluster: InProcessCluster, args: argparse.Namespace) -> list[list[object]]:
    mgr = cluster.stream_manager()
    mgr.create_stream(SCOPE, "txns", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    tw = cluster.create_transactional_writer(SCOPE, "txns", pr.BytesSerializer(), lease_s=600)
    step = max(args.txns // args.points, 1)
    curve: list[list[object]] = []
    started = time.perf_counter()
    open_txn = tw.begin_txn()  # left open across the scales: committed by rolling later
    for n in range(1, args.txns + 1):
        txn = tw.begin_txn()
        txn.write_event(b"t%d" % n, routing_key=f"k{n % 8}")
        txn.commit(wait=False)
        if n % args.scale_every == 0:
            with contextlib.suppress(pr.ScaleConflictError):  # a roll replaced the segments
                split_or_merge(mgr, "txns")
            open_txn.write_event(b"open", routing_key="k0")
            open_txn.commit()  # of an old epoch: a rolling commit
            open_txn = tw.begin_txn()
        if n % step == 0 or n == args.txns:
            elapsed = time.perf_counter() - started
            epoch = mgr.get_stream_info(SCOPE, "txns").epoch
            rate = f"{n / elapsed:.1f}"
            recover = timed_restart(cluster)
            curve.append([n, record_bytes(cluster), epoch, rate, f"{recover:.3f}"])
            log(f"transactions: {n:,} done")
    open_txn.abort()
    tw.close()
    return curve


def apply_retention(cluster: InProcessCluster, streams: list[str]) -> None:
    """What a year-long deployment does that an accelerated day has no time for: each of
    ``streams`` truncated at its tail (its retention: every sealed segment deleted), and the
    completed transaction records forgotten (the timer run as if ``TXN_COMPLETED_KEEP_S``
    had passed); then what the storage writer's rounds do within ``CHECKPOINT_INTERVAL_S``
    of a quiet moment: everything flushed to Tier-2, a checkpoint, the log truncated."""
    mgr = cluster.stream_manager()
    started = time.perf_counter()
    for stream in streams:
        # Everything at once, where a deployment's retention cycles drop a little at a time:
        # a stream of 10,000 epochs has some 15,000 sealed segments to delete here.
        mgr.truncate_stream(SCOPE, stream, mgr.get_tail_cut(SCOPE, stream), timeout_s=3600)
    log(f"retention: {', '.join(streams)} truncated in {time.perf_counter() - started:.1f} s")
    later = int(time.time() * 1000) + int((TXN_COMPLETED_KEEP_S + 60) * 1000)
    cluster.txn_timer.run_once(later)
    for container_id in range(cluster.container_count):
        cluster.run(cluster.container(container_id).checkpoint()).result(120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", type=int, default=2000)
    parser.add_argument("--txns", type=int, default=10_000)
    parser.add_argument("--scale-every", type=int, default=500)
    parser.add_argument("--points", type=int, default=10)
    args = parser.parse_args()
    for name in ("scales", "txns", "scale_every", "points"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")

    cluster = InProcessCluster(container_count=3)
    try:
        cluster.stream_manager().create_scope(SCOPE)
        scales, read = scales_part(cluster, args)
        print_table(
            f"{args.scales:,} scales under a reader group (stored bytes; the reader read "
            f"{read:,} of the {args.scales:,} events)",
            ["scales", "group state", "controller records", "scales/s", "recover s"],
            scales,
        )
        txns = txns_part(cluster, args)
        print_table(
            f"{args.txns:,} transactions, a scale and a rolling commit every {args.scale_every}",
            ["transactions", "controller records", "epoch", "txns/s", "recover s"],
            txns,
        )
        stored, live = record_bytes(cluster), live_record_bytes(cluster)
        recover = min(timed_restart(cluster) for _ in range(3))
        apply_retention(cluster, ["scaled", "txns"])
        retained = min(timed_restart(cluster) for _ in range(3))
    finally:
        cluster.shutdown()
    fresh = InProcessCluster(container_count=3)
    try:
        mgr = fresh.stream_manager()
        mgr.create_scope(SCOPE)
        mgr.create_stream(SCOPE, "scaled", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
        apply_retention(fresh, ["scaled"])  # the same steps, on nothing to drop
        fresh_recover = min(timed_restart(fresh) for _ in range(3))
    finally:
        fresh.shutdown()
    first_state, last_state = int(scales[0][1]), int(scales[-1][1])
    first_records, last_records = int(scales[0][2]), int(scales[-1][2])
    rows = [
        [
            "group state bytes, last / first point",
            f"{last_state / max(first_state, 1):.2f}",
            "<= 2",
            _verdict(last_state <= 2 * max(first_state, 1)),
        ],
        [
            "controller record bytes after the scales, last / first point",
            f"{last_records / max(first_records, 1):.2f}",
            "(history)",
            "-",
        ],
        [
            "controller records at the end, stored / live",
            f"{stored:,} / {live:,} = {stored / max(live, 1):.2f}",
            "<= 2",
            _verdict(stored <= 2 * live),
        ],
        [
            "recover s, every sealed segment kept / a fresh one",
            f"{recover:.3f} / {fresh_recover:.3f}",
            "(live data)",
            "-",
        ],
        [
            "recover s, after retention / a fresh one",
            f"{retained:.3f} / {fresh_recover:.3f}",
            "<= 1.5x",
            _verdict(retained <= 1.5 * fresh_recover),
        ],
    ]
    print_table("goals", ["measure", "value", "goal", "verdict"], rows)


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


if __name__ == "__main__":
    main()
