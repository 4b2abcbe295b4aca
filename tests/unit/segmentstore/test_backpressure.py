"""Backpressure (``segmentstore/throttle.py``): with Tier-2 down, appends wait once Tier-1
holds the configured bound, nothing fails and nothing is lost, and everything goes on once
Tier-2 is back: on a container, and under a writer of the public API."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.constants import NO_EVENT_NUMBER
from pravega_ray.contracts.segment_store import TableUpdate
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.logs.memory import InMemoryLogStore
from pravega_ray.storage.memory import InMemoryChunkStorage
from tests.containers import new_container

pytestmark = pytest.mark.timeout(60)

SEG = "sc/st/0.#epoch.0"
TABLE = "sc/_kvt.t/0.#epoch.0"
BOUND = 20_000
FAST = dict(
    storage_flush_bytes=1000,
    storage_flush_interval_s=0.01,
    storage_writer_tick_s=0.005,
    checkpoint_interval_s=0.05,
    tier1_unflushed_bytes_max=BOUND,
)


@contextlib.contextmanager
def tier2_down(storage: InMemoryChunkStorage) -> Iterator[None]:
    """Every write and delete of ``storage`` fails (an unreachable Tier-2) until the end."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("Tier-2 is unreachable (injected)")

    for name in ("create", "delete"):
        setattr(storage, name, refuse)
    try:
        yield
    finally:
        for name in ("create", "delete"):
            vars(storage).pop(name, None)


def test_appends_wait_while_tier2_is_down_and_all_land_once_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="pravega_ray.segmentstore.throttle")

    async def go() -> None:
        storage = InMemoryChunkStorage()
        container = new_container(InMemoryLogStore(), storage, config=FAST)
        await container.create_segment(SEG)
        await container.table_create(TABLE)
        writer = bytes(range(16))
        blocks = [bytes([i]) * 1000 for i in range(60)]

        async def append(i: int) -> int:
            last = NO_EVENT_NUMBER if i == 0 else i - 1
            return (await container.append(SEG, writer, last, i, 1, blocks[i])).offset

        with tier2_down(storage):
            appends = [asyncio.ensure_future(append(i)) for i in range(len(blocks))]
            await asyncio.sleep(1.0)
            done = [a for a in appends if a.done()]
            assert all(a.exception() is None for a in done), "an append failed"
            assert BOUND / 1000 <= len(done) < len(blocks), len(done)
            table = asyncio.ensure_future(container.table_update(TABLE, [TableUpdate(b"k", b"v")]))
            await asyncio.sleep(0.3)
            assert not table.done(), "a table update went past the bound"
            assert container.throttle.waiting > 0
            assert container.metadata.get(SEG).storage_length == 0
            assert "appends throttled" in caplog.text
        offsets = await asyncio.wait_for(asyncio.gather(*appends), 20)
        assert offsets == [1000 * i for i in range(len(blocks))]
        await asyncio.wait_for(table, 20)
        assert await container.read_range(SEG, 0, 60_000) == b"".join(blocks)
        await container.flush_to_storage()
        assert container.metadata.get(SEG).storage_length == 60_000
        assert container.throttle.waiting == 0 and container.throttle.throttled > 0
        assert "no longer throttled" in caplog.text
        await container.close()

    asyncio.run(go())


def test_an_append_held_back_too_long_is_refused_whole_and_changes_nothing() -> None:
    async def go() -> None:
        storage = InMemoryChunkStorage()
        config = {**FAST, "tier1_throttle_wait_s": 0.2}
        container = new_container(InMemoryLogStore(), storage, config=config)
        await container.create_segment(SEG)
        writer = bytes(range(16))
        with tier2_down(storage):
            last = NO_EVENT_NUMBER
            while container.throttle.held + 1000 <= BOUND:
                await container.append(
                    SEG, writer, last, last + 1 if last >= 0 else 0, 1, b"x" * 1000
                )
                last = last + 1 if last >= 0 else 0
            await asyncio.sleep(0.05)  # a storage-writer round measures the lag
            length = container.metadata.get(SEG).length
            with pytest.raises(pr.ContainerThrottledError, match="nothing was appended"):
                await container.append(SEG, writer, last, last + 1, 1, b"y" * 1000)
            assert container.metadata.get(SEG).length == length
            assert container.throttle.waiting == 0
        await container.close()

    asyncio.run(go())


def test_a_writer_of_the_public_api_is_slowed_not_failed_by_a_tier2_outage() -> None:
    # Appends held back longer than 0.3 s are refused and resent by the writer: its futures
    # keep waiting through the whole outage, and the container's queue stays short.
    cluster = InProcessCluster(1, **{**FAST, "tier1_throttle_wait_s": 0.3})
    try:
        mgr = cluster.stream_manager()
        mgr.create_scope("sc")
        mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
        with cluster.create_writer("sc", "st", pr.BytesSerializer()) as writer:
            writer.write_event(b"before").result(10)
            with tier2_down(cluster.storage):
                futures = []
                for i in range(200):  # paced: many small blocks, not one over the bound
                    futures.append(writer.write_event(b"%04d" % i + b"x" * 500))
                    time.sleep(0.003)
                time.sleep(1.0)
                assert not all(f.done() for f in futures), "nothing was throttled"
                assert not any(f.done() and f.exception() for f in futures)
            for f in futures:
                f.result(30)
        assert cluster.container(0).throttle.refused > 0, "no append was refused and resent"
        cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
        reader = cluster.create_reader("r", "sc", "rg", pr.BytesSerializer())
        seen = []
        deadline = time.monotonic() + 20
        while len(seen) < 201 and time.monotonic() < deadline:
            event = reader.read_next_event(1.0)
            if event is not None:
                seen.append(event.event)
        assert seen == [b"before"] + [b"%04d" % i + b"x" * 500 for i in range(200)]
        reader.close()
    finally:
        cluster.shutdown()


@pytest.mark.parametrize(
    "bad",
    [
        {"tier1_unflushed_bytes_max": 0},
        {"tier1_throttle_wait_s": 0},
        {"tier1_throttle_wait_s": float("nan")},
        {"table_compaction_min_utilization": 1.5},
        {"table_compaction_min_utilization": float("nan")},
        {"table_compaction_min_bytes": -1},
        {"table_compaction_round_bytes": 0},
    ],
)
def test_container_config_refuses_bad_backpressure_and_compaction_settings(bad: dict) -> None:
    from pravega_ray.errors import InvalidArgumentError
    from pravega_ray.segmentstore.config import ContainerConfig

    with pytest.raises(InvalidArgumentError):
        ContainerConfig(0, **bad)
