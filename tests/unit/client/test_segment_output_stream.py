"""One segment's output stream, driven by hand: a fake connection whose futures the tests
complete, a manual clock and a scheduler that never sleeps for real."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.event_accumulator import Block, EventAccumulator
from pravega_ray.client.segment_output_stream import SegmentOutputStream, Send, WriterContext
from pravega_ray.constants import NO_EVENT_NUMBER, WRITER_LINGER_S
from pravega_ray.contracts.records import SegmentRange, StreamState
from pravega_ray.errors import (
    ConditionalAppendFailedError,
    ContainerNotReadyError,
    InvalidArgumentError,
    SegmentSealedError,
    SegmentStoreUnavailableError,
    StreamSealedError,
)
from pravega_ray.timing import ManualClock, ManualThreadScheduler

pytestmark = pytest.mark.timeout(30)

SEGMENT = "sc/st/0.#epoch.0"
EVENT = b"e" * 100  # with its header, 108 bytes: a full block at the harness's target


@dataclass
class Append:
    expected: int
    last: int
    count: int
    data: bytes
    future: Future[Any]


class FakeConnection:
    """Records appends (their futures complete when a test says so) and answers
    ``setup_append`` from ``setup_answers``, ``get_info`` from ``sealed``."""

    def __init__(self) -> None:
        self.appends: list[Append] = []
        self.setup_answers: list[int | BaseException] = []
        self.sealed = False

    def append(
        self, segment: str, writer_id: bytes, expected: int, last: int, count: int, data: bytes
    ) -> Future[Any]:
        assert segment == SEGMENT
        future: Future[Any] = Future()
        self.appends.append(Append(expected, last, count, data, future))
        return future

    def setup_append(self, segment: str, writer_id: bytes) -> Future[int]:
        future: Future[int] = Future()
        answer = self.setup_answers.pop(0)
        if isinstance(answer, BaseException):
            future.set_exception(answer)
        else:
            future.set_result(answer)
        return future

    def get_info(self, segment: str) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(SimpleNamespace(sealed=self.sealed))
        return future


class FakeController:
    """Answers ``get_stream_info`` from ``sealed`` and ``get_successors`` from
    ``successors`` (popping an exception to raise first, if any)."""

    def __init__(self) -> None:
        self.sealed = False
        self.successors: dict[Any, list[int]] = {}
        self.successor_errors: list[BaseException] = []

    def get_stream_info(self, scope: str, stream: str) -> Any:
        state = StreamState.SEALED if self.sealed else StreamState.ACTIVE
        return SimpleNamespace(sealed=self.sealed, state=state)

    def get_successors(self, scope: str, stream: str, segment_id: int) -> dict[Any, list[int]]:
        if self.successor_errors:
            raise self.successor_errors.pop(0)
        return self.successors


class Harness:
    """One output stream and the accumulator feeding it, as a writer wires them."""

    def __init__(self, **config: Any) -> None:
        config.setdefault("block_bytes_target", 100)
        self.config = pr.WriterConfig(**config)
        self.clock = ManualClock(start_s=100.0)
        self.scheduler = ManualThreadScheduler(self.clock)
        self.connection = FakeConnection()
        self.controller = FakeController()
        self.sealed_streams: list[StreamSealedError] = []
        self.rerouted: list[tuple[Any, list[Block]]] = []
        self.context = WriterContext(
            scope="sc",
            stream="st",
            writer_id=b"w" * 16,
            connection=self.connection,  # type: ignore[arg-type]
            controller=self.controller,  # type: ignore[arg-type]
            config=self.config,
            scheduler=self.scheduler,
            on_stream_sealed=self.sealed_streams.append,
            on_segment_sealed=lambda _out, successors, blocks: self.rerouted.append(
                (successors, blocks)
            ),
        )
        self.stream = SegmentOutputStream(SEGMENT, self.context)
        self.accumulator = EventAccumulator(
            self.config.block_bytes_target, self.clock, self.context.wake.notify
        )

    def write(self, payload: bytes = EVENT) -> Block:
        with self.context.lock:
            header = self.accumulator.headers[len(payload)]
            return self.accumulator.append(self.stream.blocks, header, payload, "k")

    def pump(self) -> None:
        """One round, as the writer's pump does it: send, watchdog, reconnect."""
        with self.context.lock:
            sends: list[Send] = []
            self.stream.collect_sends(self.clock.monotonic(), sends)
            self.stream.give_up_on_stuck_calls(self.clock.monotonic())
            due = self.stream.reconnect_due()
        self.context.complete_settled()
        for stream, block, expected in sends:
            stream.send(block, expected)
        if due:
            self.stream.reconnect()

    def ack(self, index: int) -> None:
        self.connection.appends[index].future.set_result(None)

    def fail(self, index: int, error: BaseException) -> None:
        self.connection.appends[index].future.set_exception(error)

    def sent(self) -> list[tuple[int, int]]:
        return [(a.expected, a.last) for a in self.connection.appends]


