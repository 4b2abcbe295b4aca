"""Where a cluster on Ray serves Pravega's own clients and tools: the controller's gRPC API,
its REST admin API and the segment containers' wire protocol (issue 25; seed 002's
endpoints).

``start_local(endpoints=True)`` (and ``pravega-ray local start``, on by default) starts one
more detached actor, ``endpoints`` (``actors/endpoints_actor.py``), which serves the
controller's gRPC and REST APIs over the controller instances, and asks every segment
container actor to open its wire gateway (``SegmentContainerActor.wire_endpoint``). getURI hands out
the gateway of the container that owns a segment, asking that container actor each time,
so a container that restarted or moved to another node is found where it is now.

:class:`EndpointConfig` says where they listen: Pravega standalone's ports by default
(gRPC 9090, REST 9091, segment store 6000 + container id) on the loopback address. A
gateway keeps its port across restarts of its container, so a client's connection to a
container that restarted finds it again at the address it had.

Safe by default (docs/security.md): the endpoints bind to the loopback address unless told
otherwise, and any other address needs TLS (``tls_cert_file``, ``tls_key_file``) and
authentication (``password_file``, Pravega's ``PasswordAuthHandler`` format:
:mod:`pravega_ray.auth`) configured, or ``insecure_ok=True`` (ConfigurationError otherwise).
Every process serving an endpoint (the ``endpoints`` actor, each container actor) builds its
TLS context and access control from the same files (:meth:`EndpointConfig.tls_files`,
:meth:`EndpointConfig.access_control`); the delegation tokens' signing secret is derived
from their bytes, so it is never passed around, logged or described.
"""

from __future__ import annotations

import ipaddress
import os
import re
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pravega_ray.auth import AccessControl, DelegationTokens, PasswordFile, derive_token_secret
from pravega_ray.errors import ConfigurationError, InvalidArgumentError

__all__ = ["EndpointBook", "EndpointConfig", "TlsFiles", "is_loopback", "wire_port_for"]

_HOST_NAME_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.\-]{0,251}[A-Za-z0-9])?")
_PEM_BYTES_MAX = 1024 * 1024


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback IP literal (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _read_pem(path: str, what: str, marker: bytes) -> bytes:
    """The bytes of PEM file ``path``; ConfigurationError naming it if it cannot be read, is
    over 1 MiB or holds no ``marker`` (its content is never quoted)."""
    try:
        with open(path, "rb") as file:
            data = file.read(_PEM_BYTES_MAX + 1)
    except OSError as e:
        raise ConfigurationError(f"cannot read the {what} file {path}: {e.strerror or e}") from None
    if len(data) > _PEM_BYTES_MAX:
        raise ConfigurationError(f"the {what} file {path} is over 1 MiB")
    if marker not in data:
        raise ConfigurationError(f"the {what} file {path} is not PEM (no {marker.decode()!r})")
    return data


def _no_key_password() -> bytes:
    """An encrypted key is refused, never prompted for on a terminal (OpenSSL's default)."""
    return b""


@dataclass(frozen=True)
class TlsFiles:
    """A server's TLS certificate (chain) and private key, PEM files; checked when built:
    each is read and the pair loads into an SSL context. ConfigurationError naming the file
    otherwise (an encrypted key too: protect the file instead)."""

    cert_file: str
    key_file: str

    def __post_init__(self) -> None:
        self.server_context()

    def read(self) -> tuple[bytes, bytes]:
        """``(certificate chain PEM, private key PEM)``."""
        cert = _read_pem(self.cert_file, "TLS certificate", b"-----BEGIN CERTIFICATE-----")
        key = _read_pem(self.key_file, "TLS key", b"PRIVATE KEY-----")
        if b"ENCRYPTED" in key:
            raise ConfigurationError(
                f"the TLS key file {self.key_file} is encrypted: use an unencrypted key in a "
                "file only the server may read"
            )
        return cert, key

    def server_context(self) -> ssl.SSLContext:
        """A server-side SSL context (TLS 1.2 or later) holding the certificate and key."""
        self.read()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.cert_file, self.key_file, password=_no_key_password)
        except (ssl.SSLError, OSError) as e:
            reason = getattr(e, "reason", None) or e.strerror or type(e).__name__
            raise ConfigurationError(
                f"the TLS certificate {self.cert_file} and key {self.key_file} do not load "
                f"together: {reason}"
            ) from None
        return context


def _check_port(name: str, port: object, low: int) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not low <= port <= 65535:
        raise InvalidArgumentError(f"{name} must be an int in [{low}, 65535], got {port!r}")
    return port


