"""chaos/s3_proxy.py: transparent forwarding and injected faults.

The fast tests put the proxy in front of a small recording HTTP server started here (a real
server on 127.0.0.1, not a mock) and talk to it with http.client or a raw socket. The last test
puts it in front of the SeaweedFS server (marker ``s3``) and drives it with boto3.
"""

from __future__ import annotations

import dataclasses
import http.client
import socket
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

from chaos.s3_proxy import FaultKind, FaultyS3Proxy, ProxyFaults
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.storage.s3 import S3_READ_TIMEOUT_S

OFF = ProxyFaults(rate=0.0)


def expected_counts(requests: int, **faults: int) -> dict[str, int]:
    return {"requests": requests, **{kind.value: faults.get(kind.value, 0) for kind in FaultKind}}


@dataclasses.dataclass(frozen=True)
class Received:
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes


def read_chunked(rfile: Any) -> bytes:
    parts = []
    while size := int(rfile.readline().split(b";")[0], 16):
        parts.append(rfile.read(size))
        rfile.readline()
    while rfile.readline().strip():
        pass
    return b"".join(parts)


class Upstream(ThreadingHTTPServer):
    daemon_threads = True
    received: list[Received]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


class Recorder(BaseHTTPRequestHandler):
    """Records each request and answers ``echo:<body>``; DELETE gets 204, ``?reply=chunked``
    a chunked answer."""

    protocol_version = "HTTP/1.1"
    server: Upstream

    def answer(self) -> None:
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            body = read_chunked(self.rfile)
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        target = self.requestline.split()[1]
        self.server.received.append(
            Received(self.command, target, list(self.headers.items()), body)
        )
        if self.command == "DELETE":
            self.send_response(204)
            self.end_headers()
            return
        reply = b"echo:" + body
        self.send_response(200)
        self.send_header("X-Upstream", "yes")
        if target.endswith("reply=chunked"):
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"3\r\nech\r\n2\r\no:\r\n0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream(("127.0.0.1", 0), Recorder)
    server.received = []
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(upstream: Upstream) -> Iterator[FaultyS3Proxy]:
    with FaultyS3Proxy(upstream.url, seed=1, faults=OFF) as proxy:
        yield proxy


def connect(proxy: FaultyS3Proxy, timeout: float = 5.0) -> http.client.HTTPConnection:
    address = urlsplit(proxy.endpoint)
    return http.client.HTTPConnection(address.hostname or "", address.port, timeout=timeout)


def send(
    conn: http.client.HTTPConnection,
    method: str,
    target: str,
    headers: Sequence[tuple[str, str]] = (),
    body: bytes | None = None,
) -> tuple[http.client.HTTPResponse, bytes]:
    """Exactly these headers (no Host or Accept-Encoding added), then the body."""
    conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
    for name, value in headers:
        conn.putheader(name, value)
    conn.endheaders(body)
    response = conn.getresponse()
    return response, response.read()


def get(proxy: FaultyS3Proxy, target: str = "/b/k") -> int:
    conn = connect(proxy)
    try:
        return send(conn, "GET", target, [("Host", "h")])[0].status
    finally:
        conn.close()


def test_forwards_method_target_headers_and_body_exactly(
    upstream: Upstream, proxy: FaultyS3Proxy
) -> None:
    target = "/bucket/a%2Fb%20c//d~e?x-id=PutObject&prefix=p%3Dq&empty="
    headers = [
        ("Host", "s3.example:9000"),
        ("x-amz-date", "20240101T000000Z"),
        ("X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD"),
        ("Authorization", "AWS4-HMAC-SHA256 Credential=k/20240101/us-east-1/s3/aws4_request"),
        ("x-amz-meta-dup", "one"),
        ("x-amz-meta-dup", "two"),
        ("Content-Length", "5"),
    ]
    conn = connect(proxy)
    response, body = send(conn, "PUT", target, headers, b"hello")
    conn.close()
    assert (response.status, body) == (200, b"echo:hello")
    assert response.getheader("X-Upstream") == "yes"
    assert response.getheader("Content-Length") == "10"
    assert len(response.headers.get_all("Server") or []) == 1  # upstream's, not a second one
    assert upstream.received == [Received("PUT", target, headers, b"hello")]
    assert proxy.counts() == expected_counts(1)


