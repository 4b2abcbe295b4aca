"""The wire gateway: a real container on memory backends, a real TCP listener on 127.0.0.1,
and a small client written with the codec (WIRE.md 3)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import struct
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from pravega_ray.contracts.segment_store import SegmentInfo, TableUpdate
from pravega_ray.errors import (
    DataCorruptionError,
    FencedError,
    InvalidArgumentError,
    StorageUnavailableError,
)
from pravega_ray.logs.memory import InMemoryLogStore
from pravega_ray.naming import container_for_segment
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.wire import (
    KEY_NO_VERSION,
    KEY_NOT_EXISTS,
    NULL_VALUE,
    REPLIES,
    AppendBlockEnd,
    AppendSetup,
    ConditionalBlockEnd,
    ConditionalCheckFailed,
    CreateTableSegment,
    CreateTransientSegment,
    DataAppended,
    DeleteTableSegment,
    ErrorMessage,
    FrameReader,
    GetSegmentAttribute,
    GetStreamSegmentInfo,
    Hello,
    KeepAlive,
    MergeSegments,
    NoSuchSegment,
    OperationUnsupported,
    ReadSegment,
    ReadTable,
    ReadTableEntriesDelta,
    ReadTableKeys,
    RemoveTableKeys,
    Reply,
    SealSegment,
    SegmentAlreadyExists,
    SegmentAttribute,
    SegmentAttributeUpdated,
    SegmentCreated,
    SegmentDeleted,
    SegmentIsSealed,
    SegmentIsTruncated,
    SegmentRead,
    SegmentSealed,
    SegmentsMerged,
    SegmentTruncated,
    SetupAppend,
    StreamSegmentInfo,
    TableEntriesDeltaRead,
    TableEntriesUpdated,
    TableKey,
    TableKeyBadVersion,
    TableKeysRead,
    TableKeysRemoved,
    TableRead,
    TableValue,
    TruncateSegment,
    UpdateSegmentAttribute,
    UpdateTableEntries,
    WireCommand,
    WrongHost,
    decode_events,
    encode_event,
)
from pravega_ray.wire.gateway import GatewayConfig, WireGateway, error_reply
from pravega_ray.wire.gateway_tables import collapse_updates
from tests.containers import QUIET, new_container
from tests.faults.storage import FaultPlan, FaultyChunkStorage

pytestmark = pytest.mark.timeout(30)

SEG = "sc/st/0.#epoch.0"
OTHER = "sc/st/1.#epoch.0"
TABLE = "sc/rg_kvtable/0.#epoch.0"


class Client:
    """One connection speaking the wire protocol, as the official client does."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.frames = FrameReader(REPLIES)
        self.next_id = 1

    @classmethod
    async def connect(cls, port: int, *, hello: bool = True) -> Client:
        client = cls(*await asyncio.open_connection("127.0.0.1", port))
        if hello:
            assert await client.call(Hello(high_version=15, low_version=5)) == Hello(
                high_version=15, low_version=5
            )
        return client

    def request_id(self) -> int:
        self.next_id += 1
        return self.next_id

    async def send(self, command: WireCommand | bytes) -> None:
        self.writer.write(command if isinstance(command, bytes) else command.encode())
        await self.writer.drain()

    async def receive(self, timeout_s: float = 5.0) -> Reply:
        return await asyncio.wait_for(self._receive(), timeout_s)

    async def _receive(self) -> Reply:
        while (command := self.frames.next_command()) is None:
            data = await self.reader.read(65536)
            if not data:
                raise ConnectionResetError("closed by the gateway")
            self.frames.feed(data)
        assert isinstance(command, Reply)
        return command

    async def call(self, command: WireCommand, timeout_s: float = 5.0) -> Reply:
        await self.send(command)
        return await self.receive(timeout_s)

    async def nothing_more(self, wait_s: float = 0.1) -> bool:
        with contextlib.suppress(asyncio.TimeoutError):
            await self.receive(wait_s)
            return False
        return True

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


@contextlib.asynccontextmanager
async def serving(
    owns: Callable[[str], bool] = lambda segment: True, **config: Any
) -> AsyncIterator[tuple[SegmentContainer, WireGateway]]:
    container = new_container(config=QUIET)
    gateway = WireGateway(container, owns=owns, config=GatewayConfig(**config))
    await gateway.start()
    try:
        yield container, gateway
    finally:
        await gateway.stop()
        await container.close()


