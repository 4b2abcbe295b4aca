"""A metadata store that watches its table segments (``TableMetadataStore(watch=True)``,
``segmentstore/table_watches.py``): while its leases hold, reads of unchanged *and changed*
records cost no validation round, and a read never answers a value older than a write
completed before it, whether the watcher runs, stops without a word, closes, or its
container restarts. Counted in container calls; the only clock is the lease itself."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from pravega_ray.controller.stream_transaction_metadata_tasks import WatchedCommitWaiter
from pravega_ray.controller.table_metadata_store import TableMetadataStore
from pravega_ray.controller.transactions import TxnRecords
from pravega_ray.inprocess import IN_PROCESS_LEASE_S, InProcessCluster
from pravega_ray.naming import container_for_segment
from tests.unit.controller.test_stream_store_cache import CountingInvoker, _store

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster() -> Iterator[InProcessCluster]:
    c = InProcessCluster(2, watch_metadata=True)
    yield c
    c.shutdown()


def _leased(store: object) -> None:
    """Wait until every partition of ``store`` is under its lease (its watchers started)."""
    deadline = time.monotonic() + 30
    cache = store.cache  # type: ignore[attr-defined]
    while cache.stale(range(len(cache.partitions)), cache.tick()):
        assert time.monotonic() < deadline, "the watchers never took their leases"
        time.sleep(0.01)


def _pair(
    cluster: InProcessCluster, key: str
) -> tuple[TableMetadataStore, TableMetadataStore, CountingInvoker, int]:
    """A plain writer store and a watching reader store (leased), ``key`` written as
    ``{"n": 0}`` and read through the reader (cached); with the reader's calls and the
    record's version."""
    writer, _ = _store(cluster)
    reader, calls = _store(cluster, watch=True)
    _leased(reader)
    version = writer.put(key, {"n": 0}, None)
    assert reader.get(key).value == {"n": 0}  # type: ignore[union-attr]
    return writer, reader, calls, version


def test_a_watching_store_reads_what_another_wrote_without_a_validation_round(
    cluster: InProcessCluster,
) -> None:
    writer, _ = _store(cluster)
    reader, calls = _store(cluster, watch=True)
    try:
        _leased(reader)
        version = writer.put("streams/sc/a", {"n": 0}, None)
        writer.put("streams/sc/gone", {"n": 0}, None)
        assert reader.get("streams/sc/a").value == {"n": 0}  # type: ignore[union-attr]
        assert reader.get("streams/sc/gone") is not None
        for n in range(1, 40):
            version = writer.put("streams/sc/a", {"n": n}, version)
            # The put returned: the reader's watcher applied it already.
            assert reader.get("streams/sc/a").value == {"n": n}  # type: ignore[union-attr]
        writer.delete("streams/sc/gone")
        assert reader.get("streams/sc/gone") is None
        assert calls.count("table_get") == 0  # every record came pushed, new ones too
        assert calls.count("table_changes") == 0
    finally:
        reader.close()


def test_a_closed_store_gives_its_leases_back_and_validates_again(
    cluster: InProcessCluster,
) -> None:
    writer, reader, calls, version = _pair(cluster, "streams/sc/b")
    reader.close()
    reader.close()  # idempotent
    for segment in reader.segments:  # nobody left for an update to wait for
        container = cluster.container(container_for_segment(segment, cluster.container_count))
        assert reader._holder not in container._watches._holders.get(segment, {})
    writer.put("streams/sc/b", {"n": 1}, version)
    assert reader.get("streams/sc/b").value == {"n": 1}  # type: ignore[union-attr]
    assert calls.count("table_changes") >= 1  # validated, as a store that never watched


def test_a_watcher_that_dies_silently_never_lets_its_store_serve_an_older_value(
    cluster: InProcessCluster,
) -> None:
    writer, reader, _, version = _pair(cluster, "streams/sc/c")
    reader._closed.set()  # the watcher threads stop; no lease is given back or lapsed
    for thread in reader._watchers:
        thread.join(10)
    began = time.monotonic()
    writer.put("streams/sc/c", {"n": 1}, version)  # waits for the container's lease to end
    assert time.monotonic() - began >= IN_PROCESS_LEASE_S * 0.5
    # ... by which time the reader no longer trusts its lease: it validates and sees it.
    assert reader.get("streams/sc/c").value == {"n": 1}  # type: ignore[union-attr]


