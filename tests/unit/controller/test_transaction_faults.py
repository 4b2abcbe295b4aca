"""Transactions under faults and with scales: the commit and abort processors killed after
every step, containers restarted mid-commit, leases running out (the timer, on a manual
clock), a scale with an open transaction (committed later by rolling), a seal with open ones."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

import pravega_ray as pr
from pravega_ray.constants import TXN_COMPLETED_KEEP_S
from pravega_ray.contracts.records import TxnInfo, TxnStatus
from pravega_ray.controller.request_stream import RequestStream
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.controller.transaction_timer import RESCAN_S, STUCK_REPOST_S, TransactionTimer
from pravega_ray.controller.transaction_workflows import COMMIT_SEGMENT
from pravega_ray.controller.transactions import TxnRecord, TxnRecords
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import container_for_segment, transaction_segment_name
from pravega_ray.timing import ManualClock
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


def die_once_after(step: str, killed: list[str]):  # type: ignore[no-untyped-def]
    """A handler ``step`` hook that kills the processor (once) right after ``step``."""

    def die_once(name: str) -> None:
        if name == step and not killed:
            killed.append(name)
            raise SystemExit(f"processor killed after {name!r}")

    return die_once


def hold_workflows_after(cluster: InProcessCluster, step: str) -> threading.Event:
    """Restart the request processor with workflows that stop after ``step`` until the
    event returned is set (a scale held there: it no longer waits for open transactions)."""
    release = threading.Event()

    def hold(name: str) -> None:
        if name == step:
            release.wait(60)

    cluster.restart_processor(step=hold)
    return release


def record_of(cluster: InProcessCluster, txn: TxnInfo) -> TxnRecord:
    found = StreamMetadataStore(cluster.metadata).txns.active("sc", "st", txn.epoch, txn.txn_id)
    assert found is not None
    return found


def set_record(cluster: InProcessCluster, txn: TxnInfo, **changes: object) -> None:
    StreamMetadataStore(cluster.metadata).txns.update(record_of(cluster, txn), **changes)


def manual_timer(cluster: InProcessCluster, clock: ManualClock) -> TransactionTimer:
    return TransactionTimer(cluster.metadata, cluster._segment_helper(), clock=clock)


COMMIT_STEPS = ["txn segments merged", "committed"]


@pytest.mark.parametrize("step", COMMIT_STEPS)
def test_commit_processor_killed_after_each_step_commits_exactly_once(cluster, step: str) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    killed: list[str] = []
    cluster.restart_commit_processor(step=die_once_after(step, killed))
    txn = cluster._controller.create_transaction("sc", "st", 60.0)
    for parent in txn.segments:
        append(cluster, parent.name, b"before;")
    written = write_txn(cluster, txn, b"T")
    cluster._controller.commit_transaction("sc", "st", txn.txn_id)
    wait_for(lambda: bool(killed))
    cluster.restart_commit_processor()  # resumes from its checkpoint
    wait_for(lambda: status(cluster, txn) is TxnStatus.COMMITTED)
    for parent in txn.segments:
        append(cluster, parent.name, b";after")
        assert read_all(cluster, parent.name) == b"before;" + written[parent.name] + b";after"


ABORT_STEPS = ["txn segments deleted", "aborted"]


@pytest.mark.parametrize("step", ABORT_STEPS)
def test_abort_processor_killed_after_each_step_aborts_once(cluster, step: str) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    killed: list[str] = []
    cluster.restart_abort_processor(step=die_once_after(step, killed))
    txn = cluster._controller.create_transaction("sc", "st", 60.0)
    write_txn(cluster, txn, b"T")
    cluster._controller.abort_transaction("sc", "st", txn.txn_id)
    wait_for(lambda: bool(killed))
    cluster.restart_abort_processor()
    wait_for(lambda: status(cluster, txn) is TxnStatus.ABORTED)
    for parent in txn.segments:
        assert read_all(cluster, parent.name) == b""
    assert cluster._controller.list_transactions("sc", "st") == {}


@pytest.mark.parametrize("step", COMMIT_STEPS[:1])
def test_container_restarted_mid_commit_commits_exactly_once(cluster, step: str) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    txn = cluster._controller.create_transaction("sc", "st", 60.0)
    (parent,) = txn.segments
    container = container_for_segment(parent.name, cluster.container_count)
    restarted: list[str] = []

    def restart(name: str) -> None:
        if name == step and not restarted:
            restarted.append(name)
            cluster.restart_container(container)

    cluster.restart_commit_processor(step=restart)
    append(cluster, parent.name, b"before;")
    written = write_txn(cluster, txn, b"T")
    cluster._controller.commit_transaction("sc", "st", txn.txn_id)
    wait_for(lambda: status(cluster, txn) is TxnStatus.COMMITTED)
    assert restarted
    assert read_all(cluster, parent.name) == b"before;" + written[parent.name]


def test_ping_or_commit_after_the_lease_ran_out_is_lease_expired_and_aborts(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    now = int(time.time() * 1000)
    for call in ("ping", "commit"):
        txn = cluster._controller.create_transaction("sc", "st", 60.0)
        set_record(cluster, txn, lease_deadline_ms=now - 1)
        with pytest.raises(pr.LeaseExpiredError):
            if call == "ping":
                cluster._controller.ping_transaction("sc", "st", txn.txn_id, 10.0)
            else:
                cluster._controller.commit_transaction("sc", "st", txn.txn_id)
        wait_for(lambda t=txn: status(cluster, t) is TxnStatus.ABORTED)  # type: ignore[misc]


def test_ping_past_the_maximum_is_clamped_then_lease_expired(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    txn = cluster._controller.create_transaction("sc", "st", 60.0)
    now = int(time.time() * 1000)
    set_record(cluster, txn, max_deadline_ms=now + 5_000)
    deadline = cluster._controller.ping_transaction("sc", "st", txn.txn_id, 600.0)
    assert deadline == now + 5_000  # clamped to the maximum
    set_record(cluster, txn, max_deadline_ms=now - 1)
    with pytest.raises(pr.LeaseExpiredError):
        cluster._controller.ping_transaction("sc", "st", txn.txn_id, 1.0)
    wait_for(lambda: status(cluster, txn) is TxnStatus.ABORTED)


def test_timer_aborts_an_expired_transaction_and_a_restarted_timer_still_does(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    clock = ManualClock(wall_start_ms=int(time.time() * 1000))
    first = cluster._controller.create_transaction("sc", "st", 5.0)
    second = cluster._controller.create_transaction("sc", "st", 20.0)
    write_txn(cluster, first, b"T")
    timer = manual_timer(cluster, clock)
    assert timer.run_once() == 0
    clock.advance(6)
    assert timer.run_once() == 1
    wait_for(lambda: status(cluster, first) is TxnStatus.ABORTED)
    for parent in first.segments:
        assert read_all(cluster, parent.name) == b""
    assert status(cluster, second) is TxnStatus.OPEN
    # The timer "dies"; a new one rebuilds from the records and aborts the second in time.
    clock.advance(15)
    restarted = manual_timer(cluster, clock)
    assert restarted.run_once() == 1
    wait_for(lambda: status(cluster, second) is TxnStatus.ABORTED)


def test_timer_leaves_a_transaction_pinged_after_it_read_the_deadline(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    clock = ManualClock(wall_start_ms=int(time.time() * 1000))
    txn = cluster._controller.create_transaction("sc", "st", 5.0)
    timer = manual_timer(cluster, clock)
    assert timer.run_once() == 0  # the heap holds the first deadline
    cluster._controller.ping_transaction("sc", "st", txn.txn_id, 60.0)
    clock.advance(6)
    assert timer.run_once() == 0  # the stored deadline moved: not aborted
    assert status(cluster, txn) is TxnStatus.OPEN
    clock.advance(60)
    assert timer.run_once() == 1


def test_timer_posts_a_lost_commit_again_and_forgets_old_completed_ones(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    clock = ManualClock(wall_start_ms=int(time.time() * 1000))
    txn = cluster._controller.create_transaction("sc", "st", 60.0)
    written = write_txn(cluster, txn, b"T")
    # The poster died between marking COMMITTING and posting the commit event.
    set_record(cluster, txn, status=TxnStatus.COMMITTING, status_ms=clock.wall_time_ms())
    time.sleep(0.2)
    assert status(cluster, txn) is TxnStatus.COMMITTING
    timer = manual_timer(cluster, clock)
    timer.run_once()
    clock.advance(STUCK_REPOST_S + 1)
    timer.run_once()
    wait_for(lambda: status(cluster, txn) is TxnStatus.COMMITTED)
    (parent,) = txn.segments
    assert read_all(cluster, parent.name) == written[parent.name]
    clock.advance(TXN_COMPLETED_KEEP_S + 1)
    timer.run_once()
    with pytest.raises(pr.TxnNotFoundError):
        status(cluster, txn)


def aborted_transactions(cluster: InProcessCluster, count: int) -> None:
    """``count`` more transactions of sc/st begun and aborted (their completed records
    kept)."""
    records = StreamMetadataStore(cluster.metadata).txns
    before = len(records.list_completed("sc", "st"))
    for _ in range(count):
        txn = cluster._controller.create_transaction("sc", "st", 60.0)
        cluster._controller.abort_transaction("sc", "st", txn.txn_id)
    wait_for(lambda: len(records.list_completed("sc", "st")) == before + count)


def counting_completed_reads(timer: TransactionTimer, during: object = None) -> list[int]:
    """A one-element list counting the timer's reads of completed records (``during``: a
    callable run at each read)."""
    reads = [0]
    read = timer._txns.completed

    def counted(scope: str, stream: str, txn_id: uuid.UUID) -> TxnRecord | None:
        reads[0] += 1
        if callable(during):
            during()
        return read(scope, stream, txn_id)

    timer._txns.completed = counted  # type: ignore[method-assign]
    return reads


def test_a_timer_rescan_reads_each_completed_record_once_and_still_forgets_them(cluster) -> None:  # type: ignore[no-untyped-def]
    """A rescan every RESCAN_S used to read every completed record of the last
    TXN_COMPLETED_KEEP_S again: work growing with the transaction rate, for ever."""
    make_stream(cluster, 1)
    aborted_transactions(cluster, 6)
    clock = ManualClock(wall_start_ms=int(time.time() * 1000))
    timer = manual_timer(cluster, clock)
    reads = counting_completed_reads(timer)
    timer.run_once()
    assert reads[0] == 6
    for _ in range(3):
        clock.advance(RESCAN_S + 1)
        timer.run_once()  # rescans
    assert reads[0] == 6
    aborted_transactions(cluster, 1)  # read once, at the next rescan
    clock.advance(RESCAN_S + 1)
    timer.run_once()
    assert reads[0] == 7
    clock.advance(TXN_COMPLETED_KEEP_S + 1)
    timer.run_once()
    assert StreamMetadataStore(cluster.metadata).txns.list_completed("sc", "st") == []
    assert timer._completed_due == {}


def test_a_timer_stopped_during_a_long_rescan_stops_at_once(cluster) -> None:  # type: ignore[no-untyped-def]
    """Every controller restart waited for the old timer's whole rescan (seconds once many
    transactions had ended in the last TXN_COMPLETED_KEEP_S)."""
    make_stream(cluster, 1)
    aborted_transactions(cluster, 40)
    timer = manual_timer(cluster, ManualClock(wall_start_ms=int(time.time() * 1000)))
    reading = threading.Event()

    def slowly() -> None:
        reading.set()
        time.sleep(0.25)  # 40 reads: 10 s

    reads = counting_completed_reads(timer, slowly)
    timer.start()
    assert reading.wait(20)
    timer.stop()  # joins the thread for up to 5 s
    assert timer._thread is not None and not timer._thread.is_alive()
    assert reads[0] < 40
    assert timer._scanned_ms is None  # the cut-short rescan left no heap behind


def test_a_scale_does_not_wait_for_an_open_transaction_which_then_commits_rolling(
    cluster,
) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    c = cluster._controller
    s0, s1 = c.get_stream_info("sc", "st").segments
    old = c.create_transaction("sc", "st", 60.0)
    written_old = write_txn(cluster, old, b"OLD")
    epoch = c.scale_stream("sc", "st", [s1.segment_id], [(0.5, 0.75), (0.75, 1.0)])
    wait_for(lambda: c.check_scale("sc", "st", epoch))  # the open transaction holds nothing
    assert cluster.segments.get_info(s1.name).result(10).sealed
    assert status(cluster, old) is TxnStatus.OPEN
    new = c.create_transaction("sc", "st", 60.0)
    assert new.epoch == 1 and new.segments[0].segment_id == s0.segment_id
    written_new = write_txn(cluster, new, b"NEW")
    c.commit_transaction("sc", "st", new.txn_id)
    wait_for(lambda: status(cluster, new) is TxnStatus.COMMITTED)
    assert read_all(cluster, s0.name) == written_new[s0.name]
    # The old one commits by rolling: epoch 2 duplicates epoch 0's segments and holds it,
    # epoch 3 duplicates epoch 1's and is current.
    c.commit_transaction("sc", "st", old.txn_id)
    wait_for(lambda: status(cluster, old) is TxnStatus.COMMITTED)
    # Recorded COMMITTED (its events readable) just before the roll makes epoch 3 current.
    wait_for(lambda: c.get_stream_info("sc", "st").epoch == 3)
    info = c.get_stream_info("sc", "st")
    assert info.state is pr.StreamState.ACTIVE
    assert [(s.key_low, s.key_high) for s in info.segments] == [(0, 0.5), (0.5, 0.75), (0.75, 1)]
    dups = c.get_epoch_segments("sc", "st", 2)
    assert [(s.key_low, s.key_high) for s in dups] == [(0, 0.5), (0.5, 1)]
    for dup, parent in zip(dups, old.segments, strict=True):
        assert read_all(cluster, dup.name) == written_old[parent.name]
        assert cluster.segments.get_info(dup.name).result(10).sealed
    assert read_all(cluster, s0.name) == written_new[s0.name]  # nothing of the old one
    for segment in c.get_epoch_segments("sc", "st", 1):
        assert cluster.segments.get_info(segment.name).result(10).sealed
    # Readers go epoch 1 -> 2 -> 3: each duplicate succeeds the segments it overlaps.
    successors = c.get_successors("sc", "st", s0.segment_id)
    assert [r.segment_id for r in successors] == [dups[0].segment_id]
    assert {r.segment_id for r in c.get_successors("sc", "st", dups[1].segment_id)} == {
        s.segment_id for s in info.segments[1:]
    }
    assert c.list_transactions("sc", "st") == {}


def test_seal_aborts_open_transactions_and_waits_for_committing_ones(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    c = cluster._controller
    open_txn = c.create_transaction("sc", "st", 60.0)
    committing = c.create_transaction("sc", "st", 60.0)
    write_txn(cluster, open_txn, b"OPEN")
    written = write_txn(cluster, committing, b"C")
    cluster.commit_processor.stop()
    c.commit_transaction("sc", "st", committing.txn_id)
    assert not c.seal_stream("sc", "st")
    wait_for(lambda: status(cluster, open_txn) is TxnStatus.ABORTED)
    time.sleep(0.3)
    assert c.get_stream_info("sc", "st").state is pr.StreamState.SEALING
    with pytest.raises(pr.StreamSealedError):
        c.create_transaction("sc", "st", 10.0)
    cluster.restart_commit_processor()
    wait_for(lambda: c.get_stream_info("sc", "st").state is pr.StreamState.SEALED)
    assert status(cluster, committing) is TxnStatus.COMMITTED
    for parent in committing.segments:
        assert read_all(cluster, parent.name) == written[parent.name]
        assert cluster.segments.get_info(parent.name).result(10).sealed


def test_a_deleted_and_recreated_stream_starts_with_no_transactions(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    c = cluster._controller
    txn = c.create_transaction("sc", "st", 60.0)
    c.commit_transaction("sc", "st", txn.txn_id)
    wait_for(lambda: status(cluster, txn) is TxnStatus.COMMITTED)
    mgr = cluster.stream_manager()
    mgr.seal_stream("sc", "st")
    mgr.delete_stream("sc", "st")
    assert mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    with pytest.raises(pr.TxnNotFoundError):
        status(cluster, txn)
    again = c.create_transaction("sc", "st", 60.0)  # epoch 0 is open again
    assert again.epoch == 0 and c.list_transactions("sc", "st") == {again.txn_id: TxnStatus.OPEN}
    assert isinstance(again.txn_id, uuid.UUID)


def test_an_orphaned_creation_is_aborted_by_the_timer(cluster) -> None:  # type: ignore[no-untyped-def]
    """A creation cut short after its record: the lease runs out, the timer aborts it."""
    make_stream(cluster, 2)
    store = StreamMetadataStore(cluster.metadata)
    now = int(time.time() * 1000)
    txn_id = uuid.uuid4()
    store.txns.create("sc", "st", txn_id, 0, now + 1000, now + 60_000, now)
    parent = cluster._controller.get_stream_info("sc", "st").segments[0].name
    cluster._segment_helper().create_transaction_segments(
        [transaction_segment_name(parent, txn_id.bytes)]
    )  # only one of two segments was created
    clock = ManualClock(wall_start_ms=now + 2000)
    assert manual_timer(cluster, clock).run_once() == 1
    wait_for(
        lambda: (
            cluster._controller.check_transaction_status("sc", "st", txn_id) is TxnStatus.ABORTED
        )
    )
    with pytest.raises(pr.SegmentNotFoundError):
        cluster.segments.get_info(transaction_segment_name(parent, txn_id.bytes)).result(10)


def test_a_waiting_request_never_expires_and_does_not_hold_up_other_streams(cluster) -> None:  # type: ignore[no-untyped-def]
    """WAIT (a scale waiting for transactions, a commit for its epoch) outlives the
    request expiry, and while one stream waits another's requests run, even on one thread."""
    from pravega_ray.controller.event_processor import DONE, WAIT, RequestEventProcessor
    from pravega_ray.controller.request_stream import RequestStream
    from pravega_ray.naming import stream_segment_name

    stream = RequestStream(cluster._segment_helper(), stream_segment_name("_system", "_t", 0))
    calls: dict[str, int] = {"a": 0, "b": 0}

    def handle(body: dict[str, object]) -> str:
        name = str(body["stream"])
        calls[name] += 1
        return WAIT if name == "a" and calls["a"] < 20 else DONE

    processor = RequestEventProcessor(
        stream,
        handle,
        cluster.metadata,
        name="t",
        concurrency=1,
        postpone_s=0.01,
        postpone_max_s=0.01,
        expiry_s=0.0,
    )
    stream.post({"type": "x", "scope": "sc", "stream": "a", "posted_ms": 0})
    stream.post({"type": "x", "scope": "sc", "stream": "b", "posted_ms": 0})
    processor.start()
    try:
        wait_for(lambda: calls["b"] == 1 and processor.handled >= 1)
        assert calls["a"] < 20  # b ran while a was still waiting
        wait_for(lambda: processor.handled == 2)
        assert calls["a"] == 20  # retried until DONE, never dropped as expired
    finally:
        processor.stop()


