"""Key families, multi-key ``update``, ``exists`` and filtered iteration of key-value tables
(issue 27 item 4), through the public client API on an in-process cluster."""

from __future__ import annotations

import math
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.contracts.records import check_key_lengths
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster():
    c = InProcessCluster(container_count=3)
    c.stream_manager().create_scope("sc")
    yield c
    c.shutdown()


def families(cluster: InProcessCluster, name: str = "f", partitions: int = 4, **kw: Any) -> Any:
    """A table with 4-byte primary and 2-byte secondary keys (or ``kw``'s lengths)."""
    lengths = {"primary_key_length": 4, "secondary_key_length": 2, **kw}
    assert cluster.stream_manager().create_key_value_table("sc", name, partitions, **lengths)
    return cluster.key_value_table("sc", name)


def everything(kvt: Any) -> dict[bytes, tuple[bytes, int]]:
    return {e.key: (e.value, e.version) for e in kvt.iter_entries()}


def test_key_lengths_are_in_the_record_and_every_client_sees_them(
    cluster: InProcessCluster,
) -> None:
    mgr = cluster.stream_manager()
    assert mgr.create_key_value_table("sc", "f", 2, primary_key_length=4, secondary_key_length=2)
    info = mgr.get_key_value_table_info("sc", "f")
    assert (info.primary_key_length, info.secondary_key_length, info.key_families) == (4, 2, True)
    assert mgr.create_key_value_table("sc", "p", 2, primary_key_length=8)  # secondary: 0
    assert mgr.get_key_value_table_info("sc", "p").secondary_key_length == 0
    assert mgr.create_key_value_table("sc", "n", 2)
    info = mgr.get_key_value_table_info("sc", "n")
    assert (info.primary_key_length, info.secondary_key_length, info.key_families) == (
        None,
        None,
        False,
    )
    # Another create of the name with other lengths is "exists", and changes nothing.
    assert not mgr.create_key_value_table("sc", "f", 2, primary_key_length=1)
    assert cluster.key_value_table("sc", "f").info.primary_key_length == 4


def test_records_written_before_key_families_still_load(cluster: InProcessCluster) -> None:
    store = StreamMetadataStore(cluster.metadata)
    cluster.stream_manager().create_key_value_table("sc", "old", 2)
    assert "key_lengths" not in store.get_key_value_table_record("sc", "old")
    kvt = cluster.key_value_table("sc", "old")
    kvt.put(b"k", b"v")
    assert kvt.exists(b"k") and not kvt.exists(b"x")


@pytest.mark.parametrize(
    ("primary", "secondary"),
    [
        (0, 2),
        (-1, None),
        (True, None),
        (4, False),
        (4.0, None),
        (math.nan, None),
        ("4", None),
        (4, -1),
        (None, 2),
        (8 * 1024, 1),
        (8 * 1024 + 1, None),
    ],
)
def test_bad_key_lengths_are_invalid_and_create_nothing(
    cluster: InProcessCluster, primary: Any, secondary: Any
) -> None:
    mgr = cluster.stream_manager()
    with pytest.raises(pr.InvalidArgumentError):
        mgr.create_key_value_table(
            "sc", "bad", 2, primary_key_length=primary, secondary_key_length=secondary
        )
    assert mgr.list_key_value_tables("sc") == []


def test_key_length_bounds() -> None:
    assert check_key_lengths(8 * 1024, None) == (8 * 1024, 0)
    assert check_key_lengths(1, 8 * 1024 - 1) == (1, 8 * 1024 - 1)
    assert check_key_lengths(None, None) == (None, None)


def test_update_of_one_primary_key_is_atomic_and_returns_versions(
    cluster: InProcessCluster,
) -> None:
    kvt = families(cluster)
    v = kvt.update([pr.Insert(b"user" + b"01", b"a"), pr.Put((b"user", b"02"), b"b")])
    assert len(v) == 2 and all(isinstance(x, int) for x in v)
    assert kvt.get(b"user01") == pr.TableEntry(b"user01", b"a", v[0])
    assert kvt.get((b"user", b"02")) == pr.TableEntry((b"user", b"02"), b"b", v[1])
    assert kvt.exists((b"user", b"01")) and not kvt.exists(b"user03")
    # Every condition holds: all applied, in order; a Remove answers None.
    w = kvt.update(
        [
            pr.Put(b"user01", b"a2", version=v[0]),
            pr.Remove(b"user02", version=v[1]),
            pr.Insert(b"user03", b"c"),
            pr.Remove(b"user09"),  # absent, unconditional: fine
        ]
    )
    assert w[1] is None and w[3] is None and w[0] > v[0] and w[2] > w[0]
    assert everything(kvt) == {b"user01": (b"a2", w[0]), b"user03": (b"c", w[2])}
    before = everything(kvt)
    # One failing condition among several: nothing changes.
    failing = [
        [pr.Put(b"user01", b"x", version=w[0]), pr.Insert(b"user03", b"dup")],  # exists
        [pr.Insert(b"user04", b"d"), pr.Put(b"user01", b"x", version=v[0])],  # stale
        [pr.Put(b"user05", b"e"), pr.Remove(b"user02", version=v[1])],  # absent
        [pr.Put(b"user06", b"e"), pr.Put(b"user07", b"x", version=w[0])],  # absent
    ]
    for mods, error in zip(
        failing,
        [pr.BadKeyVersionError, pr.BadKeyVersionError, pr.NoSuchKeyError, pr.NoSuchKeyError],
        strict=True,
    ):
        with pytest.raises(error) as caught:
            kvt.update(mods)
        assert caught.value.key in {m.key for m in mods}
        assert everything(kvt) == before
    assert kvt.update([]) == []


