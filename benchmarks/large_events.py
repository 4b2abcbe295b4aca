"""Large events (docs/design.md): MB/s and peak resident memory writing and reading 16 MiB,
128 MiB and 1 GiB events, against baselines measured in the same run.

Rows, each writing about ``--total-mib`` of payload (at least one event) and then reading
it back:

- ``raw write+fsync``: the disk's floor in plain Python: 8 MiB ``write`` + ``fsync``
  groups to a file on the same disk as the cluster's data.
- ``plain 1 MiB events``: ``write_event`` of 1 MiB events (ordinary appends), flushed.
- ``large <size>``: ``write_event`` of events of that size, each through a transient
  segment merged into its segment (``client/large_events.py``), each waited for.

Two systems: ``ray`` (``pravega_ray.start_local``: container actors on filesystem tiers,
fsynced, under ``--data-dir``) and ``in-process`` (the in-process cluster on memory
backends: the client's and container's own costs, no disk, no Ray). Peak RSS is sampled
every 5 ms during each row: the driver process (which holds the writer, the reader and,
in-process, the containers) and, with Ray, the container actors' processes. A row's
``rss/event`` is the peak growth over the row's starting RSS divided by the event size:
the "small multiple" the issue asks for.

Run: ``make bench-large-events`` (16 and 128 MiB) or ``.venv/bin/python -m
benchmarks.large_events --full`` (adds 1 GiB). Timings decide nothing in the tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psutil

import pravega_ray as pr
from benchmarks.common import local_cluster, local_ray
from pravega_ray.constants import MIB
from pravega_ray.inprocess import InProcessCluster

RAW_GROUP_BYTES = 8 * MIB


@dataclass
class Row:
    system: str
    case: str
    event_mib: float
    events: int
    write_mb_s: float
    read_mb_s: float
    driver_peak_mib: float
    driver_growth_per_event: float
    store_peak_mib: float | None


class PeakRss:
    """Samples the peak RSS of this process and of ``others`` (pids) from a thread."""

    def __init__(self, others: Callable[[], list[int]] = list) -> None:
        self._me = psutil.Process()
        self._others = others
        self._stop = threading.Event()
        self.start = self._me.memory_info().rss
        self.peak = self.start
        self.others_peak = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._me.memory_info().rss)
            total = 0
            for pid in self._others():
                with suppress(psutil.Error):
                    total += psutil.Process(pid).memory_info().rss
            self.others_peak = max(self.others_peak, total)
            self._stop.wait(0.005)

    @contextmanager
    def sampling(self) -> Iterator[PeakRss]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()


def payload_of(size: int) -> bytes:
    """A ``size``-byte payload (random-ish, built once per size)."""
    block = os.urandom(MIB)
    return (block * (size // MIB + 1))[:size]


def raw_fsync_mb_s(directory: Path, total: int) -> float:
    data = os.urandom(RAW_GROUP_BYTES)
    path = directory / "raw-fsync.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    started = time.perf_counter()
    try:
        written = 0
        while written < total:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            written += len(data)
    finally:
        os.close(fd)
        path.unlink()
    return written / (time.perf_counter() - started) / 1e6


def run_case(
    factory: pr.ClientFactory,
    system: str,
    stream: str,
    event_bytes: int,
    count: int,
    store_pids: Callable[[], list[int]],
) -> Row:
    mgr = factory.stream_manager()
    mgr.create_scope("bench")
    mgr.create_stream("bench", stream, pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    event = payload_of(event_bytes)
    del mgr
    rss = PeakRss(store_pids)
    with rss.sampling():
        with factory.create_writer("bench", stream) as writer:
            started = time.perf_counter()
            for _ in range(count):
                if event_bytes > 8 * MIB:
                    writer.write_event(event, routing_key="k").result(600)
                else:
                    writer.write_event(event, routing_key="k")
            writer.flush()
            write_s = time.perf_counter() - started
        group = f"rg-{stream}"
        factory.create_reader_group(
            "bench", group, pr.ReaderGroupConfig.for_streams(f"bench/{stream}")
        )
        with factory.create_reader("r", "bench", group) as reader:
            started = time.perf_counter()
            for _ in range(count):
                got = reader.read_next_event(120)
                assert got is not None and len(got.event) == event_bytes, "event lost or cut"
                del got
            read_s = time.perf_counter() - started
    total = event_bytes * count
    growth = max(0, rss.peak - rss.start) / event_bytes
    return Row(
        system,
        "plain 1 MiB events" if event_bytes <= 8 * MIB else f"large {event_bytes // MIB} MiB",
        event_bytes / MIB,
        count,
        total / write_s / 1e6,
        total / read_s / 1e6,
        rss.peak / MIB,
        growth,
        rss.others_peak / MIB if store_pids() else None,
    )


def print_table(raw: float, rows: list[Row]) -> None:
    print()
    print(f"raw write+fsync ({RAW_GROUP_BYTES // MIB} MiB groups), same disk: {raw:8.1f} MB/s")
    head = (
        f"{'system':<11}{'case':<20}{'events':>7}{'write MB/s':>11}{'vs plain':>9}"
        f"{'vs raw':>8}{'read MB/s':>10}{'driver peak MiB':>16}{'rss/event':>10}"
        f"{'store peak MiB':>15}"
    )
    print(head)
    print("-" * len(head))
    plain = {r.system: r.write_mb_s for r in rows if r.case.startswith("plain")}
    for r in rows:
        store = f"{r.store_peak_mib:15.0f}" if r.store_peak_mib is not None else f"{'-':>15}"
        print(
            f"{r.system:<11}{r.case:<20}{r.events:>7}{r.write_mb_s:>11.1f}"
            f"{r.write_mb_s / plain[r.system]:>8.0%} {r.write_mb_s / raw:>7.0%}"
            f"{r.read_mb_s:>10.1f}{r.driver_peak_mib:>16.0f}{r.driver_growth_per_event:>10.2f}"
            f"{store}"
        )


def one_row(system: str, size: int, count: int, directory: Path) -> Row:
    """One row, in a process of its own (so no row inherits another's freed memory)."""
    if system == "in-process":
        cluster = InProcessCluster(container_count=1)
        try:
            return run_case(cluster, system, "s", size, count, list)
        finally:
            cluster.shutdown()

    def store_pids() -> list[int]:
        """The container actors of this process's own Ray (its descendants)."""
        return [
            p.pid
            for p in psutil.Process().children(recursive=True)
            if "SegmentContainerActor" in " ".join(_cmdline(p))
        ]

    with (
        local_ray(num_cpus=2, log_to_driver=False),
        local_cluster(directory / "data", 1, namespace=f"bench-large-{os.getpid()}") as cluster,
    ):
        return run_case(cluster, system, "s", size, count, store_pids)


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="add the 1 GiB row")
    parser.add_argument("--total-mib", type=int, default=256, help="payload MiB per row")
    parser.add_argument("--systems", default="in-process,ray", help="comma-separated")
    parser.add_argument("--data-dir", default=None, help="where the rows keep their data")
    parser.add_argument(
        "--one", nargs=3, metavar=("SYSTEM", "SIZE", "COUNT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.one:  # a child running one row: its result as JSON on the last line
        system, size, count = args.one[0], int(args.one[1]), int(args.one[2])
        row = one_row(system, size, count, Path(args.data_dir))
        print(json.dumps(dataclasses.asdict(row)), flush=True)
        return
    sizes = [1 * MIB, 16 * MIB, 128 * MIB] + ([1024 * MIB] if args.full else [])
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(dir=args.data_dir, prefix="bench-large-") as tmp:
        directory = Path(tmp)
        raw = raw_fsync_mb_s(directory, args.total_mib * MIB)
        for system in args.systems.split(","):
            for i, size in enumerate(sizes):
                count = max(1, args.total_mib * MIB // size)
                row_dir = directory / f"{system}-{i}"
                row_dir.mkdir()
                child = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "benchmarks.large_events",
                        "--data-dir",
                        str(row_dir),
                        "--one",
                        system,
                        str(size),
                        str(count),
                    ],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if child.returncode != 0:
                    print(child.stdout[-2000:], child.stderr[-4000:], file=sys.stderr)
                    raise SystemExit(f"row {system} {size} failed")
                rows.append(Row(**json.loads(child.stdout.strip().splitlines()[-1])))
                print(rows[-1], flush=True)
    print_table(raw, rows)


if __name__ == "__main__":
    main()
