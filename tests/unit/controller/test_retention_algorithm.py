"""The retention algorithm (controller/retention.py): every case of seed 004, with the
seed's figures scaled down (min 20 GB / max 100 GB -> min 20 / max 100 units)."""

from __future__ import annotations

import pytest

import pravega_ray as pr
from pravega_ray.controller.retention import (
    Case,
    RetentionRecord,
    bound,
    choose_truncation,
    encoded_bytes,
    purge,
)
from pravega_ray.naming import segment_id

S = segment_id(0, 0)  # a one-segment stream
A, B = segment_id(0, 1), segment_id(0, 2)  # a two-segment stream: [0, .5), [.5, 1)
RANGES = {S: (0.0, 1.0), A: (0.0, 0.5), B: (0.5, 1.0)}
HEAD = RetentionRecord(0, 0, {})
SIZE = pr.RetentionPolicy.by_size(20, 100)
NO_MAX = pr.RetentionPolicy.by_size(20, 0)


def one(size: int, time_ms: int | None = None) -> RetentionRecord:
    """A record of the one-segment stream at ``size`` (recorded at ``size`` ms by default)."""
    return RetentionRecord(size if time_ms is None else time_ms, size, {S: size})


def two(a: int, b: int) -> RetentionRecord:
    return RetentionRecord(a + b, a + b, {A: a, B: b})


def every_ten(tail: int) -> list[RetentionRecord]:
    return [one(s) for s in range(10, tail + 1, 10)]


def choose(policy, records, head=HEAD, lower=None, now_ms=None):  # type: ignore[no-untyped-def]
    now = records[-1].time_ms if now_ms is None else now_ms
    return choose_truncation(policy, records, head, now, RANGES, lower)


# --- size and time: the seed's four cases ---------------------------------------------------------
def test_case_1_below_min_truncates_nothing() -> None:
    choice = choose(SIZE, every_ten(20))  # the stream holds 20: not above min
    assert (choice.case, choice.cut) == (Case.BELOW_MIN, None)


def test_case_2_above_min_without_max_keeps_just_above_min() -> None:
    choice = choose(NO_MAX, every_ten(150))
    assert (choice.case, choice.cut, choice.size) == (Case.ABOVE_MIN, {S: 130}, 130)  # keeps 20


def test_case_3_above_max_keeps_just_under_max() -> None:
    choice = choose(SIZE, every_ten(150))  # 150 > 100
    assert (choice.case, choice.cut) == (Case.ABOVE_MAX, {S: 50})  # keeps 100
    # Cuts too coarse to land between the limits: the one keeping least while >= min.
    coarse = [one(10), one(140), one(150)]
    assert choose(SIZE, coarse).cut == {S: 10}  # keeps 140: the only cut keeping >= 20


def test_case_4_between_min_and_max_keeps_just_above_min() -> None:
    choice = choose(SIZE, every_ten(80))
    assert (choice.case, choice.cut) == (Case.BETWEEN, {S: 60})  # keeps 20


