"""The tests' segment containers: shared configurations, built by the one builder.

No test wires a container's parts itself: each calls :func:`new_container` (or the
in-process cluster), which goes through ``segmentstore.builder.build_container`` as
the actors and the in-process cluster do. The configurations tests share live here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pravega_ray.logs.durable_data_log import DurableDataLog
from pravega_ray.logs.memory import InMemoryDurableLog, InMemoryLogStore
from pravega_ray.segmentstore.builder import build_container
from pravega_ray.segmentstore.config import ContainerConfig
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.storage.chunk_storage import ChunkStorage
from pravega_ray.storage.memory import InMemoryChunkStorage

QUIET: dict[str, Any] = dict(
    storage_flush_bytes=1 << 30,
    storage_flush_interval_s=3600.0,
    storage_writer_tick_s=3600.0,
    checkpoint_interval_s=3600.0,
)
"""The storage writer does nothing on its own: flushes happen when the test asks."""

LAZY_TIER2: dict[str, Any] = dict(storage_flush_interval_s=60.0, checkpoint_interval_s=3600.0)
"""Data stays in Tier-1 unless the test flushes it (the corruption matrix damages either)."""

SMALL: dict[str, Any] = dict(
    storage_flush_bytes=2000,
    storage_flush_interval_s=0.01,
    checkpoint_interval_s=0.01,
    checkpoint_log_bytes=4000,
    read_cache_bytes_max=3000,
    storage_writer_tick_s=0.005,
)
"""Small chunks, frequent checkpoints and a tiny read cache: recovery and truncation at work."""

TIGHT_ATTRIBUTES: dict[str, Any] = dict(
    attribute_cache_entries_max=10,
    storage_writer_tick_s=0.005,
    checkpoint_interval_s=0.01,
    checkpoint_log_bytes=2000,
    storage_flush_interval_s=0.01,
)
"""A ten-entry attribute cache, flushed and evicted constantly."""

TIGHT_TABLES: dict[str, Any] = {
    **TIGHT_ATTRIBUTES,
    "attribute_cache_entries_max": 20,
    "checkpoint_log_bytes": 4000,
}
"""Table segments whose hash index lives mostly in the attribute index."""


def new_container(
    log: DurableDataLog | InMemoryLogStore | None = None,
    storage: ChunkStorage | None = None,
    *,
    config: Mapping[str, Any] | None = None,
    container_id: int = 0,
    recover: bool = True,
    **options: Any,
) -> SegmentContainer:
    """A container built by ``build_container``, recovered unless ``recover=False``.

    ``log``: a durable log, or an in-memory log store to open one on (pass the same
    store and ``storage`` again to "restart"); both default to fresh memory backends.
    ``config``: ContainerConfig fields. ``options``: the builder's keyword arguments
    (``clock``, ``on_fatal``, ``attribute_index``, ``scheduler``).
    """
    if log is None:
        log = InMemoryLogStore()
    data_log = InMemoryDurableLog(log) if isinstance(log, InMemoryLogStore) else log
    container = build_container(
        ContainerConfig(container_id, **dict(config or {})),
        data_log,
        storage if storage is not None else InMemoryChunkStorage(),
        **options,
    )
    if recover:
        container.recover()
    return container
