"""Readers (docs/benchmarks.md): does a reader keep up with one writer, and how fast are
catch-up reads from Tier-2?

Tables, every number measured in the same run on the same cluster, each with its baseline:

1. ``writer and readers``: for each event size (``--event-sizes``, 100 B and 1 KiB) and each
   stream (``--segments``, 1 and 4 segments; 16 routing keys):

   - ``writer alone``: ``write_event`` of ``--events`` events, then ``flush``: the baseline;
   - ``1 reader, backlog``: one reader of a new group reads those events back (every one,
     checked by count and bytes);
   - ``1 reader, tailing``: on a new stream, the reader is reading (its group created first)
     while the writer writes the same events; the reader's rate runs from the writer's first
     event to the reader's last, ``lag s`` is how long after the writer's ``flush`` returned
     the reader had the last event, ``behind`` how many events it still had to read then;
   - ``4 readers, backlog`` and ``4 readers, tailing``: the same with a group of four readers,
     each on a thread of its own (on the 4-segment stream only, unless ``--groups-on-all``).

   ``vs writer`` is the row's events/s over the writer-alone rate of the same stream and event
   size: a reader keeps up when it is at least 1 (the issue's goal), and ``writer rate`` of a
   tailing row shows what the writer made with the reader beside it.
2. ``catch-up from Tier-2``: ``--catchup-mib`` of ``--catchup-event-bytes`` events written to a
   one-segment stream, every container flushed to Tier-2 (``flush_to_storage``) and restarted
   (so the read index's cache is cold), the chunk files' pages dropped from the OS page cache
   (``posix_fadvise(DONTNEED)``); then one reader reads all of it. Baselines in the same run, on
   the same chunk files, pages dropped again before each: plain Python ``open().read()`` of each
   chunk file, and the same plus ``zlib.crc32`` (the check every Tier-2 read makes).

3. ``JSON end to end`` (``--json``, which runs this table alone): small dicts
   (``json_event``, about 70 bytes as JSON) written by one writer (``write_event``, then
   ``flush``) to a one-segment stream and read back from the backlog by one reader of a new
   group, with ``read_next_event`` and with ``read_next_events(1000)``, through
   ``JsonSerializer``; beside them, measured in the same run, the serializer alone
   (``serialize``, ``deserialize`` of the same events) and the same events' bytes through
   ``BytesSerializer`` (the path around the serializer with nothing to encode). Every JSON row
   says PASS or MISS against the goal (``JSON_GOAL_EVENTS_S``, issue 28); every event read is
   checked against the one written.

By default the cluster is an in-process one (``InProcessCluster``, 4 containers, memory
Tier-1, a filesystem Tier-2 in a temporary directory: the client's and containers' own costs,
no Ray); ``--ray`` runs on ``pr.start_local`` (a fresh namespace and temporary directory, file
tiers, containers restarted with ``ray.kill(no_restart=False)``; shut down at the end).
``--quick`` is a smoke run (small counts). Progress goes to stderr, tables to stdout. The
machine is shared: read the ratio columns first. Timings decide nothing in the tests.

Run: ``make bench-readers`` or ``.venv/bin/python -m benchmarks.readers --help``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pravega_ray as pr
from benchmarks.common import (
    drop_page_cache,
    log,
    new_stream,
    print_table,
    start_local,
    wait_restarted,
    work_dir,
)
from pravega_ray.constants import MIB
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.segmentstore.builder import build_in_memory_container
from pravega_ray.segmentstore.config import ContainerConfig
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.storage.filesystem import FileSystemChunkStorage

KEYS = 16
BATCH = 0
"""``--batch``: read with ``read_next_events(BATCH)`` instead of ``read_next_event`` (0)."""
JSON_GOAL_EVENTS_S = 300_000
"""``--json``: the events/s each way the JSON rows are held to (PASS/MISS)."""
JSON_BATCH = 1000
"""``--json``: the ``read_next_events`` batch of the batched rows."""
SERIALIZER_REPEATS = 3
"""``--json``: rounds of the serializer-alone rows (the best counts)."""
READ_TIMEOUT_S = 0.5
STALL_S = 60.0
"""A reader that gets nothing for this long while events are missing fails the row."""
RESTART_WAIT_S = 120.0
RESTART_POLL_S = 0.2


class FileTier2Cluster(InProcessCluster):
    """The in-process cluster with its Tier-2 (chunks and controller records) in a directory,
    so catch-up reads go to files, as on Ray."""

    def __init__(self, tier2_root: Path, container_count: int = 4) -> None:
        self._tier2 = FileSystemChunkStorage(tier2_root)
        super().__init__(container_count)

    def _new_container(self, container_id: int) -> SegmentContainer:
        container = build_in_memory_container(
            ContainerConfig(container_id, **self._options),
            self.log_stores[container_id],
            self._tier2,
        )
        container.recover()
        return container

    def _new_controller(self) -> Any:
        self.storage = self._tier2  # type: ignore[assignment]  # the controller's records too
        return super()._new_controller()


@dataclass
class System:
    """What the benchmark needs of a cluster beyond the client factory."""

    cluster: Any
    tier2_root: Path
    flush_to_storage: Callable[[], None]
    restart_containers: Callable[[], None]


@dataclass
class ReadRun:
    """One reading of ``expected`` events by a group's readers."""

    counts: list[int]
    byte_counts: list[int]
    last_read: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)


