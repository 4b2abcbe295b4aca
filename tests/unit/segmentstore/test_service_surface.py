"""The segment store's one service surface: the container, the Ray actor and the client agree.

``SegmentStoreService`` (contracts/segment_store_service.py) is the Protocol. The container
implements it; the Ray actor forwards each call (Ray needs real methods); the client's typed
``SegmentStoreClient`` names every call by the Protocol's function. A method added to one
and not the others, or a parameter renamed or defaulted differently, fails here.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

import pytest
import ray

from pravega_ray.contracts.segment_store_service import SegmentStoreClient, SegmentStoreService
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import container_for_segment
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray_actors.segment_container_actor import SegmentContainerActor
from tests.surfaces import public_methods, signature_shape

pytestmark = pytest.mark.timeout(60)

# What every run sees once an actor test ran: Ray has rewritten the actor's methods (without
# starting Ray). Done here too, so the result does not depend on the order of the tests.
ray.remote(SegmentContainerActor)


def protocol_methods() -> dict[str, Callable[..., Any]]:
    return {
        name: member
        for name, member in vars(SegmentStoreService).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }


@pytest.mark.parametrize("implementation", [SegmentContainer, SegmentContainerActor])
def test_every_service_call_has_the_protocols_signature(implementation: type) -> None:
    for name, method in protocol_methods().items():
        assert hasattr(implementation, name), f"{implementation.__name__} lacks {name}"
        implemented = getattr(implementation, name)
        assert inspect.iscoroutinefunction(implemented), f"{implementation.__name__}.{name}"
        where = f"{implementation.__name__}.{name}"
        assert signature_shape(implemented) == signature_shape(method), where


def test_the_actor_has_no_public_call_outside_the_protocol() -> None:
    # describe, and wire_endpoint (its wire gateway for Pravega's clients, docs/wire.md)
    outside = {"describe", "wire_endpoint"}
    extra = public_methods(SegmentContainerActor) - set(protocol_methods()) - outside
    assert not extra, f"actor methods outside SegmentStoreService: {sorted(extra)}"


def test_the_client_mirrors_the_protocols_per_segment_calls() -> None:
    protocol = protocol_methods()
    for name in public_methods(SegmentStoreClient):
        assert name in protocol, f"SegmentStoreClient.{name} is not a service call"
        client_params = list(inspect.signature(getattr(SegmentStoreClient, name)).parameters)
        assert client_params == list(inspect.signature(protocol[name]).parameters), name


class RecordingInvoker:
    """Records each invocation and answers it with a done future."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, tuple[Any, ...]]] = []

    def invoke(
        self, method: Callable[..., Awaitable[Any]], segment: str, *args: Any
    ) -> Future[Any]:
        self.calls.append((method.__name__, segment, args))
        done: Future[Any] = Future()
        done.set_result(None)
        return done


def test_client_calls_name_the_protocols_function_never_a_string() -> None:
    invoker = RecordingInvoker()
    client = SegmentStoreClient(invoker)
    client.append("sc/st/0.#epoch.0", b"w" * 16, -1, 0, 1, b"data")
    client.table_get("sc/_kvt.t/0.#epoch.0", [b"k"])
    assert invoker.calls == [
        ("append", "sc/st/0.#epoch.0", (b"w" * 16, -1, 0, 1, b"data")),
        ("table_get", "sc/_kvt.t/0.#epoch.0", ([b"k"],)),
    ]


def test_in_process_invoker_runs_the_owning_containers_method() -> None:
    cluster = InProcessCluster(container_count=3)
    try:
        client = SegmentStoreClient(cluster)
        segments = [f"sc/st/{i}.#epoch.0" for i in range(12)]
        for segment in segments:
            client.create_segment(segment).result(10)
        for container_id in range(3):
            listed = cluster.run(cluster.container(container_id).list_segments()).result(10)
            owned = [s for s in listed if not s.startswith("_system/")]  # the request stream
            assert owned == sorted(
                s for s in segments if container_for_segment(s, 3) == container_id
            )
        assert client.get_info(segments[0]).result(10).length == 0
    finally:
        cluster.shutdown()
