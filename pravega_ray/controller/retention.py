"""The retention algorithm: which retention-set cut to truncate a stream at (Pravega's
retention design; docs/design.md "Retention").

Pure: no I/O, no clock; ``controller/retention_service.py`` reads the records, calls
:func:`choose_truncation` and requests the truncation.

**Records.** The *retention set* is the stream's list of :class:`RetentionRecord`, oldest
first: a tail cut taken by each retention cycle with its recording time (ms) and its
recording size (bytes from the stream's very beginning to the cut: the lengths of all
segments wholly before it plus its offsets). The *head* is where the stream is truncated
now (a :class:`RetentionRecord` too; the empty cut with size 0 before any truncation).

**Amount kept.** Truncating at a record ``r`` keeps ``tail.size - r.size`` bytes (SIZE
policy) or data ``now - r.time_ms`` old (TIME policy): ``amount(r)``. The stream holds
``amount(head)``. ``min`` and ``max`` are the policy's limits (``max`` 0: none).

**Size and time policies (Pravega's four cases).** Only records strictly ahead of the
head are candidates, and of those only ones keeping at least ``min`` (*eligible*):

1. ``amount(head) <= min``: nothing (``BELOW_MIN``).
2. no ``max``: the eligible record closest to ``min``, keeping the least (``ABOVE_MIN``).
3. ``amount(head) > max``: the eligible record closest to but not above ``max``, keeping
   the most (``ABOVE_MAX``); if no record lies between the limits (cuts too coarse), the
   one closest to ``min`` (the least kept that still honours ``min``).
4. ``min < amount(head) <= max``: the eligible record closest to ``min`` (``BETWEEN``).

**Consumption (Pravega's five cases).** With acknowledgement cuts from subscribers, their
lower bound ``lb`` (``cut_order.lower_bound``: no subscriber loses unread data) decides,
within the policy's limits. ``min_cut`` is the record case 2/4 would pick, ``max_cut`` the
one case 3 would pick; "overlap" means neither cut is behind the other everywhere:

i. ``min <= amount(lb) <= max``: truncate at ``lb`` (``CBR_WITHIN``).
ii. ``amount(lb) < min`` and ``min_cut`` is behind ``lb``: ``min_cut`` (``CBR_BELOW_MIN``).
iii. ``amount(lb) > max`` and ``lb`` is behind ``max_cut``: ``max_cut`` (``CBR_ABOVE_MAX``).
   The max limit wins over unread data here, as in Pravega: a subscriber that stopped
   reading does not let the stream grow past ``max``.
iv. ``amount(lb) < min``, ``lb`` overlapping ``min_cut``: the newest eligible record behind
   ``lb`` (the first non-overlapping one before ``lb`` from the tail) (``CBR_OVERLAP_MIN``).
v. ``amount(lb) > max``, ``lb`` overlapping ``max_cut``: the oldest eligible record ahead of
   ``lb`` (the first non-overlapping one after ``lb`` from the head), else ``max_cut``
   (``CBR_OVERLAP_MAX``); again max wins over unread data.

A stream without a retention policy is never truncated by retention, subscribers or not
(as in Pravega: consumption-based retention needs a policy). Subscribers that have not yet
published a cut are not counted (as in Pravega: without any acknowledgement cut, the size or
time policy alone decides).
"""

from __future__ import annotations

import enum
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pravega_ray.contracts.cut_order import Cut, Ranges, cut_le
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.stream_configuration import RetentionPolicy, RetentionType

__all__ = [
    "Case",
    "Choice",
    "RetentionRecord",
    "bound",
    "choose_truncation",
    "encoded_bytes",
    "purge",
]


