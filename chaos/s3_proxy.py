"""A fault-injecting HTTP proxy in front of an S3-compatible server on the loopback interface.

The chaos harness points ``AWS_ENDPOINT_URL`` at :attr:`FaultyS3Proxy.endpoint`; the proxy
forwards each request to the real server (SeaweedFS in the tests) and injects a fault into a
fraction :attr:`ProxyFaults.rate` of the requests.

Contract:

* Forwarding is transparent, so SigV4 signatures still verify: the method, the request target
  (path and query) exactly as received, every request header in its order and spelling
  (``Host`` included) but the hop-by-hop ones, and the body. A ``Transfer-Encoding: chunked``
  body is read whole and sent on chunked again (trailers are dropped); ``Expect`` is answered
  here (``100 Continue``) and not forwarded. The answer is upstream's status, headers (less the
  hop-by-hop ones) and body, with a Content-Length of its own; HEAD, 1xx, 204 and 304 answers
  have no body and keep upstream's Content-Length. Client connections are kept alive (HTTP/1.1);
  each forwarded request uses a fresh upstream connection. Upstream unreachable: 502.
* Faults are decided per request, after its body is read, by ``random.Random(seed)`` under a
  lock: one ``random()`` draw per request against the rate, then a uniform choice of the kind.
  The same seed and request order give the same decisions. The kinds:
  ERROR_500 / ERROR_503 answer at once with an S3 XML error (``InternalError`` / ``SlowDown``),
  not forwarded; SLOW waits ``slow_s`` and then forwards; TIMEOUT holds the request
  ``timeout_s`` without answering, then closes the connection.
* :meth:`FaultyS3Proxy.stop` returns promptly, also while requests are held: it closes the
  listening socket and shuts down every open client and upstream connection.
"""

from __future__ import annotations

import contextlib
import enum
import http.client
import logging
import math
import random
import socket
import threading
import time
from dataclasses import dataclass
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from pravega_ray.errors import InvalidArgumentError
from pravega_ray.storage.s3 import S3_READ_TIMEOUT_S

logger = logging.getLogger(__name__)

UPSTREAM_TIMEOUT_S = S3_READ_TIMEOUT_S
"""Connect and read timeout of the proxy's own requests to the upstream server."""

POLL_S = 0.1
"""How often the accept loop looks for stop(); bounds how long stop() takes."""

STOP_DRAIN_S = 1.0
"""How long stop() waits for the handler threads to close the connections it shut down."""

_NOT_FORWARDED = frozenset(
    {"connection", "keep-alive", "te", "trailer", "upgrade", "transfer-encoding", "expect"}
)
"""Hop-by-hop headers (and ``Proxy-*``, and those named in ``Connection``); not forwarded."""

_ERRORS = {  # status, S3 error code, message
    "error_500": (500, "InternalError", "We encountered an internal error. Please try again."),
    "error_503": (503, "SlowDown", "Please reduce your request rate."),
}


class FaultKind(str, enum.Enum):
    """What the proxy does to a request chosen for a fault."""

    ERROR_500 = "error_500"
    ERROR_503 = "error_503"
    TIMEOUT = "timeout"
    SLOW = "slow"


