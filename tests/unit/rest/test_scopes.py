"""Scopes over REST (pravega_ray/rest/resources.py): list, create, get, delete, and the
requests refused with 400 before anything changes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.unit.rest.conftest import Http

pytestmark = pytest.mark.timeout(30)


def test_create_scope_answers_201_with_the_scope_then_409(
    client: Http, new_name: Callable[[str], str]
) -> None:
    name = new_name("sc")
    reply = client.post("/v1/scopes", {"scopeName": name})
    assert (reply.status, reply.body) == (201, {"scopeName": name})
    assert reply.headers["Content-Type"].startswith("application/json")
    again = client.post("/v1/scopes", {"scopeName": name})
    assert again.status == 409
    assert again.body["error"] == "AlreadyExistsError"


def test_list_scopes_lists_each_sorted(client: Http, new_name: Callable[[str], str]) -> None:
    names = [new_name("list"), new_name("list")]
    for name in names:
        client.post("/v1/scopes", {"scopeName": name})
    reply = client.get("/v1/scopes")
    assert reply.status == 200
    listed = [s["scopeName"] for s in reply.body["scopes"]]
    assert set(names) <= set(listed)
    assert listed == sorted(listed)
    assert all(set(s) == {"scopeName"} for s in reply.body["scopes"])


def test_get_scope_answers_200_or_404(client: Http, scope: str) -> None:
    assert client.get(f"/v1/scopes/{scope}").body == {"scopeName": scope}
    missing = client.get("/v1/scopes/no-such-scope")
    assert missing.status == 404
    assert missing.body == {
        "code": 404,
        "error": "ScopeNotFoundError",
        "message": "scope no-such-scope does not exist",
    }


def test_delete_scope_answers_204_then_404(client: Http, scope: str) -> None:
    reply = client.delete(f"/v1/scopes/{scope}")
    assert (reply.status, reply.body) == (204, None)
    assert client.get(f"/v1/scopes/{scope}").status == 404
    assert client.delete(f"/v1/scopes/{scope}").status == 404


def test_delete_scope_with_a_stream_answers_412(client: Http, scope: str) -> None:
    assert client.post(f"/v1/scopes/{scope}/streams", {"streamName": "st"}).status == 201
    reply = client.delete(f"/v1/scopes/{scope}")
    assert reply.status == 412
    assert reply.body["error"] == "ScopeNotEmptyError"
    assert client.get(f"/v1/scopes/{scope}").status == 200


@pytest.mark.parametrize(
    "name", ["../x", "", "a" * 300, "_system", "a b", "sc/st", "..", "é"], ids=repr
)
def test_create_scope_with_an_invalid_name_answers_400_and_creates_nothing(
    client: Http, name: str
) -> None:
    before = client.get("/v1/scopes").body
    reply = client.post("/v1/scopes", {"scopeName": name})
    assert reply.status == 400
    assert reply.body["error"] == "InvalidNameError"
    assert client.get("/v1/scopes").body == before


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"not json",
        b"",
        b"[]",
        b'"sc"',
        b"null",
        b'{"scopeName": 7}',
        b'{"scopeName": null}',
        b"{}",
        b"\xff\xfe",
        b"[" * 100_000,
    ],
    ids=lambda b: repr(b[:12]),
)
def test_create_scope_with_a_malformed_body_answers_400(client: Http, body: bytes) -> None:
    before = client.get("/v1/scopes").body
    reply = client.request("POST", "/v1/scopes", raw=body)
    assert reply.status == 400, reply.body
    assert reply.body["code"] == 400
    assert client.get("/v1/scopes").body == before


@pytest.mark.parametrize(
    "path", ["/v1/scopes/%2E%2E%2Fx", "/v1/scopes/..%2Fx", "/v1/scopes/_system", "/v1/scopes/a%20b"]
)
def test_a_path_with_an_invalid_name_answers_400(client: Http, path: str) -> None:
    for method in ("GET", "DELETE"):
        reply = client.request(method, path)
        assert reply.status == 400, (method, reply.body)
        assert reply.body["error"] == "InvalidNameError"


def test_a_path_with_a_300_character_name_answers_400(client: Http) -> None:
    reply = client.get(f"/v1/scopes/{'a' * 300}/streams")
    assert reply.status == 400
    assert "longer than" in reply.body["message"]