def run(body: Callable[[], Awaitable[None]], timeout_s: float = 20.0) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(body(), timeout_s)

    asyncio.run(bounded())


def events(*payloads: bytes) -> bytes:
    return b"".join(encode_event(p) for p in payloads)


def block(writer_id: int, data: bytes, last: int, request_id: int) -> AppendBlockEnd:
    return AppendBlockEnd(
        writer_id=writer_id,
        size_of_whole_events=len(data),
        data=data,
        num_event=len(decode_events(data)),
        last_event_number=last,
        request_id=request_id,
    )


async def setup(client: Client, segment: str, writer_id: int) -> Reply:
    return await client.call(
        SetupAppend(request_id=client.request_id(), writer_id=writer_id, segment=segment)
    )


async def append_directly(container: SegmentContainer, data: bytes) -> None:
    await container.append_conditional(SEG, data)


def read(client: Client, offset: int, length: int = 1 << 20, segment: str = SEG) -> ReadSegment:
    return ReadSegment(
        segment=segment, offset=offset, suggested_length=length, request_id=client.request_id()
    )


def test_hello_is_answered_once_and_request_ids_are_echoed() -> None:
    async def body() -> None:
        async with serving() as (_, gateway):
            client = await Client.connect(gateway.port)
            assert await client.nothing_more()
            assert await client.call(KeepAlive()) == KeepAlive()
            reply = await client.call(
                GetStreamSegmentInfo(request_id=77, segment_name=SEG), timeout_s=2
            )
            assert reply == NoSuchSegment(request_id=77, segment=SEG, offset=-1)
            await client.close()

    run(body)


def test_appends_ack_whole_blocks_and_a_duplicate_is_not_written_twice() -> None:
    async def body() -> None:
        async with serving() as (container, gateway):
            await container.create_segment(SEG)
            writer_id = uuid.uuid4().int
            client = await Client.connect(gateway.port)
            setup_reply = await setup(client, SEG, writer_id)
            assert isinstance(setup_reply, AppendSetup)
            assert setup_reply.last_event_number == NULL_VALUE
            first, second = events(b"a", b"bb", b"ccc"), events(b"dddd", b"e")
            reply = await client.call(block(writer_id, first, 3, 10))
            assert reply == DataAppended(
                writer_id=writer_id,
                event_number=3,
                previous_event_number=NULL_VALUE,
                request_id=10,
                current_segment_write_offset=len(first),
            )
            reply = await client.call(block(writer_id, second, 5, 11))
            assert isinstance(reply, DataAppended) and reply.event_number == 5
            assert reply.previous_event_number == 3
            duplicate = await client.call(block(writer_id, second, 5, 12))
            assert isinstance(duplicate, DataAppended) and duplicate.event_number == 5
            assert duplicate.current_segment_write_offset == len(first + second)
            stored = await container.read(SEG, 0, 1 << 20, 0)
            assert stored.data == first + second
            assert (await container.get_info(SEG)).event_count == 5
            await client.close()
            again = await Client.connect(gateway.port)
            setup_reply = await setup(again, SEG, writer_id)
            assert isinstance(setup_reply, AppendSetup) and setup_reply.last_event_number == 5
            old = await again.call(block(writer_id, first, 3, 13))
            assert isinstance(old, DataAppended) and old.event_number == 3
            assert (await container.get_info(SEG)).length == len(first + second)
            await again.close()

    run(body)


def test_a_block_not_matching_its_size_or_not_whole_events_is_refused() -> None:
    async def body() -> None:
        async with serving() as (container, gateway):
            await container.create_segment(SEG)
            client = await Client.connect(gateway.port)
            await setup(client, SEG, 7)
            data = events(b"x")
            bad_size = AppendBlockEnd(
                writer_id=7,
                size_of_whole_events=len(data) + 1,
                data=data,
                num_event=1,
                last_event_number=1,
                request_id=20,
            )
            assert isinstance(await client.call(bad_size), ErrorMessage)
            reply = await client.call(
                AppendBlockEnd(
                    writer_id=7,
                    size_of_whole_events=5,
                    data=b"\x00\x00\x00\x01x",
                    num_event=1,
                    last_event_number=1,
                    request_id=21,
                )
            )
            assert isinstance(reply, ErrorMessage) and reply.request_id == 21
            not_set_up = await client.call(block(8, data, 1, 22))
            assert isinstance(not_set_up, ErrorMessage) and not_set_up.request_id == 22
            assert (await container.get_info(SEG)).length == 0
            await client.close()

    run(body)


