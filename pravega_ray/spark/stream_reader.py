"""Batch-read a whole stream into a Spark DataFrame (RayDP), like Pravega's Spark connector.

Path of the data::

    list_segments + get_info per segment (driver)   -> a snapshot: [start_offset, length)
    one Ray task per non-empty segment                -> reads the container actor in chunks of
       (streaming generator, 0.25 CPU)                   READ_BYTES_MAX, parses frames, yields
                                                         pyarrow pieces of <= BLOCK_BYTES_TARGET
    coalesce pieces into ~executor-core-count blocks  -> one concat task per multi-piece block
    ray.data.from_arrow_refs(blocks).to_spark(spark)  -> one Spark partition per block

Why the shape (measured, see ``docs/stack.md`` and ``docs/spark.md``):

* Each Ray block becomes one Spark partition and costs ~0.25 s to hand over, so
  the number of blocks is kept near the executors' total cores, not the number
  of segments.
* Every block handed to Spark must be a non-empty table whose columns are one
  contiguous chunk each. RayDP converts a block with ``to_pandas()``; pandas 3
  backs string columns with the Arrow chunks, and PySpark 3.5's ``mapInPandas``
  output path then fails on the resulting ``ChunkedArray`` ("Expected Array,
  got ChunkedArray"). Multi-chunk tables (``concat_tables``, Ray Data's
  ``repartition``) and empty tables (zero chunks) both trigger it, so pieces
  are built from single arrays, concatenations are ``combine_chunks()``-ed, and
  empty segments are never read. An empty stream is an empty DataFrame built
  by Spark directly.
* A block is bounded (about ``2 * BLOCK_BYTES_TARGET`` of payload) so the
  Arrow ``binary`` column never nears its 2 GiB offset limit.

The read is a snapshot: each segment is read from its start offset to the
length it had when ``read_stream`` was called; later appends are not included.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pravega_ray.client.event_framing import FrameAssembler
from pravega_ray.constants import MIB, READ_BYTES_MAX
from pravega_ray.errors import (
    DataCorruptionError,
    IllegalStateError,
    SegmentStoreUnavailableError,
)
from pravega_ray.naming import parse_scoped_stream

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "BLOCK_BYTES_TARGET",
    "EVENT_ARROW_SCHEMA",
    "EVENT_COLUMNS",
    "READ_CALL_TIMEOUT_S",
    "READ_TASK_CPUS",
    "plan_blocks",
    "read_stream",
    "spark_event_schema",
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
"""Arrow schema of every block; maps to the connector's Spark schema (no column is nullable)."""

BLOCK_BYTES_TARGET = 64 * MIB
"""A read task closes a piece once it holds this many payload bytes; blocks stay under ~2x it."""

READ_TASK_CPUS = 0.25
"""Ray CPUs per read or concat task: small, so tasks run beside a Spark executor on 2 CPUs."""

READ_CALL_TIMEOUT_S = 120.0
"""Longest wait for one container read or info call before the read fails as unavailable."""


def spark_event_schema() -> StructType:
    """The Spark schema of :func:`read_stream`'s DataFrame (as Pravega's Spark connector)."""
    from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

    return StructType(
        [
            StructField("event", BinaryType(), nullable=False),
            StructField("scope", StringType(), nullable=False),
            StructField("stream", StringType(), nullable=False),
            StructField("segment_id", LongType(), nullable=False),
            StructField("offset", LongType(), nullable=False),
        ]
    )


@dataclass(frozen=True, slots=True)
class _SegmentRead:
    """One segment's part of the snapshot: bytes ``[start_offset, end_offset)``."""

    name: str
    segment_id: int
    start_offset: int
    end_offset: int

    @property
    def length_bytes(self) -> int:
        return self.end_offset - self.start_offset