@dataclass(frozen=True, slots=True)
class RetentionRecord:
    """A cut of the stream with when it was taken and its size from the stream's beginning."""

    time_ms: int
    size: int
    cut: Mapping[int, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "time_ms": self.time_ms,
            "size": self.size,
            "cut": {str(k): v for k, v in self.cut.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetentionRecord:
        """Parse a stored record; ValueError/KeyError/TypeError if it is malformed."""
        cut = {int(k): int(v) for k, v in data["cut"].items()}
        return cls(int(data["time_ms"]), int(data["size"]), cut)


class Case(enum.Enum):
    """Which rule chose (or declined) the truncation."""

    NOTHING = "nothing ahead of the head to truncate at"
    BELOW_MIN = "below min"
    ABOVE_MIN = "above min, no max"
    ABOVE_MAX = "above max"
    BETWEEN = "between min and max"
    CBR_WITHIN = "subscriber lower bound within the limits"
    CBR_BELOW_MIN = "subscriber lower bound below min"
    CBR_ABOVE_MAX = "subscriber lower bound above max"
    CBR_OVERLAP_MIN = "subscriber lower bound overlaps min"
    CBR_OVERLAP_MAX = "subscriber lower bound overlaps max"


@dataclass(frozen=True, slots=True)
class Choice:
    """The truncation chosen: ``cut`` (None: do not truncate), its ``size`` and ``time_ms``
    (for the head record), and the ``case`` that decided."""

    case: Case
    cut: Mapping[int, int] | None = None
    size: int = 0
    time_ms: int = 0


def choose_truncation(
    policy: RetentionPolicy | None,
    records: Sequence[RetentionRecord],
    head: RetentionRecord,
    now_ms: int,
    ranges: Ranges,
    lower: RetentionRecord | None = None,
) -> Choice:
    """The truncation the rules choose (module docstring).

    ``records`` is the retention set, oldest first, its last one the tail; ``head`` where
    the stream is truncated now; ``lower`` the subscribers' lower bound (its ``size`` from
    the stream's beginning; its ``time_ms`` is ignored and estimated from the records);
    ``ranges`` the key range of every segment these cuts name. InvalidArgumentError if
    ``records`` is empty or not in time order.
    """
    if not records:
        raise InvalidArgumentError("the retention set is empty: add the tail cut first")
    if any(a.time_ms > b.time_ms or a.size > b.size for a, b in itertools.pairwise(records)):
        raise InvalidArgumentError("retention records must be in time and size order")
    if policy is None:
        return Choice(Case.NOTHING)
    tail = records[-1]

    def amount(r: RetentionRecord) -> int:
        return (
            tail.size - r.size
            if policy.retention_type is RetentionType.SIZE
            else now_ms - r.time_ms
        )

    def ahead_of_head(cut: Cut) -> bool:
        return dict(cut) != dict(head.cut) and cut_le(head.cut, cut, ranges)

    low, high = policy.min_limit, policy.max_limit
    current = amount(head)
    eligible = [r for r in records if ahead_of_head(r.cut) and amount(r) >= low]
    min_cut = min(eligible, key=amount, default=None)
    inside = [r for r in eligible if amount(r) <= high]
    max_cut = max(inside, key=amount, default=min_cut) if high else None
    if lower is None:
        if current <= low:
            return Choice(Case.BELOW_MIN)
        if high and current > high:
            return _pick(Case.ABOVE_MAX, max_cut)
        return _pick(Case.BETWEEN if high else Case.ABOVE_MIN, min_cut)
    lb = lower.cut
    behind_lb = [r for r in records if cut_le(r.cut, lb, ranges)]
    lb_time = max((r.time_ms for r in behind_lb), default=head.time_ms)
    lb_record = RetentionRecord(lb_time, lower.size, lb)
    lb_amount = amount(lb_record)
    if high and lb_amount > high:
        if max_cut is None:
            return Choice(Case.NOTHING)
        if cut_le(lb, max_cut.cut, ranges):
            return _pick(Case.CBR_ABOVE_MAX, max_cut)
        after = [r for r in eligible if cut_le(lb, r.cut, ranges)]
        return _pick(Case.CBR_OVERLAP_MAX, max(after, key=amount, default=max_cut))
    if lb_amount < low:
        if min_cut is None:
            return Choice(Case.CBR_BELOW_MIN)
        if cut_le(min_cut.cut, lb, ranges):
            return _pick(Case.CBR_BELOW_MIN, min_cut)
        before = [r for r in eligible if cut_le(r.cut, lb, ranges)]
        return _pick(Case.CBR_OVERLAP_MIN, min(before, key=amount, default=None))
    if not ahead_of_head(lb):
        return Choice(Case.CBR_WITHIN)
    return Choice(Case.CBR_WITHIN, dict(lb), lower.size, lb_time)


def _pick(case: Case, record: RetentionRecord | None) -> Choice:
    if record is None:
        return Choice(case)
    return Choice(case, dict(record.cut), record.size, record.time_ms)


def purge(records: Sequence[RetentionRecord], cut: Cut, ranges: Ranges) -> list[RetentionRecord]:
    """The records left once the stream is truncated at ``cut``: those not at or behind it."""
    return [r for r in records if not cut_le(r.cut, cut, ranges)]


def encoded_bytes(record: RetentionRecord) -> int:
    """The bytes ``record`` takes in a stored retention set (its dict as compact JSON, and a
    separator): what :func:`bound` counts."""
    return len(json.dumps(record.to_dict(), separators=(",", ":"))) + 1


def bound(
    records: Sequence[RetentionRecord], most: int, bytes_max: int | None = None
) -> list[RetentionRecord]:
    """At most ``most`` (>= 2) records, and (if ``bytes_max`` is given) at most ``bytes_max``
    bytes of them encoded (:func:`encoded_bytes`): while there are more, drop the inner record
    whose neighbours are closest in time (the oldest and the newest stay, so the set still
    spans the stream, only more coarsely). If the oldest and the newest alone are over
    ``bytes_max`` (cuts of thousands of segments), the oldest goes too: the newest (the tail)
    always stays, so the result is never empty unless ``records`` is."""
    if most < 2:
        raise InvalidArgumentError("a retention set keeps at least 2 records")
    if bytes_max is not None and bytes_max < 1:
        raise InvalidArgumentError(f"a retention set's byte bound must be >= 1, got {bytes_max}")
    out = list(records)
    sizes = [encoded_bytes(r) for r in out] if bytes_max is not None else []
    total = sum(sizes)

    def over() -> bool:
        return len(out) > most or (bytes_max is not None and total > bytes_max)

    while len(out) > 2 and over():
        gaps = [out[i + 1].time_ms - out[i - 1].time_ms for i in range(1, len(out) - 1)]
        drop = 1 + gaps.index(min(gaps))
        del out[drop]
        if sizes:
            total -= sizes.pop(drop)
    if len(out) == 2 and over():
        del out[0]
    return out
