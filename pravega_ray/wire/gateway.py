"""The segment store's TCP wire protocol served from one segment container (WIRE.md 3).

:class:`WireGateway` is an asyncio TCP server that lets Pravega's own clients (the official
Python client ``pravega`` 0.3.8) use one container: one listener per container, answering
WRONG_HOST for a segment the container does not own. It depends only on the service
Protocol (``contracts/segment_store_service.py``) and the codec of this package.

A connection, as two tasks::

    socket --> receive: FrameReader(REQUESTS) --> queue (pending_frames_max) --> process
    socket <------------------------------ one reply per request, in order <----'

* ``receive`` reads bytes, cuts them into commands and queues them; a full queue stops it
  reading, so a client that sends faster than it is served is held back by TCP.
* ``process`` answers the commands one after another, in order. That is enough for the
  0.3.x client (one outstanding request per pooled connection) and keeps an append
  connection's blocks in order however many the client sends before an ack (WIRE.md 3.2).
* When the client closes the connection, ``receive`` ends and cancels ``process``: a
  long-poll read waiting there is abandoned and leaves nothing behind. A failed write ends
  the connection quietly.

Errors: a frame that cannot be decoded is answered ERROR_MESSAGE(61) when its request id was
read, OPERATION_UNSUPPORTED(57) for a Pravega request this server does not serve, and
dropped otherwise; a frame whose length is bad (``WireProtocolError.fatal``) closes the
connection. A handler's typed error becomes Pravega's reply (:func:`error_reply`); any other
exception is logged and closes the connection, as Pravega's segment store does ("closing
connection should reinitialize things"): the client reconnects and retries, where an
ERROR_MESSAGE would make the official reader drop the segment for good (WIRE.md 3.12; found
by the chaos run, when an S3 error reached a read untyped). Nothing a client sends stops the
server.

Writers: each connection remembers, per writer id, the segment it set up and the writer's
last event number, so a block is appended conditionally on the number before it (the
container's ``append``) and a block whose last number is not above it is a duplicate, acked
without being written (WIRE.md 3.5).

Security (docs/security.md): with ``tls`` the listener speaks TLS only. With ``tokens``
every request that carries a ``delegation_token`` is answered AUTH_TOKEN_CHECK_FAILED(60)
unless the token is one the controller signed, unexpired, for the segment's stream and
granting what the request needs (READ to read, READ_UPDATE to change anything;
``pravega_ray.auth.segment_requirements``): code 1 (expired: the client fetches a new token
and retries), code 0 otherwise. Appends carry no token: their SETUP_APPEND was checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pravega_ray.auth import DelegationTokens, TokenCheck, TokenStatus, segment_requirements
from pravega_ray.constants import READ_BYTES_MAX
from pravega_ray.contracts.segment_store_service import SegmentStoreService
from pravega_ray.errors import (
    BadKeyVersionError,
    FencedError,
    InvalidArgumentError,
    InvalidNameError,
    NoSuchKeyError,
    PravegaError,
    RetriableError,
    SegmentExistsError,
    SegmentNotFoundError,
    SegmentSealedError,
    SegmentTruncatedError,
    WireProtocolError,
)
from pravega_ray.wire import gateway_segments as segments
from pravega_ray.wire import gateway_tables as tables
from pravega_ray.wire.frames import UNSUPPORTED_REQUESTS, FrameReader
from pravega_ray.wire.replies import (
    AUTH_TOKEN_CHECK_FAILED,
    AUTH_TOKEN_EXPIRED,
    ERROR_CODE_ILLEGAL_ARGUMENT,
    ERROR_CODE_UNSPECIFIED,
    AuthTokenCheckFailed,
    ErrorMessage,
    NoSuchSegment,
    OperationUnsupported,
    SegmentAlreadyExists,
    SegmentIsSealed,
    SegmentIsTruncated,
    TableKeyBadVersion,
    WrongHost,
)
from pravega_ray.wire.requests import (
    OLDEST_COMPATIBLE_VERSION,
    WIRE_VERSION,
    AppendBlockEnd,
    ConditionalBlockEnd,
    CreateTableSegment,
    CreateTransientSegment,
    DeleteTableSegment,
    GetSegmentAttribute,
    GetStreamSegmentInfo,
    Hello,
    KeepAlive,
    MergeSegments,
    ReadSegment,
    ReadTable,
    ReadTableEntries,
    ReadTableEntriesDelta,
    ReadTableKeys,
    RemoveTableKeys,
    SealSegment,
    SetupAppend,
    TruncateSegment,
    UpdateSegmentAttribute,
    UpdateTableEntries,
)
from pravega_ray.wire.wire_command import PAYLOAD_BYTES_MAX, REQUESTS, Reply, WireCommand

__all__ = ["GatewayConfig", "WireGateway", "error_reply"]

log = logging.getLogger(__name__)

_RECEIVE_BYTES = 64 * 1024
_NO_OFFSET = -1
_READ_REQUESTS = frozenset(
    {
        ReadSegment.TYPE,
        GetStreamSegmentInfo.TYPE,
        GetSegmentAttribute.TYPE,
        ReadTable.TYPE,
        ReadTableKeys.TYPE,
        ReadTableEntries.TYPE,
        ReadTableEntriesDelta.TYPE,
    }
)
"""Requests a READ token allows; every other one carrying a token needs READ_UPDATE."""
_TABLE_REQUESTS = frozenset(
    {
        CreateTableSegment.TYPE,
        DeleteTableSegment.TYPE,
        UpdateTableEntries.TYPE,
        RemoveTableKeys.TYPE,
        ReadTable.TYPE,
        ReadTableKeys.TYPE,
        ReadTableEntries.TYPE,
        ReadTableEntriesDelta.TYPE,
    }
)
"""Requests on table segments: on a reader group's state, a token for the group will do."""


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """How a :class:`WireGateway` listens and the bounds it keeps; validated when built.

    * ``host``, ``port``: where to listen (port 0: any free port, see ``WireGateway.start``).
    * ``read_wait_s``: how long a read at the tail waits for data before its empty reply;
      below the client's 30 s request timeout (WIRE.md 3.6).
    * ``tail_linger_s``: after a read waiting at the tail is woken, how long it waits for
      more before replying, so events appended together arrive together.
    * ``read_reply_bytes_max``: the most data in one SEGMENT_READ (at most 8 MiB, so a reply
      stays under the 16 MiB frame limit).
    * ``table_reply_bytes_max``: about the most entry bytes in one table read reply.
    * ``pending_frames_max``: requests a connection queues before it stops reading.
    * ``writers_per_connection_max``: writers one connection may set up.
    * ``connections_max``: open connections; one more is closed at once.
    * ``tls_handshake_timeout_s``: with TLS, how long a new connection has to complete its
      handshake before it is closed.
    """

    host: str = "127.0.0.1"
    port: int = 0
    read_wait_s: float = 20.0
    tail_linger_s: float = 0.05
    read_reply_bytes_max: int = 2 * 1024 * 1024
    table_reply_bytes_max: int = 4 * 1024 * 1024
    pending_frames_max: int = 16
    writers_per_connection_max: int = 1024
    connections_max: int = 1024
    tls_handshake_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise InvalidArgumentError(f"port {self.port} is not a TCP port")
        if not 0 < self.read_wait_s < 30:
            raise InvalidArgumentError("read_wait_s must be in (0, 30): the client waits 30 s")
        if not 0 <= self.tail_linger_s <= 1:
            raise InvalidArgumentError("tail_linger_s must be in [0, 1]")
        if not 1 <= self.read_reply_bytes_max <= min(READ_BYTES_MAX, 8 * 1024 * 1024):
            raise InvalidArgumentError("read_reply_bytes_max must be in [1, 8 MiB]")
        if not 1 <= self.table_reply_bytes_max <= PAYLOAD_BYTES_MAX // 2:
            raise InvalidArgumentError("table_reply_bytes_max must be in [1, 8 MiB]")
        if not 0 < self.tls_handshake_timeout_s <= 60:
            raise InvalidArgumentError("tls_handshake_timeout_s must be in (0, 60]")
        for name in ("pending_frames_max", "writers_per_connection_max", "connections_max"):
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"{name} must be at least 1")


