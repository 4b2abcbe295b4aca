"""The request event processor on memory backends: per-stream order, streams that wait
without costing anything, and streams that never wait for another's retries."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from pravega_ray.constants import (
    REQUEST_CHECKPOINT_INTERVAL_S,
    REQUEST_POLL_S,
    REQUEST_POSTPONE_S,
    REQUEST_READ_WAIT_S,
)
from pravega_ray.contracts.segment_store import ReadResult
from pravega_ray.controller.event_processor import DONE, POSTPONE, WAIT, RequestEventProcessor
from pravega_ray.controller.request_stream import RequestStream
from pravega_ray.controller.stream_metadata_store import ChunkMetadataStore
from pravega_ray.errors import SegmentExistsError
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.timing import ManualClock, ManualThreadScheduler

pytestmark = pytest.mark.timeout(60)


class MemorySegments:
    """The request stream's segment in memory; reads at the tail wait for an append."""

    def __init__(self) -> None:
        self._data: dict[str, bytearray] = {}
        self._appended = threading.Condition()

    def create_segment(self, segment: str) -> None:
        if segment in self._data:
            raise SegmentExistsError(segment)
        self._data[segment] = bytearray()

    def append_plain(self, segment: str, data: bytes) -> int:
        with self._appended:
            buffer = self._data[segment]
            offset = len(buffer)
            buffer += data
            self._appended.notify_all()
            return offset

    def read(self, segment: str, offset: int, max_bytes: int, wait_s: float) -> ReadResult:
        with self._appended:
            buffer = self._data[segment]
            if len(buffer) <= offset and wait_s > 0:
                self._appended.wait(wait_s)
            return ReadResult(
                offset, bytes(buffer[offset : offset + max_bytes]), False, len(buffer)
            )

    def truncate_segment(self, segment: str, offset: int) -> None:
        pass


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


class Workflows:
    """A handler whose requests on stream ``a`` answer ``waiting`` until released."""

    def __init__(self, waiting: str) -> None:
        self.waiting = waiting
        self.released = threading.Event()
        self.calls: dict[str, int] = {}
        self.done: list[str] = []
        self._lock = threading.Lock()

    def handle(self, body: dict[str, Any]) -> str:
        name = f"{body['stream']}:{body['n']}"
        with self._lock:
            self.calls[body["stream"]] = self.calls.get(body["stream"], 0) + 1
        if body["stream"] == "a" and not self.released.is_set():
            return self.waiting
        with self._lock:
            self.done.append(name)
        return DONE

    def calls_on(self, stream: str) -> int:
        with self._lock:
            return self.calls.get(stream, 0)


def processor(
    workflows: Workflows,
    concurrency: int,
    clock: ManualClock,
    store: ChunkMetadataStore | None = None,
    segments: MemorySegments | None = None,
) -> tuple[RequestEventProcessor, RequestStream]:
    """A processor on ``clock`` that starts no reading loop: the test steps it (on ``store``
    and ``segments`` if given, else new ones)."""
    stream = RequestStream(segments if segments is not None else MemorySegments())
    store = store if store is not None else ChunkMetadataStore(InMemoryChunkStorage())
    return (
        RequestEventProcessor(
            stream,
            workflows.handle,
            store,
            name="t",
            concurrency=concurrency,
            expiry_s=600,
            clock=clock,
            scheduler=ManualThreadScheduler(clock),
        ),
        stream,
    )


def post(stream: RequestStream, name: str, n: int, posted_ms: float | None = None) -> None:
    posted = time.time() * 1000 if posted_ms is None else posted_ms
    stream.post({"type": "x", "scope": "sc", "stream": name, "n": n, "posted_ms": posted})


def step(p: RequestEventProcessor) -> None:
    """One turn of the reading loop, then until the pool has handled what it was handed."""
    p.run_once()
    assert p.wait_settled(20)


# The commit processor (one thread, commits WAIT for their epoch) and the request processor
# (four threads, a scale WAITs for transactions and the update behind it is POSTPONEd).
@pytest.mark.parametrize(("concurrency", "waiting"), [(1, WAIT), (4, WAIT), (4, POSTPONE)])
def test_many_waiting_requests_on_one_stream_cost_little_and_hold_up_no_other_stream(
    concurrency: int, waiting: str
) -> None:
    clock = ManualClock(wall_start_ms=int(time.time() * 1000))
    workflows = Workflows(waiting)
    p, stream = processor(workflows, concurrency, clock)
    for n in range(5):
        post(stream, "a", n, clock.wall_time_ms())
    try:
        step(p)
        assert workflows.calls_on("a") >= 5  # every one of them waits
        for n in range(3):
            post(stream, "b", n, clock.wall_time_ms())
        step(p)
        assert workflows.done == ["b:0", "b:1", "b:2"]
        # While they wait, each of a's requests is tried a few times a second at most (the
        # processor spun through them without a pause, thousands of times a second): two
        # seconds of the manual clock, the reading loop turning every 10 ms.
        before = workflows.calls_on("a")
        for _ in range(200):
            clock.advance(0.01)
            step(p)
        assert workflows.calls_on("a") - before <= 5 * 2 * 10
        workflows.released.set()
        for _ in range(200):  # the longest rest (postpone_max_s) is 1 s
            clock.advance(0.01)
            step(p)
        assert p.handled == 8
        assert [d for d in workflows.done if d.startswith("a")] == [f"a:{n}" for n in range(5)]
    finally:
        p.stop()