def test_time_policy_counts_age_not_bytes() -> None:
    # 1 byte per record, 10 ms apart: sizes say nothing, ages decide.
    records = [RetentionRecord(t, t // 10, {S: t // 10}) for t in range(10, 151, 10)]
    choice = choose(pr.RetentionPolicy.by_time(20, 100), records)
    assert (choice.case, choice.cut, choice.time_ms) == (Case.ABOVE_MAX, {S: 5}, 50)
    assert choose(pr.RetentionPolicy.by_time(20, 0), records).cut == {S: 13}
    assert choose(pr.RetentionPolicy.by_time(20, 100), records, now_ms=160).cut == {S: 6}


def test_only_cuts_ahead_of_the_head_are_chosen() -> None:
    head = one(130)  # truncated at 130 already: nothing ahead keeps >= 20
    assert choose(NO_MAX, every_ten(150), head=head).cut is None
    assert choose(NO_MAX, every_ten(160), head=head).cut == {S: 140}


def test_no_policy_never_truncates_even_with_subscribers() -> None:
    assert choose(None, every_ten(150)).cut is None
    assert choose(None, every_ten(150), lower=one(70)).cut is None


def test_bad_retention_sets_are_refused() -> None:
    with pytest.raises(pr.InvalidArgumentError):
        choose_truncation(SIZE, [], HEAD, 0, RANGES)
    with pytest.raises(pr.InvalidArgumentError):
        choose(SIZE, [one(20), one(10)])


# --- consumption: the seed's five cases -----------------------------------------------------------
def test_cbr_i_lower_bound_within_the_limits_is_the_truncation() -> None:
    lower = RetentionRecord(0, 75, {S: 75})  # keeps 75: between 20 and 100
    choice = choose(SIZE, every_ten(150), lower=lower)
    assert (choice.case, choice.cut, choice.size, choice.time_ms) == (
        Case.CBR_WITHIN,
        {S: 75},
        75,
        70,  # its time: the newest record behind it
    )


def test_cbr_ii_lower_bound_below_min_is_discarded_for_the_min_cut() -> None:
    choice = choose(SIZE, every_ten(150), lower=RetentionRecord(0, 140, {S: 140}))  # keeps 10
    assert (choice.case, choice.cut) == (Case.CBR_BELOW_MIN, {S: 130})


def test_cbr_iii_lower_bound_above_max_is_discarded_max_wins_over_unread_data() -> None:
    choice = choose(SIZE, every_ten(150), lower=RetentionRecord(0, 30, {S: 30}))  # keeps 120
    assert (choice.case, choice.cut) == (Case.CBR_ABOVE_MAX, {S: 50})  # past the subscriber


def _two_segment_set() -> list[RetentionRecord]:
    return [two(a, a) for a in range(10, 71, 10)] + [two(75, 75)]  # sizes 20..140, 150


def test_cbr_iv_lower_bound_overlapping_min_truncates_at_the_cut_before_it() -> None:
    records = _two_segment_set()
    # min cut: (60, 60) keeps 30, the least >= 20. The bound (74, 58) keeps 18 < min and
    # is ahead of it in A, behind in B: overlapping. From the tail, (75, 75) is ahead of
    # the bound, (70, 70) and (60, 60) overlap it, (50, 50) is the first behind it.
    lower = RetentionRecord(0, 132, {A: 74, B: 58})
    choice = choose(SIZE, records, lower=lower)
    assert (choice.case, choice.cut) == (Case.CBR_OVERLAP_MIN, {A: 50, B: 50})


def test_cbr_v_lower_bound_overlapping_max_truncates_at_the_cut_after_it() -> None:
    records = _two_segment_set()
    # max cut: (30, 30) keeps 90. The bound (40, 5) keeps 105 > max, overlapping it.
    lower = RetentionRecord(0, 45, {A: 40, B: 5})
    choice = choose(SIZE, records, lower=lower)
    assert (choice.case, choice.cut) == (Case.CBR_OVERLAP_MAX, {A: 40, B: 40})


def test_cbr_ii_and_iii_with_two_segments_when_not_overlapping() -> None:
    records = _two_segment_set()
    below = RetentionRecord(0, 146, {A: 73, B: 73})  # keeps 4, ahead of the min cut (60, 60)
    assert choose(SIZE, records, lower=below).case is Case.CBR_BELOW_MIN
    above = RetentionRecord(0, 10, {A: 5, B: 5})  # keeps 140, behind max cut (30, 30)
    assert choose(SIZE, records, lower=above).cut == {A: 30, B: 30}


def test_cbr_never_goes_behind_the_head() -> None:
    lower = RetentionRecord(0, 75, {S: 75})
    assert choose(SIZE, every_ten(150), head=one(80), lower=lower).cut is None


# --- the retention set ----------------------------------------------------------------------------
def test_purge_drops_records_at_or_behind_the_cut() -> None:
    assert purge(every_ten(50), {S: 30}, RANGES) == [one(40), one(50)]
    assert purge(_two_segment_set(), {A: 25, B: 35}, RANGES)[0] == two(30, 30)


def test_bound_thins_the_set_keeping_its_ends() -> None:
    records = [one(1), one(2), one(3), one(10), one(20)]
    assert bound(records, 3) == [one(1), one(10), one(20)]
    assert bound(records, 10) == records
    with pytest.raises(pr.InvalidArgumentError):
        bound(records, 1)


def test_bound_keeps_the_set_within_its_bytes_however_many_segments_its_cuts_name() -> None:
    wide = [RetentionRecord(t, t, {s: 100 + t for s in range(1000)}) for t in range(10, 40)]
    each = encoded_bytes(wide[0])
    assert each > 7_000  # a cut of 1,000 segments
    kept = bound(wide, 1000, 10 * each)  # the count allows them all, the bytes ten
    assert len(kept) == 10 and sum(map(encoded_bytes, kept)) <= 10 * each
    assert kept[0] == wide[0] and kept[-1] == wide[-1]  # it still spans the stream
    assert bound(wide, 1000, 2 * each + 5) == [wide[0], wide[-1]]
    assert bound(wide, 1000, each) == [wide[-1]]  # only the tail fits: it stays
    assert bound(wide[:1], 1000, 1) == wide[:1] and bound([], 5, 1) == []
    assert bound(wide, 1000, 10**9) == wide
    with pytest.raises(pr.InvalidArgumentError):
        bound(wide, 5, 0)


def test_records_round_trip() -> None:
    record = two(3, 4)
    assert RetentionRecord.from_dict(record.to_dict()) == record
