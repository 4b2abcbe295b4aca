"""ControllerClient: only calls safe to repeat are repeated after an unknown outcome, a
bounded number of times with a log line each, and repeating them changes nothing.

The fault: the controller performs the call, then its reply is lost
(ControllerUnavailableError, as when the actor dies right after answering), injected by
an invoker wrapping the real one.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.client_factory import ClientFactory
from pravega_ray.client.controller_connection import ControllerClient, ControllerInvoker
from pravega_ray.constants import CONTROLLER_CALL_ATTEMPTS_MAX
from pravega_ray.contracts.controller_service import SERVICE_METHODS, ControllerService
from pravega_ray.controller.controller import Controller
from pravega_ray.controller.stream_metadata_store import ChunkMetadataStore
from pravega_ray.errors import ControllerUnavailableError
from pravega_ray.inprocess import InProcessCluster, _LockedController
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.timing import ManualThreadScheduler
from tests.unit.controller.test_controller import FakeSegmentStore, seal

pytestmark = pytest.mark.timeout(60)


class ReplyLost:
    """An invoker that performs every call; the replies of the next ``lose[name]`` calls
    are lost."""

    def __init__(self, inner: ControllerInvoker) -> None:
        self._inner = inner
        self.lose: dict[str, int] = {}
        self.calls: dict[str, int] = {}

    def invoke(self, method: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        name = method.__name__
        self.calls[name] = self.calls.get(name, 0) + 1
        result = self._inner.invoke(method, *args, **kwargs)
        if self.lose.get(name, 0) > 0:
            self.lose[name] -= 1
            raise ControllerUnavailableError(f"reply of {name} lost")
        return result


@pytest.fixture
def lossy():  # type: ignore[no-untyped-def]
    cluster = InProcessCluster(container_count=2)
    lost = ReplyLost(cluster._locked)
    clients = ClientFactory(ControllerClient(lost, pause_s=0.0), cluster._segments)
    yield clients, lost
    cluster.shutdown()


def _stream_with_events(clients: ClientFactory, count: int) -> list[bytes]:
    """Scope sc, stream sc/st of 4 segments with ``count`` events, reader group sc/rg."""
    mgr = clients.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(4)))
    clients.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    events = [f"e{i}".encode() for i in range(count)]
    with clients.create_writer("sc", "st") as writer:
        for i, event in enumerate(events):
            writer.write_event(event, routing_key=f"k{i}")
    return events


def _controller() -> tuple[ControllerClient, ReplyLost]:
    client, lost, _ = _controller_and_core()
    return client, lost


def _controller_and_core() -> tuple[ControllerClient, ReplyLost, Controller]:
    controller = Controller(ChunkMetadataStore(InMemoryChunkStorage()), FakeSegmentStore(), 4)
    lost = ReplyLost(_LockedController(controller))
    return ControllerClient(lost, pause_s=0.0), lost, controller


def test_create_reply_lost_answers_true_and_seal_reply_lost_answers_true() -> None:
    controller, lost = _controller()
    for method in ("create_scope", "create_stream", "create_key_value_table"):
        lost.lose[method] = 1
    assert controller.create_scope("sc")
    assert controller.create_stream("sc", "st", None)
    assert controller.create_key_value_table("sc", "t", 2)
    lost.lose["create_reader_group"] = 1
    assert controller.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    lost.lose["seal_stream"] = 1
    controller.seal_stream("sc", "st")  # the request, posted twice: the workflow is idempotent
    assert lost.calls == {
        "create_scope": 2,
        "create_stream": 2,
        "create_key_value_table": 2,
        "create_reader_group": 2,
        "seal_stream": 2,
    }
    assert not controller.create_scope("sc")  # another create of it: exists


NOT_REPEATED = [
    "delete_scope",
    "delete_key_value_table",
    "delete_reader_group",
    "delete_state_synchronizer",
    "delete_stream",
]


@pytest.mark.parametrize("method", NOT_REPEATED)
def test_delete_outcome_unknown_is_not_repeated(method: str) -> None:
    controller, lost, core = _controller_and_core()
    controller.create_scope("sc")
    controller.create_stream("sc", "st", None)
    controller.create_stream("sc", "sealed", None)
    assert seal(core, "sc", "sealed")
    controller.create_key_value_table("sc", "t", 1)
    controller.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    controller.create_state_synchronizer("sc", "sync")
    args = {
        "delete_scope": ("other",),
        "delete_key_value_table": ("sc", "t"),
        "delete_reader_group": ("sc", "rg"),
        "delete_state_synchronizer": ("sc", "sync"),
        "delete_stream": ("sc", "sealed"),
    }[method]
    if method == "delete_scope":
        controller.create_scope("other")
    lost.lose[method] = 1
    with pytest.raises(ControllerUnavailableError):
        getattr(controller, method)(*args)
    assert lost.calls[method] == 1


class Unreachable:
    """An invoker of a controller that stays down."""

    def __init__(self) -> None:
        self.calls = 0

    def invoke(self, method: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        raise ControllerUnavailableError("controller restarting")


def test_list_scopes_while_the_controller_stays_down_gives_up_after_the_attempts_max(
    caplog: pytest.LogCaptureFixture,
) -> None:
    raw = Unreachable()
    scheduler = ManualThreadScheduler()
    connection = ControllerClient(raw, scheduler=scheduler)
    with (
        caplog.at_level(logging.INFO, "pravega_ray.client.controller_connection"),
        pytest.raises(ControllerUnavailableError),
    ):
        connection.list_scopes()
    assert raw.calls == CONTROLLER_CALL_ATTEMPTS_MAX
    assert len(scheduler.slept_s) == CONTROLLER_CALL_ATTEMPTS_MAX - 1
    retries = [r for r in caplog.records if "list_scopes" in r.getMessage()]
    assert len(retries) == CONTROLLER_CALL_ATTEMPTS_MAX - 1


def test_unwrap_ray_error_of_a_dead_controller_is_controller_unavailable() -> None:
    from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

    from pravega_ray_actors.ray_calls import unwrap_ray_error

    for error in (RayActorError(), ActorUnavailableError("gone", None), GetTimeoutError("slow")):
        unwrapped = unwrap_ray_error(error, ControllerUnavailableError)
        assert isinstance(unwrapped, ControllerUnavailableError)


def test_creates_that_landed_answer_true_when_repeated(lossy) -> None:
    cluster, losing = lossy
    mgr = cluster.stream_manager()
    for method in ("create_scope", "create_stream", "create_key_value_table"):
        losing.lose[method] = 1
    assert mgr.create_scope("sc")
    assert mgr.create_stream("sc", "st", None)
    assert mgr.create_key_value_table("sc", "t", 2)
    losing.lose["create_reader_group"] = 1
    assert cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    assert losing.calls["create_scope"] == 2
    assert not mgr.create_scope("sc")  # a new create of an existing scope is still False


def test_deletes_are_not_repeated_after_an_unknown_outcome(lossy) -> None:
    cluster, losing = lossy
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    losing.lose["delete_scope"] = 1
    with pytest.raises(ControllerUnavailableError):
        mgr.delete_scope("sc")
    assert losing.calls["delete_scope"] == 1
    assert mgr.list_scopes() == []  # it had landed; the caller was told the outcome is unknown


CREATES = {"create_scope", "create_stream", "create_key_value_table", "create_reader_group"}
# The policy of client/controller_connection.py's docstring: NOT_REPEATED (deletes) are
# sent once, every other call is repeated, creates with a request id. (Readers change their
# group's state in its state segment: tests/unit/client/test_reader_group_synchronizer.py.)


class FirstReplyLost:
    """An invoker whose first call's reply is lost; later calls answer ``"answer"``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def invoke(self, method: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((method.__name__, args, kwargs))
        if len(self.calls) == 1:
            raise ControllerUnavailableError("reply lost")
        return "answer"


