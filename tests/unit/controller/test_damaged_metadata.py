"""A damaged Tier-2 chunk of a controller table segment costs only the records in it: their
streams answer DataCorruptionError naming the chunk, everything else keeps working (the
outside probe found every controller call failing)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import pravega_ray as pr
from pravega_ray.errors import DataCorruptionError
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(120)

STREAMS = [f"s{i}" for i in range(12)]


@pytest.fixture
def cluster() -> Iterator[InProcessCluster]:
    c = InProcessCluster(container_count=2)
    yield c
    c.shutdown()


def flush(cluster: InProcessCluster) -> None:
    for i in range(cluster.container_count):
        cluster.run(cluster.container(i).flush_to_storage()).result(30)


def streams_in_chunks(cluster: InProcessCluster) -> list[str]:
    """Create STREAMS in scope ``sc``, three records per Tier-2 chunk of their table
    segment; returns the chunks of that table segment, oldest first."""
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    for i, name in enumerate(STREAMS):
        mgr.create_stream("sc", name, pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
        if i % 3 == 2:
            flush(cluster)
    partition = cluster.metadata.children_partition("streams/sc")
    segment = cluster.metadata.segments[partition]
    chunks = cluster.storage.list(f"segments/{segment}")
    assert len(chunks) >= 4, chunks
    return chunks


def flip(cluster: InProcessCluster, chunk: str) -> None:
    data = bytearray(cluster.storage.read(chunk, 0, cluster.storage.length(chunk)))
    data[len(data) // 2] ^= 0x40
    cluster.storage.delete(chunk)
    cluster.storage.create(chunk, bytes(data))


def readable(mgr: pr.StreamManager) -> tuple[list[str], dict[str, str]]:
    """Streams whose record reads, and those that answer DataCorruptionError (-> message)."""
    good, bad = [], {}
    for name in STREAMS:
        try:
            mgr.get_stream_info("sc", name)
            good.append(name)
        except DataCorruptionError as e:
            bad[name] = str(e)
    return good, bad


def test_a_damaged_chunk_of_the_controllers_records_costs_only_its_records(
    cluster: InProcessCluster,
) -> None:
    chunks = streams_in_chunks(cluster)
    victim = chunks[1]
    flip(cluster, victim)
    cluster.restart()  # caches gone: the controller reads its records from Tier-2
    mgr = cluster.stream_manager()
    good, bad = readable(mgr)
    assert bad and len(good) + len(bad) == len(STREAMS)
    assert all(victim in message for message in bad.values())
    # Every call that does not need a damaged record works, listing included.
    assert mgr.list_streams("sc") == sorted(good)
    assert mgr.create_stream("sc", "new", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    assert mgr.seal_stream("sc", good[0], timeout_s=30)
    assert mgr.create_scope("other")
    assert mgr.create_stream("other", "x", None)
    assert mgr.list_scopes() == ["other", "sc"]
    # The damage stays visible: the unreadable entries are named.
    damaged = cluster.core.damaged_records()
    assert any(victim in why for why in damaged.values()), damaged


def test_a_damaged_chunk_met_by_a_running_controllers_listing_costs_only_its_records(
    cluster: InProcessCluster,
) -> None:
    # The controller keeps its listing (the offset it has read to) while the containers
    # restart; the changes since then run through the damaged chunk. The transaction
    # timer lists every scope's streams now and then, which would bring the listing past
    # the chunk before it is damaged (the next test): it is stopped.
    cluster.txn_timer.stop()
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    assert mgr.list_streams("sc") == []  # the listing is made now, before every stream
    for i, name in enumerate(STREAMS):
        mgr.create_stream("sc", name, pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
        if i % 3 == 2:
            flush(cluster)
    segment = cluster.metadata.segments[cluster.metadata.children_partition("streams/sc")]
    victim = cluster.storage.list(f"segments/{segment}")[1]
    flip(cluster, victim)
    for i in range(cluster.container_count):
        cluster.restart_container(i)
    good, bad = readable(mgr)
    assert bad
    assert mgr.list_streams("sc") == sorted(good)
    assert mgr.create_stream("sc", "new", None)
    assert "new" in mgr.list_streams("sc")


def test_a_listing_that_read_the_keys_before_the_damage_still_lists_them(
    cluster: InProcessCluster,
) -> None:
    # A listing keeps the keys it read intact (list_keys lists damaged records too, but
    # for those whose key it cannot read): the streams stay listed, and reading one names
    # the damage.
    cluster.txn_timer.stop()
    chunks = streams_in_chunks(cluster)
    mgr = cluster.stream_manager()
    assert mgr.list_streams("sc") == sorted(STREAMS)  # the listing reads every key now
    flip(cluster, chunks[1])
    for i in range(cluster.container_count):
        cluster.restart_container(i)
    good, bad = readable(mgr)
    assert len(good) + len(bad) == len(STREAMS)
    assert bad and all(chunks[1] in message for message in bad.values())
    assert mgr.list_streams("sc") == sorted(STREAMS)
    assert mgr.create_stream("sc", "new", None)
    assert mgr.list_streams("sc") == sorted([*STREAMS, "new"])


def test_a_key_value_table_iteration_names_a_damaged_entry_and_goes_on(
    cluster: InProcessCluster,
) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    mgr.create_key_value_table("sc", "t", partitions=1)
    kvt = cluster.key_value_table("sc", "t")
    for round_ in range(3):
        for i in range(10):
            kvt.put(f"k{round_}-{i}".encode(), b"v" * 50)
        flush(cluster)
    chunks = [n for n in cluster.storage.list("segments/sc/_kvt.t/") if "attributes" not in n]
    assert len(chunks) == 3, chunks
    flip(cluster, chunks[1])
    cluster.restart()
    kvt = cluster.key_value_table("sc", "t")
    seen, damaged = [], 0
    entries = kvt.iter_entries()
    while True:
        try:
            seen.append(next(entries).key)
        except StopIteration:
            break
        except DataCorruptionError as e:
            assert chunks[1] in str(e)
            damaged += 1
    assert sorted(seen) == sorted(f"k{r}-{i}".encode() for r in (0, 2) for i in range(10))
    assert damaged == 10


def test_a_scope_that_may_hold_unreadable_records_is_not_deleted(
    cluster: InProcessCluster,
) -> None:
    chunks = streams_in_chunks(cluster)
    flip(cluster, chunks[1])
    cluster.restart()
    mgr = cluster.stream_manager()
    good, bad = readable(mgr)
    for name in good:
        assert mgr.seal_stream("sc", name, timeout_s=30)
        assert mgr.delete_stream("sc", name, timeout_s=30)
    assert mgr.list_streams("sc") == []  # the damaged streams cannot be listed...
    with pytest.raises(DataCorruptionError, match="may still hold streams"):
        mgr.delete_scope("sc")  # ...so the scope may not be empty: it stays
    assert "sc" in mgr.list_scopes()
    for name in bad:  # and the damage stays named
        with pytest.raises(DataCorruptionError):
            mgr.get_stream_info("sc", name)
