"""Serving the controller's REST admin API: :func:`serve_rest` starts an aiohttp server on
its own event loop in a daemon thread (so sync code starts it: a driver, an actor's
constructor, a test); the returned :class:`RestServer` stops it.

Safe by default (issue 25): the server speaks plain HTTP with no authentication, so it
binds to loopback addresses only unless the caller passes ``insecure_ok=True``
(``pravega_ray.endpoints.is_loopback`` decides, as for the gRPC API).

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
from aiohttp.typedefs import Handler

from pravega_ray.constants import WORKFLOW_WAIT_S
from pravega_ray.endpoints import is_loopback
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
from pravega_ray.rest.resources import StreamMetadataResource

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


def build_app(
    calls: ControllerCalls,
    *,
    body_bytes_max: int = BODY_BYTES_MAX,
    readiness_timeout_s: float = READINESS_TIMEOUT_S,
) -> web.Application:
    """The aiohttp application of the API over ``calls`` (which it does not close)."""
    app = web.Application(client_max_size=body_bytes_max, middlewares=[_errors])
    app.add_routes(StreamMetadataResource(calls).routes())
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
    ) -> None:
        self.host = host
        self.port = port
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
        """``http://host:port`` (brackets around an IPv6 literal)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

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
    online_readers: OnlineReaders | None = None,
    workers: int = WORKERS,
    call_timeout_s: float = CALL_TIMEOUT_S,
    workflow_wait_s: float = WORKFLOW_WAIT_S,
    readiness_timeout_s: float = READINESS_TIMEOUT_S,
    body_bytes_max: int = BODY_BYTES_MAX,
) -> RestServer:
    """Serve ``controller`` over Pravega's REST admin API at ``http://host:port/v1``;
    ``port`` 0 picks a free one (see ``RestServer.port``). Returns once it listens.

    ``online_readers`` answers a reader group's ``onlineReaderIds`` (else []). Controller
    calls run on ``workers`` threads, each awaited at most ``call_timeout_s``; seal,
    update and delete wait at most ``workflow_wait_s`` for their workflow.
    ConfigurationError if ``host`` is not a loopback address and ``insecure_ok`` is not
    True (nothing is authenticated yet), or if the address cannot be bound;
    InvalidArgumentError for a bad port or bound.
    """
    host = host.strip("[]") if isinstance(host, str) else host  # "[::1]" is "::1"
    if not is_loopback(host) and insecure_ok is not True:
        raise ConfigurationError(
            f"refusing to serve the controller's REST API on {host!r}: it has no TLS or "
            "authentication yet; bind to 127.0.0.1, or pass insecure_ok=True on a trusted network"
        )
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 65536:
        raise InvalidArgumentError(f"port must be an int in [0, 65535], got {port!r}")
    if (
        isinstance(body_bytes_max, bool)
        or not isinstance(body_bytes_max, int)
        or body_bytes_max < 1024
    ):
        raise InvalidArgumentError(f"body_bytes_max must be an int >= 1024, got {body_bytes_max!r}")
    calls = ControllerCalls(
        controller,
        online_readers=online_readers,
        workers=workers,
        call_timeout_s=call_timeout_s,
        workflow_wait_s=workflow_wait_s,
    )
    app = build_app(calls, body_bytes_max=body_bytes_max, readiness_timeout_s=readiness_timeout_s)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="pravega-rest-loop", daemon=True)
    thread.start()
    runner = web.AppRunner(app, handle_signals=False)

    async def start() -> int:
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
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
    log.info("controller REST API on http://%s:%d/v1", host, bound)
    return RestServer(host, bound, loop, thread, runner, calls)
