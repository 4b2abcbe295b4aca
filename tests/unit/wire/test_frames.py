"""FrameReader over byte streams in any split, its errors, a seeded fuzz, and event envelopes."""

from __future__ import annotations

import random
import struct

import pytest

from pravega_ray import wire
from pravega_ray.errors import InvalidArgumentError, WireProtocolError
from pravega_ray.wire import FrameReader, WireCommand
from tests.unit.wire.golden import EVENTS, GOLDEN, frame, i64, string

pytestmark = pytest.mark.timeout(60)

STREAM = b"".join(encoded for _, encoded in GOLDEN)
COMMANDS = [command for command, _ in GOLDEN]


def drain(reader: FrameReader) -> list[WireCommand]:
    out = []
    while (command := reader.next_command()) is not None:
        out.append(command)
    return out


@pytest.mark.parametrize("case", GOLDEN, ids=lambda case: type(case[0]).__name__)
def test_a_frame_split_at_every_byte_position_decodes_the_same(
    case: tuple[WireCommand, bytes],
) -> None:
    command, encoded = case
    for split in range(len(encoded) + 1):
        reader = FrameReader()
        reader.feed(encoded[:split])
        first = drain(reader)
        reader.feed(encoded[split:])
        assert first + drain(reader) == [command]
        assert reader.buffered_bytes == 0


def test_a_stream_fed_one_byte_at_a_time_gives_every_command_in_order() -> None:
    reader = FrameReader()
    out: list[WireCommand] = []
    for index in range(len(STREAM)):
        reader.feed(STREAM[index : index + 1])
        out += drain(reader)
    assert out == COMMANDS


def test_a_stream_fed_at_once_or_in_random_chunks_gives_every_command() -> None:
    reader = FrameReader()
    reader.feed(STREAM)
    assert drain(reader) == COMMANDS
    rng = random.Random(7)
    reader, out, position = FrameReader(), [], 0
    while position < len(STREAM):
        size = rng.randint(0, 300)
        reader.feed(STREAM[position : position + size])
        position += size
        out += drain(reader)
    assert out == COMMANDS


def test_nothing_comes_out_until_a_frame_is_whole() -> None:
    reader = FrameReader()
    reader.feed(b"")
    assert reader.next_command() is None
    encoded = GOLDEN[2][1]
    reader.feed(encoded[:-1])
    assert reader.next_command() is None and reader.buffered_bytes == len(encoded) - 1


@pytest.mark.parametrize("length", [-1, -(2**31), wire.PAYLOAD_BYTES_MAX + 1, 2**31 - 1])
def test_a_length_outside_the_limit_breaks_the_reader_for_good(length: int) -> None:
    reader = FrameReader()
    reader.feed(struct.pack(">ii", 4, length))
    for _ in range(2):
        with pytest.raises(WireProtocolError, match="payload length") as caught:
            reader.next_command()
        assert caught.value.fatal and caught.value.type_code == 4
    reader.feed(GOLDEN[0][1])
    with pytest.raises(WireProtocolError):
        reader.next_command()


def test_the_length_limit_is_exactly_payload_bytes_max() -> None:
    data = bytes(wire.PAYLOAD_BYTES_MAX - 8)  # KEEP_ALIVE ignores its payload: any size decodes
    reader = FrameReader()
    reader.feed(struct.pack(">ii", 100, wire.PAYLOAD_BYTES_MAX) + data + bytes(8))
    assert reader.next_command() == wire.KeepAlive()


def test_a_lower_payload_limit_is_honoured_and_validated() -> None:
    reader = FrameReader(payload_bytes_max=16)
    reader.feed(wire.SegmentCreated(request_id=1, segment="x" * 7).encode())  # payload 17
    with pytest.raises(WireProtocolError, match=r"\[0, 16\]"):
        reader.next_command()
    for bad in (-1, wire.PAYLOAD_BYTES_MAX + 1):
        with pytest.raises(InvalidArgumentError):
            FrameReader(payload_bytes_max=bad)


def test_an_unknown_type_code_is_skipped_and_the_next_frame_still_decodes() -> None:
    reader = FrameReader()
    reader.feed(frame(99, b"whatever") + GOLDEN[0][1])
    with pytest.raises(WireProtocolError, match="unknown type code 99") as caught:
        reader.next_command()
    error = caught.value
    assert (error.type_code, error.request_id, error.fatal) == (99, None, False)
    assert reader.next_command() == GOLDEN[0][0]


def test_an_unsupported_pravega_request_carries_its_request_id() -> None:
    reader = FrameReader(wire.REQUESTS)
    reader.feed(frame(20, i64(42), string("s"), b"\x00\x00\x00\x01\x00", string("")))
    with pytest.raises(WireProtocolError, match="CREATE_SEGMENT") as caught:
        reader.next_command()
    assert caught.value.type_code == 20 and caught.value.request_id == 42
    assert wire.UNSUPPORTED_REQUESTS[20] == "CREATE_SEGMENT"


def test_a_server_reader_refuses_replies_and_a_client_reader_refuses_requests() -> None:
    server, client = FrameReader(wire.REQUESTS), FrameReader(wire.REPLIES)
    server.feed(wire.SegmentCreated(request_id=1, segment="s").encode())
    client.feed(wire.SealSegment(request_id=1, segment="s").encode())
    for reader, code in ((server, 21), (client, 28)):
        with pytest.raises(WireProtocolError, match=f"unknown type code {code}"):
            reader.next_command()
        assert reader.buffered_bytes == 0