# --- writing and reading --------------------------------------------------------------------


def write(
    cluster: Any, scope: str, stream: str, events: int, payload: bytes
) -> tuple[float, float, float]:
    """Write ``events`` events round robin over ``KEYS`` keys and flush: (start, end) times
    and the calling thread's CPU seconds (``time.thread_time``) for it."""
    keys = [str(k) for k in range(KEYS)]
    with cluster.create_writer(scope, stream, pr.BytesSerializer()) as writer:
        started = time.perf_counter()
        cpu_started = time.thread_time()
        for n in range(events):
            writer.write_event(payload, routing_key=keys[n % KEYS])
        writer.flush()
        return started, time.perf_counter(), time.thread_time() - cpu_started


def new_group(
    cluster: Any, scope: str, stream: str, readers: int, serializer: Any = None
) -> list[Any]:
    """A new group on ``scope/stream`` from its head and ``readers`` readers joined to it
    (``serializer``: bytes by default)."""
    group = "rg" + uuid.uuid4().hex[:8]
    cluster.create_reader_group(scope, group, pr.ReaderGroupConfig.for_streams(f"{scope}/{stream}"))
    serializer = serializer if serializer is not None else pr.BytesSerializer()
    return [cluster.create_reader(f"r{i}", scope, group, serializer) for i in range(readers)]


def read_or_stall(reader: Any, batch: int, idle_since: float, who: str) -> tuple[list[Any], float]:
    """One read (``read_next_events(batch)``, or ``read_next_event`` for 0) and the time the
    reader last got something (now, if it got something here); TimeoutError once it got
    nothing for ``STALL_S``."""
    if batch:
        events = reader.read_next_events(batch, READ_TIMEOUT_S)
    else:
        one = reader.read_next_event(READ_TIMEOUT_S)
        events = [] if one is None else [one]
    now = time.perf_counter()
    if events:
        return events, now
    if now - idle_since > STALL_S:
        raise TimeoutError(f"{who} got nothing for {STALL_S:.0f}s")
    return events, idle_since


def read_all(readers: list[Any], expected: int, run: ReadRun, index: int) -> None:
    """Read with ``readers[index]`` until the group has ``expected`` events; one thread."""
    reader = readers[index]
    idle_since = time.perf_counter()
    cpu_started = time.thread_time()
    try:
        while sum(run.counts) < expected:
            batch, idle_since = read_or_stall(reader, BATCH, idle_since, f"reader {index}")
            if not batch:
                continue
            for event in batch:
                if not event.is_checkpoint:
                    run.counts[index] += 1
                    run.byte_counts[index] += len(event.event)
            run.last_read[index] = idle_since
    except BaseException as e:  # reported by the caller, not lost in the thread
        run.errors.append(e)
    run.cpu_s[index] = time.thread_time() - cpu_started


def start_readers(readers: list[Any], expected: int) -> tuple[ReadRun, list[threading.Thread]]:
    n = len(readers)
    run = ReadRun([0] * n, [0] * n, [0.0] * n, [0.0] * n)
    threads = [
        threading.Thread(target=read_all, args=(readers, expected, run, i), daemon=True)
        for i in range(n)
    ]
    for t in threads:
        t.start()
    return run, threads


def finish(readers: list[Any], run: ReadRun, threads: list[threading.Thread], payload: int) -> None:
    for t in threads:
        t.join()
    for reader in readers:
        reader.close()
    if run.errors:
        raise run.errors[0]
    total = sum(run.counts)
    assert sum(run.byte_counts) == total * payload, "an event came back with the wrong size"


