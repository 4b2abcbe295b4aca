"""The REST API's scopes, streams and reader groups (Pravega's ``StreamMetadataResourceImpl``).

Each handler checks the names in its path and body (``naming.validate_name``:
InvalidNameError, answered 400) before it calls the controller, so an invalid name never
reaches it; then it answers the shapes of :mod:`pravega_ray.rest.models`. Errors are raised,
not answered here: the server's middleware (``server.py``) maps them to status codes.
Outcomes Pravega's API has a status for are answered directly (201, 204, 409; 404 where
the controller says "absent" with False).

Seal, update and delete answer once their workflow is done (at most ``workflow_wait_s``),
as Java's controller does, so a request that follows sees the change.

With access control (docs/security.md) the server's middleware asks :func:`required_access`
what a request needs before its handler runs; the listings (scopes, streams, reader groups)
list only what the request's user may read.
"""

from __future__ import annotations

import contextlib
from typing import Any

from aiohttp import web

from pravega_ray.auth import (
    ROOT_RESOURCE,
    AccessControl,
    Permission,
    reader_group_resource,
    scope_resource,
    stream_resource,
)
from pravega_ray.contracts.records import StreamInfo, StreamState
from pravega_ray.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    InvalidNameError,
    ReaderGroupNotFoundError,
    ScopeNotFoundError,
    StreamNotFoundError,
)
from pravega_ray.naming import validate_name
from pravega_ray.rest import models
from pravega_ray.rest.calls import ControllerCalls
from pravega_ray.rest.scaling_events import EPOCHS_MAX, Epoch, scale_metadata, select

__all__ = ["USER_KEY", "StreamMetadataResource", "required_access"]

INTERNAL_PREFIX = "_"
"""Pravega's internal stream names start with it (``showInternalStreams`` lists only those)."""
USER_KEY = web.RequestKey("pravega_user", str)
"""Where the server's middleware leaves the authenticated user name on a request."""

_SCOPE = "/v1/scopes/{scopeName}"
_STREAM = _SCOPE + "/streams/{streamName}"
_GROUP = _SCOPE + "/readergroups/{readerGroupName}"
_READ, _READ_UPDATE = Permission.READ, Permission.READ_UPDATE
_ACCESS: dict[tuple[str, str], tuple[str, Permission]] = {
    ("POST", "/v1/scopes"): ("root", _READ_UPDATE),
    ("GET", _SCOPE): ("scope", _READ),
    ("DELETE", _SCOPE): ("root", _READ_UPDATE),
    ("GET", _SCOPE + "/streams"): ("scope", _READ),
    ("POST", _SCOPE + "/streams"): ("scope", _READ_UPDATE),
    ("GET", _STREAM): ("stream", _READ),
    ("PUT", _STREAM): ("stream", _READ_UPDATE),
    ("DELETE", _STREAM): ("stream", _READ_UPDATE),
    ("PUT", _STREAM + "/state"): ("stream", _READ_UPDATE),
    ("GET", _STREAM + "/scaling-events"): ("stream", _READ),
    ("GET", _SCOPE + "/readergroups"): ("scope", _READ),
    ("GET", _GROUP): ("group", _READ),
    ("DELETE", _GROUP): ("group", _READ_UPDATE),
}
"""What each route needs (Pravega's ``StreamMetadataResourceImpl``): a permission on
``prn::/`` ("root"), the path's scope, stream or reader group. Routes not named here (the
scope list, health) need an authenticated user only."""


def required_access(request: web.Request) -> tuple[str, Permission] | None:
    """``(resource, permission)`` the request needs, None if it needs none beyond an
    authenticated user, or if a name in its path is invalid (its handler answers 400 and
    calls nothing)."""
    route = request.match_info.route.resource
    method = "GET" if request.method == "HEAD" else request.method
    rule = _ACCESS.get((method, route.canonical)) if route is not None else None
    if rule is None:
        return None
    level, needed = rule
    try:
        if level == "root":
            return ROOT_RESOURCE, needed
        (scope,) = _names(request, "scope")
        if level == "scope":
            return scope_resource(scope), needed
        if level == "stream":
            (stream,) = _names(request, "stream")
            return stream_resource(scope, stream), needed
        (group,) = _names(request, "reader group")
        return reader_group_resource(scope, group), needed
    except InvalidNameError:
        return None


