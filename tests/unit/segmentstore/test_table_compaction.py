"""Table segment compaction (``segmentstore/table_compactor.py``) on memory backends: live
entries keep their values and versions, the head is truncated, a round killed at any step
loses and duplicates nothing, reads racing compaction see every key once, damaged copies
are named."""

from __future__ import annotations

import asyncio
import random

import pytest

from pravega_ray.contracts.attributes import NULL_VALUE
from pravega_ray.contracts.segment_store import NOT_EXISTS, TableEntry, TableUpdate
from pravega_ray.errors import BadKeyVersionError, DataCorruptionError, SegmentTruncatedError
from pravega_ray.segmentstore.table_segment import (
    COUNTED,
    COUNTS,
    ENTRY_COUNT,
    LIVE_KEYS,
    decode_entries,
    encode_copy,
    encode_entry,
)
from tests.unit.segmentstore.test_table_segment import SEG, Node, all_entries, put

pytestmark = pytest.mark.timeout(60)

MANUAL = dict(table_compaction_min_bytes=10**9, table_compaction_round_bytes=400)
"""Compaction only when the test calls a round (400 bytes of entries each)."""
AUTO = dict(table_compaction_min_bytes=1000, table_compaction_round_bytes=400)
"""Compaction on its own once a segment stores 1,000 bytes at under 75% live entries."""


async def churn(node: Node, keys: int = 10, rounds: int = 20) -> dict[bytes, TableEntry]:
    """Write every key ``rounds`` times (some removed and written again); the latest entries."""
    latest: dict[bytes, TableEntry] = {}
    for r in range(rounds):
        for i in range(keys):
            key = b"key-%d" % i
            if r % 7 == 3 and i % 3 == 0:
                await node.tables.update(SEG, [TableUpdate(key, None)])
                latest.pop(key, None)
                continue
            value = b"value-%d-%d" % (i, r)
            (version,) = (await node.tables.update(SEG, [put(key, value)])).versions
            latest[key] = TableEntry(key, value, version)
    return latest


async def stored(node: Node) -> int:
    info = await node.container.get_info(SEG)
    return info.length - info.start_offset


async def compact_all(node: Node) -> int:
    """Rounds until one reads nothing; returns how many did something."""
    rounds = 0
    length = (await node.container.get_info(SEG)).length
    while (await node.container.get_info(SEG)).start_offset < length:
        done = await node.tables.compactor.compact(SEG)
        assert done.read, "a round read nothing before the old length"
        rounds += 1
    return rounds


async def check(node: Node, latest: dict[bytes, TableEntry]) -> None:
    """Gets and iteration answer exactly ``latest``, values and versions."""
    keys = [*sorted(latest), b"never-written"]
    got = await node.tables.get(SEG, keys)
    assert dict(zip(keys, got, strict=True)) == {**latest, b"never-written": None}
    assert await all_entries(node.tables, limit=3) == latest


def test_compaction_keeps_values_and_versions_and_truncates_the_head() -> None:
    async def go() -> None:
        node = Node(**MANUAL)
        await node.tables.create(SEG)
        latest = await churn(node)
        before = await stored(node)
        assert await compact_all(node) > 1
        after = await stored(node)
        live = sum(len(encode_copy(e.key, e.value or b"", 0)) for e in latest.values())
        assert after <= live * 1.05 < before / 5, (before, after, live)
        await check(node, latest)
        # The counters: every live key once, and nothing else stored above the offset.
        found = await node.container.get_attributes(SEG, [LIVE_KEYS, ENTRY_COUNT])
        assert found == {LIVE_KEYS: len(latest), ENTRY_COUNT: len(latest)}
        # A conditional update names the version from before the move, and wins once.
        key = sorted(latest)[0]
        old = latest[key].version
        (new,) = (await node.tables.update(SEG, [put(key, b"moved", old)])).versions
        with pytest.raises(BadKeyVersionError) as conflict:
            await node.tables.update(SEG, [put(key, b"again", old)])
        assert conflict.value.actual == new
        # ... and a key still at its copy reports its kept version in a conflict.
        other = sorted(latest)[1]
        with pytest.raises(BadKeyVersionError) as conflict:
            await node.tables.update(SEG, [put(other, b"x", NOT_EXISTS)])
        assert conflict.value.actual == latest[other].version
        latest[key] = TableEntry(key, b"moved", new)
        await node.restart()
        await check(node, latest)
        await node.container.close()

    asyncio.run(go())


