"""``TableMetadataStore.list_keys`` reads only what changed since its last call, so listing
one stream's children (the transaction timer does it for every stream every few seconds)
costs the same at 20 streams as at 200. Counted in table entries read, never timed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from pravega_ray.contracts.segment_store import TableEntry
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.controller.table_metadata_store import MIGRATION_MARKER, TableMetadataStore
from pravega_ray.controller.transaction_timer import TransactionTimer
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster() -> Iterator[InProcessCluster]:
    c = InProcessCluster(2)
    yield c
    c.shutdown()


def _store(cluster: InProcessCluster) -> TableMetadataStore:
    store = TableMetadataStore(SegmentStoreClient(cluster), pause_s=0.01)
    store.ensure_created()
    return store


def _scanned_by_one_more_listing(store: TableMetadataStore, streams: int) -> int:
    """Entries read by a listing after one new record, with ``streams`` records around."""
    for i in range(streams):
        store.put(f"streams/sc/st{i}", {"i": i}, None)
        store.put(f"completedtxn/sc/st{i}/x", {"i": i}, None)
    assert len(store.list_keys("streams/sc")) == streams
    assert store.list_keys("completedtxn/sc/new") == []  # its partition's listing is loaded
    store.put("completedtxn/sc/new/t", {}, None)
    before = store.entries_scanned
    assert store.list_keys("completedtxn/sc/new") == ["completedtxn/sc/new/t"]
    return store.entries_scanned - before


def test_list_keys_reads_the_same_few_entries_at_20_and_200_streams(
    cluster: InProcessCluster,
) -> None:
    few = _scanned_by_one_more_listing(_store(cluster), 20)
    store = TableMetadataStore(SegmentStoreClient(cluster), pause_s=0.01)
    for key in store.all_keys():  # start from empty tables
        if key != MIGRATION_MARKER:
            store.delete(key)
    many = _scanned_by_one_more_listing(_store(cluster), 200)
    assert few == many == 1  # the new record's entry only


def test_list_keys_with_nothing_new_reads_no_entry(cluster: InProcessCluster) -> None:
    store = _store(cluster)
    for i in range(50):
        store.put(f"streams/sc/st{i}", {}, None)
    store.list_keys("streams/sc")
    before = store.entries_scanned
    for i in range(50):
        assert store.list_keys(f"completedtxn/sc/st{i}") == []
        assert len(store.list_keys("streams/sc")) == 50
    assert store.entries_scanned == before


def test_list_keys_sees_what_another_store_wrote_and_removed(cluster: InProcessCluster) -> None:
    lister, writer = _store(cluster), _store(cluster)
    writer.put("streams/sc/a", {}, None)
    assert lister.list_keys("streams/sc") == ["streams/sc/a"]
    writer.put("streams/sc/b", {}, None)
    writer.delete("streams/sc/a")
    writer.put("streams/sc/b/deeper", {}, None)
    assert lister.list_keys("streams/sc") == ["streams/sc/b"]
    writer.delete("streams/sc/b")
    writer.put("streams/sc/a", {"again": True}, None)
    assert lister.list_keys("streams/sc") == ["streams/sc/a"]
    assert lister.list_keys("streams/sc/b") == ["streams/sc/b/deeper"]


def test_list_keys_survives_a_container_restart(cluster: InProcessCluster) -> None:
    store = _store(cluster)
    store.put("streams/sc/a", {}, None)
    assert store.list_keys("streams/sc") == ["streams/sc/a"]
    for container in range(cluster.container_count):
        cluster.restart_container(container)
    store.put("streams/sc/b", {}, None)
    assert store.list_keys("streams/sc") == ["streams/sc/a", "streams/sc/b"]


def test_a_transaction_timer_rescan_reads_no_entry_when_nothing_changed(
    cluster: InProcessCluster,
) -> None:
    store = _store(cluster)
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    for i in range(30):
        mgr.create_stream("sc", f"st{i}")
    timer = TransactionTimer(store, SegmentHelper(SegmentStoreClient(cluster)))
    timer.rebuild(0)  # loads the listings
    before = store.entries_scanned
    timer.rebuild(1)
    assert store.entries_scanned == before


class _ChangingClient(SegmentStoreClient):
    """The real client; runs ``during_iterate`` once, after the first table iteration read
    its page and before its reply (another process writing while a listing loads)."""

    def __init__(self, invoker: Any, during_iterate: Callable[[], None]) -> None:
        super().__init__(invoker)
        self._during_iterate: Callable[[], None] | None = during_iterate

    def table_iterate(
        self, segment: str, cursor: bytes | None, limit: int, with_values: bool = True
    ) -> Future[tuple[list[TableEntry], bytes | None]]:
        hook, self._during_iterate = self._during_iterate, None
        future = super().table_iterate(segment, cursor, limit, with_values)
        if hook is not None:
            future.result(10)
            hook()
        return future


def test_a_listing_loaded_while_another_store_writes_sees_the_writes(
    cluster: InProcessCluster,
) -> None:
    writer = _store(cluster)
    writer.put("streams/sc/old", {}, None)

    def change() -> None:
        writer.put("streams/sc/new", {}, None)
        writer.delete("streams/sc/old")

    client = _ChangingClient(cluster, change)
    lister = TableMetadataStore(client, pause_s=0.01)
    assert lister.list_keys("streams/sc") == ["streams/sc/new"]
    assert client._during_iterate is None  # the change ran after the page was read


def test_listings_under_concurrent_writers_end_equal_to_the_table(
    cluster: InProcessCluster,
) -> None:
    lister = _store(cluster)
    writers = [_store(cluster) for _ in range(4)]
    seen: list[int] = []

    def write(w: int) -> None:
        for i in range(40):
            writers[w].put(f"streams/sc/w{w}-{i}", {}, None)
            if i % 3 == 0:
                writers[w].delete(f"streams/sc/w{w}-{i}")

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        seen.append(len(lister.list_keys("streams/sc")))
    for t in threads:
        t.join()
    expected = sorted(k for k in writers[0].all_keys() if k.startswith("streams/sc/"))
    assert lister.list_keys("streams/sc") == expected
    assert len(expected) == 4 * (40 - 14)
    assert seen  # it listed while they wrote
