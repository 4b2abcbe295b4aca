"""Byte streams on the in-process cluster (no Ray): ByteStreamWriter and ByteStreamReader,
and the same bytes through the wire gateway's segment commands (the official client's path)."""

from __future__ import annotations

import io
import math
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.byte_stream import (
    BYTE_WRITE_PIECE_BYTES_MAX,
    ByteStreamReader,
    ByteStreamWriter,
)
from pravega_ray.contracts.attributes import NULL_VALUE
from pravega_ray.contracts.segment_store_service import SegmentStoreClient, SegmentStoreService
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import container_for_segment
from pravega_ray.timing import ManualThreadScheduler
from pravega_ray.wire.gateway import GatewayConfig
from pravega_ray.wire.gateway_segments import (
    Writers,
    conditional_block_end,
    read_segment,
    setup_append,
)
from pravega_ray.wire.replies import DataAppended, SegmentRead
from pravega_ray.wire.requests import ConditionalBlockEnd, ReadSegment, SetupAppend

pytestmark = pytest.mark.timeout(60)

SCOPE = "sc"


@pytest.fixture
def cluster() -> Iterator[InProcessCluster]:
    c = InProcessCluster(container_count=2)
    c.stream_manager().create_scope(SCOPE)
    yield c
    c.shutdown()


def make_byte_stream(cluster: InProcessCluster, name: str = "bytes") -> str:
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(1))
    assert cluster.stream_manager().create_stream(SCOPE, name, config)
    return name


def read_exactly(reader: ByteStreamReader, size: int, timeout_s: float = 10.0) -> bytes:
    got = bytearray()
    while len(got) < size:
        piece = reader.read(size - len(got), timeout_s)
        assert piece, f"end of stream after {len(got)} of {size} bytes"
        got += piece
    return bytes(got)


def test_write_round_trip_of_many_writes_of_random_sizes(cluster: InProcessCluster) -> None:
    stream = make_byte_stream(cluster)
    rng = random.Random(25)
    writes = [rng.randbytes(rng.choice([0, 1, 7, 100, 4096, 70_000])) for _ in range(300)]
    with cluster.create_byte_writer(SCOPE, stream) as writer:
        assert [writer.write(w) for w in writes] == [len(w) for w in writes]
        writer.flush()
        assert writer.fetch_tail_offset() == sum(map(len, writes))
    with cluster.create_byte_reader(SCOPE, stream) as reader:
        assert read_exactly(reader, sum(map(len, writes))) == b"".join(writes)
        assert reader.current_offset() == reader.tell() == sum(map(len, writes))
        assert reader.available() == 0
        with pytest.raises(TimeoutError):
            reader.read(1, timeout_s=0.05)


def test_write_takes_bytearray_and_memoryview_and_copies_them(cluster: InProcessCluster) -> None:
    stream = make_byte_stream(cluster)
    buffer = bytearray(b"abc")
    with cluster.create_byte_writer(SCOPE, stream) as writer:
        writer.write(buffer)
        buffer[:] = b"XYZ"  # the writer copied it
        writer.write(memoryview(b"--defgh")[2:])
        writer.write(memoryview(bytearray(range(4))).cast("B"))
    with cluster.create_byte_reader(SCOPE, stream) as reader:
        assert read_exactly(reader, 12) == b"abcdefgh" + bytes(range(4))


def test_write_of_no_bytes_does_nothing(cluster: InProcessCluster) -> None:
    stream = make_byte_stream(cluster)
    with cluster.create_byte_writer(SCOPE, stream) as writer:
        assert writer.write(b"") == 0
        writer.flush()
        assert writer.fetch_tail_offset() == 0
        info = cluster.segments.get_info(writer.segment).result(5)
        assert info.length == 0


def test_write_larger_than_one_append_is_split_and_read_back(cluster: InProcessCluster) -> None:
    stream = make_byte_stream(cluster)
    big = random.Random(1).randbytes(2 * BYTE_WRITE_PIECE_BYTES_MAX + 12_345)
    with cluster.create_byte_writer(SCOPE, stream) as writer:
        writer.write(b"head")
        writer.write(big)
        writer.write(b"tail")
    with cluster.create_byte_reader(SCOPE, stream) as reader:
        assert read_exactly(reader, len(big) + 8, 30.0) == b"head" + big + b"tail"