def plan_blocks(
    piece_bytes: Sequence[int], target_blocks: int, block_bytes_target: int = BLOCK_BYTES_TARGET
) -> list[list[int]]:
    """Group pieces (by index) into the blocks handed to Spark.

    Makes ``min(len(pieces), max(target_blocks, ceil(total / block_bytes_target)))``
    groups, balanced by bytes (largest piece first onto the lightest group), so
    no group exceeds ``total / groups + largest piece``. Each group lists its
    piece indices in ascending order, so pieces of one segment stay in offset
    order inside a block. Groups are returned in order of their first piece;
    none is empty. Raises ``ValueError`` if ``target_blocks`` or
    ``block_bytes_target`` is not positive or a size is negative.
    """
    if target_blocks < 1 or block_bytes_target < 1:
        raise ValueError("target_blocks and block_bytes_target must be positive")
    if any(size < 0 for size in piece_bytes):
        raise ValueError("piece sizes must not be negative")
    if not piece_bytes:
        return []
    total = sum(piece_bytes)
    group_count = min(len(piece_bytes), max(target_blocks, math.ceil(total / block_bytes_target)))
    groups: list[list[int]] = [[] for _ in range(group_count)]
    loads = [(0, g) for g in range(group_count)]  # (bytes, group index): a min-heap
    heapq.heapify(loads)
    for index in sorted(range(len(piece_bytes)), key=lambda i: (-piece_bytes[i], i)):
        load, group = heapq.heappop(loads)
        groups[group].append(index)
        heapq.heappush(loads, (load + piece_bytes[index], group))
    result = [sorted(group) for group in groups if group]
    result.sort(key=lambda group: group[0])
    return result


def _events_table(
    scope: str, stream: str, segment_id: int, offsets: list[int], payloads: list[bytes]
) -> pa.Table:
    """A single-chunk table of parsed events (see the module docstring for why one chunk)."""
    count = len(offsets)
    return pa.Table.from_arrays(
        [
            pa.array(payloads, type=pa.binary()),
            pa.repeat(pa.scalar(scope, pa.string()), count),
            pa.repeat(pa.scalar(stream, pa.string()), count),
            pa.repeat(pa.scalar(segment_id, pa.int64()), count),
            pa.array(offsets, type=pa.int64()),
        ],
        schema=EVENT_ARROW_SCHEMA,
    )


def _read_segment_pieces(
    container: Any, scope: str, stream: str, segment: _SegmentRead, piece_bytes_target: int
) -> Iterator[pa.Table | list[int]]:
    """Body of the read task: yield non-empty single-chunk tables covering the segment range.

    After the tables it yields one last item, the list of their payload byte
    counts. The caller gets that item to learn the sizes and, above all, to
    surface a failure: a streaming generator that raises ends with a reference
    holding the error instead of raising where it is iterated.

    Reads with ``wait_s=0`` in calls of at most ``READ_BYTES_MAX`` bytes. Raises
    :class:`DataCorruptionError` if the range does not end on an event boundary,
    :class:`IllegalStateError` if the container returns no data before the
    snapshot's end (the segment was truncated or deleted meanwhile), and
    :class:`SegmentStoreUnavailableError` if the container actor dies or a call
    exceeds ``READ_CALL_TIMEOUT_S``.
    """
    from actors.ray_calls import call_with_unwrap  # Ray's errors unwrap in one place

    offset = segment.start_offset
    frames = FrameAssembler()  # a frame cut by a read; a large event assembled in place
    offsets: list[int] = []
    payloads: list[bytes] = []
    pending_bytes = 0
    piece_sizes: list[int] = []
    while offset < segment.end_offset:
        want = min(READ_BYTES_MAX, segment.end_offset - offset)
        try:
            result = call_with_unwrap(
                container.read.remote(segment.name, offset, want, 0.0), READ_CALL_TIMEOUT_S
            )
        except SegmentStoreUnavailableError as error:
            raise SegmentStoreUnavailableError(
                f"reading {segment.name} at offset {offset} failed: {error}"
            ) from None
        data = result.data[:want]
        if not data:
            raise IllegalStateError(
                f"segment {segment.name} returned no data at offset {offset} before "
                f"its snapshot end {segment.end_offset} (truncated or deleted meanwhile?)"
            )
        events = frames.feed(data, offset)
        offset += len(data)
        for event_offset, payload in events:
            offsets.append(event_offset)
            payloads.append(payload)
            pending_bytes += len(payload)
        if pending_bytes >= piece_bytes_target:
            yield _events_table(scope, stream, segment.segment_id, offsets, payloads)
            piece_sizes.append(pending_bytes)
            offsets, payloads, pending_bytes = [], [], 0
    if frames.buffered_bytes:
        raise DataCorruptionError(
            f"segment {segment.name} ends with a partial event frame: {frames.buffered_bytes} "
            f"bytes before offset {segment.end_offset}"
        )
    if offsets:
        yield _events_table(scope, stream, segment.segment_id, offsets, payloads)
        piece_sizes.append(pending_bytes)
    yield piece_sizes