def test_sealed_segment_answers_setup_then_segment_is_sealed_with_its_name() -> None:
    async def body() -> None:
        async with serving() as (container, gateway):
            await container.create_segment(SEG)
            await container.seal(SEG)
            client = await Client.connect(gateway.port)
            assert isinstance(await setup(client, SEG, 5), AppendSetup)
            reply = await client.call(block(5, events(b"late"), 1, 30))
            assert isinstance(reply, SegmentIsSealed)
            assert reply.segment == SEG and reply.request_id == 30
            missing = await setup(client, OTHER, 6)
            assert isinstance(missing, NoSuchSegment) and missing.segment == OTHER
            await client.close()

    run(body)


def test_conditional_appends_check_the_expected_offset() -> None:
    async def body() -> None:
        async with serving() as (container, gateway):
            await container.create_segment(SEG)
            client = await Client.connect(gateway.port)
            await setup(client, SEG, 9)

            def chunk(event_number: int, offset: int, data: bytes) -> ConditionalBlockEnd:
                return ConditionalBlockEnd(
                    writer_id=9,
                    event_number=event_number,
                    expected_offset=offset,
                    data=data,
                    request_id=client.request_id(),
                )

            reply = await client.call(chunk(1, 0, b"hello "))
            assert isinstance(reply, DataAppended)
            assert (reply.event_number, reply.current_segment_write_offset) == (1, 6)
            failed = await client.call(chunk(2, 0, b"again"))
            assert failed == ConditionalCheckFailed(
                writer_id=9, event_number=2, request_id=client.next_id
            )
            reply = await client.call(chunk(2, 6, b"world"))
            assert isinstance(reply, DataAppended) and reply.current_segment_write_offset == 11
            assert (await container.read(SEG, 0, 100, 0)).data == b"hello world"
            await client.close()
            again = await Client.connect(gateway.port)
            setup_reply = await setup(again, SEG, 9)
            assert isinstance(setup_reply, AppendSetup) and setup_reply.last_event_number == 2
            await again.close()

    run(body)


def test_reads_return_exactly_the_bytes_written_from_the_offset_asked() -> None:
    async def body() -> None:
        async with serving() as (container, gateway):
            await container.create_segment(SEG)
            data = events(b"one", b"two", b"three")
            await append_directly(container, data)
            client = await Client.connect(gateway.port)
            reply = await client.call(read(client, 0))
            assert isinstance(reply, SegmentRead)
            assert (reply.offset, reply.data, reply.at_tail) == (0, data, True)
            assert not reply.end_of_segment and reply.request_id == client.next_id
            part = await client.call(read(client, 5, 4))
            assert isinstance(part, SegmentRead)
            assert (part.offset, part.data, part.at_tail) == (5, data[5:9], False)
            past = await client.call(read(client, len(data) + 1))
            assert isinstance(past, ErrorMessage) and past.segment == SEG
            await container.seal(SEG)
            end = await client.call(read(client, len(data)), timeout_s=1)
            assert isinstance(end, SegmentRead) and end.end_of_segment and end.data == b""
            await client.close()

    run(body)


def test_a_read_at_the_tail_waits_and_gets_both_of_two_quick_appends() -> None:
    async def body() -> None:
        async with serving(tail_linger_s=0.2) as (container, gateway):
            await container.create_segment(SEG)
            client = await Client.connect(gateway.port)
            await client.send(read(client, 0))
            assert await client.nothing_more(0.2)  # parked at the tail, no early empty reply
            first, second = events(b"first"), events(b"second")
            await append_directly(container, first)
            await asyncio.sleep(0.02)
            await append_directly(container, second)
            reply = await client.receive()
            assert isinstance(reply, SegmentRead)
            assert (reply.offset, reply.data, reply.at_tail) == (0, first + second, True)
            await client.close()

    run(body)


