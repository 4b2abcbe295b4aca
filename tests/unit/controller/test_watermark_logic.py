"""The pure parts of watermarks (``contracts/watermarks.py``): the upper bound of writers'
positions, when a group has passed a watermark, the window it gives, and the mark segment's
framing (damage is named, never skipped silently)."""

from __future__ import annotations

import pytest

from pravega_ray.contracts.watermarks import (
    TimeWindow,
    Watermark,
    WindowTracker,
    WriterMark,
    check_position,
    check_time_ms,
    decode_watermarks,
    encode_watermark,
    mark_segment_name,
    passed,
    upper_bound,
)
from pravega_ray.errors import DataCorruptionError, InvalidArgumentError
from pravega_ray.naming import segment_id

# Epoch 0: A [0, .5), B [.5, 1); epoch 1: B split into C [.5, .75), D [.75, 1).
A, B = segment_id(0, 0), segment_id(0, 1)
C, D = segment_id(1, 2), segment_id(1, 3)
RANGES = {A: (0.0, 0.5), B: (0.5, 1.0), C: (0.5, 0.75), D: (0.75, 1.0)}


def newest() -> list[int]:
    return [A, C, D]


def test_upper_bound_takes_the_greatest_offset_per_segment() -> None:
    cut = upper_bound([{A: 10, B: 5}, {A: 3, B: 40}], RANGES, newest)
    assert cut == {A: 10, B: 40}


def test_upper_bound_prefers_a_successor_over_its_predecessor() -> None:
    cut = upper_bound([{A: 10, B: 5}, {A: 3, C: 7, D: 0}], RANGES, newest)
    assert cut == {A: 10, C: 7, D: 0}


def test_upper_bound_fills_uncovered_ranges_from_the_newest_epoch() -> None:
    # Only C is known for B's range: D fills the rest at 0, B is dropped (C is after it).
    cut = upper_bound([{A: 10, B: 5}, {C: 7}], RANGES, newest)
    assert cut == {A: 10, C: 7, D: 0}


def test_upper_bound_never_goes_behind_the_previous_cut() -> None:
    cut = upper_bound([{A: 1, B: 1}], RANGES, newest, previous={A: 50, C: 2, D: 3})
    assert cut == {A: 50, C: 2, D: 3}


def test_passed_means_nowhere_behind_the_cut_and_equal_counts() -> None:
    mark = Watermark(100, 200, {A: 10, B: 20}, {A: RANGES[A], B: RANGES[B]})
    assert passed({A: 10, B: 20}, mark, RANGES)
    assert passed({A: 11, C: 0, D: 0}, mark, RANGES)  # C, D come after B
    assert not passed({A: 9, B: 30}, mark, RANGES)
    assert not passed({A: 30, B: 19}, mark, RANGES)


def test_the_window_moves_only_as_the_position_passes_each_mark_in_order() -> None:
    tracker = WindowTracker()
    assert tracker.window() == TimeWindow(None, None)
    ranges = {A: RANGES[A], B: RANGES[B]}
    tracker.add([Watermark(100, 150, {A: 10, B: 10}, ranges)])
    tracker.add([Watermark(200, 260, {A: 20, B: 20}, ranges)])
    assert tracker.window() == TimeWindow(None, 260)
    tracker.advance({A: 5, B: 50}, RANGES)
    assert tracker.window() == TimeWindow(None, 260)  # behind the first on A
    tracker.advance({A: 15, B: 15}, RANGES)
    assert tracker.window() == TimeWindow(100, 260)
    tracker.advance({A: 20, B: 20}, RANGES)
    assert tracker.window() == TimeWindow(200, None)
    assert tracker.waiting == 0