def _segment_of(command: WireCommand) -> str:
    """The segment a request names ("" if none)."""
    for name in ("segment", "segment_name", "target"):
        value = getattr(command, name, None)
        if isinstance(value, str):
            return value
    return ""


def error_reply(command: WireCommand, error: BaseException) -> Reply:
    """Pravega's reply to ``command`` when serving it raised ``error`` (WIRE.md 3.12).

    Segment missing -> NO_SUCH_SEGMENT(53); sealed -> SEGMENT_IS_SEALED(51); truncated ->
    SEGMENT_IS_TRUNCATED(56); exists -> SEGMENT_ALREADY_EXISTS(52); a table key's version
    or absence -> TABLE_KEY_BAD_VERSION(82); a container not ready (restarting, moved,
    fenced by a newer owner, its Tier-2 failing for now: outcome unknown) -> WRONG_HOST(50),
    which makes the client find the segment again and retry; bad arguments ->
    ERROR_MESSAGE(61) code 0; any other typed error (damaged data, an illegal state) ->
    ERROR_MESSAGE code -1. (An untyped exception closes the connection instead: the module
    docstring.)
    """
    request_id: int = getattr(command, "request_id", 0)
    segment = _segment_of(command)
    offset = command.offset if isinstance(command, ReadSegment) else _NO_OFFSET
    if isinstance(error, SegmentNotFoundError):
        return NoSuchSegment(request_id=request_id, segment=segment, offset=offset)
    if isinstance(error, SegmentSealedError):
        return SegmentIsSealed(request_id=request_id, segment=segment, offset=offset)
    if isinstance(error, SegmentTruncatedError):
        start = getattr(error, "start_offset", _NO_OFFSET)
        return SegmentIsTruncated(
            request_id=request_id, segment=segment, start_offset=start, offset=offset
        )
    if isinstance(error, SegmentExistsError):
        return SegmentAlreadyExists(request_id=request_id, segment=segment)
    if isinstance(error, BadKeyVersionError | NoSuchKeyError):
        return TableKeyBadVersion(request_id=request_id, segment=segment)
    if isinstance(error, RetriableError | FencedError):
        return WrongHost(request_id=request_id, segment=segment, correct_host="")
    code = ERROR_CODE_ILLEGAL_ARGUMENT
    if not isinstance(error, InvalidArgumentError):
        code = ERROR_CODE_UNSPECIFIED
    message = error.message if isinstance(error, PravegaError) else repr(error)
    return ErrorMessage(
        request_id=request_id, segment=segment, message=message[:1000], error_code=code
    )


