"""``pr.data.read_stream``: a Ray Data datasource reading a stream between two cuts.

Planning happens in the caller (``plan_read``): names, cuts and the serializer are checked
first (typed errors before any Ray work), then the batch client lists the segment ranges
between the cuts, across epochs. Each non-empty :class:`~pravega_ray.SegmentReadRange`
becomes one read task (``READ_TASK_CPUS``) that reads its range from the segment's container
actor and yields Arrow blocks (``event_blocks.read_ranges``). The Spark bridge asks for fewer
tasks (``read_tasks_max``): then a task reads several ranges into shared blocks, because each
block becomes a Spark partition and costs ~0.25 s to hand over.

The read is a snapshot: ranges end where the end cut says, or at each segment's length when
``read_stream`` was called; later appends are not included, however late the Dataset runs.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pravega_ray.data.event_blocks import (
    BLOCK_BYTES_DEFAULT,
    READ_TASK_CPUS,
    BlockLayout,
    layout_for,
    read_ranges,
)
from pravega_ray.errors import IllegalStateError, InvalidArgumentError, PravegaError
from pravega_ray.naming import parse_scoped_stream
from pravega_ray.stream_cut import StreamCut

if TYPE_CHECKING:
    import ray.data

    from pravega_ray.client.batch_client import SegmentReadRange

__all__ = [
    "ReadPlan",
    "StreamDatasource",
    "dataset_of",
    "group_ranges",
    "plan_read",
    "read_stream",
    "typed_read_errors",
]


def _check_cut(cut: object, what: str, scope: str | None = None, stream: str | None = None) -> None:
    """InvalidArgumentError unless ``cut`` is None or a StreamCut (of ``scope/stream``)."""
    if cut is None:
        return
    if not isinstance(cut, StreamCut):
        raise InvalidArgumentError(f"{what} must be a pr.StreamCut or None, got {cut!r}")
    if scope is not None and not cut.is_unbounded and (cut.scope, cut.stream) != (scope, stream):
        raise InvalidArgumentError(f"{what} is a cut of {cut.scoped_stream}, not {scope}/{stream}")


def group_ranges(range_bytes: list[int], groups_max: int | None) -> list[list[int]]:
    """Range indices per read task: one each (``groups_max`` None), else at most
    ``groups_max`` groups balanced by bytes (largest first onto the lightest), each in
    ascending index order, groups ordered by their first index, none empty.

    InvalidArgumentError if ``groups_max`` is below 1.
    """
    if groups_max is None:
        return [[i] for i in range(len(range_bytes))]
    if isinstance(groups_max, bool) or not isinstance(groups_max, int) or groups_max < 1:
        raise InvalidArgumentError(f"read_tasks_max must be an int >= 1, got {groups_max!r}")
    count = min(groups_max, len(range_bytes))
    groups: list[list[int]] = [[] for _ in range(count)]
    loads = [(0, g) for g in range(count)]
    for index in sorted(range(len(range_bytes)), key=lambda i: (-range_bytes[i], i)):
        load, group = heapq.heappop(loads)
        groups[group].append(index)
        heapq.heappush(loads, (load + range_bytes[index], group))
    result = [sorted(g) for g in groups if g]
    result.sort(key=lambda g: g[0])
    return result


@dataclass(frozen=True)
class ReadPlan:
    """What a read will do: the stream, its non-empty ranges (with their container actors)
    and the block layout. ``ranges`` empty means an empty result."""

    scope: str
    stream: str
    ranges: list[SegmentReadRange]
    containers: list[Any]
    layout: BlockLayout


def plan_read(
    scoped_stream: str,
    start_cut: StreamCut | None,
    end_cut: StreamCut | None,
    serializer: Any,
    cluster: Any,
) -> ReadPlan:
    """Check the arguments, then list the ranges between the cuts (see :func:`read_stream`)."""
    scope, stream = parse_scoped_stream(scoped_stream)
    _check_cut(start_cut, "start_cut", scope, stream)
    _check_cut(end_cut, "end_cut", scope, stream)
    layout = layout_for(serializer)
    import ray

    if not ray.is_initialized():
        raise IllegalStateError("Ray is not initialized: call pr.start_local() or pr.connect()")
    if cluster is None:
        from pravega_ray.cluster import connect

        cluster = connect()
    ranges = [
        r
        for r in cluster.batch_client().segment_ranges(scope, stream, start_cut, end_cut)
        if r.length > 0
    ]
    containers = [cluster.container_handle(r.segment) for r in ranges]
    return ReadPlan(scope, stream, ranges, containers, layout)


class StreamDatasource:
    """Placeholder; ``datasource(plan)`` builds the real ``ray.data.Datasource``."""


def _datasource_class() -> type:
    from ray.data import Datasource
    from ray.data.block import BlockMetadata
    from ray.data.datasource import ReadTask

    class _StreamDatasource(Datasource):
        """Segment ranges of one stream between two cuts: one read task per range, or
        ``read_tasks_max`` tasks reading several ranges each."""

        def __init__(self, plan: ReadPlan, read_tasks_max: int | None, block_bytes: int) -> None:
            self._plan = plan
            self._groups = group_ranges([r.length for r in plan.ranges], read_tasks_max)
            self._block_bytes = block_bytes

        def get_name(self) -> str:
            return "PravegaStream"

        def estimate_inmemory_data_size(self) -> int | None:
            return sum(r.length for r in self._plan.ranges)

        def get_read_tasks(
            self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
        ) -> list[ReadTask]:
            plan, tasks = self._plan, []
            for group in self._groups:
                ranges = [plan.ranges[i] for i in group]
                containers = [plan.containers[i] for i in group]
                tasks.append(
                    ReadTask(
                        functools.partial(
                            read_ranges, containers, ranges, plan.layout, self._block_bytes
                        ),
                        BlockMetadata(
                            num_rows=None,
                            size_bytes=sum(x.length for x in ranges),
                            exec_stats=None,
                            input_files=None,
                        ),
                        schema=plan.layout.schema,
                        per_task_row_limit=per_task_row_limit,
                    )
                )
            return tasks

    return _StreamDatasource


def _pravega_cause(error: BaseException) -> PravegaError | None:
    """The pravega-ray error a Ray (Data) error wraps, if any (``cause``, ``__cause__``)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        cause = getattr(current, "cause", None)
        if isinstance(cause, PravegaError):
            return cause
        if isinstance(current, PravegaError) and type(current).__module__.startswith("pravega_ray"):
            return current
        current = cause if isinstance(cause, BaseException) else current.__cause__
    return None


