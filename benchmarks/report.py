"""What the benchmarks share for printing: a plain fixed-width table and a percentile."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by rank (no interpolation)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A plain fixed-width table: first column left-aligned, the others right-aligned."""
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