def test_seek_and_offsets_follow_pravega_s_byte_stream_test(cluster: InProcessCluster) -> None:
    # The official client's test #5 (WIRE.md section 1): 3 x 15 bytes, reads and seeks.
    stream = make_byte_stream(cluster)
    data = bytes(range(45))
    with cluster.create_byte_writer(SCOPE, stream) as writer:
        for i in range(3):
            writer.write(data[15 * i : 15 * (i + 1)])
        writer.flush()
        assert writer.fetch_tail_offset() == 45
    reader = cluster.create_byte_reader(SCOPE, stream)
    assert reader.fetch_tail_offset() == 45 and reader.fetch_head_offset() == 0
    assert read_exactly(reader, 10) == data[:10] and reader.tell() == 10
    assert reader.seek(10, io.SEEK_SET) == 10
    assert read_exactly(reader, 2) == data[10:12]
    assert reader.seek(5, io.SEEK_CUR) == 17
    assert read_exactly(reader, 8) == data[17:25]
    assert reader.seek(-10, io.SEEK_END) == 35
    assert read_exactly(reader, 8) == data[35:43]
    reader.seek_to_offset(3)  # backwards: the buffer is dropped
    assert reader.current_offset() == 3 and read_exactly(reader, 4) == data[3:7]
    reader.seek_to_offset(9)  # forwards, among the buffered bytes
    assert read_exactly(reader, 36) == data[9:45]
    assert reader.seek(0, io.SEEK_END) == 45
    with pytest.raises(TimeoutError):
        reader.read(1, timeout_s=0.05)
    reader.close()


def test_read_returns_at_most_max_bytes_and_available_counts_buffered_bytes(
    cluster: InProcessCluster,
) -> None:
    stream = make_byte_stream(cluster)
    with cluster.create_byte_writer(SCOPE, stream) as writer:
        writer.write(b"0123456789")
    with cluster.create_byte_reader(SCOPE, stream) as reader:
        assert reader.read(3, 5.0) == b"012"
        assert reader.available() == 7
        assert reader.read(100, 5.0) == b"3456789"
        assert reader.available() == 0


def test_truncate_then_read_below_head_raises_naming_segment_and_head(
    cluster: InProcessCluster,
) -> None:
    stream = make_byte_stream(cluster)
    with cluster.create_byte_writer(SCOPE, stream) as writer:
        writer.write(b"a" * 100 + b"b" * 100)
        writer.flush()
        writer.truncate_data_before(100)
        writer.truncate_data_before(50)  # below the head: nothing changes
        with pytest.raises(pr.InvalidArgumentError):
            writer.truncate_data_before(201)  # past the tail
    reader = cluster.create_byte_reader(SCOPE, stream)
    assert reader.current_offset() == 100  # a new reader starts at the head
    assert reader.fetch_head_offset() == 100
    assert read_exactly(reader, 100) == b"b" * 100
    reader.seek_to_offset(10)
    for _ in range(2):  # raised again until the reader seeks away
        with pytest.raises(pr.SegmentTruncatedError) as raised:
            reader.read(10, 5.0)
        error = raised.value
        assert error.segment == reader.segment and error.start_offset == 100
        assert error.offset == 10 and reader.segment in str(error) and "100" in str(error)
        assert reader.current_offset() == 10
    reader.seek_to_offset(reader.fetch_head_offset())
    assert read_exactly(reader, 100) == b"b" * 100
    reader.close()


def test_read_at_the_tail_waits_for_a_write(cluster: InProcessCluster) -> None:
    stream = make_byte_stream(cluster)
    reader = cluster.create_byte_reader(SCOPE, stream)
    with pytest.raises(TimeoutError):
        reader.read(10, timeout_s=0.2)
    assert reader.current_offset() == 0
    writer = cluster.create_byte_writer(SCOPE, stream)

    def write_later() -> None:
        time.sleep(0.3)
        writer.write(b"late")
        writer.flush()

    thread = threading.Thread(target=write_later)
    start = time.monotonic()
    thread.start()
    assert reader.read(10, timeout_s=10.0) == b"late"
    assert time.monotonic() - start >= 0.25
    thread.join()
    writer.close()
    reader.close()


