"""The segment store's service surface: every call a segment container answers.

Pravega's segment store speaks one wire protocol to clients and to the
controller; here that protocol is the :class:`SegmentStoreService` Protocol,
with explicit, typed methods for segment, attribute and table operations.

* :class:`~pravega_ray.segmentstore.container.SegmentContainer` implements it (the
  only implementation of the logic).
* The Ray actor (``actors/segment_container_actor.py``) implements it by forwarding
  each call to its container; a test holds the actor's methods to this Protocol's
  signatures.
* Callers reach "the container that owns this segment" through a
  :class:`ServiceInvoker`: ``invoke(SegmentStoreService.append, segment, ...)``
  names the call by the Protocol's own function object, never by a string. The Ray
  invoker calls the owning actor; the in-process cluster calls the container on its
  event loop. :class:`SegmentStoreClient` wraps an invoker with one typed method per
  call, returning ``concurrent.futures.Future`` objects; the client's writers,
  readers and tables and the controller's :class:`SegmentHelper
  <pravega_ray.controller.segment_helper.SegmentHelper>` use it.

Errors: the typed errors of :mod:`pravega_ray.errors`. A dead or restarting
container is :class:`SegmentStoreUnavailableError`: *outcome unknown*.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from pravega_ray.contracts.attributes import NULL_VALUE, AttributeUpdate
from pravega_ray.contracts.segment_store import (
    AppendResult,
    ReadResult,
    SegmentInfo,
    SegmentRole,
    SegmentTraffic,
    TableEntry,
    TableUpdate,
    TableUpdateResult,
)
from pravega_ray.errors import PravegaError

__all__ = ["SegmentStoreClient", "SegmentStoreService", "ServiceInvoker"]

R = TypeVar("R")


class SegmentStoreService(Protocol):
    """What a segment container answers. Every call is a coroutine on its event loop."""

    # --- segments ------------------------------------------------------------------------------
    async def create_segment(self, segment: str, role: SegmentRole = SegmentRole.NORMAL) -> None:
        """Durably create an empty segment. SegmentExistsError if it exists."""
        ...

    async def setup_append(self, segment: str, writer_id: bytes) -> int:
        """The writer's last durable event number (NO_EVENT_NUMBER if none)."""
        ...

    async def append(
        self,
        segment: str,
        writer_id: bytes,
        expected_last_event_number: int,
        last_event_number: int,
        event_count: int,
        data: bytes,
    ) -> AppendResult:
        """Durably append a block of framed events, conditional on the writer's last event."""
        ...

    async def append_conditional(
        self,
        segment: str,
        data: bytes,
        attribute_updates: tuple[AttributeUpdate, ...] = (),
        expected_offset: int | None = None,
        event_count: int = 0,
    ) -> AppendResult:
        """Durably append ``data`` and apply ``attribute_updates``, atomically."""
        ...

    async def read(self, segment: str, offset: int, max_bytes: int, wait_s: float) -> ReadResult:
        """Read durable bytes from ``offset``; at the tail wait up to ``wait_s``."""
        ...

    async def read_range(self, segment: str, offset: int, length: int) -> bytes:
        """Exactly the durable bytes ``[offset, offset + length)``."""
        ...

    async def get_info(self, segment: str) -> SegmentInfo: ...

    # --- stream cuts: the time index and the event-boundary check (time_index.py) --------------
    async def get_offset_at_time(self, segment: str, time_ms: int) -> int:
        """The offset of the first event appended in the first time slot at or after
        ``time_ms``'s; the segment's length if none; never below its start offset."""
        ...

    async def check_event_boundary(self, segment: str, offset: int) -> None:
        """InvalidArgumentError unless ``offset`` is the segment's start offset, its length
        or the start of an event frame."""
        ...

    async def locate_offset(self, segment: str, offset: int) -> int:
        """The first event boundary at or after ``offset``, clamped into the segment's
        ``[start offset, length]``: a valid cut offset near a byte position (the micro-batch
        source's approximate bytes per trigger)."""
        ...

    async def seal(self, segment: str) -> int:
        """Durably seal the segment; returns its final length. Idempotent."""
        ...

    async def truncate(self, segment: str, offset: int) -> None:
        """Durably drop the bytes below ``offset``."""
        ...

    async def create_transient_segment(self, parent: str) -> str:
        """Durably create a transient segment of stream segment ``parent``; its generated name.

        For large events (docs/design.md, "Large events"): the segment is in ``parent``'s
        container, takes no extended attributes, and is deleted if left unmerged (idle, or
        after a recovery).
        SegmentNotFoundError / SegmentSealedError for a missing / sealed parent.
        """
        ...

    async def merge(
        self, target: str, source: str, attributes: tuple[AttributeUpdate, ...] = ()
    ) -> int:
        """Atomically move sealed ``source``'s bytes to the end of ``target``.

        ``attributes`` are applied to ``target`` in the same operation, all or none
        (ConditionalUpdateError merges nothing). Returns the target's new length.
        """
        ...

    async def seal_and_merge(
        self, target: str, sources: Sequence[str], more: Sequence[tuple[str, Sequence[str]]] = ()
    ) -> list[PravegaError | None]:
        """Seal each of ``sources`` and merge them into ``target``, in order, in one call;
        likewise each ``(target, sources)`` of ``more`` (targets of the same container), the
        targets side by side (a transaction's commit: one call per container, not two per
        segment). A source that is gone was merged already: skipped. One outcome per
        target, ``target`` first: None once all its sources are merged, else the error that
        stopped its merges (its later sources untouched). InvalidArgumentError (nothing
        done) for arguments of the wrong shape."""
        ...

    async def delete_segment(self, segment: str) -> None: ...

    # --- attributes ----------------------------------------------------------------------------
    async def get_attributes(self, segment: str, keys: list[bytes]) -> dict[bytes, int]: ...

    async def update_attributes(
        self, segment: str, updates: tuple[AttributeUpdate, ...]
    ) -> None: ...

    async def iterate_attributes(
        self, segment: str, after: bytes | None, limit: int
    ) -> tuple[list[tuple[bytes, int]], bytes | None]: ...

    # --- table segments ------------------------------------------------------------------------
    async def table_create(self, segment: str) -> None: ...

    async def table_update(
        self,
        segment: str,
        updates: Sequence[TableUpdate],
        client_id: bytes | None = None,
        client_last: int = NULL_VALUE,
        watcher: bytes | None = None,
    ) -> TableUpdateResult:
        """Apply ``updates`` atomically (``TableSegments.update``). An update of a watched
        system table is acknowledged once its watchers read it (``table_watches.py``),
        except ``watcher``'s own lease: the writer's id when the writer watches the segment
        and applies its own update itself."""
        ...

    async def table_get(self, segment: str, keys: Sequence[bytes]) -> list[TableEntry | None]: ...

    async def table_iterate(
        self,
        segment: str,
        cursor: bytes | None,
        limit: int,
        with_values: bool = True,
        key_prefix: bytes | None = None,
    ) -> tuple[list[TableEntry], bytes | None]:
        """A page of ``TableSegments.iterate``: with ``key_prefix``, only keys starting
        with it (the page may then be short, even empty, before the end)."""
        ...

    async def table_read_changes(
        self, segment: str, from_offset: int, max_bytes: int
    ) -> tuple[list[TableEntry], int]: ...

    async def table_changes(
        self, segment: str, from_offset: int | None, max_bytes: int
    ) -> tuple[list[TableEntry], int, int]:
        """``table_read_changes`` and the container's log epoch (it grows at each recovery);
        ``from_offset=None``: no entries, the segment's length."""
        ...

    async def table_watch(
        self, segment: str, holder: bytes, from_offset: int | None, wait_s: float, max_bytes: int
    ) -> tuple[list[TableEntry], int, int, float]:
        """Renew ``holder``'s lease on a system table segment, acknowledging the changes
        before ``from_offset``; ``table_changes`` from there once there is one (or none
        after ``wait_s``), and the lease's length in seconds. Until the lease expires, an
        update of the segment is not acknowledged before the holder acknowledged it
        (``segmentstore/table_watches.py``)."""
        ...

    async def table_unwatch(self, segment: str, holder: bytes) -> None:
        """Drop ``holder``'s lease on ``segment``."""
        ...

    # --- the whole container -------------------------------------------------------------------
    async def list_segments(self) -> list[str]: ...

    async def flush_to_storage(self) -> None:
        """Flush every segment's durable data to Tier-2 now."""
        ...

    async def checkpoint(self) -> int:
        """Flush, write a metadata checkpoint, truncate the log; returns the truncation point."""
        ...

    async def get_traffic(self) -> list[SegmentTraffic]:
        """Smoothed events/s and bytes/s of every segment (for auto-scaling)."""
        ...


