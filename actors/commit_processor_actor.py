"""Ray shell of the transactions' commit event processor (``commit-event-processor``).

One detached named actor runs the commit event processor
(``controller/transaction_workflows.commit_processor``): it reads the internal commit
stream, serially, and merges every transaction segment of a committing transaction into
its parent, in commit order, retrying until done. Its work runs on threads of its own from
the constructor on; the actor answers ``describe`` meanwhile. Killed at any moment, Ray
restarts it (``max_restarts=-1``) and the new one resumes from the processor's stored
checkpoint: every commit request is handled at least once, and a commit is idempotent (a
transaction segment already merged is not merged again).
"""

from __future__ import annotations

import os

from pravega_ray.controller.transaction_workflows import commit_processor
from pravega_ray_actors.controller_parts import controller_parts
from pravega_ray_actors.ray_metrics import setup_actor_process


class CommitProcessorActor:
    """Runs the commit event processor; see the module docstring."""

    def __init__(self, tier1: str, tier2: str, container_count: int, namespace: str) -> None:
        setup_actor_process()
        self._tiers = {"tier1": tier1, "tier2": tier2}
        parts = controller_parts(tier2, container_count, namespace)
        self._processor = commit_processor(parts.metadata, parts.segments)
        self._processor.start()

    def describe(self) -> dict[str, object]:
        return {**self._tiers, "pid": os.getpid(), "handled": self._processor.handled}
