"""The controller on a real local Ray: scaling, auto-scaling and metadata at scale, with baselines.

Starts its own cluster (``pr.start_local`` in a temporary directory, a fresh namespace, file
tiers) and shuts it down at the end. Prints one table per part (each selectable, ``--parts``):

1. ``scale``: ``--scales`` manual scales of a 1-segment stream, alternately splitting its one
   segment in two and merging the two back, timed from the ``scale_stream`` call to its return
   (the new epoch is active): first with no writer (the baseline), then while a writer thread
   writes ``--event-bytes`` events (in ``write_events`` batches of ``--batch-events``, 16
   routing keys) as fast as it can. Reported:
   the rate the writer reached, and its longest *ack gap* (time between consecutive
   acknowledgements, from its futures' completion times) during a scale against the longest
   with no scale under way. A writer whose segment was sealed under it may fail the events
   routed there (``SegmentSealedError``) or leave them unanswered: the load writer counts
   them, drops that writer and writes on with a new one (``writers renewed``), so this part
   runs whether or not writers re-route to successors.
2. ``autoscale``: ``--auto-scales`` streams with ``ScalingPolicy.by_event_rate(1000, 2, 1)``,
   each written at 10x that rate (10 events a millisecond); time from the writer's start, and
   from the ``posted_ms`` of the first hot ``scale_report`` on the controller's request stream
   (read from the driver as it is posted), to the new epoch visible in ``get_stream_info``.
3. ``metadata``: streams of 10 segments (``ScalingPolicy.fixed(10)``) created up to each level of
   ``--streams`` (default 1,000 and 10,000: 100,000 segments; ``--fill-threads`` client threads
   fill, 8 by default, with a progress line every ``--progress-every`` streams; the last
   ``--create-sample`` creates of each level timed from one thread), then ``get_stream_info``
   calls/s from 1 and 4 threads, and bytes of metadata: the summed lengths of the controller's
   table segments (``_system/_kvt.controller/<n>``) divided by the streams. Goals printed
   against the rates: creates/s of the first fill >= 50, and the fill rate at the last level
   within 1.5x of the first's. Every level is filled to the end unless ``--fill-budget-s``
   (0, no limit, by default) says to skip one that would take longer at the rate so far.
4. ``baseline`` (measured first, on an idle cluster): a plain detached Ray actor's trivial method
   next to ``get_stream_info`` and ``list_scopes``, from one thread, 50 calls of each in turn
   (``--baseline-rounds`` rounds, so a drift of the machine's speed slows them alike), p50/p99,
   calls/s and each p50 against the plain call's (goal for ``get_stream_info``: <= 2x).

The cluster runs ``--controllers`` controller API instances (2, ``start_local``'s default).

Run: ``make bench-controller`` or ``.venv/bin/python -m benchmarks.controller --help``
(``--quick``: levels 200,1000 and fewer scales). Progress goes to stderr, tables to stdout.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ray

import pravega_ray as pr
from benchmarks.common import (
    local_cluster,
    local_ray,
    log,
    percentile,
    print_table,
    time_calls,
    work_dir,
)
from benchmarks.load_writer import LoadWriter
from pravega_ray.constants import APPEND_BLOCK_BYTES_MAX as MAX_BATCH_BYTES
from pravega_ray.constants import CONTROLLER_METADATA_PARTITIONS
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.controller.request_stream import REQUEST_SEGMENT, RequestStream
from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.errors import PravegaError, SegmentTruncatedError
from pravega_ray.naming import system_table_segment_name

PARTS = ("baseline", "scale", "autoscale", "metadata")
SETTLE_S = 0.5
"""After a scale returns, the next SETTLE_S are neither "during a scale" nor "no scale"."""
AUTO_TARGET_EVENTS_PER_S = 1000
AUTO_POLL_S = 0.05


# --- Part 4: baselines -------------------------------------------------------------------------


class _TrivialActor:
    def ping(self) -> int:
        return 0


def _trivial_actor(cluster: Any, tag: str) -> Any:
    """A detached actor with one trivial method (the plain Ray call baseline); kill it after."""
    name = f"bench-trivial-{tag}-{os.getpid()}"
    return (
        ray.remote(_TrivialActor)
        .options(name=name, namespace=cluster.namespace, lifetime="detached", num_cpus=0)
        .remote()
    )


def sequential_calls(call: Callable[[], object], calls: int) -> tuple[float, float, float]:
    """(p50 ms, p99 ms, calls/s) of ``calls`` sequential calls (after 10 warm-up calls)."""
    for _ in range(10):
        call()
    elapsed, latencies = time_calls(itertools.repeat(call, calls))
    return percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000, calls / elapsed


def interleaved_calls(
    calls: dict[str, Callable[[], object]], rounds: int, block: int = 50
) -> list[tuple[str, float, float, float]]:
    """(name, p50 ms, p99 ms, calls/s) of each of ``calls`` over ``rounds`` rounds, a round
    being ``block`` calls of each in turn (after a warm-up block of each). A machine whose
    speed drifts while they run (this one's does, by 1.5x within a minute) slows each alike;
    blocks rather than single calls in turn, so a call's lingering work (its reply, its
    actor's bookkeeping) delays at most the first call of the next block, not every call of
    the baseline."""
    for call in calls.values():
        for _ in range(block):
            call()
    latencies: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            _, each = time_calls(itertools.repeat(call, block))
            latencies[name].extend(each)
    return [
        (name, percentile(ls, 0.5) * 1000, percentile(ls, 0.99) * 1000, len(ls) / sum(ls))
        for name, ls in latencies.items()
    ]


def run_baselines(cluster: Any, args: argparse.Namespace) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope("base")
    mgr.create_stream("base", "s", pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(1)))
    actor = _trivial_actor(cluster, "base")
    try:
        measured = interleaved_calls(
            {
                "plain Ray actor call": lambda: ray.get(actor.ping.remote()),
                "get_stream_info": lambda: mgr.get_stream_info("base", "s"),
                "list_scopes": mgr.list_scopes,
            },
            args.baseline_rounds,
        )
    finally:
        ray.kill(actor)
    plain_p50 = measured[0][1]
    goals = {"get_stream_info": "<= 2x"}
    rows = [(*row, f"{row[1] / plain_p50:.2f}x", goals.get(row[0], "")) for row in measured]
    print_table(
        "Baselines: one thread, the calls in turn, idle cluster "
        f"({len(cluster.controller_handles())} controller instances)",
        ["call", "p50 ms", "p99 ms", "calls/s", "p50 / plain call", "goal"],
        rows,
    )


# --- Part 1: manual scaling under a writer ------------------------------------------------------


def _scale_once(mgr: Any, k: int, total: int, what: str) -> tuple[float, float]:
    """Split the stream's one segment in two, or merge its two back; (call, return) times."""
    info = mgr.get_stream_info("scale", "s")
    ids = [s.segment_id for s in sorted(info.segments, key=lambda s: s.key_low)]
    ranges = [(0.0, 0.5), (0.5, 1.0)] if len(ids) == 1 else [(0.0, 1.0)]
    start = time.monotonic()
    mgr.scale_stream("scale", "s", ids, ranges)
    end = time.monotonic()
    log(f"scale {k + 1}/{total} {what} ({len(ids)} -> {len(ranges)}): {end - start:.3f} s")
    return start, end


def run_manual_scaling(cluster: Any, args: argparse.Namespace) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope("scale")
    mgr.create_stream("scale", "s", pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(1)))
    alone = [_scale_once(mgr, k, args.scales, "no writer") for k in range(args.scales)]
    writer = LoadWriter(cluster, "scale", "s", args.batch_events, args.event_bytes)
    writer.start()
    time.sleep(args.warm_up_s)
    quiet = [(writer.started + 1.0, time.monotonic())]
    windows: list[tuple[float, float]] = []
    for k in range(args.scales):
        windows.append(_scale_once(mgr, k, args.scales, "under the writer"))
        time.sleep(args.scale_pause_s)
        quiet.append((windows[-1][1] + SETTLE_S, time.monotonic()))
    writer.stop()
    during = writer.gaps_during(windows)

    def row(what: str, seconds: list[float]) -> tuple[object, ...]:
        ms = [x * 1000 for x in seconds]
        return (what, percentile(ms, 0.5), percentile(ms, 0.99), max(ms))

    rows = [
        row("scale_stream -> new epoch active, no writer", [e - s for s, e in alone]),
        row("scale_stream -> new epoch active, writer", [e - s for s, e in windows]),
        row("writer's longest ack gap, per scale", during),
        ("writer's longest ack gap, no scale", None, None, writer.longest_gap_within(quiet) * 1000),
    ]
    print_table(
        f"Manual scale: {args.scales} scales of a 1-segment stream (split 1 -> 2, merge 2 -> 1)",
        ["measure", "p50 ms", "p99 ms", "max ms"],
        rows,
    )
    _print_writer(writer, f"{args.event_bytes} B events, write_events({args.batch_events})")


