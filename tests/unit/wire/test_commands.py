"""Every command against hand-built golden bytes, and round trips of random commands."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pravega_ray import wire
from pravega_ray.errors import InvalidArgumentError, WireProtocolError
from pravega_ray.wire import TableKey, TableValue, WireCommand, decode_frame
from tests.unit.wire.golden import (
    GOLDEN,
    REQUEST_ID,
    TABLE,
    blob,
    boolean,
    frame,
    i32,
    i64,
    string,
)

pytestmark = pytest.mark.timeout(60)


def golden_id(case: tuple[WireCommand, bytes]) -> str:
    return type(case[0]).__name__


@pytest.mark.parametrize("case", GOLDEN, ids=golden_id)
def test_encode_gives_the_golden_bytes(case: tuple[WireCommand, bytes]) -> None:
    command, expected = case
    assert command.encode() == expected


@pytest.mark.parametrize("case", GOLDEN, ids=golden_id)
def test_decode_of_the_golden_bytes_gives_the_command(case: tuple[WireCommand, bytes]) -> None:
    command, expected = case
    assert decode_frame(expected) == command
    assert type(command).decode(expected[8:]) == command


def test_golden_cases_cover_every_registered_type_code() -> None:
    assert sorted(type(command).TYPE for command, _ in GOLDEN) == sorted(wire.COMMANDS)
    assert len(wire.COMMANDS) == 51


def test_golden_helpers_agree_with_literal_bytes() -> None:
    # The packers of golden.py, checked once against bytes written out by hand.
    hello = bytes.fromhex("ffffff81" "00000008" "0000000f" "00000005")  # fmt: skip
    assert wire.Hello(high_version=15, low_version=5).encode() == hello
    setup = wire.SetupAppend(request_id=1, writer_id=2**127 + 5, segment="a/b", delegation_token="")
    assert setup.encode() == bytes.fromhex(
        "00000001" "0000001f" "0000000000000001"
        "80000000000000000000000000000005" "0003" "612f62" "0000"
    )  # fmt: skip
    key = TableKey(b"\xaa", -1)
    update = wire.UpdateTableEntries(
        request_id=2, segment="t", delegation_token="", entries=((key, TableValue(b"\xbb")),),
        table_segment_offset=-1,
    )  # fmt: skip
    assert update.encode() == bytes.fromhex(
        "0000004a" "00000033" "0000000000000002" "000174" "0000"
        "00000001" "0000000d" "00000001" "aa" "ffffffffffffffff" "00000005" "00000001" "bb"
        "ffffffffffffffff"
    )  # fmt: skip


def test_type_codes_and_names_are_pravegas() -> None:
    expected = {
        -127: "HELLO", 1: "SETUP_APPEND", 2: "APPEND_SETUP", 4: "APPEND_BLOCK_END",
        7: "DATA_APPENDED", 8: "CONDITIONAL_CHECK_FAILED", 9: "READ_SEGMENT",
        10: "SEGMENT_READ", 11: "GET_STREAM_SEGMENT_INFO", 12: "STREAM_SEGMENT_INFO",
        21: "SEGMENT_CREATED", 28: "SEAL_SEGMENT", 29: "SEGMENT_SEALED", 31: "SEGMENT_DELETED",
        34: "GET_SEGMENT_ATTRIBUTE", 35: "SEGMENT_ATTRIBUTE", 36: "UPDATE_SEGMENT_ATTRIBUTE",
        37: "SEGMENT_ATTRIBUTE_UPDATED", 38: "TRUNCATE_SEGMENT", 39: "SEGMENT_TRUNCATED",
        40: "CREATE_TRANSIENT_SEGMENT", 50: "WRONG_HOST", 51: "SEGMENT_IS_SEALED",
        52: "SEGMENT_ALREADY_EXISTS", 53: "NO_SUCH_SEGMENT", 55: "INVALID_EVENT_NUMBER",
        56: "SEGMENT_IS_TRUNCATED", 57: "OPERATION_UNSUPPORTED", 58: "MERGE_SEGMENTS",
        59: "SEGMENTS_MERGED", 60: "AUTH_TOKEN_CHECK_FAILED", 61: "ERROR_MESSAGE",
        70: "CREATE_TABLE_SEGMENT", 71: "DELETE_TABLE_SEGMENT", 74: "UPDATE_TABLE_ENTRIES",
        75: "TABLE_ENTRIES_UPDATED", 76: "REMOVE_TABLE_KEYS", 77: "TABLE_KEYS_REMOVED",
        78: "READ_TABLE", 79: "TABLE_READ", 80: "TABLE_SEGMENT_NOT_EMPTY",
        81: "TABLE_KEY_DOES_NOT_EXIST", 82: "TABLE_KEY_BAD_VERSION", 83: "READ_TABLE_KEYS",
        84: "TABLE_KEYS_READ", 85: "READ_TABLE_ENTRIES", 86: "TABLE_ENTRIES_READ",
        87: "TABLE_ENTRIES_DELTA_READ", 88: "READ_TABLE_ENTRIES_DELTA",
        89: "CONDITIONAL_BLOCK_END", 100: "KEEP_ALIVE",
    }  # fmt: skip
    assert {code: cls.NAME for code, cls in wire.COMMANDS.items()} == expected


def test_requests_and_replies_split_the_registry_with_hello_and_keep_alive_in_both() -> None:
    both = set(wire.REQUESTS) & set(wire.REPLIES)
    assert both == {wire.Hello.TYPE, wire.KeepAlive.TYPE}
    assert set(wire.REQUESTS) | set(wire.REPLIES) == set(wire.COMMANDS)
    assert all(issubclass(cls, wire.Request) for cls in wire.REQUESTS.values())
    assert all(issubclass(cls, wire.Reply) for cls in wire.REPLIES.values())


def test_decode_of_a_request_ignores_trailing_bytes() -> None:
    command = wire.SetupAppend(request_id=1, writer_id=2, segment="s")
    payload = command.encode()[8:] + b"java v17 extra fields"
    assert wire.SetupAppend.decode(payload) == command


def test_decode_of_a_reply_with_trailing_bytes_is_an_error() -> None:
    payload = wire.SegmentCreated(request_id=4, segment="s").encode()[8:] + b"\x00"
    with pytest.raises(WireProtocolError, match="1 bytes left over") as caught:
        wire.SegmentCreated.decode(payload)
    assert caught.value.type_code == 21 and caught.value.request_id == 4
    assert not caught.value.fatal


def test_create_table_segment_reads_java_v17_fields_when_present() -> None:
    base = (i64(REQUEST_ID), string(TABLE), string(""))
    java = frame(70, *base, boolean(True), i32(16), i64(2**20))
    command = decode_frame(java)
    assert command == wire.CreateTableSegment(
        request_id=REQUEST_ID, segment=TABLE, sorted_deprecated=True, key_length=16,
        rollover_size_bytes=2**20,
    )  # fmt: skip
    assert command.encode() == java
    # Java reads each optional field when its bytes are there, as here: a bool, then 3 bytes.
    partial = decode_frame(frame(70, *base, boolean(False), b"\x00\x00\x00"))
    assert partial == wire.CreateTableSegment(
        request_id=REQUEST_ID, segment=TABLE, sorted_deprecated=False
    )


def test_create_table_segment_refuses_an_optional_field_after_an_unset_one() -> None:
    command = wire.CreateTableSegment(request_id=1, segment=TABLE, rollover_size_bytes=5)
    with pytest.raises(InvalidArgumentError, match="rollover_size_bytes is set"):
        command.encode()


def test_empty_table_key_keeps_its_version_on_the_wire() -> None:
    # Java drops the version of an empty key; the Rust client always reads one (WIRE.md 3.3).
    read = wire.ReadTable(request_id=1, segment="t", keys=(TableKey(b"", 3),))
    assert read.encode().endswith(i32(1) + i32(12) + blob(b"") + i64(3))
    assert decode_frame(read.encode()) == read


def test_repr_leaves_out_data_and_delegation_tokens() -> None:
    append = wire.AppendBlockEnd(
        writer_id=1, size_of_whole_events=3, data=b"SECRETDATA", num_event=1,
        last_event_number=1, request_id=2,
    )  # fmt: skip
    setup = wire.SetupAppend(request_id=1, writer_id=2, segment="s", delegation_token="SECRET")
    assert "SECRET" not in repr(append) and "SECRET" not in repr(setup)
    assert "request_id=2" in repr(append)


def test_commands_are_frozen_and_hashable() -> None:
    command = wire.Hello(high_version=15, low_version=5)
    with pytest.raises(AttributeError):
        command.high_version = 16  # type: ignore[misc]  # the point: frozen refuses it
    assert hash(command) == hash(wire.Hello(high_version=15, low_version=5))


# --- round trips of random commands --------------------------------------------------------

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
KEY = st.builds(TableKey, st.binary(max_size=40), I64)
ENTRY = st.tuples(KEY, st.builds(TableValue, st.binary(max_size=40)))
FIELD_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "i32": I32,
    "i64": I64,
    "bool": st.booleans(),
    "u128": st.integers(0, 2**128 - 1),
    "str": st.text(max_size=30),
    "bytes": st.binary(max_size=200),
    "list<i64>": st.lists(I64, max_size=8).map(tuple),
    "list<TableKey>": st.lists(KEY, max_size=5).map(tuple),
    "TableEntries": st.lists(ENTRY, max_size=5).map(tuple),
}


@st.composite
def commands_of(draw: st.DrawFn, cls: type[WireCommand]) -> WireCommand:
    values: dict[str, Any] = {}
    present = True  # optional trailing fields: a prefix of them is set
    for name, codec in cls.LAYOUT:
        if codec.optional:
            present = present and draw(st.booleans())
            inner = codec.name.removeprefix("optional ")
            values[name] = draw(FIELD_STRATEGIES[inner]) if present else None
        else:
            values[name] = draw(FIELD_STRATEGIES[codec.name])
    return cls(**values)


@pytest.mark.parametrize("cls", list(wire.COMMANDS.values()), ids=lambda cls: cls.__name__)
@settings(max_examples=25, deadline=None, database=None)
@given(data=st.data())
def test_decode_of_encode_gives_the_command_back(
    cls: type[WireCommand], data: st.DataObject
) -> None:
    command = data.draw(commands_of(cls))
    encoded = command.encode()
    assert int.from_bytes(encoded[4:8], "big") == len(encoded) - 8
    assert decode_frame(encoded) == command
    assert decode_frame(encoded, wire.REQUESTS if command.TRAILING_BYTES_ALLOWED else wire.REPLIES)
