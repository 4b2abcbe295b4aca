"""``TableMetadataStore.list_keys`` reads only what changed since its last call, so listing
one stream's children (the transaction timer does it for every stream every few seconds)
costs the same at 20 streams as at 200. Counted in table entries read, never timed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.controller.table_metadata_store import MIGRATION_MARKER, TableMetadataStore
from pravega_ray.controller.transaction_timer import TransactionTimer
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.segmentstore.service import SegmentStoreClient

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
