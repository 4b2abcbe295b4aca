"""No input may fail a container's pipeline: everything bound for a binary record is checked first.

Each bad call must raise InvalidArgumentError, change nothing, and leave the container
serving (a later good call succeeds and survives a restart).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from pravega_ray.client.event_framing import frame_events
from pravega_ray.constants import NO_EVENT_NUMBER, TABLE_BATCH_KEYS_MAX
from pravega_ray.contracts.attributes import AttributeUpdate, AttributeUpdateType
from pravega_ray.contracts.segment_store import TableUpdate
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.logs.memory import InMemoryLogStore
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.segmentstore.table_segment import TableSegments
from pravega_ray.storage.memory import InMemoryChunkStorage
from tests.containers import new_container

pytestmark = pytest.mark.timeout(60)

SEG = "sc/st/0.#epoch.0"
TABLE = "sc/_kvt.t/0.#epoch.0"
WRITER = uuid.uuid4().bytes
KEY = b"\x01" * 16


def _update(value: int, kind: AttributeUpdateType = AttributeUpdateType.REPLACE) -> AttributeUpdate:
    return AttributeUpdate(KEY, kind, value)


BAD_CALLS: dict[str, Callable[[SegmentContainer, TableSegments], Awaitable[Any]]] = {
    "event number above int64": lambda c, t: c.append(
        SEG, WRITER, NO_EVENT_NUMBER, 2**63, 1, frame_events([b"x"])
    ),
    "event count above u32": lambda c, t: c.append(
        SEG, WRITER, NO_EVENT_NUMBER, 0, 2**32, frame_events([b"x"])
    ),
    "event count a float": lambda c, t: c.append(
        SEG, WRITER, NO_EVENT_NUMBER, 0, 1.0, frame_events([b"x"])
    ),
    "append data an int": lambda c, t: c.append(SEG, WRITER, NO_EVENT_NUMBER, 0, 1, 5),
    "writer id in the core range": lambda c, t: c.append(
        SEG, b"\x80" + bytes(15), NO_EVENT_NUMBER, 0, 1, frame_events([b"x"])
    ),
    "too many attribute updates": lambda c, t: c.update_attributes(
        SEG,
        tuple(
            AttributeUpdate(i.to_bytes(16, "big"), AttributeUpdateType.REPLACE, 1)
            for i in range(1, 70_000)
        ),
    ),
    "attribute updates not a sequence": lambda c, t: c.update_attributes(SEG, {_update(1)}),
    "accumulate past int64": lambda c, t: c.update_attributes(
        SEG, (_update(2**63 - 1), _update(1, AttributeUpdateType.ACCUMULATE))
    ),
    "conditional append with a negative event count": lambda c, t: c.append_conditional(
        SEG, b"x", (), None, -1
    ),
    "conditional append at a float offset": lambda c, t: c.append_conditional(SEG, b"x", (), 0.5),
    "read at a float offset": lambda c, t: c.read(SEG, 0.5, 10, 0),
    "read waiting NaN seconds": lambda c, t: c.read(SEG, 0, 10, float("nan")),
    "read of a bool byte count": lambda c, t: c.read(SEG, 0, True, 0),
    "truncate at a negative offset": lambda c, t: c.truncate(SEG, -1),
    "create with an unknown role": lambda c, t: c.create_segment("sc/st/9.#epoch.0", "bogus"),
    "65,536-key table batch": lambda c, t: t.update(
        TABLE, [TableUpdate(i.to_bytes(4, "big"), b"") for i in range(65_536)]
    ),
    "table batch one key too many": lambda c, t: t.update(
        TABLE, [TableUpdate(i.to_bytes(4, "big"), b"") for i in range(TABLE_BATCH_KEYS_MAX + 1)]
    ),
    "table batch not a list": lambda c, t: t.update(TABLE, TableUpdate(b"k", b"v")),
    "table get of 100,000 keys": lambda c, t: t.get(TABLE, [b"k"] * 100_000),
    "table iteration page of a million": lambda c, t: t.iterate(TABLE, None, 1_000_000),
    "table changes at a float offset": lambda c, t: t.read_changes(TABLE, 0.5, 100),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_bad_call_is_refused_and_the_container_keeps_serving(name: str) -> None:
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()
    fatal: list[BaseException] = []

    async def scenario() -> None:
        c = new_container(store, storage, on_fatal=fatal.append)
        tables = TableSegments(c)
        await c.create_segment(SEG)
        await tables.create(TABLE)
        await c.update_attributes(SEG, (_update(5),))
        before = await c.get_info(SEG)
        with pytest.raises(InvalidArgumentError):
            await BAD_CALLS[name](c, tables)
        assert await c.get_info(SEG) == before
        assert await c.get_attributes(SEG, [KEY]) == {KEY: 5}
        await c.append(SEG, WRITER, NO_EVENT_NUMBER, 0, 1, frame_events([b"after"]))
        await tables.update(TABLE, [TableUpdate(b"key", b"value")])
        await c.close()
        again = new_container(store, storage)
        assert (await again.get_info(SEG)).event_count == 1
        assert (await TableSegments(again).get(TABLE, [b"key"]))[0].value == b"value"
        await again.close()

    asyncio.run(scenario())
    assert not fatal
