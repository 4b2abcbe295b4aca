"""The CLI's global options and its connection to a running cluster.

Ray is imported here, on first use only, so ``pravega-ray --help`` and usage errors never
load it. A command asks :meth:`Options.cluster` for the cluster; the connection is closed
when the command ends (``ctx.call_on_close``).
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pravega_ray.cluster import Cluster

__all__ = [
    "ClusterUnreachableError",
    "Options",
    "check_reachable",
    "init_ray",
    "parse_host_port",
    "prepare_ray_environment",
]

REACHABLE_TIMEOUT_S = 2.0
"""How long the CLI waits for a TCP connection to Ray's GCS before saying none is there."""


class ClusterUnreachableError(Exception):
    """No Ray cluster answers at the address, or no pravega-ray cluster runs on it (exit 3).

    A CLI condition, not a :class:`~pravega_ray.errors.PravegaError`: the library never
    raises it.
    """


def parse_host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``host:port`` address; None for ``auto``, ``ray://...`` and
    anything else the CLI does not probe itself (Ray then decides)."""
    if address == "auto" or "://" in address or address.count(":") != 1:
        return None
    host, _, port = address.partition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host, int(port)


def check_reachable(address: str, timeout_s: float = REACHABLE_TIMEOUT_S) -> bool:
    """True if a TCP connection to ``host:port`` opens within ``timeout_s`` (or the address
    is not of that form: Ray is left to find it)."""
    target = parse_host_port(address)
    if target is None:
        return True
    try:
        with socket.create_connection(target, timeout=timeout_s):
            return True
    except OSError:
        return False


def prepare_ray_environment() -> None:
    """Set what Ray reads from the environment when it is first imported; called before
    any command runs. Variables the user set are kept.

    Ray turns token authentication on by itself only for address ``auto``; with an
    explicit address it must be asked to, or a head started with a token (Ray's default
    when ``~/.ray/auth_token`` exists) refuses us. (``RAY_BACKEND_LOG_LEVEL`` is not set:
    Ray announces that setting on stderr, itself a line of noise.)
    """
    if "RAY_AUTH_MODE" not in os.environ and _auth_token_available():
        os.environ["RAY_AUTH_MODE"] = "token"
    os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")


def init_ray(address: str, namespace: str, verbose: bool) -> bool:
    """Join the Ray cluster at ``address`` as a driver in ``namespace``; True if this call
    initialized Ray (False: this process was connected already, e.g. a test's Ray).

    Workers' logs are not streamed to this process unless ``verbose``. Raises
    ClusterUnreachableError if nothing answers there.
    """
    if not check_reachable(address):
        raise ClusterUnreachableError(f"no Ray cluster answers at {address}")
    prepare_ray_environment()
    import ray

    if ray.is_initialized():
        return False
    try:
        ray.init(
            address=address,
            namespace=namespace,
            include_dashboard=False,
            logging_level=logging.INFO if verbose else logging.WARNING,
            log_to_driver=verbose,
        )
    except ConnectionError as e:
        raise ClusterUnreachableError(f"no Ray cluster at {address}: {e}") from None
    return True


def _auth_token_available() -> bool:
    """Whether Ray would find an authentication token (env var, token path, ~/.ray)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    return os.path.isfile(path)


@dataclass
class Options:
    """The global options (``--address``, ``--namespace``, ``--json``, ``-v``) of one run."""

    address: str = "auto"
    namespace: str = "pravega"
    json: bool = False
    verbose: bool = False
    _cluster: Any = field(default=None, repr=False)
    _owns_ray: bool = field(default=False, repr=False)

    def join_ray(self, address: str) -> None:
        """Join Ray at ``address`` (:func:`init_ray`); :meth:`close` leaves it again only if
        this call was what joined it."""
        if init_ray(address, self.namespace, self.verbose):
            self._owns_ray = True

    def cluster(self) -> Cluster:
        """The pravega-ray cluster at ``address`` in ``namespace`` (joined once per run).

        Raises ClusterUnreachableError if Ray does not answer there or no pravega-ray
        controller runs in the namespace.
        """
        if self._cluster is None:
            self.join_ray(self.address)
            from pravega_ray.cluster import connect
            from pravega_ray.errors import IllegalStateError

            try:
                self._cluster = connect(self.address, namespace=self.namespace)
            except IllegalStateError as e:
                raise ClusterUnreachableError(str(e)) from None
        cluster: Cluster = self._cluster
        return cluster

    def close(self) -> None:
        """Let go of the cluster and leave Ray if this run joined it (the cluster's actors
        keep running; a Ray this process was connected to before the run stays)."""
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
        if self._owns_ray:
            import ray

            self._owns_ray = False
            if ray.is_initialized():
                ray.shutdown()
