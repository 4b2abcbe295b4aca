"""Event time under chaos (issue 27): writers that note the wall clock, and a reader that
checks its time windows against the events it reads.

:class:`EventTimeLoad` runs ``writers`` writers on a stream of its own (``chaos-time/timed``,
3 segments), each noting its wall-clock time every few tens of milliseconds and writing events
carrying a time at or after the last time it noted (honest writers), and one reader of a group
of its own that asks ``get_current_time_window`` after every event. Checked as it reads
(``problems``): a window's lower bound never moves backwards for a reader, and no event read
after a window is older than the window's lower bound. Writers and the reader are replaced when
a fault breaks them (a writer whose events failed, a reader the group dropped); the checks
are per reader object (a new reader starts with no window, as Pravega's).
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from typing import Any

import pravega_ray as pr
from chaos.load import Part

logger = logging.getLogger(__name__)

TIME_SCOPE = "chaos-time"
TIME_STREAM = "timed"
TIME_GROUP = "timed"


class EventTimeLoad(Part):
    """See the module docstring."""

    name = "event time"

    def __init__(self, cluster: Any, seed: int, *, writers: int = 2) -> None:
        super().__init__(cluster, seed)
        self.problems: list[str] = []
        self.errors: dict[str, int] = defaultdict(int)
        self.events_read = 0
        self.windows_moved = 0
        self.highest_lower: int | None = None
        mgr = cluster.stream_manager()
        mgr.create_scope(TIME_SCOPE)
        mgr.create_stream(
            TIME_SCOPE, TIME_STREAM, pr.StreamConfiguration(pr.ScalingPolicy.fixed(3))
        )
        config = pr.ReaderGroupConfig.for_streams(f"{TIME_SCOPE}/{TIME_STREAM}")
        cluster.create_reader_group(TIME_SCOPE, TIME_GROUP, config)
        for n in range(writers):
            self.spawn(self._write, n)
        self.spawn(self._read)

    def _write(self, n: int) -> None:
        writer = None
        while not self.stopping.is_set():
            try:
                if writer is None:
                    writer = self.cluster.create_writer(
                        TIME_SCOPE, TIME_STREAM, pr.Utf8Serializer()
                    )
                now = int(time.time() * 1000)
                writer.note_time(now)
                for i in range(5):
                    event = json.dumps({"t": now + i, "w": n})
                    writer.write_event(event, routing_key=f"{n}-{i}")
            except Exception as e:  # a fault broke this writer: a new one (new id)
                self.errors[f"write {type(e).__name__}"] += 1
                if writer is not None:
                    with _quiet():
                        writer.close()
                writer = None
            self.stopping.wait(self.rng.uniform(0.02, 0.08))
        if writer is not None:
            with _quiet():
                writer.close()

    def _read(self) -> None:
        generation = 0
        while not self.stopping.is_set():
            reader_id = f"t{generation}"
            generation += 1
            try:
                reader = self.cluster.create_reader(
                    reader_id, TIME_SCOPE, TIME_GROUP, pr.Utf8Serializer()
                )
            except Exception as e:
                self.errors[f"join {type(e).__name__}"] += 1
                self.stopping.wait(1.0)
                continue
            try:
                self._check(reader)
            except Exception as e:  # dropped by the group, say: a new reader
                self.errors[f"read {type(e).__name__}"] += 1
            finally:
                with _quiet():
                    reader.close()
                with _quiet():
                    self.cluster.reader_group(TIME_SCOPE, TIME_GROUP).reader_offline(
                        reader_id, None
                    )

    def _check(self, reader: Any) -> None:
        lower: int | None = None
        while not self.stopping.is_set():
            try:
                ev = reader.read_next_event(1.0)
            except pr.RetriableError as e:
                self.errors[f"read {type(e).__name__}"] += 1
                continue
            if ev is not None and ev.event is not None:
                self.events_read += 1
                t = int(json.loads(ev.event)["t"])
                if lower is not None and t < lower:
                    self.problems.append(
                        f"event time: read an event of time {t} after the window's lower "
                        f"bound reached {lower} ({ev.segment}@{ev.offset})"
                    )
            window = reader.get_current_time_window(f"{TIME_SCOPE}/{TIME_STREAM}")
            if window.lower_ms is None:
                continue
            if lower is not None and window.lower_ms < lower:
                self.problems.append(
                    f"event time: the window's lower bound moved back from {lower} to "
                    f"{window.lower_ms}"
                )
            if lower is None or window.lower_ms > lower:
                self.windows_moved += 1
                lower = window.lower_ms
                if self.highest_lower is None or lower > self.highest_lower:
                    self.highest_lower = lower

    def summary(self) -> str:
        lag = (
            "none"
            if self.highest_lower is None
            else f"{int(time.time() * 1000) - self.highest_lower} ms behind the wall clock"
        )
        return (
            f"event time: {self.events_read:,} events read, window moved {self.windows_moved} "
            f"times, last lower bound {lag}; errors {dict(self.errors)}"
        )


class _quiet:
    """Suppress and log any exception (cleanup after a fault)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: Any, tb: Any) -> bool:
        if error is not None:
            logger.info("event time: cleanup failed: %r", error)
        return True
