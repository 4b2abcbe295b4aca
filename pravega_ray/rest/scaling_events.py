"""getScalingEvents: a stream's epochs as Pravega's ``ScaleMetadata``.

Each epoch of the history table is one event: ``{epoch, timestamp, segmentList, splits,
merges}``, ``segmentList`` the epoch's segments as ``{number, segmentId, creationEpoch,
startTime, keyStart, keyEnd}`` in key order, ``splits`` the segments of the epoch before
that were split (each replaced by several) and ``merges`` the segments of this epoch that
merge several of the one before (Java's controller counts them so).

Times. Each epoch's time is when its scale completed (epoch 0: the stream's creation;
``ControllerService.get_epoch``); :class:`Epoch` allows ``None`` for a time not known (an
event then says ``"timestamp": null``). Selecting the events of ``[from_ms, to_ms]``
follows Java (those created in the window, preceded by the last one created before it,
the layout current at ``from_ms``) for the events whose time is known, and keeps every
event whose time is not (it may fall in the window).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pravega_ray.contracts.records import SegmentRange

__all__ = ["EPOCHS_MAX", "Epoch", "scale_metadata", "select"]

EPOCHS_MAX = 1000
"""Most epochs one getScalingEvents reads (the newest): each is a controller call."""


@dataclass(frozen=True, slots=True)
class Epoch:
    """One row of a stream's history table: its number, creation time (ms since 1970;
    None when the controller does not tell it) and segments."""

    epoch: int
    created_ms: int | None
    segments: tuple[SegmentRange, ...]


def _overlap(a: SegmentRange, b: SegmentRange) -> bool:
    return a.key_low < b.key_high and b.key_low < a.key_high


def _splits_merges(
    before: Sequence[SegmentRange], after: Sequence[SegmentRange]
) -> tuple[int, int]:
    """(segments of ``before`` each replaced by several of ``after``, segments of ``after``
    each replacing several of ``before``): only the segments a scale changed count."""
    kept = {s.segment_id for s in before} & {s.segment_id for s in after}
    sealed = [s for s in before if s.segment_id not in kept]
    created = [s for s in after if s.segment_id not in kept]
    splits = sum(1 for s in sealed if sum(_overlap(s, n) for n in created) > 1)
    merges = sum(1 for n in created if sum(_overlap(n, s) for s in sealed) > 1)
    return splits, merges


def scale_metadata(
    epochs: Sequence[Epoch], times: Mapping[int, int] | None = None
) -> list[dict[str, Any]]:
    """The ``ScaleMetadata`` of each of ``epochs`` (consecutive, oldest first). A segment's
    ``startTime`` is its creation epoch's time, from ``epochs`` or ``times`` (epoch -> ms),
    else None. The first event counts no splits or merges (nothing before it was read)."""
    created_at: dict[int, int | None] = dict(times or {})
    created_at.update((e.epoch, e.created_ms) for e in epochs if e.created_ms is not None)
    out: list[dict[str, Any]] = []
    previous: Epoch | None = None
    for epoch in epochs:
        splits, merges = (
            (0, 0) if previous is None else _splits_merges(previous.segments, epoch.segments)
        )
        segments = [
            {
                "number": s.segment_id & 0xFFFFFFFF,
                "segmentId": s.segment_id,
                "creationEpoch": s.segment_id >> 32,
                "startTime": created_at.get(s.segment_id >> 32),
                "keyStart": s.key_low,
                "keyEnd": s.key_high,
            }
            for s in sorted(epoch.segments, key=lambda s: (s.key_low, s.segment_id))
        ]
        out.append(
            {
                "epoch": epoch.epoch,
                "timestamp": epoch.created_ms,
                "segmentList": segments,
                "splits": splits,
                "merges": merges,
            }
        )
        previous = epoch
    return out


def select(events: Sequence[dict[str, Any]], from_ms: int, to_ms: int) -> list[dict[str, Any]]:
    """The events of ``[from_ms, to_ms]`` in epoch order (module docstring): those whose
    ``timestamp`` is in it or unknown (None), and the last one created before ``from_ms``,
    if any."""
    reference: dict[str, Any] | None = None
    chosen: list[dict[str, Any]] = []
    for event in events:
        timestamp = event["timestamp"]
        if timestamp is None or from_ms <= timestamp <= to_ms:
            chosen.append(event)
        elif timestamp < from_ms and (reference is None or reference["timestamp"] <= timestamp):
            reference = event
    if reference is not None:
        chosen.append(reference)
    return sorted(chosen, key=lambda event: int(event["epoch"]))