def test_a_sealed_stream_reads_to_its_end_then_empty(cluster: InProcessCluster) -> None:
    stream = make_byte_stream(cluster)
    reader = cluster.create_byte_reader(SCOPE, stream)  # made before the seal
    writer = cluster.create_byte_writer(SCOPE, stream)
    writer.write(b"the last words")
    writer.close_and_seal()
    writer.close_and_seal()  # idempotent
    info = cluster.stream_manager().get_stream_info(SCOPE, stream)
    assert info.sealed
    assert read_exactly(reader, 14) == b"the last words"
    assert reader.read(10, timeout_s=5.0) == b""
    assert reader.read(10) == b""  # no timeout needed: it is the end
    assert reader.available() == -1
    reader.seek_to_offset(4)
    assert read_exactly(reader, 10) == b"last words" and reader.read(1, 5.0) == b""
    with pytest.raises(pr.StreamSealedError):
        cluster.create_byte_writer(SCOPE, stream)
    later = cluster.create_byte_reader(SCOPE, stream)  # a sealed byte stream is readable
    assert read_exactly(later, 14) == b"the last words" and later.read(5) == b""


def test_a_writer_whose_stream_is_sealed_meanwhile_fails_with_stream_sealed(
    cluster: InProcessCluster,
) -> None:
    stream = make_byte_stream(cluster)
    writer = cluster.create_byte_writer(SCOPE, stream)
    writer.write(b"kept")
    writer.flush()
    cluster.stream_manager().seal_stream(SCOPE, stream)
    writer.write(b"refused")
    with pytest.raises(pr.StreamSealedError):
        writer.flush()
    with pytest.raises(pr.StreamSealedError):
        writer.write(b"more")
    with pytest.raises(pr.StreamSealedError):
        writer.close()
    writer.close()  # closed now
    with cluster.create_byte_reader(SCOPE, stream) as reader:
        assert read_exactly(reader, 4) == b"kept" and reader.read(1, 5.0) == b""


def test_two_writers_the_stale_one_fails_and_nothing_interleaves(
    cluster: InProcessCluster,
) -> None:
    stream = make_byte_stream(cluster)
    first = cluster.create_byte_writer(SCOPE, stream)
    second = cluster.create_byte_writer(SCOPE, stream)  # both start at the tail, 0
    first.write(b"A" * 1000)
    first.flush()
    second.write(b"B" * 10)
    with pytest.raises(pr.ConditionalUpdateError) as raised:
        second.flush()
    error = raised.value
    assert error.expected_offset == 0 and error.actual_offset == 1000
    assert "another writer" in str(error)
    for call in (lambda: second.write(b"B"), second.flush, second.close):
        with pytest.raises(pr.ConditionalUpdateError):
            call()
    with pytest.raises(pr.ConditionalUpdateError):  # a failed writer seals nothing
        second.close_and_seal()
    assert not cluster.stream_manager().get_stream_info(SCOPE, stream).sealed
    first.write(b"C" * 10)  # the first writer goes on
    first.close()
    third = cluster.create_byte_writer(SCOPE, stream)  # a new writer appends at the tail
    third.write(b"D")
    third.close()
    with cluster.create_byte_reader(SCOPE, stream) as reader:
        assert read_exactly(reader, 1011) == b"A" * 1000 + b"C" * 10 + b"D"
        with pytest.raises(TimeoutError):
            reader.read(1, timeout_s=0.05)


def test_writes_of_concurrent_writers_are_never_interleaved(cluster: InProcessCluster) -> None:
    stream = make_byte_stream(cluster)
    writers = [cluster.create_byte_writer(SCOPE, stream) for _ in range(4)]
    stored: dict[int, int] = {}

    def run(index: int) -> None:
        writer = writers[index]
        try:
            for _ in range(50):
                writer.write(bytes([65 + index]) * 100)
                writer.flush()
                stored[index] = stored.get(index, 0) + 100
        except pr.ConditionalUpdateError:
            pass

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(stored.values())
    with cluster.create_byte_reader(SCOPE, stream) as reader:
        data = read_exactly(reader, total) if total else b""
        assert reader.fetch_tail_offset() == total  # nothing stored but what was flushed
    # One writer won the segment; what it flushed is there, in order, alone.
    assert len(stored) == 1
    ((winner, count),) = stored.items()
    assert data == bytes([65 + winner]) * count


