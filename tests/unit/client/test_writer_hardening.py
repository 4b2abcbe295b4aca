"""The writer refuses bad input with typed errors and never wedges on a block the store refuses."""

from __future__ import annotations

import logging
import re
import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.event_framing import frame_event, frame_events
from pravega_ray.client.writer import EventStreamWriter
from pravega_ray.constants import APPEND_BLOCK_BYTES_MAX, MAX_EVENT_SIZE_BYTES, MIB
from pravega_ray.errors import (
    ClientClosedError,
    EventTooLargeError,
    InvalidArgumentError,
    InvalidNameError,
    SerializationError,
)
from pravega_ray.inprocess import InProcessCluster
from tests.checks import read_exactly
from tests.unit.threads import WRITER_THREADS, count_named

pytestmark = pytest.mark.timeout(60)

NAN = float("nan")
REFUSAL = "refused by the test"


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    # A short reorder wait: appends chained on a refused block give up quickly.
    c = InProcessCluster(container_count=2, append_reorder_wait_s=0.5)
    c.stream_manager().create_scope("sc")
    c.stream_manager().create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    yield c
    c.shutdown()


def read_all(cluster: InProcessCluster, expected: int) -> list[bytes]:
    """Exactly ``expected`` events of sc/st, as bytes, through a new reader group
    (``tests.checks.read_exactly``: up to 30 s for them, then nothing more within 0.5 s)."""
    events = read_exactly(
        cluster, "sc", "st", expected, poll_s=0.5, extra_wait_s=0.5, serializer=None
    )
    return [event.event for event in events]


# --- WriterConfig ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("block_bytes_target", 0),
        ("block_bytes_target", APPEND_BLOCK_BYTES_MAX + 1),
        ("block_bytes_target", 64 * MIB),
        ("block_bytes_target", 1.5),
        ("block_bytes_target", "1024"),
        ("blocks_in_flight_max", NAN),
        ("blocks_in_flight_max", True),
        ("blocks_in_flight_max", 0),
        ("blocks_in_flight_max", 10**6),
        ("blocks_queued_max", 0),
        ("blocks_queued_max", -1),
        ("reconnect_attempts_max", 1.5),
        ("reconnect_attempts_max", 0),
        ("reconnect_attempts_max", 10**9),
        ("reconnect_backoff_s", -1),
        ("reconnect_backoff_s", NAN),
        ("reconnect_backoff_s", 3600),
        ("linger_s", float("inf")),
        ("linger_s", -0.1),
        ("linger_s", "1"),
        ("linger_s", None),
        ("append_call_timeout_s", 0),
        ("append_call_timeout_s", -5.0),
        ("append_call_timeout_s", NAN),
        ("append_call_timeout_s", True),
        ("switch_interval_s", 0),
        ("switch_interval_s", -0.001),
        ("switch_interval_s", NAN),
        ("switch_interval_s", float("inf")),
        ("switch_interval_s", True),
        ("switch_interval_s", "0.001"),
        ("switch_interval_s", 2.0),
    ],
)
def test_writer_config_with_a_bad_field_raises_invalid_argument(field: str, value: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=field):
        pr.WriterConfig(**{field: value})


def test_writer_config_at_its_bounds_is_accepted() -> None:
    pr.WriterConfig(
        block_bytes_target=APPEND_BLOCK_BYTES_MAX,
        blocks_in_flight_max=1,
        blocks_queued_max=1,
        linger_s=0,
        reconnect_backoff_s=0.0,
        reconnect_attempts_max=1,
        append_call_timeout_s=1,
        switch_interval_s=1.0,
    )
    pr.WriterConfig(switch_interval_s=None)


# --- the constructor and bad input ----------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"config": {"linger_s": 1}}, "WriterConfig"),
        ({"config": pr.WriterConfig}, "WriterConfig"),
        ({"serializer": "x"}, "serializer"),
        ({"serializer": object()}, "serializer"),
        ({"serializer": pr.JsonSerializer}, "instance"),
    ],
)
def test_create_writer_with_a_bad_config_or_serializer_starts_nothing(
    cluster: InProcessCluster, kwargs: dict[str, Any], match: str
) -> None:
    threads = count_named(WRITER_THREADS)
    with pytest.raises(InvalidArgumentError, match=match):
        cluster.create_writer("sc", "st", **kwargs)
    assert count_named(WRITER_THREADS) == threads


@pytest.mark.parametrize("scope, stream", [("s c", "st"), ("sc", None), ("sc", "../st")])
def test_writer_constructor_with_a_bad_name_raises_invalid_name_and_starts_nothing(
    cluster: InProcessCluster, scope: Any, stream: Any
) -> None:
    threads = count_named(WRITER_THREADS)
    with pytest.raises(InvalidNameError):
        EventStreamWriter(
            scope, stream, pr.BytesSerializer(), cluster._controller, cluster._segments
        )
    assert count_named(WRITER_THREADS) == threads


