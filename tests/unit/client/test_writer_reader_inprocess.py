"""Writers, readers and reader groups on the in-process cluster (no Ray)."""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict

import pytest

import pravega_ray as pr
from pravega_ray import constants
from pravega_ray.constants import MAX_EVENT_SIZE_BYTES
from pravega_ray.inprocess import InProcessCluster
from tests.checks import read_with_threads

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster():
    c = InProcessCluster(container_count=3, storage_flush_interval_s=0.05)
    yield c
    c.shutdown()


def make_stream(cluster: InProcessCluster, segments: int = 3) -> None:
    mgr = cluster.stream_manager()
    assert mgr.create_scope("sc")
    assert mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))


def read_all(cluster, readers, expected: int, timeout_s: float = 20.0):
    return read_with_threads(readers, expected, timeout_s)


def check_order(events) -> None:
    last: dict[str, int] = {}
    for ev in events:
        key, n = ev.event["k"], ev.event["n"]
        assert last.get(key, -1) < n, f"out of order for {key}"
        last[key] = n


def test_write_and_read_back_with_two_readers_exactly_once(cluster) -> None:
    make_stream(cluster)
    n = 5000
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as w:
        futures = [
            w.write_event({"k": f"k{i % 20}", "n": i}, routing_key=f"k{i % 20}") for i in range(n)
        ]
        w.flush()
    assert all(f.done() and f.exception() is None for f in futures)
    cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    r1 = cluster.create_reader("r1", "sc", "rg", pr.JsonSerializer())
    r2 = cluster.create_reader("r2", "sc", "rg", pr.JsonSerializer())
    events = read_all(cluster, [r1, r2], n)
    assert sorted(e.event["n"] for e in events) == list(range(n))
    check_order(events)
    assert r1.read_next_event(0.1) is None and r2.read_next_event(0.1) is None
    r1.close()
    r2.close()


def test_container_restart_mid_burst_loses_and_duplicates_nothing(cluster) -> None:
    make_stream(cluster)
    n = 20000
    stop = threading.Event()

    def chaos():
        while not stop.is_set():
            time.sleep(0.02)
            cluster.restart_container(1)

    t = threading.Thread(target=chaos)
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as w:
        t.start()
        for i in range(n):
            w.write_event({"k": f"k{i % 50}", "n": i}, routing_key=f"k{i % 50}")
            if i % 1000 == 0:
                time.sleep(0.01)
        w.flush()
    stop.set()
    t.join()
    cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    with cluster.create_reader("r1", "sc", "rg", pr.JsonSerializer()) as r:
        events = read_all(cluster, [r], n)
        assert r.read_next_event(0.2) is None
    numbers = [e.event["n"] for e in events]
    assert len(numbers) == len(set(numbers)) == n
    check_order(events)


def test_reader_group_rebalances_when_a_reader_joins_and_leaves(cluster) -> None:
    make_stream(cluster)
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as w:
        for i in range(300):
            w.write_event({"k": f"k{i % 30}", "n": i}, routing_key=f"k{i % 30}")
    cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    r1 = cluster.create_reader("r1", "sc", "rg", pr.JsonSerializer())
    first = [r1.read_next_event(1.0) for _ in range(10)]
    r2 = cluster.create_reader("r2", "sc", "rg", pr.JsonSerializer())
    rest = read_all(cluster, [r1, r2], 290)
    r1.close()
    # r2 takes over r1's segments at r1's position: still exactly once overall.
    rest += read_all(cluster, [r2], 290 - len(rest), timeout_s=3)
    numbers = sorted(e.event["n"] for e in first + rest)
    assert numbers == list(range(300))
    r2.close()


def test_writes_to_a_sealed_stream_fail_with_stream_sealed(cluster) -> None:
    make_stream(cluster, 2)
    w = cluster.create_writer("sc", "st", pr.Utf8Serializer())
    w.write_event("before", routing_key="a").result(10)
    cluster.stream_manager().seal_stream("sc", "st")
    fut = w.write_event("after", routing_key="a")
    with pytest.raises(pr.StreamSealedError):
        fut.result(20)
    with pytest.raises(pr.StreamSealedError):
        w.write_event("again", routing_key="a")
    with pytest.raises(pr.StreamSealedError):
        cluster.create_writer("sc", "st", pr.Utf8Serializer())
    info = cluster.stream_manager().get_stream_info("sc", "st")
    assert info.state is pr.StreamState.SEALED


