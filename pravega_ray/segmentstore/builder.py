"""The one place a segment container is built: actors, the in-process cluster, tests.

Pravega's ``ServiceBuilder`` with presets. Tier locations are URLs:

* ``file:///abs/path`` — Tier-1: ``<path>/container-<id>/`` holds each container's
  log; Tier-2: ``<path>/`` holds chunks and controller records.
* ``s3://bucket/prefix`` — Tier-1: objects ``<prefix>/log/<id>/...``; Tier-2:
  objects under ``<prefix>/``. Endpoint and credentials come from boto3's
  standard chain (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...).

``start_local`` defaults both to directories under its data dir.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pravega_ray.errors import InvalidArgumentError
from pravega_ray.logs.durable_data_log import DurableDataLog
from pravega_ray.logs.filesystem import FileSystemDurableLog
from pravega_ray.logs.memory import InMemoryDurableLog, InMemoryLogStore
from pravega_ray.segmentstore.attribute_index import AttributeIndex
from pravega_ray.segmentstore.auto_scale import (
    AutoScaleConfig,
    AutoScaleMonitor,
    AutoScaler,
    ScaleReporter,
    check_reporter,
)
from pravega_ray.segmentstore.btree_attribute_index import BTreeAttributeIndex
from pravega_ray.segmentstore.config import ContainerConfig
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.storage.chunk_storage import ChunkStorage, validate_chunk_name
from pravega_ray.storage.fenced import FencedChunkStorage
from pravega_ray.storage.filesystem import FileSystemChunkStorage
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.timing import (
    SYSTEM_CLOCK,
    AsyncioScheduler,
    Clock,
    Scheduler,
    check_clock,
    check_scheduler,
)


@dataclass(frozen=True, slots=True)
class StorageUrl:
    scheme: str  # "file" or "s3"
    location: str  # absolute path, or bucket
    prefix: str = ""  # s3 only

    def __str__(self) -> str:
        if self.scheme == "file":
            return f"file://{self.location}"
        return f"s3://{self.location}/{self.prefix}" if self.prefix else f"s3://{self.location}"


def parse_storage_url(url: str) -> StorageUrl:
    """Parse ``file:///abs/path`` or ``s3://bucket[/prefix]``; InvalidArgumentError otherwise."""
    if not isinstance(url, str):
        raise InvalidArgumentError(f"storage URL must be a str, got {url!r}")
    parts = urlparse(url)
    if parts.scheme == "file":
        if parts.netloc or not parts.path.startswith("/"):
            raise InvalidArgumentError(f"file URLs must be absolute (file:///path): {url!r}")
        return StorageUrl("file", str(Path(parts.path).resolve()))
    if parts.scheme == "s3":
        if not parts.netloc:
            raise InvalidArgumentError(f"s3 URLs need a bucket (s3://bucket/prefix): {url!r}")
        prefix = parts.path.strip("/")
        if prefix:
            validate_chunk_name(prefix)
        return StorageUrl("s3", parts.netloc, prefix)
    raise InvalidArgumentError(f"unsupported storage URL {url!r}: use file:// or s3://")


def _join(prefix: str, *parts: str) -> str:
    return "/".join(p for p in (prefix, *parts) if p)


def build_durable_log(tier1: str | StorageUrl, container_id: int) -> DurableDataLog:
    url = tier1 if isinstance(tier1, StorageUrl) else parse_storage_url(tier1)
    if url.scheme == "file":
        return FileSystemDurableLog(Path(url.location) / f"container-{container_id}")
    from pravega_ray.logs.s3 import S3DurableLog  # boto3 only when asked for

    return S3DurableLog(url.location, _join(url.prefix, "log", str(container_id)))


def build_chunk_storage(tier2: str | StorageUrl) -> ChunkStorage:
    url = tier2 if isinstance(tier2, StorageUrl) else parse_storage_url(tier2)
    if url.scheme == "file":
        return FileSystemChunkStorage(url.location)
    from pravega_ray.storage.s3 import S3ChunkStorage

    return S3ChunkStorage(url.location, url.prefix)