@pytest.mark.parametrize("key", [["x"], {"x": 1}, b"k", 5, "\ud800", "a\udfffb"])
def test_write_event_with_a_bad_routing_key_raises_invalid_argument(
    cluster: InProcessCluster, key: Any
) -> None:
    with cluster.create_writer("sc", "st") as writer:
        with pytest.raises(InvalidArgumentError, match="routing_key"):
            writer.write_event(b"x", routing_key=key)
        with pytest.raises(InvalidArgumentError, match="routing_key"):
            writer.write_events([b"x"], routing_key=key)
        writer.write_event(b"fine", routing_key="k").result(10)
    assert read_all(cluster, 1) == [b"fine"]


@pytest.mark.parametrize("events", ["abc", b"abc", 5, None, []])
def test_write_events_without_an_iterable_of_events_raises_invalid_argument(
    cluster: InProcessCluster, events: Any
) -> None:
    with (
        cluster.create_writer("sc", "st", serializer=pr.Utf8Serializer()) as writer,
        pytest.raises(InvalidArgumentError, match="write_events"),
    ):
        writer.write_events(events, routing_key="k")


class StrSerializer:
    """A broken custom serializer: returns str, not bytes."""

    def serialize(self, event: str) -> Any:
        return event

    def deserialize(self, data: bytes) -> str:
        return data.decode()


def test_write_event_with_a_serializer_returning_str_raises_serialization_error(
    cluster: InProcessCluster,
) -> None:
    with cluster.create_writer("sc", "st", serializer=StrSerializer()) as writer:
        with pytest.raises(SerializationError, match="not bytes"):
            writer.write_event("abc", routing_key="k")
        with pytest.raises(SerializationError, match="not bytes"):
            writer.write_events(["abc"], routing_key="k")
        writer.flush(10)


def test_write_event_that_cannot_be_serialized_raises_serialization_error(
    cluster: InProcessCluster,
) -> None:
    with cluster.create_writer("sc", "st", serializer=pr.JsonSerializer()) as writer:
        with pytest.raises(SerializationError):
            writer.write_event({"v": NAN}, routing_key="k")
        writer.write_event({"v": 1}, routing_key="k").result(10)


@pytest.mark.parametrize("timeout", [-1, NAN, "1", True])
def test_flush_with_a_bad_timeout_raises_invalid_argument(
    cluster: InProcessCluster, timeout: Any
) -> None:
    with cluster.create_writer("sc", "st") as writer:
        with pytest.raises(InvalidArgumentError, match="timeout"):
            writer.flush(timeout)
        writer.flush(0)


def test_write_event_after_close_raises_client_closed(cluster: InProcessCluster) -> None:
    writer = cluster.create_writer("sc", "st")
    writer.close()
    writer.close()
    with pytest.raises(ClientClosedError):
        writer.write_event(b"x")
    with pytest.raises(ClientClosedError):
        writer.write_events([b"x"])


def test_frame_event_over_the_limit_raises_event_too_large() -> None:
    assert len(frame_event(b"x" * MAX_EVENT_SIZE_BYTES)) == MAX_EVENT_SIZE_BYTES + 8
    with pytest.raises(EventTooLargeError):
        frame_event(b"x" * (MAX_EVENT_SIZE_BYTES + 1))
    with pytest.raises(EventTooLargeError):
        frame_events([b"ok", b"x" * (MAX_EVENT_SIZE_BYTES + 1)])
    with pytest.raises(InvalidArgumentError):
        frame_event("str")  # type: ignore[arg-type]


# --- blocks never outgrow what the store accepts --------------------------------------------