def test_a_container_restart_mid_write_loses_and_duplicates_nothing(
    cluster: InProcessCluster,
) -> None:
    stream = make_byte_stream(cluster)
    writer = cluster.create_byte_writer(SCOPE, stream)
    owner = container_for_segment(writer.segment, cluster.container_count)
    rng = random.Random(7)
    writes = [rng.randbytes(rng.randint(1, 20_000)) for _ in range(400)]
    for i, data in enumerate(writes):
        writer.write(data)
        if i % 100 == 50:
            cluster.restart_container(owner)
    writer.flush()
    writer.close()
    with cluster.create_byte_reader(SCOPE, stream) as reader:
        assert read_exactly(reader, sum(map(len, writes))) == b"".join(writes)
        assert reader.fetch_tail_offset() == sum(map(len, writes))
        cluster.restart_container(owner)  # the reader rides it out too
        reader.seek_to_offset(0)
        assert read_exactly(reader, 1000) == b"".join(writes)[:1000]


class LostReplies:
    """A segment-store invoker over the cluster's that loses the replies of chosen
    ``append_conditional`` calls, one outcome per call in order: ``"landed"`` (the append
    is stored, then its reply lost), ``"lost"`` (it never reaches the container) or
    ``"late"`` (held back, it lands just before the next append call arrives). The caller
    sees an outcome-unknown error each time."""

    def __init__(self, cluster: InProcessCluster, outcomes: list[str]) -> None:
        self._cluster = cluster
        self._outcomes = outcomes
        self._held: tuple[Any, str, tuple[Any, ...]] | None = None
        self.lost = 0

    def invoke(self, method: Any, segment: str, *args: Any) -> Future[Any]:
        if method is not SegmentStoreService.append_conditional:
            return self._cluster.invoke(method, segment, *args)
        if self._held is not None:
            held, self._held = self._held, None
            self._cluster.invoke(held[0], held[1], *held[2]).result(10)
        if not self._outcomes:
            return self._cluster.invoke(method, segment, *args)
        outcome = self._outcomes.pop(0)
        if outcome == "landed":
            self._cluster.invoke(method, segment, *args).result(10)
        elif outcome == "late":
            self._held = (method, segment, args)
        self.lost += 1
        failed: Future[Any] = Future()
        failed.set_exception(pr.SegmentStoreUnavailableError("reply lost"))
        return failed


@pytest.mark.parametrize(
    "outcomes",
    [["landed"], ["lost"], ["lost", "lost", "landed"], ["landed", "lost"], ["late"]],
)
def test_an_append_whose_outcome_is_unknown_is_stored_exactly_once(
    cluster: InProcessCluster, outcomes: list[str]
) -> None:
    # "late": the check finds it absent, the resend is refused (the held-back try landed
    # meanwhile), and a second check finds it stored.
    stream = make_byte_stream(cluster)
    invoker = LostReplies(cluster, list(outcomes))
    scheduler = ManualThreadScheduler()  # no pump thread, and no real sleeps between tries
    writer = ByteStreamWriter(
        SCOPE, stream, cluster._controller, SegmentStoreClient(invoker), scheduler=scheduler
    )
    writer.write(b"first ")
    writer.flush()
    writer.write(b"second")
    writer.flush()
    writer.close()
    assert invoker.lost == len(outcomes) and scheduler.slept_s
    with cluster.create_byte_reader(SCOPE, stream) as reader:
        assert read_exactly(reader, 12) == b"first second"
        assert reader.fetch_tail_offset() == 12


def test_a_lost_reply_of_an_append_beaten_by_another_writer_fails_cleanly(
    cluster: InProcessCluster,
) -> None:
    stream = make_byte_stream(cluster)
    invoker = LostReplies(cluster, ["lost"])
    scheduler = ManualThreadScheduler()
    writer = ByteStreamWriter(
        SCOPE, stream, cluster._controller, SegmentStoreClient(invoker), scheduler=scheduler
    )
    with cluster.create_byte_writer(SCOPE, stream) as other:
        writer.write(b"mine")
        other.write(b"theirs")  # lands while the first try's outcome is unknown
        other.flush()
        with pytest.raises(pr.ConditionalUpdateError):
            writer.flush()
    with cluster.create_byte_reader(SCOPE, stream) as reader:
        assert read_exactly(reader, 6) == b"theirs" and reader.fetch_tail_offset() == 6


