"""Pravega's official Python client (``pravega`` 0.3.8) against a cluster on Ray, through the
endpoints ``start_local(endpoints=...)`` starts: the ``endpoints`` actor's gRPC API and each
container actor's wire gateway (issue 25, item 1). The session's cluster is joined with the
endpoints added; a container killed under the official writer loses and duplicates nothing.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

import pravega_ray as pr
from pravega_ray.endpoints import EndpointConfig
from pravega_ray.errors import ConfigurationError, InvalidArgumentError
from pravega_ray.stream_configuration import ReaderGroupConfig, ScalingPolicy, StreamConfiguration
from tests.endpoints import session_endpoints
from tests.wire.official_client import RunClient, client_runner, install_client, start_client

pytestmark = pytest.mark.timeout(600)

CONTAINERS = 4  # the session cluster's (tests/conftest.py)


@pytest.fixture(scope="module")
def endpoints(cluster: Any, cluster_data_dir: Path) -> Iterator[tuple[Any, dict[str, Any]]]:
    """The session's cluster joined with its endpoints started: ``(cluster, endpoints())``."""
    with session_endpoints(cluster_data_dir, CONTAINERS) as joined:
        yield joined


@pytest.fixture(scope="module")
def run_client(endpoints: tuple[Any, dict[str, Any]]) -> RunClient:
    return client_runner(install_client(), endpoints[1]["controller"])


def _read_all(cluster: Any, scope: str, stream: str, count: int) -> list[bytes]:
    group = "g" + uuid.uuid4().hex[:6]
    cluster.create_reader_group(scope, group, ReaderGroupConfig(streams=(f"{scope}/{stream}",)))
    reader = cluster.create_reader("r", scope, group)
    got: list[bytes] = []
    try:
        while len(got) < count:
            event = reader.read_next_event(30.0)
            assert event is not None and event.event is not None, f"{len(got)} of {count} read"
            got.append(event.event)
        extra = reader.read_next_event(1.0)
        assert extra is None or extra.event is None, f"more than {count} events: {extra}"
    finally:
        reader.close()
    return got


def test_endpoints_say_where_they_listen_and_bad_configs_are_refused(
    endpoints: tuple[Any, dict[str, Any]],
) -> None:
    cluster, described = endpoints
    config = described["config"]
    assert described["controller"].startswith("tcp://127.0.0.1:")
    assert sorted(described["segment_store"]) == list(range(CONTAINERS))
    base = int(config["wire_port_base"])
    assert described["segment_store"] == {i: f"127.0.0.1:{base + i}" for i in range(CONTAINERS)}
    with pytest.raises(ConfigurationError, match="insecure_ok"):
        EndpointConfig(host="0.0.0.0")
    with pytest.raises(InvalidArgumentError, match="IP literal"):
        EndpointConfig(host="localhost")
    with pytest.raises(InvalidArgumentError):
        EndpointConfig(grpc_port=70000)
    with pytest.raises(InvalidArgumentError, match="endpoints must be"):
        pr.start_local(container_count=CONTAINERS, endpoints="yes")  # type: ignore[arg-type]
    other = EndpointConfig(grpc_port=0, wire_port_base=0)
    with pytest.raises(ConfigurationError, match="already run"):
        pr.start_local(data_dir=cluster.data_dir, container_count=CONTAINERS, endpoints=other)


def test_the_official_client_and_pravega_ray_share_a_stream_on_ray(
    run_client: RunClient, endpoints: tuple[Any, dict[str, Any]]
) -> None:
    cluster, _ = endpoints
    scope = "e" + uuid.uuid4().hex[:10]
    run_client(
        f"""
        manager.create_scope("{scope}")
        manager.create_stream("{scope}", "s", 3)
        writer = manager.create_writer("{scope}", "s")
        for i in range(200):
            writer.write_event(f"official-{{i % 5}}-{{i}}", f"k{{i % 5}}")
        writer.flush()
        """
    )
    with cluster.create_writer(scope, "s") as writer:
        for i in range(100):
            writer.write_event(f"ours-{i % 5}-{i}".encode(), routing_key=f"k{i % 5}")
        writer.flush()
    expected = [f"official-{i % 5}-{i}" for i in range(200)] + [
        f"ours-{i % 5}-{i}" for i in range(100)
    ]

    def per_key(events: list[str]) -> dict[str, list[str]]:
        keyed: dict[str, list[str]] = {}
        for event in events:
            keyed.setdefault(event.split("-")[1], []).append(event)
        return keyed

    ours = [e.decode() for e in _read_all(cluster, scope, "s", 300)]
    assert sorted(ours) == sorted(expected)
    assert per_key(ours) == per_key(expected)  # each key in the order written
    out = run_client(
        f"""
        import json
        group = manager.create_reader_group("g", "{scope}", "s")
        reader = group.create_reader("r")
        print(json.dumps(read_events(reader, 300)))
        """
    )
    theirs = json.loads(out.splitlines()[-1])
    assert sorted(theirs) == sorted(expected)
    assert per_key(theirs) == per_key(expected)


