"""Operation processor: batches validated operations into group commits of the durable log.

Pravega's ``OperationProcessor``. Callers :meth:`~OperationProcessor.submit`
operations already validated against the pending metadata view; a pump task
drains the queue at its own pace into *group commits*: one durable log record
(one fsync, or one S3 PUT) for many operations, bounded by
``group_commit_bytes_max`` and ``group_commit_operations_max``. Once the record
is durable, every operation in it is applied (``apply``) in order and its caller
completes: an operation is acknowledged only when durable, and readers never see
anything that is not.

* With ``group_commit_delay_s`` > 0 the pump waits that long before writing a
  group commit that is not full, to gather more.
* A :class:`~pravega_ray.segmentstore.operations.MetadataCheckpoint` travels alone
  in its record, so the log can be truncated right at it. :data:`CHECKPOINT` asks for
  one whose content is taken (``checkpoint()``) when its record is written: every
  operation before it in the log is then applied and none after it is, so the
  checkpoint is exactly the state at its place in the log, whatever is still queued.
* :data:`BARRIER` is an operation that writes nothing: its caller completes once
  everything queued before it is durable and applied.
* Any error of the pump (log write, encoding, a failed invariant while applying)
  leaves the durable state unknown, so the processor stops and reports it to
  ``on_failure``; the container then fails every queued caller (:meth:`fail_all`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pravega_ray import metrics
from pravega_ray.invariant import invariant
from pravega_ray.logs.durable_data_log import DurableDataLog
from pravega_ray.segmentstore import operations as ops
from pravega_ray.timing import Scheduler

__all__ = ["BARRIER", "CHECKPOINT", "OperationProcessor"]

BARRIER: Any = object()
"""An operation that writes nothing; it completes once everything before it is durable."""

CHECKPOINT: Any = object()
"""A metadata checkpoint, taken when its record is written (see the module docstring)."""

ApplyFunction = Callable[[ops.Operation, int, "bytes | None"], None]
"""``apply(operation, log sequence, chunk data)``: applies a durable operation."""


@dataclass(slots=True)
class _Queued:
    operation: Any
    future: asyncio.Future[None]
    chunk_data: bytes | None  # a flushed chunk's bytes, for the read cache (never logged)
    queued_at: float  # time.perf_counter() at submit (the ack latency metric)


class OperationProcessor:
    def __init__(
        self,
        log: DurableDataLog,
        apply: ApplyFunction,
        *,
        bytes_max: int,
        operations_max: int,
        delay_s: float,
        scheduler: Scheduler,
        on_failure: Callable[[BaseException], None],
        checkpoint: Callable[[], ops.MetadataCheckpoint] | None = None,
        container: str = "",
        on_logged: Callable[[int, int], None] | None = None,
    ) -> None:
        """``container`` tags the metrics (pravega_ray.metrics) of this processor;
        ``on_logged(sequence, size_bytes)`` is called after each log record is durable."""
        self._log = log
        self._apply = apply
        self._checkpoint = checkpoint
        self._bytes_max = bytes_max
        self._operations_max = operations_max
        self._delay_s = delay_s
        self._scheduler = scheduler
        self._on_failure = on_failure
        self._container = container
        self._container_tags = {"container": container}
        self._on_logged = on_logged
        self._queue: list[_Queued] = []
        # The group commit being written; failed with the queue if the pump stops mid-write.
        self._batch: list[_Queued] = []
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.logged_bytes = 0
        """Bytes written to the log by this processor so far (checkpoint scheduling)."""

    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        """Start the pump on the running event loop."""
        invariant(self._task is None, "operation processor started twice")
        self._wake = asyncio.Event()
        self._task = self._scheduler.start(self._pump(), "operation-processor")

    async def submit(self, operation: Any, chunk_data: bytes | None = None) -> None:
        """Queue a validated operation; returns once it is durable and applied.

        ``chunk_data``: for a ChunkAdded, the chunk's bytes, handed to ``apply`` so the
        read cache keeps them after the flush. Raises what :meth:`fail_all` is given if
        the processor stops first.
        """
        wake = self._wake
        invariant(wake is not None, "operation processor not started")
        assert wake is not None  # (for the type checker: the invariant holds)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(_Queued(operation, future, chunk_data, time.perf_counter()))
        wake.set()
        await future

    async def stop(self) -> None:
        """Stop the pump (queued callers stay queued until :meth:`fail_all`)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def fail_all(self, error: BaseException) -> None:
        """Fail the group commit being written and every queued operation with ``error``."""
        queued, self._queue = self._batch + self._queue, []
        self._batch = []
        for item in queued:
            if not item.future.done():
                item.future.set_exception(error)

    async def _pump(self) -> None:
        assert self._wake is not None
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._queue:
                    if self._delay_s and not self._group_commit_full():
                        await self._scheduler.sleep(self._delay_s)
                    await self._commit(self._take_batch())
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            self._on_failure(e)

    async def _commit(self, batch: list[_Queued]) -> None:
        """One group commit: one durable log record, then apply and complete in order."""
        self._batch = batch
        if batch[0].operation is CHECKPOINT:  # alone (_take_batch): all before it is applied
            invariant(self._checkpoint is not None, "no checkpoint source")
            assert self._checkpoint is not None
            batch[0].operation = self._checkpoint()
        to_log = [item.operation for item in batch if item.operation is not BARRIER]
        sequence = -1
        if to_log:
            payload = ops.encode(to_log)
            self.logged_bytes += len(payload)
            sequence = await self._scheduler.run_blocking(self._log.append, payload)
            if self._on_logged is not None:
                self._on_logged(sequence, len(payload))
        for item in batch:
            if item.operation is not BARRIER:
                self._apply(item.operation, sequence, item.chunk_data)
        for item in batch:
            if not item.future.done():
                item.future.set_result(None)
        self._batch = []
        if to_log:
            self._record_metrics(batch, len(to_log), len(payload))

    def _record_metrics(self, batch: list[_Queued], operations: int, size_bytes: int) -> None:
        """Metrics of one group commit: a few recordings per commit and per append operation
        (a writer's block), aggregated per stream; never one per event."""
        now = time.perf_counter()
        tags = self._container_tags
        events = 0
        per_stream: dict[str, list[int]] = {}
        for item in batch:
            op = item.operation
            if type(op) is ops.Append:
                events += op.event_count
                stream = op.segment.rpartition("/")[0]
                totals = per_stream.get(stream)
                if totals is None:
                    per_stream[stream] = [op.event_count, len(op.data)]
                else:
                    totals[0] += op.event_count
                    totals[1] += len(op.data)
                metrics.APPEND_LATENCY.observe(now - item.queued_at, tags)
        metrics.GROUP_COMMIT_OPERATIONS.observe(operations, tags)
        metrics.GROUP_COMMIT_BYTES.observe(size_bytes, tags)
        if events:
            metrics.GROUP_COMMIT_EVENTS.observe(events, tags)
        for stream, (stream_events, stream_bytes) in per_stream.items():
            stream_tags = metrics.stream_tags(self._container, stream)
            metrics.APPENDED_EVENTS.inc(stream_events, stream_tags)
            metrics.APPENDED_BYTES.inc(stream_bytes, stream_tags)

    def _group_commit_full(self) -> bool:
        total = sum(_size(item.operation) for item in self._queue)
        return total >= self._bytes_max or len(self._queue) >= self._operations_max

    def _take_batch(self) -> list[_Queued]:
        total = 0
        count = 0
        for item in self._queue:
            if item.operation is CHECKPOINT or isinstance(item.operation, ops.MetadataCheckpoint):
                count = count or 1
                break
            size = _size(item.operation)
            if count and (total + size > self._bytes_max or count >= self._operations_max):
                break
            total += size
            count += 1
        batch, self._queue = self._queue[:count], self._queue[count:]
        return batch


def _size(operation: Any) -> int:
    """Encoded bytes of a queued operation (a barrier or a checkpoint not yet taken: 0)."""
    if operation is BARRIER or operation is CHECKPOINT:
        return 0
    return ops.encoded_size(operation)
