"""Batch-read a stream between two cuts into a Spark DataFrame (RayDP), like Pravega's Spark
connector, on top of the Ray Data reader (``pravega_ray.data``).

Path of the data::

    plan_read (driver): names, cuts, serializer checked; batch client ranges between the cuts
    dataset_of(plan, read_tasks_max=executor cores)      -> a Ray Data read: each task reads
       (0.25 CPU each)                                       several ranges into shared blocks
    spark_ready_blocks: iter_internal_ref_bundles         -> block refs (read once, in Ray's store;
                                                             empty dropped, multi-chunk combined)
    raydp ray_dataset_to_spark_dataframe(schema, refs)    -> one Spark partition per block

Why the shape (measured, see ``docs/spark.md`` and ``docs/benchmarks.md``):

* Each Ray block becomes one Spark partition and costs ~0.25 s to hand over, so the number of
  read tasks (hence blocks) is the executors' total cores, not the number of segment ranges.
* Every block handed to Spark must be a non-empty table whose columns are one contiguous chunk
  each. RayDP converts a block with ``to_pandas()``; pandas 3 backs string columns with the
  Arrow chunks, and PySpark 3.5's ``mapInPandas`` output path then fails on the resulting
  ``ChunkedArray`` ("Expected Array, got ChunkedArray"). Multi-chunk tables (``concat_tables``,
  Ray Data's ``repartition``, its output buffer merging small blocks) and empty tables (zero
  chunks) trigger it. The read tasks build single-chunk blocks closed at Ray Data's target block
  size (``pravega_ray/data/event_blocks.py``), empty blocks are dropped here, and an empty read
  is an empty DataFrame built by Spark directly.
* The block refs go to RayDP directly with the schema the plan knows: ``Dataset.to_spark`` would
  ask the Dataset for its schema first, which may run part of the read a second time.

The read is a snapshot: each range ends at the end cut or at its segment's length when
``read_stream`` was called; later appends are not included.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pravega_ray.data.event_blocks import EVENT_ARROW_SCHEMA, EVENT_COLUMNS, READ_TASK_CPUS
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.naming import parse_scoped_stream

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "EVENT_ARROW_SCHEMA",
    "EVENT_COLUMNS",
    "READ_TASK_CPUS",
    "read_stream",
    "spark_event_schema",
    "spark_ready_blocks",
    "spark_schema",
]


def spark_schema(arrow_schema: pa.Schema) -> StructType:
    """The Spark schema RayDP makes of ``arrow_schema`` (names, types and nullability)."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    return StructType(
        [StructField(f.name, from_arrow_type(f.type), nullable=f.nullable) for f in arrow_schema]
    )


def spark_event_schema() -> StructType:
    """The Spark schema of :func:`read_stream`'s DataFrame without a serializer (as Pravega's
    Spark connector: binary ``event``, string ``scope``/``stream``, long ``segment_id``/``offset``;
    nothing nullable)."""
    return spark_schema(EVENT_ARROW_SCHEMA)


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
    serializer: Any = None,
    start: Any = None,
    end: Any = None,
) -> DataFrame:
    """Return the events of ``scoped_stream`` between two cuts as a Spark DataFrame.

    Columns as Pravega's Spark connector: ``event`` (binary payload), ``scope``, ``stream``
    (strings), ``segment_id``, ``offset`` (longs; ``offset`` is where the event's frame starts
    in its segment). With ``serializer`` a table serializer (``pr.JsonSerializer(schema)``,
    ``pr.ArrowIpcSerializer(schema)``) the event's fields follow as columns, exactly as
    ``pr.data.read_stream`` makes them (``event`` is null in the rows of a multi-row event);
    ``Utf8Serializer``/``BytesSerializer`` make ``event`` a string/binary column. Other plain
    serializers raise InvalidArgumentError (Spark needs the column type before reading).

    ``start_cut`` None: the head; ``end_cut`` None: each segment's length when this is called
    (a snapshot; later appends are not included). ``start``/``end`` are keyword aliases of
    ``start_cut``/``end_cut`` (an earlier spelling, still accepted); giving both
    spellings of one bound raises InvalidArgumentError. Every event between the cuts is one row,
    across scalings. Rows of one segment appear in offset order within a partition; no order
    holds across segments. An empty range gives an empty DataFrame of the same schema.

    ``spark`` must be a RayDP session on the same Ray (:func:`init_spark`); ``cluster``
    defaults to ``pravega_ray.cluster.connect()``. The data is read eagerly into Ray's object
    store, where RayDP keeps it referenced until Spark stops; the DataFrame reads it from there.

    Raises :class:`InvalidNameError` for a malformed name and InvalidArgumentError for a bad
    cut or serializer (before touching Ray or Spark), IllegalStateError if Ray is not
    initialized, ScopeNotFoundError / StreamNotFoundError from the controller, and from the
    read itself SegmentStoreUnavailableError (a container died), DataCorruptionError (bytes
    that do not parse as events), SegmentTruncatedError (a range truncated meanwhile),
    SerializationError (an event that does not decode).
    """
    parse_scoped_stream(scoped_stream)
    start_cut = cut_alias("start", start_cut, start)
    end_cut = cut_alias("end", end_cut, end)
    from pravega_ray.data.datasource import dataset_of, plan_read
    from pravega_ray.data.event_blocks import layout_for

    if layout_for(serializer).schema is None:
        raise InvalidArgumentError(
            f"Spark needs column types before reading; {serializer!r} has none: pass a table "
            "serializer (JsonSerializer(schema), ArrowIpcSerializer(schema)) or none"
        )
    plan = plan_read(scoped_stream, start_cut, end_cut, serializer, cluster)
    arrow_schema = plan.layout.schema
    assert arrow_schema is not None
    if not plan.ranges:
        return spark.createDataFrame([], spark_schema(arrow_schema))

    dataset = dataset_of(plan, read_tasks_max=_executor_core_count(spark))
    block_refs = spark_ready_blocks(dataset)
    if not block_refs:
        return spark.createDataFrame([], spark_schema(arrow_schema))
    from raydp.spark import ray_dataset_to_spark_dataframe

    frame: DataFrame = ray_dataset_to_spark_dataframe(spark, arrow_schema, block_refs)
    return frame


