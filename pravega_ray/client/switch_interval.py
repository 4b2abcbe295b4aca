"""The interpreter's thread switch interval while writers are open.

A writer's acknowledgement crosses threads: Ray's callback thread delivers the answer and the
writer's pump sends the next block. Each of them must get the interpreter lock first, and a
caller that computes between writes gives it up only when the switch interval
(:func:`sys.getswitchinterval`, Python's default 5 ms) runs out. At a paced 10,000 events/s on
one segment through Ray this made the ack p50 four times that of a caller that sleeps between
writes (about 30 ms against 7.5); with 1 ms it was about 1.5 times (docs/benchmarks.md,
"A caller that computes between writes").

So while at least one writer with a pump thread is open, the interval is at most the writers'
``WriterConfig.switch_interval_s`` (1 ms by default): lowered when the first such writer opens,
if it is longer, and set back when the last one closes, unless something else changed it
meanwhile. ``switch_interval_s=None`` leaves the interpreter alone. Process-wide state, on
purpose: the interval is the process's.
"""

from __future__ import annotations

import logging
import sys
import threading

__all__ = ["hold_switch_interval", "release_switch_interval"]

log = logging.getLogger(__name__)

_lock = threading.Lock()
_holders = 0
_previous: float | None = None
"""The interval before the first holder lowered it (None: not lowered)."""
_lowered_to: float | None = None


def hold_switch_interval(target_s: float) -> None:
    """A writer opened: lower the interval to ``target_s`` if it is longer. Pair with
    :func:`release_switch_interval`."""
    global _holders, _previous, _lowered_to
    with _lock:
        _holders += 1
        current = sys.getswitchinterval()
        if current <= target_s:
            return
        if _previous is None:
            _previous = current
            log.info(
                "pravega-ray: thread switch interval %.4g s -> %.4g s while writers are open "
                "(WriterConfig.switch_interval_s)",
                current,
                target_s,
            )
        sys.setswitchinterval(target_s)
        _lowered_to = sys.getswitchinterval()


def release_switch_interval() -> None:
    """A writer that held the interval closed: the last one sets back what it lowered."""
    global _holders, _previous, _lowered_to
    with _lock:
        _holders = max(0, _holders - 1)
        if _holders or _previous is None:
            return
        if sys.getswitchinterval() == _lowered_to:  # not changed by anyone else meanwhile
            sys.setswitchinterval(_previous)
        _previous = _lowered_to = None