def test_a_read_at_the_tail_replies_empty_only_when_its_wait_runs_out() -> None:
    async def body() -> None:
        async with serving(read_wait_s=0.3) as (container, gateway):
            await container.create_segment(SEG)
            client = await Client.connect(gateway.port)
            started = time.monotonic()
            reply = await client.call(read(client, 0))
            assert time.monotonic() - started >= 0.29
            assert isinstance(reply, SegmentRead) and reply.data == b""
            assert reply.at_tail and not reply.end_of_segment
            await client.close()

    run(body)


def test_truncation_info_and_a_read_below_the_start() -> None:
    async def body() -> None:
        async with serving() as (container, gateway):
            await container.create_segment(SEG)
            data = events(b"0123456789")
            await append_directly(container, data)
            client = await Client.connect(gateway.port)
            truncate = TruncateSegment(
                request_id=client.request_id(), segment=SEG, truncation_offset=8
            )
            assert await client.call(truncate) == SegmentTruncated(
                request_id=client.next_id, segment=SEG
            )
            reply = await client.call(read(client, 2))
            assert reply == SegmentIsTruncated(
                request_id=client.next_id, segment=SEG, start_offset=8, offset=2
            )
            info = await client.call(
                GetStreamSegmentInfo(request_id=client.request_id(), segment_name=SEG)
            )
            assert isinstance(info, StreamSegmentInfo) and info.exists and not info.is_sealed
            assert (info.start_offset, info.write_offset) == (8, len(data))
            rest = await client.call(read(client, 8))
            assert isinstance(rest, SegmentRead) and rest.data == data[8:]
            await client.close()

    run(body)


def entries(*items: tuple[bytes, int, bytes]) -> tuple[tuple[TableKey, TableValue], ...]:
    return tuple(
        (TableKey(data=key, key_version=version), TableValue(data=value))
        for key, version, value in items
    )


async def delta_read_all(
    client: Client, position: int
) -> tuple[list[tuple[bytes, int, bytes]], int]:
    """What the Rust client does: read deltas until a reply has no entries."""
    seen: list[tuple[bytes, int, bytes]] = []
    while True:
        reply = await client.call(
            ReadTableEntriesDelta(
                request_id=client.request_id(),
                segment=TABLE,
                from_position=position,
                suggested_entry_count=2,
            )
        )
        assert isinstance(reply, TableEntriesDeltaRead) and not reply.should_clear
        if not reply.entries:
            assert reply.reached_end
            return seen, position
        seen += [(k.data, k.key_version, v.data) for k, v in reply.entries]
        position = reply.last_position


