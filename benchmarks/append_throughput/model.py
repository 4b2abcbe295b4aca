"""What every part of the append benchmark shares: the run-wide constants and the results
(throughput and latency measurements, table rows, the report they are collected in)."""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmarks.common import percentile

REFERENCE_EVENT_BYTES = 100
"""``--events`` counts events of this size; larger events get as many payload bytes per run."""

WARM_UP_EVENTS = 10_000
"""Events (of 100 bytes; scaled by bytes for larger ones) written before a stream is measured."""

LATENCY_RATE_EVENTS_PER_S = 10_000
"""Default rate of the paced latency runs (``--latency-rate``)."""

COMPUTING_CALL = "write_event, caller computing"
"""The call column of the paced run whose caller computes between writes (1 segment)."""

COMPUTING_SHORT_SWITCH_CALL = "computing, 1 ms switch"
"""The same, with the thread switch interval at 1 ms (``WriterConfig.switch_interval_s``)."""

DISTINCT_PAYLOADS = 256
"""Payloads are cycled from a pool of this many random ones (a power of two)."""

ACK_WAIT_S = 180.0
"""Longest wait for outstanding acks (a flush, the last callbacks) before a phase fails."""

MB = 1_000_000
MIB = 1024 * 1024
GIB = 1024 * MIB


@dataclass(frozen=True)
class Throughput:
    """A bulk write: ``events`` of ``payload_bytes`` each, all acknowledged in ``elapsed_s``."""

    events: int
    elapsed_s: float
    payload_bytes: int

    @property
    def events_per_s(self) -> float:
        return self.events / self.elapsed_s

    @property
    def mb_per_s(self) -> float:
        return self.events * self.payload_bytes / self.elapsed_s / MB


@dataclass(frozen=True)
class Latency:
    """Ack latencies (seconds, one per event) of a paced run.

    ``achieved_events_per_s`` is the rate events were handed over at; ``overloaded`` says the
    system did not keep up (see KEEP_UP_FRACTION and OVERLOAD_BACKLOG_S), so the latencies are
    those of a growing queue.
    """

    latencies_s: list[float]
    achieved_events_per_s: float
    overloaded: bool = False
    failed: int = 0

    @property
    def p50_ms(self) -> float:
        return percentile(self.latencies_s, 0.50) * 1000.0

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies_s, 0.99) * 1000.0

    @property
    def max_ms(self) -> float:
        return max(self.latencies_s) * 1000.0

    def describe(self) -> str:
        """One progress-line summary."""
        return (
            f"achieved {self.achieved_events_per_s:,.0f} events/s, p50 {self.p50_ms:.2f} ms, "
            f"p99 {self.p99_ms:.2f} ms, max {self.max_ms:.1f} ms"
            + (", OVERLOADED" if self.overloaded else "")
            + (f", failed {self.failed}" if self.failed else "")
        )


@dataclass(frozen=True)
class Row:
    """One line of a result table; ``None`` prints as "-" (not applicable or not measured)."""

    system: str
    call: str = "-"
    events_per_s: float | None = None
    mb_per_s: float | None = None
    ack_p50_ms: float | None = None
    ack_p99_ms: float | None = None
    paced_events_per_s: float | None = None
    overloaded: bool = False
    note: str = ""

    @classmethod
    def of(cls, system: str, call: str, bulk: Throughput | None, paced: Latency | None) -> Row:
        """A row from a throughput and a latency measurement (either may be missing)."""
        return cls(
            system,
            call,
            bulk.events_per_s if bulk else None,
            bulk.mb_per_s if bulk else None,
            paced.p50_ms if paced else None,
            paced.p99_ms if paced else None,
            paced.achieved_events_per_s if paced else None,
            paced.overloaded if paced else False,
        )


@dataclass(frozen=True)
class RecoveryRow:
    """One container restart: what the log held and how long until the container answered."""

    case: str
    written_bytes: int
    tier2_bytes: int
    log_bytes_at_kill: int
    seconds: float


@dataclass(frozen=True)
class CpuRow:
    """Cores used (CPU seconds / wall seconds) by each part of the system during one run."""

    config: str
    driver: float
    containers: float
    ray: float
    s3_server: float
    other: float
    system_total: float


@dataclass
class Report:
    """Everything measured in one run, by event size; printed at the end."""

    rows: dict[int, list[Row]] = field(default_factory=dict)
    recovery: list[RecoveryRow] = field(default_factory=list)
    cpu: list[CpuRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, size: int, row: Row) -> None:
        self.rows.setdefault(size, []).append(row)

    def find(self, size: int, prefix: str, call: str | None = None) -> Row | None:
        """The first row for ``size`` whose system starts with ``prefix`` (and has ``call``)."""
        for row in self.rows.get(size, []):
            if row.system.startswith(prefix) and (call is None or row.call == call):
                return row
        return None
