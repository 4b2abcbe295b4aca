"""A writer's appends to one container share a call (``client/append_calls.py``) and each is
answered exactly as its own ``append`` call would be: the container's ``append_many``, the
client's grouping, a container down mid-call, and writers of many segments end to end."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.append_calls import grouping, send_appends
from pravega_ray.client.event_framing import frame_events, parse_events
from pravega_ray.constants import NO_EVENT_NUMBER
from pravega_ray.contracts.segment_store import AppendResult
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.errors import (
    ConditionalAppendFailedError,
    InvalidArgumentError,
    SegmentNotFoundError,
    SegmentStoreUnavailableError,
)
from pravega_ray.inprocess import InProcessCluster
from tests.containers import new_container

pytestmark = pytest.mark.timeout(60)

A, B = "sc/st/0.#epoch.0", "sc/st/1.#epoch.0"


def block(first: int, count: int) -> bytes:
    return frame_events(f"e{i}".encode() for i in range(first, first + count))


def test_append_many_answers_each_append_alone_in_order() -> None:
    async def go() -> None:
        c = new_container(None, None, config={})
        await c.create_segment(A)
        await c.create_segment(B)
        w = uuid.uuid4().bytes
        answers = await c.append_many(
            A,
            [
                (A, w, NO_EVENT_NUMBER, 1, 2, block(0, 2)),
                (B, w, NO_EVENT_NUMBER, 0, 1, block(0, 1)),
                (A, w, 1, 2, 1, block(2, 1)),  # chained on the first: started after it
                (A, w, NO_EVENT_NUMBER, 9, 1, block(9, 1)),  # a stale condition: fails alone
                ("sc/st/7.#epoch.0", w, NO_EVENT_NUMBER, 0, 1, block(0, 1)),  # no such segment
                (A, w, 2),  # not an append's arguments
            ],
        )
        assert [type(a) for a in answers] == [
            AppendResult,
            AppendResult,
            AppendResult,
            ConditionalAppendFailedError,
            SegmentNotFoundError,
            InvalidArgumentError,
        ]
        first, _, third = answers[:3]
        assert isinstance(first, AppendResult) and isinstance(third, AppendResult)
        assert third.offset == first.length
        events, _ = parse_events((await c.read(A, 0, 1 << 20, 0)).data)
        assert [e for _, e in events] == [b"e0", b"e1", b"e2"]
        events, _ = parse_events((await c.read(B, 0, 1 << 20, 0)).data)
        assert [e for _, e in events] == [b"e0"]
        assert await c.setup_append(A, w) == 2
        for bad in ([], None, "x", [(B, w, NO_EVENT_NUMBER, 1, 1, block(1, 1))]):
            with pytest.raises(InvalidArgumentError):
                await c.append_many(A, bad)  # type: ignore[arg-type]
        assert await c.setup_append(B, w) == 0  # nothing of a refused call was appended
        await c.close()

    asyncio.run(go())


class CountingInvoker:
    """The in-process cluster's invoker, counting calls by method name."""

    def __init__(self, cluster: InProcessCluster) -> None:
        self.cluster = cluster
        self.calls: list[str] = []
        self.owner_of = cluster.owner_of

    def invoke(
        self, method: Callable[..., Awaitable[Any]], segment: str, *args: Any
    ) -> Future[Any]:
        self.calls.append(method.__name__)
        return self.cluster.invoke(method, segment, *args)


def test_send_appends_makes_one_call_per_container_and_answers_in_order() -> None:
    cluster = InProcessCluster(container_count=2)
    try:
        invoker = CountingInvoker(cluster)
        client = SegmentStoreClient(invoker)
        segments = [f"sc/st/{i}.#epoch.0" for i in range(8)]
        for s in segments:
            client.create_segment(s).result(10)
        by_owner: dict[int, list[str]] = {}
        for s in segments:
            by_owner.setdefault(cluster.owner_of(s), []).append(s)
        assert sorted(len(v) for v in by_owner.values())[0] >= 2  # both containers get several
        w = uuid.uuid4().bytes
        invoker.calls.clear()
        appends = [(s, w, NO_EVENT_NUMBER, 0, 1, block(n, 1)) for n, s in enumerate(segments)]
        futures = send_appends(client, appends)
        assert invoker.calls == ["append_many", "append_many"]
        for n, (s, future) in enumerate(zip(segments, futures, strict=True)):
            assert future.result(10).offset == 0
            events, _ = parse_events(client.read(s, 0, 1 << 20, 0).result(10).data)
            assert [e for _, e in events] == [f"e{n}".encode()]
        # A container alone in a round gets a plain append; so does a single append.
        invoker.calls.clear()
        lone = by_owner[0][0]
        send_appends(client, [(lone, w, 0, 1, 1, block(1, 1))])[0].result(10)
        assert invoker.calls == ["append"]
        # A container down: each of its appends fails as its own call would (outcome
        # unknown); the other container's succeed.
        down = cluster._containers[1]
        cluster._containers[1] = None
        invoker.calls.clear()
        appends = [(s, w, 0, 1, 1, block(1, 1)) for s in segments if s != lone]
        futures = send_appends(client, appends)
        for (s, *_), future in zip(appends, futures, strict=True):
            if cluster.owner_of(s) == 1:
                with pytest.raises(SegmentStoreUnavailableError):
                    future.result(10)
            else:
                assert future.result(10).length > 0
        cluster._containers[1] = down
    finally:
        cluster.shutdown()


def test_a_connection_whose_append_is_its_own_sees_every_append() -> None:
    cluster = InProcessCluster(container_count=2)
    try:

        class Interposer(SegmentStoreClient):
            def append(self, *args: Any) -> Future[AppendResult]:  # type: ignore[override]
                return super().append(*args)

        assert grouping(SegmentStoreClient(cluster)) is not None
        assert grouping(Interposer(cluster)) is None
    finally:
        cluster.shutdown()


@pytest.mark.parametrize("segments", [1, 16])
def test_writers_of_many_segments_lose_and_duplicate_nothing_with_shared_calls(
    segments: int,
) -> None:
    cluster = InProcessCluster(container_count=4)
    try:
        calls: list[str] = []
        invoke = cluster.invoke

        def counting(method: Callable[..., Awaitable[Any]], segment: str, *args: Any) -> Any:
            calls.append(method.__name__)
            return invoke(method, segment, *args)

        cluster.invoke = counting  # type: ignore[method-assign]
        mgr = cluster.stream_manager()
        mgr.create_scope("sc")
        mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))
        with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
            futures = [
                writer.write_event({"k": n % 37, "n": n}, routing_key=str(n % 37))
                for n in range(3000)
            ]
            writer.flush()
        assert all(f.exception(0) is None for f in futures)
        if segments > 1:
            assert "append_many" in calls
        cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
        seen: dict[int, list[int]] = {}
        with cluster.create_reader("r", "sc", "g", pr.JsonSerializer()) as reader:
            while batch := reader.read_next_events(1000, 1.0):
                for ev in batch:
                    seen.setdefault(ev.event["k"], []).append(ev.event["n"])
        assert sorted(n for ns in seen.values() for n in ns) == list(range(3000))
        assert all(ns == sorted(ns) for ns in seen.values())  # order per routing key
    finally:
        cluster.shutdown()
