"""StorageWriter and FlushPolicy on their own.

The writer gets a real ReadIndex (its UnflushedData), real in-memory Tier-2 behind the
FencedChunkStorage the builder wraps it in, and small fakes of the Protocols it declares:
an OperationLog that applies ChunkAdded as the durable log would and records everything,
and an AttributeFlusher that records its calls.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from pravega_ray.errors import ContainerNotReadyError, FencedError
from pravega_ray.segmentstore import operations as ops
from pravega_ray.segmentstore.chunk_layout import ChunkRef, chunk_name
from pravega_ray.segmentstore.container_metadata import ContainerMetadata, SegmentMetadata
from pravega_ray.segmentstore.read_index import ReadIndex
from pravega_ray.segmentstore.storage_writer import REVISIT_ALL_S, FlushPolicy, StorageWriter
from pravega_ray.storage.fenced import FencedChunkStorage
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.timing import AsyncioScheduler, ManualClock

pytestmark = pytest.mark.timeout(30)

A = "sc/st/0.#epoch.0"
B = "sc/st/1.#epoch.0"
FLUSH_BYTES = 100
INTERVAL_S = 10.0
R = TypeVar("R")


# --- FlushPolicy ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pending", "age_s", "sealed", "force", "due"),
    [
        (0, 100.0, True, True, False),  # nothing pending: never due
        (1, 0.0, False, False, False),  # small and young
        (FLUSH_BYTES - 1, INTERVAL_S - 0.1, False, False, False),
        (FLUSH_BYTES, 0.0, False, False, True),  # size
        (1, INTERVAL_S, False, False, True),  # age
        (1, None, False, False, False),  # no age known
        (1, 0.0, True, False, True),  # sealed with data pending
        (1, 0.0, False, True, True),  # forced
    ],
)
def test_flush_policy_is_due(
    pending: int, age_s: float | None, sealed: bool, force: bool, due: bool
) -> None:
    clock = ManualClock(1000.0)
    state = SegmentMetadata(A, 0, length=50 + pending, storage_length=50, sealed=sealed)
    state.unflushed_since = None if age_s is None else clock.monotonic() - age_s
    policy = FlushPolicy(FLUSH_BYTES, INTERVAL_S)
    assert policy.is_due(state, clock.monotonic(), force) is due


# --- fakes of the writer's narrow interfaces ------------------------------------------------------
@dataclass
class RecordingOperationLog:
    """An OperationLog that applies ChunkAdded to the metadata and read index, as the durable
    log does, and records what it was asked; ``fail`` raises from the next ``add``."""

    metadata: ContainerMetadata
    read_index: ReadIndex
    clock: ManualClock
    events: list[tuple[str, Any]]
    dead: list[str] = field(default_factory=list)
    added: list[tuple[ops.Operation, bytes | None]] = field(default_factory=list)
    fail: BaseException | None = None

    async def add(self, operation: ops.Operation, chunk_data: bytes | None = None) -> None:
        if self.fail is not None:
            error, self.fail = self.fail, None
            raise error
        self.events.append(("add", operation))
        self.added.append((operation, chunk_data))
        assert isinstance(operation, ops.ChunkAdded)
        state = self.metadata.get(operation.segment)
        chunk = ChunkRef(operation.offset, operation.length, operation.chunk, operation.crc)
        state.chunks.add(chunk, operation.segment)
        self.read_index.chunk_flushed(operation.segment, chunk, chunk_data)
        state.storage_length = chunk.end
        done = state.storage_length == state.length
        state.unflushed_since = None if done else self.clock.monotonic()

    def take_dead_chunks(self) -> list[str]:
        self.events.append(("take dead chunks", list(self.dead)))
        dead, self.dead = self.dead, []
        return dead

    async def checkpoint_and_truncate(self, force: bool) -> None:
        self.events.append(("checkpoint", force))


@dataclass
class RecordingAttributeFlusher:
    events: list[tuple[str, Any]]

    async def flush(self, force: bool = False) -> None:
        self.events.append(("flush attributes", force))


class SteppedScheduler:
    """The asyncio scheduler, except that ``sleep`` returns only when the test calls ``tick``."""

    def __init__(self) -> None:
        self._inner = AsyncioScheduler()
        self.sleeping = 0
        self._tick = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeping += 1
        await self._tick.wait()
        self._tick.clear()
        self.sleeping -= 1

    async def run_blocking(self, function: Callable[..., R], *args: Any) -> R:
        return await self._inner.run_blocking(function, *args)

    def start(self, coroutine: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = self._inner.start(coroutine, name)
        self.tasks.append(task)
        return task

    async def tick(self) -> None:
        """Let one round run; returns once the writer sleeps again (or has stopped)."""
        while not self.sleeping:
            await asyncio.sleep(0.001)
        self._tick.set()
        while self._tick.is_set() or (not self.sleeping and not self.tasks[-1].done()):
            await asyncio.sleep(0.001)


@dataclass
class Writer:
    clock: ManualClock = field(default_factory=lambda: ManualClock(100.0))
    tier2: InMemoryChunkStorage = field(default_factory=InMemoryChunkStorage)
    metadata: ContainerMetadata = field(default_factory=lambda: ContainerMetadata(0))
    scheduler: SteppedScheduler = field(default_factory=SteppedScheduler)
    events: list[tuple[str, Any]] = field(default_factory=list)
    fenced_errors: list[FencedError] = field(default_factory=list)
    flush_bytes: int = FLUSH_BYTES

    def __post_init__(self) -> None:
        self.storage = FencedChunkStorage(self.tier2, "container-0")
        self.storage.claim(1)
        self.read_index = ReadIndex(1 << 20, self.storage, self.scheduler)
        self.operations = RecordingOperationLog(
            self.metadata, self.read_index, self.clock, self.events
        )
        self.attributes = RecordingAttributeFlusher(self.events)
        self.writer = StorageWriter(
            0,
            self.metadata,
            self.read_index,
            self.storage,
            self.operations,
            self.attributes,
            FlushPolicy(self.flush_bytes, INTERVAL_S),
            tick_s=1.0,
            clock=self.clock,
            scheduler=self.scheduler,
            fenced=self.fenced,
        )

    def fenced(self, error: FencedError) -> BaseException:
        self.fenced_errors.append(error)
        return ContainerNotReadyError(f"fenced: {error}")

    def append(self, name: str, *entries: bytes, incarnation: str | None = None) -> None:
        """Durable appends not yet in Tier-2, as the durable log applies them."""
        if name not in self.metadata:
            self.metadata.add(SegmentMetadata(name, 0, incarnation=incarnation))
            self.read_index.add_segment(name)
        state = self.metadata.get(name)
        for data in entries:
            self.read_index.append(name, state.length, data)
            state.length += len(data)
            if state.unflushed_since is None:
                state.unflushed_since = self.clock.monotonic()
        self.metadata.touch(state)  # as the durable log does: the rounds visit it again

    def chunks_added(self) -> list[ops.ChunkAdded]:
        return [op for op, _ in self.operations.added]  # type: ignore[misc]


def run(body: Callable[[Writer], Coroutine[Any, Any, None]], **options: Any) -> None:
    async def main() -> None:
        w = Writer(**options)
        w.writer.start()
        try:
            await body(w)
        finally:
            w.writer.stop()

    asyncio.run(main())


# --- one flush ------------------------------------------------------------------------------------
def test_flush_creates_one_chunk_named_by_chunk_name_with_its_crc() -> None:
    async def body(w: Writer) -> None:
        w.append(A, b"abc", b"def")
        await w.writer.flush_all()
        name = chunk_name(A, 0)
        assert w.tier2.read(name, 0, 100) == b"abcdef"
        assert w.operations.added == [
            (ops.ChunkAdded(A, name, 0, 6, zlib.crc32(b"abcdef")), b"abcdef")
        ]
        assert w.metadata.get(A).storage_length == 6

    run(body)


def test_flush_writes_at_most_flush_bytes_per_chunk_named_by_offset() -> None:
    async def body(w: Writer) -> None:
        w.append(A, b"a" * 60, b"b" * 60, b"c" * 30)
        await w.writer.flush_all()
        added = w.chunks_added()
        assert [(c.offset, c.length) for c in added] == [(0, 60), (60, 90)]
        assert [c.chunk for c in added] == [chunk_name(A, 0), chunk_name(A, 60)]
        assert all(c.crc == zlib.crc32(w.tier2.read(c.chunk, 0, 1000)) for c in added)

    run(body)


def test_flush_replaces_an_orphan_chunk_of_the_same_name() -> None:
    async def body(w: Writer) -> None:
        # Left by a flush whose ChunkAdded never became durable (a crash in between).
        w.tier2.create(chunk_name(A, 0), b"orphan from an earlier attempt")
        w.append(A, b"fresh")
        await w.writer.flush_all()
        assert w.tier2.read(chunk_name(A, 0), 0, 100) == b"fresh"
        assert w.chunks_added() == [ops.ChunkAdded(A, chunk_name(A, 0), 0, 5, zlib.crc32(b"fresh"))]

    run(body)


def test_flush_deletes_dead_chunks() -> None:
    async def body(w: Writer) -> None:
        dead = [chunk_name(B, 0), chunk_name(B, 10)]
        for name in dead:
            w.tier2.create(name, b"truncated away")
        w.operations.dead = list(dead)
        await w.writer.flush_all()
        assert w.tier2.list(f"segments/{B}/") == []
        assert w.operations.dead == []

    run(body)


def test_flush_round_flushes_then_deletes_then_flushes_attributes_then_checkpoints() -> None:
    async def body(w: Writer) -> None:
        w.append(A, b"abc")
        await w.writer.flush_all(checkpoint=True)
        assert [event for event, _ in w.events] == [
            "add",
            "take dead chunks",
            "flush attributes",
            "checkpoint",
            "take dead chunks",  # flush_all's last round, always run
            "flush attributes",
            "checkpoint",
        ]
        assert [arg for event, arg in w.events if event != "add"][-3:] == [[], True, True]

    run(body)


def test_flush_candidates_are_the_due_segments() -> None:
    async def body(w: Writer) -> None:
        w.append(A, b"x" * FLUSH_BYTES)  # due by size
        w.clock.advance(INTERVAL_S / 2)
        w.append(B, b"young")
        assert [s.name for s in w.writer.flush_candidates(force=False)] == [A]
        assert [s.name for s in w.writer.flush_candidates(force=True)] == [A, B]
        w.clock.advance(INTERVAL_S)  # now B is old enough too
        assert [s.name for s in w.writer.flush_candidates(force=False)] == [A, B]

    run(body)


def test_fenced_error_from_storage_goes_through_fenced() -> None:
    async def body(w: Writer) -> None:
        w.append(A, b"abc")
        FencedChunkStorage(w.tier2, "container-0").claim(2)  # a successor took Tier-2 over
        with pytest.raises(ContainerNotReadyError, match="fenced"):
            await w.writer.flush_all()
        assert len(w.fenced_errors) == 1
        assert w.operations.added == [] and not w.tier2.exists(chunk_name(A, 0))

    run(body)


# --- flush_all ------------------------------------------------------------------------------------
def test_flush_all_loops_until_nothing_is_due() -> None:
    async def body(w: Writer) -> None:
        w.append(A, b"a" * 80, b"b" * 80, b"c" * 80)
        w.append(B, b"d" * 10)
        await w.writer.flush_all(checkpoint=True)
        assert [arg for event, arg in w.events if event == "checkpoint"] == [
            False,
            False,
            False,
            True,
        ]
        assert [(c.segment, c.offset) for c in w.chunks_added()] == [
            (A, 0),
            (B, 0),
            (A, 80),
            (A, 160),
        ]
        assert all(s.storage_length == s.length for s in w.metadata)

    run(body)


def test_flush_all_with_nothing_due_still_runs_one_round() -> None:
    async def body(w: Writer) -> None:
        await w.writer.flush_all(checkpoint=True)
        assert w.events == [
            ("take dead chunks", []),
            ("flush attributes", True),
            ("checkpoint", True),
        ]

    run(body)


# --- timed rounds ---------------------------------------------------------------------------------
def test_timed_round_flushes_only_due_segments() -> None:
    async def body(w: Writer) -> None:
        w.append(A, b"x" * FLUSH_BYTES)
        w.append(B, b"young")
        await w.scheduler.tick()
        assert [c.segment for c in w.chunks_added()] == [A]
        assert ("flush attributes", False) in w.events and ("checkpoint", False) in w.events
        w.clock.advance(INTERVAL_S)
        await w.scheduler.tick()
        assert [c.segment for c in w.chunks_added()] == [A, B]

    run(body)


def test_rounds_visit_busy_segments_only_and_every_segment_at_each_revisit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After a round the clean segments are no longer visited; data that reached a segment
    without the durable log's touch (a defect) is found by the next revisit and named."""

    async def body(w: Writer) -> None:
        names = [f"sc/st/{n}.#epoch.0" for n in range(50)]
        for name in names:
            w.append(name, b"x")
        await w.writer.flush_all()
        assert len(w.chunks_added()) == 50 and w.metadata.busy() == []
        state = w.metadata.get(names[7])  # bytes applied without touch():
        w.read_index.append(state.name, state.length, b"y")
        state.length += 1
        state.unflushed_since = w.clock.monotonic()
        await w.writer.flush_all()
        assert len(w.chunks_added()) == 50  # not visited
        w.clock.advance(REVISIT_ALL_S)
        with caplog.at_level("WARNING"):
            await w.writer.flush_all()
        assert [c.segment for c in w.chunks_added()[50:]] == [state.name]
        assert "were not busy" in caplog.text and state.name in caplog.text
        assert w.metadata.busy() == []

    run(body)


