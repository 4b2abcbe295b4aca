"""Writers across epochs: a sealed segment's unacknowledged events move to its successors.

On an in-process cluster (real containers on memory backends, the real controller and
its request event processor). Streams are read back directly, segment by segment in
creation-epoch order, through the segment store and the event framing, so these tests
do not depend on the reader's own successor handling. Events are JSON objects
``{"k": routing key, "n": write sequence}``.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import defaultdict
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.event_framing import parse_events
from pravega_ray.client.writer import EventStreamWriter
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import (
    container_for_segment,
    segment_epoch,
    segment_number,
)
from pravega_ray.wire.routing import pravega_key_hash

pytestmark = pytest.mark.timeout(120)

KEYS = [f"k{i}" for i in range(40)]


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=3, storage_flush_interval_s=0.05)
    yield c
    c.shutdown()


def make_stream(cluster: InProcessCluster, segments: int = 2) -> pr.StreamManager:
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    assert mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))
    return mgr


def read_segments(cluster: InProcessCluster) -> list[tuple[str, list[dict[str, Any]]]]:
    """Every segment of every epoch of sc/st, in creation order, with its events."""
    controller = cluster.core
    info = controller.get_stream_info("sc", "st")
    segments = {}
    for epoch in range(info.epoch + 1):
        for s in controller.get_epoch_segments("sc", "st", epoch):
            segments[s.segment_id] = s.name
    out = []
    for sid in sorted(segments, key=lambda i: (segment_epoch(i), segment_number(i))):
        name = segments[sid]
        length = cluster.segments.get_info(name).result(10).length
        data = b""
        while len(data) < length:
            data += cluster.segments.read(name, len(data), 1 << 20, 0.0).result(10).data
        frames, consumed = parse_events(data)
        assert consumed == length
        out.append((name, [json.loads(payload) for _, payload in frames]))
    return out


def check_exactly_once_in_key_order(cluster: InProcessCluster, written: int) -> None:
    """Events 0..written-1 each stored once; per routing key, in write order."""
    per_key: dict[str, list[int]] = defaultdict(list)
    numbers: list[int] = []
    for _name, events in read_segments(cluster):
        for e in events:
            numbers.append(e["n"])
            per_key[e["k"]].append(e["n"])
    assert len(numbers) == written, f"stored {len(numbers)} events, wrote {written}"
    assert sorted(numbers) == list(range(written)), "lost or duplicated events"
    for key, seq in per_key.items():
        if key != "-":
            assert seq == sorted(seq), f"routing key {key} out of order"


def scale_once(mgr: pr.StreamManager, rng: random.Random, split: bool) -> None:
    """Split a random segment in two, or merge a random neighbouring pair."""
    segments = list(mgr.get_stream_info("sc", "st").segments)
    if split or len(segments) < 2:
        s = rng.choice(segments)
        middle = (s.key_low + s.key_high) / 2
        assert mgr.scale_stream(
            "sc", "st", [s.segment_id], [(s.key_low, middle), (middle, s.key_high)]
        )
    else:
        i = rng.randrange(len(segments) - 1)
        a, b = segments[i], segments[i + 1]
        assert mgr.scale_stream("sc", "st", [a.segment_id, b.segment_id], [(a.key_low, b.key_high)])


class BackgroundWriter:
    """Writes numbered events from its own thread until stopped; keyless when ``keys`` is
    None. Keeps every future."""

    def __init__(self, writer: EventStreamWriter[Any], keys: list[str] | None = KEYS) -> None:
        self.writer = writer
        self.keys = keys
        self.futures: list[Any] = []
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        i = 0
        try:
            while not self.stop.is_set() or i < 500:
                key = None if self.keys is None else self.keys[i % len(self.keys)]
                event = {"k": key or "-", "n": i}
                self.futures.append(self.writer.write_event(event, routing_key=key))
                i += 1
                if i % 50 == 0:
                    time.sleep(0.001)
        except BaseException as e:  # pragma: no cover - reported by finish()
            self.errors.append(e)

    def finish(self) -> int:
        self.stop.set()
        self.thread.join(60)
        assert not self.errors, self.errors
        self.writer.flush(timeout=60)
        for f in self.futures:
            assert f.result(0) is None
        return len(self.futures)


@pytest.mark.parametrize("scales", [1, 3, 10])
def test_write_across_splits_and_merges_keeps_key_order_exactly_once(cluster, scales) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 2)
    rng = random.Random(scales)
    writer = cluster.create_writer("sc", "st", pr.JsonSerializer())
    background = BackgroundWriter(writer)
    for i in range(scales):
        time.sleep(0.05)
        scale_once(mgr, rng, split=i % 3 != 2)
    time.sleep(0.05)
    written = background.finish()
    writer.close()
    assert mgr.get_stream_info("sc", "st").epoch == scales
    check_exactly_once_in_key_order(cluster, written)


def test_events_without_a_routing_key_go_to_successors_once(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 2)
    rng = random.Random(7)
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        background = BackgroundWriter(writer, keys=None)
        for i in range(4):
            time.sleep(0.03)
            scale_once(mgr, rng, split=i % 2 == 0)
        written = background.finish()
    check_exactly_once_in_key_order(cluster, written)


def test_flush_after_a_scale_completes_every_event(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 1)
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        first = [writer.write_event({"k": k, "n": i}, k) for i, k in enumerate(KEYS)]
        writer.flush()
        s = mgr.get_stream_info("sc", "st").segments[0]
        assert mgr.scale_stream("sc", "st", [s.segment_id], [(0.0, 0.5), (0.5, 1.0)])
        n = len(KEYS)
        second = [writer.write_event({"k": k, "n": n + i}, k) for i, k in enumerate(KEYS)]
        batch = writer.write_events([{"k": "k1", "n": 2 * n}, {"k": "k1", "n": 2 * n + 1}], "k1")
        writer.flush(timeout=30)
        assert all(f.done() and f.exception() is None for f in first + second + [batch])
    check_exactly_once_in_key_order(cluster, 2 * n + 2)
    # The sealed segment kept only what it acknowledged before the scale.
    segments = read_segments(cluster)
    assert len(segments[0][1]) == n


def test_merge_of_two_sealed_segments_into_one_successor(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 3)
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        n = 0
        for _ in range(3):
            for k in KEYS:
                writer.write_event({"k": k, "n": n}, k)
                n += 1
        a, b, _c = mgr.get_stream_info("sc", "st").segments
        assert mgr.scale_stream("sc", "st", [a.segment_id, b.segment_id], [(a.key_low, b.key_high)])
        for _ in range(3):
            for k in KEYS:
                writer.write_event({"k": k, "n": n}, k)
                n += 1
        writer.flush(timeout=30)
        merged = mgr.get_stream_info("sc", "st").segments[0]
        assert [s.name for s in writer._streams].count(merged.name) == 1  # one shared stream
    check_exactly_once_in_key_order(cluster, n)


def test_a_retired_successor_reached_again_is_not_overwritten(cluster) -> None:  # type: ignore[no-untyped-def]
    """A and B merge into C; the writer reaches C through A, C splits, the writer retires
    C; then it reaches C again through B. The new stream to C must chain on the events
    the writer already has there, not take them for its own (they would be lost)."""
    mgr = make_stream(cluster, 2)
    a, b = mgr.get_stream_info("sc", "st").segments
    # A new stream routes by Pravega's rule: a segment owns (low, high].
    key_a = next(k for k in KEYS if pravega_key_hash(k) <= 0.5)
    key_b = next(k for k in KEYS if pravega_key_hash(k) > 0.5)
    n = 0
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:

        def write(key: str, count: int) -> None:
            nonlocal n
            for _ in range(count):
                writer.write_event({"k": key, "n": n}, key)
                n += 1
            writer.flush(timeout=30)

        write(key_a, 5)
        write(key_b, 5)
        assert mgr.scale_stream("sc", "st", [a.segment_id, b.segment_id], [(0.0, 1.0)])
        write(key_a, 5)  # A's keys move to C
        c = mgr.get_stream_info("sc", "st").segments[0]
        assert mgr.scale_stream("sc", "st", [c.segment_id], [(0.0, 0.5), (0.5, 1.0)])
        write(key_a, 5)  # C retires
        write(key_b, 5)  # B is sealed: C again, then C's successors
    check_exactly_once_in_key_order(cluster, n)


class GatedController:
    """The writer's controller connection, holding ``get_successors`` until released."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.open = threading.Event()
        self.waiting = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get_successors(self, scope: str, stream: str, segment_id: int) -> Any:
        self.waiting.set()
        assert self.open.wait(60)
        return self._inner.get_successors(scope, stream, segment_id)


