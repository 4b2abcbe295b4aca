"""The controller's gRPC schema, declared once in Python: messages, enums and the service.

Pravega's clients find streams through the controller's gRPC API (``ControllerService`` in
proto3 package ``io.pravega.controller.stream.api.grpc.v1``; docs/grpc.md). This module
declares the project's own definition of that API from a compact table (:data:`MESSAGES`,
:data:`RPCS`) with the names and field numbers the clients use, and derives from the one table:

* a ``FileDescriptorProto`` (:func:`file_descriptor`), from which
  :func:`message_class` builds the message classes at import time, with no ``protoc`` step;
* the equivalent ``.proto`` text (:func:`proto_text`), checked in as ``controller.proto``
  beside this module so the schema is readable; a test holds the two equal, so they cannot
  drift apart.

Every enum is nested in the message that uses it, as in Pravega. Field presence follows
proto3: singular message fields have presence (``HasField``), scalars do not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

__all__ = [
    "FILE_NAME",
    "MESSAGES",
    "PACKAGE",
    "RPCS",
    "SERVICE",
    "EnumType",
    "Field",
    "MapField",
    "MessageType",
    "Rpc",
    "file_descriptor",
    "message_class",
    "method_path",
    "proto_text",
]

PACKAGE = "io.pravega.controller.stream.api.grpc.v1"
SERVICE = "ControllerService"
FILE_NAME = "pravega_ray/grpc/controller.proto"

SCALARS: dict[str, int] = {
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
}


@dataclass(frozen=True)
class Field:
    """``[repeated] type name = number;``; ``type`` is a scalar of :data:`SCALARS` or the
    name of a message or enum (nested in the enclosing message, else top level)."""

    name: str
    number: int
    type: str
    repeated: bool = False


@dataclass(frozen=True)
class MapField:
    """``map<key, value> name = number;`` (both scalars)."""

    name: str
    number: int
    key: str
    value: str

    @property
    def entry_name(self) -> str:
        """The nested entry message protoc would make: ``cut`` -> ``CutEntry``."""
        return self.name[:1].upper() + self.name[1:] + "Entry"


@dataclass(frozen=True)
class EnumType:
    name: str
    values: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class MessageType:
    name: str
    fields: tuple[Field | MapField, ...]
    enums: tuple[EnumType, ...] = ()
    nested: tuple[MessageType, ...] = field(default=())


@dataclass(frozen=True)
class Rpc:
    """A unary RPC; ``served`` False: declared, answered UNIMPLEMENTED (getDelegationToken is
    served when authentication is on: ``service.ControllerServicer``)."""

    name: str
    request: str
    response: str
    served: bool = True


def _status(message: str, *values: str) -> MessageType:
    """A ``{ enum Status {...}; Status status = 1; }`` message, values numbered from 0."""
    enum = EnumType("Status", tuple((v, i) for i, v in enumerate(values)))
    return MessageType(message, (Field("status", 1, "Status"),), (enum,))


F = Field

MESSAGES: tuple[MessageType, ...] = (
    MessageType(
        "StreamInfo",
        (
            F("scope", 1, "string"),
            F("stream", 2, "string"),
            F("accessOperation", 3, "AccessOperation"),
        ),
        (
            EnumType(
                "AccessOperation",
                (
                    ("UNSPECIFIED", 0),
                    ("NONE", 1),
                    ("READ", 2),
                    ("WRITE", 3),
                    ("READ_UPDATE", 4),
                    ("READ_WRITE", 5),
                ),
            ),
        ),
    ),
    MessageType("ScopeInfo", (F("scope", 1, "string"),)),
    MessageType("ContinuationToken", (F("token", 1, "string"),)),
    MessageType("ScopesRequest", (F("continuationToken", 1, "ContinuationToken"),)),
    MessageType(
        "ScopesResponse",
        (F("scopes", 1, "string", repeated=True), F("continuationToken", 2, "ContinuationToken")),
    ),
    MessageType(
        "StreamsInScopeRequest",
        (F("scope", 1, "ScopeInfo"), F("continuationToken", 2, "ContinuationToken")),
    ),
    MessageType(
        "StreamsInScopeResponse",
        (
            F("streams", 1, "StreamInfo", repeated=True),
            F("continuationToken", 2, "ContinuationToken"),
            F("status", 3, "Status"),
        ),
        (EnumType("Status", (("SUCCESS", 0), ("FAILURE", 1), ("SCOPE_NOT_FOUND", 2))),),
    ),
    MessageType(
        "StreamsInScopeWithTagRequest",
        (
            F("scope", 1, "ScopeInfo"),
            F("tag", 2, "string"),
            F("continuationToken", 3, "ContinuationToken"),
        ),
    ),
    MessageType(
        "ScalingPolicy",
        (
            F("scaleType", 1, "ScalingPolicyType"),
            F("targetRate", 2, "int32"),
            F("scaleFactor", 3, "int32"),
            F("minNumSegments", 4, "int32"),
        ),
        (
            EnumType(
                "ScalingPolicyType",
                (
                    ("FIXED_NUM_SEGMENTS", 0),
                    ("BY_RATE_IN_KBYTES_PER_SEC", 1),
                    ("BY_RATE_IN_EVENTS_PER_SEC", 2),
                ),
            ),
        ),
    ),
    MessageType(
        "RetentionPolicy",
        (
            F("retentionType", 1, "RetentionPolicyType"),
            F("retentionParam", 2, "int64"),
            F("retentionMax", 3, "int64"),
        ),
        (EnumType("RetentionPolicyType", (("UNKNOWN", 0), ("TIME", 1), ("SIZE", 2))),),
    ),
    MessageType("Tags", (F("tag", 1, "string", repeated=True),)),
    MessageType(
        "StreamConfig",
        (
            F("streamInfo", 1, "StreamInfo"),
            F("scalingPolicy", 2, "ScalingPolicy"),
            F("retentionPolicy", 3, "RetentionPolicy"),
            F("tags", 4, "Tags"),
        ),
    ),
    MessageType("SegmentId", (F("streamInfo", 1, "StreamInfo"), F("segmentId", 2, "int64"))),
    MessageType(
        "SegmentRange",
        (F("segmentId", 1, "SegmentId"), F("minKey", 2, "double"), F("maxKey", 3, "double")),
    ),
    MessageType(
        "SegmentRanges",
        (F("segmentRanges", 1, "SegmentRange", repeated=True), F("delegationToken", 2, "string")),
    ),
    MessageType("NodeUri", (F("endpoint", 1, "string"), F("port", 2, "int32"))),
    MessageType(
        "GetSegmentsRequest", (F("streamInfo", 1, "StreamInfo"), F("timestamp", 2, "int64"))
    ),
    MessageType(
        "SegmentsAtTime",
        (F("segments", 1, "SegmentLocation", repeated=True), F("delegationToken", 2, "string")),
        nested=(
            MessageType(
                "SegmentLocation", (F("segmentId", 1, "SegmentId"), F("offset", 2, "int64"))
            ),
        ),
    ),
    MessageType(
        "GetEpochSegmentsRequest", (F("streamInfo", 1, "StreamInfo"), F("epoch", 2, "int32"))
    ),
    MessageType(
        "SuccessorResponse",
        (F("segments", 1, "SegmentEntry", repeated=True), F("delegationToken", 2, "string")),
        nested=(
            MessageType(
                "SegmentEntry",
                (F("segment", 1, "SegmentRange"), F("value", 2, "int64", repeated=True)),
            ),
        ),
    ),
    MessageType(
        "StreamCut", (F("streamInfo", 1, "StreamInfo"), MapField("cut", 2, "int64", "int64"))
    ),
    MessageType("TxnId", (F("highBits", 1, "int64"), F("lowBits", 2, "int64"))),
    MessageType("CreateTxnRequest", (F("streamInfo", 1, "StreamInfo"), F("lease", 2, "int64"))),
    MessageType(
        "CreateTxnResponse",
        (
            F("txnId", 1, "TxnId"),
            F("activeSegments", 2, "SegmentRange", repeated=True),
            F("delegationToken", 3, "string"),
        ),
    ),
    MessageType(
        "TxnRequest",
        (
            F("streamInfo", 1, "StreamInfo"),
            F("txnId", 2, "TxnId"),
            F("writerId", 3, "string"),
            F("timestamp", 4, "int64"),
        ),
    ),
    MessageType(
        "PingTxnRequest",
        (F("streamInfo", 1, "StreamInfo"), F("txnId", 2, "TxnId"), F("lease", 3, "int64")),
    ),
    _status("TxnStatus", "SUCCESS", "FAILURE", "STREAM_NOT_FOUND", "TRANSACTION_NOT_FOUND"),
    _status(
        "PingTxnStatus",
        "OK",
        "LEASE_TOO_LARGE",
        "MAX_EXECUTION_TIME_EXCEEDED",
        "SCALE_GRACE_TIME_EXCEEDED",
        "DISCONNECTED",
        "COMMITTED",
        "ABORTED",
        "UNKNOWN",
    ),
    MessageType(
        "TxnState",
        (F("state", 1, "State"),),
        (
            EnumType(
                "State",
                (
                    ("UNKNOWN", 0),
                    ("OPEN", 1),
                    ("COMMITTING", 2),
                    ("COMMITTED", 3),
                    ("ABORTING", 4),
                    ("ABORTED", 5),
                ),
            ),
        ),
    ),
    _status("CreateScopeStatus", "SUCCESS", "FAILURE", "SCOPE_EXISTS", "INVALID_SCOPE_NAME"),
    _status("DeleteScopeStatus", "SUCCESS", "FAILURE", "SCOPE_NOT_FOUND", "SCOPE_NOT_EMPTY"),
    _status(
        "CreateStreamStatus",
        "SUCCESS",
        "FAILURE",
        "STREAM_EXISTS",
        "SCOPE_NOT_FOUND",
        "INVALID_STREAM_NAME",
    ),
    # Java adds STREAM_SEALED = 4, which 0.3.x clients decode as SUCCESS: not declared.
    _status("UpdateStreamStatus", "SUCCESS", "FAILURE", "STREAM_NOT_FOUND", "SCOPE_NOT_FOUND"),
    _status("DeleteStreamStatus", "SUCCESS", "FAILURE", "STREAM_NOT_FOUND", "STREAM_NOT_SEALED"),
    MessageType("ExistsResponse", (F("exists", 1, "bool"),)),
    MessageType("DelegationToken", (F("delegationToken", 1, "string"),)),
    MessageType(
        "ScaleRequest",
        (
            F("streamInfo", 1, "StreamInfo"),
            F("sealedSegments", 2, "int64", repeated=True),
            F("newKeyRanges", 3, "KeyRangeEntry", repeated=True),
            F("scaleTimestamp", 4, "int64"),
        ),
        nested=(MessageType("KeyRangeEntry", (F("start", 1, "double"), F("end", 2, "double"))),),
    ),
    MessageType(
        "ScaleResponse",
        (
            F("status", 1, "ScaleStreamStatus"),
            F("segments", 2, "SegmentRange", repeated=True),
            F("epoch", 3, "int32"),
        ),
        (
            EnumType(
                "ScaleStreamStatus",
                (("STARTED", 0), ("FAILURE", 1), ("PRECONDITION_FAILED", 2)),
            ),
        ),
    ),
    MessageType("ScaleStatusRequest", (F("streamInfo", 1, "StreamInfo"), F("epoch", 2, "int32"))),
    MessageType(
        "ScaleStatusResponse",
        (F("status", 1, "ScaleStatus"),),
        (
            EnumType(
                "ScaleStatus",
                (("IN_PROGRESS", 0), ("SUCCESS", 1), ("INVALID_INPUT", 2), ("INTERNAL_ERROR", 3)),
            ),
        ),
    ),
)
"""Every message of the service, in the order of the ``.proto`` text."""

RPCS: tuple[Rpc, ...] = (
    Rpc("createScope", "ScopeInfo", "CreateScopeStatus"),
    Rpc("deleteScope", "ScopeInfo", "DeleteScopeStatus"),
    Rpc("listScopes", "ScopesRequest", "ScopesResponse"),
    Rpc("checkScopeExists", "ScopeInfo", "ExistsResponse"),
    Rpc("listStreamsInScope", "StreamsInScopeRequest", "StreamsInScopeResponse"),
    Rpc(
        "listStreamsInScopeForTag",
        "StreamsInScopeWithTagRequest",
        "StreamsInScopeResponse",
        served=False,
    ),
    Rpc("createStream", "StreamConfig", "CreateStreamStatus"),
    Rpc("updateStream", "StreamConfig", "UpdateStreamStatus"),
    Rpc("getStreamConfiguration", "StreamInfo", "StreamConfig"),
    Rpc("checkStreamExists", "StreamInfo", "ExistsResponse"),
    Rpc("truncateStream", "StreamCut", "UpdateStreamStatus"),
    Rpc("sealStream", "StreamInfo", "UpdateStreamStatus"),
    Rpc("deleteStream", "StreamInfo", "DeleteStreamStatus"),
    Rpc("getCurrentSegments", "StreamInfo", "SegmentRanges"),
    Rpc("getEpochSegments", "GetEpochSegmentsRequest", "SegmentRanges"),
    Rpc("getSegments", "GetSegmentsRequest", "SegmentsAtTime"),
    Rpc("getSegmentsImmediatelyFollowing", "SegmentId", "SuccessorResponse"),
    Rpc("scale", "ScaleRequest", "ScaleResponse", served=False),
    Rpc("checkScale", "ScaleStatusRequest", "ScaleStatusResponse", served=False),
    Rpc("getURI", "SegmentId", "NodeUri"),
    Rpc("createTransaction", "CreateTxnRequest", "CreateTxnResponse"),
    Rpc("commitTransaction", "TxnRequest", "TxnStatus"),
    Rpc("abortTransaction", "TxnRequest", "TxnStatus"),
    Rpc("pingTransaction", "PingTxnRequest", "PingTxnStatus"),
    Rpc("checkTransactionState", "TxnRequest", "TxnState"),
    Rpc("getDelegationToken", "StreamInfo", "DelegationToken", served=False),
)
"""Every RPC the official Python client (``pravega`` 0.3.8) can call, all unary."""


def method_path(rpc: str) -> str:
    """``/io.pravega.controller.stream.api.grpc.v1.ControllerService/<rpc>``."""
    return f"/{PACKAGE}.{SERVICE}/{rpc}"


# --- descriptor --------------------------------------------------------------------------------
def _type_name(name: str, scope: MessageType) -> tuple[int, str]:
    """(descriptor type, fully qualified name) of ``name`` used in message ``scope``."""
    prefix = f".{PACKAGE}"
    if name in {e.name for e in scope.enums}:
        return descriptor_pb2.FieldDescriptorProto.TYPE_ENUM, f"{prefix}.{scope.name}.{name}"
    if name in {n.name for n in scope.nested}:
        return descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE, f"{prefix}.{scope.name}.{name}"
    if name in {m.name for m in MESSAGES}:
        return descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE, f"{prefix}.{name}"
    raise KeyError(f"schema: unknown type {name!r} in message {scope.name}")


def _add_message(
    proto: descriptor_pb2.DescriptorProto, message: MessageType, scope: MessageType
) -> None:
    """Fill ``proto`` from ``message``; type names resolve in ``scope`` (its enclosing
    top-level message, where nested types and enums live)."""
    proto.name = message.name
    labels = descriptor_pb2.FieldDescriptorProto
    for enum in message.enums:
        enum_proto = proto.enum_type.add(name=enum.name)
        for value_name, number in enum.values:
            enum_proto.value.add(name=value_name, number=number)
    for nested in message.nested:
        _add_message(proto.nested_type.add(), nested, scope)
    for item in message.fields:
        if isinstance(item, MapField):
            entry = proto.nested_type.add(name=item.entry_name)
            entry.options.map_entry = True
            entry.field.add(
                name="key", number=1, type=SCALARS[item.key], label=labels.LABEL_OPTIONAL
            )
            entry.field.add(
                name="value", number=2, type=SCALARS[item.value], label=labels.LABEL_OPTIONAL
            )
            proto.field.add(
                name=item.name,
                number=item.number,
                label=labels.LABEL_REPEATED,
                type=labels.TYPE_MESSAGE,
                type_name=f".{PACKAGE}.{message.name}.{item.entry_name}",
                json_name=item.name,
            )
            continue
        label = labels.LABEL_REPEATED if item.repeated else labels.LABEL_OPTIONAL
        fd = proto.field.add(name=item.name, number=item.number, label=label, json_name=item.name)
        if item.type in SCALARS:
            fd.type = SCALARS[item.type]
        else:
            fd.type, fd.type_name = _type_name(item.type, scope)


@cache
def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """The schema as a ``FileDescriptorProto`` (proto3, no imports). Do not mutate it."""
    proto = descriptor_pb2.FileDescriptorProto(name=FILE_NAME, package=PACKAGE, syntax="proto3")
    for message in MESSAGES:
        _add_message(proto.message_type.add(), message, message)
    service = proto.service.add(name=SERVICE)
    for rpc in RPCS:
        service.method.add(
            name=rpc.name,
            input_type=f".{PACKAGE}.{rpc.request}",
            output_type=f".{PACKAGE}.{rpc.response}",
        )
    return proto


@cache
def _pool() -> descriptor_pool.DescriptorPool:
    # A pool of our own: nothing else in the process (Ray's protos, a test's) can clash.
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_descriptor())
    return pool


@cache
def message_class(name: str) -> Any:
    """The message class of ``name`` (``"StreamConfig"``; nested ones dotted:
    ``"SegmentsAtTime.SegmentLocation"``).

    KeyError for a name the schema does not declare.
    """
    descriptor = _pool().FindMessageTypeByName(f"{PACKAGE}.{name}")
    return GetMessageClass(descriptor)


# --- .proto text -------------------------------------------------------------------------------
_INDENT = "    "

HEADER = (
    "// pravega-ray's own declaration of Pravega's controller gRPC API, the subset its clients\n"
    "// call. Generated from pravega_ray/grpc/schema.py (proto_text()); edit the table there,\n"
    "// then regenerate this file: tests/unit/grpc/test_schema.py holds the two equal.\n"
)


def _message_lines(message: MessageType, depth: int) -> list[str]:
    pad = _INDENT * depth
    lines = [f"{pad}message {message.name} {{"]
    for enum in message.enums:
        lines.append(f"{pad}{_INDENT}enum {enum.name} {{")
        lines.extend(f"{pad}{_INDENT * 2}{name} = {number};" for name, number in enum.values)
        lines.append(f"{pad}{_INDENT}}}")
    for nested in message.nested:
        lines.extend(_message_lines(nested, depth + 1))
    for item in message.fields:
        if isinstance(item, MapField):
            text = f"map<{item.key}, {item.value}> {item.name} = {item.number};"
        else:
            repeated = "repeated " if item.repeated else ""
            text = f"{repeated}{item.type} {item.name} = {item.number};"
        lines.append(f"{pad}{_INDENT}{text}")
    lines.append(f"{pad}}}")
    return lines


def proto_text() -> str:
    """The schema as ``.proto`` text (what ``controller.proto`` beside this module holds)."""
    lines = [HEADER.rstrip("\n"), "", 'syntax = "proto3";', "", f"package {PACKAGE};", ""]
    lines.append(f"service {SERVICE} {{")
    for rpc in RPCS:
        note = "" if rpc.served else "  // answered UNIMPLEMENTED"
        lines.append(f"{_INDENT}rpc {rpc.name}({rpc.request}) returns ({rpc.response});{note}")
    lines.append("}")
    for message in MESSAGES:
        lines.append("")
        lines.extend(_message_lines(message, 0))
    return "\n".join(lines) + "\n"
