"""Key-value tables: stale clients across delete, re-create and restart; undecodable keys;
get_all requests bounded per call; segment numbers of a name never reused."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray import constants
from pravega_ray.client.key_value_table import KeyValueTable
from pravega_ray.constants import TABLE_GET_KEYS_MAX
from pravega_ray.controller.controller import Controller
from pravega_ray.controller.stream_metadata_store import ChunkMetadataStore
from pravega_ray.errors import IllegalStateError, KeyValueTableNotFoundError, SerializationError
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.storage.memory import InMemoryChunkStorage
from tests.unit.controller.test_controller import FakeSegmentStore

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=2)
    c.stream_manager().create_scope("sc")
    yield c
    c.shutdown()


def test_put_of_a_client_of_a_table_recreated_across_a_restart_is_not_found(cluster) -> None:
    mgr = cluster.stream_manager()
    mgr.create_key_value_table("sc", "t", partitions=4)
    stale = cluster.key_value_table("sc", "t")
    assert mgr.delete_key_value_table("sc", "t")
    cluster.restart()  # the safe starting number is stored, not remembered in memory
    assert mgr.create_key_value_table("sc", "t", partitions=2)
    fresh = cluster.key_value_table("sc", "t")
    assert set(fresh.info.segments).isdisjoint(stale.info.segments)
    refused = 0
    for i in range(64):
        with pytest.raises(KeyValueTableNotFoundError, match="deleted"):
            stale.put(f"key-{i}".encode(), b"stale")
        refused += 1
    assert refused == 64
    assert list(fresh.iter_keys()) == []  # nothing of the stale client's landed
    with pytest.raises(KeyValueTableNotFoundError):
        stale.put_if_absent(b"k", b"v")
    with pytest.raises(KeyValueTableNotFoundError):
        list(stale.iter_entries())


def test_create_key_value_table_once_the_segment_numbers_are_used_up_is_illegal_state() -> None:
    storage = InMemoryChunkStorage()
    controller = Controller(ChunkMetadataStore(storage), FakeSegmentStore(), 4)
    controller.create_scope("sc")
    controller.create_key_value_table("sc", "t", 4)
    controller.delete_key_value_table("sc", "t")
    store = ChunkMetadataStore(storage)
    current = store.get("deleted/kvtables/sc/t")
    assert current is not None and current.value == {"next_segment_number": 4}
    store.put("deleted/kvtables/sc/t", {"next_segment_number": 2**32 - 2}, current.version)
    with pytest.raises(IllegalStateError, match="used up"):
        controller.create_key_value_table("sc", "t", 4)
    assert controller.list_key_value_tables("sc") == []  # nothing stored
    assert controller.create_key_value_table("sc", "t", 2)
    assert controller.get_key_value_table("sc", "t").segments[-1] == "sc/_kvt.t/4294967295.#epoch.0"


def test_iter_keys_goes_on_after_an_undecodable_key(cluster) -> None:
    cluster.stream_manager().create_key_value_table("sc", "t", partitions=3)
    raw = cluster.key_value_table("sc", "t")
    for i in range(10):
        raw.put(f"k{i}".encode(), b"v")
    raw.put(b"\xff\xfe", b"v")
    typed = cluster.key_value_table("sc", "t", key_serializer=pr.Utf8Serializer())
    keys, errors = [], []
    iterator = typed.iter_keys()
    assert iter(iterator) is iterator
    while True:
        try:
            keys.append(next(iterator).key)
        except SerializationError as e:
            errors.append((e.key, e.data))  # type: ignore[attr-defined]
        except StopIteration:
            break
    assert sorted(keys) == sorted(f"k{i}" for i in range(10))
    assert errors == [(b"\xff\xfe", None)]  # keys only: no value was read
    with pytest.raises(StopIteration):
        next(iterator)  # finished stays finished


def test_get_all_with_an_undecodable_value_names_its_key_and_changes_nothing(cluster) -> None:
    cluster.stream_manager().create_key_value_table("sc", "t", partitions=2)
    raw = cluster.key_value_table("sc", "t")
    raw.put(b"good", b'"fine"')
    version = raw.put(b"bad", b"{not json")
    typed = cluster.key_value_table("sc", "t", value_serializer=pr.JsonSerializer())
    with pytest.raises(SerializationError) as raised:
        typed.get_all([b"good", b"bad"])
    error = raised.value
    assert (error.key, error.data, error.version) == (b"bad", b"{not json", version)  # type: ignore[attr-defined]
    assert raw.get(b"bad") == pr.TableEntry(b"bad", b"{not json", version)
    assert typed.get(b"good").value == "fine"  # type: ignore[union-attr]


class CountingGets:
    """A segment-store connection that records how many keys each table ``get`` carries."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.get_sizes: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def table_get(self, segment: str, keys: list[bytes]) -> Future[Any]:
        self.get_sizes.append(len(keys))
        return self._inner.table_get(segment, keys)