def outcome(block: Block) -> str:
    if not block.future.done():
        return "pending"
    error = block.future.exception(0)
    return "ok" if error is None else type(error).__name__


# --- sending and acks -----------------------------------------------------------------------


def test_send_chains_each_block_on_its_predecessor_up_to_the_window() -> None:
    h = Harness(blocks_in_flight_max=2)
    blocks = [h.write() for _ in range(3)]
    h.pump()
    assert h.sent() == [(NO_EVENT_NUMBER, 0), (0, 1)]
    assert h.connection.appends[0].data == blocks[0].seal()
    h.ack(0)
    assert [outcome(b) for b in blocks] == ["ok", "pending", "pending"]
    h.pump()
    assert h.sent()[2] == (1, 2)


def test_ack_out_of_order_completes_every_block_up_to_it() -> None:
    h = Harness(blocks_in_flight_max=3)
    blocks = [h.write() for _ in range(3)]
    h.pump()
    h.ack(1)  # the container applies blocks in order: block 0 is durable too
    assert [outcome(b) for b in blocks] == ["ok", "ok", "pending"]
    h.ack(0)  # a late answer changes nothing
    assert [outcome(b) for b in blocks] == ["ok", "ok", "pending"]
    h.ack(2)
    assert [outcome(b) for b in blocks] == ["ok", "ok", "ok"]
    assert not h.stream.blocks.inflight and not h.stream.reconnecting


def test_linger_holds_an_open_block_while_calls_are_in_flight() -> None:
    h = Harness(block_bytes_target=10_000, linger_s=1.0)
    h.write()
    h.pump()
    assert len(h.sent()) == 1  # nothing was in flight: sent at once
    h.write()
    h.pump()
    assert len(h.sent()) == 1
    with h.context.lock:
        assert h.stream.idle_wait_s(h.clock.monotonic(), 0.5) == 0.5
        assert h.stream.idle_wait_s(h.clock.monotonic(), 5.0) == pytest.approx(1.0)
    h.clock.advance(1.0)
    h.pump()
    assert h.sent() == [(NO_EVENT_NUMBER, 0), (0, 1)]


def test_an_open_block_goes_once_the_calls_in_flight_are_answered_before_its_linger() -> None:
    # Nagle's rule with a cap: the linger bounds the wait, the ack usually ends it sooner,
    # so a long default linger does not delay a light load.
    h = Harness(block_bytes_target=10_000)
    assert h.config.linger_s == pytest.approx(WRITER_LINGER_S)
    h.write()
    h.pump()
    second = h.write()
    h.pump()
    assert len(h.sent()) == 1  # held: a call is in flight, and no time passed
    h.ack(0)
    h.pump()
    assert h.sent() == [(NO_EVENT_NUMBER, 0), (0, 1)]  # no time passed still
    assert outcome(second) == "pending"