def cut_alias(bound: str, cut: Any, alias: Any) -> Any:
    """``cut`` or its alias ``alias`` (``start``/``end`` for ``start_cut``/``end_cut``).

    Raises InvalidArgumentError if both are given.
    """
    if alias is None:
        return cut
    if cut is not None:
        raise InvalidArgumentError(f"give {bound}_cut or {bound}, not both")
    return alias


def _chunk_counts_ok(table: pa.Table) -> bool:
    """Body of the check task: whether every column of ``table`` is one chunk."""
    return all(column.num_chunks == 1 for column in table.columns)


def _combined(table: pa.Table) -> pa.Table:
    """Body of the combine task: ``table`` with single-chunk columns."""
    return table.combine_chunks()


@functools.cache
def _remote_functions() -> tuple[Any, Any]:
    """The check and combine tasks, built on first use (importing this loads no Ray)."""
    import ray

    return (
        ray.remote(num_cpus=READ_TASK_CPUS, max_retries=1)(_chunk_counts_ok),
        ray.remote(num_cpus=READ_TASK_CPUS, max_retries=1)(_combined),
    )


def spark_ready_blocks(dataset: Any) -> list[Any]:
    """The Dataset's block refs, run once, as RayDP can take them: empty blocks dropped, and
    a block whose columns have several chunks (Ray Data merged a sliced block's remainder
    with the next one; rare, see ``event_blocks``) replaced by a combined copy.

    Ray Data slices only blocks of at least 1.5x its target size and merges only slice
    remainders (read tasks pass on no other small block), so a read smaller than that needs
    no check. Otherwise the check is one small task per block (0.25 CPU, zero-copy reads of
    the shared memory); only a bad block is copied. Raises a read task's pravega-ray error
    unwrapped.
    """
    import ray

    refs, metadata = [], []
    for bundle in _unwrapped(dataset.iter_internal_ref_bundles()):
        for block_ref, block_metadata in zip(bundle.block_refs, bundle.metadata, strict=True):
            if block_metadata.num_rows:
                refs.append(block_ref)
                metadata.append(block_metadata)
    from pravega_ray.data.datasource import block_bytes_target

    if sum(m.size_bytes or 0 for m in metadata) < 1.5 * block_bytes_target():
        return refs  # no block reached the size Ray Data slices at: nothing was merged
    check, combine = _remote_functions()
    flags = ray.get([check.remote(ref) for ref in refs])
    return [ref if ok else combine.remote(ref) for ref, ok in zip(refs, flags, strict=True)]


def _unwrapped(bundles: Any) -> Any:
    """The bundles, raising a read task's typed pravega-ray error as itself."""
    from pravega_ray.data.datasource import typed_read_errors

    with typed_read_errors():
        yield from bundles
