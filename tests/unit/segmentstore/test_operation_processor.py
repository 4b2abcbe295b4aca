"""OperationProcessor on its own: group commits into an in-memory log, a recording apply."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from pravega_ray.errors import ContainerNotReadyError
from pravega_ray.invariant import InvariantViolation, invariant
from pravega_ray.logs.memory import InMemoryDurableLog, InMemoryLogStore
from pravega_ray.segmentstore import operations as ops
from pravega_ray.segmentstore.operation_processor import BARRIER, OperationProcessor
from pravega_ray.timing import AsyncioScheduler
from tests.faults.storage import FaultPlan, FaultyDurableLog, InjectedFault

pytestmark = pytest.mark.timeout(30)

SEGMENT = "sc/st/0.#epoch.0"
R = TypeVar("R")


class CountingScheduler:
    """The asyncio scheduler, counting blocking calls and sleeps; ``hold`` keeps sleeps waiting."""

    def __init__(self) -> None:
        self._inner = AsyncioScheduler()
        self.blocking_calls = 0
        self.sleeps: list[float] = []
        self.hold: asyncio.Event | None = None

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.hold is not None:
            await self.hold.wait()
        else:
            await self._inner.sleep(seconds)

    async def run_blocking(self, function: Callable[..., R], *args: Any) -> R:
        self.blocking_calls += 1
        return await self._inner.run_blocking(function, *args)

    def start(self, coroutine: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return self._inner.start(coroutine, name)


@dataclass
class Pipeline:
    """A started processor over an in-memory log (optionally faulty), recording what it applies."""

    store: InMemoryLogStore
    scheduler: CountingScheduler
    processor: OperationProcessor = field(init=False)
    applied: list[tuple[Any, int, bytes | None]] = field(default_factory=list)
    failures: list[BaseException] = field(default_factory=list)
    apply_hook: Callable[[Any], None] | None = None

    def apply(self, operation: Any, sequence: int, chunk_data: bytes | None) -> None:
        if self.apply_hook is not None:
            self.apply_hook(operation)
        self.applied.append((operation, sequence, chunk_data))

    def on_failure(self, error: BaseException) -> None:
        # What the container does: remember the error, fail every queued caller.
        self.failures.append(error)
        self.processor.fail_all(ContainerNotReadyError(f"durable log failed: {error!r}"))

    def records(self) -> list[list[ops.Operation]]:
        return [list(ops.decode(payload)) for _, payload in sorted(self.store.records.items())]


def pipeline(
    *,
    bytes_max: int = 1 << 20,
    operations_max: int = 1000,
    delay_s: float = 0.0,
    plan: FaultPlan | None = None,
) -> Pipeline:
    """Build and start a pipeline; call on the running event loop."""
    store = InMemoryLogStore()
    data_log: Any = InMemoryDurableLog(store)
    data_log.initialize()
    if plan is not None:
        data_log = FaultyDurableLog(data_log, plan)
    result = Pipeline(store, CountingScheduler())
    result.processor = OperationProcessor(
        data_log,
        result.apply,
        bytes_max=bytes_max,
        operations_max=operations_max,
        delay_s=delay_s,
        scheduler=result.scheduler,
        on_failure=result.on_failure,
    )
    result.processor.start()
    return result


def append(i: int, size: int = 60) -> ops.Append:
    return ops.Append(SEGMENT, i * size, bytes([i % 256]) * size, (), 1)


def checkpoint() -> ops.MetadataCheckpoint:
    return ops.MetadataCheckpoint(({"n": SEGMENT},))


async def submit_all(p: Pipeline, operations: list[Any]) -> None:
    """Submit concurrently, in order: all are queued before the pump takes a batch."""
    await asyncio.gather(*(p.processor.submit(op) for op in operations))


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.001)


# --- completion and order -------------------------------------------------------------------------
def test_submit_returns_once_durable_and_applied() -> None:
    async def run() -> None:
        p = pipeline()
        op = append(0)
        await p.processor.submit(op)
        assert p.records() == [[op]]
        assert p.applied == [(op, 0, None)]
        assert p.scheduler.blocking_calls == 1  # the log write ran off the event loop

    asyncio.run(run())


def test_apply_order_is_submit_order_with_each_record_sequence() -> None:
    async def run() -> None:
        p = pipeline(operations_max=2)
        operations: list[Any] = [
            ops.CreateSegment(SEGMENT, 1),
            append(0),
            ops.UpdateAttributes(SEGMENT, ((b"k" * 16, 1),)),
            ops.Seal(SEGMENT, 60),
            ops.DeleteSegment(SEGMENT),
        ]
        await submit_all(p, operations)
        assert [op for op, _, _ in p.applied] == operations
        assert [sequence for _, sequence, _ in p.applied] == [0, 0, 1, 1, 2]
        assert p.records() == [operations[0:2], operations[2:4], operations[4:5]]
        assert p.scheduler.blocking_calls == 3

    asyncio.run(run())


# --- group commit bounds --------------------------------------------------------------------------
def test_group_commit_respects_operations_max() -> None:
    async def run() -> None:
        p = pipeline(operations_max=3)
        operations = [append(i) for i in range(10)]
        await submit_all(p, operations)
        assert [len(record) for record in p.records()] == [3, 3, 3, 1]
        assert [op for record in p.records() for op in record] == operations

    asyncio.run(run())


def test_group_commit_respects_bytes_max() -> None:
    async def run() -> None:
        size = ops.encoded_size(append(0))
        p = pipeline(bytes_max=2 * size + size // 2)
        operations = [append(i) for i in range(7)]
        await submit_all(p, operations)
        assert [len(record) for record in p.records()] == [2, 2, 2, 1]
        assert [op for record in p.records() for op in record] == operations

    asyncio.run(run())


def test_group_commit_of_an_operation_over_bytes_max_holds_it_alone() -> None:
    async def run() -> None:
        small = ops.encoded_size(append(0))
        p = pipeline(bytes_max=3 * small)
        big = append(1, size=10 * small)
        await submit_all(p, [append(0), big, append(2), append(3)])
        assert p.records() == [[append(0)], [big], [append(2), append(3)]]

    asyncio.run(run())


def test_metadata_checkpoint_travels_alone_in_its_record() -> None:
    async def run() -> None:
        p = pipeline()
        first, second = checkpoint(), checkpoint()
        await submit_all(p, [first, append(0), append(1), second, append(2)])
        assert p.records() == [[first], [append(0), append(1)], [second], [append(2)]]

    asyncio.run(run())


# --- barriers -------------------------------------------------------------------------------------
def test_barrier_alone_writes_nothing() -> None:
    async def run() -> None:
        p = pipeline()
        await p.processor.submit(BARRIER)
        await submit_all(p, [BARRIER, BARRIER])
        assert p.store.records == {}
        assert p.applied == []
        assert p.scheduler.blocking_calls == 0
        assert p.processor.logged_bytes == 0

    asyncio.run(run())


def test_barrier_completes_after_everything_queued_before_it() -> None:
    async def run() -> None:
        p = pipeline(operations_max=1, plan=FaultPlan(delay_s=0.02))  # a slow log
        operations = [append(i) for i in range(3)]
        writes = [asyncio.create_task(p.processor.submit(op)) for op in operations]
        await asyncio.sleep(0)  # the writes are queued
        assert p.applied == []
        await p.processor.submit(BARRIER)
        assert [op for op, _, _ in p.applied] == operations
        assert all(w.done() for w in writes)
        assert BARRIER not in [op for op, _, _ in p.applied]
        assert len(p.records()) == 3

    asyncio.run(run())


def test_barrier_in_a_group_commit_is_not_logged() -> None:
    async def run() -> None:
        p = pipeline()
        await submit_all(p, [append(0), BARRIER, append(1)])
        assert p.records() == [[append(0), append(1)]]
        assert [op for op, _, _ in p.applied] == [append(0), append(1)]

    asyncio.run(run())


# --- chunk data and logged bytes ------------------------------------------------------------------
def test_chunk_data_reaches_apply_but_not_the_log() -> None:
    async def run() -> None:
        p = pipeline()
        data = b"chunk-bytes-" * 10
        added = ops.ChunkAdded(SEGMENT, "segments/x/0", 0, len(data), 1)
        await p.processor.submit(added, data)
        assert p.applied == [(added, 0, data)]
        assert p.records() == [[added]]
        assert data not in p.store.records[0]

    asyncio.run(run())


def test_logged_bytes_counts_payload_bytes() -> None:
    async def run() -> None:
        p = pipeline(operations_max=2)
        await submit_all(p, [append(0), append(1), BARRIER, checkpoint(), append(2)])
        assert p.processor.logged_bytes == sum(len(r) for r in p.store.records.values())
        assert p.processor.logged_bytes > 0

    asyncio.run(run())


# --- failures -------------------------------------------------------------------------------------
@pytest.mark.parametrize("when", ["before", "after"])
def test_failing_log_append_calls_on_failure_and_fails_the_batch_and_the_queue(when: str) -> None:
    async def run() -> None:
        plan = FaultPlan()
        getattr(plan, f"fail_{when}").add("append")
        p = pipeline(operations_max=1, plan=plan)
        results = await asyncio.gather(
            *(p.processor.submit(append(i)) for i in range(3)), return_exceptions=True
        )
        assert all(isinstance(r, ContainerNotReadyError) for r in results)
        assert len(p.failures) == 1 and isinstance(p.failures[0], InjectedFault)
        assert p.applied == []  # nothing applied: the outcome of the write is unknown
        assert len(p.store.records) == (1 if when == "after" else 0)

    asyncio.run(run())


def test_failing_apply_stops_the_processor_and_fails_its_callers() -> None:
    async def run() -> None:
        p = pipeline()

        def refuse_seals(op: Any) -> None:
            invariant(not isinstance(op, ops.Seal), "seal at a wrong length")

        p.apply_hook = refuse_seals
        results = await asyncio.gather(
            *(p.processor.submit(op) for op in [append(0), ops.Seal(SEGMENT, 1), append(1)]),
            return_exceptions=True,
        )
        assert len(p.failures) == 1 and isinstance(p.failures[0], InvariantViolation)
        assert all(isinstance(r, ContainerNotReadyError) for r in results)

    asyncio.run(run())


def test_stop_leaves_queued_callers_waiting_until_fail_all() -> None:
    async def run() -> None:
        p = pipeline()
        await p.processor.stop()
        waiting = asyncio.create_task(p.processor.submit(append(0)))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        p.processor.fail_all(ContainerNotReadyError("closed"))
        with pytest.raises(ContainerNotReadyError, match="closed"):
            await waiting
        assert p.store.records == {}

    asyncio.run(run())


def test_start_twice_and_submit_before_start_trip_the_invariant() -> None:
    async def run() -> None:
        p = pipeline()
        with pytest.raises(InvariantViolation, match="started twice"):
            p.processor.start()
        idle = OperationProcessor(
            InMemoryDurableLog(InMemoryLogStore()),
            p.apply,
            bytes_max=1,
            operations_max=1,
            delay_s=0.0,
            scheduler=p.scheduler,
            on_failure=p.on_failure,
        )
        assert not idle.started and p.processor.started
        with pytest.raises(InvariantViolation, match="not started"):
            await idle.submit(append(0))

    asyncio.run(run())


# --- group commit delay ---------------------------------------------------------------------------
def test_group_commit_delay_gathers_operations_submitted_while_waiting() -> None:
    async def run() -> None:
        p = pipeline(delay_s=0.01)
        p.scheduler.hold = asyncio.Event()
        first = asyncio.create_task(p.processor.submit(append(0)))
        await until(lambda: p.scheduler.sleeps == [0.01])  # the pump waits for more
        later = [asyncio.create_task(p.processor.submit(append(i))) for i in (1, 2)]
        await asyncio.sleep(0)
        p.scheduler.hold.set()
        await asyncio.gather(first, *later)
        assert p.records() == [[append(0), append(1), append(2)]]
        assert p.scheduler.sleeps == [0.01]

    asyncio.run(run())


def test_group_commit_delay_is_skipped_when_the_group_commit_is_full() -> None:
    async def run() -> None:
        p = pipeline(delay_s=0.5, operations_max=3)
        await submit_all(p, [append(i) for i in range(3)])
        assert p.scheduler.sleeps == []
        assert p.records() == [[append(0), append(1), append(2)]]

    asyncio.run(run())
