"""Checkpoints, log truncation, crash recovery against a model, fencing, traffic rates."""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path

import pytest

from pravega_ray.client.event_framing import frame_events, parse_events
from pravega_ray.constants import NO_EVENT_NUMBER
from pravega_ray.contracts.attributes import AttributeUpdate, AttributeUpdateType
from pravega_ray.errors import ContainerNotReadyError, FencedError
from pravega_ray.logs.filesystem import FileSystemDurableLog
from pravega_ray.logs.memory import InMemoryLogStore
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.storage.filesystem import FileSystemChunkStorage
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.timing import ManualClock
from tests.containers import SMALL, new_container

pytestmark = pytest.mark.timeout(60)


def container(store: InMemoryLogStore, storage: InMemoryChunkStorage, **kw) -> SegmentContainer:
    return new_container(store, storage, config=kw)


async def read_segment(c: SegmentContainer, segment: str) -> bytes:
    info = await c.get_info(segment)
    data, offset = b"", 0
    while offset < info.length:
        res = await c.read(segment, offset, 1 << 20, 0)
        data += res.data
        offset += len(res.data)
    return data


def test_sustained_writes_keep_the_log_bounded_and_recover_from_a_checkpoint() -> None:
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()
    seg = "s/t/0.#epoch.0"
    writer = uuid.uuid4().bytes

    async def write():
        c = container(store, storage, **SMALL)
        await c.create_segment(seg)
        last = NO_EVENT_NUMBER
        sizes = []
        for i in range(400):
            await c.append(seg, writer, last, i, 1, frame_events([f"event-{i}".encode() * 5]))
            last = i
            if i % 20 == 0:
                await asyncio.sleep(0.02)  # let the storage writer run
                sizes.append(store.size_bytes())
        assert c.truncated_upto > 0, "the log was never truncated while writing"
        # Tier-1 holds only the recent tail: bounded by the thresholds, not by the data.
        assert max(sizes[len(sizes) // 2 :]) < 20 * SMALL["checkpoint_log_bytes"]
        assert sizes[-1] < sum(len(f"event-{i}".encode() * 5) + 8 for i in range(400))
        await c.checkpoint()
        await c.close()

    async def recover():
        c = container(store, storage, **SMALL)
        assert min(store.records) > 0, "log was never truncated"
        events, _ = parse_events(await read_segment(c, seg))
        assert [e for _, e in events] == [f"event-{i}".encode() * 5 for i in range(400)]
        assert await c.setup_append(seg, writer) == 399
        assert (await c.get_info(seg)).event_count == 400
        await c.close()

    asyncio.run(write())
    asyncio.run(recover())


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6, 7, 8])
def test_random_crashes_never_lose_or_duplicate_acknowledged_appends(seed: int) -> None:
    """A seeded workload with crashes at random points, checked against a model.

    Model: per segment the acknowledged bytes, per writer the last acknowledged
    event number. After every crash and recovery the container must hold
    exactly the model's bytes (unacknowledged appends may or may not be there,
    but only whole and at the end) and report the model's attributes.
    """
    rng = random.Random(seed)
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()
    segments = [f"s/t/{i}.#epoch.0" for i in range(3)]
    writers = [uuid.uuid4().bytes for _ in range(3)]
    acked: dict[str, bytes] = {s: b"" for s in segments}
    last: dict[tuple[str, bytes], int] = {}

    async def run_epoch(c: SegmentContainer, steps: int) -> None:
        pending = []
        for _ in range(steps):
            seg, w = rng.choice(segments), rng.choice(writers)
            expected = last.get((seg, w), NO_EVENT_NUMBER)
            n = rng.randint(1, 5)
            first = 0 if expected == NO_EVENT_NUMBER else expected + 1
            data = frame_events(f"{seg}:{w.hex()[:4]}:{first + k}".encode() for k in range(n))
            last[(seg, w)] = first + n - 1

            async def one(seg=seg, w=w, expected=expected, n=n, data=data, first=first):
                await c.append(seg, w, expected, first + n - 1, n, data)
                return seg, data

            pending.append(asyncio.ensure_future(one()))
            if rng.random() < 0.3:
                await asyncio.sleep(rng.choice([0, 0.001, 0.01]))
        done, not_done = await asyncio.wait(pending, timeout=rng.choice([0, 0.001, 0.05, 5]))
        for task in done:
            if task.exception() is None:
                seg, data = task.result()
                acked[seg] += data  # only tasks seen acknowledged count
        await c.close()  # crash: whatever is in flight has an unknown outcome
        for task in not_done:
            task.cancel()

    async def check(c: SegmentContainer) -> None:
        for seg in segments:
            stored = await read_segment(c, seg)
            # Acked bytes of one segment all come from appends in order, so the model's
            # events must be a sub-sequence (unacked extras may sit between acked blocks).
            stored_events = [e for _, e in parse_events(stored)[0]]
            acked_events = [e for _, e in parse_events(acked[seg])[0]]
            assert set(acked_events) <= set(stored_events), "acknowledged events lost"
            assert len(stored_events) == len(set(stored_events)), "duplicated events"
            for w in writers:
                persisted = await c.setup_append(seg, w)
                assert persisted >= max(
                    [
                        int(e.split(b":")[2])
                        for e in acked_events
                        if e.split(b":")[1].decode() == w.hex()[:4]
                    ],
                    default=NO_EVENT_NUMBER,
                )
                last[(seg, w)] = persisted  # the writer resumes from the durable truth

    async def scenario() -> None:
        c = container(store, storage, **SMALL)
        for seg in segments:
            await c.create_segment(seg)
        for _ in range(6):
            await run_epoch(c, rng.randint(5, 60))
            c = container(store, storage, **SMALL)
            await check(c)
        await c.close()

    asyncio.run(scenario())


