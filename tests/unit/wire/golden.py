"""Golden frames: every command with the bytes WIRE.md 3.3 says it is, built by hand.

The packers below use ``struct`` directly, never the codec, so a codec bug cannot hide in both
sides of a comparison. Layouts: WIRE.md 3.1 (primitives) and 3.3 (field order); the commands
3.3 only names (SEAL_SEGMENT, READ_TABLE, 34-37, 83-86) follow the field order of the Rust
client's ``wire_protocol/src/commands.rs``, which 3.3 cites as its source.
"""

from __future__ import annotations

import struct

from pravega_ray import wire
from pravega_ray.wire import TableKey, TableValue, WireCommand

REQUEST_ID = 0x0102030405060708
WRITER = 0x00112233445566778899AABBCCDDEEFF
ATTRIBUTE = 0xFEDCBA98765432100123456789ABCDEF
SEGMENT = "scope/stream/0.#epoch.0"
TABLE = "scope/rg_kvtable/0.#epoch.0"
TOKEN = "token"
TRACE = "trace"
I64_MIN = -(2**63)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def i64(value: int) -> bytes:
    return struct.pack(">q", value)


def u128(value: int) -> bytes:
    return struct.pack(">QQ", value >> 64, value & (2**64 - 1))


def boolean(value: bool) -> bytes:
    return b"\x01" if value else b"\x00"


def string(text: str) -> bytes:
    encoded = text.encode("utf-8")
    return struct.pack(">H", len(encoded)) + encoded