def gated_writer(cluster: InProcessCluster) -> tuple[EventStreamWriter[Any], GatedController]:
    gate = GatedController(cluster._controller)
    writer = EventStreamWriter("sc", "st", pr.JsonSerializer(), gate, cluster.segments)
    return writer, gate


def test_events_written_during_a_reroute_wait_behind_it(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 1)
    writer, gate = gated_writer(cluster)
    s = mgr.get_stream_info("sc", "st").segments[0]
    futures = [writer.write_event({"k": k, "n": i}, k) for i, k in enumerate(KEYS)]
    writer.flush()
    assert mgr.scale_stream("sc", "st", [s.segment_id], [(0.0, 0.3), (0.3, 1.0)])
    n = len(KEYS)
    for i in range(200):
        futures.append(writer.write_event({"k": KEYS[i % len(KEYS)], "n": n}, KEYS[i % len(KEYS)]))
        n += 1
    assert gate.waiting.wait(30)  # the re-route is waiting for the successors
    for i in range(200):  # these queue behind it on the sealed segment
        futures.append(writer.write_event({"k": KEYS[i % len(KEYS)], "n": n}, KEYS[i % len(KEYS)]))
        n += 1
    assert not futures[-1].done()
    gate.open.set()
    writer.close()
    assert all(f.exception(10) is None for f in futures)
    check_exactly_once_in_key_order(cluster, n)