@contextlib.contextmanager
def typed_read_errors() -> Iterator[None]:
    """Re-raise a read task's pravega-ray error as itself, not wrapped by Ray Data."""
    try:
        yield
    except Exception as error:
        cause = _pravega_cause(error)
        if cause is None or cause is error:
            raise
        raise cause from None


def block_bytes_target() -> int:
    """Ray Data's ``target_max_block_size`` (the size read tasks close blocks at)."""
    from ray.data import DataContext

    target = DataContext.get_current().target_max_block_size
    return int(target) if target else BLOCK_BYTES_DEFAULT


def dataset_of(plan: ReadPlan, read_tasks_max: int | None = None) -> ray.data.Dataset:
    """The Dataset of a plan: ``read_tasks_max`` None reads each range in its own task."""
    import ray.data

    if not plan.ranges:
        schema = plan.layout.schema
        if schema is None:  # a plain serializer's type is unknown without values
            schema = layout_for(None).schema
        assert schema is not None  # the raw layout's columns are always known
        empty: ray.data.Dataset = ray.data.from_arrow(schema.empty_table())
        return empty
    source = _datasource_class()(plan, read_tasks_max, block_bytes_target())
    task_count = len(group_ranges([r.length for r in plan.ranges], read_tasks_max))
    dataset: ray.data.Dataset = ray.data.read_datasource(
        source,
        num_cpus=READ_TASK_CPUS,
        override_num_blocks=task_count,  # no extra split of the blocks into more pieces
    )
    return dataset


def read_stream(
    scoped_stream: str,
    start_cut: StreamCut | None = None,
    end_cut: StreamCut | None = None,
    serializer: Any = None,
    *,
    cluster: Any = None,
) -> ray.data.Dataset:
    """The events of ``scoped_stream`` between ``start_cut`` and ``end_cut`` as a Dataset.

    ``start_cut`` None: the head; ``end_cut`` None: each segment's length now (a snapshot).
    Every event between the cuts is one row exactly once, across scalings; rows of one
    segment come in offset order within a block. Columns (``docs/pipelines.md``):

    * no serializer: ``event`` (binary), ``scope``, ``stream``, ``segment_id``, ``offset``;
    * a table serializer (``JsonSerializer(schema)``, ``ArrowIpcSerializer``): those five,
      then the event's fields; an event of several rows repeats its metadata in each, with
      ``event`` null (only one-row-per-event serializers carry the raw bytes);
    * a plain serializer: ``event`` holds the deserialized values (``Utf8Serializer``:
      string; ``BytesSerializer``: binary; others: what Arrow infers per block).

    Raises, before any Ray work: InvalidNameError, InvalidArgumentError (a cut that is not a
    StreamCut or of another stream, something that is no serializer, a field named like a
    connector column), IllegalStateError (Ray not initialized). Then StreamNotFoundError /
    ScopeNotFoundError, InvalidArgumentError (end cut behind the start cut). When the Dataset
    executes: DataCorruptionError (segment and offset named) for bytes that are not event
    frames, SegmentTruncatedError for a range truncated since, SerializationError for an
    event that does not decode (Ray Data wraps them; ``isinstance`` still holds).
    """
    plan = plan_read(scoped_stream, start_cut, end_cut, serializer, cluster)
    return dataset_of(plan)