def test_commits_waiting_on_one_streams_scale_hold_up_no_other_stream(cluster) -> None:  # type: ignore[no-untyped-def]
    """The outside probe's defect 1: a scale waited for an open transaction, two commits of
    that stream waited for the scale, and the commit processor (one thread) spun on them, so
    another stream's commit stayed COMMITTING and its seal hung. Now the other stream's
    commit and seal finish at once, and the waiting commits are tried a few times a second.
    (A scale no longer waits for an open transaction: this one is held after its new epoch
    is stored; the open one commits by rolling at the end.)"""
    from pravega_ray import metrics

    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", "a")
    mgr.create_stream("sc", "b")
    tw = cluster.create_transactional_writer("sc", "a", lease_s=600)
    open_txn = tw.begin_txn()
    open_txn.write_event(b"x", routing_key="k")
    segment = mgr.get_stream_info("sc", "a").segments[0]
    release = hold_workflows_after(cluster, "epoch added")
    scale = threading.Thread(
        target=lambda: mgr.scale_stream(
            "sc", "a", [segment.segment_id], [(0, 0.5), (0.5, 1)], timeout_s=60
        ),
        daemon=True,
    )
    with metrics.using_sink(metrics.InMemorySink()) as sink:
        scale.start()
        # Once the scale has stored its new epoch, new transactions are in it, and their
        # commits wait for it to become active.
        records = StreamMetadataStore(cluster.metadata).streams
        wait_for(lambda: records.highest_epoch("sc", "a") == 1)
        waiting = []
        for _ in range(3):
            txn = tw.begin_txn()
            txn.write_event(b"y", routing_key="k")
            txn.commit(wait=False)
            waiting.append(txn)
        other = cluster.create_transactional_writer("sc", "b").begin_txn()
        other.write_event(b"z", routing_key="k")
        other.commit()  # waits for COMMITTED (it stayed COMMITTING for good)
        assert mgr.seal_stream("sc", "b", timeout_s=30)
        assert [t.check_status() for t in waiting] == [TxnStatus.COMMITTING] * 3
        before = sink.value("pravega_controller_workflows", workflow="commit", outcome="postponed")
        time.sleep(2.0)
        after = sink.value("pravega_controller_workflows", workflow="commit", outcome="postponed")
        assert (after or 0) - (before or 0) <= 3 * 2 * 10  # was hundreds of thousands
        release.set()  # the scale goes on, then the waiting commits
        scale.join(30)
        for txn in waiting:
            wait_for(lambda t=txn: t.check_status() is TxnStatus.COMMITTED)
        open_txn.commit()  # of the old epoch: rolled
        assert open_txn.check_status() is TxnStatus.COMMITTED


