"""Exact order of stream cuts and the subscriber lower bound (pure: no I/O).

A cut is ``{segment id: offset}``; ``ranges`` gives each segment's key range
``(low, high)``. Two segments that overlap in key range never coexist in an epoch, so
the one created in the earlier epoch (``id >> 32``) was sealed before the later one was
created: it is wholly *before* it. That makes comparison exact, point by point of the
key space, where :class:`~pravega_ray.stream_cut.StreamCut`'s own order only uses ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from pravega_ray.naming import segment_epoch

__all__ = ["Cut", "Ranges", "covers_key_space", "cut_le", "lower_bound"]

Cut = Mapping[int, int]
Ranges = Mapping[int, tuple[float, float]]


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def cut_le(a: Cut, b: Cut, ranges: Ranges) -> bool:
    """Whether ``a`` is nowhere ahead of ``b``: at every point of the key space, ``a``'s
    position is at or before ``b``'s (same segment at an offset no greater, or a segment
    wholly before ``b``'s). KeyError if ``ranges`` lacks a segment of either cut."""
    for sa, oa in a.items():
        for sb, ob in b.items():
            if sa == sb:
                if oa > ob:
                    return False
            elif _overlap(ranges[sa], ranges[sb]) and segment_epoch(sa) > segment_epoch(sb):
                return False
    return True


def covers_key_space(segments: Iterable[int], ranges: Ranges) -> bool:
    """Whether the segments' key ranges cover [0, 1) exactly once."""
    spans = sorted(ranges[s] for s in segments)
    at = 0.0
    for low, high in spans:
        if low != at:
            return False
        at = high
    return at == 1.0


def lower_bound(
    cuts: Sequence[Cut], ranges: Ranges, epoch_segments: Callable[[int], Sequence[int]]
) -> dict[int, int]:
    """The latest cut nowhere ahead of any of ``cuts`` (no subscriber loses unread data):
    at each point of the key space, the earliest of their positions.

    The union of the cuts' positions (the lowest offset per segment), without every
    segment that overlaps one of an earlier epoch (it comes after that one). If what is
    left does not cover the key space once (cuts whose segments interleave across
    epochs), the bound is the segments of the earliest epoch ``m`` among the cuts'
    segments (``epoch_segments(m)``), each at its lowest offset among the cuts or 0:
    coarser, still nowhere ahead of any cut. ValueError if ``cuts`` is empty.
    """
    if not cuts:
        raise ValueError("the lower bound of no cuts")
    merged: dict[int, int] = {}
    for cut in cuts:
        for sid, offset in cut.items():
            merged[sid] = min(offset, merged.get(sid, offset))
    kept = {
        sid: offset
        for sid, offset in merged.items()
        if not any(
            _overlap(ranges[sid], ranges[other]) and segment_epoch(other) < segment_epoch(sid)
            for other in merged
        )
    }
    if covers_key_space(kept, ranges):
        return kept
    earliest = min(segment_epoch(s) for s in merged)
    return {sid: merged.get(sid, 0) for sid in epoch_segments(earliest)}
