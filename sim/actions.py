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
_INF = float("inf")
_CONTROLLER_CRASH_SHARE = 0.01
"""A controller crash at any step weighs this share of the fault's per-workflow-step chance."""
_SLOW_TICK_S = 0.01
"""A tick taken while something else could run moves the clock at most this far: that
part was slow (the watchdog and timeouts may fire before it goes on)."""


def enabled(world: World, clients: bool, deadline: float) -> list[Action]:
    """The actions possible now; ``clients=False`` leaves the clients' own out (one waits).

    The last is a tick, if anything is ever due after now: to the earliest such time, or a
    short way towards it if something else can happen now. (One pass finds the actions
    and that time: this runs every step.)
    """
    actions: list[Action] = []
    add = actions.append
    faults = world.faults if world.faulty else None
    now = world.clock.monotonic()
    later = deadline if deadline > now else _INF  # the earliest time after now when ...
    for node in world.nodes:
        incarnation = node.current
        if incarnation is not None:
            loop = incarnation.loop
            if loop.has_ready():
                add((1.0, partial(_run, node)))
            when = loop.next_timer()
            if when is not None and now < when < later:
                later = when
            ios = node.ios
            if ios:
                due = False
                for io in ios:
                    if io.due <= now:
                        due = True
                    elif io.due < later:
                        later = io.due
                if due:
                    add((1.0, partial(_io, world, node)))
                    if faults and faults.io_error and any(io.kind in _FAILABLE for io in ios):
                        add((faults.io_error, partial(_io_error, world, node)))
            if faults and faults.crash:
                add((faults.crash, partial(_crash, world, node)))
            if faults and faults.torn_tail and any(io.kind == "log-append" for io in ios):
                add((faults.torn_tail, partial(_crash_tearing, world, node)))
        elif node.restart_at is not None:
            if node.restart_at <= now:
                add((1.0, partial(world._restart, node)))
            elif node.restart_at < later:
                later = node.restart_at
    controller = world.controller
    if controller.up:
        if faults and faults.controller_crash and controller.idle:
            add(
                (
                    faults.controller_crash * _CONTROLLER_CRASH_SHARE,
                    partial(_crash_controller, world),
                )
            )
    elif controller.restart_at is not None:
        if controller.restart_at <= now:
            add((1.0, world.restart_controller))
        elif controller.restart_at < later:
            later = controller.restart_at
    network = world.network
    for messages, deliver, drop, weight in (
        (network.calls, _deliver_call, _drop_call, faults.drop_call if faults else 0.0),
        (network.replies, _deliver_reply, _drop_reply, faults.drop_reply if faults else 0.0),
    ):
        if messages:
            due = False
            for message in messages:
                if message.due <= now:
                    due = True
                elif message.due < later:
                    later = message.due
            if due:
                add((1.0, partial(deliver, world)))
            if weight and network.lossy(messages):
                add((weight, partial(drop, world)))
    if clients:
        if world.to_write:  # spread over the faulty phase
            add((_WRITE_WEIGHT, partial(_write, world)))
        pump_at = world.writer.next_pump_at
        if pump_at <= now:
            add((1.0, partial(_pump, world)))
        elif pump_at < later:
            later = pump_at
        if world.reader.due() and (world.steps >= world.reader_from_step or not world.faulty):
            add((1.0, partial(_read, world)))
        if world.event_time.on:  # sim/watermarks.py: notes, marks sent, the reader's marks
            actions += world.event_time.actions(world)
        if world.transactions.on:  # sim/transactions.py: begins, writes, pumps, pings, ends
            actions += world.transactions.actions(world)
        if controller.up:
            for processor in controller.processors:
                if processor.pool.tasks:
                    add((1.0, partial(world.run_controller_task, processor)))
                if processor.read_at <= now:
                    add((1.0, partial(world.read_requests, processor)))
                elif processor.read_at < later:
                    later = processor.read_at
            if controller.timer_at <= now:
                add((1.0, world.sweep_transactions))
            elif controller.timer_at < later:
                later = controller.timer_at
        if world.faulty and world.scale_steps and world.scale_due_at > now:
            later = min(later, world.scale_due_at)
        for when in world.wake_times():
            if now < when < later:
                later = when
        timeout = world.reader.next_timeout()
        if timeout is not None and now < timeout < later:
            later = timeout
    if later < _INF:
        if actions:  # a slow part: a short tick
            weight = faults.tick if faults else _SETTLE_TICK
            add((weight, partial(_tick, world, min(later, now + _SLOW_TICK_S))))
        else:  # nothing to do until then
            add((1.0, partial(_tick, world, later)))
    return actions


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
    if io.tier2 and world.faulty and world.faults.tier2_down(world.steps):
        io.run(OSError(INJECTED))
        world._count("tier2_outage_failures")
        return f"c{node.container_id} io {io.kind} FAILS (Tier-2 down)"
    io.run()
    return f"c{node.container_id} io {io.kind}"


def _io_error(world: World, node: Node) -> str:
    """A blocking call fails with an injected OSError. A failing log append may first have
    written part of its record (the ``torn_tail`` fault): a write cut short by the error."""
    failable = [i for i, io in enumerate(node.ios) if io.kind in _FAILABLE]
    io = node.ios.pop(failable[world.rng.randrange(len(failable))])
    how = None
    if world.faults.torn_tail and io.kind == "log-append" and world.rng.random() < 0.5:
        how = node.disk.write_torn(io.function, io.args, world.rng)
        if how is not None:
            world._count("torn_writes")
    io.run(OSError(INJECTED))
    world._count("io_errors")
    return f"c{node.container_id} io {io.kind} FAILS" + (f" ({how})" if how else "")


def _crash(world: World, node: Node) -> str:
    return f"c{node.container_id} " + world._crash(node)


def _crash_tearing(world: World, node: Node) -> str:
    """The ``torn_tail`` fault: ``node`` dies in the middle of one of its log appends."""
    appends = [io for io in node.ios if io.kind == "log-append"]
    tear = appends[world.rng.randrange(len(appends))]
    return f"c{node.container_id} " + world._crash(node, tear)


def _crash_controller(world: World) -> str:
    return world.crash_controller("at a step")


def _deliver_call(world: World) -> str:
    network = world.network
    call = network.take_call(_due(world, network.calls))
    world.nodes[call.container].serve(call)
    return f"call {call.describe()}"


def _drop_call(world: World) -> str:
    network = world.network
    lossy = network.lossy(network.calls)
    call = network.take_call(lossy[world.rng.randrange(len(lossy))])
    world._count("dropped_calls")
    return f"call {call.describe()} LOST"


def _deliver_reply(world: World) -> str:
    network = world.network
    reply = network.deliver_reply(_due(world, network.replies))
    world.wake_writer()
    return f"reply {reply.describe()}"


def _drop_reply(world: World) -> str:
    network = world.network
    lossy = network.lossy(network.replies)
    reply = network.replies.pop(lossy[world.rng.randrange(len(lossy))])
    world._count("dropped_replies")
    return f"reply {reply.describe()} LOST"


def _write(world: World) -> str:
    key = world.keys[world.rng.randrange(len(world.keys))]
    seq = world.checker.next_seq(key)
    world.to_write -= 1
    world.wall_marks.append(world.clock.wall_time_ms())
    world.event_time.on_write(key, seq, world.clock.monotonic())
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