def test_hop_by_hop_headers_are_not_forwarded(upstream: Upstream, proxy: FaultyS3Proxy) -> None:
    headers = [
        ("Host", "h"),
        ("Connection", "keep-alive, X-Private"),
        ("Keep-Alive", "timeout=5"),
        ("Proxy-Authorization", "Basic eA=="),
        ("TE", "trailers"),
        ("X-Private", "1"),
        ("X-Kept", "2"),
    ]
    conn = connect(proxy)
    assert send(conn, "GET", "/b/k", headers)[0].status == 200
    conn.close()
    assert upstream.received[0].headers == [("Host", "h"), ("X-Kept", "2")]


def test_chunked_put_is_forwarded_chunked(upstream: Upstream, proxy: FaultyS3Proxy) -> None:
    conn = connect(proxy)
    conn.request(
        "PUT", "/b/k", body=iter([b"hello ", b"world"]), headers={"Host": "h"}, encode_chunked=True
    )
    response = conn.getresponse()
    assert (response.status, response.read()) == (200, b"echo:hello world")
    conn.close()
    (received,) = upstream.received
    assert received.body == b"hello world"
    assert ("Transfer-Encoding", "chunked") in received.headers
    assert "Content-Length" not in dict(received.headers)


def test_chunk_extensions_and_trailers_over_a_raw_socket(
    upstream: Upstream, proxy: FaultyS3Proxy
) -> None:
    address = urlsplit(proxy.endpoint)
    with socket.create_connection((address.hostname or "", address.port or 0), timeout=5) as s:
        s.sendall(
            b"PUT /b/k HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n"
        )
        response = http.client.HTTPResponse(s)
        response.begin()
        assert (response.status, response.read()) == (200, b"echo:hello0123456789")
    assert upstream.received[0].body == b"hello0123456789"


def test_aws_chunked_content_encoding_is_just_bytes(
    upstream: Upstream, proxy: FaultyS3Proxy
) -> None:
    body = b"5;chunk-signature=ab\r\nhello\r\n0;chunk-signature=cd\r\n\r\n"
    headers = [
        ("Host", "h"),
        ("Content-Encoding", "aws-chunked"),
        ("x-amz-decoded-content-length", "5"),
        ("Content-Length", str(len(body))),
    ]
    conn = connect(proxy)
    assert send(conn, "PUT", "/b/k", headers, body)[0].status == 200
    conn.close()
    assert upstream.received == [Received("PUT", "/b/k", headers, body)]


def test_head_keeps_content_length_without_a_body_and_keep_alive_works(
    upstream: Upstream, proxy: FaultyS3Proxy
) -> None:
    conn = connect(proxy)
    response, body = send(conn, "HEAD", "/b/k", [("Host", "h")])
    assert (response.status, response.getheader("Content-Length"), body) == (200, "5", b"")
    sock = conn.sock
    response, body = send(conn, "PUT", "/b/k", [("Host", "h"), ("Content-Length", "2")], b"ab")
    assert (response.status, body) == (200, b"echo:ab")
    response, body = send(conn, "DELETE", "/b/k", [("Host", "h")])
    assert (response.status, body) == (204, b"")
    assert conn.sock is sock  # one connection for all three
    response, body = send(conn, "GET", "/b/k", [("Host", "h"), ("Connection", "close")])
    assert (response.status, response.getheader("Connection")) == (200, "close")
    conn.close()
    assert [r.method for r in upstream.received] == ["HEAD", "PUT", "DELETE", "GET"]


def test_a_chunked_answer_gets_a_content_length(proxy: FaultyS3Proxy) -> None:
    conn = connect(proxy)
    response, body = send(conn, "GET", "/b/k?reply=chunked", [("Host", "h")])
    conn.close()
    assert (response.status, body, response.getheader("Content-Length")) == (200, b"echo:", "5")
    assert response.getheader("Transfer-Encoding") is None


@pytest.mark.parametrize(
    ("kind", "status", "code"),
    [(FaultKind.ERROR_500, 500, "InternalError"), (FaultKind.ERROR_503, 503, "SlowDown")],
)
def test_error_faults_answer_with_s3_xml(
    upstream: Upstream, proxy: FaultyS3Proxy, kind: FaultKind, status: int, code: str
) -> None:
    proxy.set_faults(ProxyFaults(rate=1.0, kinds=(kind,)))
    conn = connect(proxy)
    for _ in range(2):  # the body is consumed: the connection stays usable
        response, body = send(conn, "PUT", "/b/k", [("Host", "h"), ("Content-Length", "3")], b"abc")
        assert (response.status, response.getheader("Content-Type")) == (status, "application/xml")
        error = ET.fromstring(body)
        assert (error.tag, error.findtext("Code"), error.findtext("Resource")) == (
            "Error",
            code,
            "/b/k",
        )
    conn.close()
    assert upstream.received == []
    assert proxy.counts()[kind.value] == 2
    assert proxy.counts()["requests"] == 0


