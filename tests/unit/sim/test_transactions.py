"""Transactions in the simulation (sim/transactions.py, the ``transactions`` feature): a
transactional client begins, writes, commits, aborts and abandons transactions while the
stream scales; the controller's commit and abort processors, rolling commits and timer do
the rest, and every event read is checked against what the client was answered."""

from __future__ import annotations

import uuid

import pytest

import sim
from sim.transactions import Transactions, _Txn
from sim.world import WRITER_CONFIG
from tests.unit.sim.feature_checks import assert_left_out_cleanly, hashes_elsewhere

STEPS = 1000
CRASHING = sim.SimConfig(faults=frozenset({"controller_crash", "transactions"}))
"""Controller crashes alone (and the feature): where a crash mid-commit is searched."""

REPLAY_SEED = 8
"""A seed that draws the feature and commits transactions within 600 steps."""
COMMIT_CRASH_SEEDS = {
    34: "commits task: controller crash (at committed)",
    120: "commits task: controller crash (at committed)",
    9: "commits task: controller crash (at txn segments merged)",
    48: "aborts task: controller crash (at txn segments deleted)",
}
"""Seeds (CRASHING, 1000 steps) whose controller dies in the middle of a commit (after the
merges, or after the COMMITTED records) or of an abort; found by a search of seeds 0 to
200 again each time the controller's calls change (last: scales creating their segments in one
round, when 161 stopped crashing there and 9 crashed again)."""


def test_seeds_with_transactions_pass_and_commit_roll_abort_and_time_out() -> None:
    """Half the seeds draw the feature; among them commits are acknowledged, some roll
    (the stream scales meanwhile), some are aborted, some time out, and every invariant
    holds."""
    drawn = swept = 0
    counts: dict[str, int] = {}
    for seed in range(30):
        result = sim.run(seed, STEPS)
        assert result.ok, (seed, result.violation)
        assert result.faults is not None
        if not result.faults.transactions:
            assert not any(k.startswith("txn") for k in result.stats)
            assert not any("commits reads" in t for t in result.trace)
            continue
        drawn += 1
        assert any("commits reads" in t for t in result.trace)  # the processors run
        assert any("aborts reads" in t for t in result.trace)
        swept += sum("transaction timer" in t for t in result.trace)
        for key, value in result.stats.items():
            if key.startswith("txn"):
                counts[key] = counts.get(key, 0) + value
    assert 8 <= drawn <= 22, drawn
    assert counts["txn_commits"] >= 10, counts
    assert counts["txn_rolled"] >= 3, counts
    assert counts["txn_aborts"] >= 5, counts
    assert counts["txn_timeouts"] >= 5, counts
    assert swept >= 5 * drawn, (swept, drawn)


@pytest.mark.parametrize("seed", sorted(COMMIT_CRASH_SEEDS))
def test_a_controller_crash_mid_commit_or_abort_is_survived(seed: int) -> None:
    """The controller dies between two steps of the commit (or abort) handler; restarted,
    its processor reads the request again from its checkpoint and finishes it once: the
    final check finds each acknowledged commit wholly visible, once."""
    result = sim.run(seed, STEPS, CRASHING)
    assert result.ok, result.violation
    assert any(COMMIT_CRASH_SEEDS[seed] in t for t in result.trace)
    assert result.stats.get("txn_commits", 0) + result.stats.get("txn_aborts", 0) >= 1


def test_a_seed_with_transactions_replays_exactly_in_any_process() -> None:
    """Same seed, same trace (hash), also in processes with other string hashes (the
    transaction ids are drawn from the seed)."""
    first = sim.run(REPLAY_SEED, 600)
    assert first.faults is not None and first.faults.transactions
    assert any("commit: acknowledged" in t for t in first.trace)
    again = sim.run(REPLAY_SEED, 600)
    assert first.trace_hash == again.trace_hash
    assert first.stats == again.stats
    hashes = hashes_elsewhere(REPLAY_SEED, 600)
    assert hashes == {first.trace_hash}


def test_leaving_the_feature_out_runs_the_seed_as_if_it_did_not_exist() -> None:
    """Its draws are the feature generator's: without it, a seed that did not draw it runs
    the same, and one that did runs without a transaction (nor the controller's
    transaction services)."""
    assert_left_out_cleanly("transactions", ("commits reads", " begins (epoch"))


def test_the_plans_begin_near_scales_and_stay_in_the_faulty_phase() -> None:
    plans = Transactions(5, 4, [300, 1400], 5, WRITER_CONFIG)
    assert plans.on and len(plans.txns) == 4 and 1.5 <= plans.lease_s <= 4.0
    for t in plans.txns:
        assert 1 <= t.begin_step <= 800 < 1400 and t.end_step > t.begin_step
        assert t.fate in ("commit", "abort", "abandon") and 1 <= len(t.keys) <= 4
    assert Transactions(5, 4, [300, 1400], 5, WRITER_CONFIG).txns == plans.txns  # seeded
    assert not Transactions(5, 0, [], 5, WRITER_CONFIG).on


def _txn(state: str, written: int, read: int, final: str, commit_step: int = 10) -> _Txn:
    t = _Txn(0, "commit", 1, 2, [0] * written, state=state, final=final)
    t.futures = [object()] * written  # type: ignore[list-item]
    t.read = set(range(read))
    t.commit_step = commit_step
    return t


@pytest.mark.parametrize(
    ("state", "read", "final", "commit_step", "problem"),
    [
        ("committing", 3, "COMMITTED", 10, None),
        ("committing", 2, "COMMITTED", 10, "1 of its 3 events were never read"),
        ("committing", 3, "COMMITTING", 10, "is still COMMITTING"),
        ("unknown", 0, "ABORTED", 10, None),
        ("unknown", 3, "COMMITTED", 10, None),
        ("unknown", 1, "COMMITTED", 10, "partly visible: 1 of 3"),
        ("unknown", 0, "COMMITTED", 10, "is COMMITTED, 0 events read"),
        ("aborted", 0, "ABORTED", 0, None),
        ("abandoned", 0, "forgotten", 0, None),
        ("abandoned", 1, "ABORTED", 0, "never committed"),
        ("refused", 0, "ABORTED", 10, None),
        ("refused", 0, "COMMITTED", 10, "never committed"),
    ],
)
def test_the_final_check_holds_each_outcome_to_what_the_client_was_answered(
    state: str, read: int, final: str, commit_step: int, problem: str | None
) -> None:
    found = Transactions._check_outcome(_txn(state, 3, read, final, commit_step), held=False)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found and found.startswith("t0")


def test_a_lease_held_back_by_the_wall_clock_may_stay_open_with_nothing_read() -> None:
    assert Transactions._check_outcome(_txn("abandoned", 2, 0, "OPEN", 0), held=True) is None
    held = Transactions._check_outcome(_txn("abandoned", 2, 1, "OPEN", 0), held=True)
    assert held is not None and "OPEN with 1 events read" in held
    unheld = Transactions._check_outcome(_txn("abandoned", 2, 0, "OPEN", 0), held=False)
    assert unheld is not None and "still OPEN" in unheld


def test_a_transaction_s_name_shows_its_id() -> None:
    t = _Txn(3, "commit", 1, 2, [0])
    assert t.name == "t3"
    t.txn = type("Handle", (), {"txn_id": uuid.UUID(int=0xABCDEF12)})()  # type: ignore[assignment]
    assert t.name == "t3 (abcdef12)"