def test_write_events_over_one_block_raises_event_too_large_at_the_call(
    cluster: InProcessCluster,
) -> None:
    with cluster.create_writer("sc", "st") as writer:
        writer.write_event(b"before", routing_key="k").result(30)
        with pytest.raises(EventTooLargeError, match="write_events"):
            writer.write_events([b"a" * 5 * MIB, b"b" * 5 * MIB], routing_key="k")
        with pytest.raises(EventTooLargeError):  # many small ones add up too
            writer.write_events([b"x"] * (APPEND_BLOCK_BYTES_MAX // 9 + 1), routing_key="k")
        with pytest.raises(EventTooLargeError):  # refused before an endless batch is read
            writer.write_events(iter(lambda: b"y" * MIB, None), routing_key="k")
        writer.write_events([b"c" * 4 * MIB, b"d" * 4 * MIB], routing_key="k").result(30)
        writer.write_event(b"after", routing_key="k").result(30)
        writer.flush(30)
    events = read_all(cluster, 4)
    assert events == [b"before", b"c" * 4 * MIB, b"d" * 4 * MIB, b"after"]


def test_write_event_of_big_events_never_builds_a_block_the_store_refuses(
    cluster: InProcessCluster,
) -> None:
    config = pr.WriterConfig(block_bytes_target=APPEND_BLOCK_BYTES_MAX)
    payloads = [bytes([i]) * 4 * MIB for i in range(6)]
    with cluster.create_writer("sc", "st", config=config) as writer:
        futures = [writer.write_event(p, routing_key="k") for p in payloads]
        for future in futures:
            future.result(30)
        writer.write_events([b"small"] * 3, routing_key="k").result(30)
    got = read_all(cluster, 9)
    # Compared by length and first byte: a failing == on 24 MiB of bytes builds a diff for minutes.
    assert [(len(e), e[:1]) for e in got] == [(len(p), p[:1]) for p in payloads] + [(5, b"s")] * 3
    assert got == [*payloads, b"small", b"small", b"small"]


# --- a block the store refuses: defense in depth --------------------------------------------


class RefusingConnection:
    """The in-process segment-store connection; append call number ``refuse`` is refused.

    With ``hold``, the refusal is delivered only once the next append was sent, so at
    least one block chained on the refused one is in flight when it fails.
    """

    def __init__(self, inner: Any, refuse: int, hold: bool = False) -> None:
        self._inner = inner
        self._refuse = refuse
        self._hold = hold
        self._held: Future[Any] | None = None
        self._lock = threading.Lock()
        self.calls: list[tuple[int, int, bytes]] = []  # (expected, last, data) of each append

    def append(
        self, segment: str, writer_id: bytes, expected: int, last: int, count: int, data: bytes
    ) -> Future[Any]:
        with self._lock:
            self.calls.append((expected, last, data))
            number = len(self.calls)
            held, self._held = self._held, None
        if number == self._refuse:
            refused: Future[Any] = Future()
            if self._hold:
                self._held = refused
                threading.Timer(5.0, _refuse, (refused,)).start()  # if no append follows
            else:
                refused.set_exception(InvalidArgumentError(REFUSAL))
            return refused
        call = self._inner.append(segment, writer_id, expected, last, count, data)
        if held is not None:
            _refuse(held)
        return call

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _refuse(future: Future[Any]) -> None:
    if not future.done():
        future.set_exception(InvalidArgumentError(REFUSAL))


def _outcome(future: pr.WriteFuture) -> str:
    error = future.exception(30)
    if error is None:
        return "ok"
    assert isinstance(error, InvalidArgumentError), repr(error)
    return "refused" if str(error) == REFUSAL else "behind"


def _writer(cluster: InProcessCluster, connection: RefusingConnection) -> EventStreamWriter[bytes]:
    config = pr.WriterConfig(block_bytes_target=100, linger_s=0.0)
    return EventStreamWriter(
        "sc", "st", pr.BytesSerializer(), cluster._controller, connection, config
    )


def test_append_refused_by_the_store_fails_its_block_once_and_the_writer_goes_on(
    cluster: InProcessCluster, caplog: pytest.LogCaptureFixture
) -> None:
    connection = RefusingConnection(cluster._segments, refuse=2)
    writer = _writer(cluster, connection)
    caplog.set_level(logging.WARNING, logger="pravega_ray.client.writer")
    writer.write_event(b"first", routing_key="k").result(30)
    with pytest.raises(InvalidArgumentError, match=REFUSAL):
        writer.write_event(b"refused", routing_key="k").result(30)
    writer.write_event(b"later", routing_key="k").result(30)
    writer.flush(30)
    writer.close()
    assert [last for _, last, _ in connection.calls] == [0, 1, 2]  # the refused one sent once
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1
    assert read_all(cluster, 2) == [b"first", b"later"]


def test_append_refused_with_blocks_behind_it_fails_them_and_never_retries(
    cluster: InProcessCluster, caplog: pytest.LogCaptureFixture
) -> None:
    connection = RefusingConnection(cluster._segments, refuse=2, hold=True)
    writer = _writer(cluster, connection)
    caplog.set_level(logging.WARNING, logger="pravega_ray.client.writer")
    rounds = [0]
    plan_round = writer._plan_round

    def counting_plan_round() -> Any:
        rounds[0] += 1
        return plan_round()

    writer._plan_round = counting_plan_round  # type: ignore[method-assign]
    payloads = [f"e{i:03d}".encode() * 20 for i in range(11)]
    futures = [writer.write_event(p, routing_key="k") for p in payloads[:10]]
    while len(connection.calls) < 3:  # the refusal is delivered with the third call
        time.sleep(0.01)
    # An open block on the segment while it waits for the calls behind the refused one.
    futures.append(writer.write_event(payloads[10], routing_key="k"))
    outcomes = [_outcome(f) for f in futures]
    # Settled in event order: acknowledged, then the refused block, then what was behind it.
    assert re.fullmatch("o*r+b+", "".join(o[0] for o in outcomes)), outcomes
    later = writer.write_event(b"later", routing_key="k")
    later.result(30)
    writer.close()
    refused_last = connection.calls[1][1]
    assert [last for _, last, _ in connection.calls].count(refused_last) == 1  # never resent
    assert len(connection.calls) <= len(payloads) + 1, "a retry storm"
    # The segment waited >= 0.5 s (the reorder wait) for the calls behind the refused
    # block with open blocks and linger_s 0: the pump slept, it did not spin.
    assert rounds[0] < 100, rounds
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1
    acknowledged = [p for p, o in zip(payloads, outcomes, strict=True) if o == "ok"]
    assert read_all(cluster, len(acknowledged) + 1) == [*acknowledged, b"later"]
