"""Ray shell of the transactions' commit event processor (``commit-event-processor``).

One detached named actor runs the commit event processor
(``controller/transaction_workflows.commit_processor``): it reads the internal commit
stream and, one batch of a stream at a time, merges the transaction segments of the
committing transactions into their parents, in commit order (the requests of one stream
queued together in one round),
retrying until done. Its work runs on threads of its own from the constructor on; the actor
answers ``describe`` and ``wait_committed`` meanwhile. Killed at any moment, Ray restarts it
(``max_restarts=-1``) and the new one resumes from the processor's stored checkpoint: every
commit request is handled at least once, and a commit is idempotent (a transaction segment
already merged is not merged again).

*Waiting for a commit.* The actor is an async actor: ``wait_committed`` (what the
controller's :class:`ProcessorCommitWaiter` calls for ``commit_transaction_and_wait``)
waits on this process's commit notices without holding a thread, so any number of commits
wait side by side while the processor works.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayTaskError

from pravega_ray.controller.transaction_workflows import COMMIT_NOTICES, commit_processor
from pravega_ray_actors.controller_parts import controller_parts
from pravega_ray_actors.options import COMMIT_PROCESSOR_NAME
from pravega_ray_actors.ray_metrics import setup_actor_process

log = logging.getLogger(__name__)

UNREACHABLE = (ValueError, RayActorError, ActorUnavailableError, GetTimeoutError, RayTaskError)
"""What a call to the commit processor raises when it cannot answer (not found, dead,
restarting, too slow)."""
WAIT_SLACK_S = 5.0
"""How much longer than its own wait the controller gives ``wait_committed`` to answer."""
UNREACHABLE_PAUSE_S = 0.05
"""A waiter that cannot reach the processor (restarting) pauses this long at most, then its
caller reads the record."""


class CommitProcessorActor:
    """Runs the commit event processor; see the module docstring."""

    def __init__(self, tier1: str, tier2: str, container_count: int, namespace: str) -> None:
        setup_actor_process()
        self._tiers = {"tier1": tier1, "tier2": tier2}
        parts = controller_parts(tier2, container_count, namespace, watch=True)
        self._processor = commit_processor(parts.metadata, parts.segments)
        self._processor.start()

    def describe(self) -> dict[str, object]:
        return {**self._tiers, "pid": os.getpid(), "handled": self._processor.handled}

    async def wait_committed(self, txn_hex: str, timeout_s: float) -> bool:
        """True once this processor committed transaction ``txn_hex`` (or had lately),
        False after ``timeout_s`` seconds. A hint: the caller reads the record."""
        txn_id = uuid.UUID(hex=txn_hex)
        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        def wake() -> None:
            loop.call_soon_threadsafe(done.set)

        cancel = COMMIT_NOTICES.subscribe(txn_id, wake)
        try:
            await asyncio.wait_for(done.wait(), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            cancel()


class ProcessorCommitWaiter:
    """The Ray controller's ``CommitWaiter``: asks the commit processor actor
    (``wait_committed``). If the processor cannot answer (killed, restarting), it pauses
    briefly and returns False: the controller reads the record and asks again, so a commit
    completed by the restarted processor is still seen. Thread-safe."""

    def __init__(self, namespace: str) -> None:
        self._namespace = namespace
        self._handle: object = None  # looked up once; a Ray handle outlives restarts

    def __call__(self, scope: str, stream: str, txn_id: uuid.UUID, timeout_s: float) -> bool:
        started = time.monotonic()
        try:
            handle: Any = self._handle
            if handle is None:
                handle = self._handle = ray.get_actor(COMMIT_PROCESSOR_NAME, self._namespace)
            ref = handle.wait_committed.remote(txn_id.hex, timeout_s)
            return bool(ray.get(ref, timeout=timeout_s + WAIT_SLACK_S))
        except (
            ValueError,
            RayActorError,
            ActorUnavailableError,
            GetTimeoutError,
            RayTaskError,
        ) as e:
            self._handle = None
            log.info("waiting for %s/%s %s at the commit processor: %r", scope, stream, txn_id, e)
            left = timeout_s - (time.monotonic() - started)
            time.sleep(max(0.0, min(left, UNREACHABLE_PAUSE_S)))
            return False
