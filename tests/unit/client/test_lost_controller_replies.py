"""Controller calls whose reply is lost: repeated only when that is safe, with the same effect.

The controller performs the call, then the reply is lost (ControllerUnavailableError, as
when the actor dies right after answering). RetryingControllerConnection must repeat the
safe calls so readers and creates carry on as if nothing happened, and must not repeat the
others.
"""

from __future__ import annotations

from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.controller_connection import SAFE_TO_REPEAT, RetryingControllerConnection
from pravega_ray.errors import ControllerUnavailableError
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(60)


class LosingReplies:
    """Runs every call; loses the reply of the next ``count`` calls of each named method."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.lose: dict[str, int] = {}
        self.calls: dict[str, int] = {}

    def __getattr__(self, method: str) -> Any:
        target = getattr(self._inner, method)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[method] = self.calls.get(method, 0) + 1
            result = target(*args, **kwargs)
            if self.lose.get(method, 0) > 0:
                self.lose[method] -= 1
                raise ControllerUnavailableError(f"reply of {method} lost")
            return result

        return call


@pytest.fixture
def lossy():  # type: ignore[no-untyped-def]
    cluster = InProcessCluster(container_count=2)
    losing = LosingReplies(cluster._locked)
    cluster._controller = RetryingControllerConnection(losing, pause_s=0.0)
    yield cluster, losing
    cluster.shutdown()


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


def test_readers_carry_on_through_lost_replies_of_every_reader_group_call(lossy) -> None:
    cluster, losing = lossy
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(4)))
    cluster.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    events = [f"e{i}".encode() for i in range(400)]
    with cluster.create_writer("sc", "st") as writer:
        for i, event in enumerate(events):
            writer.write_event(event, routing_key=f"k{i}")
    losing.lose.update({"reader_group_add_reader": 1, "reader_group_sync": 3})
    first = cluster.create_reader("r1", "sc", "rg")
    got = [first.read_next_event(timeout_s=5).event for _ in range(50)]
    # A second reader joins: the first must release segments, and those replies are lost.
    losing.lose.update({"reader_group_release": 2, "reader_group_sync": 2})
    second = cluster.create_reader("r2", "sc", "rg")
    readers = [first, second]
    idle = 0
    while idle < 50:  # about a second with nothing new for either reader
        progressed = False
        for reader in readers:
            event = reader.read_next_event(timeout_s=0.01)
            if event is not None:
                got.append(event.event)
                progressed = True
        idle = 0 if progressed else idle + 1
    losing.lose["reader_group_remove_reader"] = 2
    first.close()
    second.close()
    assert sorted(got) == sorted(events)  # every event once: nothing stranded, nothing twice
    assert losing.calls["reader_group_release"] >= 2


def test_deletes_are_not_repeated_after_an_unknown_outcome(lossy) -> None:
    cluster, losing = lossy
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    losing.lose["delete_scope"] = 1
    with pytest.raises(ControllerUnavailableError):
        mgr.delete_scope("sc")
    assert losing.calls["delete_scope"] == 1
    assert mgr.list_scopes() == []  # it had landed; the caller was told the outcome is unknown
    assert "delete_scope" not in SAFE_TO_REPEAT and "delete_reader_group" not in SAFE_TO_REPEAT
