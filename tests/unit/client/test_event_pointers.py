"""Event pointers (issue 27 item 2, Pravega's ``EventPointer`` / ``fetchEvent``): every event
read has one; it survives base64; a reader of the group and the batch client read that one
event again; what no longer exists or never did is a typed error. On an in-process cluster
(memory backends)."""

from __future__ import annotations

import base64
import pickle
import struct
import threading

import pytest

import pravega_ray as pr
from pravega_ray.constants import EVENT_HEADER_BYTES
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=3)
    yield c
    c.shutdown()


def make(cluster: InProcessCluster, stream: str = "st", segments: int = 3) -> pr.StreamManager:
    mgr = cluster.stream_manager()
    if "sc" not in mgr.list_scopes():
        mgr.create_scope("sc")
    mgr.create_stream("sc", stream, pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))
    return mgr


def write(cluster: InProcessCluster, events: list[str], stream: str = "st") -> None:
    with cluster.create_writer("sc", stream, pr.Utf8Serializer()) as writer:
        for i, event in enumerate(events):
            writer.write_event(event, routing_key=f"k{i % 7}")


def read_all(
    cluster: InProcessCluster, count: int, group: str = "g"
) -> tuple[pr.EventStreamReader[str], list[pr.EventRead]]:
    cluster.create_reader_group("sc", group, pr.ReaderGroupConfig.for_streams("sc/st"))
    reader = cluster.create_reader("r", "sc", group, pr.Utf8Serializer())
    reads = []
    while len(reads) < count:
        ev = reader.read_next_event(5.0)
        assert ev is not None
        if ev.event is not None:
            reads.append(ev)
    return reader, reads


def test_every_event_read_is_fetched_again_by_its_pointer(cluster) -> None:  # type: ignore[no-untyped-def]
    make(cluster)
    events = [f"event-{i}-" + "x" * (i % 50) for i in range(200)]
    write(cluster, events)
    reader, reads = read_all(cluster, 200)
    position = reader.position()
    batch = cluster.batch_client()
    for ev in reads:
        pointer = ev.event_pointer
        assert pointer == pr.EventPointer(ev.segment, ev.offset, pointer.length)
        assert pointer.length == EVENT_HEADER_BYTES + len(ev.event.encode())
        assert pointer.scoped_stream == "sc/st"
        assert reader.fetch_event(pointer) == ev.event
        assert batch.fetch_event(pointer, pr.Utf8Serializer()) == ev.event
        assert batch.fetch_event(pointer) == ev.event.encode()  # raw bytes by default
        again = pr.EventPointer.from_base64(pointer.to_base64())
        assert again == pointer and hash(again) == hash(pointer)
    assert reader.position() == position  # fetching does not move the reader
    assert pickle.loads(pickle.dumps(reads[7])).event_pointer == reads[7].event_pointer
    reader.close()


def test_a_large_event_is_fetched_whole(cluster) -> None:  # type: ignore[no-untyped-def]
    make(cluster, segments=1)
    big = b"L" * (9 * 1024 * 1024)
    with cluster.create_writer("sc", "st", pr.BytesSerializer()) as writer:
        writer.write_event(b"small", routing_key="k")
        writer.write_event(big, routing_key="k")
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    reader = cluster.create_reader("r", "sc", "g", pr.BytesSerializer())
    reads = [reader.read_next_event(10.0) for _ in range(2)]
    assert reads[1] is not None and reads[1].event == big
    pointer = reads[1].event_pointer
    assert pointer is not None and pointer.length == EVENT_HEADER_BYTES + len(big)
    assert reader.fetch_event(pointer) == big
    reader.close()


def test_a_checkpoint_marker_has_no_pointer(cluster) -> None:  # type: ignore[no-untyped-def]
    make(cluster, segments=1)
    write(cluster, ["a"])
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    group = cluster.reader_group("sc", "g")
    reader = cluster.create_reader("r", "sc", "g", pr.Utf8Serializer())
    done = threading.Event()
    thread = threading.Thread(
        target=lambda: (group.initiate_checkpoint("cp", timeout_s=30), done.set()), daemon=True
    )
    thread.start()
    markers = []
    while not done.is_set():
        ev = reader.read_next_event(0.5)
        if ev is not None and ev.is_checkpoint:
            markers.append(ev)
    thread.join(10)
    assert markers and markers[0].event_pointer is None
    reader.close()


