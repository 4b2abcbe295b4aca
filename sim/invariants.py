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
  (damaged data, a missing chunk);
* **recovery** (checked by the world at each restart): a container recovers from what its
  disks hold, a torn log tail included (it was never acknowledged: not corruption);
* **read again** (at the end): each segment read again whole (``read_range``, mostly from
  Tier-2 by then: the read cache is tiny) holds exactly the events the reader handed out,
  at the same offsets; a missing or damaged chunk fails it even if the reader had read
  those bytes before they were lost;
* **time index** (at the end): asked for the offset at a time, each segment answers an
  event boundary (an offset where the reader found an event, or the segment's length),
  and a later time never answers an earlier offset, whatever the wall clock did (a clock
  that went back indexes nothing until it passes its newest slot again).

A torn record that recovery wrongly replayed would show as a failed recovery (its bytes
do not decode) or as an event read that was never written or read twice.

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
        self.events: dict[str, list[tuple[int, bytes]]] = {}  # segment -> (offset, event) read

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
        self.events.setdefault(segment, []).append((offset, payload))
        return None

    def keep(self, segment: str, offset: int, payload: bytes) -> None:
        """Keep an event another checker checks (a transaction's: ``sim/transactions.py``)
        for the final re-read of its segment."""
        self.events.setdefault(segment, []).append((offset, payload))

    def on_reader_error(self, segment: str, error: BaseException) -> str:
        return f"reader of {segment} failed: {error!r}"

    def final(self) -> str | None:
        """Every acknowledged event was read (call once everything settled)."""
        lost = sorted(self.acked - self.read)
        if lost:
            shown = ", ".join(f"{k}:{s}" for k, s in lost[:5])
            return f"{len(lost)} acknowledged events never read, e.g. {shown}"
        return None

    def check_reread(
        self, segment: str, events: list[tuple[int, bytes]], leftover: int
    ) -> str | None:
        """``events``, framed from ``segment``'s bytes read again whole (``leftover``
        bytes after the last whole frame), are those read, and nothing is left over."""
        if leftover:
            return f"{segment} read again ends in {leftover} bytes of an incomplete event"
        read = self.events.get(segment, [])
        if events == read:
            return None
        for (offset, payload), (read_offset, read_payload) in zip(events, read, strict=False):
            if (offset, payload) != (read_offset, read_payload):
                return (
                    f"{segment} read again holds {payload[:40]!r} at {offset}, where "
                    f"{read_payload[:40]!r} was read at {read_offset}"
                )
        return f"{segment} read again holds {len(events)} events, {len(read)} were read"

    def check_time_index(
        self, segment: str, times: list[int], offsets: list[int], length: int
    ) -> str | None:
        """The time-index invariant of ``segment``, once it was read to its ``length``:
        ``offsets[i]`` is what the index answered for wall time ``times[i]`` (ascending)."""
        boundaries = {offset for offset, _ in self.events.get(segment, [])}
        previous, previous_ms = 0, 0
        for time_ms, offset in zip(times, offsets, strict=True):
            if offset != length and offset != 0 and offset not in boundaries:
                return f"time index of {segment} answers {offset} at {time_ms} ms: not an event"
            if offset < previous:
                return (
                    f"time index of {segment} answers offset {offset} at {time_ms} ms, but "
                    f"offset {previous} at {previous_ms} ms, earlier"
                )
            previous, previous_ms = offset, time_ms
        return None

    def summary(self) -> dict[str, int]:
        return {
            "written": sum(self.written.values()),
            "acked": len(self.acked),
            "failed": len(self.failed),
            "read": len(self.read),
        }
