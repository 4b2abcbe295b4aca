"""Leases on table segments' change logs: a reader holding one learns of every update before
the update is acknowledged (Pravega's stream store caching, made push-based).

Why
---

A controller instance caches the records it reads (``controller/stream_store_cache.py``). To
serve a cached record it must know that no write completed since it last looked; without
help from the container that costs a round of ``table_changes`` calls per operation. A
*watcher* holding a lease on a table segment needs none: the container acknowledges no update
of the segment until every watcher whose lease runs has read past it.

Protocol
--------

* :meth:`TableWatches.watch` (``table_watch``) renews the caller's lease (``holder``, 16
  bytes) for ``lease_s`` from the call's arrival, and records that the holder has applied
  every change before ``from_offset`` (its *acknowledgement*). It answers the changes from
  ``from_offset`` at once if there are any, or waits up to ``wait_s`` for one. A holder calls
  again as soon as it applied an answer: that call is its acknowledgement.
* An update of a watched segment (:meth:`TableWatches.settle`) returns once each holder
  whose lease has not expired acknowledged the segment's length after the update, or its lease
  expired (a holder that died costs writers at most ``lease_s``). The writer's own lease is
  not waited for when the writer names it (``table_update(..., watcher=)``): it applies its
  own update to its copy when the update answers, so it never trusts a copy without it.
* A holder may trust its copy from the moment it applied an answer until ``lease_s`` after it
  *sent* that call (sent before the container renewed the lease on arrival), minus a margin;
  after that it validates as before (``table_changes``).
* A container that recovers knows nothing of its predecessor's leases, so for ``lease_s`` after
  it takes over, updates of watchable segments wait out the *grace period* before they are
  acknowledged: a holder still trusting a lease of the predecessor has stopped by then. A
  container that had no predecessor (its Tier-2 never claimed) has no grace period.
* A zombie container (fenced, not yet knowing it) may keep renewing leases: its reads are as
  stale as any read it answers, which is the same exposure every read from a zombie has.

Only system table segments (``_system/_kvt.*``: the controller's records) are watchable, so
users' key-value tables never wait for a grace period.

Time is the process's monotonic clock (real time: leases span processes; tests pass a short
``lease_s``). All methods run on the container's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from pravega_ray.constants import SYSTEM_SCOPE
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.naming import KVT_STREAM_PREFIX

__all__ = ["HOLDER_BYTES", "TableWatches", "check_holder", "watchable"]

HOLDER_BYTES = 16
"""Length of a watcher's id."""

WATCH_WAIT_S_MAX = 10.0
"""Longest a ``table_watch`` call waits for a change."""


def check_holder(holder: object, *, optional: bool = False) -> None:
    """InvalidArgumentError unless ``holder`` is a watcher's id (``HOLDER_BYTES`` bytes), or
    None when ``optional``."""
    if holder is None and optional:
        return
    if not isinstance(holder, bytes) or len(holder) != HOLDER_BYTES:
        raise InvalidArgumentError(f"a watcher's id is {HOLDER_BYTES} bytes, got {holder!r}")


def watchable(segment: str) -> bool:
    """Whether ``segment`` may be watched: a system table's segment."""
    return segment.startswith(f"{SYSTEM_SCOPE}/{KVT_STREAM_PREFIX}")


@dataclass
class _Holder:
    acked: int  # every change before this offset applied by the holder
    expires: float  # monotonic


class TableWatches:
    """The leases of one container's table segments (module docstring).

    ``lease_s``: how long a watch call's lease lasts, and the grace period
    (:meth:`begin_grace`).
    """

    def __init__(self, lease_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(lease_s, bool) or not isinstance(lease_s, int | float) or not lease_s > 0:
            raise InvalidArgumentError(f"lease_s must be a number > 0, got {lease_s!r}")
        self.lease_s = float(lease_s)
        self._clock = clock
        self._grace_until = 0.0
        self._holders: dict[str, dict[bytes, _Holder]] = {}
        self._changes: dict[str, asyncio.Event] = {}  # pulsed by updates: wakes watch calls
        self._acks: dict[str, asyncio.Event] = {}  # pulsed by renewals: wakes waiting updates

    def begin_grace(self) -> None:
        """Start the grace period: the container took over from a predecessor, whose leases
        it does not know (a container without one has none to wait for)."""
        self._grace_until = self._clock() + self.lease_s

    # --- watchers --------------------------------------------------------------------------------
    def renew(self, segment: str, holder: object, from_offset: int) -> None:
        """Renew ``holder``'s lease on ``segment`` and note its acknowledgement of
        ``from_offset`` (InvalidArgumentError for a segment that cannot be watched or a bad
        holder id); wakes updates waiting for it."""
        if not watchable(segment):
            raise InvalidArgumentError(f"segment {segment} cannot be watched (system tables only)")
        check_holder(holder)
        assert isinstance(holder, bytes)
        holders = self._holders.setdefault(segment, {})
        holders[holder] = _Holder(from_offset, self._clock() + self.lease_s)
        self._pulse(self._acks, segment)

    def release(self, segment: str, holder: bytes) -> None:
        """Drop ``holder``'s lease (it stops watching): updates no longer wait for it."""
        holders = self._holders.get(segment)
        if holders is not None and holders.pop(holder, None) is not None:
            if not holders:
                del self._holders[segment]
            self._pulse(self._acks, segment)
            self._pulse(self._changes, segment)  # its waiting call answers: it stops sooner

    async def wait_for_change(self, segment: str, wait_s: float) -> None:
        """Return at the segment's next update, or after ``wait_s``. (Only updates wake it:
        were watchers woken by each other's renewals, they would wake each other for ever.)"""
        await self._wait_pulse(self._changes, segment, wait_s)

    # --- updates ---------------------------------------------------------------------------------
    async def settle(
        self, segment: str, length: Callable[[], int], skip: bytes | None = None
    ) -> None:
        """Called after an update of ``segment`` became durable: wakes its watchers and
        returns once each live lease but ``skip``'s (the writer's own) acknowledged
        ``length()`` (as it was on entry) and the grace period is over. A segment nobody
        watches returns at once (after the grace period, for a watchable one)."""
        if not watchable(segment):
            return
        self._pulse(self._changes, segment)
        end = length()
        while True:
            now = self._clock()
            holders = self._holders.get(segment, {})
            for holder_id, holder in list(holders.items()):
                if holder.expires <= now:
                    del holders[holder_id]  # expired: never waited for again
            waits = [h.expires - now for k, h in holders.items() if h.acked < end and k != skip]
            if self._grace_until > now:
                waits.append(self._grace_until - now)
            if not waits:
                return
            # Woken by an acknowledgement, or at the first expiry (or the grace's end).
            await self._wait_pulse(self._acks, segment, min(waits))

    def holders(self, segment: str) -> int:
        """How many leases on ``segment`` have not expired (a diagnostic)."""
        now = self._clock()
        return sum(1 for h in self._holders.get(segment, {}).values() if h.expires > now)

    @staticmethod
    async def _wait_pulse(pulses: dict[str, asyncio.Event], segment: str, timeout_s: float) -> None:
        """Wait for the segment's next pulse in ``pulses``, at most ``timeout_s``."""
        pulse = pulses.setdefault(segment, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(pulse.wait(), timeout_s)

    @staticmethod
    def _pulse(pulses: dict[str, asyncio.Event], segment: str) -> None:
        """Wake every coroutine waiting on ``segment``'s pulse in ``pulses``; later waits
        wait anew."""
        pulse = pulses.pop(segment, None)
        if pulse is not None:
            pulse.set()
