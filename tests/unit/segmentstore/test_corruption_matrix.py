"""Damage stored data between a stop and a start; it must be detected, named, and contained.

One matrix, run on the filesystem backends and on S3 (SeaweedFS): a data, attribute or table
chunk flipped, cut short or deleted; a log record damaged in the middle; a torn log tail; the
epoch file overwritten. Every damage is a DataCorruptionError that names what is damaged, and
everything not damaged stays readable (other segments, other chunks of the same segment).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pravega_ray.client.event_framing import frame_events, parse_events
from pravega_ray.constants import NO_EVENT_NUMBER
from pravega_ray.contracts.attributes import AttributeUpdate, AttributeUpdateType
from pravega_ray.contracts.segment_store import TableUpdate
from pravega_ray.errors import DataCorruptionError
from pravega_ray.logs.filesystem import FileSystemDurableLog
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.segmentstore.table_segment import TableSegments
from pravega_ray.storage.filesystem import FileSystemChunkStorage
from tests.containers import LAZY_TIER2, new_container

pytestmark = pytest.mark.timeout(120)

DAMAGED = "sc/st/0.#epoch.0"
INTACT = "sc/st/1.#epoch.0"
TABLE = "sc/_kvt.t/0.#epoch.0"
WRITER = uuid.uuid4().bytes
KEYS = [bytes([1, i]) + bytes(14) for i in range(1, 9)]


class Tier:
    """The two tiers of one backend, and raw access to damage what they store."""

    def __init__(self, make_log: Callable[[], Any], storage: Any) -> None:
        self.make_log = make_log
        self.storage = storage

    def names(self, prefix: str) -> list[str]:
        return self.storage.list(prefix)

    def flip(self, name: str, at: int) -> None:
        data = bytearray(self.storage.read(name, 0, self.storage.length(name)))
        data[at % len(data)] ^= 0x40
        self.overwrite(name, bytes(data))

    def cut(self, name: str) -> None:
        data = self.storage.read(name, 0, self.storage.length(name))
        self.overwrite(name, data[: len(data) // 2])

    def delete(self, name: str) -> None:
        self.storage.delete(name)

    def overwrite(self, name: str, data: bytes) -> None:
        raise NotImplementedError


class FileTier(Tier):
    def __init__(self, root: Path) -> None:
        self.root = root
        super().__init__(
            lambda: FileSystemDurableLog(root / "tier1"), FileSystemChunkStorage(root / "tier2")
        )

    def overwrite(self, name: str, data: bytes) -> None:
        (self.root / "tier2" / name).write_bytes(data)


class S3Tier(Tier):
    def __init__(self, client: Any, bucket: str) -> None:
        from pravega_ray.logs.s3 import S3DurableLog
        from pravega_ray.storage.s3 import S3ChunkStorage

        self.client, self.bucket = client, bucket
        super().__init__(
            lambda: S3DurableLog(bucket, "log/0", client=client),
            S3ChunkStorage(bucket, "tier2", client=client),
        )

    def overwrite(self, name: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=f"tier2/{name}", Body=data)


@pytest.fixture(params=["filesystem", pytest.param("s3", marks=pytest.mark.s3)])
def tier(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Tier]:
    if request.param == "filesystem":
        yield FileTier(tmp_path)
    else:
        client, bucket = request.getfixturevalue("s3_bucket")
        yield S3Tier(client, bucket)


def _container(tier: Tier) -> SegmentContainer:
    return new_container(tier.make_log(), tier.storage, config=LAZY_TIER2)


@dataclass
class Written:
    events: dict[str, list[bytes]]
    chunks: dict[str, list[str]]
    table: dict[bytes, bytes]
    storage_names: dict[str, str]  # each segment's name in Tier-2 (its incarnation's)


async def _write_everything(tier: Tier) -> Written:
    """Two normal segments of two Tier-2 chunks each, attributes, and a table; all in Tier-2."""
    c = _container(tier)
    tables = TableSegments(c)
    events: dict[str, list[bytes]] = {DAMAGED: [], INTACT: []}
    for segment in events:
        await c.create_segment(segment)
        updates = [AttributeUpdate(k, AttributeUpdateType.REPLACE, i) for i, k in enumerate(KEYS)]
        await c.update_attributes(segment, tuple(updates))
    await tables.create(TABLE)
    table = {f"key-{i}".encode(): f"value-{i}".encode() * 10 for i in range(40)}
    for round_ in range(2):
        expected, last = (NO_EVENT_NUMBER, 49) if round_ == 0 else (49, 99)
        for segment, written in events.items():
            batch = [f"{segment}-{round_}-{i}".encode() * 8 for i in range(50)]
            await c.append(segment, WRITER, expected, last, 50, frame_events(batch))
            written += batch
        half = dict(list(table.items())[round_ * 20 : round_ * 20 + 20])
        await tables.update(TABLE, [TableUpdate(k, v) for k, v in half.items()])
        await c.flush_to_storage()  # one chunk per segment per round
    await c.checkpoint()  # attributes into the index, log truncated
    storage_names = {s: c.metadata.get(s).storage_name for s in (DAMAGED, INTACT, TABLE)}
    chunks = {s: tier.names(f"segments/{storage_names[s]}/") for s in storage_names}
    assert all(len(names) == 2 for names in chunks.values()), chunks
    await c.close()
    return Written(events, chunks, table, storage_names)


async def _events(c: SegmentContainer, segment: str) -> list[bytes]:
    info = await c.get_info(segment)
    data = await c.read_range(segment, 0, info.length)
    return [e for _, e in parse_events(data)[0]]


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.mark.parametrize("damage", ["flip", "cut", "delete"])
@pytest.mark.parametrize("which", [0, 1])
def test_damaged_data_chunk_is_named_and_the_rest_stays_readable(
    tier: Tier, damage: str, which: int
) -> None:
    async def scenario() -> None:
        written = await _write_everything(tier)
        victim = written.chunks[DAMAGED][which]
        getattr(tier, damage)(victim) if damage != "flip" else tier.flip(victim, 100)
        c = _container(tier)
        info = await c.get_info(DAMAGED)
        with pytest.raises(DataCorruptionError) as raised:
            await c.read_range(DAMAGED, 0, info.length)
        assert victim in str(raised.value) and raised.value.chunk == victim  # type: ignore[attr-defined]
        other = written.chunks[DAMAGED][1 - which]
        other_offset = int(other.rsplit("/", 1)[1])
        readable = await c.read(DAMAGED, other_offset, 1 << 20, 0)
        assert readable.data  # the undamaged chunk of the same segment
        assert await _events(c, INTACT) == written.events[INTACT]
        assert await c.get_attributes(DAMAGED, KEYS) == {k: i for i, k in enumerate(KEYS)}
        await c.close()

    _run(scenario())


@pytest.mark.parametrize("damage", ["flip-page", "flip-footer", "cut", "delete-last", "delete-all"])
def test_damaged_attribute_index_is_named_and_other_segments_keep_theirs(
    tier: Tier, damage: str
) -> None:
    async def scenario() -> None:
        written = await _write_everything(tier)
        index_prefix = f"attributes-btree/{written.storage_names[DAMAGED]}/"
        names = tier.names(index_prefix)
        assert names
        if damage == "flip-page":
            tier.flip(names[-1], 20)
        elif damage == "flip-footer":
            tier.flip(names[-1], -10)
        elif damage == "cut":
            tier.cut(names[-1])
        elif damage == "delete-last":
            tier.delete(names[-1])
        else:
            for name in names:
                tier.delete(name)
        c = _container(tier)
        with pytest.raises(DataCorruptionError, match="attribute index of") as raised:
            await c.get_attributes(DAMAGED, KEYS)
        assert index_prefix in str(raised.value)
        assert raised.value.segment == DAMAGED  # type: ignore[attr-defined]
        assert await c.get_attributes(INTACT, KEYS) == {k: i for i, k in enumerate(KEYS)}
        assert await _events(c, DAMAGED) == written.events[DAMAGED]  # the data is fine
        # The damaged index is reported, not fatal: the container keeps serving and flushing.
        update = AttributeUpdate(KEYS[0], AttributeUpdateType.REPLACE, 99)
        await c.update_attributes(INTACT, (update,))
        await c.checkpoint()
        await c.close()
        again = _container(tier)
        assert (await again.get_attributes(INTACT, KEYS[:1])) == {KEYS[0]: 99}
        await again.close()

    _run(scenario())


@pytest.mark.parametrize("damage", ["flip", "cut", "delete"])
def test_damaged_table_chunk_is_named_and_other_entries_stay_readable(
    tier: Tier, damage: str
) -> None:
    async def scenario() -> None:
        written = await _write_everything(tier)
        victim = written.chunks[TABLE][1]  # the second half of the entries
        getattr(tier, damage)(victim) if damage != "flip" else tier.flip(victim, 300)
        c = _container(tier)
        tables = TableSegments(c)
        keys = list(written.table)
        with pytest.raises(DataCorruptionError) as raised:
            await tables.get(TABLE, keys[20:])
        assert victim in str(raised.value)
        first_half = await tables.get(TABLE, keys[:20])
        values = [e.value for e in first_half if e is not None]
        assert values == [written.table[k] for k in keys[:20]]
        await c.close()

    _run(scenario())


@pytest.mark.parametrize("damage", ["flip", "cut", "delete"])
def test_iterating_a_table_with_a_damaged_chunk_names_each_lost_entry_and_goes_on(
    tier: Tier, damage: str
) -> None:
    async def scenario() -> None:
        written = await _write_everything(tier)
        victim = written.chunks[TABLE][0]  # the first half of the entries
        getattr(tier, damage)(victim) if damage != "flip" else tier.flip(victim, 300)
        c = _container(tier)
        tables = TableSegments(c)
        seen: list[bytes] = []
        lost: list[int] = []
        cursor: bytes | None = None
        while True:
            try:
                entries, cursor = await tables.iterate(TABLE, cursor, 7)
            except DataCorruptionError as e:
                assert victim in str(e)
                lost.append(e.offset)  # type: ignore[attr-defined]
                entries, cursor = e.entries, e.cursor  # type: ignore[attr-defined]
            seen += [entry.key for entry in entries]
            if cursor is None:
                break
        keys = list(written.table)
        assert sorted(seen) == sorted(keys[20:])  # every entry of the intact chunk
        assert len(lost) == 20 and len(set(lost)) == 20  # each lost entry named once
        await c.close()

    _run(scenario())


def test_log_record_damaged_in_the_middle_stops_only_that_container(tier: Tier) -> None:
    async def write() -> list[bytes]:
        c = _container(tier)
        await c.create_segment(DAMAGED)
        events = []
        for i in range(20):
            events.append(f"event-{i}".encode())
            await c.append(
                DAMAGED, WRITER, i - 1 if i else NO_EVENT_NUMBER, i, 1, frame_events([events[-1]])
            )
        await c.close()
        return events

    _run(write())
    if isinstance(tier, FileTier):
        path = sorted((tier.root / "tier1").glob("log-*.dat"))[-1]
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
        named = str(path)
    else:
        keys = sorted(
            o["Key"]
            for o in tier.client.list_objects_v2(Bucket=tier.bucket, Prefix="log/0/")["Contents"]
        )  # type: ignore[attr-defined]
        named = keys[len(keys) // 2]
        body = bytearray(tier.client.get_object(Bucket=tier.bucket, Key=named)["Body"].read())
        body[-3] ^= 0x01
        tier.client.put_object(Bucket=tier.bucket, Key=named, Body=bytes(body))
    container = new_container(tier.make_log(), tier.storage, recover=False)
    with pytest.raises(DataCorruptionError) as raised:
        container.recover()
    assert named in str(raised.value)


def test_torn_log_tail_loses_nothing_acknowledged(tmp_path: Path) -> None:
    tier = FileTier(tmp_path)

    async def write() -> list[bytes]:
        c = _container(tier)
        await c.create_segment(DAMAGED)
        events = [f"event-{i}".encode() for i in range(10)]
        for i, event in enumerate(events):
            await c.append(
                DAMAGED, WRITER, i - 1 if i else NO_EVENT_NUMBER, i, 1, frame_events([event])
            )
        await c.close()
        return events

    events = _run(write())
    path = sorted((tmp_path / "tier1").glob("log-*.dat"))[-1]
    with open(path, "ab") as f:  # a crash while writing a record that was never acknowledged
        f.write(b"PRL1" + bytes(12) + b"\x00\x00\x10\x00" + b"partial")

    async def read() -> None:
        c = _container(tier)
        assert await _events(c, DAMAGED) == events
        await c.close()

    _run(read())


def _write_events(tier: Tier, count: int) -> list[bytes]:
    async def write() -> list[bytes]:
        c = _container(tier)
        await c.create_segment(DAMAGED)
        events = [f"event-{i}".encode() for i in range(count)]
        for i, event in enumerate(events):
            await c.append(
                DAMAGED, WRITER, i - 1 if i else NO_EVENT_NUMBER, i, 1, frame_events([event])
            )
        await c.close()
        return events

    return _run(write())


def _recover_fails(tier: Tier, match: str) -> DataCorruptionError:
    """Recovery raises the damage, and raises it again on the next attempt."""
    for _ in range(2):
        container = new_container(tier.make_log(), tier.storage, recover=False)
        with pytest.raises(DataCorruptionError, match=match) as raised:
            container.recover()
    return raised.value


def test_losing_the_whole_durable_log_keeps_the_container_down(tier: Tier) -> None:
    # Probe defect 3: the container started clean, every event and record gone.
    _write_events(tier, 5)
    if isinstance(tier, FileTier):
        for path in (tier.root / "tier1").glob("log-*.dat"):
            path.unlink()
        match = "no log file"  # the epoch file is left
    else:  # every object of the log, truncation markers too: only Tier-2's fences are left
        listed = tier.client.list_objects_v2(Bucket=tier.bucket, Prefix="log/0/")  # type: ignore[attr-defined]
        for item in listed["Contents"]:
            tier.client.delete_object(Bucket=tier.bucket, Key=item["Key"])  # type: ignore[attr-defined]
        match = "no record, fence or truncation marker, but the log must exist"
    _recover_fails(tier, match)


def test_a_fresh_tier1_beside_an_old_tier2_keeps_the_container_down(tmp_path: Path) -> None:
    tier = FileTier(tmp_path)
    _write_events(tier, 5)
    moved = FileTier(tmp_path)
    moved.make_log = lambda: FileSystemDurableLog(tmp_path / "another-tier1")
    error = _recover_fails(moved, "no log, epoch or truncation file, but the log must exist")
    assert error.path == str(tmp_path / "another-tier1")  # type: ignore[attr-defined]
    assert not list((tmp_path / "another-tier1").iterdir())  # nothing created


def test_damaged_last_record_of_an_older_log_file_is_named(tmp_path: Path) -> None:
    # Probe defect 2: cut as a torn tail, the acknowledged event silently gone.
    tier = FileTier(tmp_path)
    _write_events(tier, 5)
    _run(_container(tier).close())  # a restart: a newer, empty log file now exists
    older = sorted((tmp_path / "tier1").glob("log-*.dat"))[0]
    data = bytearray(older.read_bytes())
    data[-3] ^= 0x01
    older.write_bytes(bytes(data))
    error = _recover_fails(tier, "is damaged")
    assert error.path == str(older)  # type: ignore[attr-defined]


@pytest.mark.parametrize("content", [b"garbage", b"", b"-1", b"\x00\x01"])
def test_damaged_epoch_file_is_named(tmp_path: Path, content: bytes) -> None:
    tier = FileTier(tmp_path)

    async def write() -> None:
        c = _container(tier)
        await c.create_segment(DAMAGED)
        await c.close()

    _run(write())
    (tmp_path / "tier1" / "epoch").write_bytes(content)
    container = new_container(tier.make_log(), tier.storage, recover=False)
    with pytest.raises(DataCorruptionError, match="epoch"):
        container.recover()


def test_container_with_a_damaged_log_keeps_raising_the_damage(tmp_path: Path) -> None:
    tier = FileTier(tmp_path)

    async def write() -> None:
        c = _container(tier)
        await c.create_segment(DAMAGED)
        for i in range(10):
            await c.append(
                DAMAGED, WRITER, i - 1 if i else NO_EVENT_NUMBER, i, 1, frame_events([b"e"])
            )
        await c.close()

    _run(write())
    path = sorted((tmp_path / "tier1").glob("log-*.dat"))[-1]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    container = new_container(tier.make_log(), tier.storage, recover=False)
    with pytest.raises(DataCorruptionError):
        container.recover()

    async def calls() -> None:
        for call in (
            container.get_info(DAMAGED),
            container.read(DAMAGED, 0, 10, 0),
            container.setup_append(DAMAGED, WRITER),
            TableSegments(container).get(TABLE, [b"k"]),
        ):
            with pytest.raises(DataCorruptionError, match=f"cannot start.*{path}"):
                await call

    _run(calls())


@pytest.mark.parametrize("damage", ["flip", "cut", "delete-newest"])
def test_damaged_controller_record_is_named_and_the_rest_of_the_controller_works(
    tier: Tier, damage: str
) -> None:
    import pravega_ray as pr
    from pravega_ray.controller.controller import Controller
    from pravega_ray.controller.stream_metadata_store import ChunkMetadataStore
    from tests.unit.controller.test_controller import FakeSegmentStore

    segments = FakeSegmentStore()
    first = Controller(ChunkMetadataStore(tier.storage), segments, 4)
    first.create_scope("sc")
    first.create_stream("sc", "bad", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    first.create_stream("sc", "good", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    first.seal_stream("sc", "bad")  # two versions written; the older one is removed
    victim = tier.names("_system/controller/streams/sc/bad/")[-1]
    if damage == "flip":
        tier.flip(victim, -5)
    elif damage == "cut":
        tier.cut(victim)
    else:  # the newest version lost: nothing older is left to fall back to silently
        tier.delete(victim)
    restarted = Controller(ChunkMetadataStore(tier.storage), segments, 4)
    assert restarted.get_stream_info("sc", "good").state is pr.StreamState.ACTIVE
    assert restarted.create_stream("sc", "new", None)
    if damage == "delete-newest":
        with pytest.raises(pr.StreamNotFoundError):  # a deleted record reads as absent
            restarted.get_stream_info("sc", "bad")
        return
    with pytest.raises(DataCorruptionError, match="streams/sc/bad") as raised:
        restarted.get_stream_info("sc", "bad")
    assert victim in str(raised.value)


def test_a_format_3_checkpoint_without_checksums_still_recovers() -> None:
    """Chunk entries of three fields and no attribute root: read, checked by length only."""
    from pravega_ray.logs.memory import InMemoryLogStore
    from pravega_ray.segmentstore import operations as ops
    from pravega_ray.storage.memory import InMemoryChunkStorage

    data = frame_events([b"old-1", b"old-2"])
    storage = InMemoryChunkStorage()
    chunk = f"segments/{DAMAGED}/{0:020d}"
    storage.create(chunk, data)
    entry = {
        "n": DAMAGED,
        "t": 1,
        "so": 0,
        "r": "normal",
        "l": len(data),
        "s": False,
        "e": 2,
        "a": {},
        "sl": len(data),
        "c": [[0, len(data), chunk]],
    }
    store = InMemoryLogStore()
    store.records[7] = ops.encode([ops.MetadataCheckpoint((entry,))])
    store.next_sequence = 8
    container = new_container(store, storage)

    async def read() -> None:
        assert await _events(container, DAMAGED) == [b"old-1", b"old-2"]
        await container.close()

    _run(read())
    storage.delete(chunk)
    storage.create(chunk, data[:-1])  # still checked by length
    again = new_container(store, storage)

    async def read_damaged() -> None:
        with pytest.raises(DataCorruptionError, match="holds"):
            await _events(again, DAMAGED)
        await again.close()

    _run(read_damaged())