def test_update_rejects_hostile_batches_and_changes_nothing(cluster: InProcessCluster) -> None:
    kvt = families(cluster)
    kvt.put(b"aaaa01", b"x")
    before = everything(kvt)
    bad: list[Any] = [
        [pr.Put(b"aaaa01", b"1"), pr.Put(b"bbbb01", b"2")],  # two primary keys
        [pr.Put(b"aaaa02", b"1"), pr.Remove(b"aaaa02")],  # a key twice
        [pr.Put(b"aaaa02", b"1"), pr.Put((b"aaaa", b"02"), b"2")],  # the same key twice
        [pr.Put(b"aaaa0", b"1")],  # too short
        [pr.Put(b"aaaa001", b"1")],  # too long
        [pr.Put(b"aaaa02", "not bytes")],
        [pr.Put("aaaa02", b"1")],
        [pr.Put(b"aaaa02", b"1"), ("aaaa03", b"1")],  # not a modification
        [pr.Put(b"aaaa02", b"1"), None],
        b"aaaa02",
        "aaaa02",
        42,
        None,
    ]
    for mods in bad:
        with pytest.raises(pr.InvalidArgumentError):
            kvt.update(mods)
        assert everything(kvt) == before
    for version in (-1, True, 1.5, "1"):
        with pytest.raises(pr.InvalidArgumentError):
            pr.Put(b"aaaa02", b"1", version=version)
        with pytest.raises(pr.InvalidArgumentError):
            pr.Remove(b"aaaa02", version=version)
    # The pair form is a key: joined, then checked against the lengths.
    kvt.update([pr.Put((b"aaa", b"a02"), b"2")])
    assert kvt.get(b"aaaa02").value == b"2"


def test_single_key_calls_check_key_lengths_and_route_by_primary_key(
    cluster: InProcessCluster,
) -> None:
    kvt = families(cluster, partitions=4)
    for key in (b"short", b"much too long", (b"a", b"b"), (b"aaaa", b"bbb")):
        with pytest.raises(pr.InvalidArgumentError):
            kvt.put(key, b"v")
        with pytest.raises(pr.InvalidArgumentError):
            kvt.get(key)
    where: dict[bytes, set[str]] = {}  # primary key -> the segments holding its keys
    for pk in (b"pk%02d" % i for i in range(8)):
        kvt.update([pr.Put(pk + sk, b"v") for sk in (b"s1", b"s2")])
        kvt.put(pk + b"s3", b"v")
    for segment in kvt.info.segments:
        page, _ = cluster._segments.table_iterate(segment, None, 100, False).result(10)
        for entry in page:
            where.setdefault(entry.key[:4], set()).add(segment)
    assert len(where) == 8 and all(len(segments) == 1 for segments in where.values())
    assert len(set.union(*where.values())) > 1  # primary keys still spread over partitions


def test_iterate_a_primary_key_and_ranges(cluster: InProcessCluster) -> None:
    kvt = families(cluster, partitions=3)
    for p in range(5):
        kvt.update([pr.Put(b"pk%02d" % p + b"%02d" % s, b"%d" % (p * 10 + s)) for s in range(6)])
    keys = lambda **kw: sorted(e.key for e in kvt.iter_entries(**kw))  # noqa: E731
    assert keys(primary_key=b"pk03") == [b"pk03%02d" % s for s in range(6)]
    assert keys(primary_key=b"pk03", secondary_from=b"02", secondary_to=b"04") == [
        b"pk0302",
        b"pk0303",
        b"pk0304",
    ]
    assert keys(primary_key=b"pk03", secondary_from=b"05") == [b"pk0305"]
    assert keys(primary_key=b"pk09") == []
    assert keys(primary_from=b"pk01", primary_to=b"pk02") == sorted(
        b"pk%02d%02d" % (p, s) for p in (1, 2) for s in range(6)
    )
    assert len(keys(primary_from=b"pk04")) == 6
    assert len(keys()) == 30
    assert sorted(k.key for k in kvt.iter_keys(b"pk00")) == [b"pk00%02d" % s for s in range(6)]
    for bad in (
        {"primary_key": b"pk0"},
        {"primary_key": "pk00"},
        {"secondary_from": b"01"},
        {"primary_key": b"pk00", "primary_to": b"pk01"},
        {"primary_from": "pk00"},
        {"primary_key": b"pk00", "secondary_to": 3},
    ):
        with pytest.raises(pr.InvalidArgumentError):
            list(kvt.iter_entries(**bad))