def test_a_resting_stream_runs_again_at_once_when_a_new_request_arrives() -> None:
    # A new request may be one that can run now (the scale a commit waits for), so it ends
    # the rest of its stream instead of waiting out the backoff.
    workflows = Workflows(WAIT)
    stream = RequestStream(MemorySegments())
    p = RequestEventProcessor(
        stream,
        workflows.handle,
        ChunkMetadataStore(InMemoryChunkStorage()),
        name="t",
        concurrency=1,
        postpone_s=30.0,
        postpone_max_s=30.0,
    )
    post(stream, "a", 0)
    p.start()
    try:
        wait_for(lambda: workflows.calls_on("a") == 1)  # now resting for 30 s
        workflows.released.set()
        post(stream, "a", 1)
        wait_for(lambda: workflows.done == ["a:0", "a:1"], timeout_s=10)
    finally:
        p.stop()


def flaky_store(failing: int) -> tuple[ChunkMetadataStore, list[int]]:
    """A metadata store whose next ``failing`` puts fail (its container restarting), and the
    count of failures still to come."""
    store = ChunkMetadataStore(InMemoryChunkStorage())
    failures = [failing]
    real_put = store.put

    def flaky_put(*args: Any, **kwargs: Any) -> Any:
        if failures[0]:
            failures[0] -= 1
            raise ConnectionError("metadata container restarting")
        return real_put(*args, **kwargs)

    store.put = flaky_put  # type: ignore[method-assign]
    return store, failures


def test_a_checkpoint_that_cannot_be_stored_does_not_stop_the_stream() -> None:
    workflows = Workflows(WAIT)
    workflows.released.set()
    store, _ = flaky_store(2)
    stream = RequestStream(MemorySegments())
    p = RequestEventProcessor(stream, workflows.handle, store, name="t", concurrency=1)
    for n in range(4):
        post(stream, "a", n)
    p.start()
    try:
        wait_for(lambda: p.handled == 4)
        assert workflows.done == [f"a:{n}" for n in range(4)]
    finally:
        p.stop()


def test_the_checkpoint_is_stored_at_most_every_interval_and_a_successor_reruns_after_it() -> None:
    """Each checkpoint is an update every watcher of the controller's tables acknowledges, so
    it is stored at most every REQUEST_CHECKPOINT_INTERVAL_S: the first finished request
    stores one at once, later ones leave it owed, and the reading loop stores it once the
    interval has passed (its read waits no longer than that). A successor starts at the
    stored checkpoint: it runs again the requests finished after it, and none before."""
    clock = ManualClock(wall_start_ms=int(time.time() * 1000))
    workflows = Workflows(WAIT)
    workflows.released.set()
    segments = MemorySegments()
    store = ChunkMetadataStore(InMemoryChunkStorage())

    def make() -> RequestEventProcessor:
        return processor(workflows, 1, clock, store, segments)[0]

    def stored() -> int | None:
        record = store.get("eventprocessors/t")
        return None if record is None else int(record.value["offset"])

    stream = RequestStream(segments)
    p = make()
    try:
        step(p)  # loads the checkpoint: none yet
        post(stream, "a", 0, clock.wall_time_ms())
        step(p)
        first = stored()
        assert first is not None and first > 0  # the first one at once
        post(stream, "b", 1, clock.wall_time_ms())
        post(stream, "c", 2, clock.wall_time_ms())
        step(p)
        assert workflows.done == ["a:0", "b:1", "c:2"]
        assert stored() == first  # owed: the interval has not passed
        assert 0 < p.read_wait_s() <= REQUEST_CHECKPOINT_INTERVAL_S  # the loop comes back for it
        clock.advance(REQUEST_CHECKPOINT_INTERVAL_S / 2)
        step(p)
        assert stored() == first
        clock.advance(REQUEST_CHECKPOINT_INTERVAL_S / 2)
        assert p.read_wait_s() == 0.005
        step(p)
        after_all = stored()
        assert after_all is not None and after_all > first  # past all three
        assert p.read_wait_s() == REQUEST_READ_WAIT_S  # nothing owed: idle again
        clock.advance(REQUEST_CHECKPOINT_INTERVAL_S * 2)
        post(stream, "d", 3, clock.wall_time_ms())
        step(p)  # the last one is old: stored at once
        assert stored() is not None and stored() > after_all  # type: ignore[operator]
        post(stream, "e", 4, clock.wall_time_ms())
        step(p)  # owed, then the processor dies
    finally:
        p.stop()
    successor = make()
    try:
        step(successor)
        assert workflows.done == ["a:0", "b:1", "c:2", "d:3", "e:4", "e:4"]  # only e again
        assert successor.drain(5)  # drain stores what is owed
        assert stored() == len(next(iter(segments._data.values())))  # past everything
    finally:
        successor.stop()


