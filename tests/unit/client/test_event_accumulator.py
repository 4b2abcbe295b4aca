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