@dataclass
class CaseResult:
    writer_alone: float
    writer_cpu_us: float
    backlog: float
    backlog_cpu_us: float
    tail_reader: float
    tail_cpu_us: float
    tail_writer: float
    lag_s: float
    behind: int


def measure_case(
    system: System, scope: str, segments: int, readers: int, events: int, payload: bytes
) -> CaseResult:
    """Writer alone (the baseline), then ``readers`` readers on that backlog, then tailing.

    The backlog is read once Tier-2 has caught up (``flush_to_storage``), so the readers do
    not share the process with the storage writer's flushes of what was just written.
    """
    cluster = system.cluster
    stream = new_stream(cluster, scope, segments)
    write(cluster, scope, stream, min(events, 10_000), payload)  # warm-up, not counted
    start, end, writer_cpu_s = write(cluster, scope, stream, events, payload)
    writer_alone = events / (end - start)
    total = events + min(events, 10_000)
    system.flush_to_storage()
    group = new_group(cluster, scope, stream, readers)
    begun = time.perf_counter()
    run, threads = start_readers(group, total)
    finish(group, run, threads, len(payload))
    backlog = total / (max(run.last_read) - begun)
    backlog_cpu_us = sum(run.cpu_s) / total * 1e6
    system.flush_to_storage()

    stream = new_stream(cluster, scope, segments)
    group = new_group(cluster, scope, stream, readers)
    run, threads = start_readers(group, events)
    time.sleep(0.3)  # the readers have synced with the group and poll the tail
    start, end, _ = write(cluster, scope, stream, events, payload)
    behind = events - sum(run.counts)
    finish(group, run, threads, len(payload))
    last = max(run.last_read)
    system.flush_to_storage()
    return CaseResult(
        writer_alone,
        writer_cpu_s / events * 1e6,
        backlog,
        backlog_cpu_us,
        events / (last - start),
        sum(run.cpu_s) / events * 1e6,
        events / (end - start),
        max(0.0, last - end),
        behind,
    )


# --- catch-up from Tier-2 -------------------------------------------------------------------


def chunk_files(tier2_root: Path, scope: str, stream: str) -> list[Path]:
    """The Tier-2 chunk files of ``scope/stream``'s segments."""
    base = tier2_root / "segments" / scope
    return sorted(
        p
        for p in base.rglob("*")
        if p.is_file() and p.relative_to(base).parts[0].startswith(stream)
    )


def plain_read_mb_s(paths: Sequence[Path], checksum: bool) -> float:
    drop_page_cache(paths)
    started = time.perf_counter()
    total = 0
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        if checksum:
            zlib.crc32(data)
        total += len(data)
    return total / (time.perf_counter() - started) / 1e6


