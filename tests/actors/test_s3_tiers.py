"""Both tiers on a real S3 server (SeaweedFS started by the session fixture)."""

from __future__ import annotations

from pathlib import Path

import pytest
import ray

import pravega_ray as pr
from tests.checks import assert_exactly_once_in_key_order, read_with_threads

pytestmark = [pytest.mark.ray, pytest.mark.s3, pytest.mark.timeout(420)]


@pytest.fixture
def s3_env(s3_server, s3_bucket, monkeypatch: pytest.MonkeyPatch) -> str:
    """The S3 server's endpoint and credentials in this process's environment; the bucket."""
    for key, value in s3_server.environment().items():
        monkeypatch.setenv(key, value)
    return s3_bucket[1]


def write(cluster: pr.Cluster, first: int, count: int) -> None:
    with cluster.create_writer("s3", "st", pr.JsonSerializer()) as w:
        for i in range(first, first + count):
            w.write_event({"k": f"k{i % 20}", "n": i}, routing_key=f"k{i % 20}")


def test_s3_tiers_survive_a_container_kill_and_a_restart(
    ray_session, s3_env: str, tmp_path: Path
) -> None:
    tiers = {"tier1": f"s3://{s3_env}/tier1", "tier2": f"s3://{s3_env}/tier2"}
    first = pr.start_local(data_dir=tmp_path, container_count=2, namespace="pravega-s3", **tiers)
    try:
        mgr = first.stream_manager()
        mgr.create_scope("s3")
        mgr.create_stream("s3", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
        mgr.create_key_value_table("s3", "kv", partitions=2)
        kvt = first.key_value_table("s3", "kv")
        versions = {b"k%d" % i: kvt.put(b"k%d" % i, b"v%d" % i) for i in range(500)}
        write(first, 0, 3000)
        ray.kill(first.container_handles()[0], no_restart=False)  # recovers from S3
        write(first, 3000, 3000)
        for i in range(0, 500, 2):  # after the kill: the index and entries come from S3
            key = b"k%d" % i
            versions[key] = kvt.replace(key, b"w%d" % i, versions[key])
        ray.get([h.checkpoint.remote() for h in first.container_handles()])
    finally:
        first.shutdown()
    assert not any((tmp_path / "tier1").glob("*")), "Tier-1 was written to disk, not S3"
    second = pr.start_local(data_dir=tmp_path, container_count=2, namespace="pravega-s3", **tiers)
    try:
        second.create_reader_group("s3", "rg", pr.ReaderGroupConfig.for_streams("s3/st"))
        readers = [second.create_reader("r", "s3", "rg", pr.JsonSerializer())]
        events = read_with_threads(readers, 6000, timeout_s=120)
        assert readers[0].read_next_event(timeout_s=0.5) is None
        readers[0].close()
        assert_exactly_once_in_key_order(events, 6000)
        kvt = second.key_value_table("s3", "kv")
        entries = {e.key: (e.value, e.version) for e in kvt.iter_entries()}
        assert {k: v for k, (_, v) in entries.items()} == versions
        assert all(
            entries[b"k%d" % i][0] == (b"w%d" if i % 2 == 0 else b"v%d") % i for i in range(500)
        )
        with pytest.raises(pr.ConfigurationError):  # the directory remembers its tiers
            pr.start_local(
                data_dir=tmp_path,
                container_count=2,
                namespace="other",
                tier1="file:///tmp/elsewhere",
            )
    finally:
        second.shutdown()