def test_bad_input_gets_typed_errors(monkeypatch: pytest.MonkeyPatch, cluster) -> None:
    monkeypatch.setattr(constants, "LARGE_EVENT_BYTES_MAX", MAX_EVENT_SIZE_BYTES + (1 << 20))
    mgr = cluster.stream_manager()
    for bad in ["", "_sys", "..", "a/b", "a b", "x" * 300, "../etc"]:
        with pytest.raises(pr.InvalidNameError):
            mgr.create_scope(bad)
    assert mgr.list_scopes() == []
    with pytest.raises(pr.ScopeNotFoundError):
        mgr.create_stream("nope", "st")
    make_stream(cluster, 1)
    assert not mgr.create_stream("sc", "st")
    with pytest.raises(pr.StreamNotFoundError):
        mgr.get_stream_info("sc", "missing")
    with pytest.raises(pr.StreamNotFoundError):
        cluster.create_writer("sc", "missing")
    with cluster.create_writer("sc", "st") as w:
        with pytest.raises(pr.EventTooLargeError):  # a large event, but over its limit
            w.write_event(b"x" * (MAX_EVENT_SIZE_BYTES + 1 + (1 << 20)))
        with pytest.raises(pr.InvalidArgumentError):
            w.write_event("not bytes")  # type: ignore[arg-type]
    with pytest.raises(pr.ReaderGroupNotFoundError):
        cluster.create_reader("r", "sc", "nogroup")
    info = mgr.get_stream_info("sc", "st")
    assert info.state is pr.StreamState.ACTIVE


