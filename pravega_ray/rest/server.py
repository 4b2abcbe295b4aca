"""Serving the controller's REST admin API: :func:`serve_rest` starts an aiohttp server on
its own event loop in a daemon thread (so sync code starts it: a driver, an actor's
constructor, a test); the returned :class:`RestServer` stops it.

Safe by default (issue 25, docs/security.md): without ``tls`` the server speaks plain HTTP
and without ``access`` it asks no one for credentials, so it binds to loopback addresses
only unless both are given or the caller passes ``insecure_ok=True``
(``pravega_ray.endpoints.is_loopback`` decides, as for the gRPC API). With ``access`` every
request needs ``Authorization: Basic base64(user:password)`` (401 with ``WWW-Authenticate:
Basic`` otherwise) and the permission ``resources.required_access`` names (403 otherwise).

Status codes (docs/rest.md): each handler answers its successes; every error is raised
and mapped here, so no request crashes the server or gets aiohttp's plain-text answer:

=====================================================  ====
InvalidArgumentError (malformed JSON, invalid name)     400
NotFoundError (scope, stream, reader group)             404
AlreadyExistsError                                      409
ScopeNotEmptyError, StreamNotSealedError                412
anything else (a conflict, a sealed stream, a timeout)  500
=====================================================  ====

plus aiohttp's own: 404 for an unknown path, 405 for a wrong method (with ``Allow``),
413 for a body over ``body_bytes_max``. Every error body is JSON: ``{"code", "error",
"message"}`` (``error``: the exception's type, or the HTTP reason). A request refused
changes nothing: names and bodies are checked before the controller is called. (A request
aiohttp cannot parse at all, e.g. a URL over 8 KiB, gets its parser's plain-text 400
before any handler runs.)
"""

from __future__ import annotations

import asyncio
import logging
import threading

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from pravega_ray.auth import AccessControl
from pravega_ray.constants import WORKFLOW_WAIT_S
from pravega_ray.endpoints import TlsFiles, is_loopback
from pravega_ray.errors import (
    AlreadyExistsError,
    ConfigurationError,
    InvalidArgumentError,
    NotFoundError,
    PravegaError,
    ScopeNotEmptyError,
    StreamNotSealedError,
)
from pravega_ray.rest.calls import (
    CALL_TIMEOUT_S,
    WORKERS,
    ControllerCalls,
    OnlineReaders,
    RestControllerCalls,
)
from pravega_ray.rest.health import READINESS_TIMEOUT_S, HealthResource
from pravega_ray.rest.resources import USER_KEY, StreamMetadataResource, required_access

__all__ = ["BODY_BYTES_MAX", "DEFAULT_PORT", "RestServer", "build_app", "http_status", "serve_rest"]

log = logging.getLogger(__name__)

DEFAULT_PORT = 9091
"""Pravega's controller REST port (standalone and the controller's default)."""
BODY_BYTES_MAX = 256 * 1024
"""Largest request body read: a larger one is refused with 413 once it passes the limit.
The largest valid body, 128 tags of 256 characters each written as ``\\uXXXX`` escapes,
is under 200 KiB."""
START_TIMEOUT_S = 30.0
STOP_GRACE_S = 5.0


def http_status(error: BaseException) -> int:
    """The status code of an error a handler raised (module docstring)."""
    if isinstance(error, (ScopeNotEmptyError, StreamNotSealedError)):
        return 412
    if isinstance(error, InvalidArgumentError):
        return 400
    if isinstance(error, NotFoundError):
        return 404
    if isinstance(error, AlreadyExistsError):
        return 409
    return 500


def _error(status: int, error: str, message: str) -> web.Response:
    return web.json_response({"code": status, "error": error, "message": message}, status=status)


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error as a JSON answer (module docstring); a bug is logged with its traceback."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        message = e.text or e.reason
        if message == f"{e.status}: {e.reason}":  # aiohttp's own answer: say what was asked
            message = f"{e.reason}: {request.method} {request.path}"
            if "Allow" in e.headers:
                message += f" (allowed: {e.headers['Allow']})"
        response = _error(e.status, e.reason, message)
        if "Allow" in e.headers:
            response.headers["Allow"] = e.headers["Allow"]
        return response
    except Exception as e:  # every failure is an answer; asyncio.CancelledError passes
        status = http_status(e)
        if not isinstance(e, (PravegaError, TimeoutError)):  # not one of ours: a bug
            log.exception("REST %s %s: unexpected error", request.method, request.path)
        else:
            log.info(
                "REST %s %s: %d %s: %s", request.method, request.path, status, type(e).__name__, e
            )
        return _error(status, type(e).__name__, str(e) or type(e).__name__)


_CREDENTIALS_NEEDED = (
    "authentication failed: every request needs 'Authorization: Basic "
    "base64(<user>:<password>)' naming a user of the server's password file and its password"
)


