"""Key-value tables on the real container actors (shared local Ray, filesystem tiers)."""

from __future__ import annotations

import threading

import pytest
import ray

import pravega_ray as pr
from pravega_ray.naming import container_for_segment
from pravega_ray_actors.options import container_name

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]


def appended(cluster, segment: str) -> int:
    """How many entries (puts and tombstones) were ever appended to a table segment."""
    count, position = 0, 0
    handle = cluster.container_handle(segment)
    while True:
        entries, position = ray.get(handle.table_read_changes.remote(segment, position, 1 << 20))
        if not entries:
            return count
        count += len(entries)


def test_typed_errors_and_iteration_through_actors(cluster, unique_name) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope(unique_name)
    assert mgr.create_key_value_table(unique_name, "t", partitions=3)
    kvt = cluster.key_value_table(unique_name, "t", value_serializer=pr.JsonSerializer())
    version = kvt.put_if_absent(b"k", {"a": 1})
    with pytest.raises(pr.BadKeyVersionError) as bad:
        kvt.put_if_absent(b"k", {"a": 2})
    assert bad.value.key == b"k" and bad.value.actual == version
    with pytest.raises(pr.NoSuchKeyError):
        kvt.replace(b"other", {}, version)
    for i in range(3000):
        kvt.put(b"key-%d" % i, i)
    assert sum(1 for _ in kvt.iter_keys()) == 3001
    assert sorted(e.value for e in kvt.iter_entries() if e.key != b"k") == list(range(3000))
    with pytest.raises(pr.KeyValueTableNotFoundError):
        cluster.key_value_table(unique_name, "missing")
    assert mgr.delete_key_value_table(unique_name, "t")


def test_container_kills_between_puts_and_acks_lose_and_duplicate_nothing(
    cluster, unique_name
) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope(unique_name)
    mgr.create_key_value_table(unique_name, "t", partitions=2)
    segments = mgr.get_key_value_table_info(unique_name, "t").segments
    victims = {container_for_segment(s, cluster.container_count) for s in segments}
    handles = [ray.get_actor(container_name(v), namespace=cluster.namespace) for v in victims]
    kvt = cluster.key_value_table(unique_name, "t")
    acked: dict[bytes, int] = {}
    operations = 3000
    progress = threading.Semaphore(0)
    failure: list[BaseException] = []

    def write() -> None:
        try:
            for i in range(operations):
                key = b"k%d" % (i % 200)
                current = acked.get(key)
                if current is None:  # conditional: a duplicate would fail its condition
                    acked[key] = kvt.put_if_absent(key, b"v%d" % i)
                else:
                    acked[key] = kvt.replace(key, b"v%d" % i, current)
                if i % 500 == 250:
                    progress.release()
        except BaseException as e:  # reported below
            failure.append(e)
            progress.release()

    writer = threading.Thread(target=write)
    writer.start()
    for _ in range(3):  # kill the partitions' containers while puts are in flight, 3 times
        assert progress.acquire(timeout=120)
        for handle in handles:
            ray.kill(handle, no_restart=False)
    writer.join(180)
    assert not writer.is_alive() and not failure, failure
    assert kvt.retries >= 1, "no call was in flight when the containers died"
    assert {e.key: e.version for e in kvt.iter_entries()} == acked
    assert sum(appended(cluster, s) for s in segments) == operations, "applied twice or lost"
    # Everything into Tier-2 (attribute index included), then restart and read it back.
    ray.get([h.checkpoint.remote() for h in handles])
    for handle in handles:
        ray.kill(handle, no_restart=False)
    fresh = cluster.key_value_table(unique_name, "t")
    keys = sorted(acked)
    got = fresh.get_all(keys)
    assert [(e.key, e.version) for e in got] == [(k, acked[k]) for k in keys]


def test_key_families_and_atomic_updates_through_actors(cluster, unique_name) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope(unique_name)
    assert mgr.create_key_value_table(
        unique_name, "f", partitions=3, primary_key_length=4, secondary_key_length=2
    )
    with pytest.raises(pr.InvalidArgumentError):
        mgr.create_key_value_table(unique_name, "g", 3, primary_key_length=True)
    kvt = cluster.key_value_table(unique_name, "f")
    assert (kvt.info.primary_key_length, kvt.info.secondary_key_length) == (4, 2)
    v = kvt.update([pr.Insert(b"acct01", b"100"), pr.Insert((b"acct", b"02"), b"0")])
    # A transfer: both balances move together, each on its own version.
    w = kvt.update([pr.Put(b"acct01", b"60", version=v[0]), pr.Put(b"acct02", b"40", v[1])])
    with pytest.raises(pr.BadKeyVersionError):  # a stale version: nothing moves
        kvt.update([pr.Put(b"acct01", b"0", version=w[0]), pr.Put(b"acct02", b"99", v[1])])
    with pytest.raises(pr.InvalidArgumentError):  # two primary keys
        kvt.update([pr.Put(b"acct01", b"1"), pr.Put(b"bank01", b"1")])
    with pytest.raises(pr.InvalidArgumentError):  # a key of the wrong length
        kvt.update([pr.Put(b"acct001", b"1")])
    kvt.put(b"bank01", b"x")
    fresh = cluster.key_value_table(unique_name, "f")  # another client sees the same layout
    assert {e.key: e.value for e in fresh.iter_entries(primary_key=b"acct")} == {
        b"acct01": b"60",
        b"acct02": b"40",
    }
    assert [e.key for e in fresh.iter_entries(primary_key=b"acct", secondary_from=b"02")] == [
        b"acct02"
    ]
    assert fresh.exists((b"bank", b"01")) and not fresh.exists(b"bank02")
    assert fresh.update([pr.Remove(b"acct01", w[0]), pr.Remove(b"acct02")]) == [None, None]
    assert [e.key for e in fresh.iter_entries()] == [b"bank01"]
    assert mgr.delete_key_value_table(unique_name, "f")


def test_multi_key_updates_across_container_kills_apply_exactly_once(cluster, unique_name) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope(unique_name)
    mgr.create_key_value_table(unique_name, "f", 2, primary_key_length=2, secondary_key_length=1)
    segments = mgr.get_key_value_table_info(unique_name, "f").segments
    victims = {container_for_segment(s, cluster.container_count) for s in segments}
    handles = [ray.get_actor(container_name(v), namespace=cluster.namespace) for v in victims]
    kvt = cluster.key_value_table(unique_name, "f")
    acked: dict[bytes, int] = {}
    batches = 600
    progress = threading.Semaphore(0)
    failure: list[BaseException] = []

    def write() -> None:
        try:
            for i in range(batches):
                keys = [b"p%d" % (i % 5) + b"%d" % s for s in range(3)]
                mods = [  # each conditional on what was acked: a duplicate would fail
                    pr.Insert(k, b"%d" % i)
                    if k not in acked
                    else pr.Put(k, b"%d" % i, version=acked[k])
                    for k in keys
                ]
                for k, version in zip(keys, kvt.update(mods), strict=True):
                    acked[k] = version
                if i % 200 == 100:
                    progress.release()
        except BaseException as e:  # reported below
            failure.append(e)
            progress.release()

    writer = threading.Thread(target=write)
    writer.start()
    for _ in range(2):  # kill the partitions' containers while batches are in flight
        assert progress.acquire(timeout=120)
        for handle in handles:
            ray.kill(handle, no_restart=False)
    writer.join(180)
    assert not writer.is_alive() and not failure, failure
    assert {e.key: e.version for e in kvt.iter_entries()} == acked
    assert sum(appended(cluster, s) for s in segments) == 3 * batches, "applied twice or lost"