def default_tier_urls(data_dir: str | Path) -> tuple[str, str]:
    root = Path(data_dir).resolve()
    return f"file://{root / 'tier1'}", f"file://{root / 'tier2'}"


S3_GROUP_COMMIT_BYTES_MAX = 16 * 1024 * 1024
S3_GROUP_COMMIT_DELAY_S = 0.005


def tuned_for_tier1(tier1: str, config: ContainerConfig) -> ContainerConfig:
    """Per-backend group commit: an S3 PUT costs ~5-20 ms, so S3 batches bigger and longer."""
    if parse_storage_url(tier1).scheme != "s3":
        return config
    return dataclasses.replace(
        config,
        group_commit_bytes_max=max(config.group_commit_bytes_max, S3_GROUP_COMMIT_BYTES_MAX),
        group_commit_delay_s=config.group_commit_delay_s or S3_GROUP_COMMIT_DELAY_S,
    )


def build_container(
    config: ContainerConfig,
    data_log: DurableDataLog,
    storage: ChunkStorage,
    *,
    clock: Clock = SYSTEM_CLOCK,
    scheduler: Scheduler | None = None,
    attribute_index: AttributeIndex | None = None,
    on_fatal: Callable[[BaseException], None] | None = None,
    scale_reporter: ScaleReporter | None = None,
    auto_scale: AutoScaleConfig | None = None,
) -> SegmentContainer:
    """The one place a container is built from its config and backends (not yet recovered).

    Tier-2 is wrapped in a :class:`FencedChunkStorage`, so its creates and deletes stop
    once a successor claimed Tier-2 (storage/fenced.py); the attribute index is the
    B+tree over that storage unless ``attribute_index`` is given (tests). ``clock`` and
    ``scheduler`` are the seams of a deterministic simulation (``timing.py``).
    ``scale_reporter``: if given, the container reports hot and cold segments to it
    (``segmentstore/auto_scale.py``) with ``auto_scale``'s thresholds (defaults from
    ``constants.py``); None (the default) monitors nothing. InvalidArgumentError for a
    reporter without ``report`` or an ``auto_scale`` that is not an AutoScaleConfig.
    """
    check_clock(clock)
    if scheduler is not None:
        check_scheduler(scheduler)
    if scale_reporter is not None:
        check_reporter(scale_reporter)
    if auto_scale is not None and not isinstance(auto_scale, AutoScaleConfig):
        raise InvalidArgumentError(f"auto_scale must be an AutoScaleConfig, got {auto_scale!r}")
    scheduler = scheduler if scheduler is not None else AsyncioScheduler()
    fenced = FencedChunkStorage(storage, f"container-{config.container_id}")
    container = SegmentContainer(
        config,
        data_log,
        fenced,
        attribute_index if attribute_index is not None else BTreeAttributeIndex(fenced),
        clock=clock,
        scheduler=scheduler,
        on_fatal=on_fatal,
    )
    if scale_reporter is not None:
        container.auto_scaler = AutoScaler(
            AutoScaleMonitor(clock, scale_reporter, auto_scale),
            container.metadata,
            container.get_attributes,
            clock=clock,
            scheduler=scheduler,
        )
    return container


def build_container_on(
    tier1: str, tier2: str, config: ContainerConfig, **options: Any
) -> SegmentContainer:
    """A container on the tiers the URLs name (group commit tuned for Tier-1), not recovered.

    ``options`` are :func:`build_container`'s keyword arguments.
    """
    config = tuned_for_tier1(tier1, config)
    return build_container(
        config,
        build_durable_log(tier1, config.container_id),
        build_chunk_storage(tier2),
        **options,
    )


def build_in_memory_container(
    config: ContainerConfig,
    log_store: InMemoryLogStore | None = None,
    storage: ChunkStorage | None = None,
    **options: Any,
) -> SegmentContainer:
    """A container on memory backends, not recovered. Pass the same store/storage to 'restart'.

    ``options`` are :func:`build_container`'s keyword arguments.
    """
    return build_container(
        config,
        InMemoryDurableLog(log_store if log_store is not None else InMemoryLogStore()),
        storage if storage is not None else InMemoryChunkStorage(),
        **options,
    )
