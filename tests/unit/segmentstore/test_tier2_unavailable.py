"""Tier-2 failing for now (S3 throttling, 5xx): reads that need it raise a typed, retriable
error, the container stays up, and everything reads back once Tier-2 answers again.

Found by the chaos run: an S3 ``SlowDown`` that outlasted botocore's retries, on the attribute
index read under a reader group's ``table_get``, reached the reader as a bare botocore
``ClientError``. A real SeaweedFS server behind the chaos harness's fault-injecting proxy; the
Tier-1 log talks to the server directly, so only Tier-2 fails.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from chaos.s3_proxy import FaultKind, FaultyS3Proxy, ProxyFaults
from pravega_ray.client.event_framing import frame_events, parse_events
from pravega_ray.constants import NO_EVENT_NUMBER
from pravega_ray.contracts.attributes import AttributeUpdate, AttributeUpdateType
from pravega_ray.contracts.segment_store import TableUpdate
from pravega_ray.errors import SegmentStoreUnavailableError, StorageUnavailableError
from pravega_ray.logs.s3 import S3DurableLog
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.segmentstore.table_segment import TableSegments
from pravega_ray.storage.s3 import S3ChunkStorage
from tests.containers import LAZY_TIER2, new_container

pytestmark = [pytest.mark.s3, pytest.mark.timeout(120)]

SEGMENT = "sc/st/0.#epoch.0"
TABLE = "sc/_kvt.t/0.#epoch.0"
WRITER = uuid.uuid4().bytes
KEYS = [bytes([1, i]) + bytes(14) for i in range(1, 9)]
ENTRIES = {f"key-{i}".encode(): f"value-{i}".encode() * 10 for i in range(20)}
EVENTS = [f"event-{i}".encode() * 8 for i in range(50)]


@dataclasses.dataclass
class Tiers:
    proxy: FaultyS3Proxy
    direct: Any
    through_proxy: Any
    bucket: str

    def container(self) -> SegmentContainer:
        log = S3DurableLog(self.bucket, "log/0", client=self.direct)
        storage = S3ChunkStorage(self.bucket, "tier2", client=self.through_proxy)
        return new_container(log, storage, config=LAZY_TIER2)


@pytest.fixture
def tiers(s3_bucket, s3_server) -> Iterator[Tiers]:
    client, bucket = s3_bucket
    with FaultyS3Proxy(s3_server.endpoint_url, seed=7, faults=ProxyFaults(rate=0.0)) as proxy:
        through = dataclasses.replace(s3_server, endpoint_url=proxy.endpoint).client(
            retries={"mode": "standard", "max_attempts": 1}
        )
        try:
            yield Tiers(proxy, client, through, bucket)
        finally:
            through.close()


async def _events(c: SegmentContainer) -> list[bytes]:
    info = await c.get_info(SEGMENT)
    return [e for _, e in parse_events(await c.read_range(SEGMENT, 0, info.length))[0]]


def test_reads_that_need_a_throttled_tier2_raise_a_typed_error_and_succeed_after(
    tiers: Tiers,
) -> None:
    async def scenario() -> None:
        c = tiers.container()
        tables = TableSegments(c)
        await c.create_segment(SEGMENT)
        updates = [AttributeUpdate(k, AttributeUpdateType.REPLACE, i) for i, k in enumerate(KEYS)]
        await c.update_attributes(SEGMENT, tuple(updates))
        await c.append(SEGMENT, WRITER, NO_EVENT_NUMBER, 49, 50, frame_events(EVENTS))
        await tables.create(TABLE)
        await tables.update(TABLE, [TableUpdate(k, v) for k, v in ENTRIES.items()])
        await c.flush_to_storage()
        await c.checkpoint()  # attributes and table keys into the index, all in Tier-2
        await c.close()

        c = tiers.container()  # recovered, nothing cached: every read below needs Tier-2
        tables = TableSegments(c)
        tiers.proxy.set_faults(ProxyFaults(rate=1.0, kinds=(FaultKind.ERROR_503,), only="tier2"))
        reads = {
            "table_get": lambda: tables.get(TABLE, list(ENTRIES)),
            "get_attributes": lambda: c.get_attributes(SEGMENT, KEYS),
            "read_range": lambda: _events(c),
        }
        for what, read in reads.items():
            with pytest.raises(StorageUnavailableError, match="SlowDown") as raised:
                await read()
            assert isinstance(raised.value, SegmentStoreUnavailableError), what
        # An append whose writer's event number is only in the Tier-2 index cannot be checked
        # now: the same typed error, nothing appended (writers resend after it).
        more = [b"after the outage"]
        with pytest.raises(StorageUnavailableError):
            await c.append(SEGMENT, WRITER, 49, 50, 1, frame_events(more))
        # The container is up: what needs only Tier-1 goes on.
        await c.create_segment("sc/st/1.#epoch.0")
        await c.append("sc/st/1.#epoch.0", WRITER, NO_EVENT_NUMBER, 0, 1, frame_events(more))

        tiers.proxy.set_faults(ProxyFaults(rate=0.0))
        await c.append(SEGMENT, WRITER, 49, 50, 1, frame_events(more))
        entries = await tables.get(TABLE, list(ENTRIES))
        assert [e.value if e else None for e in entries] == list(ENTRIES.values())
        assert await c.get_attributes(SEGMENT, KEYS) == {k: i for i, k in enumerate(KEYS)}
        assert await _events(c) == EVENTS + more
        assert tiers.proxy.counts()["error_503"] >= len(reads)
        await c.close()

    asyncio.run(scenario())