def test_timeout_holds_then_closes_without_an_answer(
    upstream: Upstream, proxy: FaultyS3Proxy
) -> None:
    proxy.set_faults(ProxyFaults(rate=1.0, kinds=(FaultKind.TIMEOUT,), timeout_s=0.3))
    conn = connect(proxy)
    started = time.monotonic()
    with pytest.raises(http.client.RemoteDisconnected):
        send(conn, "GET", "/b/k", [("Host", "h")])
    assert 0.3 <= time.monotonic() - started < 2.0
    conn.close()
    assert upstream.received == []
    assert proxy.counts()["timeout"] == 1


def test_slow_delays_then_forwards(upstream: Upstream, proxy: FaultyS3Proxy) -> None:
    proxy.set_faults(ProxyFaults(rate=1.0, kinds=(FaultKind.SLOW,), slow_s=0.3))
    started = time.monotonic()
    assert get(proxy) == 200
    assert time.monotonic() - started >= 0.3
    assert len(upstream.received) == 1
    assert proxy.counts() == expected_counts(1, slow=1)


def test_rate_zero_forwards_everything(upstream: Upstream, proxy: FaultyS3Proxy) -> None:
    assert [get(proxy) for _ in range(20)] == [200] * 20
    assert len(upstream.received) == 20
    assert proxy.counts() == expected_counts(20)


def fault_sequence(upstream: Upstream, seed: int) -> tuple[list[int], dict[str, int]]:
    kinds = (FaultKind.ERROR_500, FaultKind.ERROR_503, FaultKind.SLOW)
    faults = ProxyFaults(rate=0.5, kinds=kinds, slow_s=0.0)
    with FaultyS3Proxy(upstream.url, seed=seed, faults=faults) as proxy:
        return [get(proxy) for _ in range(30)], proxy.counts()


def test_the_same_seed_gives_the_same_faults(upstream: Upstream) -> None:
    statuses, counts = fault_sequence(upstream, seed=42)
    assert (statuses, counts) == fault_sequence(upstream, seed=42)
    assert statuses != fault_sequence(upstream, seed=43)[0]
    assert set(statuses) == {200, 500, 503}
    assert counts["error_500"] == statuses.count(500)
    assert counts["error_503"] == statuses.count(503)
    assert counts["requests"] == statuses.count(200) >= counts["slow"] > 0


def test_set_faults_at_runtime(proxy: FaultyS3Proxy) -> None:
    assert get(proxy) == 200
    proxy.set_faults(ProxyFaults(rate=1.0, kinds=(FaultKind.ERROR_500,)))
    assert get(proxy) == 500
    proxy.set_faults(ProxyFaults(rate=0.0))
    assert get(proxy) == 200
    assert proxy.counts()["requests"] == 2