def test_table_create_update_with_duplicate_keys_and_delta_reads() -> None:
    async def body() -> None:
        async with serving() as (container, gateway):
            client = await Client.connect(gateway.port)
            create = CreateTableSegment(request_id=client.request_id(), segment=TABLE)
            assert await client.call(create) == SegmentCreated(
                request_id=create.request_id, segment=TABLE
            )
            again = CreateTableSegment(request_id=client.request_id(), segment=TABLE)
            assert isinstance(await client.call(again), SegmentAlreadyExists)

            def update(*items: tuple[bytes, int, bytes]) -> UpdateTableEntries:
                return UpdateTableEntries(
                    request_id=client.request_id(),
                    segment=TABLE,
                    entries=entries(*items),
                    table_segment_offset=-1,
                )

            batch = update(
                (b"version", KEY_NOT_EXISTS, b"\x00"),
                (b"map/a", KEY_NO_VERSION, b"A"),
                (b"version", KEY_NOT_EXISTS, b"\x00"),
                (b"map/b", KEY_NOT_EXISTS, b"B"),
            )
            reply = await client.call(batch)
            assert isinstance(reply, TableEntriesUpdated)
            versions = reply.updated_versions
            assert len(versions) == 4 and versions[0] == versions[2]
            assert len(set(versions)) == 3
            bad = await client.call(update((b"map/a", versions[1] + 1, b"A2")))
            assert isinstance(bad, TableKeyBadVersion) and bad.segment == TABLE
            absent = await client.call(update((b"map/zzz", 0, b"Z")))
            assert isinstance(absent, TableKeyBadVersion)
            conflicting = await client.call(
                update((b"map/a", versions[1], b"A2"), (b"map/a", KEY_NOT_EXISTS, b"A3"))
            )
            assert isinstance(conflicting, TableKeyBadVersion)
            good = await client.call(update((b"map/a", versions[1], b"A2")))
            assert isinstance(good, TableEntriesUpdated)
            remove = RemoveTableKeys(
                request_id=client.request_id(),
                segment=TABLE,
                keys=(TableKey(data=b"map/b", key_version=KEY_NO_VERSION),),
                table_segment_offset=-1,
            )
            assert isinstance(await client.call(remove), TableKeysRemoved)
            late = await client.call(update((b"map/c", KEY_NOT_EXISTS, b"C")))
            assert isinstance(late, TableEntriesUpdated)

            seen, end = await delta_read_all(client, 0)
            assert [(k, v) for k, _, v in seen] == [
                (b"map/a", b"A"),
                (b"version", b"\x00"),
                (b"map/b", b"B"),
                (b"map/a", b"A2"),
                (b"map/c", b"C"),
            ]
            assert seen[1][1] == versions[0] and seen[3][1] == good.updated_versions[0]
            assert end == (await container.get_info(TABLE)).length
            # From just before the removal record: skipped, and the read goes on to map/c.
            tail, _ = await delta_read_all(client, good.updated_versions[0])
            assert [k for k, _, _ in tail] == [b"map/a", b"map/c"]
            # Compacted (the live puts copied to the tail, with their versions, and the head
            # truncated): a read from 0 starts at the segment's start and steps over copies.
            length = (await container.get_info(TABLE)).length
            while (await container.get_info(TABLE)).start_offset < length:
                assert (await container.table_compactor.compact(TABLE)).read
            seen, end = await delta_read_all(client, 0)
            assert sorted(seen) == [
                (b"map/a", good.updated_versions[0], b"A2"),
                (b"map/c", late.updated_versions[0], b"C"),
                (b"version", versions[0], b"\x00"),
            ]
            assert end == (await container.get_info(TABLE)).length

            delete = DeleteTableSegment(
                request_id=client.request_id(), segment=TABLE, must_be_empty=False
            )
            assert await client.call(delete) == SegmentDeleted(
                request_id=delete.request_id, segment=TABLE
            )
            gone = await client.call(
                ReadTableEntriesDelta(
                    request_id=client.request_id(),
                    segment=TABLE,
                    from_position=0,
                    suggested_entry_count=10,
                )
            )
            assert isinstance(gone, NoSuchSegment) and gone.segment == TABLE
            await client.close()

    run(body)


def test_table_lookups_iteration_seal_and_attributes() -> None:
    async def body() -> None:
        async with serving() as (container, gateway):
            await container.table_create(TABLE)
            await container.create_segment(SEG)
            await container.table_update(
                TABLE, [TableUpdate(f"k{i}".encode(), f"v{i}".encode()) for i in range(5)]
            )
            client = await Client.connect(gateway.port)
            lookup = await client.call(
                ReadTable(
                    request_id=client.request_id(),
                    segment=TABLE,
                    keys=(TableKey(data=b"k3"), TableKey(data=b"nope")),
                )
            )
            assert isinstance(lookup, TableRead)
            assert [(k.data, v.data) for k, v in lookup.entries] == [(b"k3", b"v3"), (b"nope", b"")]
            assert lookup.entries[1][0].key_version == KEY_NOT_EXISTS
            token, keys = b"", []
            while True:
                page = await client.call(
                    ReadTableKeys(
                        request_id=client.request_id(),
                        segment=TABLE,
                        suggested_key_count=2,
                        continuation_token=token,
                    )
                )
                assert isinstance(page, TableKeysRead)
                if not page.keys:
                    break
                keys += [key.data for key in page.keys]
                token = page.continuation_token
            assert sorted(keys) == [f"k{i}".encode() for i in range(5)]
            attribute = 0x1234
            update = UpdateSegmentAttribute(
                request_id=client.request_id(),
                segment_name=SEG,
                attribute_id=attribute,
                new_value=7,
                expected_value=NULL_VALUE,
            )
            assert await client.call(update) == SegmentAttributeUpdated(
                request_id=update.request_id, success=True
            )
            again = await client.call(update)
            assert isinstance(again, SegmentAttributeUpdated) and not again.success
            get = GetSegmentAttribute(
                request_id=client.request_id(), segment_name=SEG, attribute_id=attribute
            )
            assert await client.call(get) == SegmentAttribute(request_id=get.request_id, value=7)
            seal = SealSegment(request_id=client.request_id(), segment=SEG)
            assert await client.call(seal) == SegmentSealed(request_id=seal.request_id, segment=SEG)
            assert (await container.get_info(SEG)).sealed
            await client.close()

    run(body)


