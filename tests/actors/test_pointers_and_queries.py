"""Event pointers and the stream queries through Ray (issue 27 items 2 and 6): a pointer kept
as base64 by one process is fetched by a Ray task with a client of its own; a reader on the
cluster fetches what it read; a truncated event is a typed error; the distance between two
cuts, the completed transactions and a group's segment distribution answer through the
controller actors (shared local Ray, filesystem tiers)."""

from __future__ import annotations

import pytest
import ray

import pravega_ray as pr

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


@ray.remote(num_cpus=0)
def _fetch(namespace: str, text: str) -> str:
    """Runs in a Ray worker: the event a base64 pointer names, through a client of its own."""
    pointer = pr.EventPointer.from_base64(text)
    return pr.connect(namespace=namespace).batch_client().fetch_event(pointer, pr.Utf8Serializer())


def test_pointers_fetched_by_a_reader_and_by_a_ray_task(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    scope = unique_name
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    mgr.create_stream(scope, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    events = [f"event {i} " + "y" * i for i in range(40)]
    with cluster.create_writer(scope, "st", pr.Utf8Serializer()) as writer:
        for i, event in enumerate(events):
            writer.write_event(event, routing_key=f"k{i % 5}")
    cluster.create_reader_group(scope, "g", pr.ReaderGroupConfig.for_streams(f"{scope}/st"))
    reader = cluster.create_reader("r", scope, "g", pr.Utf8Serializer())
    reads = []
    while len(reads) < len(events):
        ev = reader.read_next_event(10.0)
        assert ev is not None
        if ev.event is not None:
            reads.append(ev)
    texts = [ev.event_pointer.to_base64() for ev in reads]
    fetched = ray.get([_fetch.remote(cluster.namespace, t) for t in texts])
    assert fetched == [ev.event for ev in reads]
    assert [reader.fetch_event(ev.event_pointer) for ev in reads[::7]] == [
        ev.event for ev in reads[::7]
    ]
    # Truncated past the first events: those pointers now name nothing to read.
    cut = mgr.get_tail_cut(scope, "st")
    assert mgr.truncate_stream(scope, "st", cut, timeout_s=60)
    with pytest.raises(pr.SegmentTruncatedError):
        reader.fetch_event(reads[0].event_pointer)
    with pytest.raises(pr.SegmentTruncatedError):
        ray.get(_fetch.remote(cluster.namespace, texts[0]))
    reader.close()


def test_distance_completed_transactions_and_distribution(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    scope = unique_name
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    mgr.create_stream(scope, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    head = mgr.get_head_cut(scope, "st")
    with cluster.create_writer(scope, "st", pr.BytesSerializer()) as writer:
        for i in range(50):
            writer.write_event(b"z" * i, routing_key=f"k{i % 4}")
    assert mgr.get_distance(head, mgr.get_tail_cut(scope, "st")) == sum(8 + i for i in range(50))
    tw = cluster.create_transactional_writer(scope, "st", pr.BytesSerializer())
    txn = tw.begin_txn()
    txn.write_event(b"t", routing_key="k0")
    txn.commit()
    assert mgr.list_completed_transactions(scope, "st") == {txn.txn_id: pr.TxnStatus.COMMITTED}
    tw.close()
    cluster.create_reader_group(scope, "g", pr.ReaderGroupConfig.for_streams(f"{scope}/st"))
    reader = cluster.create_reader("r", scope, "g", pr.BytesSerializer())
    for _ in range(5):
        reader.read_next_event(1.0)
    dist = cluster.reader_group(scope, "g").get_segment_distribution()
    assert list(dist.reader_segments) == ["r"] and dist.counts["r"] == 2
    assert dist.unassigned_segments == []
    reader.close()
