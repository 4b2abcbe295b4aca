"""The controller's gRPC service: each RPC mapped onto one pravega-ray controller.

:class:`ControllerServicer` answers the RPCs of :data:`pravega_ray.grpc.schema.RPCS` that
are ``served`` by calling a pravega-ray controller (anything with the methods of
:class:`ControllerCalls`: an ``InProcessCluster.core``, a ``ControllerClient`` over the Ray
actor), and declares the others UNIMPLEMENTED. What each RPC answers, and why, is in
docs/grpc.md; the rules the official client depends on:

* Outcomes the protocol has a status value for are replies, not errors (SCOPE_EXISTS,
  STREAM_NOT_FOUND, ...). Only values the 0.3.x clients know are sent: an unknown value
  decodes as SUCCESS there.
* Every other failure is a gRPC status (:func:`pravega_ray.grpc.convert.grpc_status`); no
  exception escapes a handler (grpcio would answer UNKNOWN, which the client retries for a
  minute): anything unexpected is INTERNAL, logged with its traceback.
* Lists page: a page of at most ``page_size`` names carries a continuation token (the last
  name on it); the page after the last is empty. The system scope ``_system`` is listed
  first, with its internal streams, so the first scope listed always has a stream.
* Seal, delete, update and truncate wait (at most ``workflow_wait_s``) for their
  workflow to finish, as Java's controller does: the client calls the next RPC at once.
* Tags are the stream configuration's (``StreamConfiguration.tags``); an update without
  tags keeps the stream's.

Thread-safe: grpcio runs handlers on a thread pool; the controller is thread-safe.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

import grpc

from pravega_ray.constants import SYSTEM_SCOPE, WORKFLOW_POLL_S, WORKFLOW_WAIT_S
from pravega_ray.contracts.records import SegmentRange, StreamInfo, StreamState, TxnInfo, TxnStatus
from pravega_ray.errors import (
    InvalidArgumentError,
    InvalidNameError,
    LeaseExpiredError,
    NotFoundError,
    ScopeNotEmptyError,
    ScopeNotFoundError,
    StreamNotFoundError,
    StreamNotSealedError,
    TxnFailedError,
    TxnNotFoundError,
)
from pravega_ray.grpc import convert
from pravega_ray.grpc.convert import Refusal, require
from pravega_ray.grpc.schema import PACKAGE, RPCS, SERVICE, message_class
from pravega_ray.invariant import invariant
from pravega_ray.naming import validate_name
from pravega_ray.stream_configuration import StreamConfiguration
from pravega_ray.stream_cut import StreamCut

__all__ = [
    "LIST_PAGE_SIZE",
    "SYSTEM_STREAMS",
    "ControllerCalls",
    "ControllerServicer",
    "UriFor",
]

log = logging.getLogger(__name__)

LIST_PAGE_SIZE = 100
"""Most names one listScopes / listStreamsInScope page carries."""

SYSTEM_STREAMS = ("_abortstream", "_commitstream", "_requeststream")
"""The internal streams every pravega-ray cluster keeps in ``_system`` (the controller's
request, commit and abort streams), listed there as Java lists its own."""

UriFor = Callable[[str], tuple[str, int]]
"""Where a segment is served: qualified segment name -> (IP literal, TCP port)."""


class ControllerCalls(Protocol):
    """The controller calls this service makes; the methods of
    :class:`pravega_ray.contracts.controller_service.ControllerService` of the same names,
    which document them."""

    def create_scope(self, scope: str, request_id: str | None = None) -> bool: ...
    def list_scopes(self) -> list[str]: ...
    def delete_scope(self, scope: str) -> bool: ...
    def create_stream(
        self,
        scope: str,
        stream: str,
        config: StreamConfiguration | None,
        request_id: str | None = None,
    ) -> bool: ...
    def list_streams(self, scope: str) -> list[str]: ...
    def get_stream_info(self, scope: str, stream: str) -> StreamInfo: ...
    def get_successors(
        self, scope: str, stream: str, segment_id: int
    ) -> dict[SegmentRange, list[int]]: ...
    def get_segments_at_time(self, scope: str, stream: str, time_ms: int) -> StreamCut: ...
    def get_epoch_segments(self, scope: str, stream: str, epoch: int) -> list[SegmentRange]: ...
    def get_head_cut(self, scope: str, stream: str) -> StreamCut: ...
    def update_stream(self, scope: str, stream: str, config: StreamConfiguration) -> bool: ...
    def check_update(self, scope: str, stream: str) -> bool: ...
    def truncate_stream(self, scope: str, stream: str, cut: StreamCut) -> bool: ...
    def check_truncate(self, scope: str, stream: str) -> bool: ...
    def seal_stream(self, scope: str, stream: str) -> bool: ...
    def delete_stream(self, scope: str, stream: str) -> bool: ...
    def create_transaction(self, scope: str, stream: str, lease_s: float) -> TxnInfo: ...
    def ping_transaction(
        self, scope: str, stream: str, txn_id: uuid.UUID, lease_s: float
    ) -> int: ...
    def commit_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus: ...
    def abort_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus: ...
    def check_transaction_status(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus: ...


def _status(message: str, name: str) -> Any:
    """A ``<message>{status}`` reply with its Status value ``name``."""
    cls = message_class(message)
    return cls(status=cls.DESCRIPTOR.enum_types_by_name["Status"].values_by_name[name].number)


def _valid(kind: str, name: str) -> bool:
    try:
        validate_name(kind, name)
    except InvalidNameError:
        return False
    return True


def _order(name: str) -> tuple[bool, str]:
    """Listing order: system names (a leading ``_``) first, then by name."""
    return (not name.startswith("_"), name)


def _page(names: list[str], token: str, size: int) -> tuple[list[str], str]:
    """The names after ``token`` (the last name of the previous page; "" the start) in
    listing order, at most ``size``, and the next token: the page's last name, or
    ``token`` for an empty page. A token whose name was deleted since resumes where it
    sorted, so paging never repeats or skips a name that stays."""
    ordered = sorted(names, key=_order)
    start = sum(1 for n in ordered if _order(n) <= _order(token)) if token else 0
    page = ordered[start : start + size]
    return page, (page[-1] if page else token)


class ControllerServicer:
    """The RPC handlers over ``controller`` (module docstring).

    ``uri_for`` answers getURI for any segment name, existing or not (the client asks for
    segments of streams the controller never heard of). ``page_size`` bounds list pages;
    ``workflow_wait_s`` how long seal, delete, update and truncate wait for their workflow
    (then DEADLINE_EXCEEDED; the workflow still finishes).
    """

    def __init__(
        self,
        controller: ControllerCalls,
        uri_for: UriFor,
        *,
        page_size: int = LIST_PAGE_SIZE,
        workflow_wait_s: float = WORKFLOW_WAIT_S,
        poll_s: float = WORKFLOW_POLL_S,
    ) -> None:
        if not (isinstance(page_size, int) and 1 <= page_size <= 10_000):
            raise InvalidArgumentError(f"page_size must be an int in [1, 10000], got {page_size!r}")
        self._controller = controller
        self._uri_for = uri_for
        self._page_size = page_size
        self._workflow_wait_s = workflow_wait_s
        self._poll_s = poll_s

    # --- wiring -------------------------------------------------------------------------------
    def handlers(self) -> dict[str, Callable[[Any], Any]]:
        """Each served RPC's handler (request -> reply), by RPC name."""
        handlers: dict[str, Callable[[Any], Any]] = {
            "createScope": self.create_scope,
            "deleteScope": self.delete_scope,
            "listScopes": self.list_scopes,
            "checkScopeExists": self.check_scope_exists,
            "listStreamsInScope": self.list_streams_in_scope,
            "createStream": self.create_stream,
            "updateStream": self.update_stream,
            "getStreamConfiguration": self.get_stream_configuration,
            "checkStreamExists": self.check_stream_exists,
            "truncateStream": self.truncate_stream,
            "sealStream": self.seal_stream,
            "deleteStream": self.delete_stream,
            "getCurrentSegments": self.get_current_segments,
            "getEpochSegments": self.get_epoch_segments,
            "getSegments": self.get_segments,
            "getSegmentsImmediatelyFollowing": self.get_segments_immediately_following,
            "getURI": self.get_uri,
            "createTransaction": self.create_transaction,
            "commitTransaction": self.commit_transaction,
            "abortTransaction": self.abort_transaction,
            "pingTransaction": self.ping_transaction,
            "checkTransactionState": self.check_transaction_state,
        }
        invariant(
            set(handlers) == {rpc.name for rpc in RPCS if rpc.served},
            "ControllerServicer: handlers and the schema's served RPCs differ",
        )
        return handlers

    def generic_handler(self) -> grpc.GenericRpcHandler:
        """A grpcio handler for the whole service (``server.add_generic_rpc_handlers``)."""
        handlers = self.handlers()
        methods = {}
        for rpc in RPCS:
            call = handlers.get(rpc.name)
            behaviour = _guarded(rpc.name, call) if call else _unimplemented(rpc.name)
            methods[rpc.name] = grpc.unary_unary_rpc_method_handler(
                behaviour,
                request_deserializer=message_class(rpc.request).FromString,
                response_serializer=lambda reply: reply.SerializeToString(),
            )
        return grpc.method_handlers_generic_handler(f"{PACKAGE}.{SERVICE}", methods)

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        """Poll ``done`` until True; TimeoutError after ``workflow_wait_s``."""
        deadline = time.monotonic() + self._workflow_wait_s
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not finish within {self._workflow_wait_s:.0f} s")
            time.sleep(self._poll_s)

    # --- scopes -------------------------------------------------------------------------------
    def create_scope(self, request: Any) -> Any:
        try:
            created = self._controller.create_scope(request.scope)
        except InvalidNameError:
            return _status("CreateScopeStatus", "INVALID_SCOPE_NAME")
        return _status("CreateScopeStatus", "SUCCESS" if created else "SCOPE_EXISTS")

    def delete_scope(self, request: Any) -> Any:
        try:
            deleted = self._controller.delete_scope(request.scope)
        except InvalidNameError:
            deleted = False  # no scope has that name
        except ScopeNotEmptyError:
            return _status("DeleteScopeStatus", "SCOPE_NOT_EMPTY")
        return _status("DeleteScopeStatus", "SUCCESS" if deleted else "SCOPE_NOT_FOUND")

    def list_scopes(self, request: Any) -> Any:
        names = [SYSTEM_SCOPE, *(s for s in self._controller.list_scopes() if s != SYSTEM_SCOPE)]
        page, token = _page(names, request.continuationToken.token, self._page_size)
        reply = message_class("ScopesResponse")(scopes=page)
        reply.continuationToken.token = token
        return reply

    def check_scope_exists(self, request: Any) -> Any:
        exists = request.scope == SYSTEM_SCOPE or request.scope in self._controller.list_scopes()
        return message_class("ExistsResponse")(exists=exists)

    def list_streams_in_scope(self, request: Any) -> Any:
        reply = message_class("StreamsInScopeResponse")()
        scope = request.scope.scope
        try:
            names = (
                list(SYSTEM_STREAMS)
                if scope == SYSTEM_SCOPE
                else self._controller.list_streams(scope)
            )
        except (ScopeNotFoundError, InvalidNameError):
            # No gRPC error: the client ends the list on this status (or on an error, but
            # only after retrying it).
            reply.status = _status("StreamsInScopeResponse", "SCOPE_NOT_FOUND").status
            reply.continuationToken.token = request.continuationToken.token
            return reply
        page, token = _page(names, request.continuationToken.token, self._page_size)
        for name in page:
            reply.streams.append(convert.stream_info_message(scope, name))
        reply.continuationToken.token = token
        return reply

    # --- streams ------------------------------------------------------------------------------
    def create_stream(self, request: Any) -> Any:
        info = require(request, "streamInfo")
        scope, stream = info.scope, info.stream
        config = convert.config_from_message(request, convert.tags_from_message(request.tags))
        if not _valid("scope", scope):
            return _status("CreateStreamStatus", "SCOPE_NOT_FOUND")
        try:
            created = self._controller.create_stream(scope, stream, config)
        except ScopeNotFoundError:
            return _status("CreateStreamStatus", "SCOPE_NOT_FOUND")
        except InvalidNameError:
            return _status("CreateStreamStatus", "INVALID_STREAM_NAME")
        if not created:
            return _status("CreateStreamStatus", "STREAM_EXISTS")
        return _status("CreateStreamStatus", "SUCCESS")

    def _stream_missing(self, message: str, scope: str, stream: str) -> Any | None:
        """The ``message`` status naming why ``scope/stream`` cannot exist (an invalid
        name), else None. SCOPE_NOT_FOUND where ``message`` has that value."""
        values = message_class(message).DESCRIPTOR.enum_types_by_name["Status"].values_by_name
        if not _valid("scope", scope) and "SCOPE_NOT_FOUND" in values:
            return _status(message, "SCOPE_NOT_FOUND")
        if not (_valid("scope", scope) and _valid("stream", stream)):
            return _status(message, "STREAM_NOT_FOUND")
        return None

    def _not_found(self, message: str, error: NotFoundError) -> Any:
        if isinstance(error, ScopeNotFoundError) and message == "UpdateStreamStatus":
            return _status(message, "SCOPE_NOT_FOUND")
        return _status(message, "STREAM_NOT_FOUND")

    def update_stream(self, request: Any) -> Any:
        info = require(request, "streamInfo")
        scope, stream = info.scope, info.stream
        tags = convert.tags_from_message(request.tags) if request.HasField("tags") else None
        if (missing := self._stream_missing("UpdateStreamStatus", scope, stream)) is not None:
            return missing
        try:
            if tags is None:  # an update without tags keeps the stream's
                tags = self._controller.get_stream_info(scope, stream).configuration.tags
            config = convert.config_from_message(request, tags)
            self._controller.update_stream(scope, stream, config)
            self._wait(lambda: self._controller.check_update(scope, stream), "update")
        except (ScopeNotFoundError, StreamNotFoundError) as e:
            return self._not_found("UpdateStreamStatus", e)
        return _status("UpdateStreamStatus", "SUCCESS")

    def get_stream_configuration(self, request: Any) -> Any:
        info = self._controller.get_stream_info(request.scope, request.stream)
        return convert.config_message(info.scope, info.stream, info.configuration)

    def check_stream_exists(self, request: Any) -> Any:
        try:
            self._controller.get_stream_info(request.scope, request.stream)
        except (NotFoundError, InvalidNameError):
            return message_class("ExistsResponse")(exists=False)
        return message_class("ExistsResponse")(exists=True)

    def truncate_stream(self, request: Any) -> Any:
        info = require(request, "streamInfo")
        scope, stream = info.scope, info.stream
        if (missing := self._stream_missing("UpdateStreamStatus", scope, stream)) is not None:
            return missing
        cut = StreamCut(scope, stream, dict(request.cut))
        try:
            self._controller.truncate_stream(scope, stream, cut)
            self._wait(lambda: self._controller.check_truncate(scope, stream), "truncation")
        except (ScopeNotFoundError, StreamNotFoundError) as e:
            return self._not_found("UpdateStreamStatus", e)
        return _status("UpdateStreamStatus", "SUCCESS")

    def seal_stream(self, request: Any) -> Any:
        scope, stream = request.scope, request.stream
        if (missing := self._stream_missing("UpdateStreamStatus", scope, stream)) is not None:
            return missing
        try:
            if not self._controller.seal_stream(scope, stream):
                self._wait(
                    lambda: (
                        self._controller.get_stream_info(scope, stream).state is StreamState.SEALED
                    ),
                    "seal",
                )
        except (ScopeNotFoundError, StreamNotFoundError) as e:
            return self._not_found("UpdateStreamStatus", e)
        return _status("UpdateStreamStatus", "SUCCESS")

    def delete_stream(self, request: Any) -> Any:
        scope, stream = request.scope, request.stream
        if (missing := self._stream_missing("DeleteStreamStatus", scope, stream)) is not None:
            return missing
        try:
            deleted = self._controller.delete_stream(scope, stream)
        except ScopeNotFoundError:
            deleted = False
        except StreamNotSealedError:
            return _status("DeleteStreamStatus", "STREAM_NOT_SEALED")
        if not deleted:
            return _status("DeleteStreamStatus", "STREAM_NOT_FOUND")
        # The workflow drops the stream's record before its entry in the scope's list: the
        # client may list the scope at once (it saw the stream listed after a delete).
        self._wait(
            lambda: not self._exists(scope, stream) and not self._listed(scope, stream), "delete"
        )
        return _status("DeleteStreamStatus", "SUCCESS")

    def _listed(self, scope: str, stream: str) -> bool:
        try:
            return stream in self._controller.list_streams(scope)
        except ScopeNotFoundError:
            return False

    def _exists(self, scope: str, stream: str) -> bool:
        try:
            self._controller.get_stream_info(scope, stream)
        except (ScopeNotFoundError, StreamNotFoundError):
            return False
        return True

    # --- segments -----------------------------------------------------------------------------
    def get_current_segments(self, request: Any) -> Any:
        info = self._controller.get_stream_info(request.scope, request.stream)
        # A sealed stream has no active segments (Java's getActiveSegments): writers read
        # the empty list as "sealed".
        return convert.segment_ranges_message(() if info.sealed else info.segments)

    def get_epoch_segments(self, request: Any) -> Any:
        info = require(request, "streamInfo")
        segments = self._controller.get_epoch_segments(info.scope, info.stream, request.epoch)
        return convert.segment_ranges_message(segments)

    def get_segments(self, request: Any) -> Any:
        info = require(request, "streamInfo")
        scope, stream = info.scope, info.stream
        if request.timestamp <= 0:
            cut = self._controller.get_head_cut(scope, stream)
        else:
            cut = self._controller.get_segments_at_time(scope, stream, request.timestamp)
        reply = message_class("SegmentsAtTime")(delegationToken="")
        for segment_id, offset in sorted(cut.positions.items()):
            location = reply.segments.add(offset=offset)
            location.segmentId.CopyFrom(convert.segment_id_message(scope, stream, segment_id))
        return reply

    def get_segments_immediately_following(self, request: Any) -> Any:
        info = require(request, "streamInfo")
        successors = self._controller.get_successors(info.scope, info.stream, request.segmentId)
        reply = message_class("SuccessorResponse")(delegationToken="")
        for segment in sorted(successors, key=lambda s: s.segment_id):
            entry = reply.segments.add(value=sorted(successors[segment]))
            entry.segment.CopyFrom(convert.segment_range_message(segment))
        return reply

    def get_uri(self, request: Any) -> Any:
        # No existence check, no name check: the client asks for segments the controller
        # never heard of (a reader group's "<rg>_kvtable"), and for transaction segments by
        # their parent's id.
        segment_id = request.segmentId & ((1 << 64) - 1)
        info = request.streamInfo
        name = f"{info.scope}/{info.stream}/{segment_id & 0xFFFFFFFF}.#epoch.{segment_id >> 32}"
        host, port = self._uri_for(name)
        return message_class("NodeUri")(endpoint=host, port=port)

    # --- transactions -------------------------------------------------------------------------
    def create_transaction(self, request: Any) -> Any:
        info = require(request, "streamInfo")
        if request.lease <= 0:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "lease must be > 0 ms")
        txn = self._controller.create_transaction(info.scope, info.stream, request.lease / 1000)
        reply = message_class("CreateTxnResponse")(delegationToken="")
        reply.txnId.CopyFrom(convert.txn_id_message(txn.txn_id))
        for segment in sorted(txn.segments, key=lambda s: s.segment_id):
            reply.activeSegments.append(convert.segment_range_message(segment))
        return reply

    def _txn(self, request: Any) -> tuple[str, str, uuid.UUID]:
        info = require(request, "streamInfo")
        return info.scope, info.stream, convert.txn_uuid(require(request, "txnId"))

    def _txn_status(self, request: Any, call: Callable[[str, str, uuid.UUID], TxnStatus]) -> Any:
        scope, stream, txn_id = self._txn(request)
        try:
            call(scope, stream, txn_id)
        except TxnNotFoundError:
            return _status("TxnStatus", "TRANSACTION_NOT_FOUND")
        except (ScopeNotFoundError, StreamNotFoundError, InvalidNameError):
            return _status("TxnStatus", "STREAM_NOT_FOUND")
        return _status("TxnStatus", "SUCCESS")

    def commit_transaction(self, request: Any) -> Any:
        # COMMITTING is success: the commit completes asynchronously, as in Java.
        return self._txn_status(request, self._controller.commit_transaction)

    def abort_transaction(self, request: Any) -> Any:
        return self._txn_status(request, self._controller.abort_transaction)

    def check_transaction_state(self, request: Any) -> Any:
        scope, stream, txn_id = self._txn(request)
        status = self._controller.check_transaction_status(scope, stream, txn_id)
        return message_class("TxnState")(state=convert.txn_state(status))

    def ping_transaction(self, request: Any) -> Any:
        scope, stream, txn_id = self._txn(request)
        if request.lease <= 0:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "lease must be > 0 ms")
        try:
            self._controller.ping_transaction(scope, stream, txn_id, request.lease / 1000)
        except InvalidArgumentError:
            # The lease is the only argument the controller can refuse here: over its maximum.
            return _status("PingTxnStatus", "LEASE_TOO_LARGE")
        except LeaseExpiredError:
            return _status("PingTxnStatus", "ABORTED")  # the controller aborted it
        except TxnFailedError:
            status = self._controller.check_transaction_status(scope, stream, txn_id)
            committed = status in (TxnStatus.COMMITTING, TxnStatus.COMMITTED)
            return _status("PingTxnStatus", "COMMITTED" if committed else "ABORTED")
        except (NotFoundError, InvalidNameError):
            # Not an RPC error: the client's pinger panics on those.
            return _status("PingTxnStatus", "UNKNOWN")
        return _status("PingTxnStatus", "OK")


def _guarded(rpc: str, call: Callable[[Any], Any]) -> Callable[[Any, grpc.ServicerContext], Any]:
    """``call`` as a grpcio behaviour that never lets an exception escape (module docstring)."""

    def behaviour(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return call(request)
        except Exception as e:  # every failure becomes a status: UNKNOWN would be retried
            code = convert.grpc_status(e)
            if code is None:
                log.exception("gRPC %s: unexpected error", rpc)
                code, details = grpc.StatusCode.INTERNAL, f"internal error: {type(e).__name__}: {e}"
            else:
                details = str(e) or type(e).__name__
                log.info("gRPC %s: %s: %s", rpc, code.name, details)
        context.abort(code, details)  # raises; outside the try so it is not caught above

    return behaviour


def _unimplemented(rpc: str) -> Callable[[Any, grpc.ServicerContext], Any]:
    def behaviour(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{rpc} is not implemented by pravega-ray")

    return behaviour