def _print_writer(writer: LoadWriter, what: str) -> None:
    errors = ", ".join(f"{k} {v:,}" for k, v in sorted(writer.errors.items())) or "none"
    print(
        f"writer ({what}): {writer.ack_rate():,.0f} events/s acknowledged; "
        f"{writer.written:,} written, {writer.acked:,} acked, {writer.failed:,} failed, "
        f"{writer.unanswered:,} never answered (left behind in dropped writers); "
        f"writers renewed {writer.renewals}; errors: {errors}"
    )


# --- Part 2: auto-scaling ----------------------------------------------------------------------


class RequestTail:
    """Reads the controller's request stream from its current end, keeping the first hot
    ``scale_report`` seen per stream (its ``posted_ms``, wall-clock ms)."""

    def __init__(self, cluster: Any) -> None:
        client = SegmentStoreClient(_invoker(cluster))
        self._requests = RequestStream(SegmentHelper(client))
        self._offset = client.get_info(REQUEST_SEGMENT).result(30).length
        self._client = client
        self.first_hot_ms: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="request-tail", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                requests, self._offset = self._requests.read(self._offset, 0.2)
            except SegmentTruncatedError:
                self._offset = self._client.get_info(REQUEST_SEGMENT).result(30).start_offset
                continue
            except PravegaError as e:
                log(f"request tail: {e!r}")
                time.sleep(0.1)
                continue
            for request in requests:
                body = request.body
                if body.get("type") == "scale_report" and body.get("direction") == "up":
                    self.first_hot_ms.setdefault(body["stream"], int(body["posted_ms"]))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _invoker(cluster: Any) -> Any:
    from pravega_ray_actors.ray_calls import RayServiceInvoker

    return RayServiceInvoker(cluster.container_handles(), cluster.namespace)


