"""Records that used to grow with a stream's history (issue 26: every record bounded): the
index table and the sealed sizes were one record each, rewritten whole at every scale and
refused once over the table entry's size limit (about 40,000 epochs of a stream scaled
every few minutes: a year). They are chunks and shards now; here with 4 epochs a chunk and
4 segment numbers a shard, on an in-process cluster (memory backends)."""

from __future__ import annotations

import json

import pytest

import pravega_ray as pr
from pravega_ray.controller import stream_records
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.inprocess import InProcessCluster

SMALL = 4


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(stream_records, "INDEX_CHUNK", SMALL)
    monkeypatch.setattr(stream_records, "SEALED_SIZES_SHARD", SMALL)
    c = InProcessCluster(container_count=3)
    yield c
    c.shutdown()


def scale_times(cluster: InProcessCluster, stream: str, count: int) -> None:
    """Scale ``sc/<stream>`` ``count`` times: its first segment split, or its first two
    merged back once it has 3."""
    mgr = cluster.stream_manager()
    for _ in range(count):
        segments = mgr.get_stream_info("sc", stream).segments
        first = segments[0]
        if len(segments) >= 3:
            ranges = [(first.key_low, segments[1].key_high)]
            sealed = [first.segment_id, segments[1].segment_id]
        else:
            mid = (first.key_low + first.key_high) / 2
            ranges, sealed = [(first.key_low, mid), (mid, first.key_high)], [first.segment_id]
        assert mgr.scale_stream("sc", stream, sealed, ranges, timeout_s=30)


def make(cluster: InProcessCluster, stream: str = "st") -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", stream, pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))


def keys_under(cluster: InProcessCluster, parent: str) -> list[str]:
    return cluster.metadata.list_keys(parent)


def expected_epoch_at(store: StreamMetadataStore, time_ms: int) -> int:
    """The epoch current at ``time_ms`` by a linear scan of every history row (times made
    non-decreasing, as the index makes them)."""
    records = store.streams
    best, latest = 0, 0
    for epoch in range(records.highest_epoch("sc", "st") + 1):
        row = records.epoch("sc", "st", epoch)
        assert row is not None
        latest = max(latest, row.created_ms)
        if latest <= time_ms:
            best = epoch
    return best


def test_a_long_history_keeps_every_index_chunk_and_sealed_shard_small(cluster) -> None:  # type: ignore[no-untyped-def]
    make(cluster)
    scale_times(cluster, "st", 30)
    store = StreamMetadataStore(cluster.metadata)
    chunks = keys_under(cluster, "indexrows/sc/st")
    assert len(chunks) == 31 // SMALL + 1  # epochs 0..30
    for key in chunks:
        record = cluster.metadata.get(key)
        assert record is not None and 1 <= len(record.value["rows"]) <= SMALL
    shards = keys_under(cluster, "sealed/sc/st")
    assert len(shards) > 3
    for key in shards:
        record = cluster.metadata.get(key)
        assert record is not None and len(record.value["sizes"]) <= SMALL
    assert cluster.metadata.get("index/sc/st") is None  # no single record any more
    assert cluster.metadata.get("sealedsizes/sc/st") is None
    # Every sealed segment has its size, read all together or by id.
    current = {s.segment_id for s in cluster.stream_manager().get_stream_info("sc", "st").segments}
    sealed = set(store.streams.all_segment_ids("sc", "st")) - current
    sizes = store.streams.sealed_sizes("sc", "st")
    assert set(sizes) == sealed
    some = sorted(sealed)[::5]
    assert store.streams.sealed_sizes("sc", "st", some) == {s: sizes[s] for s in some}


def test_the_epoch_at_a_time_is_found_across_chunks(cluster) -> None:  # type: ignore[no-untyped-def]
    make(cluster)
    scale_times(cluster, "st", 21)
    store = StreamMetadataStore(cluster.metadata)
    times = []
    for epoch in range(22):
        row = store.streams.epoch("sc", "st", epoch)
        assert row is not None
        times += [row.created_ms - 1, row.created_ms, row.created_ms + 1]
    for t in [0, *times, times[-1] + 10**9]:
        assert store.streams.epoch_at("sc", "st", t) == expected_epoch_at(store, t)
    # Through the public call: the cut at the newest epoch's time names its segments.
    last = store.streams.epoch("sc", "st", 21)
    assert last is not None
    cut = cluster.stream_manager().get_segments_at_time("sc", "st", last.created_ms + 1)
    assert set(cut.positions) == last.ids()


