"""What event time costs (issue 27 item 1), in process, each beside its baseline of the run.

Run: ``.venv/bin/python -m benchmarks.watermarks [--streams N] [--writers W]``
(``make bench-watermarks``).

On an ``InProcessCluster`` (4 containers, memory tiers), one thread unless said:

- ``write_event`` alone against ``write_event`` + ``note_time`` after every 100 events, best
  of three alternating runs each (the caller's cost of noting: ``note_time`` returns at
  once, the mark is sent by the writer's thread once the events before it are acknowledged);
- the controller's ``note_writer_mark`` per call against ``get_stream_info`` (a plain read of
  the same stream's record);
- the watermark workflow over ``--streams`` one-segment streams with ``--writers`` writers'
  marks each (Pravega's figure: 1,000 streams, 10 writers): one run over all of them, per
  stream, against listing the same marks and reading each stream's record (the reads a run
  cannot avoid);
- time-window lag: two writers note the wall clock every 20 ms while writing, the
  workflow runs every ``--period`` seconds on a thread, one reader reads and samples
  ``slowest noted time - window lower bound``: p50 and p99 in ms, against the period.
On Ray each controller and segment call adds an actor round trip to these numbers.
"""

from __future__ import annotations

import argparse
import threading
import time

from benchmarks.common import percentile, print_table
from pravega_ray import ScalingPolicy, StreamConfiguration
from pravega_ray.client.serializers import BytesSerializer, JsonSerializer
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import segment_id
from pravega_ray.stream_configuration import ReaderGroupConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=10)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--period", type=float, default=0.5)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    cluster = InProcessCluster(container_count=4)
    try:
        rows = note_time_cost(cluster, args.events)
        rows += controller_cost(cluster)
        rows += workflow_cost(cluster, args.streams, args.writers)
        lag = window_lag(cluster, args.period, args.seconds)
    finally:
        cluster.shutdown()
    print_table(
        "Event time, in process (4 containers, memory tiers)",
        ["measure", "value", "baseline", "baseline value", "ratio"],
        rows,
    )
    print_table(
        f"Time-window lag behind the slowest writer (workflow every {args.period}s)",
        ["samples", "p50 ms", "p99 ms", "max ms", "period ms"],
        [lag],
    )


def _stream(cluster: InProcessCluster, scope: str, name: str) -> None:
    mgr = cluster.stream_manager()
    if scope not in mgr.list_scopes():
        mgr.create_scope(scope)
    mgr.create_stream(scope, name, StreamConfiguration(ScalingPolicy.fixed(1)))


def note_time_cost(cluster: InProcessCluster, events: int) -> list[list[object]]:
    _stream(cluster, "bench", "notes")
    payload = b"x" * 100
    best = {False: float("inf"), True: float("inf")}
    for _ in range(3):  # alternating, best of three each: the first run warms up
        for note in (False, True):
            with cluster.create_writer("bench", "notes", BytesSerializer()) as writer:
                started = time.perf_counter()
                for i in range(events):
                    writer.write_event(payload)
                    if note and i % 100 == 0:
                        writer.note_time(i)
                writer.flush()
                best[note] = min(best[note], time.perf_counter() - started)
    plain, noted = events / best[False], events / best[True]
    return [
        [
            "write_event + note_time/100, events/s",
            round(noted),
            "write_event alone",
            round(plain),
            round(noted / plain, 2),
        ]
    ]


def controller_cost(cluster: InProcessCluster, calls: int = 2000) -> list[list[object]]:
    core = cluster.core
    position = {segment_id(0, 0): 0}
    started = time.perf_counter()
    for i in range(calls):
        core.note_writer_mark("bench", "notes", "w1", i, position)
    note = (time.perf_counter() - started) / calls
    started = time.perf_counter()
    for _ in range(calls):
        core.get_stream_info("bench", "notes")
    read = (time.perf_counter() - started) / calls
    core.remove_writer("bench", "notes", "w1")
    return [
        [
            "note_writer_mark, ms/call",
            round(note * 1000, 3),
            "get_stream_info",
            round(read * 1000, 3),
            round(note / read, 2),
        ]
    ]


def workflow_cost(cluster: InProcessCluster, streams: int, writers: int) -> list[list[object]]:
    core = cluster.core
    position = {segment_id(0, 0): 0}
    started = time.perf_counter()
    for s in range(streams):
        _stream(cluster, "many", f"s{s}")
        for w in range(writers):
            core.note_writer_mark("many", f"s{s}", f"w{w}", 1000 + w, position)
    setup = time.perf_counter() - started
    print(f"set up {streams:,} streams x {writers} writers' marks in {setup:.1f}s", flush=True)
    tasks = cluster.watermark_tasks()
    started = time.perf_counter()
    emitted = tasks.run_streams(lambda scope, stream: scope == "many")
    run = time.perf_counter() - started
    started = time.perf_counter()
    for s in range(streams):
        for key in cluster.metadata.list_keys(f"marks/many/s{s}"):
            cluster.metadata.get(key)
        cluster.metadata.get(f"streams/many/s{s}")
    floor = time.perf_counter() - started
    assert emitted == streams, emitted
    return [
        [
            f"watermark run, ms/stream ({writers} writers)",
            round(run * 1000 / streams, 3),
            "reading its marks and record",
            round(floor * 1000 / streams, 3),
            round(run / floor, 2),
        ]
    ]


def window_lag(cluster: InProcessCluster, period: float, seconds: float) -> list[object]:
    _stream(cluster, "bench", "lag")
    stop = threading.Event()
    noted: list[int] = [0, 0]

    def write(n: int) -> None:
        with cluster.create_writer("bench", "lag", JsonSerializer()) as writer:
            while not stop.is_set():
                now = int(time.time() * 1000)
                writer.note_time(now)
                noted[n] = now
                writer.write_event({"t": now, "w": n})
                time.sleep(0.02)

    def watermarks() -> None:
        tasks = cluster.watermark_tasks()
        while not stop.wait(period):
            tasks.run("bench", "lag")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(2)]
    threads.append(threading.Thread(target=watermarks))
    for t in threads:
        t.start()
    cluster.create_reader_group("bench", "lag", ReaderGroupConfig.for_streams("bench/lag"))
    lags: list[float] = []
    with cluster.create_reader("r", "bench", "lag", JsonSerializer()) as reader:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            reader.read_next_event(0.1)
            lower = reader.get_current_time_window("bench/lag").lower_ms
            if lower is not None:
                lags.append(min(noted) - lower)
    stop.set()
    for t in threads:
        t.join()
    return [
        len(lags),
        round(percentile(lags, 0.5)),
        round(percentile(lags, 0.99)),
        round(max(lags, default=0)),
        round(period * 1000),
    ]


if __name__ == "__main__":
    main()