def run_auto_scaling(cluster: Any, args: argparse.Namespace) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope("auto")
    tail = RequestTail(cluster)
    rows = []
    rate = 10 * AUTO_TARGET_EVENTS_PER_S
    for run in range(args.auto_scales):
        stream = f"s{run}"
        policy = pr.ScalingPolicy.by_event_rate(AUTO_TARGET_EVENTS_PER_S, 2, 1)
        mgr.create_stream("auto", stream, pr.StreamConfiguration(scaling=policy))
        writer = LoadWriter(cluster, "auto", stream, 10, args.event_bytes, events_per_s=rate)
        wall_minus_mono = time.time() - time.monotonic()
        writer.start()
        deadline = writer.started + args.auto_timeout_s
        info = mgr.get_stream_info("auto", stream)
        while info.epoch == 0 and time.monotonic() < deadline:
            time.sleep(AUTO_POLL_S)
            info = mgr.get_stream_info("auto", stream)
        visible = time.monotonic()
        time.sleep(1.0)
        writer.stop()
        posted_ms = tail.first_hot_ms.get(stream)
        posted = None if posted_ms is None else posted_ms / 1000 - wall_minus_mono
        if info.epoch == 0:
            log(f"auto-scale {run + 1}: no new epoch within {args.auto_timeout_s:.0f} s")
            rows.append((stream, None, None, None, None, 0, len(info.segments)))
            continue
        hot = posted if posted is not None else writer.started
        during = writer.gaps_during([(hot, visible)])[0]
        quiet = writer.longest_gap_within([(writer.started + 1.0, hot)])
        log(f"auto-scale {run + 1}: epoch {info.epoch} ({len(info.segments)} segments)")
        rows.append((
            stream,
            visible - writer.started,
            None if posted is None else visible - posted,
            during * 1000,
            quiet * 1000,
            info.epoch,
            len(info.segments),
        ))  # fmt: skip
        _print_writer(writer, f"{rate:,} events/s paced, write_events(10)")
    tail.stop()
    print_table(
        f"Auto-scale: by_event_rate({AUTO_TARGET_EVENTS_PER_S}, 2, 1) written at {rate:,} "
        "events/s, until the new epoch is visible in get_stream_info",
        ["stream", "from writer start s", "from hot report s", "ack gap ms",
         "gap before ms", "epoch", "segments"],
        rows,
    )  # fmt: skip