def test_a_stream_of_the_single_records_of_before_reads_and_scales_on(cluster) -> None:  # type: ignore[no-untyped-def]
    """A stream whose index and sealed sizes were stored as one record each (before the
    chunks): read as before, and its next scales start chunks from those records."""
    make(cluster)
    scale_times(cluster, "st", 9)
    metadata = cluster.metadata
    rows: list[list[int]] = []
    for key in keys_under(cluster, "indexrows/sc/st"):
        record = metadata.get(key)
        assert record is not None
        rows += record.value["rows"]
        metadata.delete(key)
    sizes: dict[str, int] = {}
    for key in keys_under(cluster, "sealed/sc/st"):
        record = metadata.get(key)
        assert record is not None
        sizes.update(record.value["sizes"])
        metadata.delete(key)
    metadata.put("index/sc/st", {"rows": rows}, None)
    metadata.put("sealedsizes/sc/st", {"sizes": sizes}, None)
    store = StreamMetadataStore(metadata)
    assert store.streams.index("sc", "st") == [(int(t), int(e)) for t, e in rows]
    assert store.streams.sealed_sizes("sc", "st") == {int(k): v for k, v in sizes.items()}
    for t, _ in rows:
        assert store.streams.epoch_at("sc", "st", int(t)) == expected_epoch_at(store, int(t))
    scale_times(cluster, "st", 6)  # epochs 10..15: the chunk of 8..11 starts from the old rows
    chunk = metadata.get("indexrows/sc/st/00000002")
    assert chunk is not None and [e for _, e in chunk.value["rows"]] == [8, 9, 10, 11]
    for epoch in range(16):
        row = store.streams.epoch("sc", "st", epoch)
        assert row is not None
        assert store.streams.epoch_at("sc", "st", row.created_ms) == expected_epoch_at(
            store, row.created_ms
        )
    current = {s.segment_id for s in cluster.stream_manager().get_stream_info("sc", "st").segments}
    sealed = set(store.streams.all_segment_ids("sc", "st")) - current
    assert set(store.streams.sealed_sizes("sc", "st")) == sealed


def test_a_deleted_stream_leaves_no_chunk_and_its_name_starts_afresh(cluster) -> None:  # type: ignore[no-untyped-def]
    make(cluster)
    scale_times(cluster, "st", 10)
    mgr = cluster.stream_manager()
    assert mgr.seal_stream("sc", "st", timeout_s=30)
    assert mgr.delete_stream("sc", "st", timeout_s=30)
    assert keys_under(cluster, "indexrows/sc/st") == []
    assert keys_under(cluster, "sealed/sc/st") == []
    mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    store = StreamMetadataStore(cluster.metadata)
    assert store.streams.index("sc", "st") == [(store.streams.epoch("sc", "st", 0).created_ms, 0)]  # type: ignore[union-attr]
    assert store.streams.sealed_sizes("sc", "st") == {}


def test_one_record_of_a_years_history_would_not_fit_a_table_entry() -> None:
    """Why the chunks: the single index record of a stream scaled every 10 minutes for a
    year (52,560 epochs) encodes to more than a table entry holds."""
    from pravega_ray.constants import TABLE_VALUE_BYTES_MAX

    epochs = 365 * 24 * 6
    start = 1_795_000_000_000
    rows = [[start + 600_000 * e, e] for e in range(epochs)]
    assert len(json.dumps({"rows": rows})) > TABLE_VALUE_BYTES_MAX
    chunk = rows[: stream_records.INDEX_CHUNK]
    assert len(json.dumps({"rows": chunk})) < TABLE_VALUE_BYTES_MAX // 20


def test_truncations_over_a_long_history_keep_only_the_ids_of_the_epochs_the_cut_spans(
    cluster,
) -> None:  # type: ignore[no-untyped-def]
    """The truncation record named every segment any truncation ever deleted, for ever:
    it now keeps the epochs below the cut's earliest as one number (its ``floor``)."""
    make(cluster)
    mgr = cluster.stream_manager()
    writer = cluster.create_writer("sc", "st", pr.BytesSerializer())
    old_cuts = []
    for n in range(12):
        writer.write_event(b"e%d" % n, routing_key=f"k{n}")
        writer.flush()
        segments = mgr.get_stream_info("sc", "st").segments  # all replaced: split or merged
        ranges = [(0.0, 1.0)] if len(segments) == 2 else [(0.0, 0.5), (0.5, 1.0)]
        sealed = [s.segment_id for s in segments]
        assert mgr.scale_stream("sc", "st", sealed, ranges, timeout_s=30)
        cut = mgr.get_tail_cut("sc", "st")
        assert mgr.truncate_stream("sc", "st", cut, timeout_s=30)
        old_cuts.append(cut)
    writer.close()
    store = StreamMetadataStore(cluster.metadata)
    truncation = store.streams.truncation("sc", "st")
    assert truncation["floor"] == 12  # the tail cut's segments were all created at epoch 12
    assert truncation["deleted"] == []  # every deleted segment is below it: 18 of them
    for sid in store.streams.all_segment_ids("sc", "st"):
        name = f"sc/st/{sid & 0xFFFFFFFF}.#epoch.{sid >> 32}"
        try:
            cluster.segments.get_info(name).result(10)
            exists = True
        except pr.SegmentNotFoundError:
            exists = False
        assert stream_records.truncated_away(truncation, sid) is not exists, name
    # An old time or an old cut is before the head: the head, or a clear refusal.
    head = mgr.get_head_cut("sc", "st")
    assert mgr.get_segments_at_time("sc", "st", 0) == head
    with pytest.raises(pr.InvalidArgumentError):
        mgr.truncate_stream("sc", "st", old_cuts[3], timeout_s=30)
    config = pr.ReaderGroupConfig.for_streams("sc/st", start_cuts={"sc/st": old_cuts[3]})
    with pytest.raises(pr.InvalidArgumentError):
        cluster.create_reader_group("sc", "g", config)
