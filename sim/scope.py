"""The recursive delete of a scope in the simulation (the ``scope_delete`` feature).

At setup (outside the trace) the controller creates a second scope, :data:`DOOMED`, with
two or three small streams. At the step the seed draws, an operator asks the controller
to delete it recursively (``Controller.delete_scope_recursive``: the scope is marked
DELETING and a ``delete_scope`` request posted; the request processor's
``ScopeWorkflows`` seals and deletes its streams through their own seal requests, then
the scope record, answering WAIT meanwhile; ``scope_workflows.py``). In half of those
seeds a create of a stream in the scope races it, at a step near the delete's: it
succeeds before the mark (and the delete must remove it too), or is refused
(IllegalStateError) while the delete runs, or finds the scope gone (ScopeNotFoundError).
The ``controller_crash`` fault strikes between the scope workflow's steps and the seal
and delete workflows' as it does mid-scale. A call whose outcome is unknown is asked
again 0.5 s later (the create with the same request id), even once the run settles.

:meth:`ScopeOperator.check` (once everything settled): if the delete was accepted, the
scope is gone (not listed, no record of it but the ``deleted/`` ones that keep its names'
segment numbers, no segment of it in any container) and the workflow deleted the scope
record exactly once; if it was never asked, the scope and its streams are all there. The
main scope's invariants are the world's.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from pravega_ray.errors import (
    IllegalStateError,
    PravegaError,
    RetriableError,
    ScopeNotFoundError,
)
from pravega_ray.stream_configuration import ScalingPolicy, StreamConfiguration
from sim.disk import sanitize

if TYPE_CHECKING:
    from sim.world import World

__all__ = ["DOOMED", "LATE", "ScopeOperator"]

DOOMED = "doomed"
"""The scope the operator deletes."""
LATE = "late"
"""The stream whose create races the delete."""
_RETRY_S = 0.5


class ScopeOperator:
    """The second scope, its delete and the create racing it (module docstring)."""

    def __init__(self, seed: int, delete_step: int, create_step: int) -> None:
        rng = random.Random(f"sim-scope:{seed}")
        count = rng.randint(2, 3)
        self.streams = {name: rng.randint(1, 2) for name in ("a", "b", "c")[:count]}
        self.delete_step = delete_step  # 0: no second scope
        self.create_step = create_step  # 0: no create races the delete
        self.deleting = False  # the delete was asked (answered, or outcome unknown)
        self.accepted = False  # the controller answered True
        self.delete_due_at = 0.0  # asked again from then on (an unknown outcome)
        self.creating = False
        self.created: bool | None = None  # the late create's answer (None: none yet)
        self.create_due_at = 0.0

    @property
    def on(self) -> bool:
        return bool(self.delete_step)

    def set_up(self, world: World) -> None:
        """Create the scope and its streams (setup: no faults, outside the trace)."""
        controller = world.controller.controller
        assert controller is not None
        controller.create_scope(DOOMED)
        for name, segments in self.streams.items():
            config = StreamConfiguration(scaling=ScalingPolicy.fixed(segments))
            controller.create_stream(DOOMED, name, config)

    @property
    def pending(self) -> bool:
        """A call whose outcome is unknown waits to be asked again."""
        delete = self.deleting and not self.accepted
        create = self.creating and self.created is None
        return delete or create

    def due(self, world: World) -> bool:
        """Whether the operator acts now: its step came (:func:`_came`), or a call of it
        is to be asked again."""
        if not self.on or not world.controller.up:
            return False
        return self._delete_due(world) or self._create_due(world)

    def _delete_due(self, world: World) -> bool:
        if self.accepted or world.clock.monotonic() < self.delete_due_at:
            return False
        return self.deleting or _came(world, self.delete_step)

    def _create_due(self, world: World) -> bool:
        if not self.create_step or self.created is not None:
            return False
        if world.clock.monotonic() < self.create_due_at:
            return False
        return self.creating or _came(world, self.create_step)

    def act(self, world: World) -> str:
        """The operator's step: the delete, or the racing create (the trace's line)."""
        if self._delete_due(world):
            return self._delete(world)
        return self._create(world)

    def _delete(self, world: World) -> str:
        again = self.deleting
        self.deleting = True
        try:
            found = world.controller.call(lambda c: c.delete_scope_recursive(DOOMED))
        except RetriableError as e:
            self.delete_due_at = world.clock.monotonic() + _RETRY_S
            return f"delete scope {DOOMED}: {type(e).__name__}, again in {_RETRY_S} s"
        except PravegaError as e:
            world._violate(f"the controller failed a scope delete: {sanitize(repr(e), world.root)}")
            return f"delete scope {DOOMED} fails"
        if not found and not again:
            world._violate(f"scope {DOOMED} not found by its first delete")
        self.accepted = True
        world._count("scope_deletes")
        return f"delete scope {DOOMED} recursively: {found}"

    def _create(self, world: World) -> str:
        self.creating = True
        config = StreamConfiguration(scaling=ScalingPolicy.fixed(1))
        try:
            created = world.controller.call(
                lambda c: c.create_stream(DOOMED, LATE, config, request_id="sim-late")
            )
        except (IllegalStateError, ScopeNotFoundError) as e:
            if not self.deleting:
                reason = sanitize(repr(e), world.root)
                world._violate(f"a create in scope {DOOMED} refused before its delete: {reason}")
            self.created = False
            return f"create {DOOMED}/{LATE}: refused ({type(e).__name__})"
        except RetriableError as e:
            self.create_due_at = world.clock.monotonic() + _RETRY_S
            return f"create {DOOMED}/{LATE}: {type(e).__name__}, again in {_RETRY_S} s"
        except PravegaError as e:
            world._violate(f"the controller failed a create: {sanitize(repr(e), world.root)}")
            self.created = False
            return f"create {DOOMED}/{LATE} fails"
        self.created = created
        return f"create {DOOMED}/{LATE}: {created}"

    def check(self, world: World) -> str | None:
        """The final check (module docstring); asks the controller (the world runs)."""
        if not self.on:
            return None
        controller = world.controller
        try:
            scopes = controller.call(lambda c: c.list_scopes())
            keys = controller.all_keys()
            streams = [] if self.accepted else controller.call(lambda c: c.list_streams(DOOMED))
        except PravegaError as e:
            return f"the controller cannot answer after settling: {sanitize(repr(e), world.root)}"
        deleted = controller.scopes_deleted.get(DOOMED, 0)
        if not self.accepted:
            expected = sorted([*self.streams, *([LATE] if self.created else [])])
            if DOOMED not in scopes or deleted or sorted(streams) != expected:
                return f"scope {DOOMED}, never deleted, holds {streams} (expected {expected})"
            return None
        if DOOMED in scopes:
            return f"scope {DOOMED} still listed after its recursive delete"
        records = [k for k in keys if f"/{DOOMED}/" in f"/{k}/" and not k.startswith("deleted/")]
        if records:
            return f"records of the deleted scope {DOOMED} remain: {records[:5]}"
        segments = sorted(
            state.name
            for node in world.nodes
            for state in node.container.metadata
            if state.name.startswith(f"{DOOMED}/") and not state.pending_deleted
        )
        if segments:
            return f"segments of the deleted scope {DOOMED} remain: {segments[:5]}"
        if deleted != 1:
            return f"the recursive delete of scope {DOOMED} deleted it {deleted} times"
        return None


def _came(world: World, step: int) -> bool:
    """Whether the operator's ``step`` came: it is in the faulty phase, and passed (a
    step the clients spent blocked is made up for after it, even once the run settles)."""
    return step <= world.fault_steps and world.steps + 1 >= step
