"""The controller's record cache (``controller/stream_store_cache.py``) inside
``TableMetadataStore``: reads of unchanged records cost no table read, two stores over the
same tables (two controller instances) never answer an older value after a write through
the other completed, a stale version is never acted on, damage is never served as good,
and memory stays bounded. Counted in container calls, never timed."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

import pytest

from pravega_ray.contracts.segment_store import TableEntry, TableUpdateResult
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.controller.controller import Controller
from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore, Versioned
from pravega_ray.controller.stream_store_cache import ABSENT, CHANGED_KEYS_MAX, Cached, RecordCache
from pravega_ray.controller.table_metadata_store import TableMetadataStore
from pravega_ray.errors import (
    ConflictingUpdateError,
    DataCorruptionError,
    InvalidArgumentError,
    SegmentStoreUnavailableError,
)
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.stream_configuration import ScalingPolicy, StreamConfiguration

pytestmark = pytest.mark.timeout(120)
R = TypeVar("R")


class CountingInvoker:
    """A real :class:`ServiceInvoker` forwarding to the cluster and counting calls by name."""

    def __init__(self, inner: InProcessCluster) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()

    def invoke(self, method: Callable[..., Awaitable[R]], segment: str, *args: Any) -> Future[R]:
        with self._lock:
            self.calls[method.__name__] += 1
        return self._inner.invoke(method, segment, *args)

    def count(self, name: str) -> int:
        with self._lock:
            return self.calls[name]


@pytest.fixture
def cluster() -> Iterator[InProcessCluster]:
    c = InProcessCluster(2)
    yield c
    c.shutdown()


def _store(cluster: InProcessCluster, **options: Any) -> tuple[TableMetadataStore, CountingInvoker]:
    invoker = CountingInvoker(cluster)
    store = TableMetadataStore(SegmentStoreClient(invoker), pause_s=0.01, **options)
    store.ensure_created()
    return store, invoker


def test_a_read_of_an_unchanged_record_does_no_table_read(cluster: InProcessCluster) -> None:
    writer, _ = _store(cluster)
    writer.put("streams/sc/a", {"n": 1}, None)
    writer.put("history/sc/a/0000000000", {"rows": [1, 2]}, None)
    store, calls = _store(cluster)
    with store.operation():  # cold: one round of change reads, one table read per record
        assert store.get("streams/sc/a") is not None
        assert store.get("history/sc/a/0000000000") is not None
        assert store.get("streams/sc/absent") is None
    assert calls.count("table_get") == 3
    assert calls.count("table_changes") == len(store.segments)
    before = calls.calls.copy()
    for _ in range(5):
        with store.operation():
            assert store.get("streams/sc/a") == writer.get("streams/sc/a")
            assert store.get("history/sc/a/0000000000") is not None
            assert store.get("streams/sc/absent") is None
    assert calls.count("table_get") == before["table_get"]  # nothing read but the change logs
    assert calls.count("table_changes") == before["table_changes"] + 5 * len(store.segments)
    # Outside an operation each read checks its own partition's change log, once.
    before = calls.calls.copy()
    assert store.get("streams/sc/a") is not None
    assert calls.count("table_get") == before["table_get"]
    assert calls.count("table_changes") == before["table_changes"] + 1


def test_a_write_through_another_store_is_seen_by_the_next_read(cluster: InProcessCluster) -> None:
    a, _ = _store(cluster)
    b, calls = _store(cluster)
    version = a.put("streams/sc/s", {"state": "CREATING"}, None)
    assert b.get("streams/sc/s") == a.get("streams/sc/s")
    a.put("streams/sc/s", {"state": "ACTIVE"}, version)
    gets = calls.count("table_get")
    seen = b.get("streams/sc/s")
    assert seen is not None and seen.value == {"state": "ACTIVE"}
    assert calls.count("table_get") == gets  # the change itself carried the new value
    a.delete("streams/sc/s")
    assert b.get("streams/sc/s") is None
    a.put("streams/sc/s", {"state": "CREATING", "again": True}, None)
    with b.operation():
        seen = b.get("streams/sc/s")
    assert seen is not None and seen.value["again"] is True


@pytest.mark.parametrize("in_operations", [False, True])
def test_two_stores_never_answer_a_value_older_than_a_completed_write(
    cluster: InProcessCluster, in_operations: bool
) -> None:
    """Writers on store A bump counters; readers on store B note the value each write
    completed with before they start a read: the read never answers less."""
    a, _ = _store(cluster)
    b, _ = _store(cluster)
    keys = ["streams/sc/x", "history/sc/x/0000000000", "txn/sc/x/0000000000"]
    done = {key: 0 for key in keys}
    lock = threading.Lock()
    errors: list[str] = []
    stop = threading.Event()
    for key in keys:
        a.put(key, {"n": 0}, None)

    def write(key: str) -> None:
        version = a.get(key)
        assert version is not None
        for n in range(1, 60):
            new = a.put(key, {"n": n}, version.version)
            version = type(version)({"n": n}, new)
            with lock:
                done[key] = n

    def read() -> None:
        while not stop.is_set():
            for key in keys:
                with lock:
                    floor = done[key]
                if in_operations:
                    with b.operation():
                        record = b.get(key)
                else:
                    record = b.get(key)
                if record is None or record.value["n"] < floor:
                    errors.append(f"{key}: read {record} after write {floor} completed")

    readers = [threading.Thread(target=read) for _ in range(3)]
    writers = [threading.Thread(target=write, args=(key,)) for key in keys]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert errors == []
    for key in keys:
        record = b.get(key)
        assert record is not None and record.value == {"n": 59}


def test_a_stale_version_is_never_acted_on_and_the_conflict_refreshes(
    cluster: InProcessCluster,
) -> None:
    a, _ = _store(cluster)
    b, _ = _store(cluster)
    a.put("streams/sc/s", {"v": 1}, None)
    with b.operation():
        first = b.get("streams/sc/s")
        assert first is not None
        a.put("streams/sc/s", {"v": 2}, first.version)  # after b's operation started
        stale = b.get("streams/sc/s")  # the operation may still answer what it read
        assert stale == first
        with pytest.raises(ConflictingUpdateError):
            b.put("streams/sc/s", {"v": 3}, stale.version)
        fresh = b.get("streams/sc/s")  # the conflict dropped it: read from the table
        assert fresh is not None and fresh.value == {"v": 2}
        b.put("streams/sc/s", {"v": 3}, fresh.version)
    record = a.get("streams/sc/s")
    assert record is not None and record.value == {"v": 3}


def test_compare_and_set_from_two_stores_on_threads_loses_no_update(
    cluster: InProcessCluster,
) -> None:
    stores = [_store(cluster)[0], _store(cluster)[0]]
    stores[0].put("readergroups/sc/g", {"count": 0}, None)
    conflicts = Counter[int]()

    def bump(i: int) -> None:
        store = stores[i % 2]
        for _ in range(25):
            while True:
                with store.operation():
                    record = store.get("readergroups/sc/g")
                    assert record is not None
                    try:
                        store.put(
                            "readergroups/sc/g",
                            {"count": record.value["count"] + 1},
                            record.version,
                        )
                        break
                    except ConflictingUpdateError:
                        conflicts[i] += 1

    threads = [threading.Thread(target=bump, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for store in stores:
        record = store.get("readergroups/sc/g")
        assert record is not None and record.value == {"count": 100}


def test_a_cached_value_is_a_copy(cluster: InProcessCluster) -> None:
    store, calls = _store(cluster)
    assert store.get("streams/sc/s") is None
    gets = calls.count("table_get")
    store.put("streams/sc/s", {"cold": [1]}, None)
    record = store.get("streams/sc/s")
    assert record is not None
    record.value["cold"].append(2)
    again = store.get("streams/sc/s")
    assert again is not None and again.value == {"cold": [1]}
    assert calls.count("table_get") == gets  # the put itself filled the cache


def test_a_damaged_record_is_never_served_from_the_cache(cluster: InProcessCluster) -> None:
    """The record is cached good; its chunk is damaged in Tier-2 and the containers
    recover: the cache starts afresh (the log epoch changed) and the damage is reported,
    every time, never cached."""
    store, calls = _store(cluster)
    store.put("streams/sc/s", {"v": 1}, None)
    other_key = next(
        k
        for k in (f"streams/sc{i}/other" for i in range(100))
        if store.partition_of(k) != store.partition_of("streams/sc/s")
    )
    store.put(other_key, {"v": 1}, None)
    assert store.get("streams/sc/s") is not None
    for i in range(cluster.container_count):
        cluster.run(cluster.container(i).flush_to_storage()).result(30)
    segment = store.segments[store.partition_of("streams/sc/s")]
    (chunk,) = cluster.storage.list(f"segments/{segment}")[:1]
    data = bytearray(cluster.storage.read(chunk, 0, cluster.storage.length(chunk)))
    at = data.index(b'"v":1') + 4
    data[at] = ord("7")
    cluster.storage.delete(chunk)
    cluster.storage.create(chunk, bytes(data))
    for i in range(cluster.container_count):
        cluster.restart_container(i)
    for _ in range(2):
        gets = calls.count("table_get")
        with pytest.raises(DataCorruptionError):
            store.get("streams/sc/s")
        assert calls.count("table_get") == gets + 1
    other = store.get(other_key)
    assert other is not None and other.value == {"v": 1}


def test_a_recreated_stream_is_never_answered_as_its_deleted_incarnation(
    cluster: InProcessCluster,
) -> None:
    a = StreamMetadataStore(_store(cluster)[0])
    b = StreamMetadataStore(_store(cluster)[0])
    config = StreamConfiguration(ScalingPolicy.fixed(2)).to_dict()
    a.create_stream("sc", "s", config, 2, 1, None)
    first = b.get_stream_info("sc", "s")
    a.streams.delete("sc", "s")
    a.remember_deleted("kind", "sc", "s", 2)
    a.remember_deleted("streams", "sc", "s", 2)
    assert b.get_stream_record("sc", "s") is None
    a.create_stream("sc", "s", config, 2, 2, None)
    second = b.get_stream_info("sc", "s")
    assert second.creation_time_ms == 2
    assert {r.segment_id for r in second.segments}.isdisjoint(r.segment_id for r in first.segments)


def test_memory_stays_bounded(cluster: InProcessCluster) -> None:
    store, calls = _store(cluster, cache_bytes=4000)
    for i in range(100):
        store.put(f"streams/sc/s{i}", {"i": i, "pad": "x" * 50}, None)
    assert 0 < len(store.cache) < 100
    assert store.cache.bytes <= 4000
    for i in range(100):  # the evicted ones are read again, correctly
        record = store.get(f"streams/sc/s{i}")
        assert record is not None and record.value["i"] == i
    assert calls.count("table_get") > 0


def test_no_cache_reads_every_time(cluster: InProcessCluster) -> None:
    store, calls = _store(cluster, cache_bytes=0)
    store.put("streams/sc/s", {"v": 1}, None)
    for _ in range(3):
        assert store.get("streams/sc/s") is not None
    assert calls.count("table_get") == 3 and calls.count("table_changes") == 0
    with pytest.raises(InvalidArgumentError):
        TableMetadataStore(SegmentStoreClient(cluster), cache_bytes=-1)


# --- the cache's rules on their own ---------------------------------------------------------------
def _entry(version: int, value: bytes | None = b"x") -> TableEntry:
    return TableEntry(b"k", value, version)


def test_a_fetch_that_raced_a_newer_change_is_not_cached() -> None:
    cache = RecordCache(1, lambda key: 0)
    ticket = cache.begin(0, "k")
    cache.apply(0, [("k", _entry(50))], 60)  # applied while the fetch was in flight
    cache.end(ticket, Cached(b"old", 10))
    assert cache.lookup("k") is None
    ticket = cache.begin(0, "k")
    cache.apply(0, [("k", _entry(70))], 80)
    cache.end(ticket, Cached(b"new", 90))  # fetched after the change: cached
    assert cache.lookup("k") == Cached(b"new", 90)
    ticket = cache.begin(0, "k")
    cache.end(ticket, Cached(b"older", 20))  # never replaces a newer version
    assert cache.lookup("k") == Cached(b"new", 90)
    ticket = cache.begin(0, "k")
    cache.end(ticket, Cached(ABSENT, -1))  # absent, age unknown, beside a value: dropped
    assert cache.lookup("k") is None


def test_a_change_replaces_a_cached_value_and_a_removal_makes_it_absent() -> None:
    cache = RecordCache(1, lambda key: 0)
    cache.end(cache.begin(0, "k"), Cached(b"v1", 10))
    cache.apply(0, [("k", _entry(20, b"v2")), ("other", _entry(30))], 40)
    assert cache.lookup("k") == Cached(b"v2", 20)
    assert cache.lookup("other") == Cached(b"x", 30)  # not cached before: cached now
    cache.apply(0, [("k", _entry(50, None))], 60)
    assert cache.lookup("k") == Cached(ABSENT, 50)
    cache.reset(0, 100, 7)
    assert cache.lookup("k") is None
    assert cache.partitions[0].offset == 100


# --- through the controller -----------------------------------------------------------------------
def _controller(cluster: InProcessCluster) -> tuple[Controller, CountingInvoker]:
    store, calls = _store(cluster)
    helper = SegmentHelper(SegmentStoreClient(cluster), attempts_max=1, call_timeout_s=30)
    return Controller(store, helper, cluster.container_count), calls


def test_a_repeated_stream_info_call_is_one_round_of_change_reads(
    cluster: InProcessCluster,
) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", "s", StreamConfiguration(ScalingPolicy.fixed(3)))
    controller, calls = _controller(cluster)
    info = controller.get_stream_info("sc", "s")
    controller.get_successors("sc", "s", info.segments[0].segment_id)  # its records too
    before = calls.calls.copy()
    for _ in range(3):
        assert controller.get_stream_info("sc", "s") == info
        assert controller.get_successors("sc", "s", info.segments[0].segment_id) == {}
    assert calls.count("table_get") == before["table_get"]
    assert calls.count("table_changes") == before["table_changes"] + 6 * len(
        controller_store(controller).segments
    )


def test_two_controllers_never_contradict_each_other_after_a_scale(
    cluster: InProcessCluster,
) -> None:
    """The cluster's own controller scales; a second controller instance answers the new
    epoch as soon as the scale completed, never the old one."""
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", "s", StreamConfiguration(ScalingPolicy.fixed(1)))
    other, _ = _controller(cluster)
    for round_ in range(3):
        info = other.get_stream_info("sc", "s")
        assert info.epoch == round_
        sealed = [info.segments[0].segment_id]
        assert mgr.scale_stream("sc", "s", sealed, [(0.0, 1.0)])  # waits until done
        after = other.get_stream_info("sc", "s")
        assert after.epoch == round_ + 1
        assert other.get_successors("sc", "s", sealed[0]) != {}
        assert cluster.core.get_stream_info("sc", "s") == after


def controller_store(controller: Controller) -> TableMetadataStore:
    records = controller._store._records  # the store the test gave it
    assert isinstance(records, TableMetadataStore)
    return records


class LosingClient(SegmentStoreClient):
    """The real client; the next ``lose`` table updates land, then report an unknown outcome."""

    lose = 0

    def table_update(self, *args: Any) -> Future[TableUpdateResult]:
        future = super().table_update(*args)
        if self.lose:
            self.lose -= 1
            future.result(10)  # it landed; the reply is lost
            failed: Future[TableUpdateResult] = Future()
            failed.set_exception(SegmentStoreUnavailableError("reply lost"))
            return failed
        return future


def test_a_write_whose_outcome_is_unknown_is_never_answered_from_the_cache(
    cluster: InProcessCluster,
) -> None:
    client = LosingClient(cluster)
    store = TableMetadataStore(client, pause_s=0.01, attempts_max=1)
    store.ensure_created()
    version = store.put("streams/sc/s", {"v": 1}, None)
    with store.operation():
        assert store.get("streams/sc/s") == Versioned({"v": 1}, version)
        client.lose = 1
        with pytest.raises(SegmentStoreUnavailableError):
            store.put("streams/sc/s", {"v": 2}, version)
        landed = store.get("streams/sc/s")  # read from the table, not the old cached value
    assert landed is not None and landed.value == {"v": 2}


class PartlyDownInvoker(CountingInvoker):
    """Counts calls; those to the table segments in ``down`` fail, outcome unknown."""

    def __init__(self, inner: InProcessCluster) -> None:
        super().__init__(inner)
        self.down: set[str] = set()

    def invoke(self, method: Callable[..., Awaitable[R]], segment: str, *args: Any) -> Future[R]:
        if segment in self.down:
            with self._lock:
                self.calls[f"down {method.__name__}"] += 1
            failed: Future[R] = Future()
            failed.set_exception(SegmentStoreUnavailableError(f"{segment} is down"))
            return failed
        return super().invoke(method, segment, *args)


def test_an_unavailable_partition_delays_only_its_own_records(cluster: InProcessCluster) -> None:
    invoker = PartlyDownInvoker(cluster)
    store = TableMetadataStore(SegmentStoreClient(invoker), pause_s=0.01, attempts_max=3)
    store.ensure_created()
    store.put("streams/sc/s", {"v": 1}, None)
    here = store.partition_of("streams/sc/s")
    elsewhere = next(p for p in range(len(store.segments)) if p != here)
    invoker.down.add(store.segments[elsewhere])
    with store.operation():
        record = store.get("streams/sc/s")  # its partition validated; the other is skipped
    assert record is not None and record.value == {"v": 1}
    assert invoker.count("down table_changes") == 1  # sent alongside once, never repeated
    invoker.down.clear()
    with store.operation():
        assert store.get("streams/sc/s") == record


def test_changes_remembered_for_fetches_in_flight_stay_bounded() -> None:
    cache = RecordCache(1, lambda key: 0)
    cache.end(cache.begin(0, "k"), Cached(b"v1", 1))
    ticket = cache.begin(0, "k")  # never ends while the changes pour in
    changes = [(f"x{i}", TableEntry(b"x", b"x", 10 + i)) for i in range(CHANGED_KEYS_MAX + 1)]
    cache.apply(0, changes, 20_000)
    assert len(cache.partitions[0].changed) <= CHANGED_KEYS_MAX
    cache.end(ticket, Cached(b"v2", 5))  # not cached, and the older v1 goes
    assert cache.lookup("k") is None


def test_subscribers_are_called_once_at_their_keys_change_or_their_partitions_lapse() -> None:
    cache = RecordCache(2, lambda key: 0 if key.startswith("a") else 1)
    calls: list[str] = []
    cache.subscribe("a1", lambda: calls.append("a1"))
    cancelled = cache.subscribe("a2", lambda: calls.append("a2"))
    cache.subscribe("b1", lambda: calls.append("b1"))
    cancelled()
    cache.apply(0, [("a1", _entry(10)), ("a2", _entry(11))], 20)
    cache.apply(0, [("a1", _entry(30))], 40)  # once only
    assert calls == ["a1"]
    cache.subscribe("a1", lambda: calls.append("a1 again"))
    cache.lapse(1)  # another partition's lapse
    assert calls == ["a1", "b1"]
    cache.reset(0, 100, 3)
    assert calls == ["a1", "b1", "a1 again"]
    assert not cache.leased(0)
    cache.lease(0, time.monotonic() + 60)
    assert cache.leased(0) and not cache.leased(1)
