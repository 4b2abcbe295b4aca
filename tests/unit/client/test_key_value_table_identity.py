"""Key-value tables: a stale client after delete and re-create, undecodable entries, big gets."""

from __future__ import annotations

import pytest

import pravega_ray as pr
from pravega_ray.constants import TABLE_GET_KEYS_MAX
from pravega_ray.errors import KeyValueTableNotFoundError, SerializationError
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=2)
    c.stream_manager().create_scope("sc")
    yield c
    c.shutdown()


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
    assert all(e is not None and e.value == b"fresh" for e in fresh.get_all(
        [f"key-{i}".encode() for i in range(64)]))
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
