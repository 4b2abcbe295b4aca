"""Smoothed per-segment traffic rates, for auto-scaling (``auto_scale.py``, the controller).

An exponentially decaying counter per quantity: ``value = value * exp(-dt / tau)
+ amount`` on every update; the rate is ``value / tau``, which converges to the
true rate under steady traffic and decays to zero when traffic stops.
"""

from __future__ import annotations

import math


class RateTracker:
    __slots__ = ("_bytes", "_events", "_last", "_tau")

    def __init__(self, time_constant_s: float, now: float) -> None:
        self._tau = time_constant_s
        self._events = 0.0
        self._bytes = 0.0
        self._last = now

    def _decay(self, now: float) -> None:
        if now > self._last:
            factor = math.exp(-(now - self._last) / self._tau)
            self._events *= factor
            self._bytes *= factor
            self._last = now

    def record(self, events: int, size_bytes: int, now: float) -> None:
        self._decay(now)
        self._events += events
        self._bytes += size_bytes

    def rates(self, now: float) -> tuple[float, float]:
        """``(events per second, bytes per second)`` as of ``now``."""
        self._decay(now)
        return self._events / self._tau, self._bytes / self._tau
