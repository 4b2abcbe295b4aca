"""The chaos checker finds each kind of broken invariant, and only those (chaos/checker.py)."""

from __future__ import annotations

from chaos.checker import (
    Read,
    TxnOutcome,
    check_key_values,
    check_keyed,
    check_transactions,
    decode,
    encode_keyed,
    encode_txn,
    encode_zombie,
)


def keyed(key: str, seq: int, segment: str = "s/0", offset: int = 0) -> Read:
    return decode("r0", segment, offset, encode_keyed(key, seq, 100))


def txn_read(tag: str, index: int, count: int, segment: str, offset: int) -> Read:
    return decode("r0", segment, offset, encode_txn(tag, index, count, 50))


def test_events_encode_their_identity_in_a_header_line_and_pad_to_the_size() -> None:
    payload = encode_keyed("w1k5", 42, 100)
    assert len(payload) == 100 and payload.startswith(b"k w1k5 42\n")
    assert decode("r", "seg", 7, payload) == Read("r", "seg", 7, "k", "w1k5", 42)
    assert decode("r", "seg", 0, encode_txn("w0t3", 2, 9, 0)).count == 9
    assert decode("r", "seg", 0, encode_zombie("zombie3", 5, 100)) == Read(
        "r", "seg", 0, "z", "zombie3", 5
    )
    assert decode("r", "seg", 0, b"garbage bytes").kind == "?"
    assert decode("r", "seg", 0, b"k key notanumber\n").kind == "?"
    assert decode("r", "seg", 0, b"\xff\xfe\n").kind == "?"


def test_a_clean_run_breaks_nothing() -> None:
    reads = [keyed("a", 0), keyed("b", 0), keyed("a", 1), keyed("b", 1)]
    verdict = check_keyed({"a": [0, 1], "b": [0, 1]}, {}, reads)
    assert (verdict.acked, verdict.read, verdict.lost, verdict.duplicated) == (4, 4, 0, 0)
    assert verdict.reordered == verdict.phantom == 0 and not verdict.examples


def test_lost_duplicated_reordered_and_phantom_events_are_each_counted() -> None:
    reads = [keyed("a", 0), keyed("a", 2), keyed("a", 1), keyed("a", 2), keyed("a", 9)]
    verdict = check_keyed({"a": [0, 1, 2, 3]}, {}, reads)
    assert verdict.lost == 1  # 3
    assert verdict.duplicated == 1  # 2 twice
    assert verdict.reordered == 1  # 1 after 2
    assert verdict.phantom == 1  # 9 never written
    assert any("lost a" in e for e in verdict.examples)


def test_an_event_with_an_unknown_outcome_may_be_read_once_or_not_at_all() -> None:
    assert check_keyed({"a": [0, 2]}, {"a": [1]}, [keyed("a", 0), keyed("a", 2)]).lost == 0
    read_it = check_keyed({"a": [0, 2]}, {"a": [1]}, [keyed("a", 0), keyed("a", 1), keyed("a", 2)])
    assert read_it.phantom == read_it.reordered == 0
    twice = check_keyed({"a": [0]}, {"a": [1]}, [keyed("a", 0), keyed("a", 1), keyed("a", 1)])
    assert twice.duplicated == 1


def segment_reads(reads: list[Read]) -> dict[str, list[Read]]:
    out: dict[str, list[Read]] = {}
    for read in reads:
        out.setdefault(read.segment, []).append(read)
    return out


def test_a_committed_transaction_read_whole_and_contiguous_is_not_torn() -> None:
    reads = [
        txn_read("x", 0, 3, "t/0", 0),
        txn_read("x", 1, 3, "t/0", 10),
        txn_read("y", 0, 1, "t/0", 20),
        txn_read("x", 2, 3, "t/1", 0),
    ]
    outcomes = [TxnOutcome("x", 3, "committed"), TxnOutcome("y", 1, "committed")]
    verdict = check_transactions(outcomes, reads, segment_reads(reads))
    assert verdict.committed == 2 and verdict.torn_transactions == 0 and not verdict.examples


def test_missing_interleaved_duplicated_and_aborted_visible_transactions_are_found() -> None:
    reads = [
        txn_read("x", 0, 2, "t/0", 0),
        txn_read("y", 0, 1, "t/0", 10),  # between x's two events on t/0
        txn_read("x", 1, 2, "t/0", 20),
        txn_read("z", 0, 3, "t/1", 0),  # z misses two events
        txn_read("a", 0, 1, "t/1", 10),  # aborted, yet visible
        txn_read("y", 0, 1, "t/0", 10),  # y twice
        txn_read("ghost", 0, 1, "t/1", 30),  # nobody began it
    ]
    outcomes = [
        TxnOutcome("x", 2, "committed"),
        TxnOutcome("y", 1, "committed"),
        TxnOutcome("z", 3, "committed"),
        TxnOutcome("a", 1, "aborted"),
        TxnOutcome("b", 1, "timed_out"),
    ]
    verdict = check_transactions(outcomes, reads, segment_reads(reads))
    assert verdict.torn_transactions == 3  # x interleaved, y duplicated, z partial
    assert verdict.aborted_visible == 1 and verdict.duplicated == 1 and verdict.phantom == 1
    assert (verdict.aborted, verdict.timed_out) == (1, 1)


def test_a_transaction_of_unknown_outcome_is_whole_or_absent() -> None:
    absent = check_transactions([TxnOutcome("u", 2, "unknown")], [], {})
    assert absent.torn_transactions == 0 and absent.unknown == 1
    part = [txn_read("u", 0, 2, "t/0", 0)]
    assert (
        check_transactions(
            [TxnOutcome("u", 2, "unknown")], part, segment_reads(part)
        ).torn_transactions
        == 1
    )


def test_key_values_lost_refused_applied_and_duplicates_are_found() -> None:
    fine = check_key_values({"k": ["c0-0", "c1-0"]}, {"k": ["c2-0"]}, {"k": ["c0-0", "c1-0"]})
    assert (fine.acked_updates, fine.kv_lost, fine.kv_phantom) == (2, 0, 0)
    broken = check_key_values(
        {"k": ["c0-0", "c1-0"], "j": ["c0-1"]},
        {"k": ["c2-0"]},
        {"k": ["c0-0", "c2-0", "c0-0"], "j": []},
    )
    assert broken.kv_lost == 2  # c1-0 and c0-1
    assert broken.kv_phantom == 2  # c2-0 refused yet applied, c0-0 twice
    assert len(broken.examples) == 2
