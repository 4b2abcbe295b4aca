"""End to end on the shared local Ray: real actors, filesystem Tier-1 and Tier-2."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import ray

import pravega_ray as pr
from pravega_ray import constants
from pravega_ray.naming import container_for_segment
from pravega_ray_actors.options import container_name
from tests.checks import assert_exactly_once_in_key_order, read_with_threads

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]


def create_stream(cluster, scope: str, stream: str, segments: int) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    assert mgr.create_stream(
        scope, stream, pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments))
    )


def read_group(
    cluster, scope: str, group: str, readers: int, expected: int, timeout_s: float = 120.0
) -> list[pr.EventRead]:
    """Read with ``readers`` readers of one group, each in its own thread, until ``expected``."""
    instances = [
        cluster.create_reader(f"r{i}", scope, group, pr.JsonSerializer()) for i in range(readers)
    ]
    got = read_with_threads(instances, expected, timeout_s)
    # Nothing beyond what was written: each reader now times out.
    for reader in instances:
        assert reader.read_next_event(timeout_s=0.3) is None
        reader.close()
    return got


def test_write_then_read_with_a_two_reader_group(cluster, unique_name) -> None:
    create_stream(cluster, unique_name, "st", 3)
    n = 20_000
    with cluster.create_writer(unique_name, "st", pr.JsonSerializer()) as w:
        for i in range(n):
            w.write_event({"k": f"k{i % 40}", "n": i}, routing_key=f"k{i % 40}")
    cluster.create_reader_group(
        unique_name, "rg", pr.ReaderGroupConfig.for_streams(f"{unique_name}/st")
    )
    events = read_group(cluster, unique_name, "rg", 2, n)
    assert_exactly_once_in_key_order(events, n)
    assert {e.segment for e in events} == {
        s.name for s in cluster.stream_manager().get_stream_info(unique_name, "st").segments
    }


def test_container_killed_mid_burst_loses_and_duplicates_nothing(cluster, unique_name) -> None:
    create_stream(cluster, unique_name, "st", 3)
    segments = cluster.stream_manager().get_stream_info(unique_name, "st").segments
    victim_id = container_for_segment(segments[0].name, cluster.container_count)
    victim = ray.get_actor(container_name(victim_id), namespace=cluster.namespace)
    pid_before = ray.get(victim.describe.remote())["pid"]
    n = 60_000
    written = threading.Event()
    half = threading.Event()

    def write() -> None:
        with cluster.create_writer(unique_name, "st", pr.JsonSerializer()) as w:
            for i in range(n):
                w.write_event({"k": f"k{i % 100}", "n": i}, routing_key=f"k{i % 100}")
                if i == n // 2:
                    half.set()
                if i % 2000 == 0:
                    time.sleep(0.02)  # a burst that lasts long enough to be hit mid-flight
        written.set()

    writer = threading.Thread(target=write)
    writer.start()
    assert half.wait(60)
    ray.kill(victim, no_restart=False)
    writer.join(180)
    assert written.is_set(), "writer did not finish (flush failed or hung)"
    assert ray.get(victim.describe.remote())["pid"] != pid_before, "container was not restarted"
    cluster.create_reader_group(
        unique_name, "rg", pr.ReaderGroupConfig.for_streams(f"{unique_name}/st")
    )
    events = read_group(cluster, unique_name, "rg", 2, n)
    assert_exactly_once_in_key_order(events, n)


def test_shutdown_and_start_local_on_the_same_directory_returns_all_data(
    ray_session, tmp_path: Path
) -> None:
    namespace = "pravega-restart-test"
    first = pr.start_local(data_dir=tmp_path, container_count=2, namespace=namespace)
    try:
        create_stream(first, "keep", "st", 2)
        with first.create_writer("keep", "st", pr.JsonSerializer()) as w:
            for i in range(5000):
                w.write_event({"k": f"k{i % 10}", "n": i}, routing_key=f"k{i % 10}")
        ray.get([h.flush_to_storage.remote() for h in first.container_handles()])
        with first.create_writer("keep", "st", pr.JsonSerializer()) as w:  # some only in Tier-1
            for i in range(5000, 6000):
                w.write_event({"k": f"k{i % 10}", "n": i}, routing_key=f"k{i % 10}")
    finally:
        first.shutdown()
    assert ray.is_initialized(), "start_local must not stop a Ray it did not start"

    second = pr.start_local(data_dir=tmp_path, container_count=2, namespace=namespace)
    try:
        mgr = second.stream_manager()
        assert mgr.list_scopes() == ["keep"]
        assert mgr.list_streams("keep") == ["st"]
        assert mgr.get_stream_info("keep", "st").state is pr.StreamState.ACTIVE
        second.create_reader_group("keep", "rg", pr.ReaderGroupConfig.for_streams("keep/st"))
        events = read_group(second, "keep", "rg", 1, 6000)
        assert_exactly_once_in_key_order(events, 6000)
        with pytest.raises(pr.ConfigurationError):
            pr.start_local(data_dir=tmp_path, container_count=3, namespace="other-ns")
    finally:
        second.shutdown()


def test_connect_joins_the_running_cluster(cluster, unique_name) -> None:
    create_stream(cluster, unique_name, "st", 1)
    joined = pr.connect(namespace=cluster.namespace)
    assert joined.container_count == cluster.container_count
    assert unique_name in joined.stream_manager().list_scopes()
    joined.close()


def test_start_local_on_other_storage_in_a_running_namespace_is_refused(
    cluster, unique_name, tmp_path: Path
) -> None:
    """Every actor of the running cluster is joined (start_local starts them side by side):
    they serve other storage, so ConfigurationError names it, and nothing was replaced."""
    create_stream(cluster, unique_name, "st", 1)
    names = [f"segment-container-{i}" for i in range(cluster.container_count)]
    names += ["controller", "request-event-processor", "cluster-manager"]

    def actor_ids() -> list[str]:
        return [ray.get_actor(n, namespace=cluster.namespace)._actor_id.hex() for n in names]

    before = actor_ids()
    with pytest.raises(pr.ConfigurationError, match="already runs in namespace"):
        pr.start_local(
            data_dir=tmp_path, container_count=cluster.container_count, namespace=cluster.namespace
        )
    assert actor_ids() == before
    assert unique_name in cluster.stream_manager().list_scopes()
    joined = pr.connect(namespace=cluster.namespace)
    assert joined.stream_manager().get_stream_info(unique_name, "st").state is pr.StreamState.ACTIVE
    joined.close()


def test_bad_input_through_actors_gets_typed_errors(cluster, unique_name, monkeypatch) -> None:
    mgr = cluster.stream_manager()
    with pytest.raises(pr.InvalidNameError):
        mgr.create_scope("../../outside")
    with pytest.raises(pr.InvalidNameError):
        mgr.create_scope("_system")
    with pytest.raises(pr.ScopeNotFoundError):
        mgr.create_stream(unique_name, "st")
    create_stream(cluster, unique_name, "st", 1)
    with pytest.raises(pr.StreamNotFoundError):
        cluster.create_writer(unique_name, "nope")
    with cluster.create_writer(unique_name, "st", pr.BytesSerializer()) as w:
        # Over 8 MiB is a large event; over LARGE_EVENT_BYTES_MAX (lowered here) too large.
        monkeypatch.setattr(constants, "LARGE_EVENT_BYTES_MAX", constants.MAX_EVENT_SIZE_BYTES)
        with pytest.raises(pr.EventTooLargeError):
            w.write_event(b"x" * (8 * 1024 * 1024 + 1))
        w.write_event(b"ok").result(30)
    mgr.seal_stream(unique_name, "st")
    with pytest.raises(pr.StreamSealedError):
        cluster.create_writer(unique_name, "st")
    assert mgr.get_stream_info(unique_name, "st").state is pr.StreamState.SEALED
    assert not any(p.name.startswith("outside") for p in Path(cluster.data_dir).parent.iterdir())


def test_data_of_an_older_format_is_refused_clearly(ray_session, tmp_path: Path) -> None:
    (tmp_path / "cluster.json").write_text('{"format": 1, "container_count": 2}')
    with pytest.raises(pr.ConfigurationError, match="format"):
        pr.start_local(data_dir=tmp_path, container_count=2, namespace="old-format")