def test_get_all_splits_each_partition_into_bounded_requests(cluster) -> None:
    cluster.stream_manager().create_key_value_table("sc", "t", partitions=2)
    info = cluster.stream_manager().get_key_value_table_info("sc", "t")
    counting = CountingGets(cluster._segments)
    kvt: KeyValueTable[bytes, bytes] = KeyValueTable(info, counting)
    for i in range(0, 3000, 7):
        kvt.put(f"k{i}".encode(), str(i).encode())
    keys = [f"k{i}".encode() for i in range(2 * constants.TABLE_GET_KEYS_MAX + 100)]
    found = kvt.get_all(keys)
    assert max(counting.get_sizes) <= constants.TABLE_GET_KEYS_MAX
    assert sum(counting.get_sizes) == len(keys)
    assert [e.value for e in found if e is not None] == [str(i).encode() for i in range(0, 3000, 7)]
    assert all(e is None for e, k in zip(found, keys, strict=True) if int(k[1:]) % 7)


def test_a_client_of_a_deleted_and_recreated_table_gets_a_typed_error(cluster) -> None:
    mgr = cluster.stream_manager()
    mgr.create_key_value_table("sc", "t", partitions=4)
    stale = cluster.key_value_table("sc", "t")
    stale.put(b"before", b"1")
    assert mgr.delete_key_value_table("sc", "t")
    mgr.create_key_value_table("sc", "t", partitions=2)
    fresh = cluster.key_value_table("sc", "t")
    assert set(fresh.info.segments).isdisjoint(stale.info.segments)  # new names, never reused
    for i in range(64):
        with pytest.raises(KeyValueTableNotFoundError, match="deleted"):
            stale.put(f"key-{i}".encode(), b"stale")
    with pytest.raises(KeyValueTableNotFoundError):
        stale.get(b"before")
    with pytest.raises(KeyValueTableNotFoundError):
        list(stale.iter_keys())
    for i in range(64):
        fresh.put(f"key-{i}".encode(), b"fresh")
    assert all(
        e is not None and e.value == b"fresh"
        for e in fresh.get_all([f"key-{i}".encode() for i in range(64)])
    )
    assert fresh.get(b"before") is None
    # And once more: numbering keeps moving on.
    mgr.delete_key_value_table("sc", "t")
    mgr.create_key_value_table("sc", "t", partitions=4)
    third = cluster.key_value_table("sc", "t")
    assert set(third.info.segments).isdisjoint(fresh.info.segments + stale.info.segments)


def test_undecodable_entries_raise_typed_errors_and_iteration_goes_on(cluster) -> None:
    cluster.stream_manager().create_key_value_table("sc", "t", partitions=2)
    raw = cluster.key_value_table("sc", "t")
    for i in range(20):
        raw.put(f"k{i:02d}".encode(), f'"v{i}"'.encode())
    raw.put(b"bad-value", b"\xff{")
    raw.put(b"\xfe-bad-key", b'"fine"')
    typed = cluster.key_value_table(
        "sc", "t", key_serializer=pr.Utf8Serializer(), value_serializer=pr.JsonSerializer()
    )
    with pytest.raises(SerializationError) as raised:
        typed.get("bad-value")
    assert raised.value.key == b"bad-value" and raised.value.data == b"\xff{"  # type: ignore[attr-defined]
    assert typed.get("k03").value == "v3"  # type: ignore[union-attr]
    entries, errors = [], []
    iterator = typed.iter_entries()
    while True:
        try:
            entries.append(next(iterator))
        except SerializationError as e:
            errors.append(e.key)  # type: ignore[attr-defined]
        except StopIteration:
            break
    assert set(errors) == {b"\xfe-bad-key", b"bad-value"} and len(errors) == 2
    assert sorted(e.key for e in entries) == [f"k{i:02d}" for i in range(20)]
    assert len(list(raw.iter_entries())) == 22  # nothing was consumed or changed


def test_get_all_of_more_keys_than_one_request_may_carry(cluster) -> None:
    cluster.stream_manager().create_key_value_table("sc", "t", partitions=1)
    kvt = cluster.key_value_table("sc", "t")
    for i in range(0, 50):
        kvt.put(f"k{i}".encode(), b"v")
    keys = [f"k{i}".encode() for i in range(TABLE_GET_KEYS_MAX * 2 + 7)]
    found = kvt.get_all(keys)
    assert len(found) == len(keys)
    assert sum(e is not None for e in found) == 50
    with pytest.raises(pr.InvalidArgumentError):
        kvt.get_all(b"not a list of keys")