# --- outcome unknown: reconnect and resend --------------------------------------------------


def test_outcome_unknown_error_reconnects_and_resends_only_what_did_not_persist() -> None:
    h = Harness(blocks_in_flight_max=4)
    blocks = [h.write() for _ in range(3)]
    h.pump()
    h.fail(1, SegmentStoreUnavailableError("container restarting"))
    h.pump()  # waits for the segment's other calls before it reconnects
    assert len(h.sent()) == 3 and h.stream.reconnecting
    h.ack(0)
    h.fail(2, ConditionalAppendFailedError("expected 1"))
    h.connection.setup_answers = [1]  # block 1 was persisted; its answer was lost
    h.pump()  # reconnects: settles what persisted, queues the rest again
    assert [outcome(b) for b in blocks] == ["ok", "ok", "pending"]
    h.pump()
    assert h.sent()[3:] == [(1, 2)]  # only block 2, chained on what persisted
    assert h.connection.appends[3].data == h.connection.appends[2].data
    h.ack(3)
    assert outcome(blocks[2]) == "ok"


def test_reconnect_retries_setup_append_with_backoff_on_the_scheduler() -> None:
    h = Harness(reconnect_backoff_s=0.25)
    block = h.write()
    h.pump()
    h.fail(0, SegmentStoreUnavailableError("gone"))
    h.connection.setup_answers = [
        ContainerNotReadyError("recovering"),
        ContainerNotReadyError("recovering"),
        NO_EVENT_NUMBER,
    ]
    h.pump()
    assert h.scheduler.slept_s == [0.25, 0.5]
    assert h.clock.monotonic() == pytest.approx(100.75)  # the sleeps moved the manual clock
    h.pump()
    assert h.sent() == [(NO_EVENT_NUMBER, 0), (NO_EVENT_NUMBER, 0)]
    h.ack(1)
    assert outcome(block) == "ok"


def test_reconnect_when_the_store_stays_unavailable_fails_every_pending_block() -> None:
    h = Harness(reconnect_attempts_max=2, blocks_in_flight_max=1, block_bytes_target=300)
    blocks = [h.write() for _ in range(4)]  # two in a queued block, one each then open
    h.pump()
    h.fail(0, SegmentStoreUnavailableError("gone"))
    h.connection.setup_answers = [SegmentStoreUnavailableError("still gone")] * 2
    h.pump()
    assert {outcome(b) for b in blocks} == {"SegmentStoreUnavailableError"}
    assert not h.stream.blocks.pending()
    # The segment keeps reconnecting; once the store answers, new writes go on.
    later = h.write()
    h.connection.setup_answers = [NO_EVENT_NUMBER]
    h.pump()
    h.pump()
    assert h.sent()[-1] == (NO_EVENT_NUMBER, later.last)
    h.ack(len(h.sent()) - 1)
    assert outcome(later) == "ok"


# --- refused blocks -------------------------------------------------------------------------


def test_refused_block_fails_with_its_error_and_every_later_block_with_a_derived_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness(blocks_in_flight_max=3)
    blocks = [h.write() for _ in range(4)]  # three in flight, one queued
    h.pump()
    with h.context.lock:
        open_block = h.accumulator.append(
            h.stream.blocks, h.accumulator.headers[1], b"o", None
        )  # a small one stays open
    refusal = InvalidArgumentError("refused by the test")
    h.fail(1, refusal)
    h.ack(0)
    h.fail(2, ConditionalAppendFailedError("chained on the refused block"))
    h.connection.setup_answers = [0]
    with caplog.at_level(logging.WARNING):
        h.pump()
    assert blocks[1].future.exception(0) is refusal
    for later in (blocks[2], blocks[3], open_block):
        error = later.future.exception(0)
        assert type(error) is InvalidArgumentError and error.__cause__ is refusal
        assert "earlier event" in str(error)
    assert outcome(blocks[0]) == "ok"
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1
    # Never resent; the segment goes on, chained on what persisted.
    after = h.write()
    h.pump()
    assert h.sent()[3:] == [(0, after.last)]
    h.ack(3)
    assert outcome(after) == "ok"


