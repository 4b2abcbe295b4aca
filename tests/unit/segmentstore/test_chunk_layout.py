"""ChunkLayout, ChunkRef, chunk_name and read_chunk on their own (over InMemoryChunkStorage)."""

from __future__ import annotations

import zlib

import pytest

from pravega_ray.errors import DataCorruptionError
from pravega_ray.invariant import InvariantViolation
from pravega_ray.segmentstore.chunk_layout import ChunkLayout, ChunkRef, chunk_name, read_chunk
from pravega_ray.storage.memory import InMemoryChunkStorage

pytestmark = pytest.mark.timeout(30)

SEGMENT = "sc/st/0.#epoch.0"


def ref(offset: int, length: int, crc: int | None = None) -> ChunkRef:
    return ChunkRef(offset, length, chunk_name(SEGMENT, offset), crc)


def layout_of(*chunks: ChunkRef) -> ChunkLayout:
    layout = ChunkLayout()
    for chunk in chunks:
        layout.add(chunk, SEGMENT)
    return layout


def stored_chunk(storage: InMemoryChunkStorage, offset: int, data: bytes) -> ChunkRef:
    """A chunk of SEGMENT at ``offset`` written to ``storage``, with its CRC."""
    chunk = ChunkRef(offset, len(data), chunk_name(SEGMENT, offset), zlib.crc32(data))
    storage.create(chunk.name, data)
    return chunk


def replace(storage: InMemoryChunkStorage, name: str, data: bytes) -> None:
    storage.delete(name)
    storage.create(name, data)


# --- chunk_name and ChunkRef ----------------------------------------------------------------------
def test_chunk_name_pads_the_offset_so_names_sort_like_offsets() -> None:
    assert chunk_name(SEGMENT, 0) == f"segments/{SEGMENT}/{0:020d}"
    names = [chunk_name(SEGMENT, offset) for offset in (0, 9, 10, 100, 2**40)]
    assert names == sorted(names)
    assert all(len(n) == len(names[0]) for n in names)


def test_chunk_ref_end_is_offset_plus_length() -> None:
    assert ChunkRef(10, 5, "c").end == 15
    assert ChunkRef(10, 5, "c").crc is None


# --- add ------------------------------------------------------------------------------------------
def test_add_contiguous_chunks_keeps_them_in_order() -> None:
    chunks = [ref(0, 10), ref(10, 5), ref(15, 1)]
    layout = layout_of(*chunks)
    assert list(layout) == chunks
    assert len(layout) == 3
    assert layout.names() == [c.name for c in chunks]


def test_add_first_chunk_at_any_offset() -> None:
    # After a truncation dropped every chunk, the next one starts wherever Tier-2 is.
    layout = layout_of(ref(100, 10))
    assert layout.chunk_at(100) == ref(100, 10)


@pytest.mark.parametrize("offset", [9, 11])
def test_add_with_a_gap_or_overlap_trips_the_invariant(offset: int) -> None:
    layout = layout_of(ref(0, 10))
    with pytest.raises(InvariantViolation, match=SEGMENT):
        layout.add(ref(offset, 5), SEGMENT)
    assert list(layout) == [ref(0, 10)]  # nothing added


# --- chunk_at -------------------------------------------------------------------------------------
def test_chunk_at_boundaries() -> None:
    a, b, c = ref(10, 10), ref(20, 5), ref(25, 1)
    layout = layout_of(a, b, c)
    assert layout.chunk_at(9) is None  # below the first chunk
    assert layout.chunk_at(10) == a
    assert layout.chunk_at(19) == a
    assert layout.chunk_at(20) == b  # a chunk's end is the next one's start
    assert layout.chunk_at(24) == b
    assert layout.chunk_at(25) == c
    assert layout.chunk_at(26) is None  # at the end: not in Tier-2
    assert layout.chunk_at(10**12) is None


def test_chunk_at_on_an_empty_layout_is_none() -> None:
    assert ChunkLayout().chunk_at(0) is None


# --- truncate -------------------------------------------------------------------------------------
def test_truncate_returns_exactly_the_chunks_wholly_below() -> None:
    a, b, c = ref(0, 10), ref(10, 10), ref(20, 10)
    layout = layout_of(a, b, c)
    assert layout.truncate(0) == []
    assert layout.truncate(9) == []  # a is only partly below
    assert layout.truncate(15) == [a.name]
    assert list(layout) == [b, c]
    assert layout.truncate(20) == [b.name]  # b ends exactly at the new start
    assert layout.truncate(20) == []  # idempotent
    assert list(layout) == [c]