def test_collapse_updates_keeps_the_last_value_at_its_last_place() -> None:
    batch = [
        TableUpdate(b"k", b"1", -1),
        TableUpdate(b"a", b"x", None),
        TableUpdate(b"k", b"2", None),
    ]
    collapsed, places = collapse_updates(batch)
    assert collapsed == [TableUpdate(b"a", b"x", None), TableUpdate(b"k", b"2", -1)]
    assert places == [1, 0, 1]


def test_a_segment_not_owned_is_answered_wrong_host() -> None:
    async def body() -> None:
        async with serving(owns=lambda segment: segment != OTHER) as (container, gateway):
            await container.create_segment(OTHER)
            client = await Client.connect(gateway.port)
            reply = await setup(client, OTHER, 3)
            assert isinstance(reply, WrongHost) and reply.segment == OTHER
            reply = await client.call(read(client, 0, segment=OTHER))
            assert isinstance(reply, WrongHost) and reply.request_id == client.next_id
            await client.close()

    run(body)


async def _only_in_tier2(data: bytes, plan: FaultPlan) -> SegmentContainer:
    """A container whose segment SEG holds ``data`` in Tier-2 only (flushed, the log
    truncated, then restarted: nothing cached), its Tier-2 failing as ``plan`` says."""
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()
    first = new_container(store, storage, config=QUIET)
    await first.create_segment(SEG)
    await first.append_conditional(SEG, data)
    await first.flush_to_storage()
    await first.checkpoint()
    await first.close()
    return new_container(store, FaultyChunkStorage(storage, plan), config=QUIET)


def test_a_read_whose_tier2_fails_for_now_is_answered_wrong_host_and_retried() -> None:
    """WRONG_HOST makes the official reader look the segment up and read again; the
    ERROR_MESSAGE the gateway answered before made it drop the segment for good."""

    async def body() -> None:
        data = events(b"kept in Tier-2")
        plan = FaultPlan(fail_before={"read"}, error=StorageUnavailableError)
        container = await _only_in_tier2(data, plan)
        gateway = WireGateway(container, owns=lambda segment: True, config=GatewayConfig())
        await gateway.start()
        try:
            client = await Client.connect(gateway.port)
            reply = await client.call(read(client, 0))
            assert isinstance(reply, WrongHost) and reply.segment == SEG
            assert reply.request_id == client.next_id
            plan.fail_before.clear()
            reply = await client.call(read(client, 0))  # the same connection goes on
            assert isinstance(reply, SegmentRead) and reply.data == data
            await client.close()
        finally:
            await gateway.stop()
            await container.close()

    run(body)


