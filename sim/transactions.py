"""Transactions in the simulation (the ``transactions`` feature): a transactional client
begins, writes, commits, aborts and abandons transactions on the simulation's stream while
it scales, through the project's :class:`~pravega_ray.client.transactional_writer.
TransactionalEventStreamWriter`; the controller's commit and abort event processors, its
rolling commits and its transaction timer (``sim/controller.py``) do the rest.

In a seed that draws the feature (2 to 4 transactions, each with a plan drawn from a
generator of the feature's own, so the seed's other draws are untouched):

* **Begin.** At the step its plan draws (in 60% of the plans, shortly before a scale's
  step, so that its commit lands while the stream scales; else anywhere in the faulty
  phase), a transaction is begun by a transactional writer of its own (a lease of 1.5 to
  4 s, drawn per seed), whose calls go to the simulated controller (ControllerUnavailableError
  while it is down). A begin whose outcome is unknown is asked again 0.5 s later (a new
  transaction: the one it may have made is an orphan whose lease runs out).
* **Writes.** 1 to 4 events, ``b"t<i>:<key>:<n>"`` (the transaction's number, a routing key
  of the stream's, the event's number within the transaction), through the transaction's
  own event writer (the real ``EventStreamWriter`` over its transaction segments; the
  simulator pumps it, as it pumps the stream's writer).
* **End**, at the step the plan draws (around a scale's step if it began near one), once
  every event written is settled: *commit* (60%; ``commit(wait=False)``: it returns once the
  controller has it COMMITTING, which acknowledges it: it commits whatever happens to the
  client), *abort* (20%) or *abandon* (20%: its writer is closed, which stops pinging it,
  so the timer aborts it once its lease runs out). A transaction one of whose events failed
  is aborted instead. A commit whose outcome is unknown (ControllerUnavailableError) is
  asked again 0.5 s later, or (half the time) the client gives up: its writer is closed,
  and the transaction either commits or times out. A commit refused (TxnFailedError: its
  lease ran out) is final. An abort whose outcome is unknown is asked again.
* **Pings**: every ``lease / 3`` (``ping_all``, as the writer's ping thread does).
* **Settling**: the run settles once the client is done and no transaction segment of the
  stream remains (each merged by a commit or deleted by an abort; an orphan's too, once its
  lease runs out), and the controller's processors are idle.

The simulation's event writers have no pump thread, so a close (which a commit, an abort,
a failed ping and the transactional writer's close all do) would wait for futures only the
simulator completes: each of them happens only once no event of the transaction is pending
(a transaction whose events are stuck is pinged once they settle, and may time out first).

The invariants (:meth:`Transactions.on_read`, as each event is read, and
:meth:`Transactions.check`, once the run settled):

* no event of a transaction is read unless its commit was asked, and none of one whose
  commit was refused or that was aborted or abandoned (timed out) before a commit;
* each transaction event is read at most once, and in the order written per key;
* per routing key, every event of the stream's writer acknowledged before ``commit()`` was
  called is read before the transaction's events of that key;
* at the end (each transaction's status asked, ``check_status``): a transaction whose commit
  was acknowledged has every event read, and is COMMITTED; one whose commit outcome stayed
  unknown has all (COMMITTED) or none (ABORTED); one never committed is ABORTED and has
  none; in every segment (read again whole) a transaction's events are
  contiguous, one unit; no transaction segment of the stream is left.

Violations name the transaction: ``t<i>`` and the last 8 hex digits of its id. A commit
that rolled (its events merged into a later epoch's duplicates of its epoch's segments,
``stream_workflows.py`` ``run_roll``) is noted in the trace when the reader first reads one
of its events.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from pravega_ray.client.connection import ControllerConnection
from pravega_ray.client.serializers import BytesSerializer
from pravega_ray.client.transactional_writer import Transaction, TransactionalEventStreamWriter
from pravega_ray.client.writer import EventStreamWriter, WriteFuture
from pravega_ray.client.writer_config import WriterConfig
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.errors import (
    PravegaError,
    RetriableError,
    TxnFailedError,
    TxnNotFoundError,
)
from pravega_ray.naming import is_transaction_segment, parse_segment_name
from sim.clients import SCOPE, STREAM, SimThreadScheduler
from sim.disk import sanitize

if TYPE_CHECKING:
    from sim.controller import SimController
    from sim.world import Action, World

__all__ = ["LEFTOVER_WAIT_S", "STEP_MAX", "TXN_PREFIX", "Transactions"]

STEP_MAX = 800
"""Transactions begin at steps from 1 to this (of ``DEFAULT_STEPS``: most end before the
run settles, which then need not wait for them)."""
LEFTOVER_WAIT_S = 30.0
"""Once the client is done, the run waits at most this long (virtual seconds) for the
transaction segments left to go: a lease running out (at most 4 s), the timer's rescan (2
s) and its repost of a commit whose event was lost (10 s) all fit."""
TXN_PREFIX = b"t"
"""Transaction events start with it (the stream's writer's keys start with ``k``)."""
_RETRY_S = 0.5
_JUMP_BACK_MS = 10_000
_EVENTS_MAX = 4
_NEAR_SCALE = 0.6
_WRITE_WEIGHT = 1.0
_CALLS = frozenset(
    {
        "create_transaction",
        "get_transaction",
        "check_transaction_status",
        "ping_transaction",
        "commit_transaction",
        "abort_transaction",
    }
)
"""The controller calls a transactional writer makes here (``commit(wait=False)`` only:
``commit_transaction_and_wait`` would wait for the commit processor, which the simulator
steps as a client action, so it never runs while a client call blocks)."""


class _TransactionCalls:
    """The transactional writer's controller: the simulated controller's transaction calls,
    as a client makes them (ControllerUnavailableError while it is down)."""

    def __init__(self, controller: SimController) -> None:
        self._controller = controller

    def __getattr__(self, name: str) -> Any:
        if name not in _CALLS:
            raise AttributeError(name)

        def call(*args: Any) -> Any:
            return self._controller.call(lambda c: getattr(c, name)(*args))

        return call


@dataclass
class _Txn:
    """One planned transaction and what became of it."""

    index: int
    fate: str  # "commit", "abort" or "abandon"
    begin_step: int
    end_step: int
    keys: list[int]  # the key (an index into the world's keys) of each event, in order
    # --- what happened ---------------------------------------------------------------------
    state: str = "planned"
    """planned, open, committing (acknowledged), unknown (a commit's outcome, given up on),
    refused (a commit answered TxnFailedError), aborted (the abort acknowledged), abandoned,
    failed (a ping or a write found it ended)."""
    writer: TransactionalEventStreamWriter[bytes] | None = None
    txn: Transaction[bytes] | None = None
    events: EventStreamWriter[bytes] | None = None  # the transaction's event writer
    futures: list[WriteFuture] = field(default_factory=list)
    next_pump_at: float = float("inf")
    due_at: float = 0.0  # a call refused for now (or the next poll) is made from then on
    ping_at: float = float("inf")
    commit_step: int = 0  # the step commit() was first called at; 0: never
    before: dict[str, frozenset[int]] = field(default_factory=dict)
    """Per key: the numbers of the stream writer's events acknowledged before commit()."""
    final: str | None = None  # its status at the end: COMMITTED, ABORTED or forgotten
    read: set[int] = field(default_factory=set)
    last_read: dict[str, int] = field(default_factory=dict)
    rolled: int = 0  # the epoch of the duplicates its rolling commit merged it into; 0: none

    @property
    def settled(self) -> bool:
        """No event of it pending (a close may wait for none)."""
        return all(f.done() for f in self.futures)

    @property
    def name(self) -> str:
        if self.txn is None:
            return f"t{self.index}"
        return f"t{self.index} ({self.txn.txn_id.hex[-8:]})"


class Transactions:
    """The ``transactions`` feature of one run (module docstring); off if ``count`` is 0.

    ``scale_steps``: the steps the operator's scales are asked at (begins are drawn near
    them); ``keys``: how many routing keys the stream's writer uses; ``writer_config``: the
    transactions' event writers' (the stream's writer's)."""

    def __init__(
        self,
        seed: int,
        count: int,
        scale_steps: list[int],
        keys: int,
        writer_config: WriterConfig,
    ) -> None:
        self.on = count > 0
        self._writer_config = writer_config
        rng = random.Random(f"sim-transactions:{seed}")
        self.lease_s = round(rng.uniform(1.5, 4.0), 3)
        self.txns: list[_Txn] = []
        early = [step for step in scale_steps if step <= STEP_MAX + 100]
        for index in range(count):
            if early and rng.random() < _NEAR_SCALE:
                scale = early[rng.randrange(len(early))]
                begin = max(1, scale - rng.randint(5, 80))
                end = max(begin + 1, scale + rng.randint(-5, 40))
            else:
                begin = rng.randint(1, STEP_MAX)
                end = begin + rng.randint(5, 60)
            fate = rng.choices(("commit", "abort", "abandon"), (3, 1, 1))[0]
            events = [rng.randrange(keys) for _ in range(rng.randint(1, _EVENTS_MAX))]
            self.txns.append(_Txn(index, fate, begin, end, events))
        self._rng = rng
        self._by_id: dict[uuid.UUID, _Txn] = {}
        self._left_since: float | None = None  # since when the settling run waits on leftovers

    # --- the client's actions ------------------------------------------------------------------
    def actions(self, world: World) -> list[Action]:
        """The feature's weighted actions now (``sim/actions.py``; clients' steps only)."""
        found: list[Action] = []
        now = world.clock.monotonic()
        up = world.controller.up
        for t in self.txns:
            if t.next_pump_at <= now:
                found.append((1.0, partial(self.pump, world, t)))
            state = t.state
            if state == "planned":
                if up and now >= t.due_at and _came(world, t.begin_step, begin=True):
                    found.append((1.0, partial(self.begin, world, t)))
            elif state == "open":
                if len(t.futures) < len(t.keys):
                    found.append((_WRITE_WEIGHT, partial(self.write, world, t)))
                elif up and t.settled and now >= t.due_at and _came(world, t.end_step):
                    found.append((1.0, partial(self.end, world, t)))
                if up and t.ping_at <= now and t.settled:
                    found.append((1.0, partial(self.ping, world, t)))
        return found

    def wake_times(self) -> list[float]:
        """When the feature's next timed action is due (the tick goes there)."""
        times = []
        for t in self.txns:
            times.append(t.next_pump_at)
            if t.state == "open":
                times += [t.due_at, t.ping_at]
            elif t.state == "planned":
                times.append(t.due_at)
        return times

    def wake(self, now: float) -> None:
        """A reply arrived: the event writers with events pending may have work."""
        for t in self.txns:
            if t.events is not None and not t.settled:
                t.next_pump_at = min(t.next_pump_at, now)

    def begin(self, world: World, t: _Txn) -> str:
        """Begin the transaction (a new one, if an earlier begin's outcome was unknown)."""
        if t.writer is None:
            t.writer = TransactionalEventStreamWriter(
                SCOPE,
                STREAM,
                BytesSerializer(),
                cast(ControllerConnection, _TransactionCalls(world.controller)),
                SegmentStoreClient(world.network),
                self.lease_s,
                self._writer_config,
                clock=world.clock,
                scheduler=SimThreadScheduler(world._sleep),
            )
        try:
            txn = t.writer.begin_txn()
        except (RetriableError, TxnFailedError) as e:  # unknown, or every epoch closed: again
            t.due_at = world.clock.monotonic() + _RETRY_S
            return f"{t.name} begin: {type(e).__name__}, again in {_RETRY_S} s"
        except PravegaError as e:
            world._violate(f"{t.name} cannot begin: {sanitize(repr(e), world.root)}")
            return f"{t.name} begin fails"
        t.txn = txn
        t.state = "open"
        self._by_id[txn.txn_id] = t
        t.ping_at = world.clock.monotonic() + t.writer.ping_interval_s
        world._count("txn_begun")
        return f"{t.name} begins (epoch {txn.txn_id.int >> 96}, {len(t.keys)} events)"

    def write(self, world: World, t: _Txn) -> str:
        """Write the transaction's next event."""
        assert t.txn is not None
        key = world.keys[t.keys[len(t.futures)]]
        n = len(t.futures)
        payload = f"t{t.index}:{key}:{n}".encode()
        try:
            future = t.txn.write_event(payload, key)
        except (TxnFailedError, TxnNotFoundError) as e:  # a ping found it ended
            t.state = "failed"
            return f"{t.name} write {key}:{n}: {type(e).__name__}"
        t.futures.append(future)
        t.events = t.txn._writer  # made by the first write (its pump is the simulator's)
        t.next_pump_at = world.clock.monotonic()
        return f"{t.name} write {key}:{n}"

    def pump(self, world: World, t: _Txn) -> str:
        """One round of the transaction's event writer's pump."""
        assert t.events is not None
        wait_s = t.events.pump_round()
        if wait_s is None or t.settled:
            t.next_pump_at = float("inf")  # closed, or nothing to send until the next write
        else:
            t.next_pump_at = world.clock.monotonic() + wait_s
        return f"{t.name} pump"

    def ping(self, world: World, t: _Txn) -> str:
        """The writer's ping round (its ping thread's, once)."""
        assert t.writer is not None and t.txn is not None
        renewed = t.writer.ping_all()
        t.ping_at = world.clock.monotonic() + t.writer.ping_interval_s
        if not t.txn.open:  # a ping found it ended: its lease ran out
            t.state = "failed"
            t.due_at = world.clock.monotonic()
            world._count("txn_failed")
            return f"{t.name} ping: the transaction failed"
        return f"{t.name} ping: {'renewed' if renewed else 'outcome unknown'}"

    def end(self, world: World, t: _Txn) -> str:
        """Commit, abort or abandon the transaction (its plan's fate); every event of it is
        settled."""
        failed = sum(f.exception() is not None for f in t.futures)
        if failed and t.fate == "commit":
            t.fate = "abort"
            world._count("txn_write_failures")
            return f"{t.name}: {failed} events failed, it is aborted instead"
        if t.fate == "commit":
            return self._commit(world, t)
        if t.fate == "abort":
            return self._abort(world, t)
        assert t.writer is not None
        t.writer.close()  # no more pings: its lease runs out
        t.state = "abandoned"
        world._count("txn_abandoned")
        return f"{t.name} abandoned (lease {self.lease_s} s)"

    def _commit(self, world: World, t: _Txn) -> str:
        assert t.txn is not None and t.writer is not None
        if not t.commit_step:
            t.commit_step = world.steps + 1
            keys = {world.keys[k] for k in t.keys}
            t.before = {
                key: frozenset(s for k, s in world.checker.acked if k == key) for key in keys
            }
        try:
            t.txn.commit(wait=False)
        except (TxnFailedError, TxnNotFoundError) as e:
            t.state = "refused"
            world._count("txn_refused")
            return f"{t.name} commit refused ({type(e).__name__})"
        except RetriableError as e:
            if self._rng.random() < 0.5:
                t.due_at = world.clock.monotonic() + _RETRY_S
                return f"{t.name} commit: {type(e).__name__}, again in {_RETRY_S} s"
            t.writer.close()  # the client gives up: nobody pings it any more
            t.state = "unknown"
            world._count("txn_unknown")
            return f"{t.name} commit: {type(e).__name__}, the client gives up"
        except PravegaError as e:
            world._violate(f"{t.name} commit failed: {sanitize(repr(e), world.root)}")
            return f"{t.name} commit fails"
        t.state = "committing"
        world._count("txn_commits")
        return f"{t.name} commit: acknowledged"

    def _abort(self, world: World, t: _Txn) -> str:
        assert t.txn is not None
        try:
            t.txn.abort()
        except RetriableError as e:
            t.due_at = world.clock.monotonic() + _RETRY_S
            return f"{t.name} abort: {type(e).__name__}, again in {_RETRY_S} s"
        except PravegaError as e:
            world._violate(f"{t.name} abort failed: {sanitize(repr(e), world.root)}")
            return f"{t.name} abort fails"
        t.state = "aborted"
        world._count("txn_aborts")
        return f"{t.name} abort: acknowledged"

    # --- settling ------------------------------------------------------------------------------
    def pending(self, world: World) -> bool:
        """Whether the client has work left (a begin, writes, an end), or a transaction has
        not ended: a transaction segment of the stream is still in a container (merged by
        a commit, deleted by an abort; an orphan's too, once its lease runs out), for at
        most ``LEFTOVER_WAIT_S`` once the client is done. After the wall clock went back more
        than ``_JUMP_BACK_MS`` the leases held back by it are not waited for
        (:meth:`_held`)."""
        if not self.on:
            return False
        for t in self.txns:
            if t.state == "planned":
                if t.begin_step <= world.fault_steps:
                    return True  # its step came (it begins as the run settles, at the latest)
                continue
            if t.state == "open" or not t.settled:
                return True
        if not any(not self._held(world, self._owner(name)) for name in _leftovers(world)):
            return False
        # A segment left for good (a commit that merged too little, say) must not keep the
        # run from settling: the final check names it.
        now = world.clock.monotonic()
        if self._left_since is None:
            self._left_since = now
        return now - self._left_since < LEFTOVER_WAIT_S

    def _held(self, world: World, t: _Txn | None) -> bool:
        """Whether transaction ``t`` (None: an orphan) ends only when its lease runs out,
        which a jump of the wall clock back holds back (by as much as 29 days)."""
        if not (world.jumped and world.faults.clock_jump_ms < -_JUMP_BACK_MS):
            return False
        return t is None or t.state in ("abandoned", "unknown")

    # --- the checks ----------------------------------------------------------------------------
    def on_read(self, world: World, segment: str, offset: int, payload: bytes) -> str | None:
        """Check one transaction event the reader handed out (module docstring)."""
        where = f"{segment}@{offset}"
        try:
            number, key, n_text = payload.decode().split(":")
            t = self.txns[int(number[1:])]
            n = int(n_text)
        except (UnicodeDecodeError, ValueError, IndexError):
            return f"read garbage {payload[:40]!r} at {where}"
        if not 0 <= n < len(t.futures) or world.keys[t.keys[n]] != key:
            return f"read {payload!r} of {t.name} at {where}, never written"
        if not t.commit_step:
            return f"read {payload!r} of {t.name} ({t.state}, never committed) at {where}"
        if t.state == "refused":
            return f"read {payload!r} of {t.name}, whose commit was refused, at {where}"
        if n in t.read:
            return f"read {payload!r} of {t.name} twice (again at {where})"
        last = t.last_read.get(key, -1)
        if n < last:
            return f"read {payload!r} of {t.name} at {where} after its event {last} of {key}"
        missing = sorted(t.before.get(key, frozenset()) - _seqs_read(world, key))
        if missing:
            return (
                f"read {payload!r} of {t.name} at {where} before {key}:{missing[0]}, "
                f"acknowledged before its commit was asked"
            )
        t.read.add(n)
        t.last_read[key] = n
        assert t.txn is not None
        epoch = parse_segment_name(segment).segment_id >> 32
        if not t.rolled and epoch > t.txn.txn_id.int >> 96:
            t.rolled = epoch
            world._count("txn_rolled")
            world._note(f"{t.name}'s commit rolled: its events are in {segment}")
        return None

    def rolls(self) -> tuple[int, int]:
        """The rolling commits seen, and how many there may have been. Each merges its
        transactions into duplicates of their epoch's segments, in an epoch of its own: the
        reader sees one where it reads a transaction's events in a later epoch than the
        transaction's. A roll may also find its transactions merged already (a normal commit
        round merged them, then the controller died before recording them COMMITTED, and a
        scale began meanwhile): unseen. A transaction is rolled at most once, so each one
        read counts for at most one roll."""
        seen = len({t.rolled for t in self.txns if t.rolled})
        return seen, sum(bool(t.read) for t in self.txns)

    def check(self, world: World) -> str | None:
        """The final check (module docstring), once everything settled; asks the controller
        each transaction's status (the world runs meanwhile, without faults)."""
        if not self.on:
            return None
        for t in self.txns:
            if t.txn is None:
                continue
            try:
                t.final = t.txn.check_status().name
            except TxnNotFoundError:
                t.final = "forgotten"  # ended long ago (the wall clock jumped ahead, say)
            except PravegaError as e:
                reason = sanitize(repr(e), world.root)
                return f"the controller cannot tell {t.name}'s status after settling: {reason}"
            problem = self._check_outcome(t, self._held(world, t))
            if problem is not None:
                return problem
        for name in _leftovers(world):
            owner = self._owner(name)
            if not self._held(world, owner):
                whose = owner.name if owner is not None else "an orphan of a begin"
                return f"transaction segment {name} ({whose}) is left after the run settled"
        return self._check_contiguous(world)

    @staticmethod
    def _check_outcome(t: _Txn, held: bool) -> str | None:
        """All or nothing of ``t`` read, as its client's calls were answered, and its
        final status agreeing (OPEN if its lease is ``held`` back by the wall clock)."""
        if t.state == "planned":
            return None  # never begun (a begin whose outcome was unknown: an orphan)
        read, written = len(t.read), len(t.futures)
        if held and t.final == "OPEN":
            return f"{t.name} ({t.state}) is OPEN with {read} events read" if read else None
        if t.final not in ("COMMITTED", "ABORTED", "forgotten"):
            return f"{t.name} ({t.state}) is still {t.final} after the run settled"
        if t.state == "committing":  # acknowledged
            if read != written or t.final == "ABORTED":
                return (
                    f"{t.name}'s commit was acknowledged at step {t.commit_step}, but "
                    f"{written - read} of its {written} events were never read "
                    f"(status {t.final})"
                )
            return None
        if not t.commit_step or t.state == "refused":  # never committed
            if read or t.final == "COMMITTED":
                return f"{t.name} ({t.state}, never committed) is {t.final}, {read} events read"
            return None
        # The commit's outcome is unknown: all or nothing, as its status says.
        if read not in (0, written):
            return f"{t.name} (commit outcome unknown) is partly visible: {read} of {written}"
        if (t.final == "COMMITTED" and read < written) or (t.final == "ABORTED" and read):
            return f"{t.name} (commit outcome unknown) is {t.final}, {read} events read"
        return None

    def _check_contiguous(self, world: World) -> str | None:
        """In each segment, a transaction's events are contiguous: one unit, in order."""
        for segment, events in world.checker.events.items():
            previous: int | None = None
            seen: set[int] = set()
            for _, payload in events:
                if payload[:1] != TXN_PREFIX:
                    previous = None
                    continue
                index = int(payload[1 : payload.index(b":")])
                if index != previous and index in seen:
                    return f"{self.txns[index].name}'s events are not contiguous in {segment}"
                seen.add(index)
                previous = index
        return None

    def _owner(self, segment: str) -> _Txn | None:
        """The client's transaction of transaction segment ``segment`` (None: an orphan)."""
        return self._by_id.get(uuid.UUID(hex=segment.rpartition(".")[2]))


def _seqs_read(world: World, key: str) -> set[int]:
    return {s for k, s in world.checker.read if k == key}


def _leftovers(world: World) -> list[str]:
    """The stream's transaction segments still in a container (not being deleted)."""
    prefix = f"{SCOPE}/{STREAM}/"
    return sorted(
        state.name
        for node in world.nodes
        for state in node.container.metadata
        if state.name.startswith(prefix)
        and is_transaction_segment(state.name)
        and not state.pending_deleted
    )


def _came(world: World, step: int, begin: bool = False) -> bool:
    """Whether a plan's ``step`` came (a begin's only in the faulty phase's steps; an end
    once the run settles at the latest)."""
    if begin and step > world.fault_steps:
        return False
    return world.steps + 1 >= step or not world.faulty