def test_changes_carry_copies_and_a_truncated_offset_is_refused() -> None:
    async def go() -> None:
        node = Node(**MANUAL)
        await node.tables.create(SEG)
        latest = await churn(node, keys=4, rounds=10)
        middle = (await node.tables.read_changes(SEG, 0, 200))[1]
        await compact_all(node)
        start = (await node.container.get_info(SEG)).start_offset
        with pytest.raises(SegmentTruncatedError):
            await node.tables.read_changes(SEG, middle, 1000)
        # From 0: the segment's start; replaying the changes rebuilds the table.
        replayed: dict[bytes, TableEntry] = {}
        position, first = 0, True
        while True:
            entries, position = await node.tables.read_changes(SEG, position, 150)
            if first:
                assert entries[0].offset == start
                first = False
            if not entries:
                break
            for e in entries:
                if e.value is None:
                    replayed.pop(e.key, None)
                else:
                    replayed[e.key] = e
        assert replayed == latest
        assert all(e.offset != e.version for e in replayed.values()), "not all were copies"
        await node.container.close()

    asyncio.run(go())


class Killed(Exception):
    """The test stops a round here, as a kill would."""


@pytest.mark.parametrize("step", ["before-append", "before-truncate"])
def test_a_round_killed_at_any_step_loses_and_duplicates_nothing(step: str) -> None:
    async def go() -> None:
        node = Node(**MANUAL)
        await node.tables.create(SEG)
        latest = await churn(node, keys=6, rounds=12)
        container = node.container
        target = container.append_composed if step == "before-append" else container.truncate

        async def killed(*args: object, **kwargs: object) -> None:
            raise Killed

        setattr(container, target.__name__, killed)
        with pytest.raises(Killed):
            await node.tables.compactor.compact(SEG)
        await node.restart()  # the kill: the container recovers from its log
        await check(node, latest)
        before = await node.container.get_info(SEG)
        assert before.start_offset == 0
        await compact_all(node)  # a round after a kill finishes what the killed one began
        await check(node, latest)
        found = await node.container.get_attributes(SEG, [LIVE_KEYS, ENTRY_COUNT])
        assert found == {LIVE_KEYS: len(latest), ENTRY_COUNT: len(latest)}
        await node.container.close()

    asyncio.run(go())


def test_reads_and_conditional_updates_racing_compaction_see_every_key_once() -> None:
    async def go() -> None:
        node = Node(**MANUAL)
        await node.tables.create(SEG)
        latest = await churn(node, keys=30, rounds=6)
        stop = asyncio.Event()

        async def compacting() -> None:
            while not stop.is_set():
                await node.tables.compactor.compact(SEG)
                await asyncio.sleep(0)

        # Every value each key had (values are unique), and its version once known.
        history = {k: {e.value: e.version} for k, e in latest.items()}

        async def reading() -> int:
            checks = 0
            while not stop.is_set():
                keys = sorted(latest)
                got = await node.tables.get(SEG, keys)
                listed = await all_entries(node.tables, limit=3)  # each key once, or it fails
                assert sorted(listed) == keys, "a key missing from the iteration"
                for e in [*got, *listed.values()]:
                    assert e is not None and e.value in history[e.key], e
                    assert history[e.key][e.value] in (None, e.version), e
                checks += 1
            return checks

        async def updating() -> None:
            rng = random.Random(7)
            for step in range(150):
                key, value = rng.choice(sorted(latest)), b"u%d" % step
                history[key][value] = None  # readers may see it before the update returns
                result = await node.tables.update(SEG, [put(key, value, latest[key].version)])
                latest[key] = TableEntry(key, value, result.versions[0])
                history[key][value] = result.versions[0]
                await asyncio.sleep(0)
            stop.set()

        task = asyncio.gather(compacting(), reading(), updating())
        _, checks, _ = await task
        assert checks > 0 and node.tables.compactor.rounds > 10
        await check(node, latest)
        await node.container.close()

    asyncio.run(go())


def test_compaction_runs_on_its_own_and_the_size_follows_the_live_data() -> None:
    async def go() -> None:
        node = Node(**AUTO)
        await node.tables.create(SEG)
        sizes = []
        latest: dict[bytes, TableEntry] = {}
        for _ in range(10):
            latest = await churn(node, keys=8, rounds=10)
            await asyncio.sleep(0.05)  # the background rounds
            sizes.append(await stored(node))
        live = sum(len(encode_copy(e.key, e.value or b"", 0)) for e in latest.values())
        assert max(sizes) < 2000 + 2 * live, sizes  # it would be ~25 KB by now without
        assert node.tables.compactor.rounds > 0
        await check(node, latest)
        await node.container.close()

    asyncio.run(go())