def test_a_container_restart_under_a_watching_store_loses_no_write(
    cluster: InProcessCluster,
) -> None:
    writer, _ = _store(cluster)
    reader, _ = _store(cluster, watch=True)
    try:
        _leased(reader)
        keys = [f"streams/sc/k{i}" for i in range(8)]  # over both containers' partitions
        versions = {key: writer.put(key, {"n": 0}, None) for key in keys}
        assert all(reader.get(key).value == {"n": 0} for key in keys)  # type: ignore[union-attr]
        for container_id in range(cluster.container_count):
            cluster.restart_container(container_id)
            for key in keys:
                versions[key] = writer.put(key, {"n": container_id + 1}, versions[key])
                assert reader.get(key).value == {"n": container_id + 1}  # type: ignore[union-attr]
        _leased(reader)  # the watchers found the new containers and hold leases again
    finally:
        reader.close()


def test_two_watching_stores_never_read_older_than_a_completed_write(
    cluster: InProcessCluster,
) -> None:
    """Writers on two stores bump counters; readers on both check, for every read, that it is
    at least the last value whose put had returned before the read started."""
    stores = [_store(cluster, watch=True)[0] for _ in range(2)]
    plain, _ = _store(cluster)
    try:
        for store in stores:
            _leased(store)
        keys = ["streams/sc/x", "streams/other/y"]
        for key in keys:
            plain.put(key, {"n": 0}, None)
        done: dict[str, int] = dict.fromkeys(keys, 0)
        lock, stop, failures = threading.Lock(), threading.Event(), []

        def write(key: str, store_index: int) -> None:
            try:
                while not stop.is_set():  # one writer per key, alternating stores
                    store = stores[store_index % 2]
                    current = store.get(key)  # stale, and the put would conflict
                    assert current is not None
                    n = current.value["n"] + 1
                    store.put(key, {"n": n}, current.version)
                    with lock:
                        done[key] = n
                    store_index += 1
            except Exception as e:
                failures.append((key, "writer", e))

        def read(store_index: int) -> None:
            while not stop.is_set():
                for key in keys:
                    with lock:
                        floor = done[key]
                    got = stores[store_index].get(key)
                    if got is None or got.value["n"] < floor:
                        failures.append((key, floor, got))
                time.sleep(0.001)  # leave the watchers' threads the GIL now and then

        threads = [threading.Thread(target=write, args=(k, i)) for i, k in enumerate(keys)]
        threads += [threading.Thread(target=read, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        time.sleep(2)
        stop.set()
        for thread in threads:
            thread.join(30)
        assert failures == []
        assert all(done[key] >= 5 for key in keys), done  # the writers got somewhere
    finally:
        for store in stores:
            store.close()


def test_a_subscriber_hears_of_the_next_change_before_the_write_returns_and_of_a_lapse(
    cluster: InProcessCluster,
) -> None:
    writer, reader, _, version = _pair(cluster, "streams/sc/d")
    heard = threading.Event()
    cancel = reader.subscribe("streams/sc/d", heard.set)
    assert cancel is not None
    writer.put("streams/sc/d", {"n": 1}, version)
    assert heard.is_set()  # acknowledged only once the watcher applied it
    cancel()  # harmless after it fired
    lapsed = threading.Event()
    assert reader.subscribe("streams/sc/d", lapsed.set) is not None
    reader.close()  # the lease lapses: no change would be announced any more
    assert lapsed.is_set()
    assert reader.subscribe("streams/sc/d", lapsed.set) is None
    plain, _ = _store(cluster)
    assert plain.subscribe("streams/sc/d", lapsed.set) is None  # a store that never watched


def test_a_watched_commit_waiter_waits_for_the_completed_record_without_the_fallback(
    cluster: InProcessCluster,
) -> None:
    writer, reader, _, _ = _pair(cluster, "streams/sc/e")
    asked: list[uuid.UUID] = []

    def fallback(scope: str, stream: str, txn_id: uuid.UUID, timeout_s: float) -> bool:
        asked.append(txn_id)
        return False

    waiter = WatchedCommitWaiter(reader, fallback)
    txn = uuid.uuid4()
    key = TxnRecords.completed_key("sc", "s", txn)
    timer = threading.Timer(0.2, lambda: writer.put(key, {"status": "committed"}, None))
    timer.start()
    try:
        started = time.monotonic()
        assert waiter("sc", "s", txn, 30.0)
        assert time.monotonic() - started < 10  # the change woke it, not the time-out
        assert waiter("sc", "s", txn, 30.0)  # written already: answers at once
        assert not waiter("sc", "s", uuid.uuid4(), 0.05)  # nothing came: the time-out
        assert asked == []
    finally:
        timer.join()
    reader.close()
    assert not waiter("sc", "s", txn, 0.05)  # no lease: the fallback answers
    assert asked == [txn]
