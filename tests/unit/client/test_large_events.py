"""Large events (PDP-43A, docs/design.md) on the in-process cluster: transient segments merged
into the target, in order with small events, exactly once across container restarts and
scales. Payloads carry their own identity (a header of key and number) so a reader can
check order and whole-ness without holding two large events at once."""

from __future__ import annotations

import hashlib
import struct
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray import constants
from pravega_ray.client.event_framing import FrameAssembler
from pravega_ray.constants import MAX_EVENT_SIZE_BYTES, MIB
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import container_for_segment

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster() -> Iterator[InProcessCluster]:
    c = InProcessCluster(container_count=2, storage_flush_interval_s=0.05)
    yield c
    c.shutdown()


def make_stream(cluster: InProcessCluster, segments: int = 1) -> pr.StreamManager:
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    assert mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))
    return mgr


def payload(number: int, size: int) -> bytes:
    """``size`` bytes starting with ``number``; the rest a cheap deterministic pattern."""
    head = struct.pack(">Q", number)
    block = hashlib.sha256(head).digest() * 1024  # 32 KiB
    body = (block * (size // len(block) + 1))[: size - len(head)]
    return head + body


def number_of(data: bytes) -> int:
    return struct.unpack_from(">Q", data)[0]


def stored_events(cluster: InProcessCluster) -> list[tuple[str, int, int, bytes]]:
    """Every event of sc/st: (segment, offset, number, sha256) in segment order."""
    out = []
    for s in sorted(cluster.core.get_stream_info("sc", "st").segments, key=lambda r: r.key_low):
        out += events_of(cluster, s.name)
    return out


def events_of(cluster: InProcessCluster, name: str) -> list[tuple[str, int, int, bytes]]:
    info = cluster.segments.get_info(name).result(10)
    frames = FrameAssembler()
    offset = info.start_offset
    out = []
    while offset < info.length:
        data = cluster.segments.read(name, offset, 8 * MIB, 0.0).result(10).data
        for at, p in frames.feed(data, offset):
            out.append((name, at, number_of(p), hashlib.sha256(p).digest()))
        offset += len(data)
    assert frames.buffered_bytes == 0
    return out


def transient_segments(cluster: InProcessCluster) -> list[str]:
    names: list[str] = []
    for cid in range(2):
        names += [n for n in cluster.run(cluster.container(cid).list_segments()).result(10)]
    return [n for n in names if "#transient." in n]


@pytest.mark.parametrize("size", [9 * MIB, 64 * MIB])
def test_large_event_round_trips_through_a_reader(cluster: InProcessCluster, size: int) -> None:
    make_stream(cluster)
    event = payload(7, size)
    with cluster.create_writer("sc", "st") as w:
        w.write_event(b"before", routing_key="k").result(30)
        w.write_event(event, routing_key="k").result(60)
        w.write_event(b"after", routing_key="k")
    cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    with cluster.create_reader("r", "sc", "rg") as r:
        got = [r.read_next_event(10) for _ in range(3)]
    assert [e.event for e in got if e is not None] == [b"before", event, b"after"]
    assert transient_segments(cluster) == []
    info = cluster.segments.get_info(got[1].segment).result(10)
    assert info.event_count == 3


def test_order_with_small_events_on_the_same_key(cluster: InProcessCluster) -> None:
    make_stream(cluster)
    expected: list[int] = []
    with cluster.create_writer("sc", "st") as w:
        for n in range(40):
            size = 9 * MIB if n % 10 == 5 else 100
            w.write_event(payload(n, size), routing_key="k")
            expected.append(n)
    assert [e[2] for e in stored_events(cluster)] == expected


def test_over_the_limit_is_refused_and_nothing_is_written(
    cluster: InProcessCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_stream(cluster)
    monkeypatch.setattr(constants, "LARGE_EVENT_BYTES_MAX", 10 * MIB)
    with cluster.create_writer("sc", "st") as w:
        with pytest.raises(pr.EventTooLargeError):
            w.write_event(payload(1, 10 * MIB + 1), routing_key="k")
        w.write_event(payload(2, 10 * MIB), routing_key="k").result(30)
    assert [e[2] for e in stored_events(cluster)] == [2]
    assert transient_segments(cluster) == []


def test_write_events_batches_keep_their_limit(cluster: InProcessCluster) -> None:
    make_stream(cluster)
    with cluster.create_writer("sc", "st") as w, pytest.raises(pr.EventTooLargeError):
        w.write_events([payload(1, MAX_EVENT_SIZE_BYTES + 1)], routing_key="k")
    assert stored_events(cluster) == []


def test_scale_between_create_and_merge_redoes_on_the_successor(
    cluster: InProcessCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    mgr = make_stream(cluster)
    segment = mgr.get_stream_info("sc", "st").segments[0]
    original = SegmentStoreClient.create_transient_segment

    def scale_after_create(self: SegmentStoreClient, parent: str) -> Any:
        future = original(self, parent)
        future.result(10)
        if parent == segment.name:  # the target is sealed before the event is merged
            assert mgr.scale_stream("sc", "st", [segment.segment_id], [(0.0, 0.5), (0.5, 1.0)])
        return future

    monkeypatch.setattr(SegmentStoreClient, "create_transient_segment", scale_after_create)
    with cluster.create_writer("sc", "st") as w:
        w.write_event(payload(1, 100), routing_key="k").result(30)
        w.write_event(payload(2, 9 * MIB), routing_key="k").result(60)
        w.write_event(payload(3, 100), routing_key="k").result(30)
    assert [e[2] for e in events_of(cluster, segment.name)] == [1]
    assert [e[2] for e in stored_events(cluster)] == [2, 3]
    assert transient_segments(cluster) == []


@pytest.mark.parametrize("step", ["before-merge", "after-merge-before-ack"])
def test_container_restart_at_each_step_writes_exactly_once(
    cluster: InProcessCluster, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    mgr = make_stream(cluster)
    segment = mgr.get_stream_info("sc", "st").segments[0].name
    container_id = container_for_segment(segment, 2)
    original_merge = SegmentStoreClient.merge
    restarts: list[str] = []

    def merge(self: SegmentStoreClient, target: str, source: str, attributes: Any = ()) -> Any:
        if restarts:
            return original_merge(self, target, source, attributes)
        restarts.append(source)
        if step == "before-merge":  # the transient is sealed, the merge never arrives
            cluster.restart_container(container_id)
            return original_merge(self, target, source, attributes)
        original_merge(self, target, source, attributes).result(30)  # it lands
        cluster.restart_container(container_id)
        lost: Future[int] = Future()  # ... and its answer is lost: outcome unknown
        lost.set_exception(pr.SegmentStoreUnavailableError("container restarted"))
        return lost

    monkeypatch.setattr(SegmentStoreClient, "merge", merge)
    with cluster.create_writer("sc", "st") as w:
        w.write_event(payload(1, 100), routing_key="k").result(30)
        w.write_event(payload(2, 9 * MIB), routing_key="k").result(60)
        w.write_event(payload(3, 100), routing_key="k").result(30)
    assert restarts
    assert [e[2] for e in stored_events(cluster)] == [1, 2, 3]
    assert cluster.segments.get_info(segment).result(10).event_count == 3
    cluster.run(cluster.container(container_id).transients.sweep()).result(10)
    assert transient_segments(cluster) == []


def test_large_events_on_transaction_segments_are_refused(cluster: InProcessCluster) -> None:
    from pravega_ray.client.writer import EventStreamWriter
    from pravega_ray.naming import transaction_segment_name

    mgr = make_stream(cluster)
    segment = mgr.get_stream_info("sc", "st").segments[0]
    txn = transaction_segment_name(segment.name, b"t" * 16)
    cluster.segments.create_segment(txn).result(10)
    with cluster.create_writer("sc", "st") as w:
        assert isinstance(w, EventStreamWriter)
        stream = w._selector.select("k")  # the writer a transaction composes writes here
        stream.name = txn
        with pytest.raises(pr.EventTooLargeError, match="transactions"):
            w.write_event(payload(1, 9 * MIB), routing_key="k")
        stream.name = segment.name


def test_a_writer_killed_mid_event_leaves_nothing_visible(cluster: InProcessCluster) -> None:
    mgr = make_stream(cluster)
    segment = mgr.get_stream_info("sc", "st").segments[0].name
    with cluster.create_writer("sc", "st") as w:
        w.write_event(payload(1, 100), routing_key="k").result(30)
    # What a writer killed after its first slice leaves: a transient segment, unmerged.
    transient = cluster.segments.create_transient_segment(segment).result(10)
    cluster.segments.append_conditional(transient, b"\0" * 1000, (), 0, 0).result(10)
    assert [e[2] for e in stored_events(cluster)] == [1]
    cluster.restart_container(container_for_segment(segment, 2))
    deadline = time.monotonic() + 10
    while transient_segments(cluster) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert transient_segments(cluster) == []
    assert [e[2] for e in stored_events(cluster)] == [1]


def test_container_restart_between_slices_starts_the_event_over(
    cluster: InProcessCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    mgr = make_stream(cluster)
    segment = mgr.get_stream_info("sc", "st").segments[0].name
    original = SegmentStoreClient.append_conditional
    restarted: list[str] = []

    def append_conditional(self: SegmentStoreClient, name: str, *args: Any) -> Any:
        future = original(self, name, *args)
        if "#transient." in name and not restarted:
            future.result(30)  # the first slice landed; the container then restarts
            restarted.append(name)
            cluster.restart_container(container_for_segment(segment, 2))
        return future

    monkeypatch.setattr(SegmentStoreClient, "append_conditional", append_conditional)
    with cluster.create_writer("sc", "st") as w:
        w.write_event(payload(1, 20 * MIB), routing_key="k").result(60)
        w.write_event(payload(2, 100), routing_key="k").result(30)
    assert restarted
    assert [e[2] for e in stored_events(cluster)] == [1, 2]
    cluster.run(cluster.container(container_for_segment(segment, 2)).transients.sweep()).result(10)
    assert transient_segments(cluster) == []
