"""What the benchmarks share: progress lines, the one percentile, a plain table, timers, a Ray
and a cluster of their own, temporary directories, and a few steps on streams and files.

Importing this module starts nothing and imports neither Ray nor pravega-ray: the helpers
that need them import them when called.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

_T0 = time.perf_counter()


def log(message: str) -> None:
    """A progress line on stderr (stdout holds only the report), stamped with the seconds
    since the benchmark started."""
    print(f"[bench {time.perf_counter() - _T0:6.1f}s] {message}", file=sys.stderr, flush=True)


# --- Statistics --------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (``q`` in [0, 1]) of ``values`` by linear interpolation.

    The sorted values are placed at ranks 0 .. n-1; the quantile sits at rank ``q * (n - 1)``,
    and a rank between two values is interpolated linearly between them. This is numpy's
    default (``numpy.percentile(values, 100 * q)``, method "linear", Hyndman and Fan's type 7)
    and ``statistics.quantiles(method="inclusive")``; ``q = 0.5`` is ``statistics.median``.
    Chosen over a nearest-rank rule so that every benchmark's p50 equals the median the others
    report, and so that numbers can be checked with numpy on the raw samples. So p0 is the
    minimum, p100 the maximum, one value is every quantile of itself, and the p50 of an even
    count is the mean of the two middle values.

    Raises ValueError if ``values`` is empty or ``q`` is outside [0, 1].
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"percentile q must be in [0, 1], not {q!r}")
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    below = math.floor(rank)
    fraction = rank - below
    if fraction == 0.0:
        return ordered[below]
    low, high = ordered[below], ordered[below + 1]
    return low + (high - low) * fraction


# --- Tables ------------------------------------------------------------------------------------


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A plain fixed-width table on stdout, after a blank line and ``title``: the first column
    left-aligned, the others right-aligned. None prints as "-", floats with 2 decimals below 100
    and none from 100 up, ints with thousands separators."""
    cells = [[str(h) for h in header]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}")
    for n, row in enumerate(cells):
        line = "  ".join(
            c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)
        )
        print(line.rstrip())
        if n == 0:
            print("-" * len(line))
    sys.stdout.flush()


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


# --- Timers ------------------------------------------------------------------------------------


def time_calls(calls: Iterable[Callable[[], object]]) -> tuple[float, list[float]]:
    """Run ``calls`` one after another: (total seconds, seconds of each call)."""
    latencies = []
    start = time.perf_counter()
    for call in calls:
        t = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - t)
    return time.perf_counter() - start, latencies


def best_seconds(run: Callable[[], object], repeats: int) -> float:
    """The shortest of ``repeats`` timed calls of ``run``, in seconds."""
    best = math.inf
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


# --- A Ray, a cluster and a directory of their own ---------------------------------------------


@contextlib.contextmanager
def local_ray(**options: Any) -> Iterator[None]:
    """``ray.init(address="local", include_dashboard=False, **options)``, shut down on exit.

    "local" starts a Ray for this process alone: without it, ``ray.init()`` joins the newest
    Ray instance on the machine (another user's ``ray start``, a test's cluster).
    """
    os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
    import ray

    ray.init(address="local", include_dashboard=False, **options)
    try:
        yield
    finally:
        ray.shutdown()


def start_local(
    data_dir: str | os.PathLike[str], container_count: int | None = None, **options: Any
) -> Any:
    """``pr.start_local(data_dir, container_count, **options)`` (``container_count`` None:
    start_local's default) on a Ray of this process's own.

    If Ray is not up yet, start_local starts it with ``ray.init(address=None)``, which joins
    the newest Ray instance on the machine: ``RAY_ADDRESS`` defaults to "local" here, so it
    starts one instead (as the Makefile's ``RAY_ADDRESS=local``). A ``RAY_ADDRESS`` set by the
    caller is kept.
    """
    import pravega_ray as pr

    os.environ.setdefault("RAY_ADDRESS", "local")
    if container_count is not None:
        options["container_count"] = container_count
    return pr.start_local(data_dir, **options)


@contextlib.contextmanager
def local_cluster(
    data_dir: str | os.PathLike[str], container_count: int | None = None, **options: Any
) -> Iterator[Any]:
    """:func:`start_local`, shut down on exit."""
    cluster = start_local(data_dir, container_count, **options)
    try:
        yield cluster
    finally:
        cluster.shutdown()


@contextlib.contextmanager
def work_dir(
    prefix: str, parent: str | os.PathLike[str] | None = None, keep: bool = False
) -> Iterator[Path]:
    """A new temporary directory (in ``parent``, default the system's), removed with all it
    holds on exit unless ``keep``."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


# --- Streams, containers and files -------------------------------------------------------------


def new_stream(cluster: Any, scope: str, segments: int) -> str:
    """A new stream of ``segments`` fixed segments in ``scope``, with a random name."""
    import pravega_ray as pr

    stream = "s" + uuid.uuid4().hex[:8]
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments))
    assert cluster.stream_manager().create_stream(scope, stream, config)
    return stream


def wait_restarted(handle: Any, old_pid: int, deadline: float, poll_s: float) -> None:
    """Wait until the container actor ``handle`` answers ``describe`` from a process other than
    ``old_pid`` (after ``ray.kill(handle, no_restart=False)``), polling every ``poll_s``.

    Raises TimeoutError once ``time.perf_counter()`` passes ``deadline``.
    """
    import ray
    from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

    while time.perf_counter() < deadline:
        try:
            answer = ray.get(handle.describe.remote(), timeout=deadline - time.perf_counter())
            if answer["pid"] != old_pid:
                return
        except (RayActorError, ActorUnavailableError, GetTimeoutError):
            pass
        time.sleep(poll_s)
    raise TimeoutError("the container did not answer from a new process before the deadline")


def drop_page_cache(paths: Sequence[Path]) -> None:
    """Ask the kernel to drop cached pages of ``paths`` (they must be clean: fsynced)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
