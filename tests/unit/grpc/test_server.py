"""Serving (pravega_ray/grpc/server.py): loopback only unless told, a bug answers INTERNAL, and
a stopped server is gone."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from pravega_ray.errors import ConfigurationError, InvalidArgumentError
from pravega_ray.grpc import fixed_endpoint, is_loopback, message_class, serve
from pravega_ray.inprocess import InProcessCluster
from tests.unit.grpc.conftest import Client, start

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "example.com"])
def test_serve_refuses_a_non_loopback_address(host: str) -> None:
    with pytest.raises(ConfigurationError, match="insecure_ok"):
        serve(object(), host, 0)  # type: ignore[arg-type]  # refused before it is used


def test_loopback_addresses() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.0.1", "host"))


def test_fixed_endpoint_wants_an_ip_literal_and_a_port() -> None:
    assert fixed_endpoint("127.0.0.1", 6000)("sc/st/0.#epoch.0") == ("127.0.0.1", 6000)
    for host, port in (("localhost", 6000), ("127.0.0.1", 0), ("127.0.0.1", 70000)):
        with pytest.raises(InvalidArgumentError):
            fixed_endpoint(host, port)


class _Broken:
    """A controller double: the real one, but listing scopes fails with a bug."""

    def __init__(self, controller: Any) -> None:
        self._controller = controller

    def list_scopes(self) -> list[str]:
        raise RuntimeError("a bug")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._controller, name)


def test_an_unexpected_error_is_internal_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    cluster = InProcessCluster(container_count=1)
    server = start(_Broken(cluster.core), [])
    channel = grpc.insecure_channel(server.target)
    try:
        client = Client(channel)
        assert client.code("listScopes", message_class("ScopesRequest")()) == (
            grpc.StatusCode.INTERNAL
        )
        assert "gRPC listScopes: unexpected error" in caplog.text
        reply = client.call("createScope", message_class("ScopeInfo")(scope="sc"))
        assert reply.status == 0  # other RPCs still answer
    finally:
        channel.close()
        server.stop()
        cluster.shutdown()


def test_a_stopped_server_answers_unavailable() -> None:
    cluster = InProcessCluster(container_count=1)
    server = start(cluster.core, [])
    server.stop()
    server.stop()  # idempotent
    channel = grpc.insecure_channel(server.target)
    try:
        code = Client(channel).code("listScopes", message_class("ScopesRequest")())
        assert code == grpc.StatusCode.UNAVAILABLE
    finally:
        channel.close()
        cluster.shutdown()
