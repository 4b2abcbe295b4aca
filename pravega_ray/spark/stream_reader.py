"""Batch-read a stream between two cuts into a Spark DataFrame (RayDP), like Pravega's Spark
connector, on the read tasks of the Ray Data reader (``pravega_ray.data``).

Path of the data (columns Spark's JVM reads from Arrow, :func:`jvm_readable`)::

    plan_read (driver): names, cuts, serializer checked; batch client ranges between the cuts
    arrow_stream_blocks(plan, executor cores)   -> plain Ray tasks (0.25 CPU, streaming
                                                   generators), each reading several ranges
                                                   with event_blocks.read_ranges (many read
                                                   calls in flight), each block one Arrow IPC
                                                   stream (bytes) in Ray's store; the driver
                                                   waits for all (errors raised here)
    _jvm_frame: RayDP's RayDatasetRDD          -> one Spark partition per block, read by the
                + ArrowConverters (JVM)           executor's JVM from Ray's store: no Python
                                                  worker, no pandas

Other columns (timestamps, decimals, nested, ...) take RayDP's pandas path::

    dataset_of(plan, read_tasks_max=executor cores)      -> a Ray Data read
    spark_ready_blocks: iter_internal_ref_bundles         -> block refs (empty dropped,
                                                             multi-chunk combined)
    raydp ray_dataset_to_spark_dataframe(schema, refs)    -> one Spark partition per block,
                                                             to_pandas in a Python worker

Why the shape (measured, see ``docs/spark.md`` and ``docs/benchmarks.md``):

* Each block becomes one Spark partition, and a partition costs a Spark task, so the number of
  read tasks is the executors' total cores (blocks close at Ray Data's target block size).
* Ray Data's executor costs a fixed start per read, and RayDP's pandas conversion a Python
  object per row and a second Arrow conversion in the executor; the JVM path has neither.
  ``ray.data.from_arrow(rows).to_spark()`` (the measure of the goal) pays the pandas one.
* On the pandas path every block handed to Spark must be a non-empty table whose columns are
  one contiguous chunk each: pandas 3 backs string columns with the Arrow chunks, and PySpark
  3.5's ``mapInPandas`` output path fails on the resulting ``ChunkedArray`` ("Expected Array,
  got ChunkedArray"). The read tasks build single-chunk blocks (``event_blocks``), empty
  blocks are dropped here, and an empty read is an empty DataFrame built by Spark directly.
* The block refs go to RayDP directly with the schema the plan knows: ``Dataset.to_spark``
  would ask the Dataset for its schema first, which may run part of the read a second time.

The read is a snapshot: each range ends at the end cut or at its segment's length when
``read_stream`` was called; later appends are not included.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pravega_ray.data.event_blocks import EVENT_ARROW_SCHEMA, EVENT_COLUMNS, READ_TASK_CPUS
from pravega_ray.errors import IllegalStateError, InvalidArgumentError
from pravega_ray.naming import parse_scoped_stream

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "EVENT_ARROW_SCHEMA",
    "EVENT_COLUMNS",
    "READ_TASK_CPUS",
    "arrow_ipc_bytes",
    "arrow_stream_blocks",
    "jvm_readable",
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
    store (as Arrow IPC blocks Spark's JVM reads directly, or, for column types it does not
    take as Arrow, table blocks RayDP converts through pandas), where RayDP keeps it
    referenced until Spark stops; the DataFrame reads it from there.

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

    tasks = _executor_core_count(spark)
    if jvm_readable(arrow_schema):
        ipc_refs = arrow_stream_blocks(plan, tasks)
        if not ipc_refs:
            return spark.createDataFrame([], spark_schema(arrow_schema))
        return _jvm_frame(spark, arrow_schema, ipc_refs)
    dataset = dataset_of(plan, read_tasks_max=tasks)
    block_refs = spark_ready_blocks(dataset)
    if not block_refs:
        return spark.createDataFrame([], spark_schema(arrow_schema))
    from raydp.spark import ray_dataset_to_spark_dataframe

    frame: DataFrame = ray_dataset_to_spark_dataframe(spark, arrow_schema, block_refs)
    return frame


def jvm_readable(arrow_schema: pa.Schema) -> bool:
    """Whether Spark's JVM reads every column of ``arrow_schema`` from Arrow IPC as it is
    (binary, string, bool, signed integers, float32/64, date32); other types (timestamps,
    decimals, nested, large or unsigned types) go through RayDP's pandas conversion."""
    return all(_jvm_readable_type(field.type) for field in arrow_schema)


