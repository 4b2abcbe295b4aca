"""Segment ranges into Arrow blocks: the body of every read task of ``pr.data.read_stream``.

Path of the data inside one read task::

    container.read(segment, offset, <= READ_BYTES_MAX, wait 0)   one call per window; up to
                                                                READS_IN_FLIGHT outstanding,
                                                                across the task's ranges
    FrameScanner.feed                                           frames -> FrameSpans
    raw mode:     raw_events_table(..., spans)                  spans -> Arrow columns
    decoded modes: events_table(layout, ..., payloads)          (offset, payload) -> columns
    concat + combine_chunks when a block is full                one single-chunk table

The raw mode (no serializer) makes no Python object per event: the scanner reads only the
frame headers, and the ``event`` column is the read's bytes seen as one binary value per frame
(offsets = the frame starts) with each value's 8-byte header cut off in one Arrow kernel call
(``binary_slice``), so the payloads are copied once, in C. Per event that is one header unpack
in Python (~0.3 us) where a ``bytes`` per payload and ``pa.array`` of them cost several.

Blocks are what Ray Data and, through RayDP, Spark get. Every block is a *non-empty* table
whose columns are *one contiguous chunk* each: RayDP converts a block with ``to_pandas()``, and
PySpark 3.5 fails on the chunked columns pandas 3 keeps ("Expected Array, got ChunkedArray") and
on empty tables. A block is closed once its *payload* bytes exceed the Ray Data context's
``target_max_block_size`` (128 MiB by default), so its Arrow size exceeds it too and Ray Data's
output buffer passes it on as it is instead of merging it with the next one (a merge would make
multi-chunk columns). A block holds at most that many payload bytes plus one event, plus the
other columns (~30 B per row).

Columns (``layout_for``): the five of Pravega's Spark connector, ``event`` (binary), ``scope``,
``stream``, ``segment_id``, ``offset``; with a table serializer also its fields; with a plain
serializer ``event`` holds the deserialized values (see ``docs/pipelines.md``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pravega_ray.client.event_framing import FrameScanner, FrameSpans
from pravega_ray.client.serializers import (
    BytesSerializer,
    Utf8Serializer,
    check_serializer,
    is_table_serializer,
)
from pravega_ray.constants import (
    EVENT_HEADER_BYTES,
    LARGE_EVENT_BYTES_MAX,
    MIB,
    READ_BYTES_MAX,
)
from pravega_ray.errors import (
    DataCorruptionError,
    InvalidArgumentError,
    SegmentStoreUnavailableError,
    SerializationError,
)

__all__ = [
    "BLOCK_BYTES_DEFAULT",
    "EVENT_ARROW_SCHEMA",
    "EVENT_COLUMNS",
    "READS_IN_FLIGHT",
    "READ_CALL_TIMEOUT_S",
    "READ_TASK_CPUS",
    "BlockLayout",
    "events_table",
    "layout_for",
    "raw_events_table",
    "read_ranges",
]

EVENT_COLUMNS: tuple[str, ...] = ("event", "scope", "stream", "segment_id", "offset")
"""The columns of Pravega's Spark connector, in its order."""

