"""A node's Tier-1 disk: the project's file-system durable log in a directory of its own,
and the torn writes a power cut leaves in it; or, in a seed without torn writes, the
project's in-memory log.

In a seed with the ``torn_tail`` fault, each simulated container logs to a real
:class:`~pravega_ray.logs.filesystem.FileSystemDurableLog` in a directory under the run's
temporary root (on ``/dev/shm`` when there is one, so an ``fdatasync`` costs next to
nothing). That log is the one a ``file://`` Tier-1 runs in production, so recovery from
a torn tail is the project's own code, not a model of it. A seed without the fault logs to
the project's :class:`~pravega_ray.logs.memory.InMemoryDurableLog` (an append there is
atomic: it lands whole or not at all), which recovers several times faster: a crash loop
leaves one file per incarnation until the log is truncated, and recovery reads them all.
The two behave alike otherwise (same sequence numbers, epochs and truncation), so a run
that tears nothing is the same run on either.

A *torn write* (:meth:`LogDisk.write_torn`) is what a crash in the middle of an append
leaves on the disk: the append's frame is written (the log's own ``append``, as the
process did before it died) and then cut back to a seeded part of itself, in one of three
shapes a real file shows after a power cut:

* ``cut``: the file ends inside the frame (the size was never updated past that point);
* ``zeros``: the file has the frame's full size, but the bytes past the cut are zeros (the
  size reached the disk, the data did not);
* ``garbage``: the bytes past the cut are whatever the disk held (seeded random bytes).

Whatever the shape, the frame is not whole (its last byte at least is missing or, but
for a garbage byte equal by chance to the one it replaces, wrong), and it was never
acknowledged: recovery must cut it (not report corruption), and nothing of it may be
replayed. The records before it are never touched.

Everything here is deterministic: file names come from sequence numbers and epochs, the
log lists them sorted, and every cut and byte is drawn from the seed's generator.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pravega_ray.errors import IllegalStateError
from pravega_ray.logs.filesystem import FileSystemDurableLog
from pravega_ray.logs.memory import InMemoryDurableLog, InMemoryLogStore

__all__ = [
    "LOG_FILE_BYTES_MAX",
    "TORN_SHAPES",
    "LogDisk",
    "make_root",
    "remove_root",
    "sanitize",
]

LOG_FILE_BYTES_MAX = 2048
"""A log file is rotated past this size (small: rotation and truncation at work)."""

TORN_SHAPES = ("cut", "zeros", "garbage")
"""The shapes of a torn write (module docstring)."""

_SHM = Path("/dev/shm")


def make_root() -> Path:
    """A new temporary directory for one run's disks (on ``/dev/shm`` if it is writable)."""
    where = _SHM if _SHM.is_dir() and os.access(_SHM, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="pravega-sim-", dir=where))


def remove_root(root: Path) -> None:
    """Remove a run's disks (nothing if already gone)."""
    shutil.rmtree(root, ignore_errors=True)


class LogDisk:
    """Where one container's durable log lives; it outlives the container. ``directory``:
    the file-system log's directory, or None for an in-memory log (no torn writes)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._store = InMemoryLogStore()

    def open_log(self) -> FileSystemDurableLog | InMemoryDurableLog:
        """A new, uninitialized log on this disk (a restarted container's)."""
        if self.directory is None:
            return InMemoryDurableLog(self._store)
        return FileSystemDurableLog(self.directory, file_bytes_max=LOG_FILE_BYTES_MAX)

    def _newest(self) -> tuple[Path, int] | None:
        assert self.directory is not None
        files = sorted(self.directory.glob("log-*.dat"))
        return (files[-1], files[-1].stat().st_size) if files else None

    def write_torn(
        self, append: Callable[..., Any], args: tuple[Any, ...], rng: random.Random
    ) -> str | None:
        """Run ``append(*args)`` (a log's ``append``) and tear the frame it wrote.

        Returns how it was torn (for the trace), or None if the append wrote nothing
        (it failed before writing: nothing to tear). Whatever ``append`` returns or raises
        is dropped: the process that called it is dead or about to fail the call.
        IllegalStateError for an in-memory disk (its appends cannot tear).
        """
        if self.directory is None:
            raise IllegalStateError("an in-memory log cannot be torn")
        before = self._newest()
        try:
            append(*args)
        except Exception:
            return None
        after = self._newest()
        if after is None:
            return None
        path, end = after
        start = before[1] if before is not None and before[0] == path else 0
        if end <= start:
            return None
        size = end - start
        keep = rng.randrange(size)  # never the whole frame
        shape = TORN_SHAPES[rng.randrange(len(TORN_SHAPES))]
        with open(path, "r+b") as f:
            if shape == "cut":
                f.truncate(start + keep)
            else:
                f.seek(start + keep)
                rest = size - keep
                f.write(bytes(rest) if shape == "zeros" else rng.randbytes(rest))
        return f"torn, {keep} of {size} bytes, {shape}"


def sanitize(text: str, root: Path | None) -> str:
    """``text`` with the run's temporary root ``root`` (if any) replaced by ``tier1``: a
    path in an error message would differ between two runs of a seed."""
    return text if root is None else text.replace(str(root), "tier1")
