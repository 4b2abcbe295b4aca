"""How the client talks to segment containers and the controller.

The client never imports Ray. It calls segment containers through a
:class:`SegmentStoreConnection` over an invoker (``pravega_ray.cluster``: Ray actor
handles; ``pravega_ray.inprocess``: containers in one process, for tests), and the
controller through a :class:`ControllerConnection`.

Errors: futures fail with the typed errors of :mod:`pravega_ray.errors`. A dead
or restarting container surfaces as :class:`SegmentStoreUnavailableError`,
which means *outcome unknown*: the writer's conditional appends make resending
after ``setup_append`` safe.
"""

from __future__ import annotations

from pravega_ray.contracts.controller_service import ControllerService
from pravega_ray.contracts.segment_store_service import SegmentStoreClient, SegmentStoreService

__all__ = ["ControllerConnection", "SegmentStoreConnection", "SegmentStoreService"]


SegmentStoreConnection = SegmentStoreClient
"""Asynchronous, typed calls to whichever container owns a segment.

The segment store's service surface (:class:`SegmentStoreService`) as the client
calls it: one method per call, each returning a future; see
:class:`~pravega_ray.contracts.segment_store_service.SegmentStoreClient`.
"""


ControllerConnection = ControllerService
"""Synchronous calls to the controller: the controller's service surface itself
(``contracts/controller_service.py``). Clients are handed a
:class:`~pravega_ray.client.controller_connection.ControllerClient`, which repeats the
calls that are safe to repeat when their outcome is unknown."""
