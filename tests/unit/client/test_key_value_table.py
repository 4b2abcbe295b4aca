"""Key-value tables through the public client API on an in-process cluster (memory backends)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray import constants
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster():
    c = InProcessCluster(container_count=3)
    c.stream_manager().create_scope("sc")
    yield c
    c.shutdown()


def changes(cluster: InProcessCluster, segment: str) -> list[Any]:
    """Every entry ever appended to a table segment (puts and tombstones), in order."""
    found, position = [], 0
    while True:
        entries, position = cluster._segments.table_read_changes(segment, position, 4096).result(10)
        if not entries:
            return found
        found += entries


def test_put_get_replace_remove_with_versions(cluster: InProcessCluster) -> None:
    mgr = cluster.stream_manager()
    assert mgr.create_key_value_table("sc", "t", partitions=3)
    assert not mgr.create_key_value_table("sc", "t", partitions=3)
    kvt = cluster.key_value_table(
        "sc", "t", key_serializer=pr.Utf8Serializer(), value_serializer=pr.JsonSerializer()
    )
    v1 = kvt.put("a", {"n": 1})
    assert kvt.get("a") == pr.TableEntry("a", {"n": 1}, v1)
    with pytest.raises(pr.BadKeyVersionError) as exists:
        kvt.put_if_absent("a", {"n": 0})
    assert exists.value.actual == v1
    v2 = kvt.replace("a", {"n": 2}, v1)
    assert v2 > v1
    with pytest.raises(pr.BadKeyVersionError):
        kvt.replace("a", {"n": 3}, v1)  # stale version
    with pytest.raises(pr.NoSuchKeyError):
        kvt.replace("missing", {"n": 3}, v1)
    vb = kvt.put_if_absent("b", [1, 2])
    assert kvt.get_all(["b", "missing", "a"]) == [
        pr.TableEntry("b", [1, 2], vb),
        None,
        pr.TableEntry("a", {"n": 2}, v2),
    ]
    with pytest.raises(pr.BadKeyVersionError):
        kvt.remove("a", v1)
    kvt.remove("a", v2)
    kvt.remove("a")  # absent: a no-op
    with pytest.raises(pr.NoSuchKeyError):
        kvt.remove("a", v2)
    assert kvt.get("a") is None
    assert [k.key for k in kvt.iter_keys()] == ["b"]
    assert list(kvt.iter_entries()) == [pr.TableEntry("b", [1, 2], vb)]
    kvt.close()
    with pytest.raises(pr.ClientClosedError):
        kvt.get("b")


def test_many_keys_spread_over_partitions_and_iterate_exactly_once(
    cluster: InProcessCluster,
) -> None:
    cluster.stream_manager().create_key_value_table("sc", "many", partitions=4)
    kvt = cluster.key_value_table("sc", "many")
    expected = {}
    for i in range(2500):  # more than one iteration page per partition
        key = b"key-%d" % i
        expected[key] = kvt.put(key, b"value-%d" % i)
    listed = [(e.key, e.value, e.version) for e in kvt.iter_entries()]
    assert len(listed) == len(expected)
    assert {k: v for k, _, v in listed} == expected
    assert all(value == b"value-" + key[4:] for key, value, _ in listed)
    info = cluster.stream_manager().get_key_value_table_info("sc", "many")
    sizes = [len(changes(cluster, s)) for s in info.segments]
    assert sum(sizes) == 2500 and min(sizes) > 400, sizes


def test_entries_page_scans_every_key_once_from_stored_positions(
    cluster: InProcessCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(constants, "TABLE_ITERATE_LIMIT", 7)  # many pages per partition
    cluster.stream_manager().create_key_value_table("sc", "paged", partitions=3)
    kvt = cluster.key_value_table("sc", "paged")
    expected = {b"key-%d" % i: kvt.put(b"key-%d" % i, b"v%d" % i) for i in range(60)}
    seen: list[bytes] = []
    position: bytes | None = None
    pages = 0
    while True:
        page, position = kvt.entries_page(position)
        assert len(page) <= 7
        seen += [e.key for e in page if expected[e.key] == e.version]
        pages += 1
        if position is None:
            break
    assert sorted(seen) == sorted(expected) and pages >= 60 // 7
    cluster.stream_manager().create_key_value_table("sc", "one", partitions=1)
    other = cluster.key_value_table("sc", "one")
    with pytest.raises(pr.InvalidArgumentError):  # partition 2 of a one-partition table
        other.entries_page((2).to_bytes(2, "big"))
    for bad in (b"", b"\x00", b"\x00\x00bad-cursor"):
        with pytest.raises(pr.InvalidArgumentError):
            other.entries_page(bad)
    for bad_limit in (0, 8, 1.5, True):  # 1 to TABLE_ITERATE_LIMIT (7 here)
        with pytest.raises(pr.InvalidArgumentError):
            kvt.entries_page(None, bad_limit)  # type: ignore[arg-type]
    assert len(kvt.entries_page(None, 2)[0]) <= 2


def test_bad_input_gets_typed_errors_and_changes_nothing(cluster: InProcessCluster) -> None:
    mgr = cluster.stream_manager()
    for bad in ("../x", "", "_sys", "a/b", "x" * 251):
        with pytest.raises(pr.InvalidNameError):
            mgr.create_key_value_table("sc", bad, partitions=1)
    for partitions in (0, -1, 1025, 1.5, True):
        with pytest.raises(pr.InvalidArgumentError):
            mgr.create_key_value_table("sc", "t", partitions=partitions)
    with pytest.raises(pr.ScopeNotFoundError):
        mgr.create_key_value_table("nope", "t", partitions=1)
    with pytest.raises(pr.KeyValueTableNotFoundError):
        cluster.key_value_table("sc", "t")
    assert mgr.list_key_value_tables("sc") == []
    mgr.create_key_value_table("sc", "t", partitions=1)
    kvt = cluster.key_value_table("sc", "t")
    for call in (
        lambda: kvt.put(b"", b"v"),
        lambda: kvt.put(b"k" * 8193, b"v"),
        lambda: kvt.put(b"k", b"v" * (1024 * 1024 + 1)),
        lambda: kvt.put("text", b"v"),  # the bytes serializer refuses a str
        lambda: kvt.replace(b"k", b"v", -5),
        lambda: kvt.remove(b"k", "1"),
    ):
        with pytest.raises(pr.InvalidArgumentError):
            call()
    segment = mgr.get_key_value_table_info("sc", "t").segments[0]
    assert cluster._segments.get_info(segment).result(10).length == 0
    with pytest.raises(pr.ScopeNotEmptyError):
        mgr.delete_scope("sc")
    assert mgr.delete_key_value_table("sc", "t")
    assert not mgr.delete_key_value_table("sc", "t")
    with pytest.raises(pr.SegmentNotFoundError):
        cluster._segments.get_info(segment).result(10)


class _LoseAcks:
    """Connection wrapper: the first ``count`` updates land, but their callers are told the
    outcome is unknown."""

    def __init__(self, inner: Any, count: int) -> None:
        self._inner = inner
        self._count = count
        self.lost = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def table_update(self, segment: str, *args: Any) -> Future[Any]:
        real = self._inner.table_update(segment, *args)
        if self.lost >= self._count:
            return real
        self.lost += 1
        real.result(10)  # it landed (or was answered as a replay)
        lost: Future[Any] = Future()
        lost.set_exception(pr.SegmentStoreUnavailableError("ack lost"))
        return lost


def test_a_lost_ack_is_retried_without_applying_twice(cluster: InProcessCluster) -> None:
    cluster.stream_manager().create_key_value_table("sc", "t", partitions=1)
    info = cluster.stream_manager().get_key_value_table_info("sc", "t")
    connection = _LoseAcks(cluster._segments, 1)
    kvt = pr.KeyValueTable(info, connection, retry_backoff_s=0.01)
    version = kvt.put_if_absent(b"k", b"v")  # the retry must not fail on its own insert
    assert connection.lost == 1
    assert kvt.get(b"k") == pr.TableEntry(b"k", b"v", version)
    assert len(changes(cluster, info.segments[0])) == 1
    assert kvt.replace(b"k", b"w", version) > version


def test_container_restarts_between_puts_and_acks_lose_and_duplicate_nothing(
    cluster: InProcessCluster,
) -> None:
    cluster.stream_manager().create_key_value_table("sc", "t", partitions=2)
    kvt = cluster.key_value_table("sc", "t")
    kvt._retry_backoff_s = 0.01
    acked: dict[bytes, int] = {}
    stop = threading.Event()

    def restarter() -> None:
        while not stop.is_set():
            for container_id in range(cluster.container_count):
                cluster.restart_container(container_id)
            stop.wait(0.02)

    thread = threading.Thread(target=restarter)
    thread.start()
    try:
        for i in range(300):
            key = b"k%d" % (i % 100)
            current = acked.get(key)
            if current is None:
                acked[key] = kvt.put_if_absent(key, b"v%d" % i)
            else:
                acked[key] = kvt.replace(key, b"v%d" % i, current)
    finally:
        stop.set()
        thread.join()
    assert {e.key: e.version for e in kvt.iter_entries()} == acked
    info = cluster.stream_manager().get_key_value_table_info("sc", "t")
    appended = [e for s in info.segments for e in changes(cluster, s)]
    assert len(appended) == 300, "an update was applied twice or lost"


def test_after_retries_run_out_the_next_update_is_not_taken_for_a_retry(
    cluster: InProcessCluster,
) -> None:
    cluster.stream_manager().create_key_value_table("sc", "t", partitions=1)
    info = cluster.stream_manager().get_key_value_table_info("sc", "t")
    connection = _LoseAcks(cluster._segments, 2)
    kvt = pr.KeyValueTable(info, connection, retry_attempts_max=2, retry_backoff_s=0.01)
    with pytest.raises(pr.SegmentStoreUnavailableError):  # landed, but the caller cannot know
        kvt.put(b"k", b"first")
    assert connection.lost == 2
    second = kvt.put(b"k", b"second")  # must be applied, not answered as a replay of "first"
    assert kvt.get(b"k") == pr.TableEntry(b"k", b"second", second)