def test_timed_round_goes_on_after_an_error_and_stops_once_fenced() -> None:
    async def body(w: Writer) -> None:
        w.append(A, b"x" * FLUSH_BYTES)
        w.operations.fail = OSError("Tier-1 hiccup")
        await w.scheduler.tick()  # logged; the data is safe in Tier-1
        assert w.chunks_added() == [] and not w.scheduler.tasks[-1].done()
        await w.scheduler.tick()
        assert [c.segment for c in w.chunks_added()] == [A]
        w.append(A, b"y" * FLUSH_BYTES)
        FencedChunkStorage(w.tier2, "container-0").claim(2)
        await w.scheduler.tick()
        assert len(w.fenced_errors) == 1
        assert w.scheduler.tasks[-1].done()  # the container stopped: no more rounds

    run(body)


# --- bugs -----------------------------------------------------------------------------------------
def test_flush_round_never_deletes_a_chunk_it_just_wrote() -> None:
    async def body(w: Writer) -> None:
        w.tier2.create(chunk_name(A, 0), b"old incarnation")
        w.operations.dead = [chunk_name(A, 0)]  # its DeleteSegment was applied
        w.append(A, b"new incarnation", incarnation="1-1")  # created again (a new incarnation)
        await w.writer.flush_all()
        (added,) = w.chunks_added()
        assert w.tier2.exists(added.chunk)

    run(body)


def test_dead_chunks_whose_delete_failed_are_deleted_by_a_later_round() -> None:
    async def body(w: Writer) -> None:
        dead = [chunk_name(B, 0), chunk_name(B, 10)]
        for name in dead:
            w.tier2.create(name, b"dead")
        w.operations.dead = list(dead)
        real_delete = w.tier2.delete
        failures = [OSError("Tier-2 hiccup")]

        def delete_failing_once(name: str) -> None:
            if failures:
                raise failures.pop()
            real_delete(name)

        w.tier2.delete = delete_failing_once  # type: ignore[method-assign]
        await w.scheduler.tick()  # the round fails and is logged
        await w.scheduler.tick()
        assert w.tier2.list(f"segments/{B}/") == []

    run(body)