def test_an_update_queued_behind_a_waiting_scale_holds_up_no_other_stream(cluster) -> None:  # type: ignore[no-untyped-def]
    """The request processor's side of defect 1: a scale waiting for a transaction and an
    update postponed behind it; another stream's seal and update finish meanwhile."""
    from pravega_ray import metrics

    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    for name in ("a", "b"):
        mgr.create_stream("sc", name)
    open_txn = cluster.create_transactional_writer("sc", "a", lease_s=600).begin_txn()
    open_txn.write_event(b"x", routing_key="k")
    segment = mgr.get_stream_info("sc", "a").segments[0]
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(1))
    scale = threading.Thread(
        target=lambda: mgr.scale_stream(
            "sc", "a", [segment.segment_id], [(0, 0.5), (0.5, 1)], timeout_s=60
        ),
        daemon=True,
    )
    update = threading.Thread(target=lambda: mgr.update_stream("sc", "a", config, 60), daemon=True)
    with metrics.using_sink(metrics.InMemorySink()) as sink:
        scale.start()
        wait_for(lambda: StreamMetadataStore(cluster.metadata).txn_epoch_closed("sc", "a", 0))
        update.start()
        time.sleep(0.5)
        assert mgr.update_stream("sc", "b", config, timeout_s=30)
        assert mgr.seal_stream("sc", "b", timeout_s=30)
        tried = sink.total("pravega_controller_workflows", outcome="postponed")
        time.sleep(2.0)
        assert sink.total("pravega_controller_workflows", outcome="postponed") - tried <= 2 * 2 * 10
        open_txn.commit()
        scale.join(30)
        update.join(30)
        assert not scale.is_alive() and not update.is_alive()
    # 1: the commit landed while the scale was still to run; 3: the scale ran first and the
    # transaction of epoch 0 committed by rolling (epochs 2 and 3).
    assert mgr.get_stream_info("sc", "a").epoch in (1, 3)
    assert open_txn.check_status() is TxnStatus.COMMITTED


