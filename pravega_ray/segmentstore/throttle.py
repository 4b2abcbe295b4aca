"""Backpressure: appends wait while Tier-1 holds too much that Tier-2 does not have yet.

Every byte appended stays in Tier-1 (the durable log) and in memory (the read index) until
the storage writer has moved it to Tier-2. While Tier-2 is slow or unreachable that amount
only grows: without a bound, the disk or the memory fills and the container fails. Pravega
throttles its writers instead (its ``ThrottlerCalculator``); so does this container.

*Held* bytes are the durable bytes of every segment not yet in Tier-2 (the storage writer's
lag, ``pravega_storage_writer_lag_bytes``), measured by the storage writer after each of its
rounds, whether the round succeeded or not, plus the bytes admitted since. An append (a
writer's block, a conditional append, a table update) is admitted at once while held bytes
are at most ``tier1_unflushed_bytes_max`` (``ContainerConfig``); otherwise it waits, its
caller's future with it, until a measurement finds room. An append that waited
``tier1_throttle_wait_s`` (30 s, below a writer's 60 s call timeout) is answered
:class:`ContainerThrottledError` (a RetriableError; nothing was appended), which writers and
the table clients retry as for a container restart, so their futures keep waiting while the
container's queue holds only the appends still wanted. Nothing is lost and nothing fails for
good: once Tier-2 takes the data again, the lag drops and the waiting appends go on, in the
order they came. A WARNING says when throttling starts (and again every
``LOG_EVERY_S`` while it lasts), an INFO line when it ends; the gauge
``pravega_tier1_throttled_appends`` counts the appends waiting.

Only appends wait. What the container writes for itself (the storage writer's chunk
records, attribute-index roots, checkpoints, seals, truncations, merges, deletions) is never
throttled: it is what frees Tier-1. An append is admitted whatever its size when nothing is
held, so a block larger than the bound still goes through.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pravega_ray import metrics
from pravega_ray.constants import TIER1_THROTTLE_WAIT_S
from pravega_ray.errors import ContainerThrottledError
from pravega_ray.segmentstore.container_metadata import wait_on, wake_all
from pravega_ray.timing import Clock

__all__ = ["LOG_EVERY_S", "Tier1Throttle"]

log = logging.getLogger(__name__)

LOG_EVERY_S = 10.0
"""While appends are throttled, the WARNING is repeated this often."""


class Tier1Throttle:
    """The backpressure of one container's appends (module docstring). Event loop only."""

    def __init__(
        self,
        container_id: int,
        bytes_max: int,
        held: Callable[[], int],
        clock: Clock,
        wait_s_max: float = TIER1_THROTTLE_WAIT_S,
    ) -> None:
        self._container_id = container_id
        self._bytes_max = bytes_max
        self._wait_s_max = wait_s_max
        self._measure = held
        self._clock = clock
        self._held = 0
        self._waiters: list[asyncio.Future[None]] = []
        self._since: float | None = None  # when throttling began
        self._warned_at = 0.0
        self.waiting = 0
        """Appends waiting now."""
        self.throttled = 0
        """Appends that had to wait, since the container started."""
        self.refused = 0
        """Appends refused after waiting ``wait_s_max``, since the container started."""
        self._tags = {"container": str(container_id)}

    @property
    def held(self) -> int:
        """Held bytes as last measured, plus those admitted since."""
        return self._held

    def _full(self, size: int) -> bool:
        """No room for ``size`` bytes (an append of unknown size, 0, needs one)."""
        return self._held > 0 and self._held + max(size, 1) > self._bytes_max

    async def admit(self, size: int) -> None:
        """Return once an append of ``size`` bytes may go on (at once unless throttled).
        ``size`` 0: the append's size is not known yet. Raises ContainerThrottledError after
        waiting ``wait_s_max``: nothing was appended, and the caller retries (a writer
        reconnects and resends; a call waiting for ever would pile up with its resends)."""
        if self._full(size) or self.waiting:  # behind those waiting already
            self.throttled += 1
            self.waiting += 1
            metrics.TIER1_THROTTLED_APPENDS.set(self.waiting, self._tags)
            deadline = self._clock.monotonic() + self._wait_s_max
            try:
                waited = False
                while not waited or self._full(size):
                    self._warn()
                    remaining = deadline - self._clock.monotonic()
                    if remaining <= 0:
                        self.refused += 1
                        raise ContainerThrottledError(
                            f"container {self._container_id}: append held back "
                            f"{self._wait_s_max:.0f} s for Tier-2 to catch up ({self._held} "
                            "bytes not in Tier-2); nothing was appended: retry"
                        )
                    await wait_on(self._waiters, min(remaining, LOG_EVERY_S))
                    waited = True
            finally:
                self.waiting -= 1
                metrics.TIER1_THROTTLED_APPENDS.set(self.waiting, self._tags)
        self._held += size

    def _warn(self) -> None:
        now = self._clock.monotonic()
        if self._since is None:
            self._since = now
        elif now - self._warned_at < LOG_EVERY_S:
            return
        self._warned_at = now
        log.warning(
            "container %d: appends throttled for %.0f s: Tier-1 holds %d bytes not yet in "
            "Tier-2 (at most %d; is Tier-2 slow or unreachable?); %d appends waiting",
            self._container_id,
            now - self._since,
            self._held,
            self._bytes_max,
            self.waiting,
        )

    def measured(self) -> None:
        """The storage writer finished a round: measure the held bytes again, and let the
        waiting appends go on if there is room."""
        self._held = self._measure()
        if self._full(1):
            return
        if self._since is not None:
            log.info(
                "container %d: appends no longer throttled, after %.1f s (%d bytes held)",
                self._container_id,
                self._clock.monotonic() - self._since,
                self._held,
            )
            self._since = None
        wake_all(self._waiters)