# --- Part 3: metadata at scale -----------------------------------------------------------------


def metadata_bytes(cluster: Any) -> int:
    """Summed lengths of the controller's table segments (every record, with its history)."""
    client = SegmentStoreClient(_invoker(cluster))
    names = [
        system_table_segment_name("controller", n) for n in range(CONTROLLER_METADATA_PARTITIONS)
    ]
    return sum(int(client.get_info(name).result(30).length) for name in names)


def _create(mgr: Any, names: Sequence[str], threads: int, progress_every: int = 0) -> float:
    """Create ``names`` (10 segments each) from ``threads`` threads; streams per second. With
    ``progress_every``, a progress line each time that many more streams exist."""
    config = pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(10))
    start = time.perf_counter()
    done = itertools.count(1)

    def create(name: str) -> None:
        mgr.create_stream("meta", name, config)
        n = next(done)
        if progress_every and n % progress_every == 0:
            elapsed = time.perf_counter() - start
            log(f"  {n:,} of {len(names):,} created, {n / elapsed:.1f}/s")

    if threads == 1:
        for name in names:
            create(name)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(create, names))
    return len(names) / (time.perf_counter() - start)


def _info_rate(mgr: Any, names: Sequence[str], threads: int, seconds: float) -> float:
    """get_stream_info calls per second from ``threads`` threads for about ``seconds``."""
    counts = [0] * threads
    deadline = time.monotonic() + seconds

    def loop(t: int) -> None:
        rng = random.Random(t)
        while time.monotonic() < deadline:
            mgr.get_stream_info("meta", rng.choice(names))
            counts[t] += 1

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(loop, range(threads)))
    return sum(counts) / (time.perf_counter() - start)


def run_metadata(cluster: Any, args: argparse.Namespace) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope("meta")
    before = metadata_bytes(cluster)
    actor = _trivial_actor(cluster, "meta")
    names: list[str] = []
    fill_rate: float | None = None
    rows: list[tuple[object, ...]] = []
    notes: list[str] = []
    fill_rates: list[float] = []
    try:
        for level in args.streams:
            sample = min(args.create_sample, level - len(names))
            fill = [f"s{i}" for i in range(len(names), level - sample)]
            budget = args.fill_budget_s
            if fill and fill_rate and budget and len(fill) / fill_rate > budget:
                notes.append(
                    f"{level:,} streams: skipped; {len(fill):,} more creates at "
                    f"{fill_rate:.1f}/s would take ~{len(fill) / fill_rate / 60:.0f} min, over "
                    f"--fill-budget-s {budget:.0f} (0 lifts it)"
                )
                log(notes[-1])
                continue
            if fill:
                threads = args.fill_threads
                log(f"creating {len(fill):,} streams of 10 segments ({threads} threads)")
                fill_rate = _create(mgr, fill, threads, args.progress_every)
                fill_rates.append(fill_rate)
                names += fill
            timed = [f"s{i}" for i in range(len(names), len(names) + sample)]
            create_rate = _create(mgr, timed, 1) if timed else None
            names += timed
            fill_rate = fill_rate or create_rate
            log(f"{len(names):,} streams; measuring get_stream_info")
            one = _info_rate(mgr, names, 1, args.info_seconds)
            four = _info_rate(mgr, names, 4, args.info_seconds)
            ray_rate = sequential_calls(lambda: ray.get(actor.ping.remote()), 300)[2]
            total = metadata_bytes(cluster)
            rows.append((
                len(names), len(names) * 10, fill_rate, create_rate, one, four, ray_rate,
                total // len(names), round((total - before) / len(names)),
            ))  # fmt: skip
            log(f"metadata row: {rows[-1]}")
    finally:
        ray.kill(actor)
    print_table(
        "Metadata: streams of 10 segments in one scope; bytes = summed lengths of the "
        f"{CONTROLLER_METADATA_PARTITIONS} controller table segments / streams",
        ["streams", "segments", f"create/s {args.fill_threads} thr", "create/s 1 thr",
         "info/s 1 thr",
         "info/s 4 thr", "Ray call/s", "bytes/stream", "added B/stream"],
        rows,
    )  # fmt: skip
    for note in notes:
        print(note)
    if fill_rates:
        print(
            f"creates (10 segments), {args.fill_threads} client threads: {fill_rates[0]:.1f}/s "
            f"filling the first level (goal >= 50/s)"
        )
    if len(fill_rates) > 1:
        print(
            f"fill rate at the last level {fill_rates[-1]:.1f}/s against the first's "
            f"{fill_rates[0]:.1f}/s: {fill_rates[0] / fill_rates[-1]:.2f}x slower (goal <= 1.5x)"
        )