def test_a_primary_key_iteration_skips_undecodable_entries_of_other_keys(
    cluster: InProcessCluster,
) -> None:
    cluster.stream_manager().create_key_value_table(
        "sc", "j", 1, primary_key_length=2, secondary_key_length=1
    )
    raw = cluster.key_value_table("sc", "j")
    raw.put(b"aa1", b"not json")
    kvt = cluster.key_value_table("sc", "j", value_serializer=pr.JsonSerializer())
    kvt.update([pr.Put(b"bb1", [1]), pr.Put(b"bb2", [2])])
    assert sorted(e.value for e in kvt.iter_entries(primary_key=b"bb")) == [[1], [2]]


def test_tables_without_key_families_update_within_one_partition(
    cluster: InProcessCluster,
) -> None:
    mgr = cluster.stream_manager()
    mgr.create_key_value_table("sc", "one", 1)
    one = cluster.key_value_table("sc", "one", key_serializer=pr.Utf8Serializer())
    v = one.update([pr.Insert("a", b"1"), pr.Insert("bcd", b"2")])
    with pytest.raises(pr.BadKeyVersionError):
        one.update([pr.Put("zz", b"3"), pr.Insert("a", b"again")])
    assert one.get("zz") is None and one.exists("a")
    assert one.update([pr.Remove("a", v[0]), pr.Put("bcd", b"4", v[1])])[0] is None
    with pytest.raises(pr.InvalidArgumentError):
        list(one.iter_entries(primary_key=b"a"))  # no key families
    mgr.create_key_value_table("sc", "four", 4)
    four = cluster.key_value_table("sc", "four")
    keys = [b"k%d" % i for i in range(12)]
    with pytest.raises(pr.InvalidArgumentError):  # keys of several partitions
        four.update([pr.Put(k, b"v") for k in keys])
    assert [k for k in keys if four.exists(k)] == []
    assert four.update([pr.Put(b"k1", b"v")])[0] == four.get(b"k1").version


def test_a_damaged_key_lengths_field_is_data_corruption(cluster: InProcessCluster) -> None:
    store = StreamMetadataStore(cluster.metadata)
    cluster.stream_manager().create_key_value_table("sc", "d", 1, primary_key_length=2)
    record = store._records.get("kvtables/sc/d")
    store._records.put("kvtables/sc/d", {**record.value, "key_lengths": [0, 1]}, record.version)
    with pytest.raises(pr.DataCorruptionError):
        store.get_key_value_table("sc", "d")


def test_the_segment_store_filters_a_page_by_key_prefix(cluster: InProcessCluster) -> None:
    kvt = families(cluster, "x", partitions=1)
    for p in range(4):
        kvt.update([pr.Put(b"pk%02d" % p + b"%02d" % s, b"v") for s in range(5)])
    segment = kvt.info.segments[0]
    page, cursor = cluster._segments.table_iterate(segment, None, 1000, False, b"pk02").result(10)
    assert cursor is None and sorted(e.key for e in page) == [b"pk02%02d" % s for s in range(5)]
    seen, cursor = [], None
    while True:  # small pages: some short or empty, none lost
        page, cursor = cluster._segments.table_iterate(segment, cursor, 3, True, b"pk01").result(10)
        seen += [e.key for e in page]
        if cursor is None:
            break
    assert sorted(seen) == [b"pk01%02d" % s for s in range(5)]
    with pytest.raises(pr.InvalidArgumentError):
        cluster._segments.table_iterate(segment, None, 10, True, "pk01").result(10)


def test_batches_over_the_segment_store_limits_are_invalid_and_change_nothing(
    cluster: InProcessCluster,
) -> None:
    kvt = families(cluster, "big", partitions=2, primary_key_length=1, secondary_key_length=4)
    too_many = [pr.Put(b"a%04d" % i, b"v") for i in range(4097)]
    with pytest.raises(pr.InvalidArgumentError):
        kvt.update(too_many)
    too_big = [pr.Put(b"a%04d" % i, bytes(1 << 20)) for i in range(9)]  # over 8 MiB
    with pytest.raises(pr.InvalidArgumentError):
        kvt.update(too_big)
    assert list(kvt.iter_keys()) == []
    assert len(kvt.update(too_many[:4096])) == 4096
    assert sum(1 for _ in kvt.iter_keys(b"a")) == 4096
