"""Transient segments (PDP-43A): creation, no extended attributes, merge with the writer's
mark, and the cleanup of unmerged ones by idle time and after a recovery."""

from __future__ import annotations

import asyncio

import pytest

from pravega_ray.constants import NO_EVENT_NUMBER
from pravega_ray.contracts.attributes import (
    EVENT_COUNT,
    AttributeUpdate,
    AttributeUpdateType,
)
from pravega_ray.contracts.segment_store import SegmentRole
from pravega_ray.errors import (
    ConditionalUpdateError,
    InvalidArgumentError,
    InvalidNameError,
    SegmentNotFoundError,
    SegmentSealedError,
)
from pravega_ray.logs.memory import InMemoryLogStore
from pravega_ray.segmentstore import operations as ops
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.timing import ManualClock
from tests.containers import QUIET, new_container
from tests.faults.storage import FaultPlan, FaultyChunkStorage

pytestmark = pytest.mark.timeout(30)
PARENT = "s/t/0.#epoch.0"
WRITER = b"w" * 16


def mark(value: int, expected: int = NO_EVENT_NUMBER) -> AttributeUpdate:
    return AttributeUpdate(WRITER, AttributeUpdateType.REPLACE_IF_EQUALS, value, expected)


async def read_all(c: SegmentContainer, segment: str) -> bytes:
    info = await c.get_info(segment)
    return await c.read_range(segment, info.start_offset, info.length - info.start_offset)


def test_create_transient_segment_names_it_in_the_parents_container() -> None:
    async def go() -> None:
        c = new_container(config=QUIET)
        await c.create_segment(PARENT)
        name = await c.create_transient_segment(PARENT)
        other = await c.create_transient_segment(PARENT)
        assert name != other and name.startswith(PARENT + "#transient.")
        assert c.segment_role(name) == SegmentRole.TRANSIENT.value
        await c.close()

    asyncio.run(go())


def test_create_transient_segment_refuses_a_missing_sealed_or_derived_parent() -> None:
    async def go() -> None:
        c = new_container(config=QUIET)
        with pytest.raises(SegmentNotFoundError):
            await c.create_transient_segment(PARENT)
        await c.create_segment(PARENT)
        name = await c.create_transient_segment(PARENT)
        with pytest.raises(InvalidNameError):
            await c.create_transient_segment(name)
        with pytest.raises(InvalidNameError):
            await c.create_transient_segment(42)  # type: ignore[arg-type]
        await c.seal(PARENT)
        with pytest.raises(SegmentSealedError):
            await c.create_transient_segment(PARENT)
        await c.close()

    asyncio.run(go())


def test_transient_segment_refuses_extended_attributes_and_allows_core_ones() -> None:
    async def go() -> None:
        c = new_container(config=QUIET)
        await c.create_segment(PARENT)
        name = await c.create_transient_segment(PARENT)
        with pytest.raises(InvalidArgumentError):
            await c.update_attributes(name, (mark(1),))
        with pytest.raises(InvalidArgumentError):
            await c.append_conditional(name, b"x", (mark(1),))
        with pytest.raises(InvalidArgumentError):
            await c.append(name, WRITER, NO_EVENT_NUMBER, 0, 1, b"x")
        await c.append_conditional(name, b"data", (), 0, 1)  # no attributes: fine
        assert (await c.get_attributes(name, [EVENT_COUNT]))[EVENT_COUNT] == 1
        assert (await c.get_info(name)).length == 4  # nothing of the refused calls landed
        await c.close()

    asyncio.run(go())


def test_merge_sets_the_mark_atomically_and_survives_recovery() -> None:
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()

    async def first() -> None:
        c = new_container(store, storage, config=QUIET)
        await c.create_segment(PARENT)
        await c.append(PARENT, WRITER, NO_EVENT_NUMBER, 0, 1, b"small")
        name = await c.create_transient_segment(PARENT)
        await c.append_conditional(name, b"large", (), 0, 1)
        await c.seal(name)
        with pytest.raises(ConditionalUpdateError):
            await c.merge(PARENT, name, (mark(1, expected=5),))  # wrong condition
        assert name in await c.list_segments()  # nothing merged
        assert await c.merge(PARENT, name, (mark(1, expected=0),)) == 10
        assert await c.setup_append(PARENT, WRITER) == 1
        assert (await c.get_info(PARENT)).event_count == 2
        await c.close()

    async def second() -> None:
        c = new_container(store, storage, config=QUIET)
        assert await c.setup_append(PARENT, WRITER) == 1
        assert await read_all(c, PARENT) == b"smalllarge"
        await c.close()

    asyncio.run(first())
    asyncio.run(second())


def test_merge_record_without_attributes_decodes_as_before() -> None:
    old = ops.MergeSegment("t", "s", 0, 3, b"abc")
    assert list(ops.decode(ops.encode([old]))) == [old]
    assert b'"a"' not in ops.encode([old])  # old records are byte-identical
    new = ops.MergeSegment("t", "s", 0, 0, None, ((WRITER, 7),))
    assert list(ops.decode(ops.encode([new]))) == [new]


