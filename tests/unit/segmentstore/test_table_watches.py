"""Leases on system table segments (``segmentstore/table_watches.py``): an update of a watched
segment is acknowledged only once every live watcher read past it, a watcher that stops
calling costs writers at most its lease, a recovered container holds updates for a grace
period, users' tables never wait, and bad arguments change nothing."""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from pravega_ray.constants import READ_BYTES_MAX
from pravega_ray.contracts.segment_store import TableUpdate
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.logs.memory import InMemoryLogStore
from pravega_ray.naming import system_table_segment_name
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.segmentstore.table_watches import HOLDER_BYTES, watchable
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.timing import ManualClock
from tests.containers import new_container

pytestmark = pytest.mark.timeout(60)

LEASE_S = 4.0
"""Long enough that a starved machine never lets a lease run out where a test relies on it;
bounds checked from above allow 3/4 of it."""
SYSTEM = system_table_segment_name("probe", 0)
USER = "sc/_kvt.t/0.#epoch.0"


def _cluster() -> tuple[InProcessCluster, SegmentContainer]:
    """One container with a short lease (new: no grace period), with a system table nobody
    else watches (not the controller's) and a user's table created."""
    cluster = InProcessCluster(container_count=1, table_watch_lease_s=LEASE_S)
    container = cluster.container(0)
    for segment in (SYSTEM, USER):
        cluster.run(container.table_create(segment)).result(10)
    return cluster, container


def _run(body: Callable[[SegmentContainer], Coroutine[Any, Any, None]]) -> None:
    """Run ``body(container)`` on a new :func:`_cluster`'s loop, then shut the cluster down."""
    cluster, container = _cluster()
    try:
        cluster.run(body(container)).result(30)
    finally:
        cluster.shutdown()


def _put(container: SegmentContainer, segment: str, key: bytes) -> asyncio.Task[object]:
    return asyncio.ensure_future(container.table_update(segment, [TableUpdate(key, b"v")]))


def test_only_system_tables_are_watchable() -> None:
    assert watchable(SYSTEM)
    assert not watchable(USER) and not watchable("_system/other/0.#epoch.0")


def test_an_update_waits_until_the_watcher_read_past_it() -> None:
    holder = os.urandom(HOLDER_BYTES)

    async def go(container: SegmentContainer) -> None:
        _, start, _, lease_s = await container.table_watch(SYSTEM, holder, None, 0, READ_BYTES_MAX)
        assert lease_s == LEASE_S
        update = _put(container, SYSTEM, b"k1")
        await asyncio.sleep(LEASE_S / 4)
        assert not update.done()  # the watcher has not read it
        entries, end, _, _ = await container.table_watch(SYSTEM, holder, start, 0, READ_BYTES_MAX)
        assert [e.key for e in entries] == [b"k1"] and end > start
        await asyncio.sleep(LEASE_S / 4)
        assert not update.done()  # read, not yet acknowledged: the next call is the ack
        await container.table_watch(SYSTEM, holder, end, 0, READ_BYTES_MAX)
        await asyncio.wait_for(update, LEASE_S * 3 / 4)

    _run(go)


def test_a_watch_call_waits_for_the_next_update_and_answers_it() -> None:
    holder = os.urandom(HOLDER_BYTES)

    async def go(container: SegmentContainer) -> None:
        _, start, _, _ = await container.table_watch(SYSTEM, holder, None, 0, READ_BYTES_MAX)
        began = time.monotonic()
        entries, end, _, _ = await container.table_watch(SYSTEM, holder, start, 0.5, READ_BYTES_MAX)
        assert entries == [] and end == start  # nothing changed: none, after wait_s
        assert time.monotonic() - began >= 0.45
        watch = asyncio.ensure_future(
            container.table_watch(SYSTEM, holder, start, LEASE_S * 3 / 4, READ_BYTES_MAX)
        )
        await asyncio.sleep(0.01)
        update = _put(container, SYSTEM, b"k2")
        entries, end, _, _ = await asyncio.wait_for(watch, LEASE_S / 4)  # woken by it
        assert [e.key for e in entries] == [b"k2"]
        await container.table_watch(SYSTEM, holder, end, 0, READ_BYTES_MAX)
        await asyncio.wait_for(update, LEASE_S * 3 / 4)

    _run(go)