class ServiceInvoker(Protocol):
    """Calls a :class:`SegmentStoreService` method on the container that owns a segment."""

    def invoke(self, method: Callable[..., Awaitable[R]], segment: str, *args: Any) -> Future[R]:
        """Call ``owner.<method>(segment, *args)`` where ``owner`` serves ``segment``; a future.

        ``method`` is a function of :class:`SegmentStoreService` (e.g.
        ``SegmentStoreService.append``): it names the call, and the owner's method of
        that name runs (the Protocol's own body is never called). The future fails with
        typed errors; SegmentStoreUnavailableError when the outcome is unknown.
        """
        ...


class SegmentStoreClient:
    """Typed, asynchronous calls to whichever container owns a segment.

    One method per per-segment call of :class:`SegmentStoreService`, each returning a
    ``concurrent.futures.Future`` of the call's result.
    """

    def __init__(self, invoker: ServiceInvoker) -> None:
        self.invoker = invoker

    def create_segment(self, segment: str, role: SegmentRole = SegmentRole.NORMAL) -> Future[None]:
        return self.invoker.invoke(SegmentStoreService.create_segment, segment, role)

    def setup_append(self, segment: str, writer_id: bytes) -> Future[int]:
        return self.invoker.invoke(SegmentStoreService.setup_append, segment, writer_id)

    def append(
        self,
        segment: str,
        writer_id: bytes,
        expected_last_event_number: int,
        last_event_number: int,
        event_count: int,
        data: bytes,
    ) -> Future[AppendResult]:
        return self.invoker.invoke(
            SegmentStoreService.append,
            segment,
            writer_id,
            expected_last_event_number,
            last_event_number,
            event_count,
            data,
        )

    def read(self, segment: str, offset: int, max_bytes: int, wait_s: float) -> Future[ReadResult]:
        return self.invoker.invoke(SegmentStoreService.read, segment, offset, max_bytes, wait_s)

    def append_conditional(
        self,
        segment: str,
        data: bytes,
        attribute_updates: tuple[AttributeUpdate, ...] = (),
        expected_offset: int | None = None,
        event_count: int = 0,
    ) -> Future[AppendResult]:
        return self.invoker.invoke(
            SegmentStoreService.append_conditional,
            segment,
            data,
            attribute_updates,
            expected_offset,
            event_count,
        )

    def truncate(self, segment: str, offset: int) -> Future[None]:
        return self.invoker.invoke(SegmentStoreService.truncate, segment, offset)

    def get_attributes(self, segment: str, keys: list[bytes]) -> Future[dict[bytes, int]]:
        return self.invoker.invoke(SegmentStoreService.get_attributes, segment, keys)

    def update_attributes(self, segment: str, updates: tuple[AttributeUpdate, ...]) -> Future[None]:
        return self.invoker.invoke(SegmentStoreService.update_attributes, segment, updates)

    def get_info(self, segment: str) -> Future[SegmentInfo]:
        return self.invoker.invoke(SegmentStoreService.get_info, segment)

    def get_offset_at_time(self, segment: str, time_ms: int) -> Future[int]:
        return self.invoker.invoke(SegmentStoreService.get_offset_at_time, segment, time_ms)

    def check_event_boundary(self, segment: str, offset: int) -> Future[None]:
        return self.invoker.invoke(SegmentStoreService.check_event_boundary, segment, offset)

    def locate_offset(self, segment: str, offset: int) -> Future[int]:
        return self.invoker.invoke(SegmentStoreService.locate_offset, segment, offset)

    def create_transient_segment(self, parent: str) -> Future[str]:
        return self.invoker.invoke(SegmentStoreService.create_transient_segment, parent)

    def merge(
        self, target: str, source: str, attributes: tuple[AttributeUpdate, ...] = ()
    ) -> Future[int]:
        return self.invoker.invoke(SegmentStoreService.merge, target, source, attributes)

    def seal(self, segment: str) -> Future[int]:
        return self.invoker.invoke(SegmentStoreService.seal, segment)

    def delete_segment(self, segment: str) -> Future[None]:
        return self.invoker.invoke(SegmentStoreService.delete_segment, segment)

    def seal_and_merge(
        self, target: str, sources: Sequence[str], more: Sequence[tuple[str, Sequence[str]]] = ()
    ) -> Future[list[PravegaError | None]]:
        return self.invoker.invoke(SegmentStoreService.seal_and_merge, target, sources, more)

    def table_create(self, segment: str) -> Future[None]:
        return self.invoker.invoke(SegmentStoreService.table_create, segment)

    def table_update(
        self,
        segment: str,
        updates: Sequence[TableUpdate],
        client_id: bytes | None = None,
        client_last: int = NULL_VALUE,
        watcher: bytes | None = None,
    ) -> Future[TableUpdateResult]:
        return self.invoker.invoke(
            SegmentStoreService.table_update, segment, updates, client_id, client_last, watcher
        )

    def table_get(self, segment: str, keys: Sequence[bytes]) -> Future[list[TableEntry | None]]:
        return self.invoker.invoke(SegmentStoreService.table_get, segment, keys)

    def table_iterate(
        self,
        segment: str,
        cursor: bytes | None,
        limit: int,
        with_values: bool = True,
        key_prefix: bytes | None = None,
    ) -> Future[tuple[list[TableEntry], bytes | None]]:
        if key_prefix is None:  # as before prefixes existed (test doubles take this form)
            return self.invoker.invoke(
                SegmentStoreService.table_iterate, segment, cursor, limit, with_values
            )
        return self.invoker.invoke(
            SegmentStoreService.table_iterate, segment, cursor, limit, with_values, key_prefix
        )

    def table_read_changes(
        self, segment: str, from_offset: int, max_bytes: int
    ) -> Future[tuple[list[TableEntry], int]]:
        return self.invoker.invoke(
            SegmentStoreService.table_read_changes, segment, from_offset, max_bytes
        )

    def table_changes(
        self, segment: str, from_offset: int | None, max_bytes: int
    ) -> Future[tuple[list[TableEntry], int, int]]:
        return self.invoker.invoke(
            SegmentStoreService.table_changes, segment, from_offset, max_bytes
        )

    def table_watch(
        self, segment: str, holder: bytes, from_offset: int | None, wait_s: float, max_bytes: int
    ) -> Future[tuple[list[TableEntry], int, int, float]]:
        return self.invoker.invoke(
            SegmentStoreService.table_watch, segment, holder, from_offset, wait_s, max_bytes
        )

    def table_unwatch(self, segment: str, holder: bytes) -> Future[None]:
        return self.invoker.invoke(SegmentStoreService.table_unwatch, segment, holder)
