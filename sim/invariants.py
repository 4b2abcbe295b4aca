"""The invariants of the data path, checked as the simulation runs and at its end.

The chaos checker's (``chaos/checker.py``) for keyed events, on what one run wrote and read:

* **nothing invented**: every event read was written (by the writer, in this run);
* **exactly once**: no event is read twice;
* **order per routing key**: the events of one key are read in the order written (a
  failed event, whose outcome is unknown, may be missing, so order means increasing
  numbers);
* **nothing lost** (at the end, once every container is up and everything settled): every
  acknowledged event was read;
* **no reader error**: a reader never meets an error it would raise to its application
  (damaged data, a missing chunk).

Each check returns None or a one-line description of the broken invariant.
"""

from __future__ import annotations

__all__ = ["Checker"]


class Checker:
    """What was written, acknowledged and read, and the checks on them."""

    def __init__(self) -> None:
        self.written: dict[str, int] = {}  # key -> events written (numbered from 0)
        self.acked: set[tuple[str, int]] = set()
        self.failed: dict[tuple[str, int], str] = {}
        self.read: set[tuple[str, int]] = set()
        self.last_read: dict[str, int] = {}

    def next_seq(self, key: str) -> int:
        """Number the next event of ``key`` and count it written."""
        seq = self.written.get(key, 0)
        self.written[key] = seq + 1
        return seq

    def on_outcome(self, key: str, seq: int, error: BaseException | None) -> None:
        if error is None:
            self.acked.add((key, seq))
        else:
            self.failed[(key, seq)] = type(error).__name__

    def on_read(self, segment: str, offset: int, payload: bytes) -> str | None:
        """Check one event handed out by the reader."""
        where = f"{segment}@{offset}"
        try:
            key, _, number = payload.decode().rpartition(":")
            seq = int(number)
        except (UnicodeDecodeError, ValueError):
            return f"read garbage {payload[:40]!r} at {where}"
        if not key or seq >= self.written.get(key, 0) or seq < 0:
            return f"read {key}:{seq} at {where}, never written"
        if (key, seq) in self.read:
            return f"read {key}:{seq} twice (again at {where})"
        last = self.last_read.get(key, -1)
        if seq < last:
            return f"read {key}:{seq} at {where} after {key}:{last}: out of order"
        self.read.add((key, seq))
        self.last_read[key] = seq
        return None

    def on_reader_error(self, segment: str, error: BaseException) -> str:
        return f"reader of {segment} failed: {error!r}"

    def final(self) -> str | None:
        """Every acknowledged event was read (call once everything settled)."""
        lost = sorted(self.acked - self.read)
        if lost:
            shown = ", ".join(f"{k}:{s}" for k, s in lost[:5])
            return f"{len(lost)} acknowledged events never read, e.g. {shown}"
        return None

    def summary(self) -> dict[str, int]:
        return {
            "written": sum(self.written.values()),
            "acked": len(self.acked),
            "failed": len(self.failed),
            "read": len(self.read),
        }
