"""Pravega's front door (issue 25, "Measured"): what the official client's path costs next to
pravega-ray's own, on the same cluster on Ray, in the same run.

One cluster (``pr.start_local`` with ``endpoints``: gRPC API and a wire gateway per container,
free ports, 4 containers, file tiers in a temporary directory). For 100 B events on one-segment
streams, each row against its baseline, pravega-ray's own client through Ray:

- ``write``: ``--events`` events written as fast as the writer takes them, then flushed
  (pravega-ray's ``write_event``; the official writer with ``max_inflight_events=1000``);
- ``ack latency``: ``--acks`` events, each waited for before the next (pravega-ray:
  ``write_event(...).result()``; the official writer with no events in flight, where
  ``write_event`` returns once the event is persisted): p50 and p99 of one event's wait;
- ``read``: a new reader group's one reader reads the ``write`` row's stream from its head
  (pravega-ray's ``read_next_event``; the official reader's segment slices).

The official client (``pravega`` 0.3.8) runs in its own venv (``.venv-pravega-client``,
installed on first use as ``tests/wire/official_client.py`` does) in a subprocess, timing
itself; ``vs pravega-ray`` is its rate over pravega-ray's (latency: pravega-ray's over its).
Progress goes to stderr, the table to stdout. The machine is shared: read the ratios first.

Run: ``make bench-front-door`` or ``.venv/bin/python -m benchmarks.front_door --help``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import textwrap
import time
import uuid
from typing import Any

import pravega_ray as pr
from benchmarks.common import log, new_stream, percentile, print_table, start_local, work_dir

SCOPE = "bench"
PAYLOAD = b"x" * 100
READ_TIMEOUT_S = 1.0
STALL_S = 60.0


def our_write(cluster: Any, stream: str, events: int) -> float:
    """pravega-ray's writer: ``events`` events then flush; events/s."""
    with cluster.create_writer(SCOPE, stream, pr.BytesSerializer()) as writer:
        started = time.perf_counter()
        for n in range(events):
            writer.write_event(PAYLOAD, routing_key=f"k{n % 16}")
        writer.flush()
        return events / (time.perf_counter() - started)


def our_acks(cluster: Any, stream: str, events: int) -> list[float]:
    """pravega-ray's writer, one event at a time: each wait in seconds."""
    waits = []
    with cluster.create_writer(SCOPE, stream, pr.BytesSerializer()) as writer:
        for n in range(events):
            started = time.perf_counter()
            writer.write_event(PAYLOAD, routing_key=f"k{n % 16}").result()
            waits.append(time.perf_counter() - started)
    return waits


def our_read(cluster: Any, stream: str, events: int) -> float:
    """A new group's one pravega-ray reader reads ``events`` events; events/s."""
    group = "rg" + uuid.uuid4().hex[:8]
    cluster.create_reader_group(SCOPE, group, pr.ReaderGroupConfig.for_streams(f"{SCOPE}/{stream}"))
    reader = cluster.create_reader("r", SCOPE, group, pr.BytesSerializer())
    try:
        got, started, idle_since = 0, time.perf_counter(), time.perf_counter()
        while got < events:
            event = reader.read_next_event(READ_TIMEOUT_S)
            if event is None or event.event is None:
                if time.perf_counter() - idle_since > STALL_S:
                    raise TimeoutError(f"the reader stalled at {got} of {events}")
                continue
            idle_since = time.perf_counter()
            got += 1
        return events / (time.perf_counter() - started)
    finally:
        reader.close()


