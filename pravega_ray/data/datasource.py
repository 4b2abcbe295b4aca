"""``pr.data.read_stream``: a Ray Data datasource reading a stream between two cuts.

One read task per :class:`~pravega_ray.SegmentReadRange` the batch client lists between
the cuts (across epochs). A task reads its range from the segment's container actor and
yields Arrow blocks with the columns of Pravega's Spark connector, ``event`` (binary),
``scope``, ``stream``, ``segment_id`` and ``offset``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pravega_ray.errors import IllegalStateError, InvalidArgumentError
from pravega_ray.naming import parse_scoped_stream
from pravega_ray.stream_cut import StreamCut

if TYPE_CHECKING:
    import ray.data

    from pravega_ray.client.batch_client import SegmentReadRange

__all__ = ["StreamDatasource", "read_stream"]


def _check_cut(cut: object, what: str) -> StreamCut | None:
    if cut is not None and not isinstance(cut, StreamCut):
        raise InvalidArgumentError(f"{what} must be a pr.StreamCut or None, got {cut!r}")
    return cut


def _read_range(container: Any, segment_range: SegmentReadRange) -> Iterator[pa.Table]:
    """Body of one read task: the range's events as single-chunk Arrow tables."""
    from pravega_ray.spark.stream_reader import (
        BLOCK_BYTES_TARGET,
        _read_segment_pieces,
        _SegmentRead,
    )

    segment = _SegmentRead(
        segment_range.segment,
        segment_range.segment_id,
        segment_range.start_offset,
        segment_range.end_offset,
    )
    for piece in _read_segment_pieces(
        container, segment_range.scope, segment_range.stream, segment, BLOCK_BYTES_TARGET
    ):
        if isinstance(piece, pa.Table):
            yield piece


class StreamDatasource:
    """Placeholder; replaced by the real ``ray.data.Datasource`` subclass below."""


def _datasource_class() -> type:
    from ray.data import Datasource
    from ray.data.block import BlockMetadata
    from ray.data.datasource import ReadTask

    from pravega_ray.spark.stream_reader import EVENT_ARROW_SCHEMA

    class _StreamDatasource(Datasource):
        """Segment ranges of one stream between two cuts, one read task each."""

        def __init__(self, cluster: Any, ranges: list[SegmentReadRange]) -> None:
            self._ranges = [r for r in ranges if r.length > 0]
            self._containers = [cluster.container_handle(r.segment) for r in self._ranges]

        def get_name(self) -> str:
            return "PravegaStream"

        def estimate_inmemory_data_size(self) -> int | None:
            return sum(r.length for r in self._ranges)

        def get_read_tasks(
            self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
        ) -> list[ReadTask]:
            return [
                ReadTask(
                    lambda c=container, r=segment_range: _read_range(c, r),
                    BlockMetadata(num_rows=None, size_bytes=segment_range.length, exec_stats=None),
                    schema=EVENT_ARROW_SCHEMA,
                    per_task_row_limit=per_task_row_limit,
                )
                for container, segment_range in zip(self._containers, self._ranges, strict=True)
            ]

    return _StreamDatasource


def read_stream(
    scoped_stream: str,
    start_cut: StreamCut | None = None,
    end_cut: StreamCut | None = None,
    serializer: Any = None,
    *,
    cluster: Any = None,
) -> ray.data.Dataset:
    """The events of ``scoped_stream`` between ``start_cut`` and ``end_cut`` as a Dataset.

    ``start_cut`` None: the head; ``end_cut`` None: the tail when called. Columns:
    ``event`` (binary), ``scope``, ``stream``, ``segment_id``, ``offset``. Raises
    InvalidNameError, InvalidArgumentError (bad cuts), IllegalStateError (Ray not
    initialized), StreamNotFoundError.
    """
    scope, stream = parse_scoped_stream(scoped_stream)
    _check_cut(start_cut, "start_cut")
    _check_cut(end_cut, "end_cut")
    if serializer is not None:
        raise InvalidArgumentError("serializer is not supported yet")
    import ray
    import ray.data

    if not ray.is_initialized():
        raise IllegalStateError("Ray is not initialized: call pr.start_local() or pr.connect()")
    if cluster is None:
        from pravega_ray.cluster import connect

        cluster = connect()
    ranges = cluster.batch_client().segment_ranges(scope, stream, start_cut, end_cut)
    source = _datasource_class()(cluster, ranges)
    from pravega_ray.spark.stream_reader import READ_TASK_CPUS

    return ray.data.read_datasource(source, ray_remote_args={"num_cpus": READ_TASK_CPUS})