# --- sealed segments ------------------------------------------------------------------------


def test_sealed_segment_fails_what_is_left_with_segment_sealed() -> None:
    h = Harness(blocks_in_flight_max=2)
    blocks = [h.write() for _ in range(3)]
    h.pump()
    h.ack(0)
    h.fail(1, SegmentSealedError("sealed"))
    h.connection.sealed = True
    h.connection.setup_answers = [0]
    h.pump()
    assert [outcome(b) for b in blocks] == ["ok", "SegmentSealedError", "SegmentSealedError"]
    assert h.stream.sealed and h.sealed_streams == [] and h.rerouted == []
    later = h.write()
    h.pump()
    assert len(h.sent()) == 2  # a sealed segment sends nothing more
    assert outcome(later) == "SegmentSealedError"  # and fails what is written to it


def test_sealed_stream_fails_with_stream_sealed_and_tells_the_writer() -> None:
    h = Harness()
    block = h.write()
    h.pump()
    h.fail(0, StreamSealedError("sealed"))
    h.connection.sealed = True
    h.controller.sealed = True
    h.connection.setup_answers = [NO_EVENT_NUMBER]
    h.pump()
    assert outcome(block) == "StreamSealedError"
    assert [type(e) for e in h.sealed_streams] == [StreamSealedError]


SUCCESSORS = {
    SegmentRange("sc", "st", 1 << 32 | 1, "sc/st/1.#epoch.1", 0.0, 0.5): [0],
    SegmentRange("sc", "st", 1 << 32 | 2, "sc/st/2.#epoch.1", 0.5, 1.0): [0],
}


def test_sealed_segment_of_a_scaled_stream_hands_what_is_left_to_the_writer_in_order() -> None:
    h = Harness(blocks_in_flight_max=3)
    blocks = [h.write() for _ in range(5)]  # three in flight, two queued
    h.pump()
    with h.context.lock:
        open_block = h.accumulator.append(h.stream.blocks, h.accumulator.headers[1], b"o", "k")
    h.ack(0)
    h.fail(1, SegmentSealedError("sealed"))
    h.fail(2, SegmentSealedError("sealed"))
    h.connection.sealed = True
    h.controller.successors = SUCCESSORS
    h.connection.setup_answers = [0]
    h.pump()
    assert outcome(blocks[0]) == "ok"
    assert len(h.rerouted) == 1
    successors, handed = h.rerouted[0]
    assert successors == SUCCESSORS
    assert handed == [*blocks[1:], open_block]  # resends first, then queued, then open
    assert h.stream.sealed and h.stream.sealed_error is None
    assert h.stream.blocks.pending() == [] and h.sealed_streams == []
    assert [outcome(b) for b in handed] == ["pending"] * 5  # the successors complete them


def test_sealed_segment_asks_an_unreachable_controller_again_then_fails_and_retries() -> None:
    h = Harness(reconnect_attempts_max=2)
    block = h.write()
    h.pump()
    h.fail(0, SegmentSealedError("sealed"))
    h.connection.sealed = True
    h.controller.successors = SUCCESSORS
    unavailable = pr.ControllerUnavailableError("down")
    h.controller.successor_errors = [unavailable, unavailable]
    h.connection.setup_answers = [NO_EVENT_NUMBER]
    h.pump()
    assert outcome(block) == "ControllerUnavailableError"  # outcome unknown, given up
    assert not h.stream.sealed and h.stream.reconnecting  # and it looks again
    later = h.write()
    h.connection.setup_answers = [NO_EVENT_NUMBER]
    h.pump()
    assert [b for _, blocks in h.rerouted for b in blocks] == [later]


