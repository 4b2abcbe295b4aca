"""Epochs and key ranges: the rows of a stream's history table and the checks on them.

A stream's segments at any epoch are a *consistent* set (Pravega's controller design,
"Stream Metadata Store"): their routing-key ranges cover [0, 1) without overlap. A scale
replaces some of them by new segments whose ranges cover exactly the replaced ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pravega_ray.contracts.records import SegmentRange
from pravega_ray.errors import InvalidArgumentError, ScaleConflictError
from pravega_ray.naming import stream_segment_name

__all__ = [
    "EpochRecord",
    "RollPlan",
    "Row",
    "ScaleRecord",
    "check_key_ranges",
    "overlaps",
    "to_range",
    "union",
]

Row = tuple[int, float, float]
"""A segment in a history row: ``(id, key_low, key_high)``."""


@dataclass(frozen=True, slots=True)
class EpochRecord:
    """One row of the history table."""

    epoch: int
    created_ms: int
    segments: tuple[Row, ...]
    sealed: tuple[int, ...]
    partial: bool

    def ids(self) -> set[int]:
        return {sid for sid, _, _ in self.segments}

    def to_dict(self) -> dict[str, Any]:
        return {
            "created_ms": self.created_ms,
            "segments": [list(r) for r in self.segments],
            "sealed": list(self.sealed),
            "partial": self.partial,
        }


@dataclass(frozen=True, slots=True)
class RollPlan:
    """What a rolling commit merges where (``stream_workflows.py``, "Rolling
    transactions"): the COMMITTING transactions of old epoch ``txn_epoch``, in commit order,
    and ``duplicates``, one new segment per segment of that epoch (same key range, same
    position in its row; each on the container of the segment it duplicates, where the
    transaction segments are), which make the epoch before the scale record's."""

    txn_epoch: int
    txns: tuple[str, ...]  # ids, hex
    duplicates: tuple[Row, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "txn_epoch": self.txn_epoch,
            "txns": list(self.txns),
            "duplicates": [list(r) for r in self.duplicates],
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> RollPlan:
        return cls(
            int(value["txn_epoch"]),
            tuple(str(t) for t in value["txns"]),
            tuple((int(s), float(lo), float(hi)) for s, lo, hi in value["duplicates"]),
        )


@dataclass(frozen=True, slots=True)
class ScaleRecord:
    """The temporary scale property: what one scale seals and creates. A rolling commit
    stores one too (``rolling``): it seals every segment of the current epoch and creates
    ``segments`` (the same ranges) two epochs on, after the duplicates' epoch."""

    epoch: int
    sealed: tuple[int, ...]
    segments: tuple[Row, ...]
    created_ms: int
    rolling: RollPlan | None = None


def overlaps(a: Row, b: Row) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def union(ranges: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted ranges with adjacent ones joined; ScaleConflictError if any overlap."""
    merged: list[tuple[float, float]] = []
    for lo, hi in sorted(ranges):
        if merged and lo < merged[-1][1]:
            raise ScaleConflictError(f"key ranges overlap at {lo}")
        if merged and lo == merged[-1][1]:
            merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


def check_key_ranges(ranges: object) -> list[tuple[float, float]]:
    """``ranges`` as a list of ``(low, high)`` floats with 0 <= low < high <= 1.

    Raises InvalidArgumentError for anything else (NaN, bools, wrong shapes).
    """
    if not isinstance(ranges, (list, tuple)) or not ranges:
        raise InvalidArgumentError("new_key_ranges must be a non-empty list of (low, high)")
    out = []
    for r in ranges:
        if not isinstance(r, (list, tuple)) or len(r) != 2:
            raise InvalidArgumentError(f"a key range must be a (low, high) pair, got {r!r}")
        for v in r:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise InvalidArgumentError(f"a key range bound must be a finite number, got {v!r}")
        lo, hi = float(r[0]), float(r[1])
        if not 0.0 <= lo < hi <= 1.0:
            raise InvalidArgumentError(f"a key range needs 0 <= low < high <= 1, got {r!r}")
        out.append((lo, hi))
    return out


def to_range(scope: str, stream: str, row: Row) -> SegmentRange:
    sid, lo, hi = row
    return SegmentRange(scope, stream, sid, stream_segment_name(scope, stream, sid), lo, hi)