def test_watchers_renewing_never_wake_each_other() -> None:
    """Only updates answer a waiting watch call: two watchers woken by each other's renewals
    called the container in a loop (found on Ray: two cores busy on an idle cluster)."""
    first, second = os.urandom(HOLDER_BYTES), os.urandom(HOLDER_BYTES)

    async def go(container: SegmentContainer) -> None:
        _, start, _, _ = await container.table_watch(SYSTEM, first, None, 0, READ_BYTES_MAX)
        waiting = asyncio.ensure_future(
            container.table_watch(SYSTEM, first, start, LEASE_S / 2, READ_BYTES_MAX)
        )
        await asyncio.sleep(0.05)
        for _ in range(5):
            await container.table_watch(SYSTEM, second, None, 0, READ_BYTES_MAX)
            await container.table_watch(SYSTEM, second, start, 0, READ_BYTES_MAX)
        await asyncio.sleep(0.05)
        assert not waiting.done()
        _put(container, SYSTEM, b"k")
        entries, _, _, _ = await asyncio.wait_for(waiting, LEASE_S / 4)  # an update does
        assert [e.key for e in entries] == [b"k"]

    _run(go)


def test_a_watcher_that_stops_calling_holds_updates_for_its_lease_at_most() -> None:

    async def go(container: SegmentContainer) -> None:
        await container.table_watch(SYSTEM, os.urandom(HOLDER_BYTES), None, 0, READ_BYTES_MAX)
        began = time.monotonic()
        await asyncio.wait_for(_put(container, SYSTEM, b"k3"), LEASE_S * 3)
        assert time.monotonic() - began >= LEASE_S * 0.8  # the lease ran out first
        began = time.monotonic()
        await _put(container, SYSTEM, b"k4")  # the expired lease is never waited for again
        assert time.monotonic() - began < LEASE_S * 3 / 4

    _run(go)


def test_an_unwatch_releases_waiting_updates_and_users_tables_never_wait() -> None:
    holder = os.urandom(HOLDER_BYTES)

    async def go(container: SegmentContainer) -> None:
        await container.table_watch(SYSTEM, holder, None, 0, READ_BYTES_MAX)
        update = _put(container, SYSTEM, b"k5")
        await asyncio.sleep(LEASE_S / 4)
        assert not update.done()
        await container.table_unwatch(SYSTEM, holder)
        await asyncio.wait_for(update, LEASE_S * 3 / 4)
        with pytest.raises(InvalidArgumentError):  # a user's table cannot be watched
            await container.table_watch(USER, holder, None, 0, READ_BYTES_MAX)
        await asyncio.wait_for(_put(container, USER, b"k6"), LEASE_S * 3 / 4)

    _run(go)


def test_a_recovered_container_holds_system_table_updates_for_its_grace_period() -> None:
    cluster, container = _cluster()
    try:
        began = time.monotonic()
        cluster.run(container.table_update(SYSTEM, [TableUpdate(b"s0", b"v")])).result(10)
        assert time.monotonic() - began < LEASE_S * 3 / 4  # a first owner: nothing to wait out
        cluster.restart_container(0)
        container = cluster.container(0)
        began = time.monotonic()
        cluster.run(container.table_update(USER, [TableUpdate(b"u", b"v")])).result(10)
        assert time.monotonic() - began < LEASE_S * 3 / 4  # users' tables: no grace period
        cluster.run(container.table_update(SYSTEM, [TableUpdate(b"s", b"v")])).result(10)
        # A lease the predecessor granted may still be trusted until then.
        assert time.monotonic() - began >= LEASE_S * 0.8
    finally:
        cluster.shutdown()