@pytest.mark.parametrize(
    "fields",
    [
        ("sc/st/0.#epoch.0", -1, 20),
        ("sc/st/0.#epoch.0", True, 20),
        ("sc/st/0.#epoch.0", 0, 7),
        ("sc/st/0.#epoch.0", 0, 2**40),
        ("sc/st/0.#epoch.0", 1.5, 20),
        ("sc/st/0.#epoch.0", 0, float("nan")),
        ("../../etc/passwd", 0, 20),
        ("sc/st/0.#epoch.0#transaction." + "0" * 32, 0, 20),
        (b"sc/st/0.#epoch.0", 0, 20),
    ],
)
def test_a_pointer_with_bad_fields_is_refused(fields: tuple[object, object, object]) -> None:
    with pytest.raises(pr.InvalidArgumentError):
        pr.EventPointer(*fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not base64 at all!",
        "é",
        base64.urlsafe_b64encode(b"\x01short").decode(),
        base64.urlsafe_b64encode(struct.pack(">BQI", 2, 0, 20) + b"sc/st/0.#epoch.0").decode(),
        base64.urlsafe_b64encode(struct.pack(">BQI", 1, 0, 20) + b"\xff\xfe").decode(),
        base64.urlsafe_b64encode(struct.pack(">BQI", 1, 0, 20) + b"../x").decode(),
        base64.urlsafe_b64encode(struct.pack(">BQI", 1, 0, 3) + b"sc/st/0.#epoch.0").decode(),
    ],
)
def test_text_that_is_not_a_pointer_is_refused(text: str) -> None:
    with pytest.raises(pr.InvalidArgumentError):
        pr.EventPointer.from_base64(text)


def test_a_pointer_that_points_at_no_event_is_no_such_event(cluster) -> None:  # type: ignore[no-untyped-def]
    make(cluster, segments=1)
    write(cluster, ["first event", "second event", "third"])
    reader, reads = read_all(cluster, 3)
    p = reads[1].event_pointer
    length = cluster.segments.get_info(p.segment).result(10).length
    bad = [
        pr.EventPointer(p.segment, p.offset + 1, p.length),  # mid-frame
        pr.EventPointer(p.segment, p.offset, p.length - 1),  # shorter than the frame
        pr.EventPointer(p.segment, p.offset, p.length + 1),  # longer: into the next one
        pr.EventPointer(p.segment, length, 20),  # at the end
        pr.EventPointer(p.segment, length - 4, 20),  # past the end
        pr.EventPointer("sc/st/7.#epoch.0", 0, 20),  # no such segment
    ]
    for pointer in bad:
        with pytest.raises(pr.NoSuchEventError):
            reader.fetch_event(pointer)
        with pytest.raises(pr.NoSuchEventError):
            cluster.batch_client().fetch_event(pointer)
    assert reader.fetch_event(p) == "second event"  # the reader goes on
    with pytest.raises(pr.InvalidArgumentError):
        reader.fetch_event(p.to_base64())  # type: ignore[arg-type]
    reader.close()
    with pytest.raises(pr.ClientClosedError):
        reader.fetch_event(p)


def test_a_pointer_into_a_stream_the_group_does_not_read_is_refused_by_its_reader(cluster) -> None:  # type: ignore[no-untyped-def]
    make(cluster, segments=1)
    make(cluster, stream="other", segments=1)
    write(cluster, ["mine"])
    write(cluster, ["not yours"], stream="other")
    cluster.create_reader_group("sc", "o", pr.ReaderGroupConfig.for_streams("sc/other"))
    other_reader = cluster.create_reader("o1", "sc", "o", pr.Utf8Serializer())
    other = other_reader.read_next_event(5.0)
    assert other is not None and other.event == "not yours"
    reader, _ = read_all(cluster, 1)
    with pytest.raises(pr.InvalidArgumentError, match="does not read"):
        reader.fetch_event(other.event_pointer)
    assert cluster.batch_client().fetch_event(other.event_pointer) == b"not yours"
    reader.close()
    other_reader.close()


def test_a_truncated_or_deleted_event_is_a_typed_error(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make(cluster, segments=1)
    write(cluster, [f"e{i}" for i in range(10)])
    reader, reads = read_all(cluster, 10)
    early, late = reads[2].event_pointer, reads[8].event_pointer
    segment = mgr.get_stream_info("sc", "st").segments[0]
    cut = pr.StreamCut("sc", "st", {segment.segment_id: late.offset})
    assert mgr.truncate_stream("sc", "st", cut, timeout_s=30)
    with pytest.raises(pr.SegmentTruncatedError):
        reader.fetch_event(early)
    assert reader.fetch_event(late) == "e8"
    # Scaled past, then truncated at the new tail: the segment is deleted.
    assert mgr.scale_stream("sc", "st", [segment.segment_id], [(0.0, 0.5), (0.5, 1.0)])
    assert mgr.truncate_stream("sc", "st", mgr.get_tail_cut("sc", "st"), timeout_s=30)
    with pytest.raises(pr.NoSuchEventError):
        reader.fetch_event(late)
    reader.close()
    assert mgr.seal_stream("sc", "st") and mgr.delete_stream("sc", "st")
    with pytest.raises(pr.NoSuchEventError):
        cluster.batch_client().fetch_event(late)
