"""The per-segment time index and the event-boundary check (segmentstore/time_index.py)."""

from __future__ import annotations

import asyncio
import itertools
import uuid

import pytest

from pravega_ray.client.event_framing import frame_events
from pravega_ray.constants import NO_EVENT_NUMBER, TIME_INDEX_RESOLUTION_MS
from pravega_ray.contracts.segment_store import SegmentRole
from pravega_ray.errors import DataCorruptionError, InvalidArgumentError, SegmentTruncatedError
from pravega_ray.logs.memory import InMemoryLogStore
from pravega_ray.naming import transaction_segment_name
from pravega_ray.segmentstore import container as container_module
from pravega_ray.segmentstore import time_index
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.timing import ManualClock
from tests.containers import QUIET, TIGHT_ATTRIBUTES, new_container

pytestmark = pytest.mark.timeout(60)
SEGMENT = "sc/st/0.#epoch.0"
WRITER = uuid.UUID(int=7).bytes
START_MS = 1_700_000_000_000


class Appender:
    """A writer appending framed events, remembering each event's offset."""

    def __init__(self, container: SegmentContainer, segment: str = SEGMENT) -> None:
        self.c, self.segment, self.last = container, segment, NO_EVENT_NUMBER
        self.offsets: list[int] = []

    async def events(self, *payloads: bytes) -> int:
        data = frame_events(payloads)
        new_last = max(self.last, -1) + len(payloads)
        result = await self.c.append(self.segment, WRITER, self.last, new_last, len(payloads), data)
        self.last = new_last
        at = result.offset
        for p in payloads:
            self.offsets.append(at)
            at += 8 + len(p)
        return result.offset


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_get_offset_at_time_answers_the_first_event_of_the_slot() -> None:
    async def go() -> None:
        clock = ManualClock(wall_start_ms=START_MS)
        c = new_container(config=QUIET, clock=clock)
        await c.create_segment(SEGMENT)
        w = Appender(c)
        assert await c.get_offset_at_time(SEGMENT, START_MS) == 0  # empty: its length
        first = await w.events(b"a", b"bb")  # slot 0
        second = await w.events(b"ccc")  # same slot: no entry
        clock.advance(0.025)  # two and a half slots later
        third = await w.events(b"dddd")
        assert first == 0 and second > 0
        assert await c.get_offset_at_time(SEGMENT, 0) == 0  # before everything: the start
        assert await c.get_offset_at_time(SEGMENT, START_MS) == 0
        assert await c.get_offset_at_time(SEGMENT, START_MS + 9) == 0  # same slot
        assert await c.get_offset_at_time(SEGMENT, START_MS + TIME_INDEX_RESOLUTION_MS) == third
        assert await c.get_offset_at_time(SEGMENT, START_MS + 25) == third
        length = (await c.get_info(SEGMENT)).length
        assert await c.get_offset_at_time(SEGMENT, START_MS + 30) == length  # future: the tail
        await c.close()

    run(go())


