"""The simulated world and its seeded scheduler: one thread, one virtual clock, one seed.

A :class:`World` holds the containers (:class:`~sim.node.Node`, each on its own
:class:`~sim.loop.SimLoop`), the network between them and the clients, the writer and the
reader (``sim/clients.py``) and the invariant checker. Each *step* the scheduler lists
what may happen now and picks one, weighted, with the seed's generator:

* a container runs one ready callback of its loop, or one pending blocking call (a log
  append, a chunk write...; or that call fails: an injected I/O error);
* the network delivers a call to its container, or a reply to its caller (or loses one);
* the writer writes an event or runs a round of its pump; the reader collects its answers,
  hands out events and sends reads;
* a container crashes, or a crashed one restarts (recovering from its log and Tier-2);
* a *tick*: the clock moves to the next moment something is due (a loop's timer, a
  message's or blocking call's arrival, the writer's linger or watchdog, a read's
  timeout, a restart) if nothing else can happen; by at most 10 ms if something could
  (that part was slow, and timeouts may fire first).

Every message and blocking call takes a latency the seed draws (0.2 to 3 ms; 0.2 to 8 s
under a delay fault) and is delivered, among those due, in an order the seed picks.
Nothing else moves the clock or runs any code, so a seed replays exactly. A client that
blocks (the writer's reconnect waiting for ``setup_append``, its backoff sleep) runs the
same steps, minus the clients' own, until its answer arrives or its time is up; those
steps come first in the trace, then the client's own line, under the same number.

The run has two phases: ``steps`` steps with writes and faults, then a settling phase
without faults (every container restarted, nothing lost any more) until the writer has
an outcome for every event and the reader read every segment to its durable end; then
the final check. Each fault's rate is drawn per seed (some seeds have none of a kind),
as swarm testing does.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from pravega_ray.client.writer_config import WriterConfig
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.errors import DataCorruptionError, InvalidArgumentError
from pravega_ray.segmentstore.config import ContainerConfig
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.timing import ManualClock
from sim.clients import (
    FixedStreamController,
    SimReader,
    SimThreadScheduler,
    SimWriter,
    stream_segments,
)
from sim.invariants import Checker
from sim.network import Network
from sim.node import Node

__all__ = [
    "CONTAINER_OPTIONS",
    "FAULT_KINDS",
    "MESSAGE_LOSS",
    "WRITER_CONFIG",
    "Faults",
    "Result",
    "SimConfig",
    "World",
    "check_run_arguments",
]

CONTAINER_OPTIONS: dict[str, Any] = dict(
    read_cache_bytes_max=600,
    storage_flush_bytes=300,
    storage_flush_interval_s=0.2,
    storage_writer_tick_s=0.25,
    checkpoint_interval_s=0.5,
    checkpoint_log_bytes=1500,
    table_watch_lease_s=0.02,
)
"""Small chunks, a tiny read cache, frequent checkpoints: Tier-2 and recovery at work."""

WRITER_CONFIG = WriterConfig(
    block_bytes_target=48,
    blocks_in_flight_max=3,
    linger_s=0.01,
    reconnect_attempts_max=30,
    reconnect_backoff_s=0.05,
    append_call_timeout_s=3.0,
)
"""Blocks of about three events, three in flight per segment, a short watchdog."""


FAULT_KINDS = frozenset({"crash", "delay", "drop_call", "drop_reply", "io_error"})
"""Every kind of fault the simulation injects (``SimConfig.faults`` picks some)."""

MESSAGE_LOSS = frozenset({"drop_call", "drop_reply"})
"""Lost calls and replies. They find a known defect of the writer (its watchdog skips a
segment that is already reconnecting, so a lost answer there stalls the segment for good:
tests/unit/sim/test_sim.py), so the fixed seed set of the tests runs without them."""


@dataclass(frozen=True, slots=True)
class SimConfig:
    """The simulated cluster: containers, the stream's segments, routing keys, events, and
    the kinds of fault injected (a subset of FAULT_KINDS). InvalidArgumentError otherwise."""

    containers: int = 2
    segments: int = 3
    keys: int = 5
    events: int = 60
    settle_steps_max: int = 30_000
    faults: frozenset[str] = FAULT_KINDS

    def __post_init__(self) -> None:
        for name in ("containers", "segments", "keys", "events", "settle_steps_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"SimConfig.{name} must be an int >= 1, got {value!r}")
        if not isinstance(self.faults, frozenset) or not self.faults <= FAULT_KINDS:
            raise InvalidArgumentError(
                f"SimConfig.faults must be a frozenset of {sorted(FAULT_KINDS)}, "
                f"got {self.faults!r}"
            )


@dataclass(frozen=True, slots=True)
class Faults:
    """Per-step weights of each fault (a normal action weighs 1); 0 disables it."""

    crash: float
    delay: float  # the chance that a message or a blocking call takes long (0.2 to 8 s)
    drop_call: float
    drop_reply: float
    io_error: float
    tick: float

    @staticmethod
    def draw(rng: random.Random, kinds: frozenset[str]) -> Faults:
        """The seed's rates; a kind not in ``kinds`` gets 0 (the draws are made anyway, so
        leaving a kind out changes nothing else of a seed's run but that kind's faults)."""

        def rate(kind: str, on: float, low: float, high: float) -> float:
            drawn = rng.uniform(low, high) if rng.random() < on else 0.0
            return drawn if kind in kinds else 0.0

        return Faults(
            crash=rate("crash", 0.7, 0.0005, 0.004),
            delay=rate("delay", 0.5, 0.005, 0.05),
            drop_call=rate("drop_call", 0.3, 0.0005, 0.003),
            drop_reply=rate("drop_reply", 0.5, 0.0005, 0.005),
            io_error=rate("io_error", 0.5, 0.002, 0.02),
            tick=rng.uniform(0.05, 1.0),
        )


@dataclass
class Result:
    """One run: ``violation`` (None if every invariant held), where, and the trace."""

    seed: int
    steps: int
    violation: str | None
    violation_step: int | None
    trace: list[str]
    stats: dict[str, int] = field(default_factory=dict)
    faults: Faults | None = None

    @property
    def ok(self) -> bool:
        return self.violation is None

    @property
    def trace_hash(self) -> str:
        """SHA-256 of the trace: equal for two runs of one seed."""
        return hashlib.sha256("\n".join(self.trace).encode()).hexdigest()


Action = tuple[float, Callable[[], str]]


class World:
    """One seeded run; see the module docstring. Use :func:`sim.run`."""

    def __init__(self, seed: int, config: SimConfig) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.config = config
        self.faults = Faults.draw(self.rng, config.faults)
        self.clock = ManualClock()
        self.trace: list[str] = []
        self.errors: list[str] = []
        self.steps = 0
        self.steps_max = 0
        self.violation: str | None = None
        self.violation_step: int | None = None
        self.faulty = True
        self.counts: dict[str, int] = {}
        self.network = Network(config.containers, self._wait_for, self._arrival)
        storage = InMemoryChunkStorage()
        self.nodes = [
            Node(
                i,
                ContainerConfig(i, **CONTAINER_OPTIONS),
                storage,
                self.clock,
                self.network,
                self.errors,
                self._latency,
            )
            for i in range(config.containers)
        ]
        self.segments = stream_segments(config.segments)
        for node in self.nodes:
            node.start()
        for segment in self.segments:
            self._create(segment.name)
        connection = SegmentStoreClient(self.network)
        self.checker = Checker()
        self.writer = SimWriter(
            FixedStreamController(self.segments),
            connection,
            WRITER_CONFIG,
            self.clock,
            random.Random(self.rng.getrandbits(64)),
            SimThreadScheduler(self._sleep),
            self.checker.on_outcome,
        )
        self.reader = SimReader(
            self.segments, connection, self.clock, self._on_read, self._on_reader_error
        )
        self.keys = [f"k{i}" for i in range(config.keys)]
        self.to_write = config.events
        self._note(f"seed {seed}: {self.faults}")

    # --- setup ---------------------------------------------------------------------------------
    def _create(self, segment: str) -> None:
        """Create ``segment`` on its container, outside the trace (no faults yet)."""
        node = self.nodes[self.network.container_of(segment)]
        task = node.loop.create_task(node.container.create_segment(segment))
        while not task.done() or node.ios or node.loop.has_ready():
            if node.loop.run_one():
                continue
            if node.ios:
                node.ios.pop(0).run()
                continue
            when = node.loop.next_timer()
            assert when is not None, "segment creation is stuck"
            self.clock.set(when)
        task.result()

    def _latency(self) -> float:
        """How long a message or a blocking call takes: short, or long (a delay fault)."""
        if self.faulty and self.faults.delay and self.rng.random() < self.faults.delay:
            self._count("delays")
            return self.rng.uniform(0.2, 8.0)
        return self.rng.uniform(0.0002, 0.003)

    def _arrival(self) -> float:
        return self.clock.monotonic() + self._latency()

    # --- the run -------------------------------------------------------------------------------
    def run(self, steps: int) -> Result:
        self.steps_max = steps + self.config.settle_steps_max
        while self.steps < steps and self.violation is None:
            if not self._step(clients=True, deadline=float("inf")):
                break
        self.faulty = False
        self._note("settle: no more faults")
        while self.violation is None and not self._settled():
            if not self._step(clients=True, deadline=float("inf")):
                self._violate("stuck: nothing can happen and the run has not settled")
        if self.violation is None:
            final = self.checker.final()
            if final is not None:
                self._violate(final)
        self._note_violation()
        stats = {**self.checker.summary(), **self.counts, "steps": self.steps}
        if self.errors:  # exceptions no caller retrieved, reported by a loop (not a violation)
            stats["loop_errors"] = len(self.errors)
        for node in self.nodes:
            node.dispose()
        return Result(
            self.seed,
            self.steps,
            self.violation,
            self.violation_step,
            self.trace,
            stats,
            self.faults,
        )

    def _settled(self) -> bool:
        if self.to_write or self.writer.pending or not all(n.up for n in self.nodes):
            return False
        lengths = {
            s.name: self.nodes[self.network.container_of(s.name)]
            .container.metadata.get(s.name)
            .length
            for s in self.segments
        }
        return self.reader.caught_up(lengths)

    def _violate(self, message: str) -> None:
        """Record the first broken invariant; the trace says so after the step's own line."""
        if self.violation is None:
            self.violation = message
            self.violation_step = self.steps

    def _note_violation(self) -> None:
        if self.violation is not None and not self.trace[-1].endswith(self.violation):
            self._note(f"VIOLATION: {self.violation}")

    def _note(self, text: str) -> None:
        self.trace.append(f"{self.steps:6d} {self.clock.monotonic():9.4f} {text}")

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    # --- blocking clients ----------------------------------------------------------------------
    def _wait_for(self, future: Future[Any], timeout: float | None) -> None:
        deadline = float("inf") if timeout is None else self.clock.monotonic() + timeout
        self._run_until(future.done, deadline)

    def _sleep(self, seconds: float) -> None:
        self._run_until(lambda: False, self.clock.monotonic() + seconds)

    def _run_until(self, done: Callable[[], bool], deadline: float) -> None:
        """Run the world without the clients until ``done()`` or the clock reaches ``deadline``."""
        while not done() and self.violation is None and self.clock.monotonic() < deadline:
            if not self._step(clients=False, deadline=deadline):
                self.clock.set(deadline)

    # --- one step ------------------------------------------------------------------------------
    def _step(self, clients: bool, deadline: float) -> bool:
        """Pick and run one action; False if none is possible (not even a tick)."""
        if self.steps >= self.steps_max:
            self._violate(f"no progress: {self.steps} steps and not settled")
            return False
        actions = self._actions(clients, deadline)
        if not actions:
            return False
        total = sum(weight for weight, _ in actions)
        point = self.rng.random() * total
        chosen = actions[-1][1]
        for weight, action in actions:
            point -= weight
            if point < 0:
                chosen = action
                break
        self.steps += 1
        self._note(chosen())
        self._note_violation()
        for node in self.nodes:
            if node.up and node.failed is not None:
                self._note(f"c{node.container_id} failed ({node.failed!r}): " + self._crash(node))
        return True

    def _actions(self, clients: bool, deadline: float) -> list[Action]:
        from sim import actions  # the action builders, split out to keep this module small

        return actions.enabled(self, clients, deadline)

    def _crash(self, node: Node) -> str:
        self._count("crashes")
        fates = node.crash(self.rng, self.rng.uniform(0.05, 2.0) if self.faulty else 0.0)
        return "crash" + (f" ({', '.join(fates)})" if fates else "")

    def _restart(self, node: Node) -> str:
        try:
            node.start()
        except DataCorruptionError as e:
            self._violate(f"c{node.container_id} cannot recover: {e}")
        self._count("restarts")
        return f"c{node.container_id} restarts"

    # --- reader callbacks ----------------------------------------------------------------------
    def _on_read(self, segment: str, offset: int, payload: bytes) -> None:
        problem = self.checker.on_read(segment, offset, payload)
        if problem is not None:
            self._violate(problem)

    def _on_reader_error(self, segment: str, error: BaseException) -> None:
        self._violate(self.checker.on_reader_error(segment, error))


def check_run_arguments(seed: object, steps: object) -> None:
    """InvalidArgumentError unless ``seed`` is an int >= 0 and ``steps`` an int >= 1."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidArgumentError(f"seed must be an int >= 0, got {seed!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise InvalidArgumentError(f"steps must be an int >= 1, got {steps!r}")
