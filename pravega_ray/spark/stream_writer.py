"""``pr.spark.write_stream``: a Spark DataFrame into a stream, exactly once, written by the
Spark executors themselves.

Path of the data::

    driver    WriteRun.begin                  -> the write's record (write_log.py): a write id
                                                 committed before returns at once
    executors df.mapInArrow(_PartitionWriter) -> each partition, in the Python worker of the
                                                 executor that holds it, into one transaction
                                                 (write_partition, datasink.py); returns one
                                                 row: partition, txn id, events, bytes
    driver    WriteRun.commit(rows)           -> COMMITTING, commit in partition order,
                                                 COMMITTED (or WriteRun.abort on failure)

No conversion to Ray Data and no Ray task beside the executor: the rows go from the JVM to
the executor's Python worker as Arrow batches and from there to the segment containers.

The executor's Python worker is not a Ray worker: the driver puts the cluster's GCS address
and Ray namespace in the closure, and the worker joins Ray with them once per process
(Spark reuses its Python workers, so later tasks pay nothing), without Ray's log
forwarding (its output goes to the executor's log, which Ray forwards to drivers: it would
loop); it leaves Ray when the process ends (``ray.shutdown`` at exit, or the GCS sees the
connection close when Spark's daemon ends the worker with ``os._exit``).

Exactly once across Spark's task retries: a partition task records its transaction in the
write's record before writing to it and commits nothing. An attempt that fails (at any
point, even after writing everything) is retried by Spark under a new transaction; the
driver commits only the transactions of the attempts whose rows Spark returned (one per
partition) and aborts every other recorded one. A pravega-ray error in a task (a null
event, an event too large, a serializer's error) is returned to the driver, which raises it
typed, rather than retried: it would fail again.
"""

from __future__ import annotations

import atexit
import logging
import pickle
import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pravega_ray.data.datasink import (
    WRITE_TXN_LEASE_S,
    PartitionResult,
    WriteRun,
    WriteStreamResult,
    _check_options,
    _check_stream,
    write_partition,
)
from pravega_ray.data.write_log import check_write_id
from pravega_ray.data.write_rows import check_schema, check_serializer_kind
from pravega_ray.errors import IllegalStateError, InvalidArgumentError, PravegaError
from pravega_ray.naming import parse_scoped_stream

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["write_stream"]

RESULT_SCHEMA = "task long, txn string, events long, bytes long, error binary"
"""One row per partition task: what :func:`write_partition` returned, or the pickled
pravega-ray error that failed it."""

_ray_lock = threading.Lock()


def _join_ray(gcs_address: str, namespace: str) -> Any:
    """The cluster, joining Ray first if this process has not (an executor's Python worker;
    in the driver, or a Ray worker, Ray runs already and the address is not used)."""
    import ray

    from pravega_ray.cluster import connect

    with _ray_lock:
        if not ray.is_initialized():
            # log_to_driver off: this process's output goes to the executor's log, which Ray
            # would send back to every driver, this one included (a loop).
            ray.init(
                address=gcs_address,
                namespace=namespace,
                log_to_driver=False,
                include_dashboard=False,
                logging_level=logging.WARNING,
            )
            atexit.register(ray.shutdown)
        return connect(gcs_address, namespace=namespace)


class _PartitionWriter:
    """The function ``mapInArrow`` runs on each partition (pickled to the executors)."""

    def __init__(
        self,
        gcs_address: str,
        namespace: str,
        scope: str,
        stream: str,
        write_id: str,
        run_id: str,
        routing_key_column: str | None,
        serializer: Any,
        lease_s: float,
    ) -> None:
        self.gcs_address = gcs_address
        self.namespace = namespace
        self.scope = scope
        self.stream = stream
        self.write_id = write_id
        self.run_id = run_id
        self.routing_key_column = routing_key_column
        self.serializer = serializer
        self.lease_s = lease_s

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        index = context.partitionId() if context is not None else 0
        try:
            cluster = _join_ray(self.gcs_address, self.namespace)
            result = write_partition(
                cluster,
                self.scope,
                self.stream,
                self.write_id,
                self.run_id,
                (pa.Table.from_batches([batch]) for batch in batches),
                self.routing_key_column,
                self.serializer,
                self.lease_s,
                index,
            )
            self.after_write(result)
            row: list[Any] = [index, result.txn_id, result.events, result.bytes, None]
        except PravegaError as e:  # the data's fault: a retry would fail again
            row = [index, None, 0, 0, pickle.dumps(e)]
        yield pa.RecordBatch.from_arrays(
            [pa.array([value]) for value in row],
            schema=pa.schema(
                [
                    ("task", pa.int64()),
                    ("txn", pa.string()),
                    ("events", pa.int64()),
                    ("bytes", pa.int64()),
                    ("error", pa.binary()),
                ]
            ),
        )

    def after_write(self, result: PartitionResult) -> None:
        """Called once the partition is in its (uncommitted) transaction; nothing here.
        (Tests make an attempt fail at this point.)"""


