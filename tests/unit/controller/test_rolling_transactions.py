"""Rolling transactions (issue 26 item 5, Pravega's design): a scale never waits for an
open transaction; a transaction of an epoch a scale has sealed commits into duplicates of
its epoch's segments in a new epoch, atomically, after everything acknowledged before
``commit()``; killed at any step it ends once; a seal rolls what was asked to commit first.
On an in-process cluster (memory backends)."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

import pravega_ray as pr
from pravega_ray.contracts.records import TxnStatus
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.inprocess import InProcessCluster
from tests.checks import read_count
from tests.unit.controller.test_transaction_faults import die_once_after
from tests.unit.controller.test_transactions import make_stream, read_all, wait_for, write_txn

pytestmark = pytest.mark.timeout(120)

KEYS = [f"k{i}" for i in range(16)]


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=3)
    yield c
    c.shutdown()


def _split_all(mgr: pr.StreamManager) -> None:
    """Split every segment of ``sc/st`` in two (waits for the scale)."""
    for segment in mgr.get_stream_info("sc", "st").segments:
        mid = (segment.key_low + segment.key_high) / 2
        ranges = [(segment.key_low, mid), (mid, segment.key_high)]
        assert mgr.scale_stream("sc", "st", [segment.segment_id], ranges, timeout_s=30)


def _read_everything(cluster: InProcessCluster, group: str, expected: int) -> list[str]:
    """Every event of ``sc/st`` as read by a new one-reader group, in reading order: exactly
    ``expected`` (``tests.checks.read_count``: up to 30 s for them, then nothing more). It
    used to stop after 0.9 s without an event, which a loaded machine's first read outlasted
    (an empty list, seen once)."""
    cluster.create_reader_group("sc", group, pr.ReaderGroupConfig.for_streams("sc/st"))
    with cluster.create_reader("r", "sc", group, pr.Utf8Serializer()) as reader:
        return [e.event for e in read_count(reader, expected, poll_s=0.3)]


def test_a_scale_with_an_open_transaction_ends_at_once_and_the_commit_keeps_key_order(
    cluster,
) -> None:  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    make_stream(cluster, 2)
    writer = cluster.create_writer("sc", "st", pr.Utf8Serializer())
    tw = cluster.create_transactional_writer("sc", "st", pr.Utf8Serializer(), lease_s=600)
    for key in KEYS:
        writer.write_event(f"{key}:0", routing_key=key)
    txn = tw.begin_txn()
    for key in KEYS:
        txn.write_event(f"{key}:txn", routing_key=key)
    writer.flush()
    started = time.monotonic()
    _split_all(mgr)  # twice: the transaction's epoch is now two scales old
    _split_all(mgr)
    assert time.monotonic() - started < 20  # no wait for the open transaction
    assert txn.check_status() is TxnStatus.OPEN
    for key in KEYS:
        writer.write_event(f"{key}:1", routing_key=key)
    writer.flush()  # acknowledged before commit(): read before the transaction's events
    txn.commit()
    assert txn.check_status() is TxnStatus.COMMITTED
    for key in KEYS:
        writer.write_event(f"{key}:2", routing_key=key)
    writer.close()
    # COMMITTED (its events readable) just before the roll makes its last epoch current.
    wait_for(lambda: mgr.get_stream_info("sc", "st").epoch == 8)  # 6 scales, the roll's 2
    assert len(mgr.get_stream_info("sc", "st").segments) == 8
    events = _read_everything(cluster, "g", 4 * len(KEYS))
    assert sorted(events) == sorted(f"{k}:{n}" for k in KEYS for n in ("0", "1", "txn", "2"))
    for key in KEYS:
        assert [e.split(":")[1] for e in events if e.split(":")[0] == key] == ["0", "1", "txn", "2"]


def test_several_transactions_of_old_epochs_roll_in_commit_order(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    make_stream(cluster, 1)
    tw = cluster.create_transactional_writer("sc", "st", pr.Utf8Serializer(), lease_s=600)
    first, second = tw.begin_txn(), tw.begin_txn()
    _split_all(mgr)
    third = tw.begin_txn()  # of epoch 1
    _split_all(mgr)
    for n, t in enumerate((first, second, third)):
        for key in KEYS:
            t.write_event(f"{key}:{n}", routing_key=key)
    second.commit()
    third.commit()
    first.commit()
    assert [t.check_status() for t in (first, second, third)] == [TxnStatus.COMMITTED] * 3
    events = _read_everything(cluster, "g", 3 * len(KEYS))
    for key in KEYS:
        assert [e.split(":")[1] for e in events if e.split(":")[0] == key] == ["1", "2", "0"]


ROLL_STEPS = [
    "roll planned",
    "roll segments created",
    "roll epochs added",
    "rolled transactions merged",
    "roll segments sealed",
    "rolled transactions committed",
    "roll epoch current",
]


@pytest.mark.parametrize("step", ROLL_STEPS)
def test_the_processor_killed_at_every_step_of_a_roll_commits_once(cluster, step: str) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    c = cluster._controller
    old = c.create_transaction("sc", "st", 600.0)
    written = write_txn(cluster, old, b"OLD")
    _, s1 = c.get_stream_info("sc", "st").segments
    epoch = c.scale_stream("sc", "st", [s1.segment_id], [(0.5, 0.75), (0.75, 1.0)])
    wait_for(lambda: c.check_scale("sc", "st", epoch))
    killed: list[str] = []
    cluster.restart_processor(step=die_once_after(step, killed))
    c.commit_transaction("sc", "st", old.txn_id)
    wait_for(lambda: bool(killed))
    cluster.restart_processor()  # resumes from its checkpoint
    wait_for(lambda: c.check_transaction_status("sc", "st", old.txn_id) is TxnStatus.COMMITTED)
    wait_for(lambda: c.get_stream_info("sc", "st").epoch == 3)
    records = StreamMetadataStore(cluster.metadata).streams
    wait_for(lambda: records.scale_record("sc", "st") is None)  # its clean-up too
    txns = StreamMetadataStore(cluster.metadata).txns
    wait_for(lambda: all(e >= 3 for e in txns.closed_marks("sc", "st")))  # none below 3
    info = c.get_stream_info("sc", "st")
    assert info.state is pr.StreamState.ACTIVE
    dups = c.get_epoch_segments("sc", "st", 2)
    for dup, parent in zip(dups, old.segments, strict=True):
        assert read_all(cluster, dup.name) == written[parent.name]  # once
    # The stream scales on as usual afterwards.
    last = info.segments[-1]
    assert c.scale_stream("sc", "st", [last.segment_id], [(0.75, 0.9), (0.9, 1.0)]) == 4
    wait_for(lambda: c.check_scale("sc", "st", 4))


def test_a_roll_request_that_finishes_another_epoch_s_roll_then_rolls_its_own(cluster) -> None:  # type: ignore[no-untyped-def]
    """A roll request handled while the roll of another epoch was stored (that roll's own
    request waiting at the back of the queue) finished that roll and answered DONE: its
    own epoch's transaction, marked ``rolling`` (so never handed over again), stayed
    COMMITTING for ever."""
    make_stream(cluster, 2)
    c = cluster._controller
    _, s1 = c.get_stream_info("sc", "st").segments
    old1 = c.create_transaction("sc", "st", 600.0)  # of epoch 0
    write_txn(cluster, old1, b"ONE")
    assert c.scale_stream("sc", "st", [s1.segment_id], [(0.5, 0.75), (0.75, 1.0)]) == 1
    wait_for(lambda: c.check_scale("sc", "st", 1))
    old2 = c.create_transaction("sc", "st", 600.0)  # of epoch 1
    write_txn(cluster, old2, b"TWO")
    last = c.get_stream_info("sc", "st").segments[-1]
    assert c.scale_stream("sc", "st", [last.segment_id], [(0.75, 0.9), (0.9, 1.0)]) == 2
    wait_for(lambda: c.check_scale("sc", "st", 2))
    killed: list[str] = []
    cluster.restart_processor(step=die_once_after("roll planned", killed))
    c.commit_transaction("sc", "st", old1.txn_id)
    wait_for(lambda: bool(killed))  # epoch 0's roll stored, not run
    c.commit_transaction("sc", "st", old2.txn_id)
    records = StreamMetadataStore(cluster.metadata).txns
    wait_for(lambda: getattr(records.active("sc", "st", 1, old2.txn_id), "rolling", False))
    body = {"type": "roll", "scope": "sc", "stream": "st", "epoch": 1, "posted_ms": 0}
    assert cluster.new_workflows().handle(body) == "done"
    for txn in (old1, old2):
        assert c.check_transaction_status("sc", "st", txn.txn_id) is TxnStatus.COMMITTED
    assert c.get_stream_info("sc", "st").epoch == 6  # two rolls of two epochs each
    cluster.restart_processor()  # reads both roll requests again: nothing left to do
    wait_for(lambda: StreamMetadataStore(cluster.metadata).streams.scale_record("sc", "st") is None)
    assert c.get_stream_info("sc", "st").epoch == 6


def test_a_seal_rolls_a_commit_of_an_old_epoch_first_and_aborts_open_ones(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    c = cluster._controller
    mgr = cluster.stream_manager()
    committing = c.create_transaction("sc", "st", 600.0)
    open_old = c.create_transaction("sc", "st", 600.0)
    written = write_txn(cluster, committing, b"C")
    _, s1 = c.get_stream_info("sc", "st").segments
    epoch = c.scale_stream("sc", "st", [s1.segment_id], [(0.5, 0.75), (0.75, 1.0)])
    wait_for(lambda: c.check_scale("sc", "st", epoch))
    open_new = c.create_transaction("sc", "st", 600.0)
    cluster.commit_processor.stop()  # the commit stays asked, not rolled yet
    c.commit_transaction("sc", "st", committing.txn_id)
    assert mgr.seal_stream("sc", "st", timeout_s=30)
    assert c.check_transaction_status("sc", "st", committing.txn_id) is TxnStatus.COMMITTED
    for txn in (open_old, open_new):
        txn_id = txn.txn_id
        wait_for(lambda t=txn_id: c.check_transaction_status("sc", "st", t) is TxnStatus.ABORTED)
    dups = c.get_epoch_segments("sc", "st", 2)
    for dup, parent in zip(dups, committing.segments, strict=True):
        assert read_all(cluster, dup.name) == written[parent.name]
    cluster.restart_commit_processor()  # its event finds the transaction committed: done


def test_an_open_transaction_of_an_old_epoch_is_listed_found_and_timed_out(cluster) -> None:  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    make_stream(cluster, 1)
    c = cluster._controller
    # A lease the three scales fit in on a loaded machine too (2 s did not, once).
    old = c.create_transaction("sc", "st", 6.0)
    for _ in range(3):
        _split_all(mgr)
    assert c.list_transactions("sc", "st") == {old.txn_id: TxnStatus.OPEN}
    assert c.get_transaction("sc", "st", old.txn_id).epoch == 0
    wait_for(lambda: c.check_transaction_status("sc", "st", old.txn_id) is TxnStatus.ABORTED, 30)
    # Nothing holds the old epochs any more: the next scale moves the low epoch up.
    _split_all(mgr)
    value = StreamMetadataStore(cluster.metadata).streams.get("sc", "st")[0]
    assert value["txn_low_epoch"] == value["epoch"]


def test_commits_racing_scales_each_land_once(cluster) -> None:  # type: ignore[no-untyped-def]
    """Transactions begun and committed while the stream scales again and again: each
    committed one whole, once, per key after what was acknowledged before its commit."""
    mgr = cluster.stream_manager()
    make_stream(cluster, 1)
    tw = cluster.create_transactional_writer("sc", "st", pr.Utf8Serializer(), lease_s=600)
    stop = threading.Event()
    errors: list[BaseException] = []

    def scaler() -> None:
        try:
            while not stop.is_set():
                info = mgr.get_stream_info("sc", "st")
                if len(info.segments) >= 8:
                    return
                s = info.segments[0]
                mid = (s.key_low + s.key_high) / 2
                # A rolling commit may hold the stream (ScaleConflictError): try again.
                with contextlib.suppress(pr.ScaleConflictError):
                    mgr.scale_stream(
                        "sc", "st", [s.segment_id], [(s.key_low, mid), (mid, s.key_high)]
                    )
        except BaseException as e:  # reported below
            errors.append(e)

    thread = threading.Thread(target=scaler)
    thread.start()
    committed = []
    for n in range(12):
        txn = tw.begin_txn()
        for key in KEYS[:4]:
            txn.write_event(f"{key}:{n}", routing_key=key)
        time.sleep(0.02)
        txn.commit()
        committed.append(n)
    stop.set()
    thread.join(60)
    assert not errors
    events = _read_everything(cluster, "g", 4 * len(committed))
    for key in KEYS[:4]:
        assert [int(e.split(":")[1]) for e in events if e.split(":")[0] == key] == committed


def test_a_transaction_begun_while_a_roll_makes_its_segments_is_created(cluster) -> None:  # type: ignore[no-untyped-def]
    """A roll held after creating its segments (slow container calls): a transaction begun
    then is created (in the current epoch, still open; it commits by rolling later). The
    roll closed the current epoch before its rows existed, at first, and a creation then
    failed (TxnFailedError): its retries found the closed epoch and no newer one."""
    make_stream(cluster, 2)
    c = cluster._controller
    old = c.create_transaction("sc", "st", 600.0)
    _, s1 = c.get_stream_info("sc", "st").segments
    epoch = c.scale_stream("sc", "st", [s1.segment_id], [(0.5, 0.75), (0.75, 1.0)])
    wait_for(lambda: c.check_scale("sc", "st", epoch))
    release, held = threading.Event(), threading.Event()

    def hold(name: str) -> None:
        if name == "roll segments created":
            held.set()
            release.wait(60)

    cluster.restart_processor(step=hold)
    c.commit_transaction("sc", "st", old.txn_id)
    wait_for(held.is_set)
    during = c.create_transaction("sc", "st", 600.0)
    assert during.epoch == 1
    release.set()
    wait_for(lambda: c.check_transaction_status("sc", "st", old.txn_id) is TxnStatus.COMMITTED)
    c.commit_transaction("sc", "st", during.txn_id)  # of epoch 1, now old: rolled too
    wait_for(lambda: c.check_transaction_status("sc", "st", during.txn_id) is TxnStatus.COMMITTED)
    wait_for(lambda: c.get_stream_info("sc", "st").epoch == 5)


@pytest.mark.parametrize("step", ["roll epochs added", "rolled transactions merged"])
def test_a_rolling_commit_while_a_container_restarts_lands_once(cluster, step: str) -> None:  # type: ignore[no-untyped-def]
    """The issue's fault: a container restarted in the middle of a rolling commit (before
    the merges, and after them before the seals); the transaction lands once, whole."""
    make_stream(cluster, 3)
    c = cluster._controller
    old = c.create_transaction("sc", "st", 600.0)
    written = write_txn(cluster, old, b"OLD")
    s0 = c.get_stream_info("sc", "st").segments[0]
    epoch = c.scale_stream("sc", "st", [s0.segment_id], [(0.0, 0.1), (0.1, 1 / 3)])
    wait_for(lambda: c.check_scale("sc", "st", epoch))
    restarted: list[int] = []

    def restart_all_once(name: str) -> None:
        if name == step and not restarted:
            for container_id in range(cluster.container_count):
                cluster.restart_container(container_id)
                restarted.append(container_id)

    cluster.restart_processor(step=restart_all_once)
    c.commit_transaction("sc", "st", old.txn_id)
    wait_for(lambda: c.check_transaction_status("sc", "st", old.txn_id) is TxnStatus.COMMITTED)
    wait_for(lambda: c.get_stream_info("sc", "st").epoch == 3)
    assert restarted
    dups = c.get_epoch_segments("sc", "st", 2)
    for dup, parent in zip(dups, old.segments, strict=True):
        assert read_all(cluster, dup.name) == written[parent.name]
