"""Where writers put a routing key's events: by the stream's recorded routing rule.

On an in-process cluster (real containers on memory backends, the real controller). A stream
created now records Pravega's rule (``wire.routing.pravega_key_hash``, a segment owns
``(low, high]``); a stream whose record has no rule (created before streams recorded one) keeps
the legacy rule (``naming.routing_key_hash``, ``[low, high)``) for good: across restarts,
updates and scales. Segments are read back directly, through the segment store and the event
framing, so each event's segment is known. Events are JSON objects ``{"k": key, "n": number}``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.event_framing import parse_events
from pravega_ray.contracts.records import KeyHash, SegmentRange
from pravega_ray.controller.stream_records import StreamRecords
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import routing_key_hash, segment_epoch, segment_number
from pravega_ray.wire.routing import pravega_key_hash

pytestmark = pytest.mark.timeout(120)

KEYS = [f"sensor-{i}" for i in range(300)]
HASHES = {KeyHash.PRAVEGA: pravega_key_hash, KeyHash.LEGACY: routing_key_hash}


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=3, storage_flush_interval_s=0.05)
    yield c
    c.shutdown()


def make_stream(cluster: InProcessCluster, segments: int = 4, name: str = "st") -> pr.StreamManager:
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    assert mgr.create_stream("sc", name, pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))
    return mgr


def make_record_legacy(cluster: InProcessCluster, name: str = "st") -> None:
    """Store the stream's record as it was written before streams recorded their routing
    rule: the same record without ``key_hash`` (raw, past ``StreamRecords.update``, which
    refuses to change a rule)."""
    key = StreamRecords.key("sc", name)
    record = cluster.metadata.get(key)
    assert record is not None and record.value["key_hash"] == "pravega"
    old = {k: v for k, v in record.value.items() if k != "key_hash"}
    cluster.metadata.put(key, old, record.version)


def owns(rule: KeyHash, segment: SegmentRange, key: str) -> bool:
    """Whether ``segment``'s range holds ``key``'s point under ``rule`` (a linear check,
    independent of the selector's binary search)."""
    point = HASHES[rule](key)
    if rule is KeyHash.PRAVEGA:  # (low, high], and 0.0 belongs to the first segment
        return segment.key_low < point <= segment.key_high or point == segment.key_low == 0.0
    return segment.key_low <= point < segment.key_high


def read_segments(
    cluster: InProcessCluster, name: str = "st"
) -> list[tuple[SegmentRange, list[Any]]]:
    """Every segment of every epoch of sc/<name>, in creation order, with its events."""
    controller = cluster.core
    segments: dict[int, SegmentRange] = {}
    for epoch in range(controller.get_stream_info("sc", name).epoch + 1):
        for s in controller.get_epoch_segments("sc", name, epoch):
            segments[s.segment_id] = s
    out = []
    for sid in sorted(segments, key=lambda i: (segment_epoch(i), segment_number(i))):
        segment = segments[sid]
        length = cluster.segments.get_info(segment.name).result(10).length
        data = b""
        while len(data) < length:
            data += cluster.segments.read(segment.name, len(data), 1 << 20, 0.0).result(10).data
        frames, consumed = parse_events(data)
        assert consumed == length
        out.append((segment, [json.loads(payload) for _, payload in frames]))
    return out


def check_routed(cluster: InProcessCluster, rule: KeyHash, written: int, name: str = "st") -> None:
    """Events 0..written-1 each stored once, per key in write order, and each in a segment
    whose range holds its key's point under ``rule``."""
    per_key: dict[str, list[int]] = defaultdict(list)
    numbers: list[int] = []
    for segment, events in read_segments(cluster, name):
        for e in events:
            assert owns(rule, segment, e["k"]), f"{e} in {segment} against the {rule.value} rule"
            numbers.append(e["n"])
            per_key[e["k"]].append(e["n"])
    assert sorted(numbers) == list(range(written)), "lost or duplicated events"
    for key, seq in per_key.items():
        assert seq == sorted(seq), f"routing key {key} out of order"


def write_keys(writer: Any, start: int, keys: list[str] = KEYS) -> int:
    """One event per key, numbered from ``start``, flushed; the next number."""
    for i, key in enumerate(keys):
        writer.write_event({"k": key, "n": start + i}, routing_key=key)
    writer.flush(timeout=30)
    return start + len(keys)


def split_at(mgr: pr.StreamManager, point: float, name: str = "st") -> None:
    """Split the current segment whose range holds ``point`` inside exactly at ``point``."""
    segment = next(
        s for s in mgr.get_stream_info("sc", name).segments if s.key_low < point < s.key_high
    )
    ranges = [(segment.key_low, point), (point, segment.key_high)]
    assert mgr.scale_stream("sc", name, [segment.segment_id], ranges)


def merge_first_two(mgr: pr.StreamManager, name: str = "st") -> None:
    a, b = sorted(mgr.get_stream_info("sc", name).segments, key=lambda s: s.key_low)[:2]
    assert mgr.scale_stream("sc", name, [a.segment_id, b.segment_id], [(a.key_low, b.key_high)])


# --- a stream created now: Pravega's rule ----------------------------------------------------


def test_write_to_a_new_stream_puts_each_key_where_pravegas_hash_says(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 4)
    info = mgr.get_stream_info("sc", "st")
    assert info.key_hash is KeyHash.PRAVEGA
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        write_keys(writer, 0)
    landed = {e["k"]: segment for segment, events in read_segments(cluster) for e in events}
    assert set(landed) == set(KEYS)
    for key in KEYS:
        expected = next(s for s in info.segments if owns(KeyHash.PRAVEGA, s, key))
        assert landed[key] == expected, key
    # The two rules disagree on most keys, so the check above tells them apart.
    legacy = sum(not owns(KeyHash.LEGACY, landed[k], k) for k in KEYS)
    assert legacy > len(KEYS) // 2


def test_write_across_a_split_and_a_merge_keeps_pravegas_rule_and_key_order(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 4)
    n = 0
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        n = write_keys(writer, n)
        # A split exactly at a key's point: under Pravega's rule the key stays below it.
        boundary_key = next(k for k in KEYS if 0.25 < pravega_key_hash(k) < 0.5)
        split_at(mgr, pravega_key_hash(boundary_key))
        n = write_keys(writer, n)  # the writer finds its segment sealed and moves on
        merge_first_two(mgr)
        n = write_keys(writer, n)
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as late:  # made after both
        n = write_keys(late, n)
    assert mgr.get_stream_info("sc", "st").epoch == 2
    check_routed(cluster, KeyHash.PRAVEGA, n)
    below = next(
        s
        for s in cluster.core.get_epoch_segments("sc", "st", 1)
        if s.key_high == pravega_key_hash(boundary_key)
    )
    stored = {
        e["k"] for segment, events in read_segments(cluster) if segment == below for e in events
    }
    assert boundary_key in stored


def write_in_transaction(cluster: InProcessCluster) -> int:
    """One event per key in one transaction, half through the handle that began it, half
    through one resumed from the controller's record (``get_txn``); committed."""
    half = len(KEYS) // 2
    with cluster.create_transactional_writer("sc", "st", pr.JsonSerializer()) as tw:
        txn = tw.begin_txn()
        for i, key in enumerate(KEYS[:half]):
            txn.write_event({"k": key, "n": i}, routing_key=key)
        resumed = tw.get_txn(txn.txn_id)
        for i, key in enumerate(KEYS[half:], half):
            resumed.write_event({"k": key, "n": i}, routing_key=key)
        resumed.flush(timeout=30)
        txn.commit()
    return len(KEYS)


def test_transactions_on_a_new_stream_route_by_pravegas_rule(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 4)
    check_routed(cluster, KeyHash.PRAVEGA, write_in_transaction(cluster))


# --- a stream whose record has no rule: the legacy rule, for good ----------------------------


def test_a_record_without_a_rule_keeps_the_legacy_rule_across_restart_update_and_scale(
    cluster,
) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 4)
    make_record_legacy(cluster)
    assert mgr.get_stream_info("sc", "st").key_hash is KeyHash.LEGACY
    n = 0
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        n = write_keys(writer, n)
        cluster.restart()  # every container and the controller recover from storage
        assert mgr.get_stream_info("sc", "st").key_hash is KeyHash.LEGACY
        n = write_keys(writer, n)
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(4), tags=("updated",))
    assert mgr.update_stream("sc", "st", config)
    assert mgr.get_stream_info("sc", "st").configuration.tags == ("updated",)
    assert mgr.get_stream_info("sc", "st").key_hash is KeyHash.LEGACY
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        n = write_keys(writer, n)
        # A split exactly at a key's point: under the legacy rule the key goes above it.
        boundary_key = next(k for k in KEYS if 0.5 < routing_key_hash(k) < 0.75)
        split_at(mgr, routing_key_hash(boundary_key))
        n = write_keys(writer, n)
    assert "key_hash" not in cluster.metadata.get(StreamRecords.key("sc", "st")).value
    cluster.restart()
    assert mgr.get_stream_info("sc", "st").key_hash is KeyHash.LEGACY
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        n = write_keys(writer, n)
    check_routed(cluster, KeyHash.LEGACY, n)
    above = next(
        s
        for s in cluster.core.get_epoch_segments("sc", "st", 1)
        if s.key_low == routing_key_hash(boundary_key)
    )
    stored = {
        e["k"] for segment, events in read_segments(cluster) if segment == above for e in events
    }
    assert boundary_key in stored


def test_streams_of_both_rules_side_by_side_keep_their_own(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = make_stream(cluster, 4, "old")
    make_record_legacy(cluster, "old")
    make_stream(cluster, 4, "new")
    cluster.restart()
    assert mgr.get_stream_info("sc", "old").key_hash is KeyHash.LEGACY
    assert mgr.get_stream_info("sc", "new").key_hash is KeyHash.PRAVEGA
    for name, rule in (("old", KeyHash.LEGACY), ("new", KeyHash.PRAVEGA)):
        with cluster.create_writer("sc", name, pr.JsonSerializer()) as writer:
            written = write_keys(writer, 0)
        check_routed(cluster, rule, written, name)


def test_transactions_on_a_legacy_stream_route_by_the_legacy_rule(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 4)
    make_record_legacy(cluster)
    check_routed(cluster, KeyHash.LEGACY, write_in_transaction(cluster))