def test_largest_event_round_trips(cluster) -> None:
    make_stream(cluster, 1)
    big = bytes(range(256)) * (MAX_EVENT_SIZE_BYTES // 256)
    with cluster.create_writer("sc", "st") as w:
        w.write_event(b"small")
        w.write_event(big)
        w.write_event(b"after")
    cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    with cluster.create_reader("r", "sc", "rg") as r:
        got = [r.read_next_event(5).event for _ in range(3)]
    assert got == [b"small", big, b"after"]


def test_per_key_order_holds_with_many_writers(cluster) -> None:
    make_stream(cluster, 3)
    writers = [cluster.create_writer("sc", "st", pr.JsonSerializer()) for _ in range(3)]
    for i in range(3000):
        w = writers[i % 3]
        w.write_event({"k": f"w{i % 3}-k{i % 7}", "n": i}, routing_key=f"w{i % 3}-k{i % 7}")
    for w in writers:
        w.close()
    cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    with cluster.create_reader("r", "sc", "rg", pr.JsonSerializer()) as r:
        events = read_all(cluster, [r], 3000)
    per_key = defaultdict(list)
    for e in events:
        per_key[e.event["k"]].append(e.event["n"])
    assert all(v == sorted(v) for v in per_key.values())
    assert len(events) == 3000


def test_a_lost_completion_is_resolved_by_the_watchdog_without_duplicates(cluster) -> None:
    """The container applies the append, but its answer never reaches the writer."""
    from concurrent.futures import Future

    make_stream(cluster, 1)
    connection = cluster._segments
    real_append = connection.append
    swallowed = []

    def lossy_append(*args):
        real = real_append(*args)
        if not swallowed:
            swallowed.append(real)
            return Future()  # never completes
        return real

    connection.append = lossy_append
    try:
        config = pr.WriterConfig(append_call_timeout_s=0.3)
        with cluster.create_writer("sc", "st", pr.JsonSerializer(), config=config) as w:
            for i in range(200):
                w.write_event({"k": "a", "n": i}, routing_key="a")
            w.flush(timeout=20)
    finally:
        connection.append = real_append
    assert swallowed and swallowed[0].result(5) is not None  # the first call did succeed
    cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    with cluster.create_reader("r", "sc", "rg", pr.JsonSerializer()) as r:
        events = read_all(cluster, [r], 200, timeout_s=10)
        assert r.read_next_event(0.2) is None
    assert [e.event["n"] for e in events] == list(range(200))


def test_write_events_stores_a_batch_in_order_with_one_future(cluster) -> None:
    make_stream(cluster, 2)
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as w:
        w.write_event({"k": "a", "n": -1}, routing_key="a")
        future = w.write_events(({"k": "a", "n": i} for i in range(1000)), routing_key="a")
        future.result(10)
        with pytest.raises(pr.InvalidArgumentError):
            w.write_events([], routing_key="a")
        with pytest.raises(pr.EventTooLargeError):
            w.write_events(["x" * (MAX_EVENT_SIZE_BYTES + 1)], routing_key="a")
    cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    with cluster.create_reader("r", "sc", "rg", pr.JsonSerializer()) as r:
        events = read_all(cluster, [r], 1001)
    assert [e.event["n"] for e in events] == list(range(-1, 1000))


def test_a_done_callback_may_write_again_without_deadlock(cluster) -> None:
    make_stream(cluster, 1)
    chained = threading.Event()
    with cluster.create_writer("sc", "st", pr.Utf8Serializer()) as w:

        def again(_future) -> None:
            w.write_event("from-callback", routing_key="a")
            chained.set()

        w.write_event("first", routing_key="a").add_done_callback(again)
        assert chained.wait(10), "writing from a done callback deadlocked the writer"
        w.write_event("after", routing_key="a").result(10)


def test_write_event_blocks_when_too_much_is_queued(cluster) -> None:
    """Backpressure: with the container stalled, a writer holds a bounded number of blocks."""
    make_stream(cluster, 1)
    config = pr.WriterConfig(block_bytes_target=1000, blocks_in_flight_max=1, blocks_queued_max=3)
    stall = threading.Event()
    connection = cluster._segments
    real_append = connection.append

    def stalled_append(*args):
        stall.wait(10)
        return real_append(*args)

    connection.append = stalled_append
    written = []
    try:
        w = cluster.create_writer("sc", "st", config=config)

        def produce() -> None:
            for i in range(50):
                w.write_event(b"x" * 500, routing_key="a")
                written.append(i)

        t = threading.Thread(target=produce)
        t.start()
        time.sleep(0.5)
        assert len(written) < 20, f"{len(written)} events buffered while the store was stalled"
        stall.set()
        t.join(20)
        assert len(written) == 50
        w.close()
    finally:
        connection.append = real_append


def test_a_reader_polling_with_short_timeouts_keeps_one_tail_read_per_segment(
    cluster, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    reader = cluster.create_reader("r1", "sc", "rg")
    assert reader.read_next_event(0.5) is None  # owns the segment, a tail read outstanding
    reads: list[str] = []
    invoke = cluster.invoke

    def counting(method, segment, *args):  # type: ignore[no-untyped-def]
        if method.__name__ == "read" and segment.startswith("sc/st/"):
            reads.append(segment)
        return invoke(method, segment, *args)

    monkeypatch.setattr(cluster, "invoke", counting)
    began = time.monotonic()
    for _ in range(40):
        assert reader.read_next_event(0.01) is None
    # One read per long poll that ran out meanwhile (none, unless the machine is slow):
    # before, one per call.
    polls = 1 + int((time.monotonic() - began) / constants.READER_LONG_POLL_S)
    assert len(reads) <= polls, reads
    with cluster.create_writer("sc", "st") as writer:  # the outstanding read answers it
        writer.write_event(b"new")
        writer.flush()
    event = reader.read_next_event(5.0)
    assert event is not None and event.event == b"new"
    reader.close()


def test_a_release_refused_for_a_checkpoint_due_meanwhile_keeps_the_segment(cluster) -> None:
    # Found by the chaos run: the group asked a reader to give a segment up, a checkpoint
    # became due before the release landed (the group then keeps the segment with the
    # reader), the reader dropped it anyway, and it was handed out again later at the offset
    # the reader had last synced: everything it returned since was read twice.
    make_stream(cluster)
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as w:
        for i in range(300):
            w.write_event({"k": f"k{i % 30}", "n": i}, routing_key=f"k{i % 30}")
    cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    r1 = cluster.create_reader("r1", "sc", "rg", pr.JsonSerializer())
    first = [r1.read_next_event(1.0) for _ in range(150)]
    release = r1._release
    refused: list[bool] = []

    def checkpoint_first(segment: str, offset: int) -> bool:
        if not refused:  # a checkpoint is started between the sync and the release
            r1._state.update(lambda state: state.create_checkpoint("cp", True, 0))
        kept = release(segment, offset)
        refused.append(not kept)
        return kept

    r1._release = checkpoint_first  # type: ignore[method-assign]
    r2 = cluster.create_reader("r2", "sc", "rg", pr.JsonSerializer())
    r1._last_sync = -math.inf  # r1 syncs at its next read: the group asks it to give one up
    rest = read_all(cluster, [r1, r2], 150)
    assert refused and refused[0]  # the race happened: the first release was refused
    r1.close()
    r2.close()
    numbers = sorted(e.event["n"] for e in first + rest)
    assert numbers == list(range(300))
