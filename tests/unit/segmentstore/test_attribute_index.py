"""Extended attributes: evicted from memory, prefetched from the attribute index, durable."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from pravega_ray.client.event_framing import frame_events
from pravega_ray.constants import NO_EVENT_NUMBER
from pravega_ray.contracts.attributes import AttributeUpdate, AttributeUpdateType
from pravega_ray.logs.memory import InMemoryLogStore
from pravega_ray.segmentstore.btree_attribute_index import BTreeAttributeIndex
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.storage.memory import InMemoryChunkStorage
from tests.containers import TIGHT_ATTRIBUTES, new_container

pytestmark = pytest.mark.timeout(60)
SEG = "s/t/0.#epoch.0"


@pytest.mark.parametrize("page_bytes_max", [512, 32 * 1024])
def test_many_writers_beyond_the_cache_bound_keep_exact_event_numbers(page_bytes_max: int) -> None:
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()
    writers = [uuid.uuid4().bytes for _ in range(60)]

    def make() -> SegmentContainer:
        index = BTreeAttributeIndex(storage, page_bytes_max=page_bytes_max)
        return new_container(store, storage, config=TIGHT_ATTRIBUTES, attribute_index=index)

    async def write() -> None:
        c = make()
        await c.create_segment(SEG)
        for rnd in range(3):
            for i, w in enumerate(writers):
                expected = NO_EVENT_NUMBER if rnd == 0 else (rnd - 1) * 1000 + i
                await c.append(SEG, w, expected, rnd * 1000 + i, 1, frame_events([b"e"]))
            await asyncio.sleep(0.05)  # storage writer: flush attributes, evict, checkpoint
        for _ in range(100):  # its rounds come every 5 ms, later on a loaded machine
            cached = len(c.metadata.get(SEG).pending_attributes)
            if cached <= 10 + 1:
                break
            await asyncio.sleep(0.05)
        assert cached <= 10 + 1, f"{cached} attributes still cached"
        for i, w in enumerate(writers):  # evicted ones come back through the index
            assert await c.setup_append(SEG, w) == 2000 + i
        await c.update_attributes(
            SEG, (AttributeUpdate(writers[0], AttributeUpdateType.ACCUMULATE, 5),)
        )
        await c.checkpoint()
        await c.close()

    async def recover() -> None:
        c = make()
        assert min(store.records) > 0, "log was never truncated: the test proves nothing"
        for i, w in enumerate(writers):
            assert await c.setup_append(SEG, w) == 2000 + i + (5 if i == 0 else 0)
        assert await c.get_attributes(SEG, [uuid.uuid4().bytes]) == {}
        await c.close()

    asyncio.run(write())
    asyncio.run(recover())
    assert storage.list("attributes-btree/"), "the attributes never reached the index"
