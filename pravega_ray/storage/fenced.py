"""Tier-2 writes fenced by the owner's epoch, so a zombie owner cannot change Tier-2.

A segment container owns its segments' chunks in Tier-2. When Ray declares a container
dead while its process still runs (a *zombie*), a successor takes over: its durable log
(Tier-1) fences the zombie's next log append, but the zombie's storage writer could still
create or delete chunks, e.g. replace a chunk the successor has just written at the same
name, or truncate attribute chunks the successor's tree still uses.

:class:`FencedChunkStorage` closes that window. Layout, in the same Tier-2::

    fences/<owner>/<epoch, 20 digits>      empty object: an owner with this epoch took over

* ``claim(epoch)`` is called once the owner's durable log has given it ``epoch`` (higher
  than every earlier owner's). It creates the fence objects for ``epoch`` and for every
  lower epoch down to the newest one that exists (one object in steady state; a first
  claim in an older data directory creates them all once). It then checks itself, so of
  two racing initializers the lower one stops here.
* Every ``create`` and ``delete`` first checks that ``fences/<owner>/<epoch + 1>`` does
  not exist, else raises :class:`FencedError` and changes nothing. A newer owner has
  created that object before its first Tier-2 write, so after the takeover every
  mutation of an older owner fails, except at most one whose check was already done at
  that moment. That one cannot harm the successor: a create that collides with the
  successor's chunk fails (creates are conditional), the zombie's "replace a leftover"
  delete that would follow is a second mutation and is refused, and a chunk the zombie
  deletes is dead in its durable view, which the successor has replayed.
* Reads, ``length``, ``exists`` and ``list`` are not fenced.

The check is one ``exists`` per mutation: a ``stat`` on files, a ``HEAD`` on S3.
"""

from __future__ import annotations

import logging

from pravega_ray import metrics
from pravega_ray.errors import AlreadyExistsError, FencedError
from pravega_ray.invariant import invariant
from pravega_ray.storage.chunk_storage import (
    ChunkStorage,
    ChunkStorageCapabilities,
    validate_chunk_name,
)

log = logging.getLogger(__name__)

FENCE_PREFIX = "fences/"
"""*format* Fence objects are ``fences/<owner>/<epoch:020d>``."""

_DIGITS = 20


class FencedChunkStorage:
    """A ChunkStorage whose creates and deletes stop once a newer owner claimed it."""

    def __init__(self, inner: ChunkStorage, owner: str) -> None:
        self._inner = inner
        self._owner = validate_chunk_name(owner)
        self._epoch: int | None = None
        # Tier-2 byte counters (pravega_ray.metrics), tagged by the owning container's id.
        self._metric_tags = {"container": owner.removeprefix("container-")}

    @property
    def inner(self) -> ChunkStorage:
        return self._inner

    @property
    def capabilities(self) -> ChunkStorageCapabilities:
        return self._inner.capabilities

    @property
    def epoch(self) -> int | None:
        return self._epoch

    def _fence(self, epoch: int) -> str:
        return f"{FENCE_PREFIX}{self._owner}/{epoch:0{_DIGITS}d}"

    def claim(self, epoch: int) -> None:
        """Take over Tier-2 writes at ``epoch``; FencedError if a newer owner already has."""
        invariant(epoch >= 1, f"fence epoch {epoch} must be positive")
        created = 0
        for earlier in range(epoch, 0, -1):
            try:
                self._inner.create(self._fence(earlier), b"")
                created += 1
            except AlreadyExistsError:
                if earlier != epoch:
                    break  # an earlier owner's fence: everything below is fenced already
        if created > 1:
            log.info("fenced Tier-2 of %s up to epoch %d (%d fences)", self._owner, epoch, created)
        self._epoch = epoch
        self.check()

    def owned_before(self) -> bool:
        """True if an owner ever claimed Tier-2 (every claim creates the fence of epoch 1)."""
        return self._inner.exists(self._fence(1))

    def check(self) -> None:
        """Raise FencedError if a newer owner has claimed Tier-2."""
        invariant(self._epoch is not None, f"Tier-2 of {self._owner} written before claim()")
        assert self._epoch is not None
        if self._inner.exists(self._fence(self._epoch + 1)):
            raise FencedError(
                f"Tier-2 of {self._owner} was taken over by a newer owner (epoch > {self._epoch})"
            )

    # --- ChunkStorage ------------------------------------------------------------------------
    def create(self, name: str, data: bytes) -> None:
        self.check()
        self._inner.create(name, data)
        metrics.TIER2_WRITTEN_BYTES.inc(len(data), self._metric_tags)

    def delete(self, name: str) -> None:
        self.check()
        self._inner.delete(name)

    def read(self, name: str, offset: int, length: int) -> bytes:
        data = self._inner.read(name, offset, length)
        metrics.TIER2_READ_BYTES.inc(len(data), self._metric_tags)
        return data

    def length(self, name: str) -> int:
        return self._inner.length(name)

    def exists(self, name: str) -> bool:
        return self._inner.exists(name)

    def list(self, prefix: str) -> list[str]:
        return self._inner.list(prefix)