EVENT_ARROW_SCHEMA = pa.schema(
    [
        pa.field("event", pa.binary(), nullable=False),
        pa.field("scope", pa.string(), nullable=False),
        pa.field("stream", pa.string(), nullable=False),
        pa.field("segment_id", pa.int64(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
    ]
)
"""Arrow schema of the raw read (no serializer); maps to the connector's Spark schema."""

BLOCK_BYTES_DEFAULT = 128 * MIB
"""Block size when Ray Data's context names none (its own default is the same)."""

PIECE_BYTES = READ_BYTES_MAX
"""Events are built into a table (a piece) every this many payload bytes; blocks grow by pieces."""

READ_TASK_CPUS = 0.25
"""Ray CPUs per read task: small, so read tasks run beside a Spark executor on 2 CPUs."""

READ_CALL_TIMEOUT_S = 120.0
"""Longest wait for one container read call before the read fails as unavailable."""

READS_IN_FLIGHT = 8
"""Read calls (of up to ``READ_BYTES_MAX`` each) a read task keeps outstanding, across its
ranges: its ranges on different containers are read in parallel."""


@dataclass(frozen=True)
class BlockLayout:
    """How events become rows: ``mode`` "raw" (no serializer), "table" (a TableSerializer,
    its fields after the connector columns) or "plain" (``event`` = deserialized values).

    ``schema`` is the blocks' Arrow schema, None when a plain serializer's values decide it
    (Arrow infers the type per block). Picklable: it travels with the read tasks.
    """

    mode: str
    serializer: Any
    schema: pa.Schema | None


def layout_for(serializer: object) -> BlockLayout:
    """The layout for ``serializer``; InvalidArgumentError for something that is no
    serializer and for a table serializer with a field named like a connector column."""
    if serializer is None:
        return BlockLayout("raw", None, EVENT_ARROW_SCHEMA)
    check_serializer(serializer)
    if is_table_serializer(serializer):
        fields = serializer.arrow_schema
        if not isinstance(fields, pa.Schema):
            raise InvalidArgumentError(f"{serializer!r}.arrow_schema is not a pyarrow.Schema")
        clashes = [name for name in fields.names if name in EVENT_COLUMNS]
        if clashes:
            raise InvalidArgumentError(
                f"the serializer's field(s) {clashes} are named like connector columns "
                f"{list(EVENT_COLUMNS)}; rename them"
            )
        one_row = getattr(serializer, "rows_per_event", None) == 1
        event = pa.field("event", pa.binary(), nullable=not one_row)
        schema = pa.schema([event, *list(EVENT_ARROW_SCHEMA)[1:], *fields])
        return BlockLayout("table", serializer, schema)
    if isinstance(serializer, BytesSerializer):
        return BlockLayout("plain", serializer, EVENT_ARROW_SCHEMA)
    if isinstance(serializer, Utf8Serializer):
        event = pa.field("event", pa.string(), nullable=False)
        return BlockLayout("plain", serializer, pa.schema([event, *list(EVENT_ARROW_SCHEMA)[1:]]))
    return BlockLayout("plain", serializer, None)


def _located(error: SerializationError, segment: str, offset: int) -> SerializationError:
    return SerializationError(
        f"event at {segment} offset {offset} does not decode: {error.message}",
        data=error.data,
        segment=segment,
        offset=offset,
        key=None,
    )


def _decode_one_by_one(
    layout: BlockLayout, segment: str, offsets: list[int], payloads: list[bytes]
) -> tuple[list[pa.Table], list[int]]:
    """Each payload's decoded rows and their count; a failure names its event."""
    tables, counts = [], []
    for offset, payload in zip(offsets, payloads, strict=True):
        try:
            table = layout.serializer.decode_table([payload])
        except SerializationError as e:
            raise _located(e, segment, offset) from None
        tables.append(table)
        counts.append(table.num_rows)
    return tables, counts


def events_table(
    layout: BlockLayout,
    scope: str,
    stream: str,
    segment: str,
    segment_id: int,
    offsets: list[int],
    payloads: list[bytes],
) -> pa.Table:
    """The rows of these events of one segment as a single-chunk table of ``layout``.

    Raises SerializationError naming the segment and offset of an event that does not decode.
    """
    count = len(offsets)
    event_type = pa.binary() if layout.schema is None else layout.schema.field("event").type
    if layout.mode == "raw":
        event = pa.array(payloads, type=pa.binary())
    elif layout.mode == "plain":
        values = []
        for offset, payload in zip(offsets, payloads, strict=True):
            try:
                values.append(layout.serializer.deserialize(payload))
            except SerializationError as e:
                raise _located(e, segment, offset) from None
        try:
            event = pa.array(values, type=None if layout.schema is None else event_type)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise SerializationError(
                f"the values of {segment} [{offsets[0]}, {offsets[-1]}] do not fit one Arrow "
                f"column ({e}); read with a table serializer (e.g. JsonSerializer(schema))",
                segment=segment,
                offset=offsets[0],
            ) from None
    else:
        return _decoded_table(layout, scope, stream, segment, segment_id, offsets, payloads)
    return pa.Table.from_arrays(
        [
            event,
            pa.repeat(pa.scalar(scope, pa.string()), count),
            pa.repeat(pa.scalar(stream, pa.string()), count),
            pa.repeat(pa.scalar(segment_id, pa.int64()), count),
            pa.array(offsets, type=pa.int64()),
        ],
        schema=layout.schema or _inferred_schema(event.type),
    )


def _payloads_and_offsets(spans: FrameSpans) -> tuple[pa.Array, pa.Array]:
    """The payloads of ``spans`` as one binary array, copied once (by Arrow), and the
    frames' segment offsets (int64)."""
    count = len(spans.starts)
    # int32 positions: a buffer is < 2 GiB (a read, or one large event of <= 1 GiB).
    bounds = pa.array([*spans.starts, spans.end], type=pa.int32())
    frames = pa.BinaryArray.from_buffers(
        pa.binary(), count, [None, bounds.buffers()[1], pa.py_buffer(spans.data)]
    )
    # An explicit stop: pyarrow 26's binary_slice fails ("Negative buffer resize") without one.
    payloads = pc.binary_slice(
        frames, EVENT_HEADER_BYTES, EVENT_HEADER_BYTES + LARGE_EVENT_BYTES_MAX
    )
    offsets = pc.add(bounds.slice(0, count).cast(pa.int64()), spans.base_offset)
    return payloads, offsets


def raw_events_table(
    scope: str, stream: str, segment_id: int, spans: Sequence[FrameSpans]
) -> pa.Table:
    """The raw-mode rows (``EVENT_ARROW_SCHEMA``) of the frames of ``spans``, in order, as a
    single-chunk table; no Python object is made per event. Equal, row for row, to
    ``events_table(layout_for(None), ...)`` of the same events."""
    built = [_payloads_and_offsets(s) for s in spans if s.starts]
    if not built:
        event, offsets = pa.array([], type=pa.binary()), pa.array([], type=pa.int64())
    elif len(built) == 1:
        event, offsets = built[0]
    else:
        event = pa.concat_arrays([payloads for payloads, _ in built])
        offsets = pa.concat_arrays([offsets for _, offsets in built])
    count = len(offsets)
    return pa.Table.from_arrays(
        [
            event,
            pa.repeat(pa.scalar(scope, pa.string()), count),
            pa.repeat(pa.scalar(stream, pa.string()), count),
            pa.repeat(pa.scalar(segment_id, pa.int64()), count),
            offsets,
        ],
        schema=EVENT_ARROW_SCHEMA,
    )


def _inferred_schema(event_type: pa.DataType) -> pa.Schema:
    return pa.schema([pa.field("event", event_type), *list(EVENT_ARROW_SCHEMA)[1:]])


def _decoded_table(
    layout: BlockLayout,
    scope: str,
    stream: str,
    segment: str,
    segment_id: int,
    offsets: list[int],
    payloads: list[bytes],
) -> pa.Table:
    """Connector columns + the table serializer's fields; rows of one event repeat its
    metadata (``event`` is null then, unless every event is exactly one row)."""
    assert layout.schema is not None
    one_row = not layout.schema.field("event").nullable
    if one_row:
        try:
            decoded = layout.serializer.decode_table(payloads)
        except SerializationError:  # find which event, to name it
            _decode_one_by_one(layout, segment, offsets, payloads)
            raise
        if decoded.num_rows != len(payloads):
            raise SerializationError(
                f"{layout.serializer!r} decoded {len(payloads)} events of {segment} into "
                f"{decoded.num_rows} rows, but it says it makes one row per event",
                segment=segment,
                offset=offsets[0],
            )
        event = pa.array(payloads, type=pa.binary())
        row_offsets = pa.array(offsets, type=pa.int64())
    else:
        tables, counts = _decode_one_by_one(layout, segment, offsets, payloads)
        decoded = (
            pa.concat_tables(tables) if tables else layout.serializer.arrow_schema.empty_table()
        )
        event = pa.nulls(decoded.num_rows, pa.binary())
        row_offsets = pa.array(
            [o for o, c in zip(offsets, counts, strict=True) for _ in range(c)], type=pa.int64()
        )
    rows = decoded.num_rows
    fields = layout.serializer.arrow_schema
    columns = [
        event,
        pa.repeat(pa.scalar(scope, pa.string()), rows),
        pa.repeat(pa.scalar(stream, pa.string()), rows),
        pa.repeat(pa.scalar(segment_id, pa.int64()), rows),
        row_offsets,
        *[decoded.column(name).combine_chunks() for name in fields.names],
    ]
    return pa.Table.from_arrays(columns, schema=layout.schema)


def _concat(tables: Sequence[pa.Table]) -> pa.Table:
    """One single-chunk table of ``tables`` (blocks of a plain layout may differ in type)."""
    if len(tables) == 1:
        return tables[0]
    return pa.concat_tables(tables, promote_options="permissive").combine_chunks()


def _windows(ranges: Sequence[Any], read_bytes: int) -> Iterator[tuple[int, int, int]]:
    """``(range index, offset, length)`` of the read calls covering ``ranges``, in order:
    each range cut into windows of at most ``read_bytes``."""
    for index, segment_range in enumerate(ranges):
        offset, end = segment_range.start_offset, segment_range.end_offset
        while offset < end:
            length = min(read_bytes, end - offset)
            yield index, offset, length
            offset += length


class _BlockBuilder:
    """Frames of the ranges of one read task into blocks (see :func:`read_ranges`)."""

    def __init__(self, layout: BlockLayout, block_bytes: int) -> None:
        self._layout = layout
        self._block_bytes = block_bytes
        self._pieces: list[pa.Table] = []  # built tables of the block being filled
        self._spans: list[FrameSpans] = []  # frames of the current range, not yet in a piece
        self._pending_bytes = 0  # Arrow bytes of the pieces + payload bytes of the spans
        self._piece_bytes = 0  # payload bytes of the spans

    def add(self, segment_range: Any, spans: list[FrameSpans]) -> pa.Table | None:
        """Take the complete frames ``spans`` of ``segment_range``; a full block, if one is."""
        for new in spans:
            self._spans.append(new)
            self._pending_bytes += new.payload_bytes
            self._piece_bytes += new.payload_bytes
        if not self._spans or (
            self._pending_bytes <= self._block_bytes and self._piece_bytes < PIECE_BYTES
        ):
            return None
        # Pieces of ~PIECE_BYTES keep a block just above the target, below the ~1.5x where
        # Ray Data slices blocks and merges the remainder with the next one.
        self.end_range(segment_range)
        # Ray Data merges blocks it sees at or below its target size: pass on only blocks
        # whose Arrow size is above it (decoded columns may be smaller).
        if self._pending_bytes <= self._block_bytes:
            return None
        block = _concat(self._pieces)
        self._pieces, self._pending_bytes = [], 0
        return block if block.num_rows else None

    def end_range(self, segment_range: Any) -> None:
        """Build the frames held of ``segment_range`` into a piece (its range is done, or a
        piece is full)."""
        if self._spans:
            self._pieces.append(_piece(self._layout, segment_range, self._spans))
        self._spans, self._piece_bytes = [], 0
        self._pending_bytes = sum(piece.nbytes for piece in self._pieces)

    def last(self) -> pa.Table | None:
        """The task's last block (the only one that may be small), None if no rows are left."""
        pieces = [piece for piece in self._pieces if piece.num_rows]
        self._pieces, self._pending_bytes = [], 0
        return _concat(pieces) if pieces else None


def read_ranges(
    containers: Sequence[Any],
    ranges: Sequence[Any],
    layout: BlockLayout,
    block_bytes: int = BLOCK_BYTES_DEFAULT,
    *,
    read_bytes: int = READ_BYTES_MAX,
    reads_in_flight: int = READS_IN_FLIGHT,
) -> Iterator[pa.Table]:
    """Body of a read task: the events of ``ranges`` (SegmentReadRanges, each read from the
    container actor at the same index) as non-empty, single-chunk tables; a block is
    passed on once its Arrow size exceeds ``block_bytes`` (holding at most about that much
    payload plus one event), the task's last block is the only smaller one.

    The ranges are cut into read calls of at most ``read_bytes`` at fixed offsets, and up to
    ``reads_in_flight`` of them are outstanding at once, across ranges (so the ranges of
    several containers are read in parallel while earlier bytes are parsed); results are
    parsed in range and offset order, a short read is completed before the next one is
    parsed. Rows of one range come in offset order, ranges one after the other. Raises
    DataCorruptionError (segment and offset named) for bytes that do not parse as frames
    or a range that ends inside an event, the container's SegmentTruncatedError /
    SegmentNotFoundError if the range's bytes are gone, SegmentStoreUnavailableError if the
    container dies or a call exceeds ``READ_CALL_TIMEOUT_S``, SerializationError for an
    event the serializer cannot decode; InvalidArgumentError for ``read_bytes`` or
    ``reads_in_flight`` below 1.
    """
    for name, value in (("read_bytes", read_bytes), ("reads_in_flight", reads_in_flight)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"{name} must be an int >= 1, got {value!r}")
    windows = _windows(ranges, read_bytes)
    in_flight: deque[tuple[int, int, int, Any]] = deque()

    def refill() -> None:
        while len(in_flight) < reads_in_flight:
            window = next(windows, None)
            if window is None:
                return
            index, offset, length = window
            call = containers[index].read.remote(ranges[index].segment, offset, length, 0.0)
            in_flight.append((index, offset, length, call))

    builder = _BlockBuilder(layout, block_bytes)
    current, frames = -1, FrameScanner()
    refill()
    while in_flight:
        index, offset, length, call = in_flight.popleft()
        refill()  # the next calls run while this one's bytes are parsed
        if index != current:
            if current >= 0:
                _end_of_range(ranges[current], frames)
                builder.end_range(ranges[current])
            current, frames = index, FrameScanner()
        segment_range = ranges[index]
        for at, data in _window_bytes(containers[index], segment_range, offset, length, call):
            try:
                spans = frames.feed(data, at)
            except DataCorruptionError as error:
                name = segment_range.segment
                raise DataCorruptionError(
                    f"{name}: bytes read at offset {at} are not event frames: {error}",
                    segment=name,
                    offset=at,
                ) from None
            block = builder.add(segment_range, spans)
            if block is not None:
                yield block
    if current >= 0:
        _end_of_range(ranges[current], frames)
        builder.end_range(ranges[current])
    block = builder.last()
    if block is not None:
        yield block


def _window_bytes(
    container: Any, segment_range: Any, offset: int, length: int, call: Any
) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` of the window ``[offset, offset + length)`` of ``segment_range``:
    ``call``'s result, then, if the container returned fewer bytes (a read stops at a chunk's
    end), further reads of the rest."""
    from pravega_ray_actors.ray_calls import call_with_unwrap  # Ray's errors unwrap in one place

    name, end = segment_range.segment, offset + length
    while offset < end:
        if call is None:
            call = container.read.remote(name, offset, end - offset, 0.0)
        try:
            result = call_with_unwrap(call, READ_CALL_TIMEOUT_S)
        except SegmentStoreUnavailableError as error:
            raise SegmentStoreUnavailableError(
                f"reading {name} at offset {offset} failed: {error}"
            ) from None
        call = None
        data = result.data[: end - offset]
        if not data:
            raise DataCorruptionError(
                f"{name} ends at {result.segment_length}, before the range's end "
                f"{segment_range.end_offset}",
                segment=name,
                offset=offset,
            )
        yield offset, data
        offset += len(data)


def _end_of_range(segment_range: Any, frames: FrameScanner) -> None:
    """DataCorruptionError if the range's bytes end inside an event."""
    if frames.buffered_bytes:
        name, end = segment_range.segment, segment_range.end_offset
        raise DataCorruptionError(
            f"{name}: the range [{segment_range.start_offset}, {end}) ends inside an event "
            f"({frames.buffered_bytes} bytes of a frame)",
            segment=name,
            offset=end - frames.buffered_bytes,
        )


def _piece(layout: BlockLayout, segment_range: Any, spans: list[FrameSpans]) -> pa.Table:
    """The rows of the frames of ``spans`` of one range (raw mode: no object per event)."""
    if layout.mode == "raw":
        return raw_events_table(
            segment_range.scope, segment_range.stream, segment_range.segment_id, spans
        )
    events = [event for s in spans for event in s.events()]
    offsets = [offset for offset, _ in events]
    payloads = [payload for _, payload in events]
    return events_table(
        layout,
        segment_range.scope,
        segment_range.stream,
        segment_range.segment,
        segment_range.segment_id,
        offsets,
        payloads,
    )
