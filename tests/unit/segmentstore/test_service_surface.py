"""The segment store's one service surface: the container, the Ray actor and the client agree.

``SegmentStoreService`` (segmentstore/service.py) is the Protocol. The container implements
it; the Ray actor forwards each call (Ray needs real methods); the client's typed
``SegmentStoreClient`` names every call by the Protocol's function. A method added to one
and not the others, or a parameter renamed or defaulted differently, fails here.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

import pytest

from actors.segment_container_actor import SegmentContainerActor
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import container_for_segment
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.segmentstore.service import SegmentStoreClient, SegmentStoreService

pytestmark = pytest.mark.timeout(60)


def protocol_methods() -> dict[str, Callable[..., Any]]:
    return {
        name: member
        for name, member in vars(SegmentStoreService).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }


def public_methods(cls: type) -> set[str]:
    return {
        name
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def shape(function: Callable[..., Any]) -> list[tuple[str, str, object, object]]:
    """Parameters (name, kind, default, annotation) and the return annotation."""
    signature = inspect.signature(function)
    return [
        (p.name, p.kind.name, p.default, p.annotation) for p in signature.parameters.values()
    ] + [("return", "", None, signature.return_annotation)]


@pytest.mark.parametrize("implementation", [SegmentContainer, SegmentContainerActor])
def test_every_service_call_has_the_protocols_signature(implementation: type) -> None:
    for name, method in protocol_methods().items():
        assert hasattr(implementation, name), f"{implementation.__name__} lacks {name}"
        implemented = getattr(implementation, name)
        assert inspect.iscoroutinefunction(implemented), f"{implementation.__name__}.{name}"
        assert shape(implemented) == shape(method), f"{implementation.__name__}.{name}"


def test_the_actor_has_no_public_call_outside_the_protocol() -> None:
    extra = public_methods(SegmentContainerActor) - set(protocol_methods()) - {"describe"}
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
            owned = cluster.run(cluster.container(container_id).list_segments()).result(10)
            assert owned == sorted(
                s for s in segments if container_for_segment(s, 3) == container_id
            )
        assert client.get_info(segments[0]).result(10).length == 0
    finally:
        cluster.shutdown()