def _one_segment_stream(cluster: Any, letter: str) -> str:
    """A new scope (named from ``letter``) with a one-segment stream ``s``; the scope."""
    scope = letter + uuid.uuid4().hex[:10]
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    mgr.create_stream(scope, "s", StreamConfiguration(scaling=ScalingPolicy.fixed(1)))
    return scope


def test_a_container_killed_under_the_official_writer_loses_and_duplicates_nothing(
    endpoints: tuple[Any, dict[str, Any]],
) -> None:
    cluster, described = endpoints
    scope = _one_segment_stream(cluster, "k")
    total = 3000
    client = start_client(
        described["controller"],
        f"""
        writer = manager.create_writer("{scope}", "s")
        for i in range({total}):
            writer.write_event(f"{{i}}", "key")
            if i % 250 == 0:
                writer.flush()
                print("progress", i, flush=True)
        writer.flush()
        print("done", flush=True)
        """,
    )
    killed_at = None
    assert client.stdout is not None
    try:
        for line in client.stdout:
            if line.startswith("progress") and int(line.split()[1]) >= 750 and killed_at is None:
                segment = f"{scope}/s/0.#epoch.0"
                ray.kill(cluster.container_handle(segment), no_restart=False)
                killed_at = time.monotonic()
        assert client.wait(300) == 0, client.stderr.read() if client.stderr else ""
    finally:
        if client.poll() is None:
            client.kill()
    assert killed_at is not None, "the writer finished before the kill"
    got = [int(e) for e in _read_all(cluster, scope, "s", total)]
    assert got == list(range(total))  # every event once, in order


def test_ray_data_reads_what_the_official_writer_wrote(
    run_client: RunClient, endpoints: tuple[Any, dict[str, Any]]
) -> None:
    cluster, _ = endpoints
    scope = "d" + uuid.uuid4().hex[:10]
    run_client(
        f"""
        manager.create_scope("{scope}")
        manager.create_stream("{scope}", "s", 2)
        writer = manager.create_writer("{scope}", "s")
        for i in range(500):
            writer.write_event(f"row-{{i}}", f"k{{i % 7}}")
        writer.flush()
        """
    )
    rows = pr.data.read_stream(f"{scope}/s", cluster=cluster).take_all()
    assert sorted(bytes(r["event"]).decode() for r in rows) == sorted(
        f"row-{i}" for i in range(500)
    )


def test_ten_thousand_fuzzed_frames_leave_every_container_serving(
    endpoints: tuple[Any, dict[str, Any]],
) -> None:
    """Random and damaged frames (``tests/unit/wire/test_gateway.fuzz_frames``) to every live
    container actor's gateway: each answers the marker after every batch, keeps its process
    (no restart), and pravega-ray's own writer and reader work through it afterwards."""
    import asyncio
    import random

    from pravega_ray.wire import GetStreamSegmentInfo
    from tests.unit.wire.test_gateway import Client, fuzz_frames

    cluster, described = endpoints
    pids = [ray.get(h.describe.remote())["pid"] for h in cluster.container_handles()]
    frames = fuzz_frames(random.Random(20261127), 10_000)

    async def fuzz(port: int, part: list[bytes]) -> int:
        closed = 0
        client = await Client.connect(port)
        for batch, start in enumerate(range(0, len(part), 100)):
            marker = 10**12 + batch
            try:
                for frame in part[start : start + 100]:
                    await client.send(frame)
                await client.send(GetStreamSegmentInfo(request_id=marker, segment_name="x/y/0"))
                while getattr(await client.receive(10.0), "request_id", None) != marker:
                    pass
            except ConnectionError:
                closed += 1
                client = await Client.connect(port)
        return closed

    async def fuzz_all() -> list[int]:
        ports = [int(a.rpartition(":")[2]) for a in described["segment_store"].values()]
        share = len(frames) // len(ports)
        return await asyncio.gather(
            *(fuzz(port, frames[i * share : (i + 1) * share]) for i, port in enumerate(ports))
        )

    assert asyncio.run(fuzz_all()) == [0] * CONTAINERS
    assert [ray.get(h.describe.remote())["pid"] for h in cluster.container_handles()] == pids
    scope = "f" + uuid.uuid4().hex[:10]
    cluster.stream_manager().create_scope(scope)
    cluster.stream_manager().create_stream(
        scope, "s", StreamConfiguration(scaling=ScalingPolicy.fixed(CONTAINERS))
    )
    with cluster.create_writer(scope, "s") as writer:
        for i in range(100):
            writer.write_event(f"{i}".encode(), routing_key=f"k{i}")
        writer.flush()
    assert sorted(int(e) for e in _read_all(cluster, scope, "s", 100)) == list(range(100))


