"""Transient segments: where a large event is written before it is merged (PDP-43A).

A writer asks the container that owns a stream segment (the *parent*) for a transient
segment; the container generates its unique name (:func:`~pravega_ray.naming.
transient_segment_name` with a random 16-byte id), creates it with role TRANSIENT in the
parent's container (the name hashes to the parent) and returns the name. The writer
appends the framed event there, seals it and merges it into the parent; the merge may
set the writer's mark on the parent atomically (``SegmentContainer.merge``). A transient
segment takes no extended attributes (``SegmentMetadata.check_attribute_keys``).

*cleanup* A writer that dies, is closed or loses its container mid-event leaves an
unmerged transient segment, invisible to readers (nobody reads a transient segment).
The container deletes every unmerged transient segment not used (appended to) for
``transient_segment_idle_s``, looking every ``transient_cleanup_period_s`` from its
start. After a recovery every segment was last used "long ago", so the first look, at
the start, deletes them all (PDP-43A: "set to Long.MIN_VALUE after recoveries"): a writer
whose transient segment disappears starts its large event over.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from pravega_ray.contracts.segment_store import SegmentRole
from pravega_ray.errors import ContainerNotReadyError, PravegaError
from pravega_ray.naming import parse_segment_name, transient_segment_name
from pravega_ray.segmentstore.container_metadata import SegmentMetadata, wait_on
from pravega_ray.timing import Clock, Scheduler

if TYPE_CHECKING:
    from pravega_ray.segmentstore.container import SegmentContainer

__all__ = ["TransientSegments"]

log = logging.getLogger(__name__)


class TransientSegments:
    """The container's transient segments: creation and the periodic cleanup."""

    def __init__(
        self,
        container: SegmentContainer,
        *,
        clock: Clock,
        scheduler: Scheduler,
        new_id: Callable[[], bytes] = lambda: uuid.uuid4().bytes,
    ) -> None:
        self._container = container
        self._clock = clock
        self._scheduler = scheduler
        self._new_id = new_id
        self._task: asyncio.Task[None] | None = None

    async def create(self, parent: str) -> str:
        """Create a transient segment of stream segment ``parent``; returns its name.

        Raises InvalidNameError if ``parent`` is not a stream segment's name (a derived
        segment cannot be a parent), SegmentNotFoundError if it does not exist,
        SegmentSealedError if it is sealed (a writer then moves to its successors).
        """
        parse_segment_name(parent)
        self._container.metadata.get(parent).check_not_sealed()
        name = transient_segment_name(parent, self._new_id())
        await self._container.create_segment(name, SegmentRole.TRANSIENT)
        return name

    async def wait_for_length(self, segment: str, length: int) -> SegmentMetadata:
        """The segment once its pending length reaches ``length``, or after
        ``append_reorder_wait_s`` (the caller's condition then fails as usual).

        Only a transient segment waits: the slices of a large event are appended
        pipelined, and actor calls may start out of order (a slice's bytes may be fetched
        before its predecessor's), so a slice may arrive before the one it follows. Any
        other segment returns at once.
        """
        state = self._container.metadata.get(segment)
        if state.role != SegmentRole.TRANSIENT.value:
            return state
        deadline = self._clock.monotonic() + self._container.config.append_reorder_wait_s
        while state.pending_length < length and not state.pending_sealed:
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                break
            await wait_on(state.attribute_waiters, remaining)
            self._container.metadata.get(segment)  # deleted meanwhile: SegmentNotFoundError
        return self._container.metadata.get(segment)

    # --- cleanup ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the periodic cleanup on the running loop; its first look is at once."""
        if self._task is None:
            self._task = self._scheduler.start(self._run(), "transient-cleanup")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def idle(self) -> list[str]:
        """The unmerged transient segments unused for ``transient_segment_idle_s``."""
        cutoff = self._clock.monotonic() - self._container.config.transient_segment_idle_s
        return [
            s.name
            for s in self._container.metadata
            if s.role == SegmentRole.TRANSIENT.value
            and not s.pending_deleted
            and s.durable
            and s.last_used_s <= cutoff
        ]

    async def sweep(self) -> list[str]:
        """Delete the idle transient segments now; returns their names (tests call it)."""
        deleted: list[str] = []
        for name in self.idle():
            try:
                await self._container.delete_segment(name)
            except ContainerNotReadyError:
                raise
            except PravegaError as e:  # merged or deleted meanwhile
                log.debug("transient segment %s not deleted: %r", name, e)
                continue
            deleted.append(name)
        if deleted:
            log.info("deleted %d unmerged transient segments: %s", len(deleted), deleted)
        return deleted

    async def _run(self) -> None:
        period_s = self._container.config.transient_cleanup_period_s
        while True:
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except ContainerNotReadyError:
                return  # fenced, failed or closed: the container has stopped
            except Exception:  # a bug; keep the container serving
                log.exception(
                    "transient cleanup of container %d", self._container.config.container_id
                )
            await self._scheduler.sleep(period_s)
