"""The controller's records in table segments of ``_system``: one contract suite run against
ChunkMetadataStore and TableMetadataStore (compare-and-set, conflicts, delete, direct
children, damage), then what only the table store has (exactly-once repeats, threads,
container restarts, bad input) and the migration of format-5 chunk records."""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import pytest

from pravega_ray.contracts.attributes import NULL_VALUE
from pravega_ray.contracts.segment_store import TableEntry, TableUpdate, TableUpdateResult
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.controller.controller import Controller
from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.controller.stream_metadata_store import (
    ChunkMetadataStore,
    MetadataStore,
    Versioned,
    encode_record,
)
from pravega_ray.controller.table_metadata_store import (
    MIGRATION_MARKER,
    TableMetadataStore,
    migrate_chunk_records,
    open_metadata_store,
)
from pravega_ray.errors import (
    ConflictingUpdateError,
    DataCorruptionError,
    InvalidArgumentError,
    InvalidNameError,
    SegmentStoreUnavailableError,
)
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import container_for_segment, system_table_segment_name
from pravega_ray.storage.chunk_storage import ChunkStorage
from pravega_ray.storage.filesystem import FileSystemChunkStorage
from pravega_ray.storage.memory import InMemoryChunkStorage

pytestmark = pytest.mark.timeout(60)


class FaultyClient(SegmentStoreClient):
    """The real segment-store client, recording table calls and losing replies on demand.

    ``lose_replies``: that many next table updates land, then report an unknown outcome.
    ``fail_before``: that many next table updates fail with an unknown outcome, not sent
    (a lost reply then waits for its turn). Thread-safe.
    """

    def __init__(self, invoker: Any) -> None:
        super().__init__(invoker)
        self._lock = threading.Lock()
        self.lose_replies = 0
        self.fail_before = 0
        self.iterated: list[str] = []
        self.client_ids: list[bytes | None] = []

    def table_update(
        self,
        segment: str,
        updates: Sequence[TableUpdate],
        client_id: bytes | None = None,
        client_last: int = NULL_VALUE,
        watcher: bytes | None = None,
    ) -> Future[TableUpdateResult]:
        with self._lock:
            self.client_ids.append(client_id)
            fail, self.fail_before = self.fail_before > 0, max(0, self.fail_before - 1)
            lose, self.lose_replies = self.lose_replies > 0, max(0, self.lose_replies - 1)
        if fail:
            return _failed(SegmentStoreUnavailableError("not sent"))
        future = super().table_update(segment, updates, client_id, client_last, watcher)
        if lose:
            wait([future], 10)  # it lands (or fails); the reply is lost either way
            return _failed(SegmentStoreUnavailableError("reply lost"))
        return future

    def table_iterate(
        self, segment: str, cursor: bytes | None, limit: int, with_values: bool = True
    ) -> Future[tuple[list[TableEntry], bytes | None]]:
        self.iterated.append(segment)
        return super().table_iterate(segment, cursor, limit, with_values)


def _failed(error: BaseException) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(error)
    return future


@pytest.fixture
def cluster() -> Iterator[InProcessCluster]:
    c = InProcessCluster(2)
    # The cluster's controller opened its tables (no chunk records: it wrote the marker);
    # the tests start from tables as a format-5 cluster's first start finds them.
    TableMetadataStore(SegmentStoreClient(c)).delete(MIGRATION_MARKER)
    yield c
    c.shutdown()


def _table_store(cluster: InProcessCluster, **options: Any) -> TableMetadataStore:
    store = TableMetadataStore(FaultyClient(cluster), pause_s=0.01, **options)
    store.ensure_created()
    return store


def _faulty(store: TableMetadataStore) -> FaultyClient:
    client = store._client
    assert isinstance(client, FaultyClient)
    return client


@pytest.fixture(params=["chunk", "table"])
def store(request: pytest.FixtureRequest, cluster: InProcessCluster) -> MetadataStore:
    if request.param == "chunk":
        return ChunkMetadataStore(InMemoryChunkStorage())
    return _table_store(cluster)