def test_stop_is_prompt_while_a_timeout_is_held(upstream: Upstream) -> None:
    faults = ProxyFaults(rate=1.0, kinds=(FaultKind.TIMEOUT,), timeout_s=30.0)
    proxy = FaultyS3Proxy(upstream.url, seed=1, faults=faults)
    proxy.start()
    errors: list[BaseException] = []

    def client() -> None:
        try:
            get(proxy)
        except (OSError, http.client.HTTPException) as e:
            errors.append(e)

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while proxy.counts()["timeout"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    proxy.stop()
    assert time.monotonic() - started < 2.0
    thread.join(2.0)
    assert not thread.is_alive()
    assert len(errors) == 1  # closed without an answer
    address = urlsplit(proxy.endpoint)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((address.hostname or "", address.port or 0), timeout=1)
    proxy.stop()  # idempotent


def test_unreachable_upstream_gives_502() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with FaultyS3Proxy(f"http://127.0.0.1:{port}", seed=1, faults=OFF) as proxy:
        assert get(proxy) == 502


def test_lifecycle_errors(upstream: Upstream) -> None:
    proxy = FaultyS3Proxy(upstream.url, seed=1)
    with pytest.raises(RuntimeError):
        _ = proxy.endpoint
    with proxy:
        assert proxy.endpoint.startswith("http://127.0.0.1:")
        with pytest.raises(RuntimeError):
            proxy.start()
    with pytest.raises(InvalidArgumentError):
        FaultyS3Proxy("https://127.0.0.1:1", seed=1)


@pytest.mark.parametrize(
    "options",
    [
        {"rate": -0.1},
        {"rate": 1.5},
        {"rate": float("nan")},
        {"rate": float("inf")},
        {"rate": "0.5"},
        {"rate": True},
        {"slow_s": -1.0},
        {"slow_s": float("nan")},
        {"timeout_s": -0.5},
        {"timeout_s": float("inf")},
        {"kinds": ()},
        {"kinds": ("bogus",)},
        {"kinds": (FaultKind.SLOW, 3)},
        {"kinds": FaultKind.SLOW},
    ],
)
def test_bad_faults_are_rejected(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        ProxyFaults(**options)


def test_faults_defaults_and_kinds_by_value() -> None:
    faults = ProxyFaults()
    assert faults.rate == 0.05
    assert faults.kinds == tuple(FaultKind)
    assert faults.timeout_s > S3_READ_TIMEOUT_S  # longer than the S3 client's read timeout
    assert ProxyFaults(kinds=("timeout", "slow")).kinds == (  # type: ignore[arg-type]
        FaultKind.TIMEOUT,
        FaultKind.SLOW,
    )


def test_boto3_through_the_proxy(s3_server: Any, s3_bucket: tuple[Any, str]) -> None:
    """SigV4 verifies through the proxy; boto3's retries ride out 30% SlowDown answers."""
    from botocore.exceptions import ClientError

    _, bucket = s3_bucket
    with FaultyS3Proxy(s3_server.endpoint_url, seed=5, faults=OFF) as proxy:
        client = dataclasses.replace(s3_server, endpoint_url=proxy.endpoint).client(
            retries={"mode": "standard", "max_attempts": 10}, connect_timeout=2, read_timeout=10
        )
        key = "dir/a b+c=d~é"
        big = bytes(range(256)) * 8192  # 2 MiB: botocore sends Expect: 100-continue
        client.put_object(Bucket=bucket, Key=key, Body=b"small")
        client.put_object(Bucket=bucket, Key="big", Body=big)
        assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == b"small"
        assert client.get_object(Bucket=bucket, Key="big")["Body"].read() == big
        assert client.head_object(Bucket=bucket, Key="big")["ContentLength"] == len(big)
        listed = client.list_objects_v2(Bucket=bucket, Prefix="dir/")
        assert [entry["Key"] for entry in listed["Contents"]] == [key]
        client.delete_object(Bucket=bucket, Key=key)
        with pytest.raises(ClientError) as missing:
            client.head_object(Bucket=bucket, Key=key)
        assert missing.value.response["Error"]["Code"] == "404"
        assert proxy.counts() == expected_counts(8)

        proxy.set_faults(ProxyFaults(rate=0.3, kinds=(FaultKind.ERROR_503,)))
        for i in range(20):
            body = f"object {i}".encode()
            client.put_object(Bucket=bucket, Key=f"loop/{i}", Body=body)
            assert client.get_object(Bucket=bucket, Key=f"loop/{i}")["Body"].read() == body
        counts = proxy.counts()
        assert counts["error_503"] > 0
        assert counts["requests"] == 8 + 40
        client.close()


def test_faults_only_on_paths_that_contain_only() -> None:
    """A Tier-2 outage: every request under ``tier2`` fails, none of the others does (a
    listing names the tier in its query)."""
    outage = ProxyFaults(rate=1.0, kinds=(FaultKind.ERROR_503,), only="tier2")
    proxy = FaultyS3Proxy("http://127.0.0.1:1", seed=3, faults=outage)  # never started
    for path in ("/b/tier2/segments/x", "/b?list-type=2&prefix=tier2%2Fchunks"):
        assert proxy._decide("GET", path)[0] is FaultKind.ERROR_503
    for path in ("/b/tier1/log/0", "/b?list-type=2&prefix=tier1%2F"):
        assert proxy._decide("PUT", path)[0] is None
    assert proxy.counts()["error_503"] == 2
    with pytest.raises(InvalidArgumentError):
        ProxyFaults(only=3)  # type: ignore[arg-type]
