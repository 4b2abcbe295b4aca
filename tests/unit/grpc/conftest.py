"""Fixtures of the gRPC tests: an in-process cluster served on a free loopback port, and a
real grpcio client channel calling it with the schema's own message classes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from pravega_ray.grpc import GrpcServer, message_class, method_path, serve
from pravega_ray.grpc.schema import RPCS
from pravega_ray.inprocess import InProcessCluster

GATEWAY = ("127.0.0.1", 6123)
CALL_TIMEOUT_S = 10.0


class Client:
    """Calls the served API as Pravega's clients do: one unary call per RPC."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._channel = channel
        self._responses = {rpc.name: rpc.response for rpc in RPCS}
        self.uri_requests: list[str] = []

    def call(self, rpc: str, request: Any) -> Any:
        """The reply of ``rpc``; grpc.RpcError for a non-OK status."""
        stub = self._channel.unary_unary(
            method_path(rpc),
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=message_class(self._responses[rpc]).FromString,
        )
        return stub(request, timeout=CALL_TIMEOUT_S)

    def code(self, rpc: str, request: Any) -> grpc.StatusCode:
        """The status code ``rpc`` answers (OK for a reply)."""
        try:
            self.call(rpc, request)
        except grpc.RpcError as e:
            return e.code()
        return grpc.StatusCode.OK


@pytest.fixture
def cluster() -> Iterator[InProcessCluster]:
    cluster = InProcessCluster(container_count=2)
    yield cluster
    cluster.shutdown()


def start(controller: Any, uri_requests: list[str], **options: Any) -> GrpcServer:
    def uri_for(segment: str) -> tuple[str, int]:
        uri_requests.append(segment)
        return GATEWAY

    return serve(controller, "127.0.0.1", 0, uri_for, workflow_wait_s=30, **options)


@pytest.fixture
def server(cluster: InProcessCluster) -> Iterator[tuple[GrpcServer, Client]]:
    uri_requests: list[str] = []
    server = start(cluster.core, uri_requests, page_size=2)
    channel = grpc.insecure_channel(server.target)
    client = Client(channel)
    client.uri_requests = uri_requests
    yield server, client
    channel.close()
    server.stop()


@pytest.fixture
def client(server: tuple[GrpcServer, Client]) -> Client:
    return server[1]