def test_sealed_segment_of_a_stream_being_sealed_fails_with_stream_sealed() -> None:
    h = Harness()
    block = h.write()
    h.pump()
    h.fail(0, SegmentSealedError("sealed"))
    h.connection.sealed = True
    h.controller.get_stream_info = lambda scope, stream: SimpleNamespace(  # type: ignore[method-assign]
        sealed=False, state=StreamState.SEALING
    )
    h.connection.setup_answers = [NO_EVENT_NUMBER]
    h.pump()
    assert outcome(block) == "StreamSealedError"
    assert [type(e) for e in h.sealed_streams] == [StreamSealedError]


def test_handshake_numbers_events_after_what_the_writer_has_on_the_segment() -> None:
    h = Harness()
    h.stream = SegmentOutputStream(SEGMENT, h.context, handshake=True)
    blocks = [h.write() for _ in range(2)]
    assert [(b.first, b.last) for b in blocks] == [(0, 0), (1, 1)]
    h.connection.setup_answers = [41]  # reached before through another predecessor
    h.pump()  # the handshake: nothing is sent before it
    assert h.sent() == [] and not h.stream.reconnecting and not h.stream.handshake
    assert [(b.first, b.last) for b in blocks] == [(42, 42), (43, 43)]
    h.pump()
    assert h.sent() == [(41, 42), (42, 43)]  # full blocks, chained on event 41
    h.ack(1)
    assert h.write().first == 44
    # A fresh segment: numbers stay as they are.
    h2 = Harness()
    h2.stream = SegmentOutputStream(SEGMENT, h2.context, handshake=True)
    block = h2.write()
    h2.connection.setup_answers = [NO_EVENT_NUMBER]
    h2.pump()
    h2.pump()
    assert h2.sent() == [(NO_EVENT_NUMBER, 0)] and block.first == 0


# --- the stuck-call watchdog ----------------------------------------------------------------