CLIENT_SCRIPT = """
import asyncio, json, os, sys, time
import pravega_client
manager = pravega_client.StreamManager({controller!r})
payload = "x" * 100
writer = manager.create_writer({scope!r}, {write_stream!r}, max_inflight_events=1000)
started = time.perf_counter()
for n in range({events}):
    writer.write_event(payload, f"k{{n % 16}}")
writer.flush()
write_rate = {events} / (time.perf_counter() - started)
writer = manager.create_writer({scope!r}, {ack_stream!r})
waits = []
for n in range({acks}):
    started = time.perf_counter()
    writer.write_event(payload, f"k{{n % 16}}")
    waits.append(time.perf_counter() - started)
group = manager.create_reader_group("rg", {scope!r}, {write_stream!r})
reader = group.create_reader("r")
async def read():
    got = 0
    started = time.perf_counter()
    while got < {events}:
        piece = await reader.get_segment_slice_async()
        got += sum(1 for _ in piece)
        reader.release_segment(piece)
    return {events} / (time.perf_counter() - started)
read_rate = asyncio.run(asyncio.wait_for(read(), 600))
print(json.dumps({{"write": write_rate, "waits": waits, "read": read_rate}}))
sys.stdout.flush()
os._exit(0)
"""


def official(controller: str, write_stream: str, ack_stream: str, events: int, acks: int) -> dict:  # type: ignore[type-arg]
    """The official client's three measurements, from its own venv."""
    from tests.wire.official_client import install_client

    script = CLIENT_SCRIPT.format(
        controller=controller,
        scope=SCOPE,
        write_stream=write_stream,
        ack_stream=ack_stream,
        events=events,
        acks=acks,
    )
    done = subprocess.run(
        [str(install_client()), "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the official client failed:\n{done.stdout}\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000, help="events of the write rows")
    parser.add_argument("--acks", type=int, default=2_000, help="events of the latency rows")
    parser.add_argument("--quick", action="store_true", help="a smoke run (small counts)")
    args = parser.parse_args()
    events, acks = (5_000, 200) if args.quick else (args.events, args.acks)
    from pravega_ray.endpoints import EndpointConfig

    with work_dir("pravega-bench-front-door-") as root:
        log("starting a cluster with endpoints")
        cluster = start_local(
            root, 4, endpoints=EndpointConfig(grpc_port=0, wire_port_base=0), namespace="bench"
        )
        try:
            described = cluster.endpoints()
            assert described is not None
            cluster.stream_manager().create_scope(SCOPE)
            ours_stream, theirs_stream = (
                new_stream(cluster, SCOPE, 1),
                new_stream(cluster, SCOPE, 1),
            )
            ours_acks, theirs_acks = new_stream(cluster, SCOPE, 1), new_stream(cluster, SCOPE, 1)
            log(f"pravega-ray: writing {events} events")
            write_rate = our_write(cluster, ours_stream, events)
            log(f"pravega-ray: {acks} events one at a time")
            waits = our_acks(cluster, ours_acks, acks)
            log("pravega-ray: reading")
            read_rate = our_read(cluster, ours_stream, events)
            log("the official client: the same three")
            theirs = official(described["controller"], theirs_stream, theirs_acks, events, acks)
        finally:
            cluster.shutdown()
    ms = 1000.0
    rows = [
        ["write, events/s", write_rate, theirs["write"], theirs["write"] / write_rate],
        ["read, events/s", read_rate, theirs["read"], theirs["read"] / read_rate],
        [
            "ack latency p50, ms",
            percentile(waits, 0.5) * ms,
            percentile(theirs["waits"], 0.5) * ms,
            percentile(waits, 0.5) / percentile(theirs["waits"], 0.5),
        ],
        [
            "ack latency p99, ms",
            percentile(waits, 0.99) * ms,
            percentile(theirs["waits"], 0.99) * ms,
            percentile(waits, 0.99) / percentile(theirs["waits"], 0.99),
        ],
    ]
    print_table(
        f"Pravega's front door: 100 B events, one segment, {events:,} events "
        f"({acks:,} for latency), 4 containers on Ray",
        ["measure", "pravega-ray client", "official client", "vs pravega-ray"],
        rows,
    )


if __name__ == "__main__":
    main()
