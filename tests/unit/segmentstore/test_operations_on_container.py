"""Attribute updates, conditional appends on attributes and offsets, truncation, deletion."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from pravega_ray.contracts.attributes import (
    EVENT_COUNT,
    NULL_VALUE,
    AttributeUpdate,
    AttributeUpdateType,
    apply_updates,
)
from pravega_ray.errors import (
    ConditionalUpdateError,
    InvalidArgumentError,
    SegmentNotFoundError,
    SegmentTruncatedError,
)
from pravega_ray.logs.memory import InMemoryLogStore
from pravega_ray.storage.memory import InMemoryChunkStorage
from tests.containers import new_container

pytestmark = pytest.mark.timeout(30)
SEG = "s/t/0.#epoch.0"
K1, K2 = uuid.uuid4().bytes, uuid.uuid4().bytes
R, G, EQ, ACC = (
    AttributeUpdateType.REPLACE,
    AttributeUpdateType.REPLACE_IF_GREATER,
    AttributeUpdateType.REPLACE_IF_EQUALS,
    AttributeUpdateType.ACCUMULATE,
)


def make(store, storage, **kw):
    return new_container(store, storage, config=kw)


def test_attribute_verbs() -> None:
    assert apply_updates({}, [AttributeUpdate(K1, R, 5)]) == {K1: 5}
    assert apply_updates({K1: 5}, [AttributeUpdate(K1, G, 6)]) == {K1: 6}
    with pytest.raises(ConditionalUpdateError):
        apply_updates({K1: 5}, [AttributeUpdate(K1, G, 5)])
    assert apply_updates({}, [AttributeUpdate(K1, G, -3)]) == {K1: -3}  # absent: any value
    assert apply_updates({K1: 5}, [AttributeUpdate(K1, EQ, 9, 5)]) == {K1: 9}
    with pytest.raises(ConditionalUpdateError):
        apply_updates({K1: 5}, [AttributeUpdate(K1, EQ, 9, 4)])
    assert apply_updates({}, [AttributeUpdate(K1, EQ, 1, NULL_VALUE)]) == {K1: 1}  # must be absent
    with pytest.raises(ConditionalUpdateError):
        apply_updates({K1: 0}, [AttributeUpdate(K1, EQ, 1, NULL_VALUE)])
    assert apply_updates({K1: 5}, [AttributeUpdate(K1, ACC, 3), AttributeUpdate(K1, ACC, 2)]) == {
        K1: 10
    }
    with pytest.raises(InvalidArgumentError):
        AttributeUpdate(b"short", R, 1)
    with pytest.raises(InvalidArgumentError):
        AttributeUpdate(EVENT_COUNT, R, 1)  # core attributes are not for users
    with pytest.raises(InvalidArgumentError):
        AttributeUpdate(K1, R, 2**63)


def test_updates_and_conditional_appends_are_atomic_and_survive_recovery() -> None:
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()

    async def first():
        c = make(store, storage)
        await c.create_segment(SEG)
        await c.update_attributes(SEG, (AttributeUpdate(K1, R, 10), AttributeUpdate(K2, ACC, 1)))
        with pytest.raises(ConditionalUpdateError):  # second fails -> first not applied either
            await c.update_attributes(
                SEG, (AttributeUpdate(K1, R, 99), AttributeUpdate(K2, EQ, 5, 4))
            )
        r = await c.append_conditional(
            SEG, b"abc", (AttributeUpdate(K1, EQ, 11, 10),), expected_offset=0, event_count=1
        )
        assert (r.offset, r.length) == (0, 3)
        with pytest.raises(ConditionalUpdateError):  # stale offset: nothing appended
            await c.append_conditional(SEG, b"zzz", (), expected_offset=0)
        with pytest.raises(ConditionalUpdateError):  # stale attribute: nothing appended
            await c.append_conditional(SEG, b"zzz", (AttributeUpdate(K1, EQ, 12, 10),))
        assert (await c.get_info(SEG)).length == 3
        await c.close()

    async def second():
        c = make(store, storage)
        got = await c.get_attributes(SEG, [K1, K2, EVENT_COUNT, uuid.uuid4().bytes])
        assert got == {K1: 11, K2: 1, EVENT_COUNT: 1}
        assert (await c.read(SEG, 0, 100, 0)).data == b"abc"
        await c.close()

    asyncio.run(first())
    asyncio.run(second())


def test_truncation_makes_old_reads_fail_typed_and_deletes_chunks_after_recovery() -> None:
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()
    small = dict(
        storage_flush_bytes=100, storage_flush_interval_s=0.01, storage_writer_tick_s=0.005
    )

    async def first():
        c = make(store, storage, **small)
        await c.create_segment(SEG)
        for i in range(10):
            await c.append_conditional(SEG, bytes([i]) * 100)
        await c.flush_to_storage()
        chunks_before = storage.list("segments/")
        assert len(chunks_before) >= 5
        await c.truncate(SEG, 450)
        with pytest.raises(SegmentTruncatedError) as e:
            await c.read(SEG, 100, 10, 0)
        assert e.value.start_offset == 450
        assert (await c.read(SEG, 450, 10, 0)).data == bytes([4]) * 10
        with pytest.raises(InvalidArgumentError):
            await c.truncate(SEG, 5000)
        await c.truncate(SEG, 10)  # below the start: a no-op
        await c.flush_to_storage()
        assert len(storage.list("segments/")) < len(chunks_before)
        assert (await c.get_info(SEG)).start_offset == 450
        await c.checkpoint()
        await c.close()

    async def second():
        c = make(store, storage)
        assert (await c.get_info(SEG)).start_offset == 450
        with pytest.raises(SegmentTruncatedError):
            await c.read(SEG, 0, 10, 0)
        assert (await c.read(SEG, 999, 10, 0)).data == bytes([9])
        await c.close()

    asyncio.run(first())
    asyncio.run(second())


def test_delete_removes_the_segment_and_its_chunks() -> None:
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()

    async def go():
        c = make(store, storage)
        await c.create_segment(SEG)
        await c.append_conditional(SEG, b"x" * 1000)
        await c.flush_to_storage()
        assert storage.list("segments/")
        waiting = asyncio.ensure_future(c.read(SEG, 1000, 10, 5))
        await asyncio.sleep(0.01)
        await c.delete_segment(SEG)
        with pytest.raises(SegmentNotFoundError):
            await c.get_info(SEG)
        await waiting  # a tail read returns when the segment goes away
        await c.flush_to_storage()
        assert storage.list("segments/") == []
        await c.close()
        again = make(store, storage)
        with pytest.raises(SegmentNotFoundError):
            await again.get_info(SEG)
        await again.create_segment(SEG)  # the name is free again
        await again.close()

    asyncio.run(go())