def _jvm_readable_type(arrow_type: pa.DataType) -> bool:
    types = pa.types
    return bool(
        types.is_binary(arrow_type)
        or types.is_string(arrow_type)
        or types.is_boolean(arrow_type)
        or types.is_signed_integer(arrow_type)
        or types.is_float32(arrow_type)
        or types.is_float64(arrow_type)
        or types.is_date32(arrow_type)
    )


def arrow_ipc_bytes(table: pa.Table) -> bytes:
    """``table`` as one Arrow IPC stream (uncompressed), as Spark's ``ArrowConverters`` read
    it; a ``bytes`` object, which Ray stores in a form its Java workers read."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def _ipc_read_task(
    containers: list[Any], ranges: list[Any], layout: Any, block_bytes: int
) -> Iterator[bytes | int]:
    """Body of a Spark read task (a Ray streaming generator): each block of
    ``event_blocks.read_ranges`` as Arrow IPC bytes, then the number of blocks (so the
    caller learns the task's outcome from one small object; a failure is that object)."""
    from pravega_ray.data.event_blocks import read_ranges

    blocks = 0
    for table in read_ranges(containers, ranges, layout, block_bytes):
        yield arrow_ipc_bytes(table)
        blocks += 1
    yield blocks


@functools.cache
def _ipc_read_remote() -> Any:
    """The Spark read task, built on first use (importing this loads no Ray)."""
    import ray

    return ray.remote(num_cpus=READ_TASK_CPUS, max_retries=1, num_returns="streaming")(
        _ipc_read_task
    )


def arrow_stream_blocks(plan: Any, tasks_max: int, block_bytes: int | None = None) -> list[Any]:
    """Read ``plan``'s ranges in at most ``tasks_max`` Ray tasks (ranges balanced by bytes,
    ``datasource.group_ranges``) and return the refs of the blocks, as Arrow IPC bytes, in
    task order (each task's blocks in its ranges' order); waits for every task.

    No Ray Data execution: each task is a plain streaming-generator task reading its ranges
    with ``event_blocks.read_ranges`` (blocks closed at ``block_bytes``, default Ray Data's
    target block size). Raises a task's pravega-ray error unwrapped (the first failed task's,
    in task order), see :func:`read_stream`.
    """
    from pravega_ray.data.datasource import block_bytes_target, group_ranges, typed_read_errors
    from pravega_ray_actors.ray_calls import call_with_unwrap

    size = block_bytes_target() if block_bytes is None else block_bytes
    read = _ipc_read_remote()
    generators = [
        read.remote(
            [plan.containers[i] for i in group], [plan.ranges[i] for i in group], plan.layout, size
        )
        for group in group_ranges([r.length for r in plan.ranges], tasks_max)
    ]
    refs: list[Any] = []
    for generator in generators:
        produced = list(generator)
        if not produced:  # Ray's contract, checked: a task yields its count or its error
            raise IllegalStateError("a read task produced nothing, not even its outcome")
        with typed_read_errors():
            blocks = call_with_unwrap(produced[-1])
        if blocks != len(produced) - 1:  # Ray's contract, checked: a lost block is a lost row
            raise IllegalStateError(
                f"a read task reported {blocks} blocks but produced {len(produced) - 1}"
            )
        refs.extend(produced[:-1])
    return refs


def _jvm_frame(spark: SparkSession, arrow_schema: pa.Schema, refs: list[Any]) -> DataFrame:
    """The DataFrame of the Arrow IPC blocks ``refs``: one Spark partition per block, read by
    the executor's JVM straight from Ray's object store (RayDP's ``RayDatasetRDD`` and
    Spark's ``ArrowConverters``), no Python worker and no pandas on the way.

    The refs are handed to RayDP's master actor, which holds them until Spark stops (as
    RayDP's own ``to_spark`` does): the DataFrame can be evaluated any number of times.
    """
    import uuid

    import ray
    from pyspark.sql import DataFrame
    from raydp.spark.dataset import get_locations
    from raydp.spark.ray_cluster_master import RAYDP_SPARK_MASTER_SUFFIX

    holder = ray.get_actor(spark.sparkContext.appName + RAYDP_SPARK_MASTER_SUFFIX)
    ray.get(holder.add_objects.remote(uuid.uuid4(), refs))
    jvm: Any = spark.sparkContext._jvm
    rdd = jvm.org.apache.spark.rdd.RayDatasetRDD(
        spark._jsc, [ref.binary() for ref in refs], get_locations(refs)
    )
    reader = jvm.org.apache.spark.sql.raydp.ObjectStoreReader
    jdf = reader.RayDatasetToDataFrame(spark._jsparkSession, rdd, spark_schema(arrow_schema).json())
    return DataFrame(jdf, spark)


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
