"""The queries users reach for (issue 27 item 6): the distance in bytes between two stream
cuts, a stream's completed transactions, a reader group's segment distribution. On an
in-process cluster (memory backends)."""

from __future__ import annotations

import time

import pytest

import pravega_ray as pr
from pravega_ray.constants import EVENT_HEADER_BYTES
from pravega_ray.contracts.records import TxnStatus
from pravega_ray.inprocess import InProcessCluster
from tests.unit.client.test_event_pointers import make

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=3)
    yield c
    c.shutdown()


def write(cluster: InProcessCluster, events: list[bytes], stream: str = "st") -> int:
    """Write ``events``; the bytes they take in their segments."""
    with cluster.create_writer("sc", stream, pr.BytesSerializer()) as writer:
        for i, event in enumerate(events):
            writer.write_event(event, routing_key=f"k{i % 9}")
    return sum(EVENT_HEADER_BYTES + len(e) for e in events)


def test_the_distance_between_two_cuts_is_the_bytes_between_them_across_scales(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make(cluster, segments=2)
    head = mgr.get_head_cut("sc", "st")
    first = write(cluster, [b"a" * (i % 40) for i in range(100)])
    middle = mgr.get_tail_cut("sc", "st")
    segment = mgr.get_stream_info("sc", "st").segments[0]
    mid = (segment.key_low + segment.key_high) / 2
    assert mgr.scale_stream(
        "sc", "st", [segment.segment_id], [(segment.key_low, mid), (mid, 1 / 2)]
    )
    second = write(cluster, [b"b" * (i % 70) for i in range(150)])
    tail = mgr.get_tail_cut("sc", "st")
    assert mgr.get_distance(head, middle) == first
    assert mgr.get_distance(middle, tail) == second
    assert mgr.get_distance(head, tail) == first + second
    assert mgr.get_distance(head, pr.StreamCut.UNBOUNDED) == first + second
    assert mgr.get_distance(tail, tail) == 0
    # The batch client reads exactly that many bytes of frames.
    ranges = cluster.batch_client().segment_ranges("sc", "st", middle, tail)
    read = sum(
        len(e) + EVENT_HEADER_BYTES for r in ranges for e in cluster.batch_client().read_segment(r)
    )
    assert read == second


def test_a_distance_of_bad_cuts_is_refused(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make(cluster, segments=2)
    make(cluster, stream="other")
    write(cluster, [b"x" * 10 for _ in range(20)])
    head, tail = mgr.get_head_cut("sc", "st"), mgr.get_tail_cut("sc", "st")
    for start, end in [
        (tail, head),  # end behind start
        (pr.StreamCut.UNBOUNDED, tail),  # an unbounded start
        (head, mgr.get_head_cut("sc", "other")),  # two streams
        (head, {"not": "a cut"}),
        ("head", tail),
    ]:
        with pytest.raises(pr.InvalidArgumentError):
            mgr.get_distance(start, end)  # type: ignore[arg-type]


def test_completed_transactions_are_listed_with_their_outcome(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make(cluster)
    tw = cluster.create_transactional_writer("sc", "st", pr.BytesSerializer())
    committed, aborted, still_open = tw.begin_txn(), tw.begin_txn(), tw.begin_txn()
    committed.write_event(b"c", routing_key="k")
    committed.commit()
    aborted.abort()  # ABORTING, then the abort processor ends it
    deadline = time.monotonic() + 20
    while aborted.check_status() is not TxnStatus.ABORTED and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mgr.list_completed_transactions("sc", "st") == {
        committed.txn_id: TxnStatus.COMMITTED,
        aborted.txn_id: TxnStatus.ABORTED,
    }
    make(cluster, stream="empty")
    assert mgr.list_completed_transactions("sc", "empty") == {}
    still_open.abort()
    tw.close()


def test_a_groups_segment_distribution_names_who_holds_what(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make(cluster, segments=4)
    write(cluster, [b"e%d" % i for i in range(40)])
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    group = cluster.reader_group("sc", "g")
    names = sorted(s.name for s in mgr.get_stream_info("sc", "st").segments)
    before = group.get_segment_distribution()
    assert before.reader_segments == {} and before.unassigned_segments == names
    readers = [cluster.create_reader(f"r{i}", "sc", "g", pr.BytesSerializer()) for i in range(2)]
    for _ in range(60):  # both readers take their share as they read
        for reader in readers:
            reader.read_next_event(0.05)
    dist = group.get_segment_distribution()
    assert sorted(dist.reader_segments) == ["r0", "r1"]
    held = sorted(s for segs in dist.reader_segments.values() for s in segs)
    assert sorted(held + dist.unassigned_segments) == names
    assert sum(dist.counts.values()) == len(held)
    assert dist.counts["r0"] >= 1 and dist.counts["r1"] >= 1
    readers[1].close()  # hands its segments back
    after = group.get_segment_distribution()
    assert list(after.reader_segments) == ["r0"]
    assert sorted(after.reader_segments["r0"] + after.unassigned_segments) == names
    readers[0].close()