def catch_up(system: System, scope: str, mib: int, event_bytes: int) -> list[tuple[object, ...]]:
    cluster = system.cluster
    payload = os.urandom(event_bytes)
    events = max(1, mib * MIB // event_bytes)
    stream = new_stream(cluster, scope, 1)
    log(f"catch-up: writing {events:,} events of {event_bytes:,} B ({mib} MiB)")
    start, end, _ = write(cluster, scope, stream, events, payload)
    write_mb_s = events * event_bytes / (end - start) / 1e6
    log("catch-up: flushing to Tier-2 and restarting the containers")
    flushed = time.perf_counter()
    system.flush_to_storage()
    flush_s = time.perf_counter() - flushed
    system.restart_containers()
    files = chunk_files(system.tier2_root, scope, stream)
    if not files:
        raise FileNotFoundError(f"no chunk files of {scope}/{stream} in {system.tier2_root}")
    on_disk = sum(p.stat().st_size for p in files)
    drop_page_cache(files)
    log(f"catch-up: reading {on_disk / MIB:.0f} MiB in {len(files)} chunk files")
    reader = new_group(cluster, scope, stream, 1)
    begun = time.perf_counter()
    run, threads = start_readers(reader, events)
    finish(reader, run, threads, event_bytes)
    read_mb_s = events * event_bytes / (run.last_read[0] - begun) / 1e6
    plain = plain_read_mb_s(files, checksum=False)
    plain_crc = plain_read_mb_s(files, checksum=True)
    log(f"catch-up: write {write_mb_s:.0f} MB/s, flush to Tier-2 took {flush_s:.1f}s")
    return [
        ("plain open().read() of the chunk files", plain, 1.0),
        ("plain read + zlib.crc32", plain_crc, plain_crc / plain),
        (f"1 reader, cold cache ({len(files)} chunks)", read_mb_s, read_mb_s / plain),
    ]


# --- JSON end to end -------------------------------------------------------------------------


def json_event(n: int) -> dict[str, Any]:
    """The ``n``-th small dict of the JSON table (a sensor reading)."""
    return {"id": n, "sensor": f"s-{n % 64}", "value": n * 0.25, "ts": 1_700_000_000_000 + n}


@dataclass
class Timed:
    """A timed run over some events: events/s (wall clock) and this process's CPU per event
    (``time.process_time``: every thread, so in process the containers' too)."""

    events_s: float
    cpu_us: float


@contextlib.contextmanager
def timing(events: int, into: list[Timed]) -> Iterator[None]:
    """Time the block over ``events`` events and append the result to ``into``."""
    started, cpu_started = time.perf_counter(), time.process_time()
    yield
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    into.append(Timed(events / wall, cpu / events * 1e6))


def timed_writes(
    cluster: Any, scope: str, stream: str, serializer: Any, events: Sequence[Any]
) -> Timed:
    """``write_event`` of every event round robin over ``KEYS`` keys, then ``flush``."""
    keys = [str(k) for k in range(KEYS)]
    result: list[Timed] = []
    with cluster.create_writer(scope, stream, serializer) as writer, timing(len(events), result):
        for n, event in enumerate(events):
            writer.write_event(event, routing_key=keys[n % KEYS])
        writer.flush()
    return result[0]


def timed_reads(
    cluster: Any, scope: str, stream: str, serializer: Any, expected: Sequence[Any], batch: int
) -> Timed:
    """One reader of a new group reads ``expected`` back (``read_next_events(batch)``, or
    ``read_next_event`` for 0). AssertionError unless it read exactly ``expected``, in order
    (one segment, one writer: the segment's order is the order written)."""
    got: list[Any] = []
    result: list[Timed] = []
    with new_group(cluster, scope, stream, 1, serializer)[0] as reader:
        idle_since = time.perf_counter()
        with timing(len(expected), result):
            while len(got) < len(expected):
                read, idle_since = read_or_stall(reader, batch, idle_since, "the reader")
                got.extend(e.event for e in read if not e.is_checkpoint)
    assert got == list(expected), "the events read are not the events written"
    return result[0]


def serializer_alone(serializer: Any, events: Sequence[Any]) -> tuple[Timed, Timed]:
    """``serialize`` of every event, then ``deserialize`` of every payload, each the fastest
    of ``SERIALIZER_REPEATS`` rounds (the first warms up; the machine is shared)."""
    encodes: list[Timed] = []
    decodes: list[Timed] = []
    for _ in range(SERIALIZER_REPEATS):
        with timing(len(events), encodes):
            payloads = [serializer.serialize(e) for e in events]
        with timing(len(events), decodes):
            back = [serializer.deserialize(p) for p in payloads]
        assert back == list(events), "the serializer did not round-trip"
    return max(encodes, key=lambda t: t.events_s), max(decodes, key=lambda t: t.events_s)


def json_table(system: System, scope: str, events: int, rounds: int) -> list[tuple[object, ...]]:
    """The JSON table's rows (module docstring, table 3): each row the fastest of ``rounds``
    rounds, every round measuring every row (bytes and JSON interleaved, so a busy spell of
    the shared machine does not fall on one side only).

    The events written and expected back are built first and frozen out of the garbage
    collector's way (``gc.freeze``): the benchmark's own hundreds of thousands of dicts would
    otherwise be scanned by every full collection and charged to the path measured.
    """
    cluster = system.cluster
    json_s, bytes_s = pr.JsonSerializer(), pr.BytesSerializer()
    dicts = [json_event(n) for n in range(events)]
    payloads = [json_s.serialize(e) for e in dicts]
    gc.freeze()
    best: dict[tuple[str, str], Timed] = {}

    def keep(key: tuple[str, str], timed: Timed) -> None:
        if key not in best or timed.events_s > best[key].events_s:
            best[key] = timed

    try:
        for round_number in range(1, rounds + 1):
            log(f"JSON round {round_number}/{rounds}: the serializer alone, {events:,} events")
            encode, decode = serializer_alone(json_s, dicts)
            keep(("alone", "serialize"), encode)
            keep(("alone", "deserialize"), decode)
            for name, serializer, items in (("bytes", bytes_s, payloads), ("JSON", json_s, dicts)):
                log(f"JSON round {round_number}: {name}, one writer, then one reader")
                stream = new_stream(cluster, scope, 1)
                timed_writes(cluster, scope, stream, serializer, items[:10_000])  # warm-up
                stream = new_stream(cluster, scope, 1)
                keep((name, "write_event"), timed_writes(cluster, scope, stream, serializer, items))
                system.flush_to_storage()
                for batch in (0, JSON_BATCH):
                    call = f"read_next_events({batch})" if batch else "read_next_event"
                    read = timed_reads(cluster, scope, stream, serializer, items, batch)
                    keep((name, call), read)
    finally:
        gc.unfreeze()
    encode, decode = best["alone", "serialize"], best["alone", "deserialize"]
    rows: list[tuple[object, ...]] = [
        ("JsonSerializer.serialize alone", encode.events_s, encode.cpu_us, None, None, None),
        ("JsonSerializer.deserialize alone", decode.events_s, decode.cpu_us, None, None, None),
    ]
    for call in ("write_event", "read_next_event", f"read_next_events({JSON_BATCH})"):
        who = "one writer" if call == "write_event" else "one reader"
        plain = best["bytes", call]
        rows.append((f"bytes: {call}, {who}", plain.events_s, plain.cpu_us, 1.0, None, None))
    for call in ("write_event", "read_next_event", f"read_next_events({JSON_BATCH})"):
        who, alone = ("one writer", encode) if call == "write_event" else ("one reader", decode)
        got, plain = best["JSON", call], best["bytes", call]
        rows.append(
            (
                f"JSON: {call}, {who}",
                got.events_s,
                got.cpu_us,
                got.events_s / plain.events_s,
                got.events_s / alone.events_s,
                "PASS" if got.events_s >= JSON_GOAL_EVENTS_S else "MISS",
            )
        )
    return rows


# --- the two systems ------------------------------------------------------------------------


def in_process(directory: Path) -> System:
    cluster = FileTier2Cluster(directory / "tier2")

    def flush() -> None:
        for i in range(cluster.container_count):
            cluster.run(cluster.container(i).flush_to_storage()).result(600)

    def restart() -> None:
        for i in range(cluster.container_count):
            cluster.restart_container(i)

    return System(cluster, directory / "tier2", flush, restart)


def on_ray(directory: Path) -> System:
    import ray

    cluster = start_local(directory, namespace="bench-readers-" + uuid.uuid4().hex[:6])

    def flush() -> None:
        ray.get([h.flush_to_storage.remote() for h in cluster.container_handles()], timeout=600)

    def restart() -> None:
        handles = cluster.container_handles()
        old = {i: p["pid"] for i, p in enumerate(ray.get([h.describe.remote() for h in handles]))}
        for handle in handles:
            ray.kill(handle, no_restart=False)
        deadline = time.perf_counter() + RESTART_WAIT_S
        for i, handle in enumerate(handles):
            wait_restarted(handle, old[i], deadline, RESTART_POLL_S)

    # start_local's default Tier-2 (segmentstore.builder.default_tier_urls).
    return System(cluster, directory / "tier2", flush, restart)


# --- the run --------------------------------------------------------------------------------


def run(system: System, args: argparse.Namespace) -> list[str]:
    """Measure and print every table; the failed cases (their rows say FAILED)."""
    cluster = system.cluster
    scope = "bench" + uuid.uuid4().hex[:6]
    cluster.stream_manager().create_scope(scope)
    if args.json:
        print_table(
            f"JSON end to end: {args.events:,} small dicts, one writer, one reader, 1 segment "
            f"(goal: {JSON_GOAL_EVENTS_S:,} events/s each way; 'vs bytes' = over the same "
            "call on the events' bytes, 'vs alone' = over the serializer alone)",
            ["case", "events/s", "cpu us/ev", "vs bytes", "vs alone", "goal"],
            json_table(system, scope, args.events, args.json_rounds),
        )
        return []
    rows: list[tuple[object, ...]] = []
    failures: list[str] = []
    for event_bytes in args.event_sizes:
        payload = os.urandom(event_bytes)
        events = args.events
        for segments in args.segments:
            group_sizes = [1] + ([4] if segments >= 4 or args.groups_on_all else [])
            writer_alone = None
            for readers in group_sizes:
                log(f"{event_bytes} B, {segments} seg, {readers} reader(s), {events:,} events")
                where = f"{event_bytes:,} B, {segments} seg"
                label = f"{readers} reader{'s' if readers > 1 else ''}"
                try:
                    r = measure_case(system, scope, segments, readers, events, payload)
                except Exception as e:  # the other rows still run; the exit code says it
                    log(f"{where}, {label}: FAILED: {e!r}")
                    rows.append((f"{where}, {label} (FAILED)", *[None] * 7))
                    failures.append(f"{where}, {label}: {e!r}")
                    continue
                if writer_alone is None:
                    writer_alone = r.writer_alone
                    mb = writer_alone * event_bytes / 1e6
                    rows.append(
                        (
                            f"{where}, writer alone",
                            writer_alone,
                            mb,
                            1.0,
                            r.writer_cpu_us,
                            None,
                            None,
                            None,
                        )
                    )
                # Each case measures the writer again; the first is the row's baseline.
                rows.append(
                    (
                        f"{where}, {label}, backlog",
                        r.backlog,
                        r.backlog * event_bytes / 1e6,
                        r.backlog / writer_alone,
                        r.backlog_cpu_us,
                        None,
                        None,
                        None,
                    )
                )
                rows.append(
                    (
                        f"{where}, {label}, tailing",
                        r.tail_reader,
                        r.tail_reader * event_bytes / 1e6,
                        r.tail_reader / writer_alone,
                        r.tail_cpu_us,
                        r.tail_writer,
                        r.lag_s,
                        r.behind,
                    )
                )
    print_table(
        "Writer and readers (events/s; 'vs writer' = over the writer-alone rate above it)",
        ["case", "events/s", "MB/s", "vs writer", "cpu us/ev", "writer rate", "lag s", "behind"],
        rows,
    )
    for event_bytes in args.catchup_event_bytes if args.catchup_mib > 0 else []:
        catchup = catch_up(system, scope, args.catchup_mib, event_bytes)
        print_table(
            f"Catch-up from Tier-2: {args.catchup_mib} MiB of {event_bytes:,}-byte events, "
            "1 segment, OS page cache dropped before each row",
            ["read", "MB/s", "vs plain"],
            catchup,
        )
    return failures


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ray", action="store_true", help="run on pr.start_local")
    parser.add_argument("--quick", action="store_true", help="a smoke run: small counts")
    parser.add_argument("--events", type=int, default=100_000, help="events per case")
    parser.add_argument("--event-sizes", type=int, nargs="+", default=[100, 1024])
    parser.add_argument("--segments", type=int, nargs="+", default=[1, 4])
    parser.add_argument(
        "--groups-on-all", action="store_true", help="4-reader groups on every stream"
    )
    parser.add_argument("--catchup-mib", type=int, default=256, help="0 skips the catch-up")
    parser.add_argument("--catchup-event-bytes", type=int, nargs="+", default=[1024, 65536])
    parser.add_argument(
        "--batch", type=int, default=0, help="read with read_next_events(N) (0: one by one)"
    )
    parser.add_argument(
        "--json", action="store_true", help="only the JSON end-to-end table (table 3)"
    )
    parser.add_argument(
        "--json-rounds", type=int, default=3, help="--json: rounds, the fastest counts"
    )
    parser.add_argument("--data-dir", default=None, help="where the temporary directory goes")
    args = parser.parse_args(argv)
    if args.quick:
        args.events = min(args.events, 2_000)
        args.catchup_mib = min(args.catchup_mib, 4)
    if min([args.events, *args.event_sizes, *args.segments, *args.catchup_event_bytes]) < 1:
        parser.error("--events, event sizes and segments must be at least 1")
    if args.json_rounds < 1:
        parser.error("--json-rounds must be at least 1")
    if args.batch < 0:
        parser.error("--batch must be at least 0 (0 reads one event per call)")
    global BATCH
    BATCH = args.batch
    if args.catchup_mib < 0:
        parser.error("--catchup-mib must be at least 0 (0 skips the catch-up)")
    with work_dir("pravega-bench-readers-", args.data_dir) as directory:
        system = on_ray(directory) if args.ray else in_process(directory)
        try:
            failures = run(system, args)
        finally:
            system.cluster.shutdown()
    if failures:
        print("\nFailed cases:\n" + "\n".join(failures))
        raise SystemExit(1)


if __name__ == "__main__":
    main()
