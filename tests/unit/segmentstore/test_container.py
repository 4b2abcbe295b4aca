"""Segment container core on memory backends: appends, conditions, reads, seal, recovery."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from pravega_ray.client.event_framing import frame_events, parse_events
from pravega_ray.constants import NO_EVENT_NUMBER
from pravega_ray.errors import (
    ConditionalAppendFailedError,
    InvalidArgumentError,
    InvalidNameError,
    SegmentExistsError,
    SegmentNotFoundError,
    SegmentSealedError,
)
from pravega_ray.logs.memory import InMemoryLogStore
from pravega_ray.storage.memory import InMemoryChunkStorage
from tests.containers import new_container

pytestmark = pytest.mark.timeout(30)

SEG = "sc/st/0.#epoch.0"


def make(store=None, storage=None, **kw):
    return new_container(store, storage, config=kw)


def run(coro):
    return asyncio.run(coro)


def block(first: int, count: int) -> bytes:
    return frame_events(f"e{i}".encode() for i in range(first, first + count))


def test_append_then_read_returns_durable_events() -> None:
    async def go():
        c = make()
        await c.create_segment(SEG)
        w = uuid.uuid4().bytes
        assert await c.setup_append(SEG, w) == NO_EVENT_NUMBER
        r1 = await c.append(SEG, w, NO_EVENT_NUMBER, 2, 3, block(0, 3))
        r2 = await c.append(SEG, w, 2, 4, 2, block(3, 2))
        assert r1.offset == 0 and r2.offset == r1.length
        res = await c.read(SEG, 0, 1 << 20, 0)
        events, consumed = parse_events(res.data)
        assert [e for _, e in events] == [f"e{i}".encode() for i in range(5)]
        assert consumed == r2.length
        info = await c.get_info(SEG)
        assert info.event_count == 5 and info.length == r2.length
        assert await c.setup_append(SEG, w) == 4
        await c.close()

    run(go())


def test_append_with_stale_condition_fails_alone() -> None:
    async def go():
        c = make()
        await c.create_segment(SEG)
        w = uuid.uuid4().bytes
        await c.append(SEG, w, NO_EVENT_NUMBER, 0, 1, block(0, 1))
        with pytest.raises(ConditionalAppendFailedError) as e:
            await c.append(SEG, w, NO_EVENT_NUMBER, 0, 1, block(0, 1))
        assert e.value.actual == 0
        info = await c.get_info(SEG)
        assert info.event_count == 1
        await c.close()

    run(go())


def test_append_arriving_before_its_predecessor_waits_for_it() -> None:
    async def go():
        c = make()
        await c.create_segment(SEG)
        w = uuid.uuid4().bytes
        later = asyncio.create_task(c.append(SEG, w, 0, 1, 1, block(1, 1)))
        await asyncio.sleep(0.01)
        first = await c.append(SEG, w, NO_EVENT_NUMBER, 0, 1, block(0, 1))
        second = await later
        assert second.offset == first.length
        events, _ = parse_events((await c.read(SEG, 0, 1000, 0)).data)
        assert [e for _, e in events] == [b"e0", b"e1"]
        await c.close()

    run(go())


def test_append_whose_predecessor_never_arrives_fails_its_condition() -> None:
    async def go():
        c = make(append_reorder_wait_s=0.05)
        await c.create_segment(SEG)
        with pytest.raises(ConditionalAppendFailedError):
            await c.append(SEG, uuid.uuid4().bytes, 5, 6, 1, block(0, 1))
        await c.close()

    run(go())


def test_tail_read_waits_for_data_and_for_seal() -> None:
    async def go():
        c = make()
        await c.create_segment(SEG)
        w = uuid.uuid4().bytes
        reader = asyncio.create_task(c.read(SEG, 0, 1000, 5))
        await asyncio.sleep(0.01)
        assert not reader.done()
        await c.append(SEG, w, NO_EVENT_NUMBER, 0, 1, block(0, 1))
        res = await reader
        assert res.data and not res.end_of_segment
        tail = asyncio.create_task(c.read(SEG, res.segment_length, 1000, 5))
        await asyncio.sleep(0.01)
        assert await c.seal(SEG) == res.segment_length
        end = await tail
        assert end.data == b"" and end.end_of_segment
        timed_out = await c.read(SEG, 0, 1000, 0)
        assert timed_out.end_of_segment
        await c.close()

    run(go())


def test_tail_read_times_out_with_empty_data() -> None:
    async def go():
        c = make()
        await c.create_segment(SEG)
        res = await c.read(SEG, 0, 100, 0.05)
        assert res.data == b"" and not res.end_of_segment
        await c.close()

    run(go())


def test_bad_input_gets_typed_errors_and_changes_nothing() -> None:
    async def go():
        c = make()
        await c.create_segment(SEG)
        w = uuid.uuid4().bytes
        with pytest.raises(SegmentExistsError):
            await c.create_segment(SEG)
        with pytest.raises(InvalidNameError):
            await c.create_segment("../../etc/passwd")
        with pytest.raises(SegmentNotFoundError):
            await c.append("sc/st/9.#epoch.0", w, NO_EVENT_NUMBER, 0, 1, block(0, 1))
        with pytest.raises(InvalidArgumentError):
            await c.append(SEG, b"short", NO_EVENT_NUMBER, 0, 1, block(0, 1))
        with pytest.raises(InvalidArgumentError):
            await c.read(SEG, 10, 100, 0)
        await c.seal(SEG)
        with pytest.raises(SegmentSealedError):
            await c.append(SEG, w, NO_EVENT_NUMBER, 0, 1, block(0, 1))
        info = await c.get_info(SEG)
        assert info.length == 0 and info.sealed
        assert await c.list_segments() == [SEG]
        await c.close()

    run(go())


def test_recovery_from_log_restores_segments_attributes_and_data() -> None:
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()
    w = uuid.uuid4().bytes

    async def write():
        c = make(store, storage)
        await c.create_segment(SEG)
        await asyncio.gather(
            *[
                c.append(SEG, w, NO_EVENT_NUMBER if i == 0 else i - 1, i, 1, block(i, 1))
                for i in range(50)
            ]
        )
        await c.close()

    async def check():
        c = make(store, storage)
        assert await c.setup_append(SEG, w) == 49
        events, _ = parse_events((await c.read(SEG, 0, 1 << 20, 0)).data)
        assert [e for _, e in events] == [f"e{i}".encode() for i in range(50)]
        await c.close()

    run(write())
    run(check())


def test_storage_writer_flushes_to_tier2_and_reads_come_back_after_eviction() -> None:
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()
    w = uuid.uuid4().bytes

    async def write():
        c = make(store, storage, storage_flush_bytes=1000, read_cache_bytes_max=1)
        await c.create_segment(SEG)
        last = NO_EVENT_NUMBER
        for i in range(0, 300, 10):
            await c.append(SEG, w, last, i + 9, 10, block(i, 10))
            last = i + 9
        await c.flush_to_storage()
        info = await c.get_info(SEG)
        assert info.storage_length == info.length
        assert len(storage.list("segments/")) > 1
        data = b""
        offset = 0
        while offset < info.length:
            res = await c.read(SEG, offset, 1 << 20, 0)
            data += res.data
            offset += len(res.data)
        events, _ = parse_events(data)
        assert [e for _, e in events] == [f"e{i}".encode() for i in range(300)]
        await c.close()

    run(write())

    # After recovery the data is found in Tier-2 through the logged ChunkAdded records.
    async def check():
        c = make(store, storage, read_cache_bytes_max=1)
        res = await c.read(SEG, 0, 1 << 20, 0)
        assert parse_events(res.data)[0][0][1] == b"e0"
        await c.close()

    run(check())


def test_group_commit_delay_gathers_more_operations_per_record() -> None:
    async def go(delay: float) -> int:
        store = InMemoryLogStore()
        c = make(store, group_commit_delay_s=delay)
        await c.create_segment(SEG)
        writers = [uuid.uuid4().bytes for _ in range(20)]

        async def one(w):
            await asyncio.sleep(0.001 * writers.index(w) / 5)
            await c.append(SEG, w, NO_EVENT_NUMBER, 0, 1, block(0, 1))

        await asyncio.gather(*(one(w) for w in writers))
        await c.close()
        return len(store.records)

    assert run(go(0.05)) < run(go(0.0))
