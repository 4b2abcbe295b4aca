"""Tier-2 writes fenced by the owner's epoch, so a zombie owner cannot change Tier-2.

A segment container owns its segments' chunks in Tier-2. When Ray declares a container
dead while its process still runs (a *zombie*), a successor takes over: its durable log
(Tier-1) fences the zombie's next log append, but the zombie's storage writer could still
create or delete chunks, e.g. replace a chunk the successor has just written at the same
name, or truncate attribute chunks the successor's tree still uses.

:class:`FencedChunkStorage` closes that window. Layout, in the same Tier-2::

    fences/<owner>/<epoch, 20 digits>      empty object: an owner with this epoch took over

* ``claim(epoch)`` is called once the owner's durable log has given it ``epoch`` (higher
  than every earlier owner's). It creates its own fence object, then lists the owner's
  fences: if one is above ``epoch``, a newer owner has claimed (or is claiming) Tier-2 and
  the claim raises :class:`FencedError`. Otherwise it deletes every fence below ``epoch``
  (garbage: see below) and returns, so in steady state one fence object exists per owner.
* Every ``create`` and ``delete`` first lists ``fences/<owner>/`` and raises FencedError,
  changing nothing, if a fence above the owner's epoch exists. A newer owner creates its
  fence before its first Tier-2 write, and nothing deletes the highest fence (an owner
  deletes only fences below its own), so after the takeover every mutation of any older
  owner fails, except at most one whose check was already done at that moment. That one
  cannot harm the successor: a create that collides with the successor's chunk fails
  (creates are conditional), the zombie's "replace a leftover" delete that would follow is
  a second mutation and is refused, and a chunk the zombie deletes is dead in its durable
  view, which the successor has replayed.
* Reads, ``length``, ``exists`` and ``list`` are not fenced.

*garbage collection* (issue 26). A fence below the highest one is needed by no zombie: an
owner of epoch E is stopped by *any* fence above E, and the highest one is above every
older owner's epoch. So a claim deletes the lower fences once its own check has passed; a
claim killed part-way leaves some, which the next claim deletes; an older claimer that
loses a race may create its fence after the winner's clean-up and leaves it too (junk,
below the highest: harmless, deleted by the next claim). This relies on the check being
"any fence above my epoch" (a listing), not "the fence of epoch + 1 exists" (one ``exists``,
as this module did before): with that check, deleting the fence of E + 1 would let a zombie
of epoch E through, so no fence could ever go. A claim of data written by that version
(fences 1 to N, or gaps where an initializer died) deletes them all but the highest, which
is safe by the same argument. Not used instead: "my own fence still exists" (one
``exists``), because a create of a fence that a takeover deleted could be repeated late
(a request retried after a timeout whose first attempt lands last) and bring the zombie's
fence back; a late create of a lower fence under the listing check is only junk.

The check is one ``list`` of the owner's fences per mutation (one or two names in steady
state): a directory listing on files, a LIST request on S3 (where it costs what a PUT costs,
about 12 times a HEAD; a mutation is a PUT or DELETE itself).
"""

from __future__ import annotations

import contextlib
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
        """Take over Tier-2 writes at ``epoch``; FencedError if a newer owner already has.

        Creates this owner's fence, checks that no fence is above it, then deletes the fences
        below it (the module docstring, *garbage collection*): once it returns, every older
        owner's mutation fails its check.
        """
        invariant(epoch >= 1, f"fence epoch {epoch} must be positive")
        with contextlib.suppress(AlreadyExistsError):  # epochs are unique: a repeat of ours
            self._inner.create(self._fence(epoch), b"")
        self._epoch = epoch
        epochs = self._fence_epochs()
        self._check(epochs)
        lower = [e for e in epochs if e < epoch]
        for earlier in lower:  # nothing needs them: the check is "any fence above"
            self._inner.delete(self._fence(earlier))
        if len(lower) > 1:
            log.info("deleted %d fences of %s below epoch %d", len(lower), self._owner, epoch)

    def owned_before(self) -> bool:
        """True if an owner ever claimed Tier-2 (a claim leaves at least its own fence, and
        only a newer claim, which has created its own, deletes it)."""
        return bool(self._fence_epochs())

    def fence_epochs(self) -> list[int]:
        """The epochs of the owner's fence objects, ascending (tests, tools)."""
        return self._fence_epochs()

    def _fence_epochs(self) -> list[int]:
        prefix = f"{FENCE_PREFIX}{self._owner}/"
        epochs = []
        for name in self._inner.list(prefix):
            digits = name[len(prefix) :]
            if len(digits) == _DIGITS and digits.isdigit():
                epochs.append(int(digits))
            else:
                log.warning("ignoring %s: not a fence object of %s", name, self._owner)
        return sorted(epochs)

    def check(self) -> None:
        """Raise FencedError if a newer owner has claimed Tier-2 (a fence above our epoch)."""
        self._check(self._fence_epochs())

    def _check(self, epochs: list[int]) -> None:
        invariant(self._epoch is not None, f"Tier-2 of {self._owner} written before claim()")
        assert self._epoch is not None
        if epochs and epochs[-1] > self._epoch:
            raise FencedError(
                f"Tier-2 of {self._owner} was taken over by a newer owner "
                f"(epoch {epochs[-1]} > {self._epoch})"
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