def test_successor_sealed_before_the_reroute_finished(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 1)
    writer, gate = gated_writer(cluster)
    s = mgr.get_stream_info("sc", "st").segments[0]
    writer.write_event({"k": "k0", "n": 0}, "k0").result(10)
    assert mgr.scale_stream("sc", "st", [s.segment_id], [(0.0, 0.5), (0.5, 1.0)])
    futures = [writer.write_event({"k": k, "n": 1 + i}, k) for i, k in enumerate(KEYS)]
    assert gate.waiting.wait(30)
    # Both successors are sealed (split again) before the writer learns of them.
    for succ in mgr.get_stream_info("sc", "st").segments:
        middle = (succ.key_low + succ.key_high) / 2
        assert mgr.scale_stream(
            "sc", "st", [succ.segment_id], [(succ.key_low, middle), (middle, succ.key_high)]
        )
    gate.open.set()
    assert all(f.exception(30) is None for f in futures)
    writer.close()
    assert mgr.get_stream_info("sc", "st").epoch == 3
    check_exactly_once_in_key_order(cluster, 1 + len(KEYS))


def test_close_during_a_reroute_waits_for_it(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 1)
    writer, gate = gated_writer(cluster)
    s = mgr.get_stream_info("sc", "st").segments[0]
    assert mgr.scale_stream("sc", "st", [s.segment_id], [(0.0, 0.5), (0.5, 1.0)])
    futures = [writer.write_event({"k": k, "n": i}, k) for i, k in enumerate(KEYS)]
    assert gate.waiting.wait(30)
    closer = threading.Thread(target=writer.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # close flushes: it waits for the re-route
    gate.open.set()
    closer.join(30)
    assert not closer.is_alive()
    assert all(f.exception(0) is None for f in futures)
    with pytest.raises(pr.ClientClosedError):
        writer.write_event({"k": "k0", "n": -1}, "k0")
    check_exactly_once_in_key_order(cluster, len(KEYS))


def test_writer_created_during_a_scale_works(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 2)
    s0, s1 = mgr.get_stream_info("sc", "st").segments
    stopped = threading.Event()

    def stop_after_sealing(step: str) -> None:
        if step == "old segments sealed" and not stopped.is_set():
            stopped.set()
            raise SystemExit("processor stopped mid-scale")

    cluster.restart_processor(step=stop_after_sealing)
    epoch = cluster.core.scale_stream("sc", "st", [s1.segment_id], [(0.5, 0.75), (0.75, 1.0)])
    assert stopped.wait(30)
    # The stream's current epoch is still the old one, whose segment s1 is sealed.
    assert mgr.get_stream_info("sc", "st").epoch == 0
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        futures = [writer.write_event({"k": k, "n": i}, k) for i, k in enumerate(KEYS)]
        writer.flush(timeout=30)
        assert all(f.exception(0) is None for f in futures)
    cluster.restart_processor()
    deadline = time.monotonic() + 20
    while not cluster.core.check_scale("sc", "st", epoch):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    check_exactly_once_in_key_order(cluster, len(KEYS))
    assert s0.name  # s0 took its keys directly


@pytest.mark.parametrize("step", ["segments created", "old segments sealed"])
def test_container_restarted_during_a_scale(cluster, step: str) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 2)
    s1 = mgr.get_stream_info("sc", "st").segments[1]
    owner = container_for_segment(s1.name, cluster.container_count)
    restarted = threading.Event()

    def restart_owner(name: str) -> None:
        if name == step and not restarted.is_set():
            restarted.set()
            cluster.restart_container(owner)

    cluster.restart_processor(step=restart_owner)
    writer = cluster.create_writer("sc", "st", pr.JsonSerializer())
    background = BackgroundWriter(writer)
    time.sleep(0.05)
    assert mgr.scale_stream("sc", "st", [s1.segment_id], [(0.5, 0.75), (0.75, 1.0)])
    assert restarted.is_set()
    time.sleep(0.05)
    written = background.finish()
    writer.close()
    check_exactly_once_in_key_order(cluster, written)


