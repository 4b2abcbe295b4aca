"""The one place a segment container is wired from a config: actors, tests, simulation.

Pravega's ``ServiceBuilder`` with presets. Data directory layout used by the
filesystem preset::

    <data_dir>/tier1/container-<id>/     the container's durable log
    <data_dir>/tier2/                    Tier-2 chunks (shared by all containers)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pravega_ray.logs.filesystem import FileSystemDurableLog
from pravega_ray.logs.memory import InMemoryDurableLog, InMemoryLogStore
from pravega_ray.segmentstore.config import ContainerConfig
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.storage.filesystem import FileSystemChunkStorage
from pravega_ray.storage.memory import InMemoryChunkStorage


def tier1_directory(data_dir: str | Path, container_id: int) -> Path:
    return Path(data_dir) / "tier1" / f"container-{container_id}"


def tier2_directory(data_dir: str | Path) -> Path:
    return Path(data_dir) / "tier2"


def build_filesystem_container(
    data_dir: str | Path,
    config: ContainerConfig,
    on_fatal: Callable[[BaseException], None] | None = None,
) -> SegmentContainer:
    """A container with a filesystem durable log and filesystem Tier-2, not yet recovered."""
    return SegmentContainer(
        config,
        FileSystemDurableLog(tier1_directory(data_dir, config.container_id)),
        FileSystemChunkStorage(tier2_directory(data_dir)),
        on_fatal=on_fatal,
    )


def build_in_memory_container(
    config: ContainerConfig,
    log_store: InMemoryLogStore | None = None,
    storage: InMemoryChunkStorage | None = None,
) -> SegmentContainer:
    """A container on memory backends. Pass the same store/storage again to 'restart' it."""
    return SegmentContainer(
        config,
        InMemoryDurableLog(log_store if log_store is not None else InMemoryLogStore()),
        storage if storage is not None else InMemoryChunkStorage(),
    )