def test_the_grace_period_is_timed_on_the_containers_clock() -> None:
    """The watches read time.monotonic whatever clock their container ran on, so a recovered
    container on a manual clock (the simulation's virtual one) timed its grace period in real
    time, and a seed did not replay (the simulation found it). Here the manual clock stands
    still: an update of a system table waits out the grace period however long it takes in
    real time, and the moment the clock passes its end it goes through."""
    clock = ManualClock()
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()
    config = {"table_watch_lease_s": 0.05}

    async def go() -> None:
        first = new_container(store, storage, config=config, clock=clock)
        await first.table_create(SYSTEM)
        await first.close()
        again = new_container(store, storage, config=config, clock=clock)  # it had an owner
        update = _put(again, SYSTEM, b"k")
        await asyncio.sleep(0.3)  # six leases of real time: the clock has not moved
        assert not update.done()
        clock.advance(0.06)
        await asyncio.wait_for(update, 10)
        await again.close()

    asyncio.run(go())


@pytest.mark.parametrize(
    "holder, from_offset, wait_s",
    [
        (b"short", None, 0),
        ("0" * HOLDER_BYTES, None, 0),
        (b"h" * HOLDER_BYTES, None, -1),
        (b"h" * HOLDER_BYTES, None, math.nan),
        (b"h" * HOLDER_BYTES, None, 11),
        (b"h" * HOLDER_BYTES, None, True),
        (b"h" * HOLDER_BYTES, None, "1"),
        (b"h" * HOLDER_BYTES, -1, 0),
        (b"h" * HOLDER_BYTES, 10**9, 0),
        (b"h" * HOLDER_BYTES, 1.5, 0),
        (b"h" * HOLDER_BYTES, True, 0),
    ],
    ids=[
        "short-holder",
        "str-holder",
        "negative-wait",
        "nan-wait",
        "over-max-wait",
        "bool-wait",
        "str-wait",
        "negative-offset",
        "offset-past-the-end",
        "float-offset",
        "bool-offset",
    ],
)
def test_bad_watch_arguments_are_invalid_and_grant_no_lease(
    holder: object, from_offset: object, wait_s: object
) -> None:
    async def go(container: SegmentContainer) -> None:
        with pytest.raises(InvalidArgumentError):
            await container.table_watch(SYSTEM, holder, from_offset, wait_s, READ_BYTES_MAX)  # type: ignore[arg-type]
        # No lease was granted: an update has nobody to wait for.
        await asyncio.wait_for(_put(container, SYSTEM, b"k7"), LEASE_S * 3 / 4)
        assert container._watches.holders(SYSTEM) == 0

    _run(go)


def test_an_update_never_waits_for_its_writers_own_lease_but_for_the_others() -> None:
    writer, other = os.urandom(HOLDER_BYTES), os.urandom(HOLDER_BYTES)

    async def go(container: SegmentContainer) -> None:
        _, start, _, _ = await container.table_watch(SYSTEM, writer, None, 0, READ_BYTES_MAX)
        own = container.table_update(SYSTEM, [TableUpdate(b"k", b"v")], watcher=writer)
        await asyncio.wait_for(own, LEASE_S * 3 / 4)  # the writer's own lease: not waited for
        await container.table_watch(SYSTEM, other, None, 0, READ_BYTES_MAX)
        update = asyncio.ensure_future(
            container.table_update(SYSTEM, [TableUpdate(b"k", b"w")], watcher=writer)
        )
        await asyncio.sleep(LEASE_S / 4)
        assert not update.done()  # the other watcher has not acknowledged it
        for bad in (b"short", "a str", 7):
            with pytest.raises(InvalidArgumentError):
                await container.table_update(SYSTEM, [TableUpdate(b"bad", b"v")], watcher=bad)  # type: ignore[arg-type]
        assert await container.table_get(SYSTEM, [b"bad"]) == [None]  # nothing changed
        _, end, _, _ = await container.table_watch(SYSTEM, other, start, 0, READ_BYTES_MAX)
        await container.table_watch(SYSTEM, other, end, 0, READ_BYTES_MAX)
        await asyncio.wait_for(update, LEASE_S * 3 / 4)

    _run(go)
