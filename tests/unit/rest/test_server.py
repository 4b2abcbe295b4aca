"""Serving (pravega_ray/rest/server.py): loopback only unless told, JSON for every error
aiohttp answers itself, bounded bodies and calls, a bug is a 500, and a stopped server is
gone."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from pravega_ray.errors import ConfigurationError, InvalidArgumentError, StreamNotFoundError
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.rest import RestServer, serve_rest
from pravega_ray.rest.server import BODY_BYTES_MAX
from tests.unit.rest.conftest import Http
from tests.unit.threads import alive_named

pytestmark = pytest.mark.timeout(30)

LOOP_THREAD = "pravega-rest-loop"


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "example.com"])
def test_serve_rest_refuses_a_non_loopback_address(host: str) -> None:
    with pytest.raises(ConfigurationError, match="insecure_ok"):
        serve_rest(object(), host, 0)  # type: ignore[arg-type]  # refused before it is used


@pytest.mark.parametrize("port", [-1, 65536, "9091", True, 1.5])
def test_serve_rest_refuses_a_bad_port(port: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        serve_rest(object(), "127.0.0.1", port)  # type: ignore[arg-type]


def test_serve_rest_on_a_port_in_use_is_a_configuration_error(rest_server: RestServer) -> None:
    before = set(alive_named(LOOP_THREAD))
    with pytest.raises(ConfigurationError, match="cannot bind"):
        serve_rest(object(), "127.0.0.1", rest_server.port)  # type: ignore[arg-type]
    for thread in set(alive_named(LOOP_THREAD)) - before:
        thread.join(5)
    assert set(alive_named(LOOP_THREAD)) <= before  # its loop thread stopped


def test_port_zero_picks_a_free_port(rest_server: RestServer) -> None:
    assert rest_server.port > 0
    assert rest_server.url == f"http://127.0.0.1:{rest_server.port}"


@pytest.mark.parametrize(
    "path",
    ["/", "/v1", "/v2/scopes", "/v1/scopes/", "/v1/scopes/sc/streams/st/nope", "/v1/healthz"],
)
def test_an_unknown_path_answers_404_in_json(client: Http, path: str) -> None:
    reply = client.get(path)
    assert reply.status == 404
    assert reply.body["code"] == 404
    assert path in reply.body["message"]


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PATCH", "/v1/scopes", {"GET", "HEAD", "POST"}),
        ("PUT", "/v1/scopes", {"GET", "HEAD", "POST"}),
        ("POST", "/v1/scopes/sc", {"GET", "HEAD", "DELETE"}),
        ("DELETE", "/v1/scopes/sc/streams/st/state", {"PUT"}),
        ("POST", "/v1/health/readiness", {"GET", "HEAD"}),
    ],
)
def test_a_wrong_method_answers_405_naming_the_allowed_ones(
    client: Http, method: str, path: str, allowed: set[str]
) -> None:
    reply = client.request(method, path, {"scopeName": "x"})
    assert reply.status == 405
    assert set(reply.headers["Allow"].split(",")) == allowed
    assert reply.body["code"] == 405


def test_a_huge_body_answers_413_and_creates_nothing(client: Http) -> None:
    before = client.get("/v1/scopes").body
    body = b'{"scopeName": "huge", "pad": "' + b"x" * (BODY_BYTES_MAX + 10) + b'"}'
    reply = client.request("POST", "/v1/scopes", raw=body)
    assert reply.status == 413
    assert reply.body["code"] == 413
    assert client.get("/v1/scopes").body == before
    assert client.get("/v1/health/liveness").body is True


def test_a_body_at_the_limit_is_read(client: Http) -> None:
    pad = "x" * (BODY_BYTES_MAX - 100)
    reply = client.request(
        "POST", "/v1/scopes", raw=f'{{"scopeName": "!", "pad": "{pad}"}}'.encode()
    )
    assert reply.status == 400  # read and refused for its name, not its size


def test_a_connection_sending_garbage_does_not_hurt_the_server(rest_server: RestServer) -> None:
    with socket.create_connection((rest_server.host, rest_server.port), timeout=5) as sock:
        sock.sendall(b"\x00\xffNOT HTTP\r\n\r\n")
        answer = sock.recv(1024)
    assert answer.startswith(b"HTTP/1.") and b" 400 " in answer.split(b"\r\n")[0]
    assert Http(rest_server.host, rest_server.port).get("/v1/health/liveness").body is True


class _Broken:
    """A controller double: the real one, but listing scopes fails with a bug and getting a
    stream does not answer until ``release`` is set."""

    def __init__(self, controller: Any) -> None:
        self._controller = controller
        self.release = threading.Event()

    def list_scopes(self) -> list[str]:
        raise RuntimeError("a bug")

    def get_stream_info(self, scope: str, stream: str) -> Any:
        self.release.wait(10)
        raise StreamNotFoundError(f"stream {scope}/{stream} does not exist")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._controller, name)


def test_a_bug_answers_500_and_is_logged(
    rest_cluster: InProcessCluster, caplog: pytest.LogCaptureFixture
) -> None:
    broken = _Broken(rest_cluster.core)
    with serve_rest(broken, "127.0.0.1", 0, call_timeout_s=0.2) as server:
        client = Http(server.host, server.port)
        reply = client.get("/v1/scopes")
        assert reply.status == 500
        assert reply.body == {"code": 500, "error": "RuntimeError", "message": "a bug"}
        assert "REST GET /v1/scopes: unexpected error" in caplog.text
        try:
            slow = client.get("/v1/scopes/sc/streams/st")
            assert (slow.status, slow.body["error"]) == (500, "TimeoutError")
        finally:
            broken.release.set()
        assert client.post("/v1/scopes", {"scopeName": "after-a-bug"}).status == 201  # still serves


def test_a_stopped_server_refuses_connections(rest_cluster: InProcessCluster) -> None:
    server = serve_rest(rest_cluster.core, "127.0.0.1", 0)
    client = Http(server.host, server.port)
    assert client.get("/v1/health/liveness").status == 200
    server.stop()
    server.stop()  # idempotent
    with pytest.raises(ConnectionRefusedError):
        client.get("/v1/health/liveness")


def test_serve_rest_is_called_from_any_thread(rest_cluster: InProcessCluster) -> None:
    servers: list[RestServer] = []
    thread = threading.Thread(target=lambda: servers.append(serve_rest(rest_cluster.core, port=0)))
    thread.start()
    thread.join(10)
    (server,) = servers
    try:
        assert Http(server.host, server.port).get("/v1/health/liveness").body is True
    finally:
        server.stop()
