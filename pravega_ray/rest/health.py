"""The REST API's health endpoints (Pravega's ``HealthImpl``): ``/v1/health`` and its
``readiness``, ``liveness``, ``details`` and ``status`` views, each also for one
contributor (``/{id}``; 404 for an unknown id).

Contributors, the children of the root ``pravega-ray``:

* ``rest-server``: this server. It answers, so it is UP, alive and ready.
* ``controller``: UP and ready if a cheap controller call (``list_scopes``, then
  ``get_cluster_config`` and ``damaged_records`` for the details) answers within
  ``readiness_timeout_s``; DOWN and not ready otherwise, the error in its details. It is
  alive while the server answers (a controller actor that died is restarted by Ray: not a
  reason to restart this process).

The root is UP and ready when every contributor is. As in Java, readiness and liveness
answer 200 with a JSON boolean (a probe reads the body), status a JSON string (UP,
DOWN), details a map of strings.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from pravega_ray.rest.calls import ControllerCalls

__all__ = ["READINESS_TIMEOUT_S", "HealthResource"]

log = logging.getLogger(__name__)

READINESS_TIMEOUT_S = 5.0
"""How long the controller gets to answer a health check."""

ROOT = "pravega-ray"
SERVER = "rest-server"
CONTROLLER = "controller"


def _result(
    name: str, up: bool, details: dict[str, str], children: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ``HealthResult``."""
    return {
        "name": name,
        "status": "UP" if up else "DOWN",
        "readiness": up,
        "liveness": True,
        "details": details,
        "children": children or {},
    }


class HealthResource:
    """Handlers of ``/v1/health...`` (module docstring)."""

    def __init__(self, calls: ControllerCalls, readiness_timeout_s: float = READINESS_TIMEOUT_S):
        self._calls = calls
        self._timeout_s = readiness_timeout_s

    def routes(self) -> list[web.RouteDef]:
        """The fixed paths first: ``/v1/health/readiness`` is not contributor "readiness"."""
        views = {
            "": self.health,
            "/readiness": self.readiness,
            "/liveness": self.liveness,
            "/details": self.details,
            "/status": self.status,
        }
        fixed = [web.get(f"/v1/health{path}", view) for path, view in views.items()]
        by_id = [web.get(f"/v1/health{path}/{{id}}", view) for path, view in views.items()]
        return fixed + by_id

    async def _controller(self) -> dict[str, Any]:
        controller = self._calls.controller
        try:
            scopes = await self._calls.run(controller.list_scopes, timeout_s=self._timeout_s)
            cluster = await self._calls.run(
                controller.get_cluster_config, timeout_s=self._timeout_s
            )
            damaged = await self._calls.run(controller.damaged_records, timeout_s=self._timeout_s)
        except Exception as e:  # any failure is the answer: the controller is not ready
            log.info("health: the controller did not answer: %s: %s", type(e).__name__, e)
            return _result(CONTROLLER, False, {"error": f"{type(e).__name__}: {e}"})
        details = {
            "scopes": str(len(scopes)),
            "containerCount": str(cluster.get("container_count", "")),
            "damagedRecords": str(len(damaged)),
        }
        return _result(CONTROLLER, True, details)

    async def _tree(self) -> dict[str, Any]:
        children = {SERVER: _result(SERVER, True, {}), CONTROLLER: await self._controller()}
        up = all(child["status"] == "UP" for child in children.values())
        details = {name: child["status"] for name, child in children.items()}
        return _result(ROOT, up, details, children)

    async def _health(self, request: web.Request) -> dict[str, Any]:
        """The root's result, or the contributor's the path names (HTTPNotFound if none)."""
        contributor = request.match_info.get("id")
        if contributor is None or contributor == ROOT:
            return await self._tree()
        if contributor == SERVER:
            return _result(SERVER, True, {})
        if contributor == CONTROLLER:
            return await self._controller()
        raise web.HTTPNotFound(
            text=f"no health contributor {contributor!r:.80}; there are {ROOT}, {SERVER}, "
            f"{CONTROLLER}"
        )

    async def health(self, request: web.Request) -> web.Response:
        """200 ``HealthResult``."""
        return web.json_response(await self._health(request))

    async def readiness(self, request: web.Request) -> web.Response:
        """200 ``true`` / ``false``."""
        return web.json_response((await self._health(request))["readiness"])

    async def liveness(self, request: web.Request) -> web.Response:
        """200 ``true``: the server answers (checking the id, which needs no controller)."""
        contributor = request.match_info.get("id")
        if contributor not in (None, ROOT, SERVER, CONTROLLER):
            await self._health(request)  # raises HTTPNotFound
        return web.json_response(True)

    async def details(self, request: web.Request) -> web.Response:
        """200 ``HealthDetails`` (a map of strings)."""
        return web.json_response((await self._health(request))["details"])

    async def status(self, request: web.Request) -> web.Response:
        """200 ``"UP"`` / ``"DOWN"``."""
        return web.json_response((await self._health(request))["status"])
