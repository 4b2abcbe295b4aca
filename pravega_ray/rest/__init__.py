"""Pravega's controller REST admin API over a pravega-ray controller (docs/rest.md).

:func:`serve_rest` serves ``/v1/scopes`` (scopes, streams, stream state, scaling events,
reader groups) and ``/v1/health`` with the JSON shapes and status codes of Pravega's
``Controller.yaml``, on aiohttp in a thread of its own.
"""

from __future__ import annotations

from pravega_ray.rest.calls import ControllerCalls, OnlineReaders, RestControllerCalls
from pravega_ray.rest.server import DEFAULT_PORT, RestServer, build_app, http_status, serve_rest

__all__ = [
    "DEFAULT_PORT",
    "ControllerCalls",
    "OnlineReaders",
    "RestControllerCalls",
    "RestServer",
    "build_app",
    "http_status",
    "serve_rest",
]
