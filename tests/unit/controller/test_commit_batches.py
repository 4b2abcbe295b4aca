"""Commits that wait in the controller, and the commit processor's batches: a waiting commit
answers COMMITTED without the client polling, the status reached when its time runs out or
the processor is down, and a batch of commits is merged in one round, in commit order,
exactly once when the processor is killed after any step of it."""

from __future__ import annotations

import threading
import uuid

import pytest

import pravega_ray as pr
from pravega_ray.contracts.records import TxnInfo, TxnStatus
from pravega_ray.controller.transaction_workflows import (
    COMMIT_NOTICES,
    CommitNotices,
    TransactionWorkflows,
)
from pravega_ray.inprocess import InProcessCluster
from tests.unit.controller.test_transaction_faults import COMMIT_STEPS, die_once_after
from tests.unit.controller.test_transactions import (
    append,
    make_stream,
    read_all,
    status,
    wait_for,
    write_txn,
)

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=3)
    yield c
    c.shutdown()


def counting_steps(counts: dict[str, int]):  # type: ignore[no-untyped-def]
    """A handler ``step`` hook counting each step."""

    def count(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    return count


def committing(cluster: InProcessCluster, n: int) -> tuple[list[TxnInfo], list[dict[str, bytes]]]:
    """``n`` transactions written and asked to commit (in order 0..n-1) while the commit
    processor is stopped: their requests wait in the commit stream, together."""
    c = cluster._controller
    cluster.commit_processor.stop()
    txns = [c.create_transaction("sc", "st", 60.0) for _ in range(n)]
    written = [write_txn(cluster, t, b"T%d" % i) for i, t in enumerate(txns)]
    for t in txns:
        assert c.commit_transaction("sc", "st", t.txn_id) is TxnStatus.COMMITTING
    return txns, written


# --- waiting in the controller ------------------------------------------------------------------
def test_commit_and_wait_answers_committed_and_a_repeat_answers_it_again(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    c = cluster._controller
    txn = c.create_transaction("sc", "st", 60.0)
    written = write_txn(cluster, txn, b"T")
    assert c.commit_transaction_and_wait("sc", "st", txn.txn_id, 30.0) is TxnStatus.COMMITTED
    for parent in txn.segments:  # visible when the call returns
        assert read_all(cluster, parent.name) == written[parent.name]
    assert c.commit_transaction_and_wait("sc", "st", txn.txn_id, 30.0) is TxnStatus.COMMITTED
    assert COMMIT_NOTICES.waiting() == 0  # no subscription left behind


@pytest.mark.parametrize("timeout_s", [-1, 61, float("nan"), float("inf"), True, "1", None])
def test_commit_and_wait_with_a_bad_timeout_changes_nothing(cluster, timeout_s: object) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    c = cluster._controller
    txn = c.create_transaction("sc", "st", 60.0)
    with pytest.raises(pr.InvalidArgumentError):
        c.commit_transaction_and_wait("sc", "st", txn.txn_id, timeout_s)  # type: ignore[arg-type]
    assert status(cluster, txn) is TxnStatus.OPEN


def test_commit_and_wait_keeps_the_error_contracts(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    c = cluster._controller
    with pytest.raises(pr.TxnNotFoundError):
        c.commit_transaction_and_wait("sc", "st", uuid.uuid4(), 1.0)
    with pytest.raises(pr.InvalidArgumentError):
        c.commit_transaction_and_wait("sc", "st", "not-a-uuid", 1.0)  # type: ignore[arg-type]
    aborted = c.create_transaction("sc", "st", 60.0)
    c.abort_transaction("sc", "st", aborted.txn_id)
    with pytest.raises(pr.TxnFailedError):
        c.commit_transaction_and_wait("sc", "st", aborted.txn_id, 1.0)


def test_a_commit_whose_processor_is_down_answers_committing_then_committed_by_a_repeat(
    cluster,
) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    c = cluster._controller
    cluster.commit_processor.stop()  # as if its actor died
    txn = c.create_transaction("sc", "st", 60.0)
    written = write_txn(cluster, txn, b"T")
    assert c.commit_transaction_and_wait("sc", "st", txn.txn_id, 0.3) is TxnStatus.COMMITTING
    assert c.commit_transaction_and_wait("sc", "st", txn.txn_id, 0.0) is TxnStatus.COMMITTING
    assert COMMIT_NOTICES.waiting() == 0
    cluster.restart_commit_processor()  # resumes from its checkpoint
    assert c.commit_transaction_and_wait("sc", "st", txn.txn_id, 30.0) is TxnStatus.COMMITTED
    for parent in txn.segments:
        assert read_all(cluster, parent.name) == written[parent.name]


def test_a_commit_notice_is_a_hint_the_record_decides(cluster) -> None:  # type: ignore[no-untyped-def]
    # A waiter woken for a transaction that is still committing answers COMMITTING.
    make_stream(cluster, 1)
    c = cluster._controller
    cluster.commit_processor.stop()
    txn = c.create_transaction("sc", "st", 60.0)
    COMMIT_NOTICES.notify(txn.txn_id)  # a stale notice, as if remembered wrongly
    assert c.commit_transaction_and_wait("sc", "st", txn.txn_id, 0.2) is TxnStatus.COMMITTING


def test_commit_notices_wake_waiters_remember_recent_commits_and_forget_old_ones() -> None:
    notices = CommitNotices(remembered=2)
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    woken = threading.Event()
    cancel = notices.subscribe(a, woken.set)
    assert notices.waiting() == 1
    notices.notify(a)
    assert woken.is_set() and notices.waiting() == 0
    cancel()  # harmless after it fired
    assert notices.wait(a, 0.0)  # remembered: answered at once
    notices.notify(b)
    notices.notify(c)
    assert not notices.wait(a, 0.01)  # forgotten (only 2 remembered)
    assert notices.waiting() == 0
    notices.subscribe(a, lambda: None)()  # cancelled before any notice
    assert notices.waiting() == 0


# --- batches ------------------------------------------------------------------------------------
def test_commits_queued_together_are_merged_in_one_round_in_commit_order(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    txns, written = committing(cluster, 5)
    for parent in txns[0].segments:
        append(cluster, parent.name, b"before;")
    counts: dict[str, int] = {}
    cluster.restart_commit_processor(step=counting_steps(counts))
    wait_for(lambda: all(status(cluster, t) is TxnStatus.COMMITTED for t in txns))
    # The statuses read COMMITTED once the completed records are written; the processor
    # calls its "committed" step a moment after.
    wait_for(lambda: "committed" in counts)
    assert counts == {"txn segments merged": 1, "committed": 1}
    for parent in txns[0].segments:
        append(cluster, parent.name, b";after")
        expected = b"".join(w[parent.name] for w in written)
        assert read_all(cluster, parent.name) == b"before;" + expected + b";after"


@pytest.mark.parametrize("step", COMMIT_STEPS)
def test_a_batch_killed_after_each_step_commits_each_transaction_exactly_once(
    cluster, step: str
) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 3)
    txns, written = committing(cluster, 4)
    for parent in txns[0].segments:
        append(cluster, parent.name, b"before;")
    killed: list[str] = []
    cluster.restart_commit_processor(step=die_once_after(step, killed))
    wait_for(lambda: bool(killed))
    cluster.restart_commit_processor()  # resumes from its checkpoint: the batch again
    wait_for(lambda: all(status(cluster, t) is TxnStatus.COMMITTED for t in txns))
    for parent in txns[0].segments:
        append(cluster, parent.name, b";after")
        expected = b"".join(w[parent.name] for w in written)
        assert read_all(cluster, parent.name) == b"before;" + expected + b";after"


def test_a_batch_with_an_abort_and_a_repeat_commits_only_the_committing_ones(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    c = cluster._controller
    txns, written = committing(cluster, 3)
    aborted = c.create_transaction("sc", "st", 60.0)
    write_txn(cluster, aborted, b"A")
    c.abort_transaction("sc", "st", aborted.txn_id)
    # The first commit posted again (posting is at least once): in the same batch.
    assert c.commit_transaction("sc", "st", txns[0].txn_id) is TxnStatus.COMMITTING
    cluster.commit_processor.stop()
    cluster.restart_commit_processor()
    wait_for(lambda: all(status(cluster, t) is TxnStatus.COMMITTED for t in txns))
    wait_for(lambda: cluster.commit_processor.drain(1.0))
    for parent in txns[0].segments:
        assert read_all(cluster, parent.name) == b"".join(w[parent.name] for w in written)


def test_a_batch_whose_handling_fails_is_handled_one_request_at_a_time(
    cluster, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    txns, written = committing(cluster, 3)
    real = TransactionWorkflows.handle_commits
    batches: list[int] = []

    def broken_batches(self: TransactionWorkflows, bodies: list[dict[str, object]]) -> list[str]:
        batches.append(len(bodies))
        if len(bodies) > 1:
            raise ValueError("a bug in the batch path")
        return real(self, bodies)

    monkeypatch.setattr(TransactionWorkflows, "handle_commits", broken_batches)
    cluster.restart_commit_processor()
    wait_for(lambda: all(status(cluster, t) is TxnStatus.COMMITTED for t in txns))
    for parent in txns[0].segments:
        assert read_all(cluster, parent.name) == b"".join(w[parent.name] for w in written)
    assert batches[0] == 3 and batches[1:] == [1, 1, 1]  # then each alone