def test_flushed_bytes_survive_a_cluster_restart(cluster: InProcessCluster) -> None:
    stream = make_byte_stream(cluster)
    with cluster.create_byte_writer(SCOPE, stream) as writer:
        writer.write(b"durable bytes")
        writer.flush()
    cluster.restart()
    with cluster.create_byte_reader(SCOPE, stream) as reader:
        assert read_exactly(reader, 13) == b"durable bytes"
    with cluster.create_byte_writer(SCOPE, stream) as writer:  # appends after them
        writer.write(b"!")
    with cluster.create_byte_reader(SCOPE, stream) as reader:
        assert read_exactly(reader, 14) == b"durable bytes!"


def test_a_writer_without_a_pump_thread_sends_on_flush(cluster: InProcessCluster) -> None:
    stream = make_byte_stream(cluster)
    writer = ByteStreamWriter(
        SCOPE,
        stream,
        cluster._controller,
        cluster._segments,
        scheduler=ManualThreadScheduler(),
    )
    writer.write(b"x" * 10)
    assert writer.fetch_tail_offset() == 0  # nothing sent yet: the caller pumps
    writer.write(b"y" * 10)
    writer.flush()
    assert writer.fetch_tail_offset() == 20
    writer.write(b"z")
    writer.close()
    with cluster.create_byte_reader(SCOPE, stream) as reader:
        assert read_exactly(reader, 21) == b"x" * 10 + b"y" * 10 + b"z"


def test_bad_arguments_raise_invalid_argument(cluster: InProcessCluster) -> None:
    stream = make_byte_stream(cluster)
    writer = cluster.create_byte_writer(SCOPE, stream)
    for data in ("text", 5, None, [1, 2], 1.5):
        with pytest.raises(pr.InvalidArgumentError):
            writer.write(data)  # type: ignore[arg-type]
    for offset in (-1, math.nan, 1.0, True, "3", None):
        with pytest.raises(pr.InvalidArgumentError):
            writer.truncate_data_before(offset)  # type: ignore[arg-type]
    for timeout in (-1, math.nan, math.inf, "1"):
        with pytest.raises(pr.InvalidArgumentError):
            writer.flush(timeout)  # type: ignore[arg-type]
    writer.write(b"0123456789")
    writer.close()
    reader = cluster.create_byte_reader(SCOPE, stream)
    for size in (0, -1, 1.5, math.nan, True, None, "2"):
        with pytest.raises(pr.InvalidArgumentError):
            reader.read(size)  # type: ignore[arg-type]
    for timeout in (-0.5, math.nan, math.inf, "1"):
        with pytest.raises(pr.InvalidArgumentError):
            reader.read(1, timeout)  # type: ignore[arg-type]
    for offset in (-1, math.nan, 2.0, False, None):
        with pytest.raises(pr.InvalidArgumentError):
            reader.seek_to_offset(offset)  # type: ignore[arg-type]
    for offset, whence in ((math.nan, 0), (1.5, 0), (0, 6), (0, -1), (0, 1.0), (0, True)):
        with pytest.raises(pr.InvalidArgumentError):
            reader.seek(offset, whence)  # type: ignore[arg-type]
    with pytest.raises(pr.InvalidArgumentError):
        reader.seek(-1, io.SEEK_SET)
    with pytest.raises(pr.InvalidArgumentError):
        reader.seek(-11, io.SEEK_END)
    assert reader.current_offset() == 0  # nothing moved
    reader.seek_to_offset(11)  # past the tail: the read says so
    with pytest.raises(pr.InvalidArgumentError):
        reader.read(1, 5.0)
    reader.seek_to_offset(0)
    assert read_exactly(reader, 10) == b"0123456789"
    with pytest.raises(pr.InvalidNameError):
        cluster.create_byte_writer(SCOPE, "bad/name")
    with pytest.raises(pr.StreamNotFoundError):
        cluster.create_byte_reader(SCOPE, "missing")
    with pytest.raises(pr.InvalidArgumentError):
        ByteStreamWriter(SCOPE, stream, cluster._controller, cluster._segments, scheduler=object())  # type: ignore[arg-type]


