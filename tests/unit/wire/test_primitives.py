"""Field encodings: what a bad payload raises on decode, and what a bad value raises on encode."""

from __future__ import annotations

import pickle
import struct
from typing import Any

import pytest

from pravega_ray import wire
from pravega_ray.errors import InvalidArgumentError, WireProtocolError
from pravega_ray.wire import TableKey, TableValue, decode_frame
from tests.unit.wire.golden import (
    ENTRIES_BYTES,
    GOLDEN,
    REQUEST_ID,
    TABLE,
    blob,
    boolean,
    frame,
    i32,
    i64,
    string,
    table_key,
    table_value,
)

pytestmark = pytest.mark.timeout(60)


def decode_error(data: bytes) -> WireProtocolError:
    with pytest.raises(WireProtocolError) as caught:
        decode_frame(data)
    return caught.value


def test_a_bool_other_than_0_or_1_is_an_error_carrying_the_request_id() -> None:
    bad = frame(71, i64(REQUEST_ID), string(TABLE), b"\x02", string(""))
    error = decode_error(bad)
    assert "bool must be 0 or 1" in error.message
    assert (error.type_code, error.request_id, error.fatal) == (71, REQUEST_ID, False)


def test_invalid_utf8_is_an_error() -> None:
    bad = frame(11, i64(REQUEST_ID), struct.pack(">H", 2) + b"\xc3\x28", string(""))
    error = decode_error(bad)
    assert "not valid UTF-8" in error.message and error.request_id == REQUEST_ID


def test_java_modified_utf8_nul_is_refused_as_invalid_utf8() -> None:
    # Java's writeUTF writes U+0000 as C0 80; the names on this wire are ASCII (WIRE.md 3.1).
    error = decode_error(frame(21, i64(1), struct.pack(">H", 2) + b"\xc0\x80"))
    assert "not valid UTF-8" in error.message


def test_multibyte_utf8_round_trips_with_its_byte_length() -> None:
    command = wire.SegmentCreated(request_id=1, segment="scope/strëam/0")
    assert command.encode() == frame(21, i64(1), struct.pack(">H", 15) + "scope/strëam/0".encode())
    assert decode_frame(command.encode()) == command


@pytest.mark.parametrize("case", GOLDEN, ids=lambda case: type(case[0]).__name__)
def test_every_truncation_of_a_payload_is_an_error(case: tuple[wire.WireCommand, bytes]) -> None:
    command, encoded = case
    payload = encoded[8:]
    for size in range(len(payload)):
        with pytest.raises(WireProtocolError, match=r"ends inside|needs more than") as caught:
            decode_frame(frame(command.TYPE, payload[:size]))
        assert caught.value.type_code == command.TYPE and not caught.value.fatal
        if size >= 8 and command.LAYOUT[0][0] == "request_id":
            assert caught.value.request_id == REQUEST_ID


def test_the_request_id_is_unknown_when_the_fault_comes_before_it() -> None:
    # READ_SEGMENT's request id is its last field.
    bad_name = struct.pack(">H", 1) + b"\xff"
    error = decode_error(frame(9, bad_name, i64(0), i32(1), string(""), i64(3)))
    assert error.type_code == 9 and error.request_id is None


def test_a_negative_bytes_length_is_an_error() -> None:
    bad = frame(10, string("s"), i64(0), boolean(True), boolean(False), i32(-1), i64(1))
    assert "negative length" in decode_error(bad).message


def test_a_bytes_length_past_the_payload_is_an_error() -> None:
    bad = frame(10, string("s"), i64(0), boolean(True), boolean(False), i32(2**31 - 1), i64(1))
    assert "ends inside" in decode_error(bad).message


def test_a_negative_list_count_is_an_error() -> None:
    assert "negative count" in decode_error(frame(75, i64(1), i32(-3))).message


def test_a_list_count_larger_than_the_payload_could_hold_is_refused_before_looping() -> None:
    error = decode_error(frame(79, i64(1), string("t"), i32(2**31 - 1)))
    assert "needs more than" in error.message


