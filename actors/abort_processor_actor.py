"""Ray shell of the transactions' abort event processor (``abort-event-processor``).

One detached named actor runs the abort event processor
(``controller/transaction_workflows.abort_processor``): it reads the internal abort stream
and deletes the transaction segments of each aborting transaction, then marks it ABORTED.
Its work runs on threads of its own from the constructor on; the actor answers
``describe`` meanwhile. Killed at any moment, Ray restarts it (``max_restarts=-1``) and the
new one resumes from the processor's stored checkpoint: every abort request is handled at
least once, and deleting a segment that is gone already is not an error.
"""

from __future__ import annotations

import os

from pravega_ray.controller.transaction_workflows import abort_processor
from pravega_ray_actors.controller_parts import controller_parts
from pravega_ray_actors.ray_metrics import setup_actor_process


class AbortProcessorActor:
    """Runs the abort event processor; see the module docstring."""

    def __init__(self, tier1: str, tier2: str, container_count: int, namespace: str) -> None:
        setup_actor_process()
        self._tiers = {"tier1": tier1, "tier2": tier2}
        parts = controller_parts(tier2, container_count, namespace)
        self._processor = abort_processor(parts.metadata, parts.segments)
        self._processor.start()

    def describe(self) -> dict[str, object]:
        return {**self._tiers, "pid": os.getpid(), "handled": self._processor.handled}
