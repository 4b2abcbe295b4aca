"""``pr.spark.write_stream``: a Spark DataFrame into a stream, exactly once.

Path of the data::

    ray.data.from_spark(df)          -> RayDP hands each Spark partition to Ray as an Arrow
                                        block (needs the add-opens flags init_spark sets)
    pr.data.write_stream(ds, ...)    -> one transaction per write task, committed together
                                        (pravega_ray/data/datasink.py)

Everything about exactly once, ``write_id`` and the errors is the Ray Data sink's. RayDP's
conversion caches the DataFrame's Arrow bytes in Spark (memory and disk) and builds each
Ray block in a task that fetches them, so a write task retried by Ray reads the same rows
again rather than a recomputed (possibly different) DataFrame.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pravega_ray.data.datasink import WRITE_TXN_LEASE_S, WriteStreamResult, committed_result
from pravega_ray.data.datasink import write_stream as _write
from pravega_ray.data.write_log import check_write_id
from pravega_ray.data.write_rows import check_schema, check_serializer_kind
from pravega_ray.errors import IllegalStateError, InvalidArgumentError
from pravega_ray.naming import parse_scoped_stream

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["write_stream"]


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

    Without a serializer ``df`` needs a column ``event`` (binary or string). Raises also
    InvalidArgumentError if ``df`` is not a Spark DataFrame, IllegalStateError if Ray is
    not initialized. An empty DataFrame writes nothing and succeeds.
    """
    parse_scoped_stream(scoped_stream)
    check_serializer_kind(serializer)
    check_write_id(write_id)
    from pyspark.sql import DataFrame as SparkDataFrame

    if not isinstance(df, SparkDataFrame):
        raise InvalidArgumentError(f"df must be a Spark DataFrame, got {type(df).__name__}")
    import ray
    import ray.data

    if not ray.is_initialized():
        raise IllegalStateError("Ray is not initialized: call pr.start_local() or pr.connect()")
    from pyspark.sql.pandas.types import to_arrow_schema

    # Cheap checks first: the columns (Spark's schema), and a write id committed before,
    # need no Spark job.
    check_schema(to_arrow_schema(df.schema), routing_key_column, serializer)
    if write_id is not None:
        done = committed_result(scoped_stream, write_id, cluster=cluster)
        if done is not None:
            return done
    ds = ray.data.from_spark(df)
    return _write(
        ds,
        scoped_stream,
        routing_key_column,
        serializer,
        cluster=cluster,
        write_id=write_id,
        lease_s=lease_s,
        min_rows_per_write=min_rows_per_write,
    )