def test_truncate_past_the_end_drops_every_chunk() -> None:
    a, b = ref(0, 10), ref(10, 10)
    layout = layout_of(a, b)
    assert layout.truncate(1000) == [a.name, b.name]
    assert len(layout) == 0
    assert layout.chunk_at(5) is None


def test_truncate_keeps_chunk_at_consistent() -> None:
    a, b, c = ref(0, 10), ref(10, 10), ref(20, 10)
    layout = layout_of(a, b, c)
    layout.truncate(12)
    assert layout.chunk_at(5) is None
    assert layout.chunk_at(12) == b
    assert layout.chunk_at(20) == c
    layout.add(ref(30, 3), SEGMENT)  # still contiguous with the kept chunks
    assert layout.chunk_at(31) == ref(30, 3)


# --- shifted --------------------------------------------------------------------------------------
def test_shifted_moves_every_chunk_and_keeps_names_and_crcs() -> None:
    a, b = ref(0, 10, crc=7), ref(10, 4)
    layout = layout_of(a, b)
    assert layout.shifted(100) == [
        ChunkRef(100, 10, a.name, 7),
        ChunkRef(110, 4, b.name, None),
    ]
    assert list(layout) == [a, b]  # the layout itself is unchanged
    target = layout_of(ref(0, 100))
    for chunk in layout.shifted(100):  # what a metadata-only merge does
        target.add(chunk, SEGMENT)
    assert target.chunk_at(112) == ChunkRef(110, 4, b.name, None)


# --- records --------------------------------------------------------------------------------------
def test_to_records_from_records_round_trip() -> None:
    layout = layout_of(ref(5, 10, crc=1), ref(15, 3, crc=None), ref(18, 2, crc=2**32 - 1))
    records = layout.to_records()
    assert records == [[c.offset, c.length, c.name, c.crc] for c in layout]
    assert list(ChunkLayout.from_records(records, SEGMENT)) == list(layout)


def test_from_records_accepts_three_field_records_without_crc() -> None:
    # Checkpoints from before data format 4 record [offset, length, name].
    records: list[list[object]] = [[0, 10, "segments/x/0"], [10, 5, "segments/x/10", 3]]
    layout = ChunkLayout.from_records(records, SEGMENT)
    assert list(layout) == [
        ChunkRef(0, 10, "segments/x/0", None),
        ChunkRef(10, 5, "segments/x/10", 3),
    ]


def test_from_records_with_a_gap_trips_the_invariant() -> None:
    with pytest.raises(InvariantViolation, match=SEGMENT):
        ChunkLayout.from_records([[0, 10, "a", None], [11, 5, "b", None]], SEGMENT)


# --- read_chunk -----------------------------------------------------------------------------------
def test_read_chunk_returns_an_intact_chunk() -> None:
    storage = InMemoryChunkStorage()
    chunk = stored_chunk(storage, 40, b"0123456789")
    assert read_chunk(storage, SEGMENT, chunk) == b"0123456789"


def test_read_chunk_checks_only_the_length_of_a_chunk_without_crc() -> None:
    storage = InMemoryChunkStorage()
    chunk = stored_chunk(storage, 0, b"abcd")
    replace(storage, chunk.name, b"abcX")
    old = ChunkRef(chunk.offset, chunk.length, chunk.name, None)  # before data format 4
    assert read_chunk(storage, SEGMENT, old) == b"abcX"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("missing", "is missing"),
        ("short", "holds 9 bytes, 10 were written"),
        ("long", r"holds 11\+ bytes, 10 were written"),
        ("flipped", "fails its checksum"),
    ],
)
def test_read_chunk_of_a_damaged_chunk_raises_data_corruption_naming_it(
    damage: str, message: str
) -> None:
    storage = InMemoryChunkStorage()
    data = b"0123456789"
    chunk = stored_chunk(storage, 40, data)
    if damage == "missing":
        storage.delete(chunk.name)
    elif damage == "short":
        replace(storage, chunk.name, data[:-1])
    elif damage == "long":
        replace(storage, chunk.name, data + b"!")
    else:
        replace(storage, chunk.name, bytes([data[0] ^ 0x01]) + data[1:])
    with pytest.raises(DataCorruptionError, match=message) as raised:
        read_chunk(storage, SEGMENT, chunk)
    error = raised.value
    assert chunk.name in str(error)
    assert "bytes [40, 50)" in str(error)
    assert (error.segment, error.chunk, error.offset) == (SEGMENT, chunk.name, 40)  # type: ignore[attr-defined]
