"""The hardening scenarios through the public API on real actors: typed errors cross Ray intact."""

from __future__ import annotations

import pytest

import pravega_ray as pr
from pravega_ray.constants import MIB
from pravega_ray.contracts.segment_store import TableUpdate
from pravega_ray_actors.ray_calls import call_with_unwrap

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]


def test_bad_input_and_duplicate_readers_get_typed_errors_through_actors(
    cluster, unique_name
) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope(unique_name)
    with pytest.raises(pr.InvalidArgumentError):
        bogus = pr.ScalingPolicy("bogus", 5, 3, 1)  # refused here, before any call
        mgr.create_stream(unique_name, "p", pr.StreamConfiguration(bogus))
    with pytest.raises(pr.InvalidArgumentError):
        mgr.create_stream(unique_name, "p", "not a configuration")  # type: ignore[arg-type]
    mgr.create_stream(unique_name, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    with pytest.raises(pr.InvalidArgumentError):
        cluster.create_writer(unique_name, "st", config={"linger_s": 1})
    with cluster.create_writer(unique_name, "st", serializer=pr.Utf8Serializer()) as writer:
        with pytest.raises(pr.EventTooLargeError):
            writer.write_events(["a" * 5 * MIB, "b" * 5 * MIB], routing_key="k")
        with pytest.raises(pr.InvalidArgumentError):
            writer.write_event("x", routing_key="\ud800")
        writer.write_event("fine", routing_key="k").result(30)
    with cluster.create_writer(unique_name, "st") as raw:
        raw.write_event(b"\xff\xfe", routing_key="k").result(30)

    cluster.create_reader_group(
        unique_name, "rg", pr.ReaderGroupConfig.for_streams(f"{unique_name}/st")
    )
    reader = cluster.create_reader("dup", unique_name, "rg", pr.Utf8Serializer())
    with pytest.raises(pr.ReaderAlreadyExistsError):
        cluster.create_reader("dup", unique_name, "rg")
    assert reader.read_next_event(timeout_s=10).event == "fine"
    with pytest.raises(pr.SerializationError) as raised:
        reader.read_next_event(timeout_s=10)
    assert raised.value.data == b"\xff\xfe"  # type: ignore[attr-defined]
    reader.skip_event(raised.value)
    assert reader.read_next_event(timeout_s=0.5) is None
    with pytest.raises(pr.ScopeNotEmptyError):
        mgr.delete_scope(unique_name)
    assert cluster.delete_reader_group(unique_name, "rg")
    assert not cluster.delete_reader_group(unique_name, "rg")
    reader.close()  # its group is gone: no error


def test_stale_table_client_and_an_oversized_batch_through_actors(cluster, unique_name) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope(unique_name)
    mgr.create_key_value_table(unique_name, "t", partitions=4)
    stale = cluster.key_value_table(unique_name, "t")
    stale.put(b"k", b"v")
    mgr.delete_key_value_table(unique_name, "t")
    mgr.create_key_value_table(unique_name, "t", partitions=2)
    with pytest.raises(pr.KeyValueTableNotFoundError):
        stale.put(b"k", b"stale")
    fresh = cluster.key_value_table(unique_name, "t")
    assert fresh.get(b"k") is None
    segment = fresh.info.segments[0]
    batch = [TableUpdate(i.to_bytes(4, "big"), b"") for i in range(65_536)]
    with pytest.raises(pr.InvalidArgumentError):
        call_with_unwrap(cluster.container_handle(segment).table_update.remote(segment, batch), 60)
    fresh.put(b"after", b"1")  # the container is still serving
    assert fresh.get(b"after").value == b"1"  # type: ignore[union-attr]
