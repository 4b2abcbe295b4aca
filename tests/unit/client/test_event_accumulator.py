"""The event accumulator: framing, event numbers, when blocks close, the block-size limit."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.event_accumulator import Block, EventAccumulator, SegmentBlocks
from pravega_ray.client.event_framing import EventHeaders, frame_event, frame_events, parse_events
from pravega_ray.constants import APPEND_BLOCK_BYTES_MAX, MAX_EVENT_SIZE_BYTES, MIB
from pravega_ray.errors import EventTooLargeError, SerializationError
from pravega_ray.timing import ManualClock

pytestmark = pytest.mark.timeout(30)


class Wakes:
    """Counts the accumulator's wake-ups of the pump."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def make(target: int = 1000, clock: ManualClock | None = None) -> tuple[EventAccumulator, Wakes]:
    wakes = Wakes()
    return EventAccumulator(target, clock or ManualClock(), wakes), wakes


def add(accumulator: EventAccumulator, blocks: SegmentBlocks, payload: bytes) -> Block:
    return accumulator.append(blocks, accumulator.headers[len(payload)], payload, None)


# --- framing --------------------------------------------------------------------------------


def test_headers_frame_like_frame_event() -> None:
    headers = EventHeaders()
    for payload in (b"", b"x", b"y" * 70_000):
        assert headers[len(payload)] + payload == frame_event(payload)


def test_headers_over_the_event_limit_raise_event_too_large() -> None:
    headers = EventHeaders()
    assert len(headers[MAX_EVENT_SIZE_BYTES]) == 8
    with pytest.raises(EventTooLargeError):
        headers[MAX_EVENT_SIZE_BYTES + 1]
    assert MAX_EVENT_SIZE_BYTES + 1 not in headers


def test_headers_cache_only_small_sizes() -> None:
    headers = EventHeaders()
    headers[100]
    headers[1 * MIB]
    assert list(headers) == [100]


def test_accumulators_of_two_writers_share_no_headers() -> None:
    first, _ = make()
    second, _ = make()
    first.headers[123]
    assert 123 in first.headers and 123 not in second.headers


# --- append ---------------------------------------------------------------------------------


def test_append_numbers_events_and_frames_them() -> None:
    accumulator, _ = make()
    blocks = SegmentBlocks("s")
    payloads = [b"a", b"bb", b"ccc"]
    block = None
    for payload in payloads:
        block = add(accumulator, blocks, payload)
    assert block is not None and block is blocks.open
    assert (block.first, block.last, block.count) == (0, 2, 3)
    assert blocks.next_event_number == 3
    assert block.seal() == frame_events(payloads)
    assert [p for _, p in parse_events(block.seal())[0]] == payloads


def test_append_closes_a_block_at_the_target_and_wakes_the_pump() -> None:
    accumulator, wakes = make(target=3 * 108)
    blocks = SegmentBlocks("s")
    blocks.inflight.append((Block(-5, 0.0), Future()))  # something in flight: no wake on open
    first = [add(accumulator, blocks, b"x" * 100) for _ in range(3)]
    assert wakes.count == 1  # the third event filled the block
    assert list(blocks.queued) == [first[0]] and blocks.open is None
    second = add(accumulator, blocks, b"y" * 100)
    assert second is not first[0] and second.first == 3 and blocks.open is second


def test_append_opening_a_block_wakes_the_pump_only_when_nothing_is_in_flight() -> None:
    accumulator, wakes = make()
    blocks = SegmentBlocks("s")
    add(accumulator, blocks, b"x")
    add(accumulator, blocks, b"x")
    assert wakes.count == 1  # the open block can go at once: nothing in flight
    blocks.close_open()
    blocks.inflight.append((blocks.queued.popleft(), Future()))
    add(accumulator, blocks, b"x")
    assert wakes.count == 1  # it waits for its linger or an ack


def test_append_closes_the_open_block_before_it_would_outgrow_the_limit() -> None:
    accumulator, _ = make(target=APPEND_BLOCK_BYTES_MAX)
    blocks = SegmentBlocks("s")
    big = b"x" * (4 * MIB)
    blocks_used = [add(accumulator, blocks, big) for _ in range(3)]
    assert blocks_used[0] is blocks_used[1] and blocks_used[2] is not blocks_used[0]
    assert list(blocks.queued) == [blocks_used[0]]
    assert all(len(b.seal()) <= APPEND_BLOCK_BYTES_MAX for b in blocks.pending())
    assert [(b.first, b.last) for b in blocks.pending()] == [(0, 1), (2, 2)]