def _damage(store: MetadataStore, key: str, cluster: InProcessCluster) -> bytes:
    """Flip one byte of ``key``'s stored value in place (chunk) or by a direct table write."""
    record = store.get(key)
    assert record is not None
    garbage = bytearray(encode_record(record.value))
    garbage[-2] ^= 0x01
    if isinstance(store, ChunkMetadataStore):
        storage = store._storage
        name = f"_system/controller/{key}/{record.version:020d}"
        storage.delete(name)
        storage.create(name, bytes(garbage))
    else:
        assert isinstance(store, TableMetadataStore)
        segment = store.segments[store.partition_of(key)]
        update = TableUpdate(key.encode(), bytes(garbage))
        SegmentStoreClient(cluster).table_update(segment, [update]).result(10)
    return bytes(garbage)


def _stored_bytes(store: MetadataStore, key: str, cluster: InProcessCluster) -> bytes:
    if isinstance(store, ChunkMetadataStore):
        (name,) = store._storage.list(f"_system/controller/{key}/")
        return store._storage.read(name, 0, store._storage.length(name))
    assert isinstance(store, TableMetadataStore)
    segment = store.segments[store.partition_of(key)]
    (entry,) = SegmentStoreClient(cluster).table_get(segment, [key.encode()]).result(10)
    assert entry is not None and entry.value is not None
    return entry.value


# --- the contract, both stores -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["get", "put", "delete", "list_keys"])
def test_table_metadata_store_has_the_metadata_store_methods(name: str) -> None:
    protocol = inspect.signature(getattr(MetadataStore, name))
    assert inspect.signature(getattr(TableMetadataStore, name)) == protocol


def test_put_compare_and_set_by_version(store: MetadataStore) -> None:
    v0 = store.put("scopes/a", {"x": 1}, None)
    assert store.get("scopes/a") is not None
    assert store.get("scopes/a").value == {"x": 1}  # type: ignore[union-attr]
    assert store.get("scopes/a").version == v0  # type: ignore[union-attr]
    with pytest.raises(ConflictingUpdateError):
        store.put("scopes/a", {"x": 2}, None)
    v1 = store.put("scopes/a", {"x": 2}, v0)
    assert v1 > v0
    for stale in (v0, v1 + 1, -1):
        with pytest.raises(ConflictingUpdateError):
            store.put("scopes/a", {"x": 3}, stale)
    assert store.get("scopes/a").value == {"x": 2}  # type: ignore[union-attr]
    with pytest.raises(ConflictingUpdateError):
        store.put("scopes/absent", {"x": 1}, v1)
    assert store.get("scopes/absent") is None


def test_delete_removes_and_a_new_record_may_follow(store: MetadataStore) -> None:
    store.delete("scopes/never")  # a no-op
    v0 = store.put("scopes/a", {"x": 1}, None)
    store.delete("scopes/a")
    assert store.get("scopes/a") is None
    assert store.list_keys("scopes") == []
    with pytest.raises(ConflictingUpdateError):
        store.put("scopes/a", {"x": 2}, v0)
    store.put("scopes/a", {"x": 2}, None)
    assert store.get("scopes/a").value == {"x": 2}  # type: ignore[union-attr]


def test_list_keys_lists_direct_children_only(store: MetadataStore) -> None:
    for key in (
        "streams/sc/a",
        "streams/sc/b",
        "streams/sc/a/deeper",
        "streams/sd/c",
        "streams/scx",
    ):
        store.put(key, {"k": key}, None)
    store.put("streams/sc/gone", {}, None)
    store.delete("streams/sc/gone")
    assert store.list_keys("streams/sc") == ["streams/sc/a", "streams/sc/b"]
    assert store.list_keys("streams") == ["streams/scx"]
    assert store.list_keys("streams/sc/a") == ["streams/sc/a/deeper"]
    assert store.list_keys("nothing/here") == []


def test_a_damaged_record_is_named_and_never_overwritten(
    store: MetadataStore, cluster: InProcessCluster
) -> None:
    version = store.put("streams/sc/st", {"x": 1}, None)
    store.put("streams/sc/ok", {"x": 1}, None)
    garbage = _damage(store, "streams/sc/st", cluster)
    with pytest.raises(DataCorruptionError, match="streams/sc/st") as raised:
        store.get("streams/sc/st")
    assert raised.value.key == "streams/sc/st"  # type: ignore[attr-defined]
    for expected in (None, version):
        with pytest.raises(DataCorruptionError, match="streams/sc/st"):
            store.put("streams/sc/st", {"x": 2}, expected)
    assert _stored_bytes(store, "streams/sc/st", cluster) == garbage
    assert store.list_keys("streams/sc") == ["streams/sc/ok", "streams/sc/st"]
    assert store.get("streams/sc/ok").value == {"x": 1}  # type: ignore[union-attr]
    store.delete("streams/sc/st")  # damaged or not
    assert store.get("streams/sc/st") is None