def test_a_checkpoint_whose_store_failed_is_stored_by_the_next_turn_without_a_new_request() -> None:
    clock = ManualClock(wall_start_ms=int(time.time() * 1000))
    workflows = Workflows(WAIT)
    workflows.released.set()
    store, failures = flaky_store(1)
    segments = MemorySegments()
    p, stream = processor(workflows, 1, clock, store, segments)
    try:
        step(p)
        post(stream, "a", 0, clock.wall_time_ms())
        step(p)  # handled; storing its checkpoint failed
        assert workflows.done == ["a:0"] and failures == [0]
        assert store.get("eventprocessors/t") is None
        clock.advance(REQUEST_CHECKPOINT_INTERVAL_S)
        step(p)  # owed: stored now, with no request since
        record = store.get("eventprocessors/t")
        assert record is not None
        assert record.value["offset"] == len(next(iter(segments._data.values())))
    finally:
        p.stop()


def test_the_reading_loop_waits_long_only_while_nothing_runs_or_rests() -> None:
    """Idle, the loop's read waits REQUEST_READ_WAIT_S (each wait is a Ray call to a container:
    short ones burned idle CPU); while a handler runs it waits REQUEST_POLL_S, since the
    handler may start a rest that a long read would outlast; while a stream rests, until the
    rest ends."""
    clock = ManualClock(wall_start_ms=int(time.time() * 1000))
    entered, leave = threading.Event(), threading.Event()

    def handle(body: dict[str, Any]) -> str:
        entered.set()
        assert leave.wait(20)
        return WAIT

    stream = RequestStream(MemorySegments())
    p = RequestEventProcessor(
        stream,
        handle,
        ChunkMetadataStore(InMemoryChunkStorage()),
        name="t",
        concurrency=1,
        expiry_s=600,
        clock=clock,
        scheduler=ManualThreadScheduler(clock),
    )
    try:
        p.run_once()  # loads the checkpoint
        assert p.read_wait_s() == REQUEST_READ_WAIT_S
        post(stream, "a", 0, clock.wall_time_ms())
        p.run_once()
        assert entered.wait(20)
        assert p.read_wait_s() == REQUEST_POLL_S  # a handler runs
        leave.set()
        assert p.wait_settled(20)
        wait = p.read_wait_s()  # "a" answered WAIT: it rests, REQUEST_POSTPONE_S first
        assert 0 < wait <= REQUEST_POSTPONE_S
        clock.advance(REQUEST_POSTPONE_S / 2)
        assert p.read_wait_s() == pytest.approx(wait - REQUEST_POSTPONE_S / 2)
        clock.advance(REQUEST_POSTPONE_S)
        assert p.read_wait_s() == 0.005  # over: the next turn wakes it at once
    finally:
        leave.set()
        p.stop()


def test_a_postponed_request_expires_even_when_the_wall_clock_is_set_back() -> None:
    """Expiry counts from the post by the wall clock, or from the read by the monotonic
    clock, whichever is first: a clock set back 17 hours after the post (the simulation's
    seed 1493602092) must not keep an orphaned request postponed for 17 hours, holding
    its stream."""
    clock = ManualClock(wall_start_ms=int(time.time() * 1000))
    workflows = Workflows(POSTPONE)
    p, stream = processor(workflows, 1, clock)
    post(stream, "a", 0, clock.wall_time_ms() + 17 * 3600 * 1000)  # the clock went back since
    try:
        step(p)
        assert workflows.calls_on("a") == 1 and p.handled == 0
        clock.advance(599.0)
        step(p)
        assert workflows.calls_on("a") == 2 and p.handled == 0  # not 600 s since it was read
        clock.advance(2.0)
        step(p)
        assert workflows.calls_on("a") == 3 and p.handled == 1  # expired: dropped
        assert workflows.done == []
    finally:
        p.stop()