def test_byte_streams_on_ray_cross_with_the_official_client(
    run_client: RunClient, endpoints: tuple[Any, dict[str, Any]]
) -> None:
    """``Cluster.create_byte_writer/create_byte_reader`` through Ray, and the official
    client's byte reader reading what they wrote. (Its writer starts at offset 0, so it can
    only write to an empty byte stream: tests/wire covers that direction.)"""
    import hashlib

    cluster, _ = endpoints
    scope = "b" + uuid.uuid4().hex[:10]
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    mgr.create_stream(scope, "bytes", StreamConfiguration(scaling=ScalingPolicy.fixed(1)))
    ours = bytes(range(256)) * 4096  # 1 MiB
    with cluster.create_byte_writer(scope, "bytes") as writer:
        writer.write(ours)
        writer.flush()
    out = run_client(
        f"""
        import hashlib, json
        stream = manager.create_byte_stream("{scope}", "bytes")
        got = bytearray()
        while len(got) < {len(ours)}:
            piece = bytearray({len(ours)} - len(got))
            got += piece[: stream.readinto(piece)]
        print(json.dumps([hashlib.sha256(got).hexdigest(), stream.current_tail_offset()]))
        """
    )
    digest, tail = json.loads(out.splitlines()[-1])
    assert digest == hashlib.sha256(ours).hexdigest() and tail == len(ours)
    reader = cluster.create_byte_reader(scope, "bytes")
    try:
        reader.seek_to_offset(len(ours) - 10)
        assert reader.read(100, timeout_s=30) == ours[-10:]
    finally:
        reader.close()


def test_the_rest_api_on_ray_serves_scopes_streams_and_health(
    endpoints: tuple[Any, dict[str, Any]],
) -> None:
    import urllib.error
    import urllib.request

    cluster, described = endpoints
    rest = described["rest"]
    scope = "h" + uuid.uuid4().hex[:10]

    def call(method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{rest}{path}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                raw = reply.read()
                return reply.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    assert call("GET", "/health/liveness")[0] == 200
    assert call("POST", "/scopes", {"scopeName": scope})[0] == 201
    assert call("POST", "/scopes", {"scopeName": scope})[0] == 409
    created = call("POST", f"/scopes/{scope}/streams", {"streamName": "s"})
    assert created[0] == 201 and created[1]["streamName"] == "s"
    assert cluster.stream_manager().list_streams(scope) == ["s"]
    assert call("PUT", f"/scopes/{scope}/streams/s/state", {"streamState": "SEALED"})[0] == 200
    assert call("DELETE", f"/scopes/{scope}/streams/s")[0] == 204
    assert call("DELETE", f"/scopes/{scope}")[0] == 204
    assert call("GET", f"/scopes/{scope}")[0] == 404


def test_an_official_reader_goes_on_after_its_segment_s_container_is_killed(
    endpoints: tuple[Any, dict[str, Any]],
) -> None:
    """The official reader group reads while pravega-ray's writer writes; the container of
    the stream's segment (and of nothing else it reads, the group's state aside) is killed
    midway: every event is read, once."""
    cluster, described = endpoints
    scope = _one_segment_stream(cluster, "q")
    total = 2000
    client = start_client(
        described["controller"],
        f"""
        group = manager.create_reader_group("g", "{scope}", "s")
        reader = group.create_reader("r")
        print("ready", flush=True)
        got = read_events(reader, {total}, timeout_s=240)
        print("read", len(got), len(set(got)), flush=True)
        """,
    )
    assert client.stdout is not None
    try:
        assert client.stdout.readline().strip() == "ready"
        with cluster.create_writer(scope, "s") as writer:
            for i in range(total):
                writer.write_event(f"{i}".encode(), routing_key="key")
                if i == total // 2:
                    writer.flush()
                    ray.kill(cluster.container_handle(f"{scope}/s/0.#epoch.0"), no_restart=False)
            writer.flush()
        assert client.wait(300) == 0, client.stderr.read() if client.stderr else ""
        assert client.stdout.read().split() == ["read", str(total), str(total)]
    finally:
        if client.poll() is None:
            client.kill()