def test_an_untyped_failure_closes_the_connection_and_a_new_one_is_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Pravega's rule for an unknown failure (its segment store closes the connection): the
    client reconnects and retries instead of giving the segment up."""

    async def body() -> None:
        data = events(b"kept in Tier-2")
        plan = FaultPlan(fail_before={"read"})  # an OSError: a disk failing, say
        container = await _only_in_tier2(data, plan)
        gateway = WireGateway(container, owns=lambda segment: True, config=GatewayConfig())
        await gateway.start()
        try:
            client = await Client.connect(gateway.port)
            await client.send(read(client, 0))
            with pytest.raises(ConnectionResetError):
                await client.receive()
            plan.fail_before.clear()
            again = await Client.connect(gateway.port)
            reply = await again.call(read(again, 0))
            assert isinstance(reply, SegmentRead) and reply.data == data
            await again.close()
        finally:
            await gateway.stop()
            await container.close()

    with caplog.at_level(logging.ERROR, logger="pravega_ray.wire.gateway"):
        run(body)
    assert any("failed unexpectedly; closing" in r.getMessage() for r in caplog.records)


def test_a_fenced_container_sends_the_client_to_the_new_owner_and_damage_is_an_error() -> None:
    request = ReadSegment(segment=SEG, offset=7, suggested_length=10, request_id=3)
    fenced = error_reply(request, FencedError("a newer owner took over the log"))
    assert isinstance(fenced, WrongHost) and (fenced.segment, fenced.request_id) == (SEG, 3)
    damaged = error_reply(request, DataCorruptionError("chunk x: checksum mismatch"))
    assert isinstance(damaged, ErrorMessage) and damaged.error_code == -1


def test_transient_segment_chunks_are_merged_into_the_parent() -> None:
    async def body() -> None:
        async with serving() as (container, gateway):
            await container.create_segment(SEG)
            await append_directly(container, b"head")
            client = await Client.connect(gateway.port)
            created = await client.call(
                CreateTransientSegment(request_id=client.request_id(), writer_id=4, segment=SEG)
            )
            assert isinstance(created, SegmentCreated) and "#transient." in created.segment
            transient = created.segment
            assert isinstance(await setup(client, transient, 4), AppendSetup)
            big = events(b"L" * 3000)
            for number, start in enumerate(range(0, len(big), 1024)):
                reply = await client.call(
                    ConditionalBlockEnd(
                        writer_id=4,
                        event_number=number,
                        expected_offset=start,
                        data=big[start : start + 1024],
                        request_id=client.request_id(),
                    )
                )
                assert isinstance(reply, DataAppended)
            merge = MergeSegments(request_id=client.request_id(), target=SEG, source=transient)
            assert await client.call(merge) == SegmentsMerged(
                request_id=merge.request_id,
                target=SEG,
                source=transient,
                new_target_write_offset=4 + len(big),
            )
            assert (await container.read(SEG, 0, 1 << 20, 0)).data == b"head" + big
            await client.close()

    run(body)


def test_a_client_leaving_during_a_long_poll_leaves_nothing_behind() -> None:
    async def body() -> None:
        async with serving(read_wait_s=10.0) as (container, gateway):
            await container.create_segment(SEG)
            client = await Client.connect(gateway.port)
            await client.send(read(client, 0))
            await asyncio.sleep(0.1)
            assert container.metadata.get(SEG).data_waiters
            await client.close()
            deadline = time.monotonic() + 2
            while gateway.connection_count or container.metadata.get(SEG).data_waiters:
                assert time.monotonic() < deadline, "the abandoned read is still there"
                await asyncio.sleep(0.01)
            other = await Client.connect(gateway.port)
            await append_directly(container, events(b"after"))
            reply = await other.call(read(other, 0))
            assert isinstance(reply, SegmentRead) and reply.data == events(b"after")
            await other.close()

    run(body)


def test_unsupported_malformed_and_unframeable_requests() -> None:
    async def body() -> None:
        async with serving() as (_, gateway):
            client = await Client.connect(gateway.port)
            create_segment = struct.pack(">iiq", 20, 8, 41)  # Java's CREATE_SEGMENT, cut short
            await client.send(create_segment)
            assert await client.receive() == OperationUnsupported(
                request_id=41, operation_name="CREATE_SEGMENT"
            )
            cut = struct.pack(">iiqH", 11, 10, 42, 9)  # GET_STREAM_SEGMENT_INFO, name cut
            await client.send(cut)
            reply = await client.receive()
            assert isinstance(reply, ErrorMessage) and reply.request_id == 42
            await client.send(struct.pack(">ii", 12345, 0))  # unknown, no request id: dropped
            assert await client.call(KeepAlive()) == KeepAlive()
            await client.send(struct.pack(">ii", 9, -1))  # a bad length: the connection ends
            with pytest.raises(ConnectionResetError):
                await client.receive()
            await client.close()
            again = await Client.connect(gateway.port)
            assert await again.call(KeepAlive()) == KeepAlive()
            await again.close()

    run(body)


def test_a_hello_with_versions_it_cannot_speak_is_answered_then_closed() -> None:
    async def body() -> None:
        async with serving() as (_, gateway):
            client = await Client.connect(gateway.port, hello=False)
            reply = await client.call(Hello(high_version=4, low_version=2))
            assert reply == Hello(high_version=15, low_version=5)
            with pytest.raises(ConnectionResetError):
                await client.receive()
            await client.close()

    run(body)


def test_gateway_config_bounds() -> None:
    with pytest.raises(InvalidArgumentError):
        GatewayConfig(read_wait_s=30.0)
    with pytest.raises(InvalidArgumentError):
        GatewayConfig(read_reply_bytes_max=16 * 1024 * 1024)
    with pytest.raises(InvalidArgumentError):
        GatewayConfig(pending_frames_max=0)


def fuzz_frames(rng: random.Random, count: int) -> list[bytes]:
    """Random and damaged frames: valid requests with bytes flipped or cut, random payloads
    under request type codes, and random type codes. No HELLO: one with versions this
    server cannot speak ends the connection (tested on its own)."""
    templates = [
        ReadSegment(segment=SEG, offset=0, suggested_length=100, request_id=1).encode(),
        GetStreamSegmentInfo(request_id=2, segment_name=SEG).encode(),
        ReadTableEntriesDelta(
            request_id=3, segment=TABLE, from_position=0, suggested_entry_count=5
        ).encode(),
        KeepAlive().encode(),
        SetupAppend(request_id=4, writer_id=1, segment="sc/st/9.#epoch.0").encode(),
    ]
    codes = [1, 4, 9, 11, 28, 34, 36, 38, 40, 58, 70, 71, 74, 76, 78, 83, 85, 88, 89]
    frames = []
    for _ in range(count):
        kind = rng.random()
        if kind < 0.5:
            frame = bytearray(rng.choice(templates))
            for _ in range(rng.randint(1, 4)):
                position = rng.randrange(8, len(frame)) if len(frame) > 8 else 8
                if position < len(frame):
                    frame[position] = rng.randrange(256)
            cut = rng.randint(0, 3)
            if cut and len(frame) > 8 + cut:
                frame = frame[:-cut]
            struct.pack_into(">i", frame, 4, len(frame) - 8)
        elif kind < 0.9:
            payload = rng.randbytes(rng.randint(0, 64))
            frame = bytearray(struct.pack(">ii", rng.choice(codes), len(payload)) + payload)
        else:
            payload = rng.randbytes(rng.randint(0, 16))
            code = rng.choice([c for c in range(-200, 200) if c != -127])
            frame = bytearray(struct.pack(">ii", code, len(payload)) + payload)
        frames.append(bytes(frame))
    return frames


def test_fuzzed_frames_never_hurt_the_gateway_or_the_container(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def owns(segment: str) -> bool:  # as a container actor's: InvalidNameError for a non-name
        return container_for_segment(segment, 1) == 0

    async def body() -> None:
        async with serving(owns, read_wait_s=0.05, tail_linger_s=0.0) as (container, gateway):
            await container.create_segment(SEG)
            await append_directly(container, events(b"keep", b"me"))
            await container.table_create(TABLE)
            before_segments = sorted(await container.list_segments())
            before_info: dict[str, SegmentInfo] = {
                name: await container.get_info(name) for name in before_segments
            }
            rng = random.Random(20250214)
            frames = fuzz_frames(rng, 2000)
            closed = 0
            client = await Client.connect(gateway.port)
            for batch, start in enumerate(range(0, len(frames), 100)):
                marker = 10**12 + batch
                try:
                    for frame in frames[start : start + 100]:
                        await client.send(frame)
                    await client.send(GetStreamSegmentInfo(request_id=marker, segment_name=SEG))
                    while getattr(await client.receive(), "request_id", None) != marker:
                        pass  # every reply decodes as a reply
                except ConnectionError:
                    closed += 1  # a HELLO it cannot serve, or a length it cannot follow
                    await client.close()
                    client = await Client.connect(gateway.port)
            await client.close()
            assert closed == 0
            fresh = await Client.connect(gateway.port)
            reply = await fresh.call(read(fresh, 0))
            assert isinstance(reply, SegmentRead) and reply.data == events(b"keep", b"me")
            await fresh.close()
            assert sorted(await container.list_segments()) == before_segments
            for name in before_segments:
                assert await container.get_info(name) == before_info[name]

    with caplog.at_level(logging.ERROR, logger="pravega_ray.wire.gateway"):
        run(body)
    assert not caplog.records, "a handler failed unexpectedly"