def test_commits_of_many_transactions_are_each_contiguous_in_commit_order(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    c = cluster._controller
    txns = [c.create_transaction("sc", "st", 60.0) for _ in range(6)]
    written = [write_txn(cluster, t, b"T%d" % i) for i, t in enumerate(txns)]
    order = [3, 0, 5, 1, 4, 2]
    for i in order:
        c.commit_transaction("sc", "st", txns[i].txn_id)
    # A commit event posted again (posting is at least once) changes nothing.
    body = {"type": "commit", "scope": "sc", "stream": "st", "epoch": 0, "posted_ms": 0}
    commits = RequestStream(cluster._segment_helper(), COMMIT_SEGMENT)
    commits.post({**body, "txn": txns[order[0]].txn_id.hex})
    wait_for(lambda: all(status(cluster, t) is TxnStatus.COMMITTED for t in txns))
    for parent in txns[0].segments:
        expected = b"".join(written[i][parent.name] for i in order)
        assert read_all(cluster, parent.name) == expected
    wait_for(lambda: cluster.commit_processor.drain(1.0))
    for parent in txns[0].segments:
        assert read_all(cluster, parent.name) == b"".join(written[i][parent.name] for i in order)


def test_a_creation_that_finds_its_epoch_closed_moves_to_the_new_epoch(
    cluster, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    c = cluster._controller
    _, s1 = c.get_stream_info("sc", "st").segments
    old = c.create_transaction("sc", "st", 60.0)
    release = hold_workflows_after(cluster, "old segments sealed")
    epoch = c.scale_stream("sc", "st", [s1.segment_id], [(0.5, 1.0)])
    store = StreamMetadataStore(cluster.metadata)
    txns = store.txns
    wait_for(lambda: store.txn_epoch_closed("sc", "st", 0))  # the scale closed epoch 0 (held)
    tasks = cluster.core._transactions
    real = tasks._newest_epoch
    seen: list[int] = []

    def stale_once(scope: str, stream: str, current: int):  # type: ignore[no-untyped-def]
        seen.append(0)  # the first one read before the scale's new epoch was written
        if len(seen) == 1:
            return current, cluster.core._store.streams.epoch(scope, stream, current)
        return real(scope, stream, current)

    monkeypatch.setattr(tasks, "_newest_epoch", stale_once)
    new = c.create_transaction("sc", "st", 60.0)
    assert len(seen) == 2 and new.epoch == 1
    assert txns.list_epoch("sc", "st", 0) == [old.txn_id]  # its record under 0 was removed
    assert s1.segment_id not in [s.segment_id for s in new.segments]
    with pytest.raises(pr.SegmentNotFoundError):  # none on the old epoch's sealed-to-be one
        cluster.segments.get_info(transaction_segment_name(s1.name, new.txn_id.bytes)).result(10)
    release.set()
    wait_for(lambda: c.check_scale("sc", "st", epoch))
    assert status(cluster, new) is TxnStatus.OPEN
    assert status(cluster, old) is TxnStatus.OPEN  # the scale did not wait for it


def test_closed_marks_below_the_current_epoch_are_deleted_and_stale_creations_still_move_on(
    cluster, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A stream's ``txnclosed`` marks are not kept for its whole history (issue 26): once a
    scale made its epoch current, the marks below it go. A creation that read an epoch from
    before those scales then finds no mark, and still moves on: its epoch is below the
    current one it reads after the mark."""
    make_stream(cluster, 1)
    c = cluster._controller
    txns = StreamMetadataStore(cluster.metadata).txns
    for epoch in range(1, 6):
        (segment,) = c.get_stream_info("sc", "st").segments
        assert c.scale_stream("sc", "st", [segment.segment_id], [(0.0, 1.0)]) == epoch
        wait_for(lambda epoch=epoch: c.check_scale("sc", "st", epoch))
        wait_for(lambda epoch=epoch: all(e >= epoch for e in txns.closed_marks("sc", "st")))
    assert txns.closed_marks("sc", "st") == []
    assert not txns.is_closed("sc", "st", 2)  # the mark is gone...
    tasks = cluster.core._transactions
    real = tasks._newest_epoch
    seen: list[int] = []

    def stale_once(scope: str, stream: str, current: int):  # type: ignore[no-untyped-def]
        seen.append(current)
        if len(seen) == 1:  # ...and a creation read epoch 2 long ago
            return 2, cluster.core._store.streams.epoch(scope, stream, 2)
        return real(scope, stream, current)

    monkeypatch.setattr(tasks, "_newest_epoch", stale_once)
    txn = c.create_transaction("sc", "st", 60.0)
    assert len(seen) == 2 and txn.epoch == 5
    assert txns.list_epoch("sc", "st", 2) == []  # its record under epoch 2 was removed
    written = write_txn(cluster, txn, b"T")
    c.commit_transaction("sc", "st", txn.txn_id)
    wait_for(lambda: status(cluster, txn) is TxnStatus.COMMITTED)
    (parent,) = txn.segments
    assert read_all(cluster, parent.name) == written[parent.name]


def test_transactions_survive_a_restart_of_the_whole_cluster(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    c = cluster._controller
    txn = c.create_transaction("sc", "st", 60.0)
    written = write_txn(cluster, txn, b"T")
    cluster.restart()
    assert c.get_transaction("sc", "st", txn.txn_id) == txn
    c.commit_transaction("sc", "st", txn.txn_id)
    wait_for(lambda: status(cluster, txn) is TxnStatus.COMMITTED)
    for parent in txn.segments:
        assert read_all(cluster, parent.name) == written[parent.name]


def test_commits_while_a_container_restarts_again_and_again_end_exactly_once(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    c = cluster._controller
    txns = [c.create_transaction("sc", "st", 60.0) for _ in range(4)]
    written = [write_txn(cluster, t, b"T%d" % i) for i, t in enumerate(txns)]
    (parent,) = txns[0].segments
    container = container_for_segment(parent.name, cluster.container_count)
    stop = threading.Event()

    def restarts() -> None:
        while not stop.is_set():
            cluster.restart_container(container)
            stop.wait(0.05)

    thread = threading.Thread(target=restarts)
    thread.start()
    try:
        for txn in txns:
            for _ in range(200):  # the caller repeats a commit whose outcome is unknown
                try:
                    c.commit_transaction("sc", "st", txn.txn_id)
                    break
                except pr.RetriableError:
                    time.sleep(0.02)
        time.sleep(0.3)
    finally:
        stop.set()
        thread.join()
    wait_for(lambda: all(status(cluster, t) is TxnStatus.COMMITTED for t in txns), 40.0)
    assert read_all(cluster, parent.name) == b"".join(w[parent.name] for w in written)


def test_a_seal_during_a_scale_waiting_for_transactions_aborts_them(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    c = cluster._controller
    _, s1 = c.get_stream_info("sc", "st").segments
    txn = c.create_transaction("sc", "st", 600.0)
    write_txn(cluster, txn, b"T")
    epoch = c.scale_stream("sc", "st", [s1.segment_id], [(0.5, 1.0)])
    store = StreamMetadataStore(cluster.metadata)
    wait_for(lambda: store.txn_epoch_closed("sc", "st", 0))  # closed by the scale
    assert not c.seal_stream("sc", "st")
    wait_for(lambda: c.get_stream_info("sc", "st").state is pr.StreamState.SEALED)
    assert c.check_scale("sc", "st", epoch)
    assert status(cluster, txn) is TxnStatus.ABORTED
    assert read_all(cluster, s1.name) == b""


def test_a_damaged_transaction_record_is_named_and_the_others_still_time_out(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    c = cluster._controller
    damaged = c.create_transaction("sc", "st", 60.0)
    healthy = c.create_transaction("sc", "st", 5.0)
    key = f"txn/sc/st/{0:010d}/{damaged.txn_id.hex}"
    current = cluster.metadata.get(key)
    cluster.metadata.put(key, {**current.value, "status": "bogus"}, current.version)
    with pytest.raises(pr.DataCorruptionError):
        c.check_transaction_status("sc", "st", damaged.txn_id)
    assert status(cluster, healthy) is TxnStatus.OPEN
    clock = ManualClock(wall_start_ms=int(time.time() * 1000))
    clock.advance(6)
    assert manual_timer(cluster, clock).run_once() == 1
    wait_for(lambda: status(cluster, healthy) is TxnStatus.ABORTED)


@pytest.mark.parametrize("ending", [TxnStatus.COMMITTING, TxnStatus.ABORTING])
def test_an_ended_transaction_whose_active_record_is_not_removed_yet_is_not_listed(
    cluster, ending: TxnStatus
) -> None:  # type: ignore[no-untyped-def]
    """A processor ends a transaction by writing its completed record, then removing the
    active one: between the two, status says it ended, and the listing agrees."""
    make_stream(cluster, 1)
    cluster._stop_processors()  # nothing finishes the ending below
    txn = cluster._controller.create_transaction("sc", "st", 60.0)
    other = cluster._controller.create_transaction("sc", "st", 60.0)
    txns = StreamMetadataStore(cluster.metadata).txns
    record = txns.update(record_of(cluster, txn), status=ending.value)
    ended = TxnStatus.COMMITTED if ending is TxnStatus.COMMITTING else TxnStatus.ABORTED
    listed = cluster._controller.list_transactions("sc", "st")
    assert listed == {txn.txn_id: ending, other.txn_id: TxnStatus.OPEN}
    # The processor's first step of the end; it is killed before the second.
    key = TxnRecords.completed_key("sc", "st", txn.txn_id)
    cluster.metadata.put(
        key, {"status": ended.value, "epoch": record.epoch, "completed_ms": 1}, None
    )
    assert status(cluster, txn) is ended
    assert cluster._controller.list_transactions("sc", "st") == {other.txn_id: TxnStatus.OPEN}
