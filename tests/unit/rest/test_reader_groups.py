"""Reader groups over REST (pravega_ray/rest/resources.py): list, get with the online readers,
delete."""

from __future__ import annotations

import pytest

from pravega_ray.inprocess import InProcessCluster
from pravega_ray.stream_configuration import ReaderGroupConfig
from tests.unit.rest.conftest import Http

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def group_scope(client: Http, scope: str, rest_cluster: InProcessCluster) -> str:
    """``scope`` with streams a and b, and reader groups g1 (reading both) and g2."""
    for stream in ("a", "b"):
        assert client.post(f"/v1/scopes/{scope}/streams", {"streamName": stream}).status == 201
    config = ReaderGroupConfig.for_streams(f"{scope}/b", f"{scope}/a")
    assert rest_cluster.create_reader_group(scope, "g1", config)
    assert rest_cluster.create_reader_group(
        scope, "g2", ReaderGroupConfig.for_streams(f"{scope}/a")
    )
    return scope


def test_list_reader_groups(client: Http, group_scope: str) -> None:
    reply = client.get(f"/v1/scopes/{group_scope}/readergroups")
    assert reply.status == 200
    assert reply.body == {"readerGroups": [{"readerGroupName": "g1"}, {"readerGroupName": "g2"}]}


def test_list_reader_groups_of_an_empty_or_missing_scope(client: Http, scope: str) -> None:
    assert client.get(f"/v1/scopes/{scope}/readergroups").body == {"readerGroups": []}
    assert client.get("/v1/scopes/nope/readergroups").status == 404
    assert client.get("/v1/scopes/..%2F/readergroups").status == 400


def test_get_reader_group_names_its_streams_and_online_readers(
    client: Http, group_scope: str, rest_cluster: InProcessCluster
) -> None:
    path = f"/v1/scopes/{group_scope}/readergroups/g1"
    assert client.get(path).body == {
        "scopeName": group_scope,
        "readerGroupName": "g1",
        "streamList": [f"{group_scope}/a", f"{group_scope}/b"],
        "onlineReaderIds": [],
    }
    readers = [rest_cluster.create_reader(r, group_scope, "g1") for r in ("r2", "r1")]
    try:
        assert client.get(path).body["onlineReaderIds"] == ["r1", "r2"]
    finally:
        for reader in readers:
            reader.close()
    assert client.get(path).body["onlineReaderIds"] == []


def test_get_reader_group_missing_answers_404(client: Http, group_scope: str) -> None:
    reply = client.get(f"/v1/scopes/{group_scope}/readergroups/nope")
    assert (reply.status, reply.body["error"]) == (404, "ReaderGroupNotFoundError")
    assert client.get("/v1/scopes/nope/readergroups/g1").status == 404
    assert client.get(f"/v1/scopes/{group_scope}/readergroups/{'g' * 300}").status == 400


def test_delete_reader_group_answers_204_then_404(
    client: Http, group_scope: str, rest_cluster: InProcessCluster
) -> None:
    path = f"/v1/scopes/{group_scope}/readergroups/g2"
    assert client.delete(path).status == 204
    assert client.get(path).status == 404
    assert client.delete(path).status == 404
    assert rest_cluster.core.list_reader_groups(group_scope) == ["g1"]
    assert client.delete(f"/v1/scopes/{group_scope}").status == 412  # streams and g1 remain
