"""Table segments on a container with memory backends: versions, conditions, iteration, restarts."""

from __future__ import annotations

import asyncio
import random

import pytest

from pravega_ray.contracts.segment_store import NOT_EXISTS, TableEntry, TableUpdate
from pravega_ray.errors import (
    BadKeyVersionError,
    InvalidArgumentError,
    NoSuchKeyError,
    SegmentExistsError,
)
from pravega_ray.logs.memory import InMemoryLogStore
from pravega_ray.segmentstore.table_segment import TableSegments, decode_entries, encode_entry
from pravega_ray.storage.memory import InMemoryChunkStorage
from tests.containers import TIGHT_TABLES, new_container

pytestmark = pytest.mark.timeout(60)

SEG = "sc/_kvt.t/0.#epoch.0"
PLAIN = "sc/st/0.#epoch.0"


class Node:
    """A container and its table extension, restartable over the same log and Tier-2."""

    def __init__(self, **config) -> None:
        self.store, self.storage, self.config = InMemoryLogStore(), InMemoryChunkStorage(), config
        self.start()

    def start(self) -> None:
        self.container = new_container(self.store, self.storage, config=self.config)
        self.tables = TableSegments(self.container)

    async def restart(self) -> None:
        await self.container.close()
        self.start()


def put(key: bytes, value: bytes, version: int | None = None) -> TableUpdate:
    return TableUpdate(key, value, version)


async def all_entries(tables: TableSegments, limit: int = 7) -> dict[bytes, TableEntry]:
    found: dict[bytes, TableEntry] = {}
    cursor = None
    while True:
        page, cursor = await tables.iterate(SEG, cursor, limit)
        for entry in page:
            assert entry.key not in found, "iteration returned a key twice"
            found[entry.key] = entry
        if cursor is None:
            return found


def test_versions_and_conditions() -> None:
    async def go() -> None:
        node = Node()
        t = node.tables
        await t.create(SEG)
        with pytest.raises(SegmentExistsError):
            await t.create(SEG)
        first = await t.update(SEG, [put(b"a", b"1", NOT_EXISTS), put(b"b", b"2")])
        va, vb = first.versions
        assert 0 == va < vb and first.offset == 0
        assert await t.get(SEG, [b"a", b"b", b"zz"]) == [
            TableEntry(b"a", b"1", va),
            TableEntry(b"b", b"2", vb),
            None,
        ]
        with pytest.raises(BadKeyVersionError) as bad:
            await t.update(SEG, [put(b"a", b"x", NOT_EXISTS)])  # put_if_absent of a present key
        assert bad.value.key == b"a" and bad.value.actual == va
        with pytest.raises(NoSuchKeyError):
            await t.update(SEG, [put(b"zz", b"x", 0)])  # replace of an absent key
        with pytest.raises(BadKeyVersionError):
            await t.update(SEG, [put(b"a", b"x", vb)])  # wrong version
        # A batch is atomic: one failing condition and nothing of it applies.
        length = (await node.container.get_info(SEG)).length
        with pytest.raises(BadKeyVersionError):
            await t.update(SEG, [put(b"c", b"3"), put(b"a", b"x", vb)])
        assert (await node.container.get_info(SEG)).length == length
        assert await t.get(SEG, [b"c"]) == [None]
        (va2,) = (await t.update(SEG, [put(b"a", b"11", va)])).versions
        assert va2 > vb
        assert (await t.get(SEG, [b"a"]))[0] == TableEntry(b"a", b"11", va2)
        # Removal: conditional on the version, then unconditional of an absent key.
        with pytest.raises(BadKeyVersionError):
            await t.update(SEG, [TableUpdate(b"a", None, va)])
        assert (await t.update(SEG, [TableUpdate(b"a", None, va2)])).versions == (NOT_EXISTS,)
        await t.update(SEG, [TableUpdate(b"a", None)])
        with pytest.raises(NoSuchKeyError):
            await t.update(SEG, [TableUpdate(b"a", None, va2)])
        assert await t.get(SEG, [b"a"]) == [None]
        assert set(await all_entries(t)) == {b"b"}
        await node.container.close()

    asyncio.run(go())