def blob(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def table_key(data: bytes, version: int) -> bytes:
    return i32(4 + len(data) + 8) + blob(data) + i64(version)


def table_value(data: bytes) -> bytes:
    return i32(4 + len(data)) + blob(data)


def frame(type_code: int, *fields: bytes) -> bytes:
    payload = b"".join(fields)
    return struct.pack(">ii", type_code, len(payload)) + payload


EVENTS = frame(0, b"first") + frame(0, b"") + frame(0, b"third")
"""Three events in envelopes (an envelope is a frame of type 0)."""

KEYS = (TableKey(b"k1", 5), TableKey(b"", wire.KEY_NO_VERSION))
KEYS_BYTES = i32(2) + table_key(b"k1", 5) + table_key(b"", I64_MIN)
ENTRIES = (
    (TableKey(b"19unassigned_segments", wire.KEY_NOT_EXISTS), TableValue(b"\x00")),
    (TableKey(b"key", 42), TableValue(b"")),
)
ENTRIES_BYTES = (
    i32(2)
    + table_key(b"19unassigned_segments", -1)
    + table_value(b"\x00")
    + table_key(b"key", 42)
    + table_value(b"")
)

R = REQUEST_ID
GOLDEN: list[tuple[WireCommand, bytes]] = [
    # --- both ways ---
    (wire.Hello(high_version=15, low_version=5), frame(-127, i32(15), i32(5))),
    (wire.KeepAlive(), frame(100)),
    # --- requests ---
    (
        wire.SetupAppend(request_id=R, writer_id=WRITER, segment=SEGMENT, delegation_token=TOKEN),
        frame(1, i64(R), u128(WRITER), string(SEGMENT), string(TOKEN)),
    ),
    (
        wire.AppendBlockEnd(
            writer_id=WRITER,
            size_of_whole_events=len(EVENTS),
            data=EVENTS,
            num_event=3,
            last_event_number=9,
            request_id=R,
        ),
        frame(4, u128(WRITER), i32(len(EVENTS)), blob(EVENTS), i32(3), i64(9), i64(R)),
    ),
    (
        wire.ConditionalBlockEnd(
            writer_id=WRITER, event_number=1, expected_offset=8 * 2**20, data=b"raw", request_id=R
        ),
        frame(89, u128(WRITER), i64(1), i64(8 * 2**20), blob(b"raw"), i64(R)),
    ),
    (
        wire.ReadSegment(
            segment=SEGMENT,
            offset=1024,
            suggested_length=512 * 1024,
            delegation_token="",
            request_id=R,
        ),
        frame(9, string(SEGMENT), i64(1024), i32(512 * 1024), string(""), i64(R)),
    ),
    (
        wire.GetStreamSegmentInfo(request_id=R, segment_name=SEGMENT, delegation_token=TOKEN),
        frame(11, i64(R), string(SEGMENT), string(TOKEN)),
    ),
    (
        wire.SealSegment(request_id=R, segment=SEGMENT, delegation_token=TOKEN),
        frame(28, i64(R), string(SEGMENT), string(TOKEN)),
    ),
    (
        wire.GetSegmentAttribute(
            request_id=R, segment_name=SEGMENT, attribute_id=ATTRIBUTE, delegation_token=TOKEN
        ),
        frame(34, i64(R), string(SEGMENT), u128(ATTRIBUTE), string(TOKEN)),
    ),
    (
        wire.UpdateSegmentAttribute(
            request_id=R,
            segment_name=SEGMENT,
            attribute_id=ATTRIBUTE,
            new_value=7,
            expected_value=I64_MIN,
            delegation_token=TOKEN,
        ),
        frame(36, i64(R), string(SEGMENT), u128(ATTRIBUTE), i64(7), i64(I64_MIN), string(TOKEN)),
    ),
    (
        wire.TruncateSegment(
            request_id=R, segment=SEGMENT, truncation_offset=77, delegation_token=TOKEN
        ),
        frame(38, i64(R), string(SEGMENT), i64(77), string(TOKEN)),
    ),
    (
        wire.CreateTransientSegment(
            request_id=R, writer_id=WRITER, segment=SEGMENT, delegation_token=TOKEN
        ),
        frame(40, i64(R), u128(WRITER), string(SEGMENT), string(TOKEN)),
    ),
    (
        wire.MergeSegments(
            request_id=R, target=SEGMENT, source=SEGMENT + "#transient.0", delegation_token=TOKEN
        ),
        frame(58, i64(R), string(SEGMENT), string(SEGMENT + "#transient.0"), string(TOKEN)),
    ),
    (
        wire.CreateTableSegment(request_id=R, segment=TABLE, delegation_token=""),
        frame(70, i64(R), string(TABLE), string("")),
    ),
    (
        wire.DeleteTableSegment(
            request_id=R, segment=TABLE, must_be_empty=False, delegation_token=TOKEN
        ),
        frame(71, i64(R), string(TABLE), boolean(False), string(TOKEN)),
    ),
    (
        wire.UpdateTableEntries(
            request_id=R,
            segment=TABLE,
            delegation_token=TOKEN,
            entries=ENTRIES,
            table_segment_offset=-1,
        ),
        frame(74, i64(R), string(TABLE), string(TOKEN), ENTRIES_BYTES, i64(-1)),
    ),
    (
        wire.RemoveTableKeys(
            request_id=R, segment=TABLE, delegation_token=TOKEN, keys=KEYS, table_segment_offset=-1
        ),
        frame(76, i64(R), string(TABLE), string(TOKEN), KEYS_BYTES, i64(-1)),
    ),
    (
        wire.ReadTable(request_id=R, segment=TABLE, delegation_token=TOKEN, keys=KEYS),
        frame(78, i64(R), string(TABLE), string(TOKEN), KEYS_BYTES),
    ),
    (
        wire.ReadTableKeys(
            request_id=R,
            segment=TABLE,
            delegation_token=TOKEN,
            suggested_key_count=10,
            continuation_token=b"\x01\x02",
        ),
        frame(83, i64(R), string(TABLE), string(TOKEN), i32(10), blob(b"\x01\x02")),
    ),
    (
        wire.ReadTableEntries(
            request_id=R,
            segment=TABLE,
            delegation_token=TOKEN,
            suggested_entry_count=10,
            continuation_token=b"",
        ),
        frame(85, i64(R), string(TABLE), string(TOKEN), i32(10), blob(b"")),
    ),
    (
        wire.ReadTableEntriesDelta(
            request_id=R,
            segment=TABLE,
            delegation_token=TOKEN,
            from_position=123,
            suggested_entry_count=10,
        ),
        frame(88, i64(R), string(TABLE), string(TOKEN), i64(123), i32(10)),
    ),
    # --- replies ---
    (
        wire.AppendSetup(
            request_id=R, segment=SEGMENT, writer_id=WRITER, last_event_number=wire.NULL_VALUE
        ),
        frame(2, i64(R), string(SEGMENT), u128(WRITER), i64(I64_MIN)),
    ),
    (
        wire.DataAppended(
            writer_id=WRITER,
            event_number=9,
            previous_event_number=6,
            request_id=R,
            current_segment_write_offset=4096,
        ),
        frame(7, u128(WRITER), i64(9), i64(6), i64(R), i64(4096)),
    ),
    (
        wire.ConditionalCheckFailed(writer_id=WRITER, event_number=3, request_id=R),
        frame(8, u128(WRITER), i64(3), i64(R)),
    ),
    (
        wire.SegmentRead(
            segment=SEGMENT,
            offset=1024,
            at_tail=True,
            end_of_segment=False,
            data=EVENTS,
            request_id=R,
        ),
        frame(10, string(SEGMENT), i64(1024), boolean(True), boolean(False), blob(EVENTS), i64(R)),
    ),
    (
        wire.StreamSegmentInfo(
            request_id=R,
            segment_name=SEGMENT,
            exists=True,
            is_sealed=False,
            is_deleted=False,
            last_modified=1_700_000_000_000,
            write_offset=2048,
            start_offset=512,
        ),
        frame(
            12,
            i64(R),
            string(SEGMENT),
            boolean(True),
            boolean(False),
            boolean(False),
            i64(1_700_000_000_000),
            i64(2048),
            i64(512),
        ),
    ),
    (wire.SegmentCreated(request_id=R, segment=TABLE), frame(21, i64(R), string(TABLE))),
    (wire.SegmentSealed(request_id=R, segment=SEGMENT), frame(29, i64(R), string(SEGMENT))),
    (wire.SegmentDeleted(request_id=R, segment=TABLE), frame(31, i64(R), string(TABLE))),
    (wire.SegmentAttribute(request_id=R, value=-5), frame(35, i64(R), i64(-5))),
    (wire.SegmentAttributeUpdated(request_id=R, success=True), frame(37, i64(R), boolean(True))),
    (wire.SegmentTruncated(request_id=R, segment=SEGMENT), frame(39, i64(R), string(SEGMENT))),
    (
        wire.WrongHost(
            request_id=R, segment=SEGMENT, correct_host="host:12345", server_stack_trace=TRACE
        ),
        frame(50, i64(R), string(SEGMENT), string("host:12345"), string(TRACE)),
    ),
    (
        wire.SegmentIsSealed(request_id=R, segment=SEGMENT, server_stack_trace=TRACE, offset=99),
        frame(51, i64(R), string(SEGMENT), string(TRACE), i64(99)),
    ),
    (
        wire.SegmentAlreadyExists(request_id=R, segment=TABLE, server_stack_trace=TRACE),
        frame(52, i64(R), string(TABLE), string(TRACE)),
    ),
    (
        wire.NoSuchSegment(request_id=R, segment=SEGMENT, server_stack_trace="", offset=-1),
        frame(53, i64(R), string(SEGMENT), string(""), i64(-1)),
    ),
    (
        wire.InvalidEventNumber(writer_id=WRITER, event_number=4, server_stack_trace=TRACE),
        frame(55, u128(WRITER), i64(4), string(TRACE)),
    ),
    (
        wire.SegmentIsTruncated(
            request_id=R, segment=SEGMENT, start_offset=100, server_stack_trace=TRACE, offset=50
        ),
        frame(56, i64(R), string(SEGMENT), i64(100), string(TRACE), i64(50)),
    ),
    (
        wire.OperationUnsupported(
            request_id=R, operation_name="CREATE_SEGMENT", server_stack_trace=TRACE
        ),
        frame(57, i64(R), string("CREATE_SEGMENT"), string(TRACE)),
    ),
    (
        wire.SegmentsMerged(
            request_id=R,
            target=SEGMENT,
            source=SEGMENT + "#transient.0",
            new_target_write_offset=8 * 2**20,
        ),
        frame(59, i64(R), string(SEGMENT), string(SEGMENT + "#transient.0"), i64(8 * 2**20)),
    ),
    (
        wire.AuthTokenCheckFailed(
            request_id=R, server_stack_trace=TRACE, error_code=wire.AUTH_TOKEN_EXPIRED
        ),
        frame(60, i64(R), string(TRACE), i32(1)),
    ),
    (
        wire.ErrorMessage(
            request_id=R,
            segment=SEGMENT,
            message="offset past the end",
            error_code=wire.ERROR_CODE_UNSPECIFIED,
        ),
        frame(61, i64(R), string(SEGMENT), string("offset past the end"), i32(-1)),
    ),
    (
        wire.TableEntriesUpdated(request_id=R, updated_versions=(0, 40, 40)),
        frame(75, i64(R), i32(3), i64(0), i64(40), i64(40)),
    ),
    (wire.TableKeysRemoved(request_id=R, segment=TABLE), frame(77, i64(R), string(TABLE))),
    (
        wire.TableRead(request_id=R, segment=TABLE, entries=ENTRIES),
        frame(79, i64(R), string(TABLE), ENTRIES_BYTES),
    ),
    (
        wire.TableSegmentNotEmpty(request_id=R, segment=TABLE, server_stack_trace=TRACE),
        frame(80, i64(R), string(TABLE), string(TRACE)),
    ),
    (
        wire.TableKeyDoesNotExist(request_id=R, segment=TABLE, server_stack_trace=TRACE),
        frame(81, i64(R), string(TABLE), string(TRACE)),
    ),
    (
        wire.TableKeyBadVersion(request_id=R, segment=TABLE, server_stack_trace=""),
        frame(82, i64(R), string(TABLE), string("")),
    ),
    (
        wire.TableKeysRead(request_id=R, segment=TABLE, keys=KEYS, continuation_token=b"\xff"),
        frame(84, i64(R), string(TABLE), KEYS_BYTES, blob(b"\xff")),
    ),
    (
        wire.TableEntriesRead(
            request_id=R, segment=TABLE, entries=ENTRIES, continuation_token=b"next"
        ),
        frame(86, i64(R), string(TABLE), ENTRIES_BYTES, blob(b"next")),
    ),
    (
        wire.TableEntriesDeltaRead(
            request_id=R,
            segment=TABLE,
            entries=ENTRIES,
            should_clear=False,
            reached_end=True,
            last_position=200,
        ),
        frame(87, i64(R), string(TABLE), ENTRIES_BYTES, boolean(False), boolean(True), i64(200)),
    ),
]
