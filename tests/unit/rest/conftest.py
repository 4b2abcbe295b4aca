"""Fixtures of the REST tests: one in-process cluster served on a free loopback port for the
session, and a real HTTP client (the standard library's ``http.client``) calling it."""

from __future__ import annotations

import http.client
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pravega_ray.inprocess import InProcessCluster
from pravega_ray.rest import RestServer, serve_rest

CALL_TIMEOUT_S = 10.0

_names = itertools.count()


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]


class Http:
    """Plain HTTP/1.1 requests to one server, one connection each (as curl would)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """``method path`` with ``body`` as JSON (or ``raw`` bytes); the reply, its body
        decoded as JSON when there is one."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        sent = {"Content-Type": "application/json", **(headers or {})}
        connection = http.client.HTTPConnection(self.host, self.port, timeout=CALL_TIMEOUT_S)
        try:
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            payload = response.read()
            decoded = json.loads(payload) if payload else None
            return Reply(response.status, decoded, dict(response.getheaders()))
        finally:
            connection.close()

    def get(self, path: str) -> Reply:
        return self.request("GET", path)

    def post(self, path: str, body: object) -> Reply:
        return self.request("POST", path, body)

    def put(self, path: str, body: object) -> Reply:
        return self.request("PUT", path, body)

    def delete(self, path: str) -> Reply:
        return self.request("DELETE", path)


@pytest.fixture(scope="session")
def rest_cluster() -> Iterator[InProcessCluster]:
    cluster = InProcessCluster(container_count=2)
    yield cluster
    cluster.shutdown()


@pytest.fixture(scope="session")
def rest_server(rest_cluster: InProcessCluster) -> Iterator[RestServer]:
    def online_readers(scope: str, group: str) -> list[str]:
        return rest_cluster.reader_group(scope, group).get_online_readers()

    server = serve_rest(rest_cluster.core, "127.0.0.1", 0, online_readers=online_readers)
    yield server
    server.stop()


@pytest.fixture
def client(rest_server: RestServer) -> Http:
    return Http(rest_server.host, rest_server.port)


@pytest.fixture
def new_name() -> Callable[[str], str]:
    """Names no other test of the session uses (they share one cluster)."""
    return lambda prefix: f"{prefix}{next(_names)}"


@pytest.fixture
def scope(client: Http, new_name: Callable[[str], str]) -> str:
    """A new scope, created through the API."""
    name = new_name("sc")
    assert client.post("/v1/scopes", {"scopeName": name}).status == 201
    return name
