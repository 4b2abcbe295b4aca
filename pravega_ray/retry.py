"""Repeating a call whose outcome is unknown, for callers that know a repeat is safe.

Used by the client's controller calls (``client/controller_connection.py``), the batch
client's segment calls (``client/batch_client.py``) and the controller's segment calls
(``controller/segment_helper.py``): each decides *which* calls are safe to repeat; this
module only says *how*: at most ``attempts_max`` calls, ``pause_s`` apart (paused through
the caller's :class:`~pravega_ray.timing.ThreadScheduler`, so a test on a manual clock
waits for none), each repeat logged, and the last error reaching the caller. Loops that
resolve an unknown outcome another way (the writer's ``setup_append``, the key-value
table's growing pause, the reader group synchronizer's lost races) keep their own;
docs/design.md, "Service surfaces", lists them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from pravega_ray.timing import ThreadScheduler

__all__ = ["repeat_while"]

R = TypeVar("R")


def repeat_while(
    unavailable: type[BaseException],
    call: Callable[[], R],
    *,
    what: str,
    log: logging.Logger,
    attempts_max: int,
    pause_s: float,
    scheduler: ThreadScheduler,
) -> R:
    """``call()``, repeated while it raises ``unavailable``; ``attempts_max`` calls at most.

    Any other error propagates at once; after the last attempt, its ``unavailable`` error
    does. Between attempts it sleeps ``pause_s`` through ``scheduler``. Each repeat is
    logged on ``log`` (the caller's logger), naming the call by ``what``.
    """
    for attempt in range(1, attempts_max + 1):
        try:
            return call()
        except unavailable as e:
            if attempt == attempts_max:
                raise
            log.info("%s: %s; repeating (%d)", what, e, attempt)
            scheduler.sleep(pause_s)
    raise AssertionError("unreachable: attempts_max is at least 1")