def test_append_stamps_each_block_with_the_injected_clock() -> None:
    clock = ManualClock(start_s=50.0)
    accumulator, _ = make(target=108, clock=clock)
    blocks = SegmentBlocks("s")
    first = add(accumulator, blocks, b"x" * 100)
    clock.advance(2.5)
    second = add(accumulator, blocks, b"x" * 100)
    assert (first.created, second.created) == (50.0, 52.5)


# --- batches --------------------------------------------------------------------------------


def test_frame_batch_frames_like_frame_events_and_counts() -> None:
    accumulator, _ = make()
    data, count = accumulator.frame_batch([b"a", b"bc"], pr.BytesSerializer().serialize, True)
    assert (data, count) == (frame_events([b"a", b"bc"]), 2)
    assert accumulator.frame_batch([], pr.BytesSerializer().serialize, True) == (b"", 0)


def test_frame_batch_over_one_block_raises_event_too_large_before_reading_on() -> None:
    accumulator, _ = make()
    read = []

    def endless() -> Iterator[bytes]:
        while True:
            read.append(1)
            yield b"y" * MIB

    with pytest.raises(EventTooLargeError, match="write_events"):
        accumulator.frame_batch(endless(), pr.BytesSerializer().serialize, True)
    assert len(read) == APPEND_BLOCK_BYTES_MAX // (MIB + 8) + 1


def test_frame_batch_with_a_serializer_returning_str_raises_serialization_error() -> None:
    accumulator, _ = make()
    with pytest.raises(SerializationError, match="not bytes"):
        accumulator.frame_batch(["abc"], lambda event: event, False)


def test_frame_batch_serializes_unless_bytes_pass_through() -> None:
    accumulator, _ = make()
    calls: list[Any] = []

    def serialize(event: Any) -> bytes:
        calls.append(event)
        return bytearray(b"s")  # a bytes-like result is taken as its bytes

    assert accumulator.frame_batch([b"raw"], serialize, True)[0] == frame_event(b"raw")
    assert calls == []
    assert accumulator.frame_batch([b"raw", 5], serialize, False)[0] == frame_events([b"s"] * 2)
    assert calls == [b"raw", 5]


def test_append_batch_keeps_the_batch_whole_in_the_next_block() -> None:
    accumulator, wakes = make(target=APPEND_BLOCK_BYTES_MAX)
    blocks = SegmentBlocks("s")
    first = add(accumulator, blocks, b"x" * (5 * MIB))
    data, count = accumulator.frame_batch(
        [b"a" * (3 * MIB), b"b" * (3 * MIB)], pr.BytesSerializer().serialize, True
    )
    batch = accumulator.append_batch(blocks, data, count, None)
    assert batch is not first and list(blocks.queued) == [first]
    assert (batch.first, batch.last) == (1, 2) and blocks.next_event_number == 3
    assert batch.seal() == data
    assert wakes.count >= 1


# --- the blocks of one segment --------------------------------------------------------------


def test_segment_blocks_list_requeue_and_take_in_event_order() -> None:
    blocks = SegmentBlocks("s")
    made = [Block(i, 0.0) for i in range(5)]
    blocks.inflight.append((made[0], Future()))
    blocks.queued.extend(made[2:4])
    blocks.open = made[4]
    assert blocks.pending() == [made[0], made[2], made[3], made[4]]
    blocks.requeue([made[1]])
    assert list(blocks.queued) == [made[1], made[2], made[3]]
    assert blocks.take_unsent() == made[1:]
    assert blocks.open is None and not blocks.queued and blocks.pending() == [made[0]]


# --- routing keys and re-routing -------------------------------------------------------------