@dataclass(frozen=True)
class ProxyFaults:
    """Which faults, how often: ``rate`` of the requests get one of ``kinds`` (uniformly).

    ``slow_s`` is SLOW's delay before forwarding; ``timeout_s`` is how long TIMEOUT holds a
    request before closing the connection (by default a little more than the S3 client's read
    timeout, so the client times out first). Kinds may be given by value (``"slow"``).
    Raises InvalidArgumentError on a rate outside [0, 1], a negative or non-finite delay, or
    no or unknown kinds.
    """

    rate: float = 0.05
    kinds: tuple[FaultKind, ...] = tuple(FaultKind)
    slow_s: float = 0.5
    timeout_s: float = S3_READ_TIMEOUT_S + 5.0
    only: str = ""
    """When set, only requests whose path (with its query) contains it may get a fault (a
    Tier-2 outage: ``"tier2"``, the prefix of that tier's keys)."""

    def __post_init__(self) -> None:
        for name in ("rate", "slow_s", "timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidArgumentError(f"ProxyFaults.{name} must be a number: {value!r}")
            if not math.isfinite(value) or value < 0:
                raise InvalidArgumentError(f"ProxyFaults.{name} must be finite and >= 0: {value}")
        if self.rate > 1:
            raise InvalidArgumentError(f"ProxyFaults.rate must be at most 1: {self.rate}")
        try:
            kinds = tuple(FaultKind(kind) for kind in self.kinds)
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(f"ProxyFaults.kinds: {self.kinds!r}: {e}") from None
        if not kinds:
            raise InvalidArgumentError("ProxyFaults.kinds must name at least one kind")
        if not isinstance(self.only, str):
            raise InvalidArgumentError(f"ProxyFaults.only must be a str: {self.only!r}")
        object.__setattr__(self, "kinds", kinds)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], proxy: FaultyS3Proxy) -> None:
        self.proxy = proxy
        super().__init__(address, _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        logger.debug("connection from %s ended with an error", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.proxy._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.proxy._untrack(self.connection)

    def log_message(self, format: str, *args: object) -> None:
        logger.debug("%s " + format, self.address_string(), *args)

    def _relay(self) -> None:
        proxy = self.server.proxy
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        try:
            length = int(self.headers.get("Content-Length", "0"))
            body = self._read_chunked() if chunked else self._read(length)
        except ValueError as e:
            self.send_error(400, f"bad request body: {e}")
            return
        kind, faults = proxy._decide(self.command, self.path)
        if kind in (FaultKind.ERROR_500, FaultKind.ERROR_503):
            self._answer_error(kind.value)
        elif kind is FaultKind.TIMEOUT:
            proxy._stopping.wait(faults.timeout_s)
            self.close_connection = True  # and no answer
        elif kind is FaultKind.SLOW and proxy._stopping.wait(faults.slow_s):
            self.close_connection = True  # stopped while slow
        else:
            self._forward(body, chunked)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = do_OPTIONS = _relay

    def _read(self, size: int) -> bytes:
        if size < 0:
            raise ValueError(f"negative length {size}")
        data = self.rfile.read(size)
        if len(data) != size:
            raise ValueError(f"body ended after {len(data)} of {size} bytes")
        return data

    def _read_chunked(self) -> bytes:
        parts = []
        while size := int(self.rfile.readline(65537).split(b";", 1)[0].strip(), 16):
            parts.append(self._read(size))
            self.rfile.readline()  # the CRLF after the chunk
        while self.rfile.readline(65537).strip():  # trailers, up to the empty line
            pass
        return b"".join(parts)

    def _forward(self, body: bytes, chunked: bool) -> None:
        proxy = self.server.proxy
        target = self.requestline.split()[1]  # as received (self.path collapses a leading //)
        host, port = proxy._upstream
        upstream = http.client.HTTPConnection(host, port, timeout=UPSTREAM_TIMEOUT_S)
        try:
            upstream.connect()
            sock = upstream.sock
            proxy._track(sock)
            try:
                upstream.putrequest(self.command, target, True, True)  # no Host / Accept-Encoding
                # Sent on chunked: a Content-Length beside it would be wrong.
                drop = ("Content-Length",) if chunked else ()
                for name, value in _end_to_end(self.headers, drop):
                    upstream.putheader(name, value)
                if chunked:
                    upstream.putheader("Transfer-Encoding", "chunked")
                upstream.endheaders(body if body or chunked else None, encode_chunked=chunked)
                proxy._count("requests")
                response = upstream.getresponse()
                data = response.read()
            finally:
                proxy._untrack(sock)
        except (OSError, http.client.HTTPException) as e:
            if proxy._stopping.is_set():
                self.close_connection = True
                return
            logger.debug("upstream %s:%d failed: %r", host, port, e)
            self.send_error(502, f"upstream failed: {e!r}")
            return
        finally:
            upstream.close()
        self.send_response_only(response.status, response.reason)
        for name, value in _end_to_end(response.headers, ("Content-Length",)):
            self.send_header(name, value)
        length = response.getheader("Content-Length")
        if self.command == "HEAD" or response.status < 200 or response.status in (204, 304):
            data = b""  # no body; upstream's Content-Length (if any) stays
        else:
            length = str(len(data))
        if length is not None:
            self.send_header("Content-Length", length)
        self._end_headers_and_write(data)

    def _answer_error(self, kind: str) -> None:
        status, code, message = _ERRORS[kind]
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{message}</Message>"
            f"<Resource>{escape(self.path)}</Resource>"
            f"<RequestId>chaos-{kind}</RequestId></Error>"
        ).encode()
        self.send_response_only(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self._end_headers_and_write(b"" if self.command == "HEAD" else body)

    def _end_headers_and_write(self, data: bytes) -> None:
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if data:
            self.wfile.write(data)


def _end_to_end(headers: Message, drop: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """``headers`` less the hop-by-hop ones, those ``Connection`` names, and ``drop``."""
    dropped = set(_NOT_FORWARDED) | {name.lower() for name in drop}
    for value in headers.get_all("Connection", []):
        dropped |= {name.strip().lower() for name in value.split(",")}
    return [
        (name, value)
        for name, value in headers.items()
        if name.lower() not in dropped and not name.lower().startswith("proxy-")
    ]


class FaultyS3Proxy:
    """A threaded HTTP proxy to ``upstream`` (``"http://127.0.0.1:8333"``) that injects faults.

    Start it with :meth:`start` or ``with``; it listens on ``host:port`` (port 0: any free
    one, see :attr:`endpoint`). A proxy is started once; :meth:`stop` is final.
    """

    def __init__(
        self,
        upstream: str,
        *,
        seed: int,
        faults: ProxyFaults = ProxyFaults(),
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname:
            raise InvalidArgumentError(f"upstream must be an http:// URL: {upstream!r}")
        self._upstream = (parts.hostname, parts.port or 80)
        self._faults = faults
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._counts = {"requests": 0, **{kind.value: 0 for kind in FaultKind}}
        self._sockets: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._address = (host, port)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind and serve in a daemon thread. Raises RuntimeError if started before."""
        if self._server is not None:
            raise RuntimeError("FaultyS3Proxy.start: already started")
        self._server = _Server(self._address, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": POLL_S},
            name=f"s3-proxy-{self._server.server_port}",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving, release held requests and close every connection. Idempotent."""
        server = self._server
        if server is None or self._stopping.is_set():
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)
        deadline = time.monotonic() + STOP_DRAIN_S
        while self._sockets and time.monotonic() < deadline:
            time.sleep(0.01)
        if self._thread is not None:
            self._thread.join(STOP_DRAIN_S)

    def __enter__(self) -> FaultyS3Proxy:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        """``http://<host>:<port>`` of the running proxy, for ``AWS_ENDPOINT_URL``."""
        if self._server is None:
            raise RuntimeError("FaultyS3Proxy.endpoint: not started")
        return f"http://{self._address[0]}:{self._server.server_port}"

    def set_faults(self, faults: ProxyFaults) -> None:
        """Use ``faults`` from the next request on; ``ProxyFaults(rate=0.0)`` turns them off."""
        with self._lock:
            self._faults = faults

    def counts(self) -> dict[str, int]:
        """Requests forwarded upstream (``"requests"``, SLOW ones too), faults by kind value."""
        with self._lock:
            return dict(self._counts)

    def _decide(self, method: str, path: str) -> tuple[FaultKind | None, ProxyFaults]:
        with self._lock:
            faults = self._faults
            hit = self._rng.random() < faults.rate and (not faults.only or faults.only in path)
            kind = self._rng.choice(faults.kinds) if hit else None
            if kind is not None:
                self._counts[kind.value] += 1
        if kind is not None:
            logger.debug("fault %s on %s %s", kind.value, method, path)
        return kind, faults

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            if not self._stopping.is_set():
                self._sockets.add(sock)
                return
        _shut(sock)  # opened while stop() ran

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)


def _shut(sock: socket.socket) -> None:
    """Wake whoever blocks on ``sock``; its owner closes it."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