def test_merge_refuses_a_mark_on_a_transient_target() -> None:
    async def go() -> None:
        c = new_container(config=QUIET)
        await c.create_segment(PARENT)
        a = await c.create_transient_segment(PARENT)
        b = await c.create_transient_segment(PARENT)
        await c.seal(b)
        with pytest.raises(InvalidArgumentError):
            await c.merge(a, b, (mark(1),))
        await c.merge(a, b)  # without attributes: allowed
        await c.close()

    asyncio.run(go())


def test_idle_transient_segments_are_deleted_and_used_ones_kept() -> None:
    clock = ManualClock()

    async def go() -> None:
        config = {**QUIET, "transient_segment_idle_s": 100.0, "transient_cleanup_period_s": 10.0}
        c = new_container(config=config, clock=clock)
        await c.create_segment(PARENT)
        idle = await c.create_transient_segment(PARENT)
        used = await c.create_transient_segment(PARENT)
        clock.advance(60)
        await c.append_conditional(used, b"x", (), 0, 0)
        assert await c.transients.sweep() == []
        clock.advance(50)  # idle: 110 s unused; used: 50 s
        assert await c.transients.sweep() == [idle]
        assert idle not in await c.list_segments() and used in await c.list_segments()
        clock.advance(60)
        assert await c.transients.sweep() == [used]
        assert (await c.get_info(PARENT)).length == 0  # nothing visible in the parent
        await c.close()

    asyncio.run(go())


def test_periodic_cleanup_runs_on_its_own() -> None:
    async def go() -> None:
        config = {**QUIET, "transient_segment_idle_s": 0.0, "transient_cleanup_period_s": 0.01}
        c = new_container(config=config)
        await c.create_segment(PARENT)
        name = await c.create_transient_segment(PARENT)
        for _ in range(200):
            if name not in await c.list_segments():
                break
            await asyncio.sleep(0.01)
        assert name not in await c.list_segments()
        await c.close()

    asyncio.run(go())


def test_unmerged_transient_segments_are_deleted_after_recovery() -> None:
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()
    names: list[str] = []

    async def first() -> None:
        c = new_container(store, storage, config=QUIET)
        await c.create_segment(PARENT)
        names.append(await c.create_transient_segment(PARENT))
        await c.append_conditional(names[0], b"half an event", (), 0, 0)
        await c.close()  # the writer never merged it (killed mid-event)

    async def second() -> None:
        c = new_container(store, storage, config=QUIET)  # idle limit 300 s: recovery wins
        await c.get_info(PARENT)  # starts the container and its cleanup
        for _ in range(200):
            if names[0] not in await c.list_segments():
                break
            await asyncio.sleep(0.01)
        assert await c.list_segments() == [PARENT]
        assert (await c.get_info(PARENT)).length == 0
        await c.close()

    asyncio.run(first())
    asyncio.run(second())


def test_container_config_refuses_bad_transient_settings() -> None:
    from pravega_ray.segmentstore.config import ContainerConfig

    with pytest.raises(InvalidArgumentError):
        ContainerConfig(0, transient_cleanup_period_s=0)
    with pytest.raises(InvalidArgumentError):
        ContainerConfig(0, transient_segment_idle_s=-1)
    with pytest.raises(InvalidArgumentError):
        ContainerConfig(0, transient_segment_idle_s=float("nan"))


def test_a_segment_deleted_while_its_chunk_is_written_does_not_stop_the_container() -> None:
    # The cleanup (or a writer giving up a large event) deletes a transient segment while the
    # storage writer writes its chunk: the late ChunkAdded finds it gone; the chunk is dead.
    plan = FaultPlan(delay_s=0.2)
    storage = FaultyChunkStorage(InMemoryChunkStorage(), plan)

    async def go() -> None:
        c = new_container(InMemoryLogStore(), storage, config=QUIET)
        await c.create_segment(PARENT)
        name = await c.create_transient_segment(PARENT)
        await c.append_conditional(name, b"slice" * 1000, (), 0, 0)
        flush = asyncio.ensure_future(c.flush_to_storage())
        await asyncio.sleep(0.05)  # the chunk's create is under way
        await c.delete_segment(name)
        await flush
        await c.append_conditional(PARENT, b"still running", (), 0, 1)
        assert await c.list_segments() == [PARENT]
        await c.flush_to_storage()  # deletes the dead chunk
        assert not [n for n in storage.list(PARENT) if "#transient." in n]
        await c.close()

    asyncio.run(go())


def test_slices_arriving_out_of_order_wait_for_their_predecessor() -> None:
    async def go() -> None:
        c = new_container(config={**QUIET, "append_reorder_wait_s": 0.3})
        await c.create_segment(PARENT)
        name = await c.create_transient_segment(PARENT)
        second = asyncio.ensure_future(c.append_conditional(name, b"world", (), 5, 1))
        await asyncio.sleep(0.01)
        assert not second.done()  # waits for the slice before it
        await c.append_conditional(name, b"hello", (), 0, 0)
        assert (await second).offset == 5
        assert await read_all(c, name) == b"helloworld"
        with pytest.raises(ConditionalUpdateError):  # a slice that never comes: fails in time
            await c.append_conditional(name, b"x", (), 99, 0)
        await c.create_segment("s/t/1.#epoch.0")  # other segments never wait
        with pytest.raises(ConditionalUpdateError):
            await asyncio.wait_for(c.append_conditional("s/t/1.#epoch.0", b"x", (), 5), 0.5)
        await c.close()

    asyncio.run(go())