def _access_control(access: AccessControl, calls: ControllerCalls) -> Middleware:
    """Authenticate every request (401), then check what it needs (403; module docstring).
    Checking a password is slow (PBKDF2), so it runs on the call pool, off the loop."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        user = await calls.run(access.authenticate, request.headers.get("Authorization"))
        if user is None:
            response = _error(401, "Unauthorized", _CREDENTIALS_NEEDED)
            response.headers["WWW-Authenticate"] = 'Basic realm="pravega-ray"'
            return response
        request[USER_KEY] = user
        needed = required_access(request)
        if needed is not None and not access.allows(user, *needed):
            resource, permission = needed
            log.info("REST %s %s: 403 for %s", request.method, request.path, user)
            return _error(
                403,
                "Forbidden",
                f"user {user!r} may not {request.method} {request.path}: it needs "
                f"{permission.name} on {resource}",
            )
        return await handler(request)

    return check


def build_app(
    calls: ControllerCalls,
    *,
    body_bytes_max: int = BODY_BYTES_MAX,
    readiness_timeout_s: float = READINESS_TIMEOUT_S,
    access: AccessControl | None = None,
) -> web.Application:
    """The aiohttp application of the API over ``calls`` (which it does not close); with
    ``access``, every request authenticated and authorized (module docstring)."""
    middlewares = [_errors] if access is None else [_errors, _access_control(access, calls)]
    app = web.Application(client_max_size=body_bytes_max, middlewares=middlewares)
    app.add_routes(StreamMetadataResource(calls, access).routes())
    app.add_routes(HealthResource(calls, readiness_timeout_s).routes())
    return app


class RestServer:
    """A running REST server (what :func:`serve_rest` returns): ``host``, ``port`` (the
    bound one), ``url``, and :meth:`stop`."""

    def __init__(
        self,
        host: str,
        port: int,
        loop: asyncio.AbstractEventLoop,
        thread: threading.Thread,
        runner: web.AppRunner,
        calls: ControllerCalls,
        tls: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self._loop = loop
        self._thread = thread
        self._runner = runner
        self._calls = calls
        self._stopped = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RestServer({self.url})"

    @property
    def url(self) -> str:
        """``http://host:port``, ``https://`` with TLS (brackets around an IPv6 literal)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop listening, give requests under way ``grace_s`` to finish, stop the loop and
        its thread. Idempotent; not from the server's own loop."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        try:
            cleanup = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
            cleanup.result(grace_s + 1)
        except Exception:  # a cleanup that fails or hangs must not keep the loop alive
            log.exception("REST server: cleanup failed")
        finally:
            self._calls.close()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(grace_s + 1)
            if not self._thread.is_alive():
                self._loop.close()

    def __enter__(self) -> RestServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def serve_rest(
    controller: RestControllerCalls,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    insecure_ok: bool = False,
    tls: TlsFiles | None = None,
    access: AccessControl | None = None,
    online_readers: OnlineReaders | None = None,
    workers: int = WORKERS,
    call_timeout_s: float = CALL_TIMEOUT_S,
    workflow_wait_s: float = WORKFLOW_WAIT_S,
    readiness_timeout_s: float = READINESS_TIMEOUT_S,
    body_bytes_max: int = BODY_BYTES_MAX,
) -> RestServer:
    """Serve ``controller`` over Pravega's REST admin API at ``http://host:port/v1``
    (``https`` with ``tls``); ``port`` 0 picks a free one (see ``RestServer.port``). Returns
    once it listens.

    ``online_readers`` answers a reader group's ``onlineReaderIds`` (else []). Controller
    calls run on ``workers`` threads, each awaited at most ``call_timeout_s``; seal,
    update and delete wait at most ``workflow_wait_s`` for their workflow. ``access``:
    authenticate and authorize every request (module docstring). ConfigurationError if
    ``host`` is not a loopback address and neither are both ``tls`` and ``access`` given nor
    ``insecure_ok`` True, or if the address cannot be bound; InvalidArgumentError for a bad
    port or bound.
    """
    host = host.strip("[]") if isinstance(host, str) else host  # "[::1]" is "::1"
    secured = tls is not None and access is not None
    if not is_loopback(host) and not secured and insecure_ok is not True:
        raise ConfigurationError(
            f"refusing to serve the controller's REST API on {host!r} without TLS and "
            "authentication: give both (tls, access), bind to 127.0.0.1, or pass "
            "insecure_ok=True on a trusted network"
        )
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 65536:
        raise InvalidArgumentError(f"port must be an int in [0, 65535], got {port!r}")
    if (
        isinstance(body_bytes_max, bool)
        or not isinstance(body_bytes_max, int)
        or body_bytes_max < 1024
    ):
        raise InvalidArgumentError(f"body_bytes_max must be an int >= 1024, got {body_bytes_max!r}")
    ssl_context = tls.server_context() if tls is not None else None  # files read again
    calls = ControllerCalls(
        controller,
        online_readers=online_readers,
        workers=workers,
        call_timeout_s=call_timeout_s,
        workflow_wait_s=workflow_wait_s,
    )
    app = build_app(
        calls,
        body_bytes_max=body_bytes_max,
        readiness_timeout_s=readiness_timeout_s,
        access=access,
    )
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="pravega-rest-loop", daemon=True)
    thread.start()
    runner = web.AppRunner(app, handle_signals=False)

    async def start() -> int:
        await runner.setup()
        await web.TCPSite(runner, host, port, ssl_context=ssl_context).start()
        return int(runner.addresses[0][1])

    try:
        bound = asyncio.run_coroutine_threadsafe(start(), loop).result(START_TIMEOUT_S)
    except BaseException as e:
        server = RestServer(host, port, loop, thread, runner, calls)
        server.stop()
        if isinstance(e, OSError):
            raise ConfigurationError(
                f"cannot bind the controller's REST API to {host}:{port}: {e}"
            ) from e
        raise
    server = RestServer(host, bound, loop, thread, runner, calls, tls is not None)
    log.info(
        "controller REST API on %s/v1 (%s)",
        server.url,
        "authenticated" if access else "no authentication",
    )
    return server