@pytest.mark.parametrize(
    "entries",
    [
        i32(1) + i32(99) + blob(b"k") + i64(0) + table_value(b"v"),  # key payload size wrong
        i32(1) + table_key(b"k", 0) + i32(0) + blob(b"v"),  # value payload size wrong
    ],
)
def test_a_table_structure_whose_payload_size_disagrees_is_an_error(entries: bytes) -> None:
    error = decode_error(frame(79, i64(1), string("t"), entries))
    assert "gives its payload as" in error.message


def test_table_entries_decode_into_key_value_pairs() -> None:
    command = decode_frame(frame(79, i64(1), string(TABLE), ENTRIES_BYTES))
    assert isinstance(command, wire.TableRead)
    assert command.entries[0] == (TableKey(b"19unassigned_segments", -1), TableValue(b"\x00"))


def test_wire_protocol_error_pickles_with_its_details() -> None:
    error = decode_error(frame(71, i64(7), string("t"), b"\x05", string("")))
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, WireProtocolError) and isinstance(copy, InvalidArgumentError)
    assert (copy.message, copy.type_code, copy.request_id, copy.fatal) == (
        error.message, 71, 7, False,
    )  # fmt: skip


# --- encode refuses values that do not fit ----------------------------------------------


# Values of the wrong type, past the type checker on purpose.
UNCHECKED: Any = wire


@pytest.mark.parametrize(
    ("command", "match"),
    [
        (wire.Hello(high_version=2**31, low_version=5), "does not fit an i32"),
        (wire.SegmentAttribute(request_id=2**63, value=0), "does not fit an i64"),
        (UNCHECKED.SegmentAttribute(request_id=1.5, value=0), "needs an int"),
        (wire.SegmentAttribute(request_id=True, value=0), "needs an int"),
        (wire.SetupAppend(request_id=1, writer_id=-1, segment="s"), "u128"),
        (wire.SetupAppend(request_id=1, writer_id=2**128, segment="s"), "u128"),
        (wire.SegmentCreated(request_id=1, segment="x" * 65536), "at most 65535 bytes"),
        (wire.SegmentCreated(request_id=1, segment="\ud800"), "not encodable"),
        (UNCHECKED.SegmentCreated(request_id=1, segment=b"s"), "needs a str"),
        (UNCHECKED.SegmentAttributeUpdated(request_id=1, success=1), "True or False"),
        (UNCHECKED.TableEntriesUpdated(request_id=1, updated_versions=5), "needs a tuple"),
        (UNCHECKED.ReadTable(request_id=1, segment="t", keys=(b"k",)), "expected a TableKey"),
        (UNCHECKED.TableRead(request_id=1, segment="t", entries=((TableKey(b"k"),),)), "pairs"),
        (
            UNCHECKED.TableRead(request_id=1, segment="t", entries=((TableKey(b"k"), b"v"),)),
            "expected a TableValue",
        ),
        (
            UNCHECKED.TableKeysRead(request_id=1, segment="t", keys=(), continuation_token="x"),
            "needs bytes",
        ),
    ],
)
def test_encode_of_a_value_that_does_not_fit_raises_invalid_argument(
    command: wire.WireCommand, match: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=match) as caught:
        command.encode()
    assert not isinstance(caught.value, WireProtocolError)


def test_encode_refuses_a_payload_over_the_frame_limit() -> None:
    data = bytes(wire.PAYLOAD_BYTES_MAX)
    read = wire.SegmentRead(
        segment="s", offset=0, at_tail=True, end_of_segment=False, data=data, request_id=1
    )
    with pytest.raises(InvalidArgumentError, match="over the 16777215 limit"):
        read.encode()


def test_encode_accepts_bytearray_and_memoryview_data() -> None:
    values: list[Any] = [bytearray(b"abc"), memoryview(b"abc")]
    for data in values:
        read = wire.SegmentRead(
            segment="s", offset=0, at_tail=True, end_of_segment=False, data=data, request_id=1
        )
        assert decode_frame(read.encode()) == wire.SegmentRead(
            segment="s", offset=0, at_tail=True, end_of_segment=False, data=b"abc", request_id=1
        )