def test_bad_input_is_refused_and_changes_nothing() -> None:
    async def go() -> None:
        node = Node()
        t = node.tables
        await t.create(SEG)
        await node.container.create_segment(PLAIN)
        cases = [
            (PLAIN, [put(b"k", b"v")]),  # not a table segment
            (SEG, [put(b"", b"v")]),  # empty key
            (SEG, [put(b"k" * 8193, b"v")]),  # key too long
            (SEG, [put(b"k", b"v" * (1024 * 1024 + 1))]),  # value too long
            (SEG, [put(b"k", b"1"), put(b"k", b"2")]),  # same key twice
            (SEG, [put(b"k", "text")]),  # type: ignore[arg-type]
            (SEG, [put(b"k", b"v", -7)]),  # bad version
            (SEG, [put(b"k" * 8000, b"v" * 1_000_000, None)] * 0 + [("k", b"v")]),  # not an update
        ]
        for segment, updates in cases:
            with pytest.raises(InvalidArgumentError):
                await t.update(segment, updates)
        with pytest.raises(InvalidArgumentError):
            await t.update(
                SEG, [put(bytes([i % 256, i // 256]), b"v" * 1_000_000) for i in range(9)]
            )
        with pytest.raises(InvalidArgumentError):
            await t.iterate(SEG, b"\x02" + bytes(15), 10)
        assert (await node.container.get_info(SEG)).length == 0
        assert await all_entries(t) == {}
        await node.container.close()

    asyncio.run(go())


def test_read_changes_reports_every_entry_in_order_including_removals() -> None:
    async def go() -> None:
        node = Node()
        t = node.tables
        await t.create(SEG)
        await t.update(SEG, [put(b"a", b"1"), put(b"b", b"2")])
        await t.update(SEG, [TableUpdate(b"a", None)])
        await t.update(SEG, [put(b"big", b"x" * 5000)])
        await t.update(SEG, [put(b"a", b"3")])
        changes, position = [], 0
        while True:
            entries, position = await t.read_changes(SEG, position, 100)  # smaller than one entry
            if not entries:
                break
            changes += entries
        assert [(e.key, e.value and e.value[:1]) for e in changes] == [
            (b"a", b"1"),
            (b"b", b"2"),
            (b"a", None),
            (b"big", b"x"),
            (b"a", b"3"),
        ]
        assert position == (await node.container.get_info(SEG)).length
        assert (await t.get(SEG, [b"a"]))[0].version == changes[-1].version
        await node.container.close()

    asyncio.run(go())


def test_entry_codec_keeps_partial_tails_for_later() -> None:
    data = encode_entry(b"k1", b"v1") + encode_entry(b"k2", None)
    entries, used = decode_entries(data + encode_entry(b"k3", b"v3")[:5], 100)
    assert used == len(data)
    assert entries == [TableEntry(b"k1", b"v1", 100), TableEntry(b"k2", None, 100 + 18)]


def test_a_retried_batch_with_the_same_client_state_applies_once() -> None:
    async def go() -> None:
        node = Node()
        t = node.tables
        await t.create(SEG)
        client = bytes(range(15))
        first = await t.update(SEG, [put(b"a", b"1", NOT_EXISTS)], client, -(2**63))
        length = (await node.container.get_info(SEG)).length
        # The ack was lost; the retry carries the same state and must not fail its condition.
        again = await t.update(SEG, [put(b"a", b"1", NOT_EXISTS)], client, -(2**63))
        assert again == first
        assert (await node.container.get_info(SEG)).length == length
        second = await t.update(SEG, [put(b"a", b"2", first.versions[0])], client, first.offset)
        await node.restart()
        assert (
            await node.tables.update(
                SEG, [put(b"a", b"2", first.versions[0])], client, first.offset
            )
            == second
        )
        assert (await node.tables.get(SEG, [b"a"]))[0].value == b"2"
        assert set(await all_entries(node.tables)) == {b"a"}  # client attributes are not keys
        await node.container.close()

    asyncio.run(go())


COMPACTING = dict(table_compaction_min_bytes=600, table_compaction_round_bytes=300)
"""Compaction after a few hundred bytes, a few entries per round."""


@pytest.mark.parametrize("compacting", [False, True], ids=["plain", "compacting"])
@pytest.mark.parametrize("seed", range(4))
def test_random_operations_with_restarts_match_a_dict_model(seed: int, compacting: bool) -> None:
    """Gets, versions and iteration agree with a model across evictions, flushes and
    restarts, and across compaction moving the entries (conditions name versions from
    before the moves)."""
    rng = random.Random(seed)

    async def go() -> None:
        node = Node(**TIGHT_TABLES, **(COMPACTING if compacting else {}))
        await node.tables.create(SEG)
        model: dict[bytes, tuple[bytes, int]] = {}
        compacted = 0
        for step in range(120):
            keys = [f"k{rng.randrange(80)}".encode() for _ in range(rng.randint(1, 6))]
            keys = list(dict.fromkeys(keys))
            updates = []
            for key in keys:
                current = model.get(key)
                roll = rng.random()
                if roll < 0.2:
                    updates.append(TableUpdate(key, None))
                elif roll < 0.4:
                    updates.append(put(key, b"v%d" % step, current[1] if current else NOT_EXISTS))
                elif roll < 0.45:  # a wrong condition: the batch must fail whole
                    updates.append(put(key, b"bad", NOT_EXISTS if current else 12345))
                else:
                    updates.append(put(key, b"v%d" % step))
            bad = any(u.value == b"bad" for u in updates)
            try:
                result = await node.tables.update(SEG, updates)
            except (BadKeyVersionError, NoSuchKeyError):
                assert bad
            else:
                assert not bad
                for update, version in zip(updates, result.versions, strict=True):
                    if update.value is None:
                        model.pop(update.key, None)
                    else:
                        model[update.key] = (update.value, version)
            if rng.random() < 0.05:
                await node.restart()
            if rng.random() < 0.1:
                await asyncio.sleep(0.03)  # let the storage writer flush and evict
            compacted = max(compacted, (await node.container.get_info(SEG)).start_offset)
        probe = [f"k{i}".encode() for i in range(80)]
        for tables in (node.tables, None):
            if tables is None:
                await node.container.checkpoint()
                await node.restart()
                tables = node.tables
            got = await tables.get(SEG, probe)
            assert {k: (e.value, e.version) for k, e in zip(probe, got, strict=True) if e} == model
            listed = await all_entries(tables, limit=rng.randint(1, 9))
            assert {k: (e.value, e.version) for k, e in listed.items()} == model
        assert node.storage.list("attributes-btree/"), "the index was never used"
        assert (compacted > 0) == compacting, "compaction truncated nothing, or ran unasked"
        await node.container.close()

    asyncio.run(go())
