"""What may happen in a step of a :class:`~sim.world.World`, and how likely each is.

:func:`enabled` lists the actions possible now, each with its weight (a normal action
weighs 1; a fault weighs what the seed's :class:`~sim.world.Faults` say, none once the run
settles). Each action returns the line it adds to the trace: deterministic text only (no
object addresses or global counters), so a replay's trace is identical.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.node import Node
    from sim.world import Action, World

__all__ = ["INJECTED", "enabled"]

INJECTED = "sim: injected I/O error"
"""The message of an injected I/O error (a failed Tier-1 append or Tier-2 chunk write)."""

_FAILABLE = ("log-append", "chunk-create")
_SETTLE_TICK = 0.3
_WRITE_WEIGHT = 0.1
_SLOW_TICK_S = 0.01
"""A tick taken while something else could run moves the clock at most this far: that
part was slow (the watchdog and timeouts may fire before it goes on)."""


def enabled(world: World, clients: bool, deadline: float) -> list[Action]:
    """The actions possible now; ``clients=False`` leaves the clients' own out (one waits)."""
    actions: list[Action] = []
    faults = world.faults if world.faulty else None
    now = world.clock.monotonic()
    for node in world.nodes:
        if node.up:
            if node.loop.has_ready():
                actions.append((1.0, partial(_run, node)))
            if any(io.due <= now for io in node.ios):
                actions.append((1.0, partial(_io, world, node)))
                if faults and faults.io_error and any(io.kind in _FAILABLE for io in node.ios):
                    actions.append((faults.io_error, partial(_io_error, world, node)))
            if faults and faults.crash:
                actions.append((faults.crash, partial(_crash, world, node)))
        elif node.restart_at is not None and node.restart_at <= now:
            actions.append((1.0, partial(world._restart, node)))
    network = world.network
    if network.calls:
        if any(call.due <= now for call in network.calls):
            actions.append((1.0, partial(_deliver_call, world)))
        if faults and faults.drop_call:
            actions.append((faults.drop_call, partial(_drop_call, world)))
    if network.replies:
        if any(reply.due <= now for reply in network.replies):
            actions.append((1.0, partial(_deliver_reply, world)))
        if faults and faults.drop_reply:
            actions.append((faults.drop_reply, partial(_drop_reply, world)))
    if clients:
        if world.to_write:  # spread over the faulty phase
            actions.append((_WRITE_WEIGHT, partial(_write, world)))
        if world.writer.next_pump_at <= now:
            actions.append((1.0, partial(_pump, world)))
        if world.reader.due():
            actions.append((1.0, partial(_read, world)))
    target = _next_time(world, clients, deadline, now)
    if target is not None:
        if actions:  # a slow part: a short tick
            weight = faults.tick if faults else _SETTLE_TICK
            actions.append((weight, partial(_tick, world, min(target, now + _SLOW_TICK_S))))
        else:  # nothing to do until then
            actions.append((1.0, partial(_tick, world, target)))
    return actions


def _next_time(world: World, clients: bool, deadline: float, now: float) -> float | None:
    """The earliest time after ``now`` at which something is due (None: nothing ever is)."""
    times = [deadline]
    times.extend(call.due for call in world.network.calls)
    times.extend(reply.due for reply in world.network.replies)
    for node in world.nodes:
        if node.up:
            when = node.loop.next_timer()
            if when is not None:
                times.append(when)
            times.extend(io.due for io in node.ios)
        elif node.restart_at is not None:
            times.append(node.restart_at)
    if clients:
        times.append(world.writer.next_pump_at)
        timeout = world.reader.next_timeout()
        if timeout is not None:
            times.append(timeout)
    later = [t for t in times if t > now]
    target = min(later, default=float("inf"))
    return None if target == float("inf") else target


def _run(node: Node) -> str:
    node.loop.run_one()
    return f"c{node.container_id} run"


def _due(world: World, items: Sequence[Any]) -> int:
    """The index of one of ``items`` (calls, replies, blocking calls) that is due now."""
    now = world.clock.monotonic()
    due = [i for i, item in enumerate(items) if item.due <= now]
    return due[world.rng.randrange(len(due))]


def _io(world: World, node: Node) -> str:
    io = node.ios.pop(_due(world, node.ios))
    io.run()
    return f"c{node.container_id} io {io.kind}"


def _io_error(world: World, node: Node) -> str:
    failable = [i for i, io in enumerate(node.ios) if io.kind in _FAILABLE]
    io = node.ios.pop(failable[world.rng.randrange(len(failable))])
    io.run(OSError(INJECTED))
    world._count("io_errors")
    return f"c{node.container_id} io {io.kind} FAILS"


def _crash(world: World, node: Node) -> str:
    return f"c{node.container_id} " + world._crash(node)


def _deliver_call(world: World) -> str:
    network = world.network
    call = network.take_call(_due(world, network.calls))
    world.nodes[call.container].serve(call)
    return f"call {call.describe()}"


def _drop_call(world: World) -> str:
    network = world.network
    call = network.take_call(world.rng.randrange(len(network.calls)))
    world._count("dropped_calls")
    return f"call {call.describe()} LOST"


def _deliver_reply(world: World) -> str:
    network = world.network
    reply = network.deliver_reply(_due(world, network.replies))
    world.writer.wake()
    return f"reply {reply.describe()}"


def _drop_reply(world: World) -> str:
    network = world.network
    reply = network.replies.pop(world.rng.randrange(len(network.replies)))
    world._count("dropped_replies")
    return f"reply {reply.describe()} LOST"


def _write(world: World) -> str:
    key = world.keys[world.rng.randrange(len(world.keys))]
    seq = world.checker.next_seq(key)
    world.to_write -= 1
    world.writer.write(key, seq)
    return f"write {key}:{seq}"


def _pump(world: World) -> str:
    world.writer.pump()
    return "pump"


def _read(world: World) -> str:
    count = world.reader.step(world.rng.randint(1, 4))
    return f"read {count} events"


def _tick(world: World, target: float) -> str:
    step = target - world.clock.monotonic()
    world.clock.set(target)
    return f"tick +{step:.4f}"
