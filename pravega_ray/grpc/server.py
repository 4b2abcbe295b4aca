"""Serving the controller's gRPC API: :func:`serve` starts a grpcio server, the returned
:class:`GrpcServer` stops it.

Safe by default (issue 25, docs/security.md): without ``tls`` the server speaks plaintext
HTTP/2, and without ``access`` it asks no one for credentials, so it binds to loopback
addresses only unless both are given or the caller passes ``insecure_ok=True``. With
``access`` every RPC needs ``authorization: Basic base64(user:password)`` metadata and the
permission its scope or stream asks for (``service.RPC_ACCESS``).
"""

from __future__ import annotations

import ipaddress
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc

from pravega_ray.auth import AccessControl
from pravega_ray.constants import WORKFLOW_WAIT_S
from pravega_ray.endpoints import TlsFiles, is_loopback
from pravega_ray.errors import ConfigurationError, InvalidArgumentError
from pravega_ray.grpc.service import LIST_PAGE_SIZE, ControllerCalls, ControllerServicer, UriFor

__all__ = [
    "DEFAULT_PORT",
    "SEGMENT_STORE_PORT",
    "WORKERS",
    "GrpcServer",
    "fixed_endpoint",
    "is_loopback",
    "serve",
]

log = logging.getLogger(__name__)

DEFAULT_PORT = 9090
"""Pravega's controller gRPC port (the official client's tests use 127.0.0.1:9090)."""

SEGMENT_STORE_PORT = 6000
"""Pravega's segment-store TCP port: where :func:`serve` points getURI unless told."""

WORKERS = 16
"""Handler threads: the most RPCs served at once (seal, delete, update and truncate hold
one while their workflow runs)."""

STOP_GRACE_S = 5.0


def fixed_endpoint(host: str, port: int) -> UriFor:
    """A getURI answer for a single gateway: every segment at ``host:port``.

    ``host`` must be an IP literal: the Rust client resolves the name and uses the last
    address it gets, so ``localhost`` may become ``::1`` where nothing listens.
    InvalidArgumentError otherwise, or for a port outside [1, 65535].
    """
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise InvalidArgumentError(
            f"the segment-store endpoint must be an IP literal, got {host!r}"
        ) from None
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise InvalidArgumentError(f"port must be an int in [1, 65535], got {port!r}")
    return lambda segment: (host, port)


@dataclass
class GrpcServer:
    """A running controller gRPC server (what :func:`serve` returns)."""

    server: grpc.Server
    servicer: ControllerServicer
    host: str
    port: int
    tls: bool = False

    @property
    def target(self) -> str:
        """``host:port`` as a gRPC client dials it (brackets around an IPv6 literal)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop accepting RPCs and wait (at most ``grace_s``) for those under way. Idempotent."""
        self.server.stop(grace_s).wait(grace_s + 1)

    def __enter__(self) -> GrpcServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def serve(
    controller: ControllerCalls,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    uri_for: UriFor | None = None,
    *,
    insecure_ok: bool = False,
    tls: TlsFiles | None = None,
    access: AccessControl | None = None,
    page_size: int = LIST_PAGE_SIZE,
    workflow_wait_s: float = WORKFLOW_WAIT_S,
    workers: int = WORKERS,
) -> GrpcServer:
    """Serve ``controller`` over Pravega's controller gRPC API on ``host:port``: HTTP/2 over
    TLS with ``tls``, plaintext without; ``port`` 0 picks a free one (``GrpcServer.port``).

    ``uri_for`` maps a segment name to the (host, port) of the segment-store gateway serving
    it; by default every segment is at 127.0.0.1:6000 (:func:`fixed_endpoint`). With
    ``access`` every RPC is authenticated and authorized (UNAUTHENTICATED, PERMISSION_DENIED)
    and getDelegationToken is served. ConfigurationError if ``host`` is not a loopback
    address and neither are both ``tls`` and ``access`` given nor ``insecure_ok`` True;
    ConfigurationError if the address cannot be bound.
    """
    secured = tls is not None and access is not None
    if not is_loopback(host) and not secured and insecure_ok is not True:
        raise ConfigurationError(
            f"refusing to serve the controller's gRPC API on {host!r} without TLS and "
            "authentication: give both (tls, access), bind to 127.0.0.1, or pass "
            "insecure_ok=True on a trusted network"
        )
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 65536:
        raise InvalidArgumentError(f"port must be an int in [0, 65535], got {port!r}")
    servicer = ControllerServicer(
        controller,
        uri_for if uri_for is not None else fixed_endpoint("127.0.0.1", SEGMENT_STORE_PORT),
        page_size=page_size,
        workflow_wait_s=workflow_wait_s,
        access=access,
    )
    server = grpc.server(
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pravega-grpc"),
        options=[("grpc.so_reuseport", 0)],
    )
    server.add_generic_rpc_handlers((servicer.generic_handler(),))
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        if tls is None:
            bound = server.add_insecure_port(address)
        else:
            cert, key = tls.read()
            bound = server.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))
    except RuntimeError as e:  # grpcio raises RuntimeError when it cannot bind
        raise ConfigurationError(f"cannot bind the controller's gRPC API to {address}: {e}") from e
    if bound == 0:
        raise ConfigurationError(f"cannot bind the controller's gRPC API to {address}")
    server.start()
    log.info(
        "controller gRPC API on %s:%d (%s, %s)",
        host,
        bound,
        "TLS" if tls else "plaintext",
        "authenticated" if access else "no authentication",
    )
    return GrpcServer(server, servicer, host, bound, tls is not None)