@pytest.mark.parametrize("name", sorted(SERVICE_METHODS))
def test_every_call_follows_the_retry_policy(name: str) -> None:
    invoker = FirstReplyLost()
    client = ControllerClient(invoker, pause_s=0.0)
    parameters = list(inspect.signature(SERVICE_METHODS[name]).parameters.values())[1:]
    args = [f"arg-{p.name}" for p in parameters if p.default is inspect.Parameter.empty]
    assert set(NOT_REPEATED) | CREATES <= set(SERVICE_METHODS)
    if name in NOT_REPEATED:
        with pytest.raises(ControllerUnavailableError):
            getattr(client, name)(*args)
        assert [call[0] for call in invoker.calls] == [name]
        return
    assert getattr(client, name)(*args) == "answer"
    assert [call[0] for call in invoker.calls] == [name, name]
    first, second = invoker.calls
    assert first[1:] == second[1:]  # repeated exactly, request id and all
    if name in CREATES:
        request_id = first[2]["request_id"]
        assert isinstance(request_id, str) and len(request_id) == 32
    else:
        assert "request_id" not in first[2]


class ReplyLostAfterWorkflow(ReplyLost):
    """A ReplyLost whose lost scale replies are lost only once the scale's workflow finished,
    so the repeat finds its segments sealed (the actor died after answering, and the request
    processor ran the scale meanwhile)."""

    def invoke(self, method: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().invoke(method, *args, **kwargs)
        except ControllerUnavailableError:
            if method.__name__ == "scale_stream":
                scope, stream = args[0], args[1]
                deadline = time.monotonic() + 30
                while not self._inner.invoke(ControllerService.check_scale, scope, stream, 1):
                    assert time.monotonic() < deadline, "the scale never finished"
                    time.sleep(0.01)
            raise


def test_a_scale_whose_reply_was_lost_and_that_finished_meanwhile_answers_its_epoch() -> None:
    cluster = InProcessCluster(container_count=2)
    try:
        lost = ReplyLostAfterWorkflow(cluster._locked)
        mgr = ClientFactory(ControllerClient(lost, pause_s=0.0), cluster._segments).stream_manager()
        mgr.create_scope("sc")
        mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
        (segment,) = mgr.get_stream_info("sc", "st").segments
        halves = [(0.0, 0.5), (0.5, 1.0)]
        lost.lose["scale_stream"] = 1
        assert mgr.scale_stream("sc", "st", [segment.segment_id], halves)
        assert lost.calls["scale_stream"] == 2  # the repeat met ScaleConflictError: done
        info = mgr.get_stream_info("sc", "st")
        assert info.epoch == 1
        assert [(s.key_low, s.key_high) for s in info.segments] == halves
        # Without a lost reply the same (stale) scale is a conflict, as before; and a repeat
        # after a lost reply that finds another scale done is one too.
        with pytest.raises(pr.ScaleConflictError):
            mgr.scale_stream("sc", "st", [segment.segment_id], halves)
        lost.lose["scale_stream"] = 1
        first = info.segments[0].segment_id
        with pytest.raises(pr.ScaleConflictError):
            mgr.scale_stream("sc", "st", [segment.segment_id], [(0.0, 1.0)])
        assert mgr.get_stream_info("sc", "st").segments[0].segment_id == first  # unchanged
    finally:
        cluster.shutdown()