def _names(request: web.Request, *kinds: str) -> list[str]:
    """The path's names, checked: ``kinds`` in ("scope", "stream", "reader group")."""
    keys = {"scope": "scopeName", "stream": "streamName", "reader group": "readerGroupName"}
    return [validate_name(kind, request.match_info[keys[kind]]) for kind in kinds]


async def _body(request: web.Request, what: str) -> dict[str, Any]:
    """The request's JSON object (413 past the server's body limit, raised by aiohttp)."""
    return models.json_object(await request.read(), what)


def _query_ms(request: web.Request, name: str) -> int:
    raw = request.query.get(name)
    if raw is None or not raw.isascii() or not raw.isdigit() or len(raw) > 19:
        raise InvalidArgumentError(
            f"query parameter {name} is required: milliseconds since 1970, an integer >= 0"
        )
    return int(raw)


class StreamMetadataResource:
    """Handlers of ``/v1/scopes/...`` over ``calls`` (module docstring)."""

    def __init__(self, calls: ControllerCalls, access: AccessControl | None = None) -> None:
        self._calls = calls
        self._controller = calls.controller
        self._access = access

    def _visible(self, request: web.Request, resource: str) -> bool:
        """Whether the request's user may read ``resource`` (always, without access control)."""
        if self._access is None:
            return True
        return self._access.allows(request.get(USER_KEY, ""), resource, _READ)

    def routes(self) -> list[web.RouteDef]:
        """Every route this resource serves, under ``/v1``."""
        scope, stream, group = _SCOPE, _STREAM, _GROUP
        return [
            web.get("/v1/scopes", self.list_scopes),
            web.post("/v1/scopes", self.create_scope),
            web.get(scope, self.get_scope),
            web.delete(scope, self.delete_scope),
            web.get(scope + "/streams", self.list_streams),
            web.post(scope + "/streams", self.create_stream),
            web.get(stream, self.get_stream),
            web.put(stream, self.update_stream),
            web.delete(stream, self.delete_stream),
            web.put(stream + "/state", self.update_stream_state),
            web.get(stream + "/scaling-events", self.get_scaling_events),
            web.get(scope + "/readergroups", self.list_reader_groups),
            web.get(group, self.get_reader_group),
            web.delete(group, self.delete_reader_group),
        ]

    # --- scopes -------------------------------------------------------------------------------
    async def list_scopes(self, request: web.Request) -> web.Response:
        """200 ``{scopes: [{scopeName}]}``, sorted (the system scope is not listed)."""
        scopes = await self._calls.run(self._controller.list_scopes)
        scopes = [s for s in scopes if self._visible(request, scope_resource(s))]
        return web.json_response({"scopes": [{"scopeName": s} for s in sorted(scopes)]})

    async def create_scope(self, request: web.Request) -> web.Response:
        """201 ``ScopeProperty``; 409 if it exists."""
        scope = validate_name(
            "scope", models.required_str(await _body(request, "createScope"), "scopeName")
        )
        if not await self._calls.run(self._controller.create_scope, scope):
            raise AlreadyExistsError(f"scope {scope} already exists")
        return web.json_response({"scopeName": scope}, status=201)

    async def get_scope(self, request: web.Request) -> web.Response:
        """200 ``ScopeProperty``; 404."""
        (scope,) = _names(request, "scope")
        if scope not in await self._calls.run(self._controller.list_scopes):
            raise ScopeNotFoundError(f"scope {scope} does not exist")
        return web.json_response({"scopeName": scope})

    async def delete_scope(self, request: web.Request) -> web.Response:
        """204; 404; 412 while it has streams, key-value tables or reader groups."""
        (scope,) = _names(request, "scope")
        if not await self._calls.run(self._controller.delete_scope, scope):
            raise ScopeNotFoundError(f"scope {scope} does not exist")
        return web.Response(status=204)

    # --- streams ------------------------------------------------------------------------------
    async def list_streams(self, request: web.Request) -> web.Response:
        """200 ``{streams: [StreamProperty]}``; 404 for the scope. ``filter_type=tag`` with
        ``filter_value=<tag>``: the streams with that tag; ``filter_type=showInternalStreams``:
        only internal streams (a leading ``_``; user scopes have none); no filter: the
        others. 400 for another ``filter_type`` or a tag filter without a value."""
        (scope,) = _names(request, "scope")
        filter_type = request.query.get("filter_type")
        tag = request.query.get("filter_value")
        if filter_type not in (None, "tag", "showInternalStreams"):
            raise InvalidArgumentError(
                f"filter_type must be showInternalStreams or tag, got {filter_type!r:.40}"
            )
        if filter_type == "tag" and not tag:
            raise InvalidArgumentError("filter_type=tag needs a filter_value (the tag)")
        internal = filter_type == "showInternalStreams"
        infos = await self._calls.run(self._stream_infos, scope, internal)
        streams = [
            models.stream_property(i.scope, i.stream, i.configuration)
            for i in infos
            if (filter_type != "tag" or tag in i.configuration.tags)
            and self._visible(request, stream_resource(i.scope, i.stream))
        ]
        return web.json_response({"streams": streams})

    def _stream_infos(self, scope: str, internal: bool) -> list[StreamInfo]:
        """(Blocking.) The infos of the scope's streams, internal ones or the others; a
        stream deleted meanwhile is left out."""
        infos = []
        for name in sorted(self._controller.list_streams(scope)):
            if name.startswith(INTERNAL_PREFIX) != internal:
                continue
            with contextlib.suppress(StreamNotFoundError):
                infos.append(self._controller.get_stream_info(scope, name))
        return infos

    async def create_stream(self, request: web.Request) -> web.Response:
        """201 ``StreamProperty``; 404 for the scope; 409 if the stream exists."""
        (scope,) = _names(request, "scope")
        body = await _body(request, "createStream")
        stream = validate_name("stream", models.required_str(body, "streamName"))
        config = models.config_from_request(body, None)
        if not await self._calls.run(self._controller.create_stream, scope, stream, config):
            raise AlreadyExistsError(f"stream {scope}/{stream} already exists")
        return web.json_response(models.stream_property(scope, stream, config), status=201)

    async def get_stream(self, request: web.Request) -> web.Response:
        """200 ``StreamProperty``; 404."""
        scope, stream = _names(request, "scope", "stream")
        info = await self._calls.run(self._controller.get_stream_info, scope, stream)
        return web.json_response(models.stream_property(scope, stream, info.configuration))

    async def update_stream(self, request: web.Request) -> web.Response:
        """200 ``StreamProperty`` once the update is done; 404. What the body leaves out
        is kept (``models.config_from_request``)."""
        scope, stream = _names(request, "scope", "stream")
        body = await _body(request, "updateStream")
        info = await self._calls.run(self._controller.get_stream_info, scope, stream)
        config = models.config_from_request(body, info.configuration)
        await self._calls.run(self._controller.update_stream, scope, stream, config)
        await self._calls.wait_until(
            lambda: self._controller.check_update(scope, stream), "update of the stream"
        )
        return web.json_response(models.stream_property(scope, stream, config))

    async def delete_stream(self, request: web.Request) -> web.Response:
        """204 once deleted; 404; 412 unless sealed."""
        scope, stream = _names(request, "scope", "stream")
        if not await self._calls.run(self._controller.delete_stream, scope, stream):
            raise StreamNotFoundError(f"stream {scope}/{stream} does not exist")
        await self._calls.wait_until(lambda: self._gone(scope, stream), "deletion of the stream")
        return web.Response(status=204)

    def _gone(self, scope: str, stream: str) -> bool:
        """(Blocking.) Neither the stream's record nor its entry in the scope's list is left
        (the delete workflow drops the record first)."""
        try:
            self._controller.get_stream_info(scope, stream)
            return False
        except (ScopeNotFoundError, StreamNotFoundError):
            pass
        try:
            return stream not in self._controller.list_streams(scope)
        except ScopeNotFoundError:
            return True

    async def update_stream_state(self, request: web.Request) -> web.Response:
        """200 ``{streamState: "SEALED"}`` once sealed; 404; 400 for another state."""
        scope, stream = _names(request, "scope", "stream")
        body = await _body(request, "updateStreamState")
        if body.get("streamState") != "SEALED":
            raise InvalidArgumentError(
                f'streamState must be "SEALED", got {body.get("streamState")!r:.40}'
            )
        if not await self._calls.run(self._controller.seal_stream, scope, stream):
            await self._calls.wait_until(
                lambda: self._controller.get_stream_info(scope, stream).state is StreamState.SEALED,
                "seal of the stream",
            )
        return web.json_response({"streamState": "SEALED"})

    async def get_scaling_events(self, request: web.Request) -> web.Response:
        """200 ``{scalingEvents: [ScaleMetadata]}`` of ``[from, to]`` (ms since 1970, both
        required, ``from`` <= ``to``: 400 otherwise); 404 (``scaling_events`` module)."""
        scope, stream = _names(request, "scope", "stream")
        from_ms, to_ms = _query_ms(request, "from"), _query_ms(request, "to")
        if from_ms > to_ms:
            raise InvalidArgumentError(f"from ({from_ms}) is after to ({to_ms})")
        info, epochs = await self._calls.run(self._epochs, scope, stream)
        events = scale_metadata(epochs, {0: info.creation_time_ms})
        return web.json_response({"scalingEvents": select(events, from_ms, to_ms)})

    def _epochs(self, scope: str, stream: str) -> tuple[StreamInfo, list[Epoch]]:
        """(Blocking.) The stream's info and its newest :data:`EPOCHS_MAX` epochs, oldest
        first, each with the time its scale completed (``ControllerService.get_epoch``)."""
        info = self._controller.get_stream_info(scope, stream)
        epochs = []
        for number in range(max(0, info.epoch - EPOCHS_MAX + 1), info.epoch + 1):
            found = self._controller.get_epoch(scope, stream, number)
            epochs.append(Epoch(number, found.created_ms, found.segments))
        return info, epochs

    # --- reader groups ------------------------------------------------------------------------
    async def list_reader_groups(self, request: web.Request) -> web.Response:
        """200 ``{readerGroups: [{readerGroupName}]}``, sorted; 404 for the scope."""
        (scope,) = _names(request, "scope")
        groups = await self._calls.run(self._controller.list_reader_groups, scope)
        groups = [g for g in groups if self._visible(request, reader_group_resource(scope, g))]
        return web.json_response({"readerGroups": [{"readerGroupName": g} for g in sorted(groups)]})

    async def get_reader_group(self, request: web.Request) -> web.Response:
        """200 ``{scopeName, readerGroupName, streamList, onlineReaderIds}``; 404.

        ``streamList``: the ``scope/stream`` names the group was created to read (a
        ``reset_to`` with other streams is in the group's live state, not here);
        ``onlineReaderIds``: from the server's ``online_readers``, else [] (the controller
        does not keep the live state: the group's members do, in its state segment).
        """
        scope, group = _names(request, "scope", "reader group")
        record = await self._calls.run(self._controller.get_reader_group, scope, group)
        readers: list[str] = []
        if self._calls.online_readers is not None:
            readers = await self._calls.run(self._calls.online_readers, scope, group)
        streams = record.get("streams")
        return web.json_response(
            {
                "scopeName": scope,
                "readerGroupName": group,
                "streamList": sorted(str(s) for s in streams) if isinstance(streams, list) else [],
                "onlineReaderIds": sorted(readers),
            }
        )

    async def delete_reader_group(self, request: web.Request) -> web.Response:
        """204; 404."""
        scope, group = _names(request, "scope", "reader group")
        if not await self._calls.run(self._controller.delete_reader_group, scope, group):
            raise ReaderGroupNotFoundError(f"reader group {scope}/{group} does not exist")
        return web.Response(status=204)
