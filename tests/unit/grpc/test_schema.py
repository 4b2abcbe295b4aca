"""The controller's gRPC schema (pravega_ray/grpc/schema.py): the checked-in .proto is the
table's own text, and the names and numbers the clients depend on are as WIRE.md 2.4 says."""

from __future__ import annotations

from pathlib import Path

import pytest

from pravega_ray.grpc import message_class, method_path, proto_text
from pravega_ray.grpc.schema import MESSAGES, RPCS, file_descriptor

pytestmark = pytest.mark.timeout(10)

PROTO = Path(__file__).resolve().parents[3] / "pravega_ray" / "grpc" / "controller.proto"


def test_checked_in_proto_equals_the_emitted_text() -> None:
    # On a difference, regenerate: python -c "from pravega_ray.grpc import schema;
    # open('pravega_ray/grpc/controller.proto', 'w').write(schema.proto_text())"
    assert PROTO.read_text() == proto_text()


def test_every_message_and_rpc_type_resolves() -> None:
    for message in MESSAGES:
        assert message_class(message.name)().SerializeToString() == b""
    for rpc in RPCS:
        message_class(rpc.request)
        message_class(rpc.response)
    assert len({rpc.name for rpc in RPCS}) == len(RPCS) == 26
    assert [rpc.name for rpc in RPCS if not rpc.served] == [
        "listStreamsInScopeForTag",
        "scale",
        "checkScale",
        "getDelegationToken",
    ]


def test_method_paths_and_package_are_the_clients() -> None:
    assert file_descriptor().package == "io.pravega.controller.stream.api.grpc.v1"
    assert method_path("getURI") == (
        "/io.pravega.controller.stream.api.grpc.v1.ControllerService/getURI"
    )


@pytest.mark.parametrize(
    ("message", "field", "number"),
    [
        ("StreamConfig", "tags", 4),
        ("StreamConfig", "scalingPolicy", 2),
        ("StreamsInScopeResponse", "status", 3),
        ("SegmentRange", "maxKey", 3),
        ("TxnId", "lowBits", 2),
        ("TxnRequest", "timestamp", 4),
        ("CreateTxnResponse", "delegationToken", 3),
        ("StreamCut", "cut", 2),
        ("SuccessorResponse.SegmentEntry", "value", 2),
        ("ScaleRequest.KeyRangeEntry", "end", 2),
    ],
)
def test_field_numbers(message: str, field: str, number: int) -> None:
    assert message_class(message).DESCRIPTOR.fields_by_name[field].number == number


def test_status_values_stop_where_the_clients_do() -> None:
    def values(message: str, enum: str = "Status") -> dict[str, int]:
        descriptor = message_class(message).DESCRIPTOR.enum_types_by_name[enum]
        return {v.name: v.number for v in descriptor.values}

    assert values("UpdateStreamStatus") == {
        "SUCCESS": 0,
        "FAILURE": 1,
        "STREAM_NOT_FOUND": 2,
        "SCOPE_NOT_FOUND": 3,
    }  # no STREAM_SEALED: 0.3.x clients would read it as SUCCESS
    assert values("PingTxnStatus")["UNKNOWN"] == 7
    assert values("TxnState", "State")["ABORTED"] == 5


def test_map_field_round_trips() -> None:
    cut = message_class("StreamCut")()
    cut.cut[1 << 32] = 28
    assert dict(message_class("StreamCut").FromString(cut.SerializeToString()).cut) == {1 << 32: 28}