# --- Main --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default=",".join(PARTS), help="comma-separated subset of %(default)s")
    p.add_argument("--quick", action="store_true", help="levels 200,1000; 6 scales; 1 auto-scale")
    p.add_argument("--containers", type=int, default=4)
    p.add_argument("--scales", type=int, default=20, help="manual scales (split/merge)")
    p.add_argument("--scale-pause-s", type=float, default=1.0, help="writer alone between scales")
    p.add_argument("--warm-up-s", type=float, default=3.0, help="writer alone before the scales")
    p.add_argument("--event-bytes", type=int, default=100)
    p.add_argument("--batch-events", type=int, default=100, help="events per write_events call")
    p.add_argument("--auto-scales", type=int, default=2, help="auto-scaled streams, one at a time")
    p.add_argument("--auto-timeout-s", type=float, default=60.0)
    p.add_argument("--streams", default="1000,10000", help="metadata levels (stream counts)")
    p.add_argument("--create-sample", type=int, default=100, help="creates timed at each level")
    p.add_argument("--info-seconds", type=float, default=3.0, help="get_stream_info run length")
    p.add_argument("--fill-threads", type=int, default=8, help="client threads creating streams")
    p.add_argument(
        "--progress-every", type=int, default=1000, help="streams between progress lines"
    )
    p.add_argument("--fill-budget-s", type=float, default=0.0, help="skip slower levels; 0: none")
    p.add_argument("--controllers", type=int, default=2, help="controller API instances")
    p.add_argument(
        "--baseline-rounds", type=int, default=20, help="baseline rounds (50 calls of each)"
    )
    p.add_argument("--keep-data", action="store_true", help="keep the temporary data directory")
    args = p.parse_args(argv)
    if args.quick:
        args.streams, args.scales, args.auto_scales = "200,1000", 6, 1
    args.parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    bad = [part for part in args.parts if part not in PARTS]
    if bad:
        p.error(f"unknown --parts {bad}; choose from {','.join(PARTS)}")
    try:
        levels = [int(s) for s in str(args.streams).split(",") if s.strip()]
    except ValueError:
        levels = []
    if not levels or sorted(set(levels)) != levels or levels[0] < 1:
        p.error(f"--streams {args.streams!r}: give ascending stream counts, e.g. 1000,10000")
    names = ("containers", "scales", "event_bytes", "batch_events", "auto_scales")
    for name in (*names, "fill_threads", "progress_every", "controllers", "baseline_rounds"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.create_sample < 1 or (args.event_bytes + 8) * args.batch_events > MAX_BATCH_BYTES:
        p.error(f"--create-sample >= 1; a batch (events + 8 B each) <= {MAX_BATCH_BYTES:,} B")
    seconds = ("scale_pause_s", "warm_up_s", "auto_timeout_s", "info_seconds", "fill_budget_s")
    if any(not getattr(args, n) >= 0 for n in seconds) or not args.info_seconds > 0:
        p.error("seconds must be >= 0 (--info-seconds > 0)")
    args.streams = levels
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    namespace = f"bench-controller-{os.getpid()}-{int(time.time())}"
    print(
        f"benchmarks/controller.py {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
        f"{args.containers} containers, {args.controllers} controller instances, file tiers"
    )
    with work_dir("bench-controller-", keep=args.keep_data) as data_dir:
        log(f"starting a cluster in {data_dir} (namespace {namespace})")
        with (
            local_ray(namespace=namespace, logging_level="WARNING"),
            local_cluster(
                data_dir,
                args.containers,
                namespace=namespace,
                controller_instances=args.controllers,
            ) as cluster,
        ):
            run_parts(cluster, args)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


def run_parts(cluster: Any, args: argparse.Namespace) -> None:
    """The selected parts, in the order of PARTS."""
    steps = {
        "baseline": run_baselines,
        "scale": run_manual_scaling,
        "autoscale": run_auto_scaling,
        "metadata": run_metadata,
    }
    for part in PARTS:
        if part in args.parts:
            log(f"part {part}")
            steps[part](cluster, args)


if __name__ == "__main__":
    main()