def test_a_payload_that_does_not_decode_is_consumed_and_the_stream_goes_on() -> None:
    reader = FrameReader()
    reader.feed(frame(37, i64(5), b"\x07") + GOLDEN[1][1])
    with pytest.raises(WireProtocolError, match="bool") as caught:
        reader.next_command()
    assert caught.value.request_id == 5 and not caught.value.fatal
    assert reader.next_command() == GOLDEN[1][0]


def test_decode_frame_wants_exactly_one_whole_frame() -> None:
    command, encoded = GOLDEN[2]
    assert wire.decode_frame(encoded) == command
    for bad in (encoded[:-1], encoded + b"\x00", encoded[:5]):
        with pytest.raises(WireProtocolError, match="one whole frame") as caught:
            wire.decode_frame(bad)
        assert caught.value.fatal


# --- fuzz ----------------------------------------------------------------------------------


def random_frame(rng: random.Random) -> bytes:
    """A frame that is random, truncated, or a golden frame with bytes changed."""
    codes = list(wire.COMMANDS)
    kind = rng.randrange(5)
    if kind == 0:  # a registered or random type code, a random payload, a true length
        code = rng.choice(codes) if rng.random() < 0.7 else rng.randint(-300, 300)
        return frame(code, rng.randbytes(rng.randint(0, 80)))
    if kind == 1:  # any header at all, then a random amount of payload
        header = struct.pack(">ii", rng.choice(codes), rng.randint(-(2**31), 2**31 - 1))
        return header + rng.randbytes(rng.randint(0, 40))
    encoded = bytearray(rng.choice(GOLDEN)[1])
    if kind == 2:  # flip a few bytes of the payload
        for _ in range(rng.randint(1, 4)):
            if len(encoded) > 8:
                encoded[rng.randrange(8, len(encoded))] = rng.randrange(256)
        return bytes(encoded)
    if kind == 3:  # truncate the payload, keeping the header true
        payload = encoded[8 : 8 + rng.randrange(len(encoded) - 7)]
        return frame(int.from_bytes(encoded[:4], "big", signed=True), bytes(payload))
    return bytes(encoded) + rng.randbytes(rng.randint(1, 8))  # junk after the frame


def test_ten_thousand_random_frames_raise_nothing_but_wire_protocol_errors() -> None:
    rng = random.Random(20240226)
    outcomes = {"decoded": 0, "error": 0, "waiting": 0}
    for _ in range(10_000):
        data = random_frame(rng)
        reader = FrameReader(rng.choice([wire.COMMANDS, wire.REQUESTS, wire.REPLIES]))
        split = rng.randint(0, len(data))
        try:
            reader.feed(data[:split])
            drain(reader)
            reader.feed(data[split:])
            drain(reader)
        except WireProtocolError:
            outcomes["error"] += 1
        else:
            outcomes["decoded" if reader.buffered_bytes == 0 else "waiting"] += 1
    assert min(outcomes.values()) > 500, outcomes  # every path was taken


def test_a_long_stream_of_good_and_bad_frames_resynchronises_after_each_bad_one() -> None:
    rng = random.Random(11)
    reader, stream = FrameReader(), bytearray()
    expected: list[WireCommand | None] = []
    for _ in range(300):
        if rng.random() < 0.5:
            command, encoded = rng.choice(GOLDEN)
            stream += encoded
            expected.append(command)
        else:  # a whole frame with a true length that does not decode
            stream += frame(rng.choice([99, 20, 37, 71]), rng.randbytes(rng.randint(0, 9)))
            expected.append(None)
    out: list[WireCommand | None] = []
    reader.feed(stream)
    while reader.buffered_bytes:
        try:
            out.append(reader.next_command())
        except WireProtocolError as error:
            assert not error.fatal
            out.append(None)
    assert out == expected


# --- event envelopes (WIRE.md 3.4) -----------------------------------------------------------


def test_encode_event_writes_type_zero_and_the_length() -> None:
    assert wire.encode_event(b"abc") == b"\x00\x00\x00\x00\x00\x00\x00\x03abc"
    assert wire.encode_event(b"") == bytes(8)


def test_decode_and_count_events_of_a_block() -> None:
    assert wire.decode_events(EVENTS) == [b"first", b"", b"third"]
    assert wire.count_events(EVENTS) == 3
    assert wire.decode_events(b"") == [] and wire.count_events(b"") == 0
    block = b"".join(wire.encode_event(bytes([n]) * n) for n in range(50))
    assert wire.decode_events(memoryview(block)) == [bytes([n]) * n for n in range(50)]


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (EVENTS[:-1], "cut"),
        (EVENTS + b"\x00\x00\x00", "cut short"),
        (struct.pack(">ii", 1, 0), "type 1"),
        (struct.pack(">ii", 0, -1), "length -1"),
    ],
)
def test_a_block_that_is_not_whole_events_is_an_error(data: bytes, match: str) -> None:
    for read in (wire.decode_events, wire.count_events):
        with pytest.raises(WireProtocolError, match=match):
            read(data)