# --- the table store's own ------------------------------------------------------------------------
def test_a_put_repeated_after_a_lost_reply_is_not_a_false_conflict(
    cluster: InProcessCluster,
) -> None:
    store = _table_store(cluster)
    client = _faulty(store)
    client.lose_replies = 2
    v0 = store.put("scopes/a", {"x": 1}, None)  # landed, reply lost twice, repeated
    assert store.get("scopes/a") == Versioned({"x": 1}, v0)
    client.lose_replies = 1
    v1 = store.put("scopes/a", {"x": 2}, v0)
    assert store.get("scopes/a").version == v1  # type: ignore[union-attr]
    client.lose_replies = 1
    store.delete("scopes/a")
    assert store.get("scopes/a") is None
    client.fail_before = 2  # not sent at all: the repeat applies it
    v2 = store.put("scopes/a", {"x": 3}, None)
    assert store.get("scopes/a").version == v2  # type: ignore[union-attr]
    # One client id throughout: no repeat needed a new one.
    assert len(set(client.client_ids)) == 1


def test_an_outcome_still_unknown_after_the_last_attempt_reaches_the_caller(
    cluster: InProcessCluster,
) -> None:
    store = _table_store(cluster, attempts_max=2)
    client = _faulty(store)
    store.put("scopes/a", {"x": 1}, None)
    client.lose_replies = 2
    with pytest.raises(SegmentStoreUnavailableError):
        store.put("scopes/b", {"x": 1}, None)
    assert store.get("scopes/b").value == {"x": 1}  # type: ignore[union-attr]
    # The slot whose outcome stayed unknown is dropped; a new client id carries on.
    v = store.put("scopes/c", {"x": 1}, None)
    assert store.get("scopes/c").version == v  # type: ignore[union-attr]
    assert client.client_ids[0] == client.client_ids[1] != client.client_ids[-1]


def _increment(store: TableMetadataStore, key: str, times: int, done: list[int]) -> None:
    """CAS increments of ``key``'s counter; appends one to ``done`` per successful put."""
    for _ in range(times):
        while True:
            record = store.get(key)
            assert record is not None
            try:
                store.put(key, {"n": record.value["n"] + 1}, record.version)
            except ConflictingUpdateError:
                continue
            done.append(1)
            break


