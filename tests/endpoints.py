"""The session's cluster (tests/conftest.py) joined with Pravega's endpoints started, on free
ports, for tests of Pravega's own clients on Ray; the endpoints stop on exit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def session_endpoints(data_dir: Path, containers: int) -> Iterator[tuple[Any, dict[str, Any]]]:
    """``(cluster, cluster.endpoints())`` of the session's cluster in ``data_dir`` with
    ``containers`` containers: gRPC and REST on free ports, the wire gateways on a free run
    of ports (fixed for the run, so a restarted container listens where it did)."""
    import ray

    import pravega_ray as pr
    from pravega_ray.endpoints import EndpointConfig
    from pravega_ray_actors.options import ENDPOINTS_NAME
    from tests.ports import free_port_run

    config = EndpointConfig(grpc_port=0, rest_port=0, wire_port_base=free_port_run(containers))
    joined = pr.start_local(data_dir=data_dir, container_count=containers, endpoints=config)
    try:
        described = joined.endpoints()
        assert described is not None
        yield joined, described
    finally:
        ray.kill(ray.get_actor(ENDPOINTS_NAME, namespace=joined.namespace), no_restart=True)
        joined.close()