def test_a_second_owner_fences_the_first_which_stops_and_loses_nothing(tmp_path: Path) -> None:
    seg = "s/t/0.#epoch.0"
    writer = uuid.uuid4().bytes
    fatal: list[BaseException] = []

    def make(on_fatal=None) -> SegmentContainer:
        return new_container(
            FileSystemDurableLog(tmp_path / "log"),
            FileSystemChunkStorage(tmp_path / "tier2"),
            on_fatal=on_fatal,
        )

    async def scenario() -> None:
        first = make(on_fatal=fatal.append)
        await first.create_segment(seg)
        await first.append(seg, writer, NO_EVENT_NUMBER, 0, 1, frame_events([b"by-first"]))
        second = make()  # takes over the same log while the first still runs
        with pytest.raises(ContainerNotReadyError):  # fenced: the first stops
            await first.append(seg, writer, 0, 1, 1, frame_events([b"zombie"]))
        assert fatal and isinstance(fatal[0], FencedError)
        await second.append(seg, writer, 0, 1, 1, frame_events([b"by-second"]))
        events = [e for _, e in parse_events(await read_segment(second, seg))[0]]
        assert events == [b"by-first", b"by-second"]
        await second.close()
        third = make()
        events = [e for _, e in parse_events(await read_segment(third, seg))[0]]
        assert events == [b"by-first", b"by-second"]
        await third.close()

    asyncio.run(scenario())


def test_traffic_rates_follow_the_appends() -> None:
    clock = ManualClock()
    c = new_container(clock=clock)
    seg = "s/t/0.#epoch.0"
    writer = uuid.uuid4().bytes

    async def scenario() -> None:
        await c.create_segment(seg)
        last = NO_EVENT_NUMBER
        for second in range(60):  # 100 events/s of 100 bytes for a minute
            clock.set(float(second))
            data = frame_events([bytes(92)] * 100)
            await c.append(seg, writer, last, last + 100 if last >= 0 else 99, 100, data)
            last = last + 100 if last >= 0 else 99
        (traffic,) = await c.get_traffic()
        assert 80 < traffic.events_per_s < 120
        assert 8000 < traffic.bytes_per_s < 12000
        clock.set(200.0)
        (idle,) = await c.get_traffic()
        assert idle.events_per_s < 1
        await c.close()

    asyncio.run(scenario())


def test_a_segment_deleted_and_created_again_keeps_its_data_and_attributes_across_restarts() -> (
    None
):
    """Its Tier-2 chunks and attribute index once shared their names with the old incarnation,
    whose deletion (live, or replayed after a restart) then deleted the new one's (unit tests
    found it): every incarnation now has Tier-2 names of its own."""
    seg = "s/t/0.#epoch.0"
    writer, key = uuid.uuid4().bytes, b"\x05" * 16
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()

    async def scenario() -> None:
        c = container(store, storage)
        await c.create_segment(seg)
        await c.append(seg, writer, NO_EVENT_NUMBER, 0, 1, frame_events([b"old"]))
        await c.update_attributes(seg, (AttributeUpdate(key, AttributeUpdateType.REPLACE, 1),))
        await c.checkpoint()  # the old incarnation's chunk and index are in Tier-2
        await c.delete_segment(seg)
        await c.create_segment(seg)  # e.g. a stream deleted and created again
        await c.append(seg, writer, NO_EVENT_NUMBER, 0, 1, frame_events([b"new"]))
        await c.update_attributes(seg, (AttributeUpdate(key, AttributeUpdateType.REPLACE, 2),))
        await c.checkpoint()  # flushes the new incarnation, deletes the old one's objects
        await c.close()
        for _ in range(2):  # replay of the old delete, then recovery from the checkpoint
            c = container(store, storage)
            await c.checkpoint()
            assert [e for _, e in parse_events(await read_segment(c, seg))[0]] == [b"new"]
            assert await c.get_attributes(seg, [key, writer]) == {key: 2, writer: 0}
            await c.close()
        assert not [
            n
            for n in storage.list("")
            if "#incarnation." not in n and n.startswith(("segments/", "attributes-btree/"))
        ]  # nothing of the old incarnation is left

    asyncio.run(scenario())
