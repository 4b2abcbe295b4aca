"""Merging a sealed segment into another (transactions, large events): the container's merge.

Pravega's ``StreamSegmentContainer.mergeStreamSegment``. The source's bytes become the
target's tail in one log operation (:class:`~pravega_ray.segmentstore.operations.
MergeSegment`), with optional attribute values set on the target atomically with them (a
large event's writer mark). A small source (``MERGE_COPY_BYTES_MAX``: most
transactions) has its bytes copied into the log record. Before a bigger one (large events)
the source and the target are flushed to Tier-2 (what they held then), so that the merge is
metadata only (the source's chunks join the target's); when that is not possible (Tier-2
fails, or the target was appended to meanwhile: a busy stream segment) its bytes are
copied too.

Not thread-safe: runs on the container's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from pravega_ray.constants import MERGE_COPY_BYTES_MAX
from pravega_ray.contracts.arguments import check_attribute_updates
from pravega_ray.contracts.attributes import AttributeUpdate, apply_updates
from pravega_ray.errors import ContainerNotReadyError, InvalidArgumentError
from pravega_ray.segmentstore import operations as ops
from pravega_ray.segmentstore.attribute_cache import AttributeCache
from pravega_ray.segmentstore.container_metadata import ContainerMetadata, wake_all
from pravega_ray.segmentstore.read_index import ReadIndex
from pravega_ray.segmentstore.storage_writer import StorageWriter
from pravega_ray.segmentstore.time_index import index_entries, index_keys
from pravega_ray.timing import Clock

__all__ = ["SegmentMerger", "check_merge_jobs"]

log = logging.getLogger("pravega_ray.segmentstore.container")


class SegmentMerger:
    """The container's merge (see the module docstring); ``add`` logs an operation."""

    def __init__(
        self,
        metadata: ContainerMetadata,
        attributes: AttributeCache,
        storage_writer: StorageWriter,
        read_index: ReadIndex,
        add: Callable[[ops.Operation], Awaitable[None]],
        clock: Clock,
    ) -> None:
        self._clock = clock
        self._metadata = metadata
        self._attributes = attributes
        self._storage_writer = storage_writer
        self._read_index = read_index
        self._add = add

    async def merge(
        self, target: str, source: str, attributes: tuple[AttributeUpdate, ...] = ()
    ) -> int:
        """Merge sealed ``source`` into ``target``; the contract of ``SegmentContainer.merge``."""
        if target == source:
            raise InvalidArgumentError("a segment cannot be merged into itself")
        attributes = check_attribute_updates(attributes)
        keys = [u.key for u in attributes]
        self._metadata.merge_pair(target, source)[0].check_attribute_keys(keys)
        keys += index_keys(self._metadata.get(target))  # the merge is indexed (time_index.py)
        while True:
            await self._attributes.prefetch(self._metadata.get(target), keys)
            if self._metadata.merge_pair(target, source)[1].pending_length > MERGE_COPY_BYTES_MAX:
                try:
                    # Then no copying, unless the target was appended to meanwhile.
                    await self._storage_writer.flush_segments((target, source))
                except ContainerNotReadyError:
                    raise  # fenced or closed meanwhile
                except Exception as e:  # Tier-2 trouble must not block a merge: copy instead
                    log.warning("flush before merging %s failed (%r); merging by copy", source, e)
            t, s = self._metadata.merge_pair(target, source)
            data: bytes | None = None
            if s.pending_length <= MERGE_COPY_BYTES_MAX or not (
                s.storage_length == s.length == s.pending_length
                and t.storage_length == t.length == t.pending_length
            ):
                data = await self._read_index.read_bytes(s, 0, s.pending_length)
                t, s = self._metadata.merge_pair(target, source)  # re-check after the await
            if t.attributes_complete or all(k in t.pending_attributes for k in keys):
                break  # else a flush evicted a prefetched value meanwhile: again
        changed = apply_updates(t.pending_attributes, attributes)
        length = s.pending_length
        if length:
            changed.update(index_entries(t, t.pending_length, self._clock.wall_time_ms()))
        offset = t.reserve(length, changed, s.pending_event_count)
        s.pending_deleted = True
        wake_all(s.attribute_waiters)
        await self._add(
            ops.MergeSegment(target, source, offset, length, data, tuple(changed.items()))
        )
        return offset + length


def check_merge_jobs(target: object, sources: object, more: object) -> list[tuple[str, list[str]]]:
    """The jobs of ``SegmentContainer.seal_and_merge``: ``(target, sources)`` then each pair
    of ``more``, checked: InvalidArgumentError unless
    every target is a str and every sources a list or tuple of str."""
    if not isinstance(more, list | tuple):
        raise InvalidArgumentError(f"more must be a list of (target, sources), got {more!r}")
    jobs = []
    for pair in [(target, sources), *more]:
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise InvalidArgumentError(f"a merge is (target, sources), got {pair!r}")
        job_target, job_sources = pair
        if not isinstance(job_target, str):
            raise InvalidArgumentError(f"a merge target is a str, got {job_target!r}")
        if not isinstance(job_sources, list | tuple) or not all(
            isinstance(s, str) for s in job_sources
        ):
            raise InvalidArgumentError(f"merge sources are a list of str, got {job_sources!r}")
        jobs.append((job_target, list(job_sources)))
    return jobs
