"""The writer's pump driven by hand (no thread), its seams, and callbacks across writers."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.writer import PUMP_IDLE_WAIT_S_MAX, EventStreamWriter
from pravega_ray.constants import NO_EVENT_NUMBER
from pravega_ray.contracts.records import KeyHash
from pravega_ray.errors import IllegalStateError
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.timing import ManualClock, ManualThreadScheduler
from tests.unit.threads import WRITER_THREADS, count_named

pytestmark = pytest.mark.timeout(30)


@dataclass
class Append:
    segment: str
    expected: int
    last: int
    future: Future[Any]


class Connection:
    """Appends complete when a test says so (or at once with ``answer_at_once``)."""

    def __init__(self, answer_at_once: bool = False) -> None:
        self.appends: list[Append] = []
        self.answer_at_once = answer_at_once

    def append(
        self, segment: str, writer_id: bytes, expected: int, last: int, count: int, data: bytes
    ) -> Future[Any]:
        future: Future[Any] = Future()
        self.appends.append(Append(segment, expected, last, future))
        if self.answer_at_once:
            future.set_result(None)
        return future

    def ack_all(self) -> None:
        for append in self.appends:
            if not append.future.done():
                append.future.set_result(None)


class Controller:
    def __init__(self, segment_count: int) -> None:
        self.segments = tuple(
            SimpleNamespace(name=f"sc/st/{i}", key_low=i / segment_count)
            for i in range(segment_count)
        )

    def get_stream_info(self, scope: str, stream: str) -> Any:
        return SimpleNamespace(sealed=False, segments=self.segments, key_hash=KeyHash.PRAVEGA)


def manual_writer(
    connection: Connection,
    config: pr.WriterConfig | None = None,
    segment_count: int = 1,
    rng: random.Random | None = None,
) -> tuple[EventStreamWriter[bytes], ManualClock]:
    clock = ManualClock()
    writer: EventStreamWriter[bytes] = EventStreamWriter(
        "sc",
        "st",
        pr.BytesSerializer(),
        Controller(segment_count),  # type: ignore[arg-type]
        connection,  # type: ignore[arg-type]
        config,
        clock=clock,
        rng=rng,
        scheduler=ManualThreadScheduler(clock),
    )
    return writer, clock


def test_pump_round_without_a_thread_sends_what_was_written() -> None:
    threads = count_named(WRITER_THREADS)
    connection = Connection()
    writer, _ = manual_writer(connection)
    assert count_named(WRITER_THREADS) == threads  # the scheduler started no pump thread
    future = writer.write_event(b"a", routing_key="k")
    assert connection.appends == []  # nothing goes until the pump runs
    assert writer.pump_round() == 0.0
    assert [(a.expected, a.last) for a in connection.appends] == [(NO_EVENT_NUMBER, 0)]
    assert not future.done()
    connection.ack_all()
    assert future.done() and future.exception() is None
    assert writer.pump_round() == PUMP_IDLE_WAIT_S_MAX  # nothing to do: the watchdog's tick


def test_pump_round_with_nothing_to_send_waits_until_the_linger_runs_out() -> None:
    connection = Connection()
    config = pr.WriterConfig(linger_s=0.25)
    writer, clock = manual_writer(connection, config)
    writer.write_event(b"a", routing_key="k")
    writer.pump_round()
    writer.write_event(b"b", routing_key="k")  # a call is in flight: this block lingers
    assert writer.pump_round() == pytest.approx(0.25)
    clock.advance(0.1)
    assert writer.pump_round() == pytest.approx(0.15)
    assert len(connection.appends) == 1
    clock.advance(0.15)
    assert writer.pump_round() == 0.0
    assert [(a.expected, a.last) for a in connection.appends] == [(NO_EVENT_NUMBER, 0), (0, 1)]


def test_pump_round_after_close_returns_none() -> None:
    connection = Connection(answer_at_once=True)
    writer, _ = manual_writer(connection)
    future = writer.write_event(b"a", routing_key="k")
    while not future.done():
        writer.pump_round()
    writer.close()
    assert writer.pump_round() is None


def test_pump_round_of_a_writer_with_a_pump_thread_raises_illegal_state() -> None:
    writer: EventStreamWriter[bytes] = EventStreamWriter(
        "sc",
        "st",
        pr.BytesSerializer(),
        Controller(1),  # type: ignore[arg-type]
        Connection(answer_at_once=True),  # type: ignore[arg-type]
    )
    try:
        with pytest.raises(IllegalStateError, match="own thread"):
            writer.pump_round()
    finally:
        writer.close()


def test_write_event_with_a_manual_pump_never_waits_for_room() -> None:
    connection = Connection()
    config = pr.WriterConfig(block_bytes_target=100, blocks_in_flight_max=1, blocks_queued_max=1)
    writer, _ = manual_writer(connection, config)
    started = time.monotonic()
    futures = [writer.write_event(b"x" * 100, routing_key="k") for _ in range(10)]
    assert time.monotonic() - started < 0.5  # the caller is the pump: it must not wait
    while not all(f.done() for f in futures):
        writer.pump_round()
        connection.ack_all()
    assert [a.last for a in connection.appends] == list(range(10))


def test_writers_with_the_same_seeded_rng_have_the_same_id_and_choices() -> None:
    runs = []
    for _ in range(2):
        connection = Connection(answer_at_once=True)
        config = pr.WriterConfig(block_bytes_target=1)  # one event per block
        writer, _ = manual_writer(connection, config, segment_count=4, rng=random.Random(3))
        for _ in range(40):
            writer.write_event(b"x")  # no routing key: a random segment
        while writer.pump_round() == 0.0:
            pass
        assert len(connection.appends) == 40
        runs.append((writer.writer_id, [a.segment for a in connection.appends]))
    assert runs[0] == runs[1]
    assert len(set(runs[0][1])) == 4


def test_write_event_in_a_callback_of_another_writer_does_not_wait_for_room() -> None:
    """The in-process cluster completes every writer's futures on its one loop thread, as
    Ray does on its callback thread. A callback of writer A that writes to a full writer
    B must not wait for room: B's acks need the very thread the callback holds."""
    cluster = InProcessCluster(container_count=1)
    try:
        manager = cluster.stream_manager()
        manager.create_scope("sc")
        for name in ("a", "b"):
            manager.create_stream("sc", name, pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
        a = cluster.create_writer("sc", "a")
        config = pr.WriterConfig(
            block_bytes_target=100, blocks_in_flight_max=1, blocks_queued_max=1
        )
        b = cluster.create_writer("sc", "b", config=config)
        forwarded = threading.Event()

        def forward(_future: pr.WriteFuture) -> None:
            for _ in range(50):
                b.write_event(b"y" * 500, routing_key="k")
            forwarded.set()

        a.write_event(b"x", routing_key="k").add_done_callback(forward)
        assert forwarded.wait(10), "a callback waited for room in another writer"
        b.flush(20)
        a.close()
        b.close()
    finally:
        cluster.shutdown()