def test_eight_threads_of_cas_increments_count_every_successful_put(
    cluster: InProcessCluster,
) -> None:
    store = _table_store(cluster)
    store.put("counters/one", {"n": 0}, None)
    done: list[int] = []
    threads = [
        threading.Thread(target=_increment, args=(store, "counters/one", 25, done))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(50)
    assert store.get("counters/one").value["n"] == len(done) == 200  # type: ignore[union-attr]


def test_increments_survive_container_restarts_exactly_once(cluster: InProcessCluster) -> None:
    """Counters incremented by CAS from four threads while their containers restart and
    replies are lost: a false conflict would count an increment that landed as failed."""
    store = _table_store(cluster)
    client = _faulty(store)
    keys = [f"counters/{i}" for i in range(4)]
    for key in keys:
        store.put(key, {"n": 0}, None)
    done: list[int] = []
    threads = [threading.Thread(target=_increment, args=(store, k, 40, done)) for k in keys]
    for t in threads:
        t.start()
    owners = {container_for_segment(s, cluster.container_count) for s in store.segments}
    for _ in range(3):
        for owner in sorted(owners):
            cluster.restart_container(owner)
            with client._lock:
                client.lose_replies += 3  # besides whatever the restart cut off
    for t in threads:
        t.join(50)
    assert not any(t.is_alive() for t in threads)
    total = sum(store.get(k).value["n"] for k in keys)  # type: ignore[union-attr]
    assert total == len(done) == 160
    assert client.client_ids  # the exactly-once ids were in use


def test_list_keys_iterates_one_partition(cluster: InProcessCluster) -> None:
    store = _table_store(cluster)
    for i in range(20):
        store.put(f"streams/sc{i % 5}/st{i}", {}, None)
    client = _faulty(store)
    client.iterated.clear()
    assert store.list_keys("streams/sc3") == sorted(f"streams/sc3/st{i}" for i in (3, 8, 13, 18))
    assert client.iterated == [store.segments[store.children_partition("streams/sc3")]]
    assert len(store.all_keys()) >= 20


def test_one_partition_holds_everything(cluster: InProcessCluster) -> None:
    store = _table_store(cluster, partitions=1)
    store.put("a/b", {}, None)
    store.put("c", {}, None)
    assert store.segments == [system_table_segment_name("controller", 0)]
    assert store.list_keys("a") == ["a/b"]


def test_ensure_created_is_idempotent(cluster: InProcessCluster) -> None:
    store = _table_store(cluster)
    store.put("scopes/a", {"x": 1}, None)
    store.ensure_created()
    assert store.get("scopes/a").value == {"x": 1}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "key", [1, None, "", "/a", "a//b", "a/../b", "a/./b", "a\\b", "a\x00b", "\udcff", "k" * 9000]
)
def test_bad_keys_are_refused(cluster: InProcessCluster, key: object) -> None:
    store = _table_store(cluster)
    calls: list[Callable[[], object]] = [
        lambda: store.get(key),  # type: ignore[arg-type]
        lambda: store.put(key, {}, None),  # type: ignore[arg-type]
        lambda: store.delete(key),  # type: ignore[arg-type]
        lambda: store.list_keys(key),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidNameError):
            call()


@pytest.mark.parametrize(
    ("value", "expected"),
    [([1], None), ({"x": {1, 2}}, None), ({"x": "y" * (1 << 20)}, None), ({}, "0"), ({}, True)],
)
def test_bad_values_and_versions_are_refused_and_change_nothing(
    cluster: InProcessCluster, value: Any, expected: Any
) -> None:
    store = _table_store(cluster)
    with pytest.raises(InvalidArgumentError):
        store.put("scopes/a", value, expected)
    assert store.get("scopes/a") is None


