"""Pravega's official Python client against pravega-ray's two front doors.

The client runs in a venv of its own (``tests/wire/official_client.py``), its scenarios
as scripts in a subprocess. pravega-ray serves them from this process: an in-process
cluster (no Ray), one wire gateway per container (``pravega_ray.wire.gateway``) and the
controller's gRPC API (``pravega_ray.grpc``) on free loopback ports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pravega_ray.grpc.server import GrpcServer, serve
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import container_for_segment
from pravega_ray.wire.gateway import WireGateway
from tests.wire.official_client import RunClient, client_runner, install_client

CONTAINERS = 2


def _owned_by(container_id: int) -> Callable[[str], bool]:
    return lambda segment: container_for_segment(segment, CONTAINERS) == container_id


@pytest.fixture(scope="session")
def client_python() -> Path:
    return install_client()


@pytest.fixture(scope="module")
def front_doors() -> Iterator[tuple[InProcessCluster, GrpcServer]]:
    """An in-process cluster served through the wire gateways and the gRPC API."""
    cluster = InProcessCluster(CONTAINERS)
    gateways: list[WireGateway] = []
    ports: dict[int, int] = {}
    server: GrpcServer | None = None
    try:
        for i in range(CONTAINERS):
            gateway = WireGateway(cluster.container(i), owns=_owned_by(i))
            ports[i] = cluster.run(gateway.start()).result(10)
            gateways.append(gateway)

        def uri_for(segment: str) -> tuple[str, int]:
            return "127.0.0.1", ports[container_for_segment(segment, CONTAINERS)]

        server = serve(cluster.core, port=0, uri_for=uri_for)
        yield cluster, server
    finally:
        if server is not None:
            server.stop()
        for gateway in gateways:
            cluster.run(gateway.stop()).result(10)
        cluster.shutdown()


@pytest.fixture
def run_client(client_python: Path, front_doors: tuple[InProcessCluster, GrpcServer]) -> RunClient:
    """``run_client(script)``: ``script`` run by the official client against the in-process
    cluster's gRPC API (``official_client.client_runner``)."""
    _, server = front_doors
    return client_runner(client_python, f"tcp://127.0.0.1:{server.port}")