class WireGateway:
    """Serves Pravega's wire protocol on TCP from one container (see the module docstring).

    ``owns(segment)`` says whether ``service`` owns a segment; a request for one it does not
    own is answered WRONG_HOST(50) without reaching the service. ``tls``: a server-side SSL
    context (``EndpointConfig.tls_files().server_context()``): TLS only. ``tokens``: check
    every request's delegation token (module docstring). Every method runs on the event
    loop the service runs on.
    """

    def __init__(
        self,
        service: SegmentStoreService,
        *,
        owns: Callable[[str], bool] = lambda segment: True,
        config: GatewayConfig | None = None,
        tls: ssl.SSLContext | None = None,
        tokens: DelegationTokens | None = None,
    ) -> None:
        self.service = service
        self.owns = owns
        self.config = config or GatewayConfig()
        self.tls = tls
        self.tokens = tokens
        self._server: asyncio.Server | None = None
        # Each connection's task, and the two tasks that serve it (stop() cancels those).
        self._connections: dict[asyncio.Task[Any], tuple[asyncio.Future[Any], ...]] = {}
        self._port = 0

    @property
    def port(self) -> int:
        """The port listened on (0 before :meth:`start`)."""
        return self._port

    @property
    def connection_count(self) -> int:
        """Connections open now."""
        return len(self._connections)

    async def start(self) -> int:
        """Listen; returns the port (the one chosen when the config's port is 0).

        Raises OSError if the address cannot be bound."""
        if self._server is not None:
            raise InvalidArgumentError("the gateway is started already")
        self._server = await asyncio.start_server(
            self._serve,
            self.config.host,
            self.config.port,
            reuse_address=True,
            ssl=self.tls,
            ssl_handshake_timeout=self.config.tls_handshake_timeout_s if self.tls else None,
        )
        self._port = self._server.sockets[0].getsockname()[1]
        log.info(
            "wire gateway listening on %s:%d (%s, %s)",
            self.config.host,
            self._port,
            "TLS" if self.tls else "plaintext",
            "delegation tokens checked" if self.tokens else "no authentication",
        )
        return self._port

    async def stop(self) -> None:
        """Stop listening and close every connection (pending requests are abandoned)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        # The connection tasks themselves are not cancelled: each ends once its parts are,
        # and asyncio would report a cancelled connection task as an error.
        for parts in self._connections.values():
            for part in parts:
                part.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # a callback of start_server always runs in a task
        if len(self._connections) >= self.config.connections_max:
            log.warning("wire gateway: %d connections open, refusing one", len(self._connections))
            writer.close()
            return
        connection = _Connection(self, writer)
        queue: asyncio.Queue[WireCommand | WireProtocolError] = asyncio.Queue(
            self.config.pending_frames_max
        )
        receive = asyncio.ensure_future(_receive(reader, queue))
        process = asyncio.ensure_future(connection.process(queue))
        self._connections[task] = (receive, process)
        try:
            await asyncio.wait((receive, process), return_when=asyncio.FIRST_COMPLETED)
            ended = receive.done() and not receive.cancelled() and receive.exception() is None
            if ended and receive.result():  # a fatal frame: answer what came before, then close
                await asyncio.wait((process,))
        finally:
            for part in (receive, process):
                part.cancel()
            await asyncio.gather(receive, process, return_exceptions=True)
            for part in (receive, process):
                if not part.cancelled() and part.exception() is not None:
                    log.error("wire gateway connection failed", exc_info=part.exception())
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()
            del self._connections[task]


async def _receive(
    reader: asyncio.StreamReader, queue: asyncio.Queue[WireCommand | WireProtocolError]
) -> bool:
    """Queue the connection's commands (and its decoding errors, in place) until it closes
    (False) or a fatal error is queued (True)."""
    frames = FrameReader(REQUESTS)
    while True:
        try:
            data = await reader.read(_RECEIVE_BYTES)
        except (ConnectionError, OSError):
            return False
        if not data:
            return False
        frames.feed(data)
        while True:
            try:
                command = frames.next_command()
            except WireProtocolError as error:
                await queue.put(error)
                if error.fatal:
                    return True
                continue
            if command is None:
                break
            await queue.put(command)


Handler = Callable[[Any], Awaitable[Reply | None]]


class _Connection:
    """One client connection's state and its command handlers."""

    def __init__(self, gateway: WireGateway, writer: asyncio.StreamWriter) -> None:
        self.gateway = gateway
        self.service = gateway.service
        self.config = gateway.config
        self.writer = writer
        self.writers = segments.Writers(self.config.writers_per_connection_max)
        self.closing = False
        service, writers, table_bytes = (
            self.service,
            self.writers,
            self.config.table_reply_bytes_max,
        )
        config = self.config
        self.handlers: dict[int, Handler] = {
            SetupAppend.TYPE: lambda c: segments.setup_append(service, writers, c),
            AppendBlockEnd.TYPE: lambda c: segments.append_block_end(service, writers, c),
            ConditionalBlockEnd.TYPE: lambda c: segments.conditional_block_end(service, writers, c),
            ReadSegment.TYPE: lambda c: segments.read_segment(service, config, c),
            GetStreamSegmentInfo.TYPE: lambda c: segments.get_stream_segment_info(service, c),
            SealSegment.TYPE: lambda c: segments.seal_segment(service, c),
            GetSegmentAttribute.TYPE: lambda c: segments.get_segment_attribute(service, c),
            UpdateSegmentAttribute.TYPE: lambda c: segments.update_segment_attribute(service, c),
            TruncateSegment.TYPE: lambda c: segments.truncate_segment(service, c),
            CreateTransientSegment.TYPE: lambda c: segments.create_transient_segment(service, c),
            MergeSegments.TYPE: lambda c: segments.merge_segments(service, c),
            CreateTableSegment.TYPE: lambda c: tables.create_table_segment(service, c),
            DeleteTableSegment.TYPE: lambda c: tables.delete_table_segment(service, c),
            UpdateTableEntries.TYPE: lambda c: tables.update_table_entries(service, c),
            RemoveTableKeys.TYPE: lambda c: tables.remove_table_keys(service, c),
            ReadTable.TYPE: lambda c: tables.read_table(service, c),
            ReadTableKeys.TYPE: lambda c: tables.read_table_keys(service, c, table_bytes),
            ReadTableEntries.TYPE: lambda c: tables.read_table_entries(service, c, table_bytes),
            ReadTableEntriesDelta.TYPE: lambda c: tables.read_table_entries_delta(
                service, c, table_bytes
            ),
        }

    async def process(self, queue: asyncio.Queue[WireCommand | WireProtocolError]) -> None:
        """Answer queued commands in order until the connection must close."""
        while not self.closing:
            item = await queue.get()
            if isinstance(item, WireProtocolError):
                reply = self._protocol_error_reply(item)
                frame = None if reply is None else reply.encode()
            else:
                frame = self._encode(item, await self._answer(item))
            if frame is not None and not await self._send(frame):
                return

    @staticmethod
    def _encode(command: WireCommand, reply: Reply | None) -> bytes | None:
        """``reply``'s frame; a reply that cannot be encoded (too large, a value out of
        range) is answered as the error it is."""
        if reply is None:
            return None
        try:
            return reply.encode()
        except InvalidArgumentError as error:
            log.error("wire gateway: reply to %s cannot be encoded: %s", command.NAME, error)
            return error_reply(command, error).encode()

    def _protocol_error_reply(self, error: WireProtocolError) -> Reply | None:
        log.debug("wire gateway: bad frame: %s", error.message)
        if error.fatal:
            self.closing = True
            return None
        if error.request_id is None:
            return None  # nothing to answer: the frame is dropped
        name = UNSUPPORTED_REQUESTS.get(error.type_code) if error.type_code is not None else None
        if name is not None:
            return OperationUnsupported(request_id=error.request_id, operation_name=name)
        return ErrorMessage(
            request_id=error.request_id,
            segment="",
            message=error.message[:1000],
            error_code=ERROR_CODE_ILLEGAL_ARGUMENT,
        )

    async def _answer(self, command: WireCommand) -> Reply | None:
        """The reply to one command (None: no reply)."""
        if isinstance(command, Hello):
            # Exactly one HELLO back; a client we cannot serve gets it and the connection ends.
            if command.high_version < OLDEST_COMPATIBLE_VERSION or (
                command.low_version > WIRE_VERSION
            ):
                self.closing = True
            return Hello(high_version=WIRE_VERSION, low_version=OLDEST_COMPATIBLE_VERSION)
        if isinstance(command, KeepAlive):
            return KeepAlive()
        request_id: int = getattr(command, "request_id", 0)
        handler = self.handlers.get(command.TYPE)
        if handler is None:  # a request the codec knows and this gateway does not serve
            return OperationUnsupported(request_id=request_id, operation_name=command.NAME)
        names = [_segment_of(command)]
        if isinstance(command, MergeSegments):
            names.append(command.source)
        refusal = self._token_refusal(command, names)
        if refusal is not None:
            return refusal
        try:
            for name in names:
                # owns() may raise InvalidNameError (a name that is no segment's): the reply
                # is then that error's, as for any other bad argument
                if name and not self.gateway.owns(name):
                    return WrongHost(request_id=request_id, segment=name, correct_host="")
            return await handler(command)
        except PravegaError as error:
            log.debug("wire gateway: %s failed: %r", command.NAME, error)
            return error_reply(command, error)
        except Exception:
            # Pravega's rule for an unknown failure: close the connection, so the client
            # reconnects and retries (an ERROR_MESSAGE ends a reader's segment for good).
            log.exception("wire gateway: %s failed unexpectedly; closing", command.NAME)
            self.closing = True
            return None

    def _token_refusal(self, command: WireCommand, names: list[str]) -> Reply | None:
        """AUTH_TOKEN_CHECK_FAILED unless the request's token allows it on every segment it
        names (module docstring); None when it does, or when tokens are not checked."""
        tokens = self.gateway.tokens
        token = getattr(command, "delegation_token", None)
        if tokens is None or token is None:
            return None
        mutation = command.TYPE not in _READ_REQUESTS
        table = command.TYPE in _TABLE_REQUESTS
        for name in names:
            try:
                requirements = segment_requirements(name, mutation=mutation, table=table)
            except InvalidNameError:
                check = TokenCheck(TokenStatus.INVALID, reason=f"{name!r:.300} is no stream's")
            else:
                check = tokens.check(token, requirements)
            if not check.ok:
                log.info(
                    "wire gateway: %s on %s refused for %s: %s",
                    command.NAME,
                    name[:300],
                    check.user or "an unknown user",
                    check.reason,
                )
                expired = check.status is TokenStatus.EXPIRED
                return AuthTokenCheckFailed(
                    request_id=getattr(command, "request_id", 0),
                    server_stack_trace=check.reason,
                    error_code=AUTH_TOKEN_EXPIRED if expired else AUTH_TOKEN_CHECK_FAILED,
                )
        return None

    async def _send(self, frame: bytes) -> bool:
        """Write one reply frame; False when the connection is gone (nothing raised)."""
        if self.writer.is_closing():
            return False
        try:
            self.writer.write(frame)
            await self.writer.drain()
        except (ConnectionError, OSError) as error:
            log.debug("wire gateway: a reply was not sent: %r", error)
            return False
        return True
