"""The readers' frame assembler: frames cut anywhere by reads, large events assembled in
place, damaged frames still DataCorruptionError."""

from __future__ import annotations

import random
import struct

import pytest

from pravega_ray.client.event_framing import FrameAssembler, frame_events, parse_events
from pravega_ray.constants import EVENT_TYPE_PLAIN, LARGE_EVENT_BYTES_MAX, MIB
from pravega_ray.errors import DataCorruptionError

pytestmark = pytest.mark.timeout(60)


def large_frame(payload: bytes) -> bytes:
    return struct.pack(">II", EVENT_TYPE_PLAIN, len(payload)) + payload


def feed_in_pieces(data: bytes, cuts: list[int]) -> tuple[list[tuple[int, bytes]], FrameAssembler]:
    frames = FrameAssembler()
    out: list[tuple[int, bytes]] = []
    start = 0
    for end in [*sorted(cuts), len(data)]:
        out += frames.feed(data[start:end], start)
        start = end
    return out, frames


@pytest.mark.parametrize("seed", range(5))
def test_frames_cut_anywhere_come_out_whole_with_their_offsets(seed: int) -> None:
    rng = random.Random(seed)
    small = [bytes([i]) * rng.randrange(0, 3000) for i in range(20)]
    large = rng.randbytes(9 * MIB)
    data = frame_events(small[:10]) + large_frame(large) + frame_events(small[10:])
    cuts = [rng.randrange(len(data)) for _ in range(30)] + [len(frame_events(small[:10])) + 3]
    out, frames = feed_in_pieces(data, cuts)
    assert [p for _, p in out] == [*small[:10], large, *small[10:]]
    offsets = [0]
    for p in [p for _, p in out][:-1]:
        offsets.append(offsets[-1] + 8 + len(p))
    assert [o for o, _ in out] == offsets
    assert frames.buffered_bytes == 0 and frames.missing_bytes == 0


def test_a_large_event_reports_what_is_missing() -> None:
    payload = bytes(10 * MIB)
    frames = FrameAssembler()
    assert frames.feed(large_frame(payload)[:MIB], 0) == []
    assert frames.missing_bytes == 9 * MIB + 8
    assert frames.buffered_bytes == MIB
    rest = large_frame(payload)[MIB:]
    assert frames.feed(rest, MIB) == [(0, payload)]
    frames.reset()
    assert frames.buffered_bytes == 0


def test_damaged_frames_raise_data_corruption() -> None:
    with pytest.raises(DataCorruptionError):
        FrameAssembler().feed(struct.pack(">II", 7, 3) + b"abc", 0)
    with pytest.raises(DataCorruptionError):
        FrameAssembler().feed(struct.pack(">II", EVENT_TYPE_PLAIN, LARGE_EVENT_BYTES_MAX + 1), 0)
    frames = FrameAssembler()
    frames.feed(b"\0\0", 0)
    with pytest.raises(DataCorruptionError):
        frames.feed(b"\0\1\0\0\0\0", 2)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_parse_events_reads_any_buffer_alike_and_gives_bytes_payloads(kind: type) -> None:
    """Each payload is its own bytes (not a view holding the read's buffer); a frame cut by
    the end is left unconsumed."""
    frames = [large_frame(p) for p in (b"", b"a", b"bc" * 50)]  # any size: one frame kind
    data = b"".join(frames) + frames[2][:20]
    events, consumed = parse_events(kind(data), 1000)
    assert events == [(1000, b""), (1008, b"a"), (1017, b"bc" * 50)]
    assert all(type(payload) is bytes for _, payload in events)
    assert consumed == len(data) - 20