def test_a_segment_from_before_the_counters_is_counted_exactly_while_it_is_updated() -> None:
    async def go() -> None:
        node = Node(table_compaction_min_utilization=0)  # no compaction, no counting: before
        await node.tables.create(SEG)
        latest = await churn(node, keys=5, rounds=4)  # keys 0 and 3 removed at round 3

        def forget(offset: int, current: object) -> tuple[bytes, dict[bytes, int]]:
            return b"", {COUNTS: NULL_VALUE, ENTRY_COUNT: NULL_VALUE, LIVE_KEYS: NULL_VALUE}

        await node.container.append_composed(SEG, [COUNTS], forget)
        await node.tables.update(SEG, [TableUpdate(b"key-1", None)])
        latest.pop(b"key-1")
        assert await node.container.get_attributes(SEG, [COUNTS, ENTRY_COUNT]) == {}
        # Counted while updates run: those before its cut are read, the rest add up.
        counting = asyncio.ensure_future(node.tables.compactor.count(SEG))
        more = 0
        while not counting.done():
            key = b"extra-%d" % more
            latest[key] = TableEntry(
                key, b"x", (await node.tables.update(SEG, [put(key, b"x")])).versions[0]
            )
            more += 1
        assert await counting
        assert more > 0, "no update raced the count"
        found = await node.container.get_attributes(SEG, [COUNTS, LIVE_KEYS, ENTRY_COUNT])
        assert found == {COUNTS: COUNTED, LIVE_KEYS: len(latest), ENTRY_COUNT: 20 + 1 + more}
        assert not await node.tables.compactor.count(SEG)  # once
        # A count killed after its cut resumes from it.
        await node.container.append_composed(SEG, [COUNTS], forget)
        await node.container.append_composed(
            SEG, [COUNTS], lambda offset, current: (b"", {COUNTS: offset})
        )
        await node.restart()
        assert await node.tables.compactor.count(SEG)
        found = await node.container.get_attributes(SEG, [LIVE_KEYS, ENTRY_COUNT])
        assert found == {LIVE_KEYS: len(latest), ENTRY_COUNT: 20 + 1 + more}
        # With compaction on, an uncounted segment is counted on its own, then compacted.
        await node.container.append_composed(SEG, [COUNTS], forget)
        node.config = AUTO
        await node.restart()
        for _ in range(3):
            latest.update(await churn(node, keys=5, rounds=10))
            await asyncio.sleep(0.05)
        assert node.tables.compactor.rounds > 0
        await check(node, latest)
        await node.container.close()

    asyncio.run(go())


def test_a_damaged_copy_is_named() -> None:
    copy = encode_copy(b"k", b"v", 7)
    assert decode_entries(copy, 100) == ([TableEntry(b"k", b"v", 7)], len(copy))
    assert decode_entries(copy, 100)[0][0].offset == 100
    flipped = bytearray(copy)
    flipped[15] ^= 1  # in the version
    with pytest.raises(DataCorruptionError, match="checksum"):
        decode_entries(bytes(flipped), 100)
    with pytest.raises(DataCorruptionError, match="a copy of version 100"):
        decode_entries(encode_copy(b"k", b"v", 100), 100)  # a copy is always after its put
    removal = bytearray(encode_entry(b"k", None))
    removal[9] = 1  # a removal with a value length
    with pytest.raises(DataCorruptionError, match="has a value"):
        decode_entries(bytes(removal) + b"x", 0)


@pytest.mark.parametrize("read", ["get", "iterate", "conditional update"])
def test_a_read_whose_key_compaction_moved_right_after_its_lookup_finds_it(read: str) -> None:
    """The lookup answers where the entry was; compaction copies it and truncates that
    place before the entry is read: the read looks the key up again."""

    async def go() -> None:
        node = Node(**MANUAL)
        await node.tables.create(SEG)
        latest = await churn(node, keys=6, rounds=10)
        container = node.container
        lookup = container.get_attributes if read == "get" else container.iterate_attributes
        if read == "conditional update":
            lookup = container.durable_barrier  # before the version of a copy is read
            await compact_all(node)  # so the keys' latest puts are copies
        armed = [True]

        async def racing(*args: object) -> object:
            answer = await lookup(*args)  # type: ignore[operator]
            if armed[0]:
                armed[0] = False
                assert await compact_all(node) > 0
            return answer

        setattr(container, lookup.__name__, racing)
        if read == "get":
            await check(node, latest)
        elif read == "iterate":
            assert await all_entries(node.tables, limit=100) == latest
        else:
            key = b"key-1"
            (version,) = (
                await node.tables.update(SEG, [put(key, b"z", latest[key].version)])
            ).versions
            latest[key] = TableEntry(key, b"z", version)
        assert not armed[0]
        delattr(container, lookup.__name__)
        await check(node, latest)
        await node.container.close()

    asyncio.run(go())
