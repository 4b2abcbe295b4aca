"""Health over REST (pravega_ray/rest/health.py): the tree, readiness, liveness, details,
status, per contributor, and a controller that does not answer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pravega_ray.errors import ControllerUnavailableError
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.rest import RestServer, serve_rest
from tests.unit.rest.conftest import Http

pytestmark = pytest.mark.timeout(30)

VIEWS = ("", "/readiness", "/liveness", "/details", "/status")


def test_health_is_a_tree_of_contributors(client: Http) -> None:
    reply = client.get("/v1/health")
    assert reply.status == 200
    health = reply.body
    assert (health["name"], health["status"], health["readiness"], health["liveness"]) == (
        "pravega-ray",
        "UP",
        True,
        True,
    )
    assert set(health["children"]) == {"rest-server", "controller"}
    controller = health["children"]["controller"]
    assert controller["details"]["containerCount"] == "2"
    assert controller["details"]["damagedRecords"] == "0"
    assert health["details"] == {"rest-server": "UP", "controller": "UP"}


def test_health_views_answer_json_values(client: Http) -> None:
    assert client.get("/v1/health/readiness").body is True
    assert client.get("/v1/health/liveness").body is True
    assert client.get("/v1/health/status").body == "UP"
    details = client.get("/v1/health/details").body
    assert all(isinstance(v, str) for v in details.values())


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("contributor", ["controller", "rest-server", "pravega-ray"])
def test_each_view_answers_per_contributor(client: Http, view: str, contributor: str) -> None:
    reply = client.get(f"/v1/health{view}/{contributor}")
    assert reply.status == 200, reply.body
    if view == "":
        assert reply.body["name"] == contributor


@pytest.mark.parametrize("view", VIEWS)
def test_an_unknown_contributor_answers_404(client: Http, view: str) -> None:
    reply = client.get(f"/v1/health{view}/nobody")
    assert reply.status == 404
    assert "nobody" in reply.body["message"]


class _Unavailable:
    """A controller double: the real one, but it does not answer listing scopes."""

    def __init__(self, controller: Any) -> None:
        self._controller = controller

    def list_scopes(self) -> list[str]:
        raise ControllerUnavailableError("the controller actor is restarting")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._controller, name)


@pytest.fixture(scope="module")
def unready(rest_cluster: InProcessCluster) -> Iterator[RestServer]:
    server = serve_rest(_Unavailable(rest_cluster.core), "127.0.0.1", 0)
    yield server
    server.stop()


def test_a_controller_that_does_not_answer_is_not_ready(unready: RestServer) -> None:
    client = Http(unready.host, unready.port)
    assert client.get("/v1/health/readiness").body is False
    assert client.get("/v1/health/liveness").body is True
    assert client.get("/v1/health/status").body == "DOWN"
    assert client.get("/v1/health/status/rest-server").body == "UP"
    health = client.get("/v1/health").body
    assert (health["status"], health["readiness"]) == ("DOWN", False)
    assert "ControllerUnavailableError" in health["children"]["controller"]["details"]["error"]
    reply = client.get("/v1/scopes")
    assert (reply.status, reply.body["error"]) == (500, "ControllerUnavailableError")
