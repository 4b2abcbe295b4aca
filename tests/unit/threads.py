"""Counting a component's own threads in tests.

``threading.active_count()`` is process-wide: pools shared by everything in the process (the
in-process cluster's executor, the segment-call pool, the processors' pools) grow on demand
whenever background work arrives, so a test asserting "started no thread" by the total fails
now and then for a thread it never made. Tests count the threads of the component they check,
by the name it gives them."""

from __future__ import annotations

import threading

WRITER_THREADS = "pravega-writer-"
"""The prefix of a writer's pump thread's name (``pravega-writer-<stream>``)."""


def alive_named(prefix: str) -> list[threading.Thread]:
    """The live threads whose name starts with ``prefix``."""
    return [t for t in threading.enumerate() if t.is_alive() and t.name.startswith(prefix)]


def count_named(prefix: str) -> int:
    """How many live threads have a name starting with ``prefix``."""
    return len(alive_named(prefix))
