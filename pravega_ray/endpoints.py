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
container that restarted finds it again at the address it had. Safe by default: nothing
in the endpoints authenticates or encrypts yet, so binding to any other address than
loopback needs ``insecure_ok=True`` (ConfigurationError otherwise).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from pravega_ray.errors import ConfigurationError, InvalidArgumentError

__all__ = ["EndpointConfig", "is_loopback", "wire_port_for"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback IP literal (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_port(name: str, port: object, low: int) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not low <= port <= 65535:
        raise InvalidArgumentError(f"{name} must be an int in [{low}, 65535], got {port!r}")
    return port


@dataclass(frozen=True)
class EndpointConfig:
    """Where the endpoints listen; checked when built.

    * ``host``: the address every endpoint binds to, an IP literal (the Rust client resolves
      a host name and takes the last address it gets). ``0.0.0.0`` (or ``::``) binds to
      every interface; getURI then hands out the IP of the container's Ray node.
    * ``grpc_port``: the controller's gRPC API (Pravega's 9090); 0 picks a free port.
    * ``rest_port``: the controller's REST admin API (Pravega's 9091; docs/rest.md); 0 picks
      a free port.
    * ``wire_port_base``: container ``i``'s wire gateway listens on ``wire_port_base + i``
      (Pravega's segment store listens on 6000); 0 lets each gateway pick a free port,
      which changes when its container restarts (the client then asks getURI again).
    * ``insecure_ok``: allow a ``host`` that is not a loopback address. Nothing is
      authenticated or encrypted yet: use it on a trusted network only.
    """

    host: str = "127.0.0.1"
    grpc_port: int = 9090
    rest_port: int = 9091
    wire_port_base: int = 6000
    insecure_ok: bool = False

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
        if not is_loopback(self.host) and not self.insecure_ok:
            raise ConfigurationError(
                f"refusing to serve Pravega's endpoints on {self.host}: they have no TLS or "
                "authentication yet; bind to 127.0.0.1, or pass insecure_ok=True on a "
                "trusted network"
            )

    @property
    def binds_everywhere(self) -> bool:
        """Whether ``host`` is the wildcard address (every interface)."""
        return ipaddress.ip_address(self.host).is_unspecified

    def to_dict(self) -> dict[str, object]:
        return {
            "host": self.host,
            "grpc_port": self.grpc_port,
            "rest_port": self.rest_port,
            "wire_port_base": self.wire_port_base,
            "insecure_ok": self.insecure_ok,
        }


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
