"""Configuration of one segment container: frozen and validated."""

from __future__ import annotations

from dataclasses import dataclass

from pravega_ray import constants
from pravega_ray.errors import InvalidArgumentError


@dataclass(frozen=True, slots=True)
class ContainerConfig:
    container_id: int
    group_commit_bytes_max: int = constants.GROUP_COMMIT_BYTES_MAX
    group_commit_operations_max: int = constants.GROUP_COMMIT_OPERATIONS_MAX
    group_commit_delay_s: float = 0.0
    """Wait this long before writing a group commit that is not full, to gather more."""
    read_cache_bytes_max: int = constants.READ_CACHE_BYTES_MAX
    storage_flush_bytes: int = constants.STORAGE_FLUSH_BYTES
    storage_flush_interval_s: float = constants.STORAGE_FLUSH_INTERVAL_S
    append_reorder_wait_s: float = constants.APPEND_REORDER_WAIT_S
    checkpoint_interval_s: float = constants.CHECKPOINT_INTERVAL_S
    checkpoint_log_bytes: int = constants.CHECKPOINT_LOG_BYTES
    storage_writer_tick_s: float = constants.STORAGE_WRITER_TICK_S
    attribute_cache_entries_max: int = constants.ATTRIBUTE_CACHE_ENTRIES_MAX
    transient_segment_idle_s: float = constants.TRANSIENT_SEGMENT_IDLE_S
    """An unmerged transient segment unused this long is deleted (``transient_segments.py``)."""
    transient_cleanup_period_s: float = constants.TRANSIENT_CLEANUP_PERIOD_S
    """How often the container looks for such transient segments."""
    table_watch_lease_s: float = constants.TABLE_WATCH_LEASE_S
    """A watcher's lease on a system table segment, and the grace period after a recovery
    (``table_watches.py``)."""
    tier1_unflushed_bytes_max: int = constants.TIER1_UNFLUSHED_BYTES_MAX
    """Appends wait while Tier-1 holds more bytes not yet in Tier-2 (``throttle.py``)."""
    tier1_throttle_wait_s: float = constants.TIER1_THROTTLE_WAIT_S
    """... at most this long each; then ContainerThrottledError (the caller retries)."""
    table_compaction_min_bytes: int = constants.TABLE_COMPACTION_MIN_BYTES
    """Table segments storing fewer bytes are not compacted (``table_compactor.py``)."""
    table_compaction_min_utilization: float = constants.TABLE_COMPACTION_MIN_UTILIZATION
    """Table segments are compacted while fewer than this fraction of their entries are live
    (0 turns compaction off)."""
    table_compaction_round_bytes: int = constants.TABLE_COMPACTION_ROUND_BYTES
    """How much of a table segment's head one compaction round reads."""

    def __post_init__(self) -> None:
        if self.container_id < 0:
            raise InvalidArgumentError("container_id must be non-negative")
        for name in (
            "group_commit_bytes_max",
            "group_commit_operations_max",
            "read_cache_bytes_max",
            "storage_flush_bytes",
            "tier1_unflushed_bytes_max",
        ):
            if getattr(self, name) <= 0:
                raise InvalidArgumentError(f"{name} must be positive")
        if self.group_commit_delay_s < 0 or self.group_commit_delay_s > 1:
            raise InvalidArgumentError("group_commit_delay_s must be in [0, 1]")
        if self.storage_flush_interval_s <= 0 or self.append_reorder_wait_s < 0:
            raise InvalidArgumentError("intervals must be positive")
        if not self.tier1_throttle_wait_s > 0:
            raise InvalidArgumentError("tier1_throttle_wait_s must be positive")
        if not self.table_watch_lease_s > 0:
            raise InvalidArgumentError("table_watch_lease_s must be positive")
        if not 0 <= self.table_compaction_min_utilization <= 1:
            raise InvalidArgumentError("table_compaction_min_utilization must be in [0, 1]")
        if self.table_compaction_min_bytes < 0 or self.table_compaction_round_bytes <= 0:
            raise InvalidArgumentError(
                "table_compaction_min_bytes must be >= 0 and table_compaction_round_bytes > 0"
            )
        if not self.transient_segment_idle_s >= 0 or not self.transient_cleanup_period_s > 0:
            raise InvalidArgumentError(
                "transient_segment_idle_s must be >= 0 and transient_cleanup_period_s > 0"
            )