def test_streams_that_are_not_byte_streams_are_refused(cluster: InProcessCluster) -> None:
    mgr = cluster.stream_manager()
    mgr.create_stream(SCOPE, "two", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    auto = pr.StreamConfiguration(pr.ScalingPolicy.by_event_rate(100, 2, 1))
    mgr.create_stream(SCOPE, "auto", auto)
    for name in ("two", "auto"):
        with pytest.raises(pr.InvalidArgumentError, match="fixed scaling policy of 1 segment"):
            cluster.create_byte_writer(SCOPE, name)
        with pytest.raises(pr.InvalidArgumentError, match="not a byte stream"):
            cluster.create_byte_reader(SCOPE, name)
    stream = make_byte_stream(cluster, "scaled")
    (segment,) = mgr.get_stream_info(SCOPE, stream).segments
    assert mgr.scale_stream(SCOPE, stream, [segment.segment_id], [(0.0, 1.0)])
    with pytest.raises(pr.IllegalStateError, match="never scaled"):
        cluster.create_byte_writer(SCOPE, stream)
    with pytest.raises(pr.IllegalStateError, match="never scaled"):
        cluster.create_byte_reader(SCOPE, stream)


def test_closed_writer_and_reader_raise_client_closed(cluster: InProcessCluster) -> None:
    stream = make_byte_stream(cluster)
    writer = cluster.create_byte_writer(SCOPE, stream)
    writer.close()
    writer.close()
    for call in (
        lambda: writer.write(b"x"),
        writer.flush,
        writer.fetch_tail_offset,
        lambda: writer.truncate_data_before(0),
    ):
        with pytest.raises(pr.ClientClosedError):
            call()
    reader = cluster.create_byte_reader(SCOPE, stream)
    reader.close()
    reader.close()
    for call in (
        lambda: reader.read(1),
        reader.available,
        lambda: reader.seek(0),
        lambda: reader.seek_to_offset(0),
        reader.fetch_head_offset,
        reader.fetch_tail_offset,
    ):
        with pytest.raises(pr.ClientClosedError):
            call()


def _wire_write(
    cluster: InProcessCluster, segment: str, data: bytes, expected_offset: int, writer_id: int
) -> object:
    """One CONDITIONAL_BLOCK_END through the wire gateway's handler, as the official client
    sends it (after SETUP_APPEND)."""
    container = cluster.container(container_for_segment(segment, cluster.container_count))
    writers = Writers(4)
    cluster.run(
        setup_append(
            container, writers, SetupAppend(request_id=1, writer_id=writer_id, segment=segment)
        )
    ).result(5)
    request = ConditionalBlockEnd(
        writer_id=writer_id,
        event_number=1,
        expected_offset=expected_offset,
        data=data,
        request_id=2,
    )
    return cluster.run(conditional_block_end(container, writers, request)).result(5)


def test_bytes_cross_between_the_python_api_and_the_wire_gateway(
    cluster: InProcessCluster,
) -> None:
    stream = make_byte_stream(cluster)
    with cluster.create_byte_writer(SCOPE, stream) as writer:
        segment = writer.segment
        writer.write(b"from python ")
    container = cluster.container(container_for_segment(segment, cluster.container_count))
    request = ReadSegment(segment=segment, offset=0, suggested_length=524_288, request_id=3)
    reply = cluster.run(read_segment(container, GatewayConfig(), request)).result(10)
    assert isinstance(reply, SegmentRead) and reply.data == b"from python "
    # The official client's byte writer appends conditionally on its own offset.
    appended = _wire_write(cluster, segment, b"and from the wire", 12, writer_id=77)
    assert isinstance(appended, DataAppended) and appended.current_segment_write_offset == 29
    stale = _wire_write(cluster, segment, b"stale", 12, writer_id=78)
    assert not isinstance(stale, DataAppended)  # CONDITIONAL_CHECK_FAILED
    with cluster.create_byte_reader(SCOPE, stream) as reader:
        assert read_exactly(reader, 29) == b"from python and from the wire"
        with pytest.raises(TimeoutError):
            reader.read(1, 0.05)
    values = cluster.segments.get_attributes(segment, [(77).to_bytes(16, "big")]).result(5)
    assert values.get((77).to_bytes(16, "big"), NULL_VALUE) == 1
