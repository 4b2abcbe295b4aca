"""Ray shell of Pravega's front doors (``endpoints``): the controller's gRPC and REST APIs.

One detached named actor serves the controller's gRPC API (``pravega_ray.grpc``) and its
REST admin API (``pravega_ray.rest``) over the controller instances, as Pravega's own
clients and tools expect them (``pravega_ray/endpoints.py``).
getURI asks the container actor that owns the segment for its wire gateway
(``SegmentContainerActor.wire_endpoint``, which opens it on first use), every time: a
container that restarted or moved is found where it is now, and the client caches the
answer itself. A container that does not answer is answered with the endpoint it named
last (``EndpointBook``): Pravega's clients retry a failed connection for ever, a failed
getURI only about a minute (then a reader never reads that segment again); a container not
heard of since this actor (re)started is answered with the endpoint the config fixes for it,
when it fixes one (``EndpointConfig.fixed_endpoint``: Pravega's default ports on a fixed
host), so a restart of this actor while a container is down fails no getURI. A thread asks
every container every ``REFRESH_S`` too, so a container that restarted opens its gateway
again at once, on its port, for the clients that connect to the address they had without
asking getURI again (and the endpoints are known again soon after this actor restarts).
Killed at any moment, Ray restarts it (``max_restarts=-1``) and the constructor serves
again on the same port: it holds no state but those endpoints.

Security (docs/security.md): the config names the TLS files and the password file; this
actor and every container actor read the same files, so they serve the same certificate,
check the same users and agree on the delegation tokens' secret, which is derived from the
files' bytes and never passed in a call, logged or described.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any

import ray

from pravega_ray.endpoints import EndpointBook, EndpointConfig
from pravega_ray.errors import ContainerNotReadyError
from pravega_ray.naming import container_for_segment
from pravega_ray_actors.options import container_name
from pravega_ray_actors.ray_metrics import setup_actor_process

log = logging.getLogger(__name__)

REFRESH_S = 1.0
"""How often every container is asked to have its wire gateway open."""
URI_CALL_TIMEOUT_S = 10.0
"""How long getURI waits for a container actor to name its gateway (a container restarting
answers once recovered); after that the client gets UNAVAILABLE and asks again."""


class EndpointsActor:
    """Serves the controller's gRPC and REST APIs; see the module docstring."""

    def __init__(self, container_count: int, namespace: str, config: dict[str, object]) -> None:
        setup_actor_process()
        from pravega_ray.client.client_factory import ClientFactory
        from pravega_ray.client.connection import SegmentStoreConnection
        from pravega_ray.client.controller_connection import ControllerClient
        from pravega_ray.cluster import RayControllerConnection, _controller_instance_names
        from pravega_ray.grpc.server import serve
        from pravega_ray.rest import serve_rest
        from pravega_ray_actors.ray_calls import RayServiceInvoker, lookup

        self._config = EndpointConfig(**config)  # type: ignore[arg-type]
        tls = self._config.tls_files()
        access = self._config.access_control()  # one for both APIs: one credential cache
        self._container_count = container_count
        self._namespace = namespace
        self._handles: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._book = EndpointBook(
            fixed=lambda container_id: self._config.fixed_endpoint(container_id, container_count)
        )
        handles = [lookup(n, namespace) for n in _controller_instance_names(namespace)]
        self._controller = ControllerClient(RayControllerConnection(handles))
        self._grpc = serve(
            self._controller,
            self._config.host,
            self._config.grpc_port,
            self.uri_for,
            insecure_ok=self._config.insecure_ok,
            tls=tls,
            access=access,
        )
        containers = [lookup(container_name(i), namespace) for i in range(container_count)]
        clients = ClientFactory(
            self._controller, SegmentStoreConnection(RayServiceInvoker(containers, namespace))
        )
        self._rest = serve_rest(
            self._controller,
            self._config.host,
            self._config.rest_port,
            insecure_ok=self._config.insecure_ok,
            tls=tls,
            access=access,
            online_readers=lambda scope, group: clients.reader_group(
                scope, group
            ).get_online_readers(),
        )
        self._stop = threading.Event()
        threading.Thread(target=self._refresh, name="pravega-endpoints", daemon=True).start()

    def _refresh(self) -> None:
        """Every ``REFRESH_S``: every container's gateway open (a failure is logged by
        :meth:`endpoint_of`, and tried again next time)."""
        while not self._stop.wait(REFRESH_S):
            for container_id in range(self._container_count):
                with contextlib.suppress(ContainerNotReadyError):
                    self.endpoint_of(container_id)

    def uri_for(self, segment: str) -> tuple[str, int]:
        """getURI: the ``(host, port)`` of the wire gateway of the container owning
        ``segment`` (:meth:`endpoint_of`)."""
        return self.endpoint_of(container_for_segment(segment, self._container_count))

    def endpoint_of(self, container_id: int) -> tuple[str, int]:
        """The ``(host, port)`` of container ``container_id``'s wire gateway, opened if it was
        not; the last one it named if it does not answer within ``EndpointBook.quick_s``
        (``pravega_ray.endpoints.EndpointBook``: a client's connection then fails and it
        asks again, for ever, where a failed getURI ends its retries after about a minute).
        ContainerNotReadyError (UNAVAILABLE to a gRPC client, which asks again) if it never
        named one and does not answer within ``URI_CALL_TIMEOUT_S`` or cannot open it."""
        return self._book.answer(container_id, lambda timeout_s: self._ask(container_id, timeout_s))

    def _ask(self, container_id: int, timeout_s: float | None) -> tuple[str, int]:
        with self._lock:
            handle = self._handles.get(container_id)
        try:
            if handle is None:
                handle = ray.get_actor(container_name(container_id), namespace=self._namespace)
                with self._lock:
                    self._handles[container_id] = handle
            ref = handle.wire_endpoint.remote(self._container_count, self._config.to_dict())
            host, port = ray.get(ref, timeout=timeout_s or URI_CALL_TIMEOUT_S)
        except Exception as e:  # died, restarting, moved (a new actor: look it up again)
            with self._lock:
                self._handles.pop(container_id, None)
            # info: a container restarting does not answer for seconds, asked every second
            log.info("container %d did not name its wire endpoint: %r", container_id, e)
            raise ContainerNotReadyError(
                f"container {container_id} did not name its wire endpoint: {e!r}"
            ) from e
        return str(host), int(port)

    def wire_endpoints(self) -> dict[int, tuple[str, int]]:
        """Every container's wire gateway, opening those not open yet."""
        return {i: self.endpoint_of(i) for i in range(self._container_count)}

    def describe(self) -> dict[str, object]:
        """Where the gRPC and REST APIs listen (the ports chosen, if the config's were 0):
        ``grpc`` is the URI a client is given (``tls://<name>:<port>`` with TLS, where the
        name is ``EndpointConfig.client_host``), ``config`` the config's ``to_dict()`` (file
        paths, no secret)."""
        grpc_host = self._config.client_host(self._grpc.host)
        if grpc_host == self._grpc.host:
            grpc_uri = self._grpc.target
        else:
            grpc_uri = f"{grpc_host}:{self._grpc.port}"
        rest_host = self._config.client_host(self._rest.host)
        scheme = "https" if self._config.tls_enabled else "http"
        return {
            "pid": os.getpid(),
            "grpc": f"{'tls' if self._config.tls_enabled else 'tcp'}://{grpc_uri}",
            "grpc_port": self._grpc.port,
            "rest": (
                f"{self._rest.url}/v1"
                if rest_host == self._rest.host
                else f"{scheme}://{rest_host}:{self._rest.port}/v1"
            ),
            "rest_port": self._rest.port,
            "config": self._config.to_dict(),
            "container_count": self._container_count,
        }