def test_blocks_keep_each_events_routing_key_and_batch_bounds() -> None:
    accumulator, _ = make(target=10_000)
    blocks = SegmentBlocks("s")
    accumulator.append(blocks, accumulator.headers[1], b"a", "k1")
    data, count = accumulator.frame_batch([b"b", b"cc"], lambda e: e, True)
    accumulator.append_batch(blocks, data, count, "k2")
    block = accumulator.append(blocks, accumulator.headers[1], b"d", None)
    assert block.keys == ["k1", "k2", "k2", None]
    assert block.batches == [(1, 2)]
    assert block.units() == [
        ("k1", b"a", 0),
        ("k2", frame_events([b"b", b"cc"]), 2),
        (None, b"d", 0),
    ]


def test_reroute_moves_events_in_order_and_keeps_a_batch_whole() -> None:
    accumulator, _ = make(target=10_000)
    sealed, left, right = SegmentBlocks("s"), SegmentBlocks("l"), SegmentBlocks("r")
    right.next_event_number = 7  # the target numbers the moved events after its own
    for i in range(4):
        accumulator.append(sealed, accumulator.headers[2], f"e{i}".encode(), "L" if i % 2 else "R")
    data, count = accumulator.frame_batch([b"b0", b"b1", b"b2"], lambda e: e, True)
    parent = accumulator.append_batch(sealed, data, count, "L")
    assert parent.count == 7
    accumulator.reroute(parent, lambda key: left if key == "L" else right)
    assert parent.waiting == 2 and parent.data is None and parent.keys == []
    assert left.open is not None and right.open is not None
    assert left.open.parents == [parent] and right.open.parents == [parent]
    assert parse_payloads(left.open) == [b"e1", b"e3", b"b0", b"b1", b"b2"]
    assert left.open.batches == [(2, 3)] and left.open.keys == ["L"] * 5
    assert parse_payloads(right.open) == [b"e0", b"e2"]
    assert (right.open.first, right.open.last) == (7, 8)


def test_reroute_of_a_sent_block_parses_its_joined_bytes() -> None:
    accumulator, _ = make(target=10_000)
    sealed, target = SegmentBlocks("s"), SegmentBlocks("t")
    block = add(accumulator, sealed, b"x")
    add(accumulator, sealed, b"yy")
    block.seal()  # as send() does
    accumulator.reroute(block, lambda key: target)
    assert target.open is not None and parse_payloads(target.open) == [b"x", b"yy"]


def parse_payloads(block: Block) -> list[bytes]:
    return [payload for _, payload in parse_events(b"".join(block.parts))[0]]


def test_a_parent_completes_once_every_child_has_and_fails_with_the_first_error() -> None:
    from pravega_ray.client.segment_output_stream import WriterContext

    accumulator, _ = make(target=10_000)
    context = WriterContext(
        scope="sc",
        stream="st",
        writer_id=b"w" * 16,
        connection=None,  # type: ignore[arg-type]
        controller=None,  # type: ignore[arg-type]
        config=pr.WriterConfig(),
        scheduler=None,  # type: ignore[arg-type]
        on_stream_sealed=lambda e: None,
        on_segment_sealed=lambda *a: None,
    )
    sealed, a, b = SegmentBlocks("s"), SegmentBlocks("a"), SegmentBlocks("b")
    ok = add(accumulator, sealed, b"1")
    add(accumulator, sealed, b"2")
    accumulator.reroute(ok, lambda key: a if key is None and a.open is None else b)
    child_a, child_b = a.open, b.open
    assert child_a is not None and child_b is not None
    with context.lock:
        context.settle(child_a)
    context.complete_settled()
    assert not ok.future.done()
    with context.lock:
        context.settle(child_b)
        context.settle(child_b)  # twice: counted once
    context.complete_settled()
    assert ok.future.result(0) is None and ok.waiting == 0
    # A grandparent through two re-routes; a child's error fails both.
    top = add(accumulator, SegmentBlocks("t"), b"3")
    middle_segment, bottom_segment = SegmentBlocks("m"), SegmentBlocks("n")
    accumulator.reroute(top, lambda key: middle_segment)
    middle = middle_segment.open
    assert middle is not None
    accumulator.reroute(middle, lambda key: bottom_segment)
    bottom = bottom_segment.open
    assert bottom is not None
    error = pr.SegmentStoreUnavailableError("gave up")
    with context.lock:
        context.settle(bottom, error)
        context.settle(bottom)  # too late: the first outcome wins
    context.complete_settled()
    assert middle.future.exception(0) is error and top.future.exception(0) is error