def test_sealed_stream_still_fails_with_stream_sealed(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 1)
    writer = cluster.create_writer("sc", "st", pr.JsonSerializer())
    writer.write_event({"k": "k0", "n": 0}, "k0").result(10)
    s = mgr.get_stream_info("sc", "st").segments[0]
    # Scaled, then sealed: the writer's successors are sealed too, and have none.
    assert mgr.scale_stream("sc", "st", [s.segment_id], [(0.0, 0.5), (0.5, 1.0)])
    assert mgr.seal_stream("sc", "st")
    future = writer.write_event({"k": "k0", "n": 1}, "k0")
    assert isinstance(future.exception(30), pr.StreamSealedError)
    with pytest.raises(pr.StreamSealedError):
        writer.write_event({"k": "k0", "n": 2}, "k0")
    writer.close()  # nothing left pending
    check_exactly_once_in_key_order(cluster, 1)


def test_containers_restarting_while_the_stream_scales_lose_and_duplicate_nothing(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 2)
    rng = random.Random(11)
    stop = threading.Event()

    def chaos() -> None:
        chaos_rng = random.Random(5)
        while not stop.is_set():
            time.sleep(0.03)
            cluster.restart_container(chaos_rng.randrange(cluster.container_count))

    writer = cluster.create_writer("sc", "st", pr.JsonSerializer())
    background = BackgroundWriter(writer)
    restarts = threading.Thread(target=chaos)
    restarts.start()
    try:
        for i in range(5):
            time.sleep(0.03)
            scale_once(mgr, rng, split=i % 2 == 0)
    finally:
        stop.set()
        restarts.join(30)
    written = background.finish()
    writer.close()
    assert mgr.get_stream_info("sc", "st").epoch == 5
    check_exactly_once_in_key_order(cluster, written)


def test_an_idle_writer_follows_a_chain_of_scales_on_its_next_write(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 1)
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        writer.write_event({"k": "k7", "n": 0}, "k7").result(10)
        point = pravega_key_hash("k7")  # a new stream: Pravega's rule, (low, high]
        for _ in range(6):  # split the segment holding k7, again and again
            s = next(
                s
                for s in mgr.get_stream_info("sc", "st").segments
                if s.key_low < point <= s.key_high
            )
            middle = (s.key_low + s.key_high) / 2
            assert mgr.scale_stream(
                "sc", "st", [s.segment_id], [(s.key_low, middle), (middle, s.key_high)]
            )
        futures = [writer.write_event({"k": "k7", "n": n}, "k7") for n in range(1, 30)]
        assert all(f.exception(30) is None for f in futures)
    check_exactly_once_in_key_order(cluster, 30)


def test_a_writer_idle_on_a_segment_a_truncation_deleted_writes_to_its_successors(
    cluster,
) -> None:  # type: ignore[no-untyped-def]
    """A writer knows a segment; a scale seals it and a truncation (retention, say) deletes
    it while the writer has nothing to write there. Its next events for those keys used to
    fail with SegmentNotFoundError; as Pravega's writer does with NoSuchSegment, they go
    to the successors, once each, in key order."""
    mgr = make_stream(cluster, 2)
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        n = 0
        for k in KEYS:
            writer.write_event({"k": k, "n": n}, k)
            n += 1
        writer.flush(timeout=30)
        a, _b = mgr.get_stream_info("sc", "st").segments
        mid = (a.key_low + a.key_high) / 2
        assert mgr.scale_stream("sc", "st", [a.segment_id], [(a.key_low, mid), (mid, a.key_high)])
        assert mgr.truncate_stream("sc", "st", mgr.get_tail_cut("sc", "st"), timeout_s=30)
        with pytest.raises(pr.SegmentNotFoundError):
            cluster.segments.get_info(a.name).result(10)
        first_after = n
        for _ in range(3):
            for k in KEYS:
                writer.write_event({"k": k, "n": n}, k)
                n += 1
        writer.flush(timeout=30)
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    reader = cluster.create_reader("r", "sc", "g", pr.JsonSerializer())
    got: list[dict[str, Any]] = []
    while len(got) < n - first_after:
        event = reader.read_next_event(5.0)
        assert event is not None and event.event is not None, f"read {len(got)}"
        got.append(event.event)
    extra = reader.read_next_event(0.5)
    assert extra is None or extra.event is None  # nothing more
    reader.close()
    assert sorted(e["n"] for e in got) == list(range(first_after, n))
    for k in KEYS:
        ns = [e["n"] for e in got if e["k"] == k]
        assert ns == sorted(ns)