def _concat_pieces(*tables: pa.Table) -> pa.Table:
    """Body of the concat task: one single-chunk table of all pieces, in order."""
    return pa.concat_tables(tables).combine_chunks()


@functools.cache
def _remote_functions() -> tuple[Any, Any]:
    """The Ray tasks, built on first use so importing this module does not import Ray."""
    import ray

    read_task = ray.remote(num_cpus=READ_TASK_CPUS, num_returns="streaming", max_retries=0)(
        _read_segment_pieces
    )
    concat_task = ray.remote(num_cpus=READ_TASK_CPUS, max_retries=0)(_concat_pieces)
    return read_task, concat_task


def _executor_core_count(spark: SparkSession) -> int:
    """Total executor cores of the session (at least 1)."""
    conf = spark.sparkContext.getConf()
    try:
        cores = int(conf.get("spark.executor.instances", "0")) * int(
            conf.get("spark.executor.cores", "0")
        )
    except ValueError:
        cores = 0
    return max(1, cores or spark.sparkContext.defaultParallelism)


def read_stream(
    spark: SparkSession,
    scoped_stream: str,
    start_cut: Any = None,
    end_cut: Any = None,
    *,
    cluster: Any = None,
) -> DataFrame:
    """Return the events of ``scoped_stream`` between two cuts as a Spark DataFrame.

    Columns as Pravega's Spark connector: ``event`` (binary payload), ``scope``,
    ``stream`` (strings), ``segment_id``, ``offset`` (longs; ``offset`` is where
    the event's frame starts in its segment). ``start_cut`` None: the head;
    ``end_cut`` None: each segment's length when this is called (a snapshot; later
    appends are not included). Rows of one segment appear in offset order within a
    partition; no order holds across segments. An empty range gives an empty
    DataFrame of the same schema.

    ``spark`` must be a RayDP session on the same Ray (:func:`init_spark`);
    ``cluster`` defaults to ``pravega_ray.cluster.connect()``. The data is read
    eagerly into Ray's object store, where RayDP keeps it referenced until
    Spark stops; the returned DataFrame reads it from there lazily.

    Raises :class:`InvalidNameError` for a malformed name (before touching
    Ray), ``InvalidArgumentError`` for a bad cut, :class:`IllegalStateError` if Ray
    is not initialized, ``ScopeNotFoundError`` / ``StreamNotFoundError`` from the
    controller, :class:`SegmentStoreUnavailableError` if a container dies mid-read,
    and :class:`DataCorruptionError` for a segment that does not parse as events.
    """
    scope, stream = parse_scoped_stream(scoped_stream)
    import ray

    from actors.ray_calls import call_with_unwrap  # Ray's errors unwrap in one place
    from pravega_ray.data.datasource import _check_cut

    _check_cut(start_cut, "start_cut")
    _check_cut(end_cut, "end_cut")
    if not ray.is_initialized():
        raise IllegalStateError("Ray is not initialized: start it (and init_spark) first")
    if cluster is None:
        from pravega_ray.cluster import connect

        cluster = connect()

    ranges = cluster.batch_client().segment_ranges(scope, stream, start_cut, end_cut)
    reads = [
        (
            cluster.container_handle(r.segment),
            _SegmentRead(r.segment, r.segment_id, r.start_offset, r.end_offset),
        )
        for r in ranges
        if r.length > 0
    ]
    if not reads:
        return spark.createDataFrame([], spark_event_schema())

    read_task, concat_task = _remote_functions()
    generators = [
        read_task.remote(container, scope, stream, segment, BLOCK_BYTES_TARGET)
        for container, segment in reads
    ]
    ref_lists = [list(generator) for generator in generators]
    # The last reference of each task holds its piece sizes, or its error.
    sizes_lists = call_with_unwrap([refs[-1] for refs in ref_lists])
    piece_refs: list[Any] = []
    piece_bytes: list[int] = []
    for refs, sizes in zip(ref_lists, sizes_lists, strict=True):
        piece_refs.extend(refs[:-1])
        piece_bytes.extend(sizes)

    blocks = [
        piece_refs[group[0]]
        if len(group) == 1
        else concat_task.remote(*[piece_refs[index] for index in group])
        for group in plan_blocks(piece_bytes, _executor_core_count(spark))
    ]
    dataset = ray.data.from_arrow_refs(blocks)
    return dataset.to_spark(spark)
