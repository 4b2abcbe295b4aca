"""Ray shell of the controller's request event processor (``request-event-processor``).

One detached named actor runs :class:`~pravega_ray.controller.event_processor.RequestEventProcessor`
over the internal request stream with the stream workflows
(:class:`~pravega_ray.controller.stream_workflows.StreamWorkflows`): scale, update, seal,
delete, auto-scale reports and the recursive delete of scopes
(:class:`~pravega_ray.controller.scope_workflows.ScopeWorkflows`). Its work runs on threads
of its own from the constructor on; the actor answers ``describe`` meanwhile. Killed at any
moment, Ray restarts it (``max_restarts=-1``) and the new one resumes from the processor's
stored checkpoint: every request is handled at least once, and every workflow is idempotent.

The commit and abort event processors of transactions have actors of their own next to this
one (``commit_processor_actor.py``, ``abort_processor_actor.py``), built the same way
(``controller_parts.py``).
"""

from __future__ import annotations

import os

from pravega_ray.controller.controller import Controller
from pravega_ray.controller.event_processor import RequestEventProcessor
from pravega_ray.controller.request_stream import RequestStream
from pravega_ray.controller.scope_workflows import ScopeWorkflows
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.controller.stream_workflows import StreamWorkflows
from pravega_ray_actors.controller_parts import controller_parts
from pravega_ray_actors.ray_metrics import setup_actor_process


class RequestProcessorActor:
    """Runs the request event processor; see the module docstring."""

    def __init__(self, tier1: str, tier2: str, container_count: int, namespace: str) -> None:
        setup_actor_process()
        self._tiers = {"tier1": tier1, "tier2": tier2}
        parts = controller_parts(tier2, container_count, namespace)
        helper = parts.segments
        store = StreamMetadataStore(parts.metadata)
        # The recursive delete of a scope removes its groups and tables through the
        # controller's own calls (a controller instance of this actor's).
        controller = Controller(
            parts.metadata, helper, container_count, set_policy=helper.set_scale_policy
        )
        workflows = StreamWorkflows(
            store,
            helper,
            set_policy=helper.set_scale_policy,
            scopes=ScopeWorkflows(store, controller).handle,
            container_count=container_count,
        )
        self._processor = RequestEventProcessor(
            RequestStream(helper), workflows.handle, parts.metadata
        )
        self._processor.start()

    def describe(self) -> dict[str, object]:
        return {**self._tiers, "pid": os.getpid(), "handled": self._processor.handled}
