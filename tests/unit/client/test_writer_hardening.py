"""The writer refuses bad input with typed errors and never wedges on a block the store refuses."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import Future
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.writer import EventStreamWriter
from pravega_ray.constants import APPEND_BLOCK_BYTES_MAX, MIB
from pravega_ray.errors import EventTooLargeError, InvalidArgumentError
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(60)

NAN = float("nan")


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=2)
    c.stream_manager().create_scope("sc")
    c.stream_manager().create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    yield c
    c.shutdown()


def read_all(cluster: InProcessCluster, expected: int) -> list[bytes]:
    group = "rg" + uuid.uuid4().hex[:8]
    cluster.create_reader_group("sc", group, pr.ReaderGroupConfig.for_streams("sc/st"))
    events: list[bytes] = []
    with cluster.create_reader("r", "sc", group) as reader:
        while True:
            event = reader.read_next_event(timeout_s=1.0 if len(events) < expected else 0.3)
            if event is None:
                return events
            events.append(event.event)


@pytest.mark.parametrize(
    "field, value",
    [
        ("block_bytes_target", 0),
        ("block_bytes_target", APPEND_BLOCK_BYTES_MAX + 1),
        ("block_bytes_target", 1.5),
        ("blocks_in_flight_max", NAN),
        ("blocks_in_flight_max", True),
        ("blocks_queued_max", 0),
        ("reconnect_attempts_max", 1.5),
        ("reconnect_backoff_s", -1),
        ("reconnect_backoff_s", NAN),
        ("linger_s", float("inf")),
        ("linger_s", -0.1),
        ("linger_s", "1"),
        ("append_call_timeout_s", 0),
        ("append_call_timeout_s", NAN),
    ],
)
def test_bad_writer_config_is_refused(field: str, value: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=field):
        pr.WriterConfig(**{field: value})


def test_create_writer_with_a_bad_config_or_serializer_starts_nothing(cluster) -> None:
    threads = threading.active_count()
    with pytest.raises(InvalidArgumentError, match="WriterConfig"):
        cluster.create_writer("sc", "st", config={"linger_s": 1})
    with pytest.raises(InvalidArgumentError, match="serializer"):
        cluster.create_writer("sc", "st", serializer="x")
    assert threading.active_count() == threads


@pytest.mark.parametrize("key", [["x"], b"k", 5, "\ud800"])
def test_bad_routing_key_is_an_invalid_argument(cluster, key: Any) -> None:
    with cluster.create_writer("sc", "st") as writer:
        with pytest.raises(InvalidArgumentError, match="routing_key"):
            writer.write_event(b"x", routing_key=key)
        with pytest.raises(InvalidArgumentError, match="routing_key"):
            writer.write_events([b"x"], routing_key=key)
        writer.write_event(b"fine", routing_key="k").result(10)


@pytest.mark.parametrize("events", ["abc", b"abc", 5, None])
def test_write_events_needs_an_iterable_of_events(cluster, events: Any) -> None:
    with (
        cluster.create_writer("sc", "st", serializer=pr.Utf8Serializer()) as writer,
        pytest.raises(InvalidArgumentError, match="iterable"),
    ):
        writer.write_events(events, routing_key="k")


def test_write_events_over_one_block_is_refused_and_the_writer_goes_on(cluster) -> None:
    with cluster.create_writer("sc", "st") as writer:
        with pytest.raises(EventTooLargeError, match="write_events"):
            writer.write_events([b"a" * 5 * MIB, b"b" * 5 * MIB], routing_key="k")
        with pytest.raises(EventTooLargeError):  # many small ones add up too
            writer.write_events([b"x"] * (APPEND_BLOCK_BYTES_MAX // 9 + 1), routing_key="k")
        writer.write_events([b"c" * 4 * MIB, b"d" * 4 * MIB], routing_key="k").result(30)
        writer.write_event(b"after", routing_key="k").result(30)
        writer.flush(30)
    events = read_all(cluster, 3)
    assert events == [b"c" * 4 * MIB, b"d" * 4 * MIB, b"after"]


def test_big_blocks_never_exceed_what_the_store_accepts(cluster) -> None:
    config = pr.WriterConfig(block_bytes_target=APPEND_BLOCK_BYTES_MAX)
    payloads = [bytes([i]) * 4 * MIB for i in range(6)]
    with cluster.create_writer("sc", "st", config=config) as writer:
        futures = [writer.write_event(p, routing_key="k") for p in payloads]
        for future in futures:
            future.result(30)
    assert read_all(cluster, 6) == payloads


class RefusingConnection:
    """The in-process segment-store connection, refusing chosen appends as invalid."""

    def __init__(self, inner: Any, refuse: set[int]) -> None:
        self._inner = inner
        self._refuse = refuse
        self.appends = 0

    def append(self, segment: str, writer_id: bytes, *args: Any) -> Future[Any]:
        self.appends += 1
        if self.appends in self._refuse:
            failed: Future[Any] = Future()
            failed.set_exception(InvalidArgumentError("refused by the test"))
            return failed
        return self._inner.append(segment, writer_id, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_block_the_store_refuses_fails_alone_and_is_never_resent(cluster) -> None:
    connection = RefusingConnection(cluster._segments, refuse={3})
    config = pr.WriterConfig(block_bytes_target=100, linger_s=0.0)
    writer = EventStreamWriter(
        "sc", "st", pr.BytesSerializer(), cluster._controller, connection, config
    )
    futures = [writer.write_event(f"e{i:03d}".encode() * 20, routing_key="k") for i in range(10)]
    outcomes = []
    for future in futures:
        try:
            future.result(30)
            outcomes.append("ok")
        except InvalidArgumentError:
            outcomes.append("refused")
    refused = [i for i, o in enumerate(outcomes) if o == "refused"]
    assert refused and refused == list(range(refused[0], refused[-1] + 1)), outcomes  # one block
    assert len(refused) <= 2, outcomes  # blocks of two 88-byte frames (target 100 bytes)
    writer.write_event(b"later", routing_key="k").result(30)
    writer.close()
    assert connection.appends < 30, "the refused block was resent"
    delivered = read_all(cluster, 10)
    expected = [f"e{i:03d}".encode() * 20 for i, o in enumerate(outcomes) if o == "ok"]
    assert delivered == [*expected, b"later"]
