"""The interpreter's thread switch interval while writers are open (opt-in).

A writer's acknowledgement crosses threads: Ray's callback thread delivers the answer and the
writer's pump sends the block that waited for it. Each of them must get the interpreter lock
first, and a caller that computes between writes gives it up only when the switch interval
(:func:`sys.getswitchinterval`, Python's default 5 ms) runs out. At a paced 10,000 events/s on
one segment through Ray this made the ack p50 about three times that of a caller that sleeps
between writes (about 32 ms against 10); with 1 ms it was about 1.2-1.5 times
(docs/benchmarks.md, "A caller that computes between writes").

So a writer whose ``WriterConfig.switch_interval_s`` is set keeps the process's interval at
most that while it is open: lowered when the first such writer opens, if it is longer, and
set back when the last one closes, unless something else changed it meanwhile.

Opt-in, not the default: the interval is the whole process's, and a shorter one makes other
threads' races likelier. Found by the suite with 1 ms as the default: Python 3.11's
``asyncio.all_tasks`` copies a set that other threads' event loops add tasks to, and with
several loops in threads (the in-process cluster) ``asyncio.run`` failed at its end with
"Set changed size during iteration" (a leaked writer kept the interval low for every later
test of its process).
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
