"""The simulated world and its seeded scheduler: one thread, one virtual clock, one seed.

A :class:`World` holds the containers (:class:`~sim.node.Node`, each on its own
:class:`~sim.loop.SimLoop`), the network between them and the clients, the writer and the
reader (``sim/clients.py``) and the invariant checker. Each *step* the scheduler lists
what may happen now and picks one, weighted, with the seed's generator:

* a container runs one ready callback of its loop, or one pending blocking call (a log
  append, a chunk write...; or that call fails: an injected I/O error);
* the network delivers a call to its container, or a reply to its caller (or loses one);
* the writer writes an event or runs a round of its pump; the reader collects its answers,
  hands out events, completes the segments read to their ends and sends reads (in half
  the seeds it starts late, at a step the seed draws);
* the controller's request processor reads its request stream, or handles one request
  (a scale: its segment and table calls let the world run, ``sim/controller.py``); the
  controller crashes (at a step of a scale, or when idle) or restarts from its records;
* at up to SCALES_MAX steps the seed draws, the operator asks the controller for a scale
  (that is the step's action; its calls let the world run);
* in seeds with the ``scope_delete`` feature, at a step the seed draws, an operator asks
  the controller to delete a second scope recursively, and may race it with a create in
  it (``sim/scope.py``; the step's action, its calls let the world run);
* in seeds with the ``watermarks`` feature (``sim/watermarks.py``): the writer notes a time
  (weighted, while it writes), sends its mark once the events it awaits are settled (its
  calls let the world run), the reader reads the mark segment; at steps the seed draws (and,
  weighted, while the writer works in the settling phase) the controller's watermark
  workflow runs (the step's action; its calls let the world run);
* in seeds with the ``transactions`` feature (``sim/transactions.py``): a transactional
  client begins transactions at steps the seed draws (most near a scale's), writes their
  events (pumping their writers), pings them, and commits, aborts or abandons each (each call
  lets the world run); the controller's commit and abort processors and its transaction
  timer run as the request processor does;
* a container crashes, or a crashed one restarts (recovering from its log and Tier-2); a
  crash may cut a log append in the middle of its write, leaving its record *torn* on
  the disk (``sim/disk.py``);
* once, at a step the seed picks, the wall clock jumps forward or back (``sim/clock.py``);
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
an outcome for every event, the transactional client is done and no transaction segment
is left, and the reader read every segment to its durable end; then
the final check (``sim/invariants.py``, ``World._check_scales``: each scale done exactly
once, each rolling commit made its two epochs, ``ScopeOperator.check``: the deleted scope
is gone, deleted once, ``Transactions.check``: each transaction all or nothing, as its
client was answered, and ``EventTime.check``: the mark segment's watermarks never go
back). Before step 1, the controller starts and creates the stream (and the second
scope), outside the trace and on a generator of its own. Each fault's rate is drawn per
seed (some seeds have none of a kind), as swarm testing does. A step is the same step
whatever ``steps`` is: a run of fewer steps is the same run cut short (what ``python -m
sim`` relies on to shrink a failing seed, ``sim/shrink.py``).

In a seed with torn writes, the Tier-1 logs are files in a temporary directory
(``sim/disk.py``), removed when the run ends; nothing of its path reaches the trace.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pravega_ray.client.event_framing import FrameAssembler
from pravega_ray.client.writer_config import WriterConfig
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.errors import (
    DataCorruptionError,
    InvalidArgumentError,
    PravegaError,
    RetriableError,
    ScaleConflictError,
)
from pravega_ray.segmentstore.config import ContainerConfig
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.stream_configuration import ScalingPolicy, StreamConfiguration
from sim import actions
from sim.clients import SCOPE, STREAM, SimReader, SimThreadScheduler, SimWriter
from sim.clock import SimClock
from sim.controller import ControllerCrash, SimController, SimProcessor, covers_key_space
from sim.disk import LogDisk, make_root, remove_root, sanitize
from sim.invariants import Checker
from sim.network import Network
from sim.node import Io, Node
from sim.scope import ScopeOperator
from sim.transactions import TXN_PREFIX, Transactions
from sim.watermarks import EventTime

__all__ = [
    "CONTAINER_OPTIONS",
    "DEFAULT_STEPS",
    "FAULT_KINDS",
    "FEATURES",
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

COMPACTING_OPTIONS: dict[str, Any] = dict(
    table_compaction_min_bytes=400,
    table_compaction_round_bytes=300,
)
"""With ``SimConfig.compaction``: the controller's table segments compacted once they store
400 bytes, 300 bytes a round (by default they never reach compaction's 64 KiB here)."""

WRITER_CONFIG = WriterConfig(
    block_bytes_target=48,
    blocks_in_flight_max=3,
    linger_s=0.01,
    reconnect_attempts_max=30,
    reconnect_backoff_s=0.05,
    append_call_timeout_s=3.0,
)
"""Blocks of about three events, three in flight per segment, a short watchdog."""


DEFAULT_STEPS = 1500
"""Steps of the faulty phase of a run unless told otherwise."""

FAULT_KINDS = frozenset(
    {
        "crash",
        "delay",
        "drop_call",
        "drop_reply",
        "io_error",
        "torn_tail",
        "clock_jump",
        "controller_crash",
        "tier2_outage",
        "scope_delete",
        "transactions",
        "watermarks",
    }
)
"""Every kind of fault the simulation injects (``SimConfig.faults`` picks some):

* ``crash``: a container's process dies (and restarts 0.05 to 2 s later);
* ``delay``: a message or blocking call takes 0.2 to 8 s instead of 0.2 to 3 ms;
* ``drop_call``, ``drop_reply``: a call or a reply is lost;
* ``io_error``: a log append or a Tier-2 chunk write fails;
* ``torn_tail``: a container crashes in the middle of a log append's write, which leaves
  part of its record on the disk (``sim/disk.py``); and half of the log appends that
  fail with an I/O error wrote part of their record before failing;
* ``clock_jump``: the wall clock jumps forward or back by 1 ms to about 29 days, once,
  at a step from 1 to DEFAULT_STEPS (``sim/clock.py``); the monotonic clock does not;
* ``controller_crash``: the controller's process dies (``sim/controller.py``), between two
  steps of a scale workflow (mid-scale) or at any step, and restarts 0.05 to 2 s later,
  rebuilt from its table segments;
* ``tier2_outage``: Tier-2 is down for a stretch of 50 to 400 steps (from a step from 1 to
  DEFAULT_STEPS): every chunk call of every container fails with an I/O error meanwhile,
  so Tier-1 holds what is acknowledged and the storage writers flush it once it is back;
* ``scope_delete`` (a feature, drawn per seed like a fault): a second scope with a few
  small streams is created at setup, and an operator deletes it recursively at a step
  (from 1 to SCOPE_DELETE_STEP_MAX), in half of those seeds racing a create in it
  (``sim/scope.py``);
* ``watermarks`` (a feature, drawn per seed): event time (``sim/watermarks.py``): events
  carry times, the writer notes times at steps the seed draws and sends its marks once its
  pending events settle, the controller's watermark workflow runs at other drawn steps (the
  controller crashing between its steps), and the reader's time window is checked against
  every event it reads; at the end, the mark segment's watermarks never go back.

* ``transactions`` (a feature, drawn per seed): a transactional client
  (``sim/transactions.py``) begins 2 to 4 transactions on the stream (most near a scale's
  step), writes a few events in each, then commits, aborts or abandons them (their leases
  run out); the controller runs its commit and abort event processors, its rolling commits
  and its transaction timer (``sim/controller.py``, crashing between their steps); each
  event read is checked against what the client was answered, and at the end every
  acknowledged commit is wholly visible, once and contiguous, and nothing else is.
"""

SCALES_MAX = 3
"""Scales a seed may ask for (at steps it draws from 1 to DEFAULT_STEPS)."""
SCOPE_DELETE_STEP_MAX = 1000
"""The second scope is deleted at a step from 1 to this (``scope_delete``)."""
SEGMENTS_MAX = 6
"""A scale merges two neighbours once the stream has this many segments (else it may split)."""

FEATURES = frozenset({"scope_delete", "transactions", "watermarks"})
"""The kinds that are features, not faults (drawn per seed alike; left out alike)."""

MESSAGE_LOSS = frozenset({"drop_call", "drop_reply"})
"""Lost calls and replies. They find a known defect of the writer (its watchdog skips a
segment that is already reconnecting, so a lost answer there stalls the segment for good:
tests/unit/sim/test_sim.py), so the fixed seed set of the tests runs without them."""


@dataclass(frozen=True, slots=True)
class SimConfig:
    """The simulated cluster: containers, the stream's segments (at first), routing keys,
    events, the kinds of fault injected (a subset of FAULT_KINDS), and whether the stream
    scales (at steps the seed draws). InvalidArgumentError otherwise."""

    containers: int = 2
    segments: int = 3
    keys: int = 5
    events: int = 60
    settle_steps_max: int = 30_000
    faults: frozenset[str] = FAULT_KINDS
    scales: bool = True
    compaction: bool = False
    """Compact the controller's table segments (``COMPACTING_OPTIONS``). Off by default: the
    fixed seeds and the planted defects' counts were measured without it."""

    def __post_init__(self) -> None:
        for name in ("containers", "segments", "keys", "events", "settle_steps_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"SimConfig.{name} must be an int >= 1, got {value!r}")
        for flag in ("scales", "compaction"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidArgumentError(
                    f"SimConfig.{flag} must be a bool, got {getattr(self, flag)!r}"
                )
        if not isinstance(self.faults, frozenset) or not self.faults <= FAULT_KINDS:
            raise InvalidArgumentError(
                f"SimConfig.faults must be a frozenset of {sorted(FAULT_KINDS)}, "
                f"got {self.faults!r}"
            )


@dataclass(frozen=True, slots=True)
class Faults:
    """Per-step weights of each fault (a normal action weighs 1); 0 disables it. ``delay``
    is a chance instead, and the clock jump happens at a given step."""

    crash: float
    delay: float  # the chance that a message or a blocking call takes long (0.2 to 8 s)
    drop_call: float
    drop_reply: float
    io_error: float
    tick: float
    torn_tail: float = 0.0  # a crash tearing a pending log append (while one is pending)
    clock_jump_step: int = 0  # the step (1 to DEFAULT_STEPS) the wall clock jumps at; 0: never
    clock_jump_ms: int = 0  # by how much (either way)
    controller_crash: float = 0.0  # the chance at each workflow step; a tenth of it per step
    tier2_outage_step: int = 0  # the first step of the Tier-2 outage; 0: none
    tier2_outage_steps: int = 0  # how many steps it lasts
    scope_delete_step: int = 0  # the step the second scope is deleted at; 0: no second scope
    scope_create_step: int = 0  # the step a create in it races the delete; 0: none
    transactions: int = 0  # transactions planned (sim/transactions.py); 0: none (and no
    # commit or abort processors, no transaction timer)
    watermarks: int = 0  # watermark runs (sim/watermarks.py); 0: no event time

    def tier2_down(self, step: int) -> bool:
        """Whether Tier-2 is down at ``step`` (the ``tier2_outage`` fault)."""
        start = self.tier2_outage_step
        return bool(start) and start <= step < start + self.tier2_outage_steps

    @staticmethod
    def draw(
        rng: random.Random,
        kinds: frozenset[str],
        extra: random.Random,
        controller: random.Random | None = None,
        outage: random.Random | None = None,
        features: random.Random | None = None,
    ) -> Faults:
        """The seed's rates; a kind not in ``kinds`` gets 0 (the draws are made anyway, so
        leaving a kind out changes nothing else of a seed's run but that kind's faults).

        The kinds added later (``torn_tail``, ``clock_jump``; ``controller_crash``;
        ``tier2_outage``; ``scope_delete``, ``transactions`` and ``watermarks``) are drawn from
        generators of their own (``extra``; ``controller``, none: no controller crash;
        ``outage``, none: no outage; ``features``, none: no feature), so adding them changed
        no other draw.
        """

        def rate(kind: str, on: float, low: float, high: float, source: random.Random) -> float:
            drawn = source.uniform(low, high) if source.random() < on else 0.0
            return drawn if kind in kinds else 0.0

        jump = extra.random() < 0.5 and "clock_jump" in kinds
        jump_step = extra.randint(1, DEFAULT_STEPS)
        jump_ms = round(10 ** extra.uniform(0.0, 9.4)) * (1 if extra.random() < 0.5 else -1)
        return Faults(
            crash=rate("crash", 0.7, 0.0005, 0.004, rng),
            delay=rate("delay", 0.5, 0.005, 0.05, rng),
            drop_call=rate("drop_call", 0.3, 0.0005, 0.003, rng),
            drop_reply=rate("drop_reply", 0.5, 0.0005, 0.005, rng),
            io_error=rate("io_error", 0.5, 0.002, 0.02, rng),
            tick=rng.uniform(0.05, 1.0),
            torn_tail=rate("torn_tail", 0.3, 0.003, 0.03, extra),
            clock_jump_step=jump_step if jump else 0,
            clock_jump_ms=jump_ms if jump else 0,
            controller_crash=0.0
            if controller is None
            else rate("controller_crash", 0.6, 0.05, 0.3, controller),
            **_outage(outage, "tier2_outage" in kinds),
            **_features(features, kinds),
        )

    def active(self) -> frozenset[str]:
        """The kinds of fault this seed injects (a rate above 0, or a jump)."""
        rates = {
            "crash": self.crash,
            "delay": self.delay,
            "drop_call": self.drop_call,
            "drop_reply": self.drop_reply,
            "io_error": self.io_error,
            "torn_tail": self.torn_tail,
            "clock_jump": self.clock_jump_step,
            "controller_crash": self.controller_crash,
            "tier2_outage": self.tier2_outage_steps,
            "scope_delete": self.scope_delete_step,
            "transactions": self.transactions,
            "watermarks": self.watermarks,
        }
        return frozenset(kind for kind, rate in rates.items() if rate)


def _outage(source: random.Random | None, on: bool) -> dict[str, int]:
    """The ``tier2_outage`` fields of :meth:`Faults.draw` (drawn even when off)."""
    if source is None:
        return {}
    happens = source.random() < 0.5
    start, steps = source.randint(1, DEFAULT_STEPS), source.randint(50, 400)
    if not (happens and on):
        return {}
    return {"tier2_outage_step": start, "tier2_outage_steps": steps}


def _features(source: random.Random | None, kinds: frozenset[str]) -> dict[str, int]:
    """The ``scope_delete``, ``transactions`` and ``watermarks`` fields of :meth:`Faults.draw`
    (every value drawn even when off, so leaving one out changes nothing of the others; the
    ``watermarks`` draws come last, so adding them changed none of the others)."""
    if source is None:
        return {}
    scope = source.random() < 0.6
    delete_step = source.randint(1, SCOPE_DELETE_STEP_MAX)
    race = source.random() < 0.5
    create_step = max(1, delete_step + source.randint(-40, 40))
    txns = source.random() < 0.5
    count = source.randint(3, 8)
    marks = source.random() < 0.5
    runs = source.randint(10, 30)
    out: dict[str, int] = {}
    if scope and "scope_delete" in kinds:
        out["scope_delete_step"] = delete_step
        out["scope_create_step"] = create_step if race else 0
    if txns and "transactions" in kinds:
        out["transactions"] = (count + 1) // 2  # 2 to 4: more slowed the runs down too much
    if marks and "watermarks" in kinds:
        out["watermarks"] = runs
    return out


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
T = TypeVar("T")

TIME_QUERIES = 24
"""Wall times at which the final check asks each segment's time index (at most)."""


class World:
    """One seeded run; see the module docstring. Use :func:`sim.run`."""

    def __init__(self, seed: int, config: SimConfig) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.config = config
        self.faults = Faults.draw(
            self.rng,
            config.faults,
            random.Random(f"sim-extra:{seed}"),
            random.Random(f"sim-controller:{seed}"),
            random.Random(f"sim-tier2:{seed}"),
            random.Random(f"sim-features:{seed}"),
        )
        self.scale_rng = random.Random(f"sim-scale:{seed}")
        count = self.scale_rng.choice((0, 1, 2, 2, 3, 3)) if config.scales else 0
        self.scale_steps = sorted(
            self.scale_rng.randint(1, DEFAULT_STEPS) for _ in range(min(count, SCALES_MAX))
        )
        reader_rng = random.Random(f"sim-reader:{seed}")
        late = reader_rng.random() < 0.5
        self.reader_from_step = reader_rng.randint(1, DEFAULT_STEPS) if late else 0
        """In half the seeds the reader starts late (at a step up to DEFAULT_STEPS; at the
        latest when the run settles), with a backlog to catch up on, across scales."""
        self.scale_due_at = 0.0  # a scale refused for now is asked for again from then on
        self.scale_epochs: list[int] = []  # the epochs of the scales the controller accepted
        self.scales_unknown = 0  # scale calls whose outcome is unknown (may have been made)
        self.clock = SimClock()
        self.jumped = False
        self.wall_marks: list[int] = []  # wall times (ms) the time-index check asks about
        self.trace: list[str] = []
        self.errors: list[str] = []
        self.steps = 0
        self.steps_max = 0
        self.violation: str | None = None
        self.violation_step: int | None = None
        self.faulty = True
        self.fault_steps = 0  # the faulty phase ends at this step (``run`` sets it)
        self.counts: dict[str, int] = {}
        self.network = Network(config.containers, self._wait_for, self._arrival)
        storage = InMemoryChunkStorage()
        # Torn writes need files (sim/disk.py); other seeds run the faster in-memory log.
        self.root: Path | None = make_root() if self.faults.torn_tail else None
        self.nodes = [
            Node(
                i,
                ContainerConfig(
                    i, **CONTAINER_OPTIONS, **(COMPACTING_OPTIONS if config.compaction else {})
                ),
                storage,
                self.clock,
                self.network,
                self.errors,
                self._latency,
                LogDisk(None if self.root is None else self.root / f"container-{i}"),
            )
            for i in range(config.containers)
        ]
        self.checker = Checker()
        connection = SegmentStoreClient(self.network)
        self.controller = SimController(
            self.network.lossless(),
            storage,
            self.clock,
            SimThreadScheduler(self._sleep),
            random.Random(f"sim-ids:{seed}"),
            config.containers,
            self._controller_crashes,
            transactions=bool(self.faults.transactions),
        )
        self.scope_op = ScopeOperator(
            seed, self.faults.scope_delete_step, self.faults.scope_create_step
        )
        self.event_time = EventTime(seed, self.faults.watermarks)
        self.transactions = Transactions(
            seed, self.faults.transactions, self.scale_steps, config.keys, WRITER_CONFIG
        )
        self.to_write = 0
        try:
            for node in self.nodes:
                node.start()
            writer_rng = random.Random(self.rng.getrandbits(64))
            segments = self._set_up(config.segments)
            self.writer = self._during_setup(
                lambda: SimWriter(
                    self.controller,
                    connection,
                    WRITER_CONFIG,
                    self.clock,
                    writer_rng,
                    SimThreadScheduler(self._sleep),
                    self.checker.on_outcome,
                )
            )
        except BaseException:
            self.close()
            raise
        self.reader = SimReader(
            segments,
            connection,
            self.event_time.successors(self.controller),
            self.clock,
            self._on_read,
            self._on_reader_error,
        )
        self.keys = [f"k{i}" for i in range(config.keys)]
        self.to_write = config.events
        self._note(
            f"seed {seed}: {self.faults}, scales at steps {self.scale_steps}, "
            f"reader from step {self.reader_from_step}"
        )

    # --- setup ---------------------------------------------------------------------------------
    def _set_up(self, segments: int) -> tuple[str, ...]:
        """Start the controller, create the scope and the stream of ``segments`` segments
        through it (its records in table segments, its segments on the containers), outside
        the trace and without faults; the stream's segment names."""

        def set_up() -> tuple[str, ...]:
            self.controller.start()
            controller = self.controller.controller
            assert controller is not None
            controller.create_scope(SCOPE)
            config = StreamConfiguration(scaling=ScalingPolicy.fixed(segments))
            controller.create_stream(SCOPE, STREAM, config)
            if self.scope_op.on:
                self.scope_op.set_up(self)
            if self.event_time.on:
                self.event_time.set_up(controller)
            return tuple(s.name for s in controller.get_current_segments(SCOPE, STREAM))

        return self._during_setup(set_up)

    def _during_setup(self, call: Callable[[], T]) -> T:
        """``call()`` (whose calls let the world run) outside the trace, without faults, on
        a generator of its own (the seed's is untouched); the step count starts over."""
        seed_rng, self.rng = self.rng, random.Random(f"sim-setup:{self.seed}")
        self.faulty = False
        self.steps_max = 1_000_000
        try:
            return call()
        finally:
            self.rng = seed_rng
            self.faulty = True
            self.steps = self.steps_max = 0
            self.trace.clear()
            self.counts.clear()

    def _local(self, node: Node, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on ``node``'s loop to its end, outside the trace and without
        faults (setup, and the final check): the node's ready callbacks and blocking calls
        run in order, and the clock moves to its timers when nothing else can run."""
        task = node.loop.create_task(coroutine)
        while not task.done() or node.ios or node.loop.has_ready():
            if node.loop.run_one():
                continue
            if node.ios:
                node.ios.pop(0).run()
                continue
            when = node.loop.next_timer()
            assert when is not None, "a local call is stuck"
            self.clock.set(when)
        return task.result()

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
        self.fault_steps = steps
        try:
            while self.steps < steps and self.violation is None:
                if not self._step(clients=True, deadline=float("inf")):
                    break
            self._end_faults()
            while self.violation is None and not self._settled():
                if not self._step(clients=True, deadline=float("inf")):
                    self._violate("stuck: nothing can happen and the run has not settled")
        except Exception:
            # A client blocked in a call when a violation stopped the world: its wait ran
            # out (TimeoutError, not an error of the system). Anything else is the sim's.
            if self.violation is None:
                raise
        if self.violation is None:
            final = (
                self._check_scales()
                or self.scope_op.check(self)
                or self.checker.final()
                or self.transactions.check(self)
                or self._check_segments()
                or self.event_time.check(self)
            )
            if final is not None:
                self._violate(final)
        self._note_violation()
        stats = {**self.checker.summary(), **self.counts, "steps": self.steps}
        stats["compaction_rounds"] = sum(node.compaction_rounds() for node in self.nodes)
        if self.errors:  # exceptions no caller retrieved, reported by a loop (not a violation)
            stats["loop_errors"] = len(self.errors)
        self.close()
        return Result(
            self.seed,
            self.steps,
            self.violation,
            self.violation_step,
            self.trace,
            stats,
            self.faults,
        )

    def close(self) -> None:
        """Dispose of every node and remove the run's disks (idempotent)."""
        for node in self.nodes:
            node.dispose()
        if self.root is not None:
            remove_root(self.root)

    def _check_segments(self) -> str | None:
        """Once everything settled: each segment read again whole holds what the reader
        read (``Checker.check_reread``), and its time index holds (``check_time_index``),
        asked at up to ``TIME_QUERIES`` wall times of the run."""
        marks = sorted({0, *self.wall_marks, self.clock.wall_time_ms() + 1000})
        if len(marks) > TIME_QUERIES:
            marks = [marks[i * (len(marks) - 1) // (TIME_QUERIES - 1)] for i in range(TIME_QUERIES)]
        for name in self._stream_segments():
            node = self.nodes[self.network.container_of(name)]
            container = node.container
            length = container.metadata.get(name).length
            try:
                data = self._local(node, container.read_range(name, 0, length))
                answers = [self._local(node, container.get_offset_at_time(name, t)) for t in marks]
            except Exception as e:
                return f"{name} cannot be read again: {sanitize(repr(e), self.root)}"
            frames = FrameAssembler()
            events = frames.feed(data, 0)
            problem = self.checker.check_reread(name, events, frames.buffered_bytes)
            if problem is None:
                problem = self.checker.check_time_index(name, marks, answers, length)
            if problem is not None:
                return problem
        return None

    def _stream_segments(self) -> dict[str, tuple[int, bool]]:
        """Every segment of the stream the containers hold: name -> (length, sealed);
        transaction segments left out (``Transactions.check``: none is left at the end)."""
        prefix = f"{SCOPE}/{STREAM}/"
        found: dict[str, tuple[int, bool]] = {}
        for node in self.nodes:
            for state in node.container.metadata:
                if state.name.startswith(prefix) and "#transaction." not in state.name:
                    found[state.name] = (state.length, state.sealed)
        return dict(sorted(found.items()))

    def _settled(self) -> bool:
        if self.to_write or self.writer.pending or not all(n.up for n in self.nodes):
            return False
        if not self.controller.up or self.controller.busy or self.scope_op.pending:
            return False
        if self.transactions.pending(self):
            return False
        return self.reader.caught_up(self._stream_segments())

    def _check_scales(self) -> str | None:
        """Once everything settled: each scale the controller accepted made its epoch,
        exactly once, and each rolling commit its two (the stream's epoch is the count of
        them, plus those of the scale calls whose outcome is unknown that took effect and of
        the rolls the reader could not tell, ``Transactions.rolls``; it is ACTIVE), the
        current segments cover the key space, and every other segment of the stream is
        sealed. (Asks the controller: the world runs meanwhile, without faults.)"""
        try:
            info = self.controller.get_stream_info(SCOPE, STREAM)
        except PravegaError as e:
            return f"the controller cannot answer after settling: {sanitize(repr(e), self.root)}"
        accepted = len(set(self.scale_epochs))  # a repeat of the scale under way: its epoch
        seen, possible = self.transactions.rolls()  # a rolling commit makes two epochs
        low, high = accepted + 2 * seen, accepted + self.scales_unknown + 2 * possible
        if not low <= info.epoch <= high or info.state.value != "ACTIVE":
            rolls = f" and {seen} to {possible} rolling commits" if possible else ""
            return (
                f"stream at epoch {info.epoch} ({info.state.value}) after "
                f"{len(self.scale_epochs)} scales (epochs {self.scale_epochs}){rolls}"
            )
        if not covers_key_space(info.segments):
            ranges = [(s.key_low, s.key_high) for s in info.segments]
            return f"the current segments do not cover the key space: {ranges}"
        current = {s.name for s in info.segments}
        for name, (_, sealed) in self._stream_segments().items():
            if sealed == (name in current):
                what = "sealed but current" if sealed else "not sealed, not current"
                return f"segment {name} is {what} at epoch {info.epoch}"
        return None

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
    def _end_faults(self) -> None:
        """The settling phase starts (once). Also from within a step: a client blocked in
        the last faulty step (the operator's scale) runs steps of its own, and faults that
        went on in those had no end (a seed whose containers crashed in turn for ever)."""
        if self.faulty:
            self.faulty = False
            if self.violation is None:
                self._note("settle: no more faults")

    def _step(self, clients: bool, deadline: float) -> bool:
        """Pick and run one action; False if none is possible (not even a tick)."""
        if self.steps >= self.steps_max:
            self._violate(f"no progress: {self.steps} steps and not settled")
            return False
        if self.steps >= self.fault_steps:
            self._end_faults()
        jump_step = self.faults.clock_jump_step
        if self.faulty and jump_step and not self.jumped and self.steps + 1 >= jump_step:
            self.steps += 1  # the jump is this step's action: nothing else happens in it
            self._note(self._jump())
            return True
        if clients and self.scale_due():
            self.steps += 1  # the operator's scale is this step's action (its calls run the
            self._note(self.scale())  # world meanwhile: their steps come first in the trace)
            self._note_violation()
            return True
        if clients and self.scope_op.due(self):
            self.steps += 1  # the operator's scope delete (or create) is this step's action
            self._note(self.scope_op.act(self))
            self._note_violation()
            return True
        if clients and self.event_time.due(self):
            self.steps += 1  # a note of the writer's, or a watermark run (sim/watermarks.py)
            self._note(self.event_time.act(self))
            self._note_violation()
            return True
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
        return actions.enabled(self, clients, deadline)  # split out: this module stays small

    def _crash(self, node: Node, tear: Io | None = None) -> str:
        """Crash ``node`` (tearing the log append ``tear``, if given); the trace's text."""
        self._count("crashes")
        restart_in_s = self.rng.uniform(0.05, 2.0) if self.faulty else 0.0
        fates = node.crash(self.rng, restart_in_s, tear)
        if any(" torn," in fate for fate in fates):
            self._count("torn_writes")
        return "crash" + (f" ({', '.join(fates)})" if fates else "")

    def _jump(self) -> str:
        """The clock-jump fault: the wall clock moves, the monotonic clock does not."""
        before = self.clock.wall_time_ms()
        self.jumped = True
        self.clock.jump_wall(self.faults.clock_jump_ms)
        self.wall_marks.extend((before, self.clock.wall_time_ms()))
        self._count("clock_jumps")
        return f"wall clock jumps {self.faults.clock_jump_ms / 1000:+.3f} s"

    def _restart(self, node: Node) -> str:
        try:
            node.start()
        except DataCorruptionError as e:
            self._violate(f"c{node.container_id} cannot recover: {sanitize(str(e), self.root)}")
        except Exception as e:  # recovery must not fail otherwise either
            reason = sanitize(repr(e), self.root)
            self._violate(f"c{node.container_id} recovery failed: {reason}")
        self._count("restarts")
        return f"c{node.container_id} restarts"

    def wake_times(self) -> list[float]:
        """When the clients' calls refused for now are asked again (the tick goes there)."""
        op = self.scope_op
        times = []
        if op.pending:
            times += [op.delete_due_at, op.create_due_at]
        return times + self.event_time.wake_times() + self.transactions.wake_times()

    def wake_writer(self) -> None:
        """A reply arrived: the writers' pumps may have work (none while setting up)."""
        writer: SimWriter | None = getattr(self, "writer", None)
        if writer is not None:
            writer.wake()
            if self.transactions.on:
                self.transactions.wake(self.clock.monotonic())

    # --- the controller ------------------------------------------------------------------------
    def _controller_crashes(self, step: str) -> bool:
        """Whether the controller dies at workflow step ``step`` (the fault's chance)."""
        chance = self.faults.controller_crash if self.faulty else 0.0
        return bool(chance) and self.rng.random() < chance

    def crash_controller(self, where: str) -> str:
        """The controller's process dies (``where``: the trace's text); the trace's line."""
        self._count("controller_crashes")
        self.controller.crash(self.rng.uniform(0.05, 2.0) if self.faulty else 0.0)
        return f"controller crash ({where})"

    def restart_controller(self) -> str:
        """The controller restarts, rebuilt from its table segments (its calls let the world
        run); a crash during the rebuild leaves it down until the next restart."""
        self._count("controller_restarts")
        try:
            self.controller.start()
        except RetriableError as e:  # its records' container stayed down too long
            self.controller.crash(0.5)
            return f"controller restart fails ({type(e).__name__}): again in 0.5 s"
        except PravegaError as e:
            self._violate(f"the controller cannot restart: {sanitize(repr(e), self.root)}")
            self.controller.crash(0.5)
            return "controller restart fails"
        return f"controller restarts (incarnation {self.controller.incarnations})"

    def run_controller_task(self, processor: SimProcessor) -> str:
        """A processor handles one request (the world runs during its calls)."""
        try:
            self.controller.run_task(processor)
        except ControllerCrash as e:
            return f"{processor.name} task: " + self.crash_controller(f"at {e}")
        return f"{processor.name} task"

    def read_requests(self, processor: SimProcessor) -> str:
        name = processor.name
        try:
            read = self.controller.read(processor)
        except RetriableError as e:  # the request stream's container is restarting
            processor.read_at = self.clock.monotonic() + 0.5
            return f"{name} reads requests: {type(e).__name__}"
        except PravegaError as e:
            self._violate(f"the {name} processor failed: {sanitize(repr(e), self.root)}")
            processor.read_at = self.clock.monotonic() + 0.5
            return f"{name} reads requests: fails"
        return f"{name} reads {read} requests"

    def sweep_transactions(self) -> str:
        """The transaction timer sweeps (its calls let the world run)."""
        try:
            aborted = self.controller.sweep()
        except RetriableError as e:  # its records' container is restarting: next period
            return f"transaction timer: {type(e).__name__}"
        except PravegaError as e:
            self._violate(f"the transaction timer failed: {sanitize(repr(e), self.root)}")
            return "transaction timer fails"
        if aborted:
            self._count("txn_timeouts")
        return f"transaction timer: {aborted} aborted" if aborted else "transaction timer"

    def scale_due(self) -> bool:
        """Whether the operator asks for a scale now (its step came, the faulty phase)."""
        return (
            self.faulty
            and bool(self.scale_steps)
            and self.steps + 1 >= self.scale_steps[0]
            and self.clock.monotonic() >= self.scale_due_at
            and self.controller.up
        )

    def scale(self) -> str:
        """Ask the controller for a scale of the current segments: split one in two, or
        merge two neighbours (the seed's scale generator picks). A refused one (another
        under way, the controller unavailable) is asked again 0.5 s later."""
        rng = self.scale_rng
        try:
            current = sorted(
                self.controller.get_current_segments(SCOPE, STREAM), key=lambda s: s.key_low
            )
            merge = len(current) >= SEGMENTS_MAX or (len(current) > 1 and rng.random() < 0.5)
            if merge:
                i = rng.randrange(len(current) - 1)
                a, b = current[i], current[i + 1]
                sealed, ranges = [a.segment_id, b.segment_id], [(a.key_low, b.key_high)]
            else:
                a = current[rng.randrange(len(current))]
                middle = (a.key_low + a.key_high) / 2
                sealed, ranges = [a.segment_id], [(a.key_low, middle), (middle, a.key_high)]
            epoch = self.controller.scale_stream(SCOPE, STREAM, sealed, ranges)
        except (RetriableError, ScaleConflictError) as e:
            if not isinstance(e, ScaleConflictError):
                self.scales_unknown += 1
            self.scale_due_at = self.clock.monotonic() + 0.5
            return f"scale refused ({type(e).__name__}): again in 0.5 s"
        except PravegaError as e:  # damaged records, say
            self._violate(f"the controller failed a scale: {sanitize(repr(e), self.root)}")
            return "scale fails"
        self.scale_steps.pop(0)
        self.scale_epochs.append(epoch)
        self._count("scales")
        how = "merge" if merge else "split"
        return f"scale: {how} {sealed} into {len(ranges)} (epoch {epoch})"

    # --- reader callbacks ----------------------------------------------------------------------
    def _on_read(self, segment: str, offset: int, payload: bytes) -> None:
        if payload[:1] == TXN_PREFIX and self.transactions.on:
            self.checker.keep(segment, offset, payload)  # for the final re-read
            problem = self.transactions.on_read(self, segment, offset, payload)
        else:
            problem = self.checker.on_read(segment, offset, payload)
        if problem is None and self.event_time.on:
            problem = self.event_time.on_event(self, segment, offset, payload)
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