def write_stream(
    df: DataFrame,
    scoped_stream: str,
    routing_key_column: str | None = None,
    *,
    serializer: Any = None,
    cluster: Any = None,
    write_id: str | None = None,
    lease_s: float = WRITE_TXN_LEASE_S,
    min_rows_per_write: int | None = None,
) -> WriteStreamResult:
    """Write the rows of ``df`` into ``scoped_stream`` exactly once (see
    :func:`pravega_ray.data.write_stream` for rows -> events, ``write_id`` and the errors).

    Each partition is written by the executor that holds it, into one transaction; all
    are committed (in partition order) once every partition task succeeded, none if one
    failed. ``min_rows_per_write``: partitions are coalesced to about ``df.count() /
    min_rows_per_write`` of them (fewer, larger transactions; costs a count). Without a
    serializer ``df`` needs a column ``event`` (binary or string). Raises also
    InvalidArgumentError if ``df`` is not a Spark DataFrame, IllegalStateError if Ray is
    not initialized. An empty DataFrame writes nothing and succeeds.
    """
    return _write_dataframe(
        df,
        scoped_stream,
        routing_key_column,
        serializer=serializer,
        cluster=cluster,
        write_id=write_id,
        lease_s=lease_s,
        min_rows_per_write=min_rows_per_write,
    )


def _write_dataframe(
    df: DataFrame,
    scoped_stream: str,
    routing_key_column: str | None,
    *,
    serializer: Any,
    cluster: Any,
    write_id: str | None,
    lease_s: float,
    min_rows_per_write: int | None,
    partition_writer: type[_PartitionWriter] = _PartitionWriter,
) -> WriteStreamResult:
    """:func:`write_stream`, with the partition function's class as a parameter (tests)."""
    scope, stream = parse_scoped_stream(scoped_stream)
    if routing_key_column is not None and not isinstance(routing_key_column, str):
        raise InvalidArgumentError(
            f"routing_key_column must be a str or None, got {routing_key_column!r}"
        )
    check_serializer_kind(serializer)
    given_id = check_write_id(write_id)
    lease = _check_options(lease_s, min_rows_per_write, None)
    from pyspark.sql import DataFrame as SparkDataFrame

    if not isinstance(df, SparkDataFrame):
        raise InvalidArgumentError(f"df must be a Spark DataFrame, got {type(df).__name__}")
    import ray

    if not ray.is_initialized():
        raise IllegalStateError("Ray is not initialized: call pr.start_local() or pr.connect()")
    from pyspark.sql.pandas.types import to_arrow_schema

    # Cheap checks first: the columns (Spark's schema) need no Spark job.
    check_schema(to_arrow_schema(df.schema), routing_key_column, serializer)
    if cluster is None:
        from pravega_ray.cluster import connect

        cluster = connect()
    _check_stream(cluster, scope, stream)
    run = WriteRun.begin(cluster, scope, stream, given_id, lease)
    if isinstance(run, WriteStreamResult):
        return run
    try:
        if min_rows_per_write is not None:
            wanted = max(1, -(-df.count() // min_rows_per_write))
            if wanted < df.rdd.getNumPartitions():
                df = df.coalesce(wanted)
        task = partition_writer(
            ray.get_runtime_context().gcs_address,
            cluster.namespace,
            scope,
            stream,
            run.write_id,
            run.run_id,
            routing_key_column,
            serializer,
            lease,
        )
        try:
            rows = df.mapInArrow(task, RESULT_SCHEMA).collect()
            errors = [pickle.loads(r["error"]) for r in rows if r["error"] is not None]
            if errors:
                raise errors[0]
        except BaseException as e:
            run.abort(e)
            raise
        return run.commit(
            PartitionResult(r["task"], r["txn"], r["events"], r["bytes"]) for r in rows
        )
    finally:
        run.close()