def test_get_offset_at_time_rejects_bad_input_and_other_roles() -> None:
    async def go() -> None:
        c = new_container(config=QUIET)
        await c.create_segment(SEGMENT)
        await c.table_create("sc/tbl/0.#epoch.0")
        for bad in (-1, 1.5, True, "1", None):
            with pytest.raises(InvalidArgumentError):
                await c.get_offset_at_time(SEGMENT, bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            await c.get_offset_at_time("sc/tbl/0.#epoch.0", 0)
        with pytest.raises(InvalidArgumentError):
            await c.check_event_boundary("sc/tbl/0.#epoch.0", 0)
        for bad in (-1, 2.0, "0"):
            with pytest.raises(InvalidArgumentError):
                await c.check_event_boundary(SEGMENT, bad)  # type: ignore[arg-type]
        await c.close()

    run(go())


def test_time_index_survives_restart_and_many_slots_through_a_tight_cache() -> None:
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()
    clock = ManualClock(wall_start_ms=START_MS)

    async def first() -> tuple[dict[int, int], int]:
        c = new_container(store, storage, config=TIGHT_ATTRIBUTES, clock=clock)
        await c.create_segment(SEGMENT)
        w = Appender(c)
        slots: dict[int, int] = {}  # slot -> offset of its first event
        for i in range(300):  # 300 slots: most entries end up only in the attribute index
            slot = clock.wall_time_ms() // TIME_INDEX_RESOLUTION_MS
            offset = await w.events(b"x" * (i % 7 + 1))
            slots.setdefault(slot, offset)
            await w.events(b"same-slot")
            clock.advance(0.0101)
        assert len(slots) == 300
        await c.checkpoint()
        for slot in sorted(slots)[::37]:
            assert await c.get_offset_at_time(SEGMENT, slot * 10) == slots[slot]
        await c.close()
        return slots, w.last

    slots, last = run(first())
    ordered = sorted(slots)

    async def second() -> None:
        c = new_container(store, storage, config=TIGHT_ATTRIBUTES, clock=clock)
        for slot in ordered[::23] + ordered[-2:]:
            assert await c.get_offset_at_time(SEGMENT, slot * 10 + 3) == slots[slot]
        # Between two indexed slots: the next one's first event.
        gap = next(s for s, n in itertools.pairwise(ordered) if n > s + 1)
        assert (
            await c.get_offset_at_time(SEGMENT, (gap + 1) * 10)
            == slots[ordered[ordered.index(gap) + 1]]
        )
        # The clock went back to the last slot: the restarted container indexes nothing new.
        c._clock = ManualClock(wall_start_ms=ordered[-1] * 10)  # type: ignore[attr-defined]
        w = Appender(c)
        w.last = last
        await w.events(b"late")
        assert await c.get_offset_at_time(SEGMENT, ordered[-1] * 10) == slots[ordered[-1]]
        await c.close()

    run(second())


def test_truncated_segment_answers_never_below_its_start() -> None:
    async def go() -> None:
        clock = ManualClock(wall_start_ms=START_MS)
        c = new_container(config=QUIET, clock=clock)
        await c.create_segment(SEGMENT)
        w = Appender(c)
        await w.events(b"one", b"two")
        clock.advance(0.01)
        cut = await w.events(b"three")
        await w.events(b"four")
        await c.truncate(SEGMENT, w.offsets[1])  # inside slot 0
        assert await c.get_offset_at_time(SEGMENT, START_MS) == w.offsets[1]
        assert await c.get_offset_at_time(SEGMENT, START_MS + 10) == cut
        await c.check_event_boundary(SEGMENT, w.offsets[1])  # the start offset
        await c.check_event_boundary(SEGMENT, w.offsets[3])
        with pytest.raises(InvalidArgumentError):
            await c.check_event_boundary(SEGMENT, 0)  # below the start
        with pytest.raises(SegmentTruncatedError):
            await c.read(SEGMENT, 0, 10, 0)
        await c.close()

    run(go())


def test_a_merge_is_indexed_at_its_offset() -> None:
    async def go() -> None:
        clock = ManualClock(wall_start_ms=START_MS)
        c = new_container(config=QUIET, clock=clock)
        await c.create_segment(SEGMENT)
        txn = transaction_segment_name(SEGMENT, uuid.uuid4().bytes)
        await c.create_segment(txn, SegmentRole.TRANSACTION)
        await c.append_conditional(txn, frame_events([b"t1", b"t2"]), event_count=2)
        await c.seal(txn)
        await Appender(c).events(b"before")
        clock.advance(0.05)
        at = (await c.get_info(SEGMENT)).length
        await c.merge(SEGMENT, txn)
        assert await c.get_offset_at_time(SEGMENT, START_MS + 50) == at
        await c.check_event_boundary(SEGMENT, at)
        await c.check_event_boundary(SEGMENT, at + 8 + 2)  # the second event of the txn
        with pytest.raises(InvalidArgumentError):
            await c.check_event_boundary(SEGMENT, at + 3)
        await c.close()

    run(go())


def test_check_event_boundary_walks_from_the_nearest_indexed_boundary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(time_index, "BOUNDARY_BUCKET_BYTES", 100)
    monkeypatch.setattr(time_index, "_WALK_WINDOW_BYTES", 64)

    async def go() -> None:
        c = new_container(config=QUIET)
        await c.create_segment(SEGMENT)
        w = Appender(c)
        for i in range(60):
            await w.events(*(bytes([i]) * (j + 1) for j in range(i % 4 + 1)))
        await w.events(b"L" * 1000)  # one append crossing many buckets
        await w.events(b"after")
        length = (await c.get_info(SEGMENT)).length
        boundaries = set(w.offsets) | {length}
        for offset in range(0, length + 1):
            if offset in boundaries:
                await c.check_event_boundary(SEGMENT, offset)
            elif offset % 7 == 0:  # a sample of the rest (each check walks)
                with pytest.raises(InvalidArgumentError):
                    await c.check_event_boundary(SEGMENT, offset)
        with pytest.raises(InvalidArgumentError):
            await c.check_event_boundary(SEGMENT, length + 1)
        # A damaged entry (an offset outside its bucket) is corruption, naming the segment.
        state = c.metadata.get(SEGMENT)
        state.attributes[time_index.boundary_key(3)] = 5
        with pytest.raises(DataCorruptionError) as e:
            await c.check_event_boundary(SEGMENT, 350)
        assert SEGMENT in str(e.value)
        await c.close()

    run(go())


def test_damaged_time_entry_is_corruption() -> None:
    async def go() -> None:
        c = new_container(config=QUIET)
        await c.create_segment(SEGMENT)
        await Appender(c).events(b"x")
        state = c.metadata.get(SEGMENT)
        slot = state.attributes[time_index.TIME_SLOT_LAST]
        state.attributes[time_index.time_key(slot)] = 10**9
        with pytest.raises(DataCorruptionError, match=SEGMENT):
            await c.get_offset_at_time(SEGMENT, 0)
        await c.close()

    run(go())


def test_locate_offset_answers_the_first_boundary_at_or_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(time_index, "BOUNDARY_BUCKET_BYTES", 100)
    monkeypatch.setattr(time_index, "_WALK_WINDOW_BYTES", 64)

    async def go() -> None:
        c = new_container(config=QUIET)
        await c.create_segment(SEGMENT)
        assert await c.locate_offset(SEGMENT, 0) == 0  # empty: start == length
        assert await c.locate_offset(SEGMENT, 10) == 0
        w = Appender(c)
        for i in range(40):
            await w.events(*(bytes([i]) * (j + 1) for j in range(i % 4 + 1)))
        await w.events(b"L" * 1000)  # one append crossing many buckets
        await w.events(b"after")
        length = (await c.get_info(SEGMENT)).length
        boundaries = sorted(set(w.offsets) | {length})
        for offset in range(0, length + 1):
            expected = next(b for b in boundaries if b >= offset)
            assert await c.locate_offset(SEGMENT, offset) == expected, offset
        assert await c.locate_offset(SEGMENT, length + 1000) == length
        # Below a truncated start: the start.
        await c.truncate(SEGMENT, w.offsets[5])
        assert await c.locate_offset(SEGMENT, 0) == w.offsets[5]
        assert await c.locate_offset(SEGMENT, w.offsets[5] + 1) == w.offsets[6]
        for bad in (-1, 1.5, True, "1", None):
            with pytest.raises(InvalidArgumentError):
                await c.locate_offset(SEGMENT, bad)  # type: ignore[arg-type]
        await c.table_create("sc/tbl/0.#epoch.0")
        with pytest.raises(InvalidArgumentError):
            await c.locate_offset("sc/tbl/0.#epoch.0", 0)
        # A damaged entry (an offset outside its bucket) is corruption, naming the segment.
        c.metadata.get(SEGMENT).attributes[time_index.boundary_key(3)] = 5
        with pytest.raises(DataCorruptionError) as e:
            await c.locate_offset(SEGMENT, 350)
        assert SEGMENT in str(e.value)
        await c.close()

    run(go())


async def index_entries_of(c: SegmentContainer) -> tuple[dict[bytes, int], dict[bytes, int]]:
    """The segment's live (time, boundary) index entries: memory over the attribute index."""
    found: list[dict[bytes, int]] = []
    for low, high in (
        (time_index.time_key(0), time_index.time_key((1 << 62) - 1)),
        (time_index.boundary_key(0), time_index.boundary_key((1 << 61) - 1)),
    ):
        entries: dict[bytes, int] = {}
        after = None
        while True:
            page, after = await c._attributes.iterate_range(  # type: ignore[attr-defined]
                SEGMENT, low, high, after, 50
            )
            entries.update(page)
            if after is None:
                break
        found.append(entries)
    return found[0], found[1]


def expected_answer(slots: dict[int, int], time_ms: int, start: int, length: int) -> int:
    """What get_offset_at_time must answer, from every slot's first offset (no truncation)."""
    later = [offset for slot, offset in slots.items() if slot >= time_ms // 10]
    return max(min(later), start) if later else length


def test_truncate_removes_the_index_entries_no_lookup_needs_and_answers_stay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(time_index, "BOUNDARY_BUCKET_BYTES", 100)
    monkeypatch.setattr(time_index, "_WALK_WINDOW_BYTES", 64)
    monkeypatch.setattr(container_module, "ATTRIBUTE_UPDATES_MAX", 16)  # many removal batches
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()
    clock = ManualClock(wall_start_ms=START_MS)
    slots: dict[int, int] = {}
    offsets: list[int] = []

    async def first() -> int:
        c = new_container(store, storage, config=TIGHT_ATTRIBUTES, clock=clock)
        await c.create_segment(SEGMENT)
        w = Appender(c)
        for i in range(300):  # 300 slots, about 24 buckets of 100 bytes
            slots.setdefault(clock.wall_time_ms() // 10, await w.events(b"x" * (i % 5 + 1)))
            await w.events(b"same-slot")
            clock.advance(0.011)
        offsets.extend(w.offsets)
        times, boundaries = await index_entries_of(c)
        assert len(times) == 300 and sorted(times.values()) == sorted(slots.values())
        assert len(boundaries) > 20
        start = w.offsets[401]  # an event inside a slot, after its first
        kept = sorted(o for o in boundaries.values() if o >= start)
        await c.truncate(SEGMENT, start)
        times, boundaries = await index_entries_of(c)
        above = [o for o in slots.values() if o > start]
        assert sorted(times.values()) == [max(o for o in slots.values() if o <= start), *above]
        assert sorted(boundaries.values()) == kept and kept
        markers = await c.get_attributes(SEGMENT, list(time_index.INDEX_KEYS))
        assert markers == {  # the markers stay
            time_index.TIME_SLOT_LAST: max(slots),
            time_index.BOUNDARY_BUCKET_LAST: offsets[-1] // 100,
        }
        # Idempotent: truncating again (at or below the start) removes nothing more.
        await c.truncate(SEGMENT, start)
        await c.truncate(SEGMENT, 0)
        assert await index_entries_of(c) == (times, boundaries)
        await check_answers(c, start)
        await c.checkpoint()
        await c.close()
        return start

    async def check_answers(c: SegmentContainer, start: int) -> None:
        length = (await c.get_info(SEGMENT)).length
        for slot in [*sorted(slots)[::7], min(slots) - 5, max(slots) + 1]:
            for time_ms in (slot * 10, slot * 10 + 9):
                answer = await c.get_offset_at_time(SEGMENT, time_ms)
                assert answer == expected_answer(slots, time_ms, start, length), time_ms
        for offset in offsets[::13]:
            if offset >= start:
                await c.check_event_boundary(SEGMENT, offset)
                assert await c.locate_offset(SEGMENT, offset + 1) == next(
                    o for o in [*offsets, length] if o > offset
                )

    start = run(first())

    async def second() -> None:  # a restarted container: the removals were durable
        c = new_container(store, storage, config=TIGHT_ATTRIBUTES, clock=clock)
        times, boundaries = await index_entries_of(c)
        assert len(times) == 1 + sum(o > start for o in slots.values())
        assert all(o >= start for o in boundaries.values())
        await check_answers(c, start)
        # Writing goes on indexing new slots after the markers (no second entry for a slot).
        w = Appender(c)
        w.last = 599
        clock.advance(0.02)
        at = await w.events(b"later")
        slots[clock.wall_time_ms() // 10] = at
        offsets.append(at)
        await check_answers(c, start)
        await c.close()

    run(second())


def test_entries_left_by_a_killed_container_go_at_the_next_truncate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()
    clock = ManualClock(wall_start_ms=START_MS)
    slots: dict[int, int] = {}

    async def nothing(self: object, segment: str, batch: int):  # type: ignore[no-untyped-def]
        return
        yield

    async def damaged(self: object, segment: str, batch: int):  # type: ignore[no-untyped-def]
        raise DataCorruptionError("an attribute index page is damaged", segment=segment)
        yield

    async def killed_after_the_truncation() -> int:
        c = new_container(store, storage, config=TIGHT_ATTRIBUTES, clock=clock)
        await c.create_segment(SEGMENT)
        w = Appender(c)
        for _ in range(50):
            slots.setdefault(clock.wall_time_ms() // 10, await w.events(b"event"))
            clock.advance(0.01)
        with monkeypatch.context() as m:  # the truncation lands, its removals do not
            m.setattr(time_index.TimeIndex, "stale_entries", nothing)
            await c.truncate(SEGMENT, w.offsets[20])
        with monkeypatch.context() as m:  # a damaged index stops the removals, not the call
            m.setattr(time_index.TimeIndex, "stale_entries", damaged)
            await c.truncate(SEGMENT, w.offsets[30])
        assert (await c.get_info(SEGMENT)).start_offset == w.offsets[30]
        assert len((await index_entries_of(c))[0]) == 50
        await c.close()  # as if killed: nothing else of it runs (close removes nothing)
        return w.offsets[30]

    start = run(killed_after_the_truncation())

    async def recovered() -> None:
        c = new_container(store, storage, config=TIGHT_ATTRIBUTES, clock=clock)
        assert len((await index_entries_of(c))[0]) == 50  # left: space, not a wrong answer
        length = (await c.get_info(SEGMENT)).length
        assert await c.get_offset_at_time(SEGMENT, START_MS) == start
        await c.truncate(SEGMENT, start)  # a retry of the truncation: it changes nothing else
        times, _ = await index_entries_of(c)
        assert sorted(times.values()) == [start, *(o for o in slots.values() if o > start)]
        for slot in slots:
            assert await c.get_offset_at_time(SEGMENT, slot * 10) == expected_answer(
                slots, slot * 10, start, length
            )
        await c.close()

    run(recovered())