@pytest.mark.parametrize(
    "options",
    [
        {"partitions": 0},
        {"partitions": True},
        {"partitions": 1025},
        {"attempts_max": 0},
        {"call_timeout_s": -1},
        {"call_timeout_s": 0},
        {"call_timeout_s": "1"},
        {"pause_s": None},
    ],
)
def test_bad_options_are_refused(cluster: InProcessCluster, options: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        TableMetadataStore(SegmentStoreClient(cluster), **options)


# --- migration from chunk records ---------------------------------------------------------------
def _chunk_records(storage: ChunkStorage) -> dict[str, dict[str, Any]]:
    source = ChunkMetadataStore(storage)
    records = {
        "scopes/a": {"created_ms": 1},
        "scopes/b": {"created_ms": 2},
        "streams/a/s1": {"state": "ACTIVE", "epochs": [[[0, 0.0, 1.0]]]},
        "streams/a/s2": {"state": "SEALED"},
        "deleted/streams/a/old": {"next_segment_number": 3},
        "readergroups/a/rg": {"readers": {}},
    }
    for key, value in records.items():
        source.put(key, value, None)
    v = source.put("scopes/gone", {}, None)
    source.put("scopes/gone", {"twice": True}, v)
    source.delete("scopes/gone")
    current = source.get("streams/a/s2")
    assert current is not None
    source.put("streams/a/s2", {"state": "SEALED", "v": 2}, current.version)
    records["streams/a/s2"] = {"state": "SEALED", "v": 2}
    return records


def _assert_migrated(target: TableMetadataStore, records: dict[str, dict[str, Any]]) -> None:
    for key, value in records.items():
        assert target.get(key).value == value, key  # type: ignore[union-attr]
    assert target.get("scopes/gone") is None
    assert target.list_keys("scopes") == ["scopes/a", "scopes/b"]
    assert target.list_keys("streams/a") == ["streams/a/s1", "streams/a/s2"]


def test_all_keys_lists_every_live_record(cluster: InProcessCluster) -> None:
    storage = InMemoryChunkStorage()
    records = _chunk_records(storage)
    assert ChunkMetadataStore(storage).all_keys() == sorted(records)


def test_migration_copies_every_record(cluster: InProcessCluster) -> None:
    storage = InMemoryChunkStorage()
    records = _chunk_records(storage)
    target = _table_store(cluster)
    assert migrate_chunk_records(ChunkMetadataStore(storage), target) == len(records)
    _assert_migrated(target, records)
    marker = target.get(MIGRATION_MARKER)
    assert marker is not None and marker.value == {"records": len(records), "skipped": {}}
    # Idempotent: a rerun changes nothing.
    versions = {k: target.get(k).version for k in records}  # type: ignore[union-attr]
    assert migrate_chunk_records(ChunkMetadataStore(storage), target) == len(records)
    assert versions == {k: target.get(k).version for k in records}  # type: ignore[union-attr]


class CrashingStore(TableMetadataStore):
    """A real table store that 'crashes' (raises) at its ``crash_at``-th put."""

    crash_at = 3
    puts = 0

    def put(self, key: str, value: dict[str, Any], expected_version: int | None) -> int:
        self.puts += 1
        if self.puts == self.crash_at:
            raise RuntimeError("crash")
        return super().put(key, value, expected_version)


@pytest.mark.parametrize("k", [1, 3, 6, 7])
def test_a_migration_cut_short_is_finished_by_the_next_start(
    cluster: InProcessCluster, k: int
) -> None:
    storage = InMemoryChunkStorage()
    records = _chunk_records(storage)
    crashing = CrashingStore(SegmentStoreClient(cluster), pause_s=0.01)
    crashing.crash_at = k  # record k - 1 is the last copied; k = 7 is the marker
    crashing.ensure_created()
    with pytest.raises(RuntimeError, match="crash"):
        migrate_chunk_records(ChunkMetadataStore(storage), crashing)
    assert _table_store(cluster).get(MIGRATION_MARKER) is None
    store = open_metadata_store(SegmentStoreClient(cluster), storage)
    _assert_migrated(store, records)
    assert store.get(MIGRATION_MARKER).value["records"] == len(records)  # type: ignore[union-attr]


def test_controller_instances_starting_at_once_migrate_side_by_side(
    cluster: InProcessCluster,
) -> None:
    """Two starts copying at once (controller instances start together): both open the
    store, every record is copied once, and the marker is written (a start used to fail
    with ConflictingUpdateError on a record or the marker the other had written)."""
    storage = InMemoryChunkStorage()
    records = _chunk_records(storage)
    for _ in range(5):
        target = _table_store(cluster)
        for key in [*records, MIGRATION_MARKER]:
            target.delete(key)
        barrier = threading.Barrier(3)

        def start(barrier: threading.Barrier = barrier) -> TableMetadataStore:
            barrier.wait()
            return open_metadata_store(SegmentStoreClient(cluster), storage)

        with ThreadPoolExecutor(3) as pool:
            stores = [f.result(30) for f in [pool.submit(start) for _ in range(3)]]
        for store in stores:
            _assert_migrated(store, records)
            assert store.get(MIGRATION_MARKER).value["records"] == len(records)  # type: ignore[union-attr]


def test_a_live_update_after_another_start_finished_the_copy_is_kept(
    cluster: InProcessCluster,
) -> None:
    storage = InMemoryChunkStorage()
    records = _chunk_records(storage)
    store = open_metadata_store(SegmentStoreClient(cluster), storage)
    current = store.get("scopes/a")
    assert current is not None
    store.put("scopes/a", {"created_ms": 1, "live": True}, current.version)
    # A slower start, which read no marker before, copies now: the live record stays.
    assert migrate_chunk_records(ChunkMetadataStore(storage), _table_store(cluster)) == len(records)
    assert store.get("scopes/a").value == {"created_ms": 1, "live": True}  # type: ignore[union-attr]


def test_a_damaged_source_record_is_skipped_and_reported(cluster: InProcessCluster) -> None:
    storage = InMemoryChunkStorage()
    records = _chunk_records(storage)
    source = ChunkMetadataStore(storage)
    (name,) = storage.list("_system/controller/streams/a/s1/")
    storage.delete(name)
    storage.create(name, b"crc32:00000000\n{}")
    target = _table_store(cluster)
    assert migrate_chunk_records(source, target) == len(records) - 1
    assert target.get("streams/a/s1") is None
    marker = target.get(MIGRATION_MARKER)
    assert marker is not None and list(marker.value["skipped"]) == ["streams/a/s1"]
    assert "streams/a/s1" in marker.value["skipped"]["streams/a/s1"]
    del records["streams/a/s1"]
    for key, value in records.items():
        assert target.get(key).value == value  # type: ignore[union-attr]


def test_open_metadata_store_migrates_once(cluster: InProcessCluster) -> None:
    client = SegmentStoreClient(cluster)
    first = open_metadata_store(client, InMemoryChunkStorage())
    assert first.get(MIGRATION_MARKER).value == {"records": 0, "skipped": {}}  # type: ignore[union-attr]
    storage = InMemoryChunkStorage()
    _chunk_records(storage)
    again = open_metadata_store(client, storage)  # marker present: nothing copied
    assert again.get("scopes/a") is None


def test_a_format_5_data_directory_opens_with_its_controller_records(
    cluster: InProcessCluster, tmp_path: Path
) -> None:
    """A format-5 data dir: cluster.json upgraded (to 7 now: 6 -> 7 only records the number),
    the records moved on the first start, and the controller sees the old scopes and
    streams."""
    from pravega_ray.cluster import _FORMAT, _check_data_dir

    tier2 = FileSystemChunkStorage(str(tmp_path / "tier2"))
    records = _chunk_records(tier2)
    (tmp_path / "cluster.json").write_text(json.dumps({"format": 5, "container_count": 2}))
    _check_data_dir(tmp_path, 2, None, None)
    assert json.loads((tmp_path / "cluster.json").read_text())["format"] == _FORMAT == 7
    store = open_metadata_store(SegmentStoreClient(cluster), tier2)
    _assert_migrated(store, records)
    controller = Controller(store, SegmentHelper(SegmentStoreClient(cluster)), 2)
    assert controller.list_scopes() == ["a", "b"]


@pytest.mark.parametrize("watch", [False, True], ids=["validated", "watched"])
def test_records_listings_and_caches_stay_right_while_compaction_moves_and_truncates(
    watch: bool,
) -> None:
    """The controller's records under compaction (docs/tables.md "Compaction"): two stores
    write and read the same records with compare-and-set while the partitions are compacted
    under them; every get answers the latest value and version, every listing the live
    keys, and the partitions' segments were truncated."""
    cluster = InProcessCluster(
        2,
        watch_metadata=watch,
        table_compaction_min_bytes=3000,
        table_compaction_round_bytes=1500,
    )
    try:
        writer = TableMetadataStore(SegmentStoreClient(cluster), partitions=2, watch=watch)
        reader = TableMetadataStore(SegmentStoreClient(cluster), partitions=2, watch=watch)
        writer.ensure_created()
        latest: dict[str, tuple[dict[str, Any], int]] = {}
        for step in range(60):
            for i in range(8):
                key = f"streams/sc/s{i}"
                if step % 11 == 5 and i % 4 == 0 and key in latest:
                    writer.delete(key)
                    del latest[key]
                    continue
                value = {"step": step, "pad": "x" * 40}
                version = latest[key][1] if key in latest else None
                latest[key] = (value, writer.put(key, value, version))
            if step % 10 == 9:
                for store in (writer, reader):
                    assert store.list_keys("streams/sc") == sorted(latest)
                    for key, (value, version) in latest.items():
                        got = store.get(key)
                        assert got is not None and (got.value, got.version) == (value, version)
        # A conditional put naming a version from before compaction moved it.
        key = sorted(latest)[0]
        reader.put(key, {"last": True}, latest[key][1])
        assert writer.get(key) is not None and writer.get(key).value == {"last": True}
        starts = [
            cluster.segments.get_info(segment).result().start_offset for segment in writer.segments
        ]
        assert max(starts) > 0, "compaction never truncated a partition"
        writer.close()
        reader.close()
    finally:
        cluster.shutdown()
