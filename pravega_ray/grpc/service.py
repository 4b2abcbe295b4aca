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
* With an :class:`~pravega_ray.auth.AccessControl` (docs/security.md) every RPC, served or
  not, first authenticates the ``authorization`` metadata (``Basic base64(user:password)``;
  UNAUTHENTICATED otherwise) and then checks the permission :data:`RPC_ACCESS` names on its
  scope or stream (PERMISSION_DENIED). listScopes and listStreamsInScope list only what the
  user may read, and getDelegationToken hands out a token for the wire protocol.

Thread-safe: grpcio runs handlers on a thread pool; the controller is thread-safe.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

import grpc

from pravega_ray.auth import (
    ROOT_RESOURCE,
    AccessControl,
    Permission,
    reader_group_of_state_stream,
    reader_group_resource,
    scope_resource,
    stream_resource,
)
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
    "RPC_ACCESS",
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
"""Where a segment is served: qualified segment name -> (host, TCP port); an IP literal
unless TLS needs a name (``EndpointConfig.client_host``)."""

_READ, _READ_UPDATE = Permission.READ, Permission.READ_UPDATE
RPC_ACCESS: dict[str, tuple[str, Permission]] = {
    "createScope": ("root", _READ_UPDATE),
    "deleteScope": ("root", _READ_UPDATE),
    "listScopes": ("listing", _READ),
    "checkScopeExists": ("scope", _READ),
    "listStreamsInScope": ("scope", _READ),
    "listStreamsInScopeForTag": ("scope", _READ),
    "createStream": ("scope", _READ_UPDATE),
    "updateStream": ("stream", _READ_UPDATE),
    "getStreamConfiguration": ("stream", _READ),
    "checkStreamExists": ("stream", _READ),
    "truncateStream": ("stream", _READ_UPDATE),
    "sealStream": ("stream", _READ_UPDATE),
    "deleteStream": ("stream", _READ_UPDATE),
    "getCurrentSegments": ("stream", _READ),
    "getEpochSegments": ("stream", _READ),
    "getSegments": ("stream", _READ),
    "getSegmentsImmediatelyFollowing": ("stream", _READ),
    "scale": ("stream", _READ_UPDATE),
    "checkScale": ("stream", _READ),
    "getURI": ("segments", _READ),
    "createTransaction": ("stream", _READ_UPDATE),
    "commitTransaction": ("stream", _READ_UPDATE),
    "abortTransaction": ("stream", _READ_UPDATE),
    "pingTransaction": ("stream", _READ_UPDATE),
    "checkTransactionState": ("stream", _READ),
    "getDelegationToken": ("segments", _READ),
}
"""What each RPC needs with authentication on (Pravega's ``ControllerServiceImpl``): the
permission on ``prn::/`` ("root"), on its scope ("scope") or on its stream ("stream");
"segments" is the stream's, or for a reader group's state stream (``<group>_kvtable``) the
group's as well (the official client keeps a group's state there); "listing" lists only
the scopes the user may READ. listStreamsInScope also lists only readable streams."""


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
    (then DEADLINE_EXCEEDED; the workflow still finishes). ``access``: authenticate and
    authorize every RPC (module docstring); None serves everyone.
    """

    def __init__(
        self,
        controller: ControllerCalls,
        uri_for: UriFor,
        *,
        page_size: int = LIST_PAGE_SIZE,
        workflow_wait_s: float = WORKFLOW_WAIT_S,
        poll_s: float = WORKFLOW_POLL_S,
        access: AccessControl | None = None,
    ) -> None:
        if not (isinstance(page_size, int) and 1 <= page_size <= 10_000):
            raise InvalidArgumentError(f"page_size must be an int in [1, 10000], got {page_size!r}")
        invariant(
            set(RPC_ACCESS) == {rpc.name for rpc in RPCS},
            "ControllerServicer: RPC_ACCESS and the schema's RPCs differ",
        )
        self._access = access
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
            if self._access is not None:
                behaviour = _guarded(rpc.name, self._secured(rpc.name, self._access, call))
            elif call is not None:
                behaviour = _guarded(rpc.name, _plain(call))
            else:
                behaviour = _unimplemented(rpc.name)
            methods[rpc.name] = grpc.unary_unary_rpc_method_handler(
                behaviour,
                request_deserializer=message_class(rpc.request).FromString,
                response_serializer=lambda reply: reply.SerializeToString(),
            )
        return grpc.method_handlers_generic_handler(f"{PACKAGE}.{SERVICE}", methods)

    # --- access control -----------------------------------------------------------------------
    def _secured(
        self, rpc: str, access: AccessControl, call: Callable[[Any], Any] | None
    ) -> Callable[[Any, grpc.ServicerContext], Any]:
        """``call`` behind authentication and :data:`RPC_ACCESS`'s check; the listings
        filtered to what the user may read; getDelegationToken served."""
        level, needed = RPC_ACCESS[rpc]

        def secured(request: Any, context: grpc.ServicerContext) -> Any:
            user = _user(access, context)
            _authorize(access, user, rpc, level, needed, request)
            if rpc == "listScopes":
                return self.list_scopes(
                    request, lambda s: access.allows(user, scope_resource(s), _READ)
                )
            if rpc == "listStreamsInScope":
                scope = request.scope.scope
                return self.list_streams_in_scope(
                    request, lambda s: access.allows(user, stream_resource(scope, s), _READ)
                )
            if rpc == "getDelegationToken":
                return self.get_delegation_token(request, access, user)
            if call is None:
                raise Refusal(
                    grpc.StatusCode.UNIMPLEMENTED, f"{rpc} is not implemented by pravega-ray"
                )
            return call(request)

        return secured

    def get_delegation_token(self, request: Any, access: AccessControl, user: str) -> Any:
        """A delegation token for ``request``'s stream: for the stream's resource (or, for a
        reader group's state stream, the group's) with what ``user`` may do there."""
        scope = validate_name("scope", request.scope, allow_system=True)
        stream = validate_name("stream", request.stream, allow_system=True)
        resource, granted = access.stream_access(user, scope, stream)
        if granted < _READ:
            raise Refusal(
                grpc.StatusCode.PERMISSION_DENIED,
                f"user {user!r} may not read {resource}: no delegation token",
            )
        token = access.tokens.issue(user, resource, granted)
        log.info("gRPC getDelegationToken: %s for %s on %s", granted.name, user, resource)
        return message_class("DelegationToken")(delegationToken=token)

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

    def list_scopes(self, request: Any, visible: Callable[[str], bool] | None = None) -> Any:
        """A page of scope names (``visible``: only those it accepts)."""
        names = [SYSTEM_SCOPE, *(s for s in self._controller.list_scopes() if s != SYSTEM_SCOPE)]
        if visible is not None:
            names = [name for name in names if visible(name)]
        page, token = _page(names, request.continuationToken.token, self._page_size)
        reply = message_class("ScopesResponse")(scopes=page)
        reply.continuationToken.token = token
        return reply

    def check_scope_exists(self, request: Any) -> Any:
        exists = request.scope == SYSTEM_SCOPE or request.scope in self._controller.list_scopes()
        return message_class("ExistsResponse")(exists=exists)

    def list_streams_in_scope(
        self, request: Any, visible: Callable[[str], bool] | None = None
    ) -> Any:
        """A page of the scope's stream names (``visible``: only those it accepts)."""
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
        if visible is not None:
            names = [name for name in names if visible(name)]
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


