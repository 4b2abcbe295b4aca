"""How the client talks to segment containers and the controller.

The client never imports Ray: it sees these Protocols. ``pravega_ray.cluster``
implements them over Ray actor handles (``ObjectRef.future()``), and
``pravega_ray.inprocess`` over core objects in one process, for tests and
simulation.

Errors: futures fail with the typed errors of :mod:`pravega_ray.errors`. A dead
or restarting container surfaces as :class:`SegmentStoreUnavailableError`,
which means *outcome unknown*: the writer's conditional appends make resending
after ``setup_append`` safe.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Protocol

from pravega_ray.controller.service import ControllerService
from pravega_ray.segmentstore.contracts import AppendResult, ReadResult, SegmentInfo


class SegmentStoreConnection(Protocol):
    """Asynchronous calls to whichever container owns a segment."""

    def setup_append(self, segment: str, writer_id: bytes) -> Future[int]:
        """Resolve to the writer's last durable event number (``NO_EVENT_NUMBER`` if none)."""
        ...

    def append(
        self,
        segment: str,
        writer_id: bytes,
        expected_last_event_number: int,
        last_event_number: int,
        event_count: int,
        data: bytes,
    ) -> Future[AppendResult]:
        """Append a block of framed events, conditional on the writer's last event number."""
        ...

    def read(self, segment: str, offset: int, max_bytes: int, wait_s: float) -> Future[ReadResult]:
        """Read from ``offset``; at the tail, wait up to ``wait_s`` for data or a seal."""
        ...

    def get_info(self, segment: str) -> Future[SegmentInfo]: ...

    def table_call(self, segment: str, method: str, *args: Any) -> Future[Any]:
        """Call a table-segment operation of the owning container (``TableSegments.<method>``).

        Methods: ``update``, ``get``, ``iterate``, ``read_changes``. Fails with
        SegmentStoreUnavailableError when the outcome is unknown.
        """
        ...


ControllerConnection = ControllerService
"""Synchronous calls to the controller: the controller's service surface itself
(``controller/service.py``). Clients are handed a
:class:`~pravega_ray.client.controller_connection.ControllerClient`, which repeats the
calls that are safe to repeat when their outcome is unknown."""