def test_stuck_call_is_given_up_after_the_timeout_on_the_injected_clock(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness(append_call_timeout_s=5.0)
    block = h.write()
    h.pump()
    h.clock.advance(4.9)
    h.pump()
    assert not h.stream.reconnecting
    h.clock.advance(0.2)
    h.connection.setup_answers = [0]  # the call had succeeded; its answer was lost
    with caplog.at_level(logging.WARNING):
        h.pump()
    assert any("unanswered" in r.getMessage() for r in caplog.records)
    assert outcome(block) == "ok" and len(h.sent()) == 1  # nothing resent
    h.ack(0)  # the late answer changes nothing
    assert outcome(block) == "ok" and not h.stream.reconnecting


def given_up_and_queued_again(h: Harness) -> list[Block]:
    """Three blocks sent, none answered within the timeout: given up on, and the
    reconnect (nothing persisted yet) queues all three again, not yet sent."""
    blocks = [h.write() for _ in range(3)]
    h.pump()
    h.clock.advance(5.1)
    h.connection.setup_answers = [NO_EVENT_NUMBER]
    with h.context.lock:  # the round that gives up on them and reconnects; nothing sent
        h.stream.give_up_on_stuck_calls(h.clock.monotonic())
    h.stream.reconnect()
    assert list(h.stream.blocks.queued) == blocks and not h.stream.reconnecting
    return blocks


def test_a_late_failure_of_a_given_up_call_changes_nothing() -> None:
    h = Harness(append_call_timeout_s=5.0, blocks_in_flight_max=3)
    blocks = given_up_and_queued_again(h)
    h.fail(1, ConditionalAppendFailedError("expected 0, actual -1"))  # the late answers
    h.fail(2, ConditionalAppendFailedError("expected 1, actual -1"))
    assert not h.stream.reconnecting  # no second reconnect for calls already given up on
    h.pump()
    assert h.sent()[3:] == [(NO_EVENT_NUMBER, 0), (0, 1), (1, 2)]  # resent, in order
    h.fail(0, pr.SegmentStoreUnavailableError("late"))
    assert not h.stream.reconnecting
    h.ack(5)
    assert [outcome(b) for b in blocks] == ["ok"] * 3


@pytest.mark.parametrize("sealed", [False, True])
def test_a_block_queued_again_that_its_late_first_call_persisted_is_not_sent_again(
    sealed: bool,
) -> None:
    """The simulation's seed 238155196: a block's first call, given up on, landed after
    the reconnect had queued the block again; a second reconnect came before the block was
    sent again (then: a late failure of another given-up call), and found the segment
    sealed for a scale. The block was re-routed to the successors: its events twice."""
    h = Harness(append_call_timeout_s=5.0, blocks_in_flight_max=3)
    blocks = given_up_and_queued_again(h)
    h.ack(0)  # the first block's call lands late: the store has event 0
    with h.context.lock:  # the state a late failure of another given-up call used to leave
        h.stream.reconnecting = True
    h.connection.setup_answers = [0]
    h.connection.sealed = sealed
    h.controller.successors = SUCCESSORS
    h.pump()
    assert outcome(blocks[0]) == "ok"
    if sealed:
        assert [b for _, handed in h.rerouted for b in handed] == blocks[1:]
    else:
        h.pump()
        assert h.sent()[3:] == [(0, 1), (1, 2)]  # chained on what persisted, not event 0 again
        h.ack(4)
        assert [outcome(b) for b in blocks] == ["ok"] * 3


# --- backpressure and failing ---------------------------------------------------------------


def test_wait_for_space_blocks_a_writer_until_a_send_makes_room() -> None:
    h = Harness(blocks_in_flight_max=1, blocks_queued_max=2)
    h.write()
    h.pump()
    h.write()
    h.write()  # two full blocks queued: at the bound
    returned = threading.Event()

    def writer_thread() -> None:
        with h.context.lock:
            h.stream.wait_for_space(lambda: True)
        returned.set()

    thread = threading.Thread(target=writer_thread)
    thread.start()
    assert not returned.wait(0.3)
    h.ack(0)
    h.pump()  # sends the next block: the queue shrinks
    assert returned.wait(5)
    thread.join(5)


def test_wait_for_space_returns_at_once_when_the_writer_is_unusable_or_sealed() -> None:
    h = Harness(blocks_queued_max=1)
    h.write()
    started = time.monotonic()
    with h.context.lock:
        h.stream.wait_for_space(lambda: False)
        h.stream.sealed = True
        h.stream.wait_for_space(lambda: True)
    assert time.monotonic() - started < 0.5


def test_wait_for_space_returns_at_once_inside_a_completion_callback() -> None:
    h = Harness(blocks_in_flight_max=1, blocks_queued_max=1)
    first = h.write()
    h.pump()
    h.write()  # queued: at the bound
    waited_s: list[float] = []

    def callback(_future: Future[None]) -> None:
        started = time.monotonic()
        with h.context.lock:
            h.stream.wait_for_space(lambda: True)
        waited_s.append(time.monotonic() - started)

    first.future.add_done_callback(callback)
    h.ack(0)
    assert len(waited_s) == 1 and waited_s[0] < 0.5


def test_fail_fails_in_flight_queued_and_open_blocks_in_event_order() -> None:
    h = Harness(blocks_in_flight_max=1, block_bytes_target=200)
    blocks = [h.write() for _ in range(5)]
    h.pump()
    order: list[int] = []
    for block in {id(b): b for b in blocks}.values():
        block.future.add_done_callback(lambda _f, first=block.first: order.append(first))
    error = pr.PravegaError("writer pump crashed")
    with h.context.lock:
        h.stream.fail(error)
    h.context.complete_settled()
    assert order == [0, 2, 4]
    assert all(b.future.exception(0) is error for b in blocks)
    assert not h.stream.blocks.pending()
