"""A 4-reader group checkpoints while a writer writes, through the Ray actors (shared local
Ray): every reader returns the marker, the checkpoint completes, and resetting to it
re-reads exactly the events after it."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import pravega_ray as pr

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

READERS = 4


def test_four_readers_checkpoint_while_a_writer_writes(cluster, unique_name) -> None:
    scope = unique_name
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    mgr.create_stream(scope, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(4)))
    cluster.create_reader_group(scope, "rg", pr.ReaderGroupConfig.for_streams(f"{scope}/st"))
    group = cluster.reader_group(scope, "rg")
    readers = [
        cluster.create_reader(f"r{i}", scope, "rg", pr.JsonSerializer()) for i in range(READERS)
    ]
    stop = threading.Event()
    written: list[int] = []

    def write() -> None:
        with cluster.create_writer(scope, "st", pr.JsonSerializer()) as writer:
            n = 0
            while not stop.is_set() and n < 2000:
                writer.write_event({"n": n}, routing_key=f"k{n % 31}")
                written.append(n)
                n += 1
                time.sleep(0.002)
            writer.flush()

    got: list[list[int]] = [[] for _ in range(READERS)]  # before the marker
    markers = [False] * READERS
    lock = threading.Lock()

    def read(i: int) -> None:
        reader = readers[i]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (markers[i] and stop.is_set()):
            ev = reader.read_next_event(0.2)
            if ev is None:
                continue
            with lock:
                if ev.checkpoint_name == "cp":
                    markers[i] = True
                elif not markers[i]:
                    got[i].append(ev.event["n"])

    writer = threading.Thread(target=write, daemon=True)
    threads = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(READERS)]
    writer.start()
    for t in threads:
        t.start()
    time.sleep(1.0)
    started = time.monotonic()
    checkpoint: Any = group.initiate_checkpoint("cp", timeout_s=60)
    took = time.monotonic() - started
    stop.set()
    writer.join(60)
    for t in threads:
        t.join(130)
    assert all(markers)
    assert took < 60
    before = sorted(n for g in got for n in g)
    assert len(before) == len(set(before))
    # Reset to the checkpoint: a fresh reader re-reads exactly what came after it.
    for reader in readers:
        reader.close()
    group.reset_to(checkpoint)
    after: list[int] = []
    with cluster.create_reader("again", scope, "rg", pr.JsonSerializer()) as reader:
        while (ev := reader.read_next_event(2.0)) is not None:
            if ev.checkpoint_name is None:
                after.append(ev.event["n"])
    assert sorted(before + after) == sorted(written)


def test_a_live_reader_is_told_of_a_reset_once(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    """Issue 27 item 5 through Ray: ReinitializationRequiredError once, then the head again."""
    scope = unique_name
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    mgr.create_stream(scope, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    with cluster.create_writer(scope, "st", pr.JsonSerializer()) as writer:
        for n in range(8):
            writer.write_event({"n": n}, routing_key="k")
    cluster.create_reader_group(scope, "rg", pr.ReaderGroupConfig.for_streams(f"{scope}/st"))
    reader = cluster.create_reader("r", scope, "rg", pr.JsonSerializer())

    def read(count: int) -> list[int]:
        out: list[int] = []
        while len(out) < count:
            ev = reader.read_next_event(5.0)
            assert ev is not None
            if ev.event is not None:
                out.append(ev.event["n"])
        return out

    assert read(8) == list(range(8))
    cluster.reader_group(scope, "rg").reset_to(pr.ReaderGroupConfig.for_streams(f"{scope}/st"))
    with pytest.raises(pr.ReinitializationRequiredError):
        for _ in range(100):
            reader.read_next_event(0.1)
    assert read(8) == list(range(8))
    reader.close()