@dataclass(frozen=True)
class EndpointConfig:
    """Where the endpoints listen and how they are secured; checked when built.

    * ``host``: the address every endpoint binds to, an IP literal (the Rust client resolves
      a host name and takes the last address it gets). ``0.0.0.0`` (or ``::``) binds to
      every interface; getURI then hands out the IP of the container's Ray node.
    * ``grpc_port``: the controller's gRPC API (Pravega's 9090); 0 picks a free port.
    * ``rest_port``: the controller's REST admin API (Pravega's 9091; docs/rest.md); 0 picks
      a free port.
    * ``wire_port_base``: container ``i``'s wire gateway listens on ``wire_port_base + i``
      (Pravega's segment store listens on 6000); 0 lets each gateway pick a free port,
      which changes when its container restarts (the client then asks getURI again).
    * ``insecure_ok``: allow a ``host`` that is not a loopback address without TLS and
      authentication: use it on a trusted network only.
    * ``tls_cert_file``, ``tls_key_file``: PEM files (given together) of the certificate
      and key all three endpoints serve TLS with; each must load (:class:`TlsFiles`). File
      paths are made absolute when the config is built: the actors reading them run in
      other directories.
    * ``password_file``: users, password hashes and ACLs (Pravega's ``PasswordAuthHandler``
      format, :mod:`pravega_ray.auth`); with it every endpoint asks for HTTP Basic
      credentials and checks permissions, and the wire protocol checks delegation tokens.
    * ``published_host``: the host name handed to clients for every endpoint (getURI,
      ``Cluster.endpoints()``) instead of the IP (Pravega's
      ``pravegaservice.service.published.host.nameOrIp``); for one node. Without it, with
      TLS: ``localhost`` on a loopback ``host``, each node's own name
      (``socket.getfqdn()``) on a wildcard ``host`` (:meth:`client_host`). The official
      client checks a certificate against a DNS name only (its rustls refuses IP names),
      so the certificate must carry the name handed out.

    ConfigurationError for a file that cannot be read or loaded (naming it), for a TLS
    certificate without its key, and for a non-loopback ``host`` without both TLS and a
    password file unless ``insecure_ok``; InvalidArgumentError for a bad value.
    """

    host: str = "127.0.0.1"
    grpc_port: int = 9090
    rest_port: int = 9091
    wire_port_base: int = 6000
    insecure_ok: bool = False
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    password_file: str | None = None
    published_host: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.host, str):
            raise InvalidArgumentError(f"host must be an IP literal, got {self.host!r}")
        try:
            ipaddress.ip_address(self.host)
        except ValueError:
            raise InvalidArgumentError(
                f"host must be an IP literal (e.g. 127.0.0.1), got {self.host!r}"
            ) from None
        _check_port("grpc_port", self.grpc_port, 0)
        _check_port("rest_port", self.rest_port, 0)
        _check_port("wire_port_base", self.wire_port_base, 0)
        if not isinstance(self.insecure_ok, bool):
            raise InvalidArgumentError(f"insecure_ok must be a bool, got {self.insecure_ok!r}")
        for name in ("tls_cert_file", "tls_key_file", "password_file", "published_host"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise InvalidArgumentError(f"{name} must be a non-empty str or None, got {value!r}")
        for name in ("tls_cert_file", "tls_key_file", "password_file"):
            value = getattr(self, name)
            if value is not None:  # the actors that read them run in other directories
                object.__setattr__(self, name, os.path.abspath(value))
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ConfigurationError(
                "tls_cert_file and tls_key_file go together: give both, or neither"
            )
        if self.published_host is not None and not _valid_host(self.published_host):
            raise InvalidArgumentError(
                f"published_host must be a host name or an IP literal, got {self.published_host!r}"
            )
        self.tls_files()  # ConfigurationError naming a file that does not load
        if self.password_file is not None:
            PasswordFile.load(self.password_file)
        if not is_loopback(self.host) and not self.insecure_ok and not self.secured:
            missing = " and ".join(
                what
                for what, on in (
                    ("TLS (tls_cert_file, tls_key_file)", self.tls_enabled),
                    ("authentication (password_file)", self.auth_enabled),
                )
                if not on
            )
            raise ConfigurationError(
                f"refusing to serve Pravega's endpoints on {self.host} without {missing}: "
                "beyond the loopback address they need TLS and authentication configured; "
                "configure both, bind to 127.0.0.1, or pass insecure_ok=True on a trusted "
                "network"
            )

    @property
    def binds_everywhere(self) -> bool:
        """Whether ``host`` is the wildcard address (every interface)."""
        return ipaddress.ip_address(self.host).is_unspecified

    @property
    def tls_enabled(self) -> bool:
        """Whether the endpoints serve TLS."""
        return self.tls_cert_file is not None

    @property
    def auth_enabled(self) -> bool:
        """Whether the endpoints authenticate and authorize (a password file is given)."""
        return self.password_file is not None

    @property
    def secured(self) -> bool:
        """Whether both TLS and authentication are configured."""
        return self.tls_enabled and self.auth_enabled

    def tls_files(self) -> TlsFiles | None:
        """The TLS certificate and key (checked again: they load), None without TLS."""
        if self.tls_cert_file is None or self.tls_key_file is None:
            return None
        return TlsFiles(self.tls_cert_file, self.tls_key_file)

    def access_control(self) -> AccessControl | None:
        """The users and ACLs of the password file, and the delegation tokens signed with a
        secret derived from the bytes of the password file and the TLS key (the same in
        every process that reads the same files); None without a password file.
        ConfigurationError if a file cannot be read or parsed."""
        if self.password_file is None:
            return None
        data = PasswordFile.read_bytes(self.password_file)
        passwords = PasswordFile.parse(
            self.password_file, PasswordFile.decode(self.password_file, data)
        )
        key = b""
        tls = self.tls_files()
        if tls is not None:
            key = tls.read()[1]
        return AccessControl(passwords, DelegationTokens(derive_token_secret(data, key)))

    def client_host(self, bound_host: str, node_name: str | None = None) -> str:
        """The host name clients are given for an endpoint bound at ``bound_host`` (an IP;
        the node's IP for a wildcard ``host``): ``published_host``; else, with TLS,
        ``localhost`` on a loopback host, or ``node_name`` (the node's own name, for a
        wildcard host) when given; else ``bound_host``. With TLS the official client needs
        a name the certificate carries, not an IP."""
        if self.published_host is not None:
            return self.published_host
        if self.tls_enabled and is_loopback(self.host):
            return "localhost"
        if self.tls_enabled and node_name:
            return node_name
        return bound_host

    def fixed_endpoint(self, container_id: int, container_count: int) -> tuple[str, int] | None:
        """The ``(host, port)`` container ``container_id``'s gateway names wherever it runs,
        when the config fixes both: a fixed ``wire_port_base`` and a ``host`` that is not
        the wildcard address (whose answer is the node's IP). None otherwise."""
        if self.wire_port_base == 0 or self.binds_everywhere:
            return None
        return self.client_host(self.host), wire_port_for(self, container_id, container_count)

    def to_dict(self) -> dict[str, object]:
        """The constructor's arguments (file paths, never their content):
        ``EndpointConfig(**config.to_dict()) == config``."""
        return {
            "host": self.host,
            "grpc_port": self.grpc_port,
            "rest_port": self.rest_port,
            "wire_port_base": self.wire_port_base,
            "insecure_ok": self.insecure_ok,
            "tls_cert_file": self.tls_cert_file,
            "tls_key_file": self.tls_key_file,
            "password_file": self.password_file,
            "published_host": self.published_host,
        }


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return _HOST_NAME_RE.fullmatch(host) is not None
    return True


def wire_port_for(config: EndpointConfig, container_id: int, container_count: int) -> int:
    """The port container ``container_id``'s gateway listens on (0: any free one).
    ConfigurationError if ``wire_port_base`` leaves no room for every container."""
    if config.wire_port_base == 0:
        return 0
    if config.wire_port_base + container_count - 1 > 65535:
        raise ConfigurationError(
            f"wire_port_base {config.wire_port_base} leaves no port for container "
            f"{container_count - 1}: use a base of at most {65536 - container_count}"
        )
    return config.wire_port_base + container_id


class EndpointBook:
    """getURI's answers, with the last endpoint each container named.

    Pravega's clients treat a getURI that fails as fatal once their retries run out (the
    Rust client's segment reader panics after 10 tries, about a minute: the reader never
    reads that segment again), while a connection that fails is retried for ever. So, as
    Pravega's controller answers from its host map whether or not the host is up, a
    container that does not answer (restarting, moving) is answered with the last endpoint
    it named, at once: the client's connection fails and it asks again until the container
    answers. A container never heard of (this book's process restarted meanwhile, say) is
    waited for with ``ask``'s own timeout, then answered with ``fixed(container_id)``, the
    endpoint the config fixes for it (:meth:`EndpointConfig.fixed_endpoint`); without one
    it gets the error. Thread-safe.
    """

    def __init__(
        self,
        quick_s: float = 1.0,
        fixed: Callable[[int], tuple[str, int] | None] = lambda container_id: None,
    ) -> None:
        self._known: dict[int, tuple[str, int]] = {}
        self._lock = threading.Lock()
        self._fixed = fixed
        self.quick_s = quick_s
        """How long a container with a known endpoint is waited for before the answer is
        the known endpoint."""

    def answer(
        self, container_id: int, ask: Callable[[float | None], tuple[str, int]]
    ) -> tuple[str, int]:
        """``ask(timeout)``'s endpoint (remembered), or the last one known when it raises;
        its error when none is known. ``ask`` gets ``quick_s`` when one is known, else
        None (its own timeout)."""
        with self._lock:
            known = self._known.get(container_id)
        try:
            endpoint = ask(None if known is None else self.quick_s)
        except Exception:
            if known is None:
                known = self._fixed(container_id)
                if known is None:
                    raise
            return known
        with self._lock:
            self._known[container_id] = endpoint
        return endpoint