def test_mark_segment_entries_round_trip_and_an_incomplete_tail_waits() -> None:
    marks = [Watermark(1, 2, {A: 3}, {A: (0.0, 1.0)}), Watermark(4, 5, {A: 6}, {A: (0.0, 1.0)})]
    data = b"".join(encode_watermark(m) for m in marks)
    found, end = decode_watermarks("seg", 100, data + encode_watermark(marks[0])[:7])
    assert [m for _, m in found] == marks
    assert end == 100 + len(data)
    assert found[0][0] == 100 + len(encode_watermark(marks[0]))


@pytest.mark.parametrize("where", [0, 2, 3, 5, 9, -1])
def test_a_flipped_byte_in_a_watermark_is_named(where: int) -> None:
    data = bytearray(encode_watermark(Watermark(1, 2, {A: 3}, {A: (0.0, 1.0)})))
    data[where] ^= 0x40  # 2, 3: a length still under the limit, longer than the segment
    with pytest.raises(DataCorruptionError, match="mark segment seg"):
        decode_watermarks("seg", 0, bytes(data), len(data))


@pytest.mark.parametrize("bad", [-1, True, 1.5, "7", None, 1 << 63, float("nan")])
def test_times_must_be_ints_in_range(bad: object) -> None:
    with pytest.raises(InvalidArgumentError):
        check_time_ms(bad)


@pytest.mark.parametrize("bad", [{}, {1: -1}, {-1: 0}, {True: 3}, {"a": 1}, [(1, 2)], None])
def test_positions_must_be_segment_ids_to_offsets(bad: object) -> None:
    with pytest.raises(InvalidArgumentError):
        check_position(bad)


def test_marks_and_names() -> None:
    mark = WriterMark(5, {A: 1}, 99, closed=True)
    assert WriterMark.from_dict(mark.to_dict()) == mark
    assert mark_segment_name("sc", "st", 1) != mark_segment_name("sc", "st", 2)
    assert mark_segment_name("sc", "st", 1).startswith("_system/")


def test_read_watermarks_goes_on_through_short_reads_to_the_end() -> None:
    from pravega_ray.contracts.segment_store import ReadResult
    from pravega_ray.contracts.watermarks import read_watermarks

    marks = [Watermark(t, t, {A: t}, {A: (0.0, 1.0)}) for t in (1, 2, 3)]
    data = b"".join(encode_watermark(m) for m in marks)
    one = len(encode_watermark(marks[0]))

    def read(at: int) -> ReadResult:  # one entry per read (all three are the same size)
        return ReadResult(at, data[at : at + one], False, len(data))

    reads = list(read_watermarks(read, "seg", 0))
    assert [found for found, _ in reads] == [[m] for m in marks]
    assert [after for _, after in reads] == [one, 2 * one, 3 * one]
    assert [f for found, _ in read_watermarks(read, "seg", one, end=2 * one) for f in found] == [
        marks[1]
    ]


def test_read_watermarks_below_a_truncated_start_goes_on_from_the_start() -> None:
    from pravega_ray.contracts.segment_store import ReadResult
    from pravega_ray.contracts.watermarks import read_watermarks
    from pravega_ray.errors import SegmentTruncatedError

    marks = [Watermark(t, t, {A: t}, {A: (0.0, 1.0)}) for t in (1, 2, 3)]
    data = b"".join(encode_watermark(m) for m in marks)
    one = len(encode_watermark(marks[0]))
    start = one  # the first entry truncated away (at an entry's start, as the controller does)

    def read(at: int) -> ReadResult:
        if at < start:
            raise SegmentTruncatedError("truncated", start_offset=start)
        return ReadResult(at, data[at:], False, len(data))

    reads = list(read_watermarks(read, "seg", 0))
    assert [f for found, _ in reads for f in found] == marks[1:]
    assert reads[-1][1] == len(data)

    def read_stuck(at: int) -> ReadResult:  # a start that does not move the read on: raised
        raise SegmentTruncatedError("truncated", start_offset=at)

    with pytest.raises(SegmentTruncatedError):
        list(read_watermarks(read_stuck, "seg", 0))
