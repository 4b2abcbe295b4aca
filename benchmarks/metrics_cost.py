"""What one metrics recording costs: the in-memory sink against the Ray sink actors use.

Starts a small local Ray (the Ray sink needs one), records ``--count`` times each kind of
metric through the facade (pravega_ray/metrics.py) into each sink, and prints the best of
``--rounds`` per recording, in microseconds. The append path records about six times per group
commit and once per append operation (docs/metrics.md), so multiply by those, not by events.

Run: ``.venv/bin/python -m benchmarks.metrics_cost``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from benchmarks.common import best_seconds, local_ray
from pravega_ray import metrics


def best_of(rounds: int, count: int, record: Callable[[], None]) -> float:
    """Microseconds per call of ``record``: the best of ``rounds`` rounds of ``count`` calls."""
    record()  # the first call binds the metric to the sink

    def one_round() -> None:
        for _ in range(count):
            record()

    return best_seconds(one_round, rounds) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000, help="recordings per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (the best is printed)")
    args = parser.parse_args()
    with local_ray(num_cpus=1, logging_level="ERROR"):
        measure(args)


def measure(args: argparse.Namespace) -> None:
    from pravega_ray_actors.ray_metrics import RaySink

    container = {"container": "0"}
    stream = {"container": "0", "scope": "sc", "stream": "st"}
    cases: list[tuple[str, Callable[[], None]]] = [
        ("histogram.observe (1 tag)", lambda: metrics.APPEND_LATENCY.observe(0.001, container)),
        ("counter.inc (3 tags)", lambda: metrics.APPENDED_EVENTS.inc(10, stream)),
        ("gauge.set (1 tag)", lambda: metrics.LOG_BYTES.set(1000, container)),
    ]
    print(f"{'recording':28} {'in-memory us':>13} {'Ray us':>8}")
    for label, record in cases:
        costs = []
        for sink in (metrics.InMemorySink(), RaySink()):
            with metrics.using_sink(sink):
                costs.append(best_of(args.rounds, args.count, record))
        print(f"{label:28} {costs[0]:13.2f} {costs[1]:8.2f}")


if __name__ == "__main__":
    main()