_CREDENTIALS_NEEDED = (
    "authentication failed: every call needs 'authorization' metadata 'Basic "
    "base64(<user>:<password>)' naming a user of the server's password file and its password"
)


def _user(access: AccessControl, context: grpc.ServicerContext) -> str:
    """The user the call's ``authorization`` metadata authenticates; Refusal
    UNAUTHENTICATED otherwise."""
    header = next(
        (str(value) for key, value in context.invocation_metadata() if key == "authorization"),
        None,
    )
    user = access.authenticate(header)
    if user is None:
        raise Refusal(grpc.StatusCode.UNAUTHENTICATED, _CREDENTIALS_NEEDED)
    return user


def _names(request: Any) -> tuple[str, str]:
    """``(scope, stream)`` a request names ("" for what it does not name)."""
    fields = request.DESCRIPTOR.fields_by_name
    if "streamInfo" in fields:
        return request.streamInfo.scope, request.streamInfo.stream
    if "stream" in fields:
        return request.scope, request.stream
    if "scope" in fields:
        scope = request.scope
        return (scope if isinstance(scope, str) else scope.scope), ""
    return "", ""


def _authorize(
    access: AccessControl, user: str, rpc: str, level: str, needed: Permission, request: Any
) -> None:
    """Refusal PERMISSION_DENIED unless ``user`` has ``needed`` where ``level`` says
    (:data:`RPC_ACCESS`)."""
    scope, stream = _names(request)
    if level == "listing":
        return
    if level == "root":
        resources = [ROOT_RESOURCE]
    elif level == "scope":
        resources = [scope_resource(scope)]
    else:
        resources = [stream_resource(scope, stream)]
        group = reader_group_of_state_stream(stream)
        if level == "segments" and group is not None:
            resources.append(reader_group_resource(scope, group))
    if not any(access.allows(user, resource, needed) for resource in resources):
        raise Refusal(
            grpc.StatusCode.PERMISSION_DENIED,
            f"user {user!r} may not call {rpc} on {resources[0]}: it needs {needed.name}",
        )


def _plain(call: Callable[[Any], Any]) -> Callable[[Any, grpc.ServicerContext], Any]:
    return lambda request, context: call(request)


def _guarded(
    rpc: str, call: Callable[[Any, grpc.ServicerContext], Any]
) -> Callable[[Any, grpc.ServicerContext], Any]:
    """``call`` as a grpcio behaviour that never lets an exception escape (module docstring)."""

    def behaviour(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return call(request, context)
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
