"""The public state synchronizer through Ray (issue 27 item 3): Ray tasks, each with a client
of its own, update one counter at once and none of their updates is lost (one wins a race,
the others apply their function again to the winner's state); typed errors for hostile
input cross the actors; a delete and a scope's recursive delete reach every client
(shared local Ray, filesystem tiers)."""

from __future__ import annotations

import pytest
import ray

import pravega_ray as pr
from pravega_ray.constants import TABLE_VALUE_BYTES_MAX

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

JSON = pr.JsonSerializer()


class _Undecodable:
    """Encodes anything; decodes nothing."""

    def serialize(self, value: object) -> bytes:
        return b"x"

    def deserialize(self, data: bytes) -> object:
        raise ValueError("not mine")


@ray.remote(num_cpus=0)
def _increment(namespace: str, scope: str, times: int) -> int:
    """Runs in a Ray worker: ``times`` increments of the counter; how often ``fn`` ran."""
    sync = pr.connect(namespace=namespace).state_synchronizer(
        scope, "counter", JSON, initial={"n": 0}
    )
    runs = 0

    def inc(state: dict[str, int]) -> dict[str, int]:
        nonlocal runs
        runs += 1
        return {"n": state["n"] + 1}

    for _ in range(times):
        sync.update_state(inc)
    sync.close()
    return runs


def test_racing_ray_tasks_lose_no_update(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    scope = unique_name
    cluster.stream_manager().create_scope(scope)
    sync = cluster.state_synchronizer(scope, "counter", JSON, initial={"n": 0})
    runs = ray.get([_increment.remote(cluster.namespace, scope, 100) for _ in range(2)])
    assert sum(runs) >= 200
    assert sync.get_state() == {"n": 0}  # the local copy, until fetched
    sync.fetch_updates()
    assert sync.get_state() == {"n": 200}
    assert cluster.list_state_synchronizers(scope) == ["counter"]


def test_hostile_input_and_deletes_through_the_actors(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    scope = unique_name
    mgr = cluster.stream_manager()
    with pytest.raises(pr.ScopeNotFoundError):
        cluster.state_synchronizer(scope, "s", JSON, initial={})
    mgr.create_scope(scope)
    for name in ("../etc", "a/b", "_system", ""):
        with pytest.raises(pr.InvalidNameError):
            cluster.state_synchronizer(scope, name, JSON, initial={})
    sync = cluster.state_synchronizer(scope, "s", JSON, initial={"v": 1})
    with pytest.raises(pr.InvalidArgumentError):
        sync.update_state(lambda state: {"v": "x" * (TABLE_VALUE_BYTES_MAX + 1)})
    with pytest.raises(pr.SerializationError, match=f"{scope}/s"):
        cluster.state_synchronizer(scope, "s", _Undecodable(), initial=None)
    assert sync.update_state(lambda state: {"v": state["v"] + 1}) == {"v": 2}
    with pytest.raises(pr.ScopeNotEmptyError):
        mgr.delete_scope(scope)
    assert cluster.delete_state_synchronizer(scope, "s")
    with pytest.raises(pr.StateSynchronizerNotFoundError):
        sync.update_state(lambda state: state)
    again = cluster.state_synchronizer(scope, "s", JSON, initial={"v": 0})
    assert again.get_state() == {"v": 0}
    assert mgr.delete_scope(scope, recursive=True, timeout_s=60)
    assert scope not in mgr.list_scopes()
    with pytest.raises(pr.StateSynchronizerNotFoundError):
        again.fetch_updates()
