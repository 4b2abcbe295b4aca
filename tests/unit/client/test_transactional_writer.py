"""Transactions on the in-process cluster (no Ray): visibility, order, leases, bad input.

Events are JSON objects ``{"k": routing key, "n": sequence, "s": source}``; ``s`` is
``"plain"`` for a plain writer's events and the transaction's label otherwise.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray import constants
from pravega_ray.client import transactional_writer
from pravega_ray.client.controller_connection import ControllerClient
from pravega_ray.constants import TXN_LEASE_S_MAX
from pravega_ray.contracts.controller_service import ControllerService, method_name
from pravega_ray.inprocess import InProcessCluster
from tests.checks import by_segment, read_exactly

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster():
    c = InProcessCluster(container_count=3, storage_flush_interval_s=0.05)
    yield c
    c.shutdown()


def make_stream(cluster: InProcessCluster, segments: int = 1) -> None:
    mgr = cluster.stream_manager()
    assert mgr.create_scope("sc")
    assert mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))


def read_everything(cluster: InProcessCluster, expected: int) -> list[Any]:
    """Every event of ``sc/st``: exactly ``expected`` of them (``checks.read_exactly``)."""
    return read_exactly(cluster, "sc", "st", expected)


def assert_contiguous(segments: dict[str, list[dict[str, Any]]], source: str) -> None:
    """``source``'s events on each segment form one run, each key's in order, none twice."""
    for segment, events in segments.items():
        at = [i for i, e in enumerate(events) if e["s"] == source]
        assert at == list(range(at[0], at[0] + len(at))) if at else True, (
            f"{source}'s events on {segment} are not contiguous"
        )
    per_key: dict[str, list[int]] = defaultdict(list)
    for events in segments.values():
        for e in events:
            if e["s"] == source:
                per_key[e["k"]].append(e["n"])
    for key, numbers in per_key.items():
        assert numbers == sorted(set(numbers)), f"{source}: key {key} out of order or twice"


def txn_writer(cluster: InProcessCluster, **kwargs: Any) -> pr.TransactionalEventStreamWriter:
    return cluster.create_transactional_writer("sc", "st", pr.JsonSerializer(), **kwargs)


def wait_status(txn: pr.Transaction, status: pr.TxnStatus, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while txn.check_status() is not status:
        assert time.monotonic() < deadline, f"{txn} is {txn.check_status()}, not {status}"
        time.sleep(0.05)


# --- visibility and order ---------------------------------------------------------------------
def test_commit_puts_the_txn_after_every_event_acked_before_it(cluster) -> None:
    make_stream(cluster, 1)
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as plain, txn_writer(cluster) as tw:
        for n in range(100):
            plain.write_event({"k": "a", "n": n, "s": "plain"}, routing_key="a")
        plain.flush()
        txn = tw.begin_txn()
        assert isinstance(txn.txn_id, uuid.UUID)
        assert txn.check_status() is pr.TxnStatus.OPEN
        for n in range(100):
            txn.write_event({"k": "a", "n": n, "s": "txn"}, routing_key="a")
        txn.flush()
        for n in range(100, 200):
            plain.write_event({"k": "a", "n": n, "s": "plain"}, routing_key="a")
        plain.flush()
        read_everything(cluster, 200)  # nothing of the transaction is visible yet
        txn.commit()
        assert txn.check_status() is pr.TxnStatus.COMMITTED
        for n in range(200, 300):
            plain.write_event({"k": "a", "n": n, "s": "plain"}, routing_key="a")
        plain.flush()
    (events,) = by_segment(read_everything(cluster, 400)).values()
    assert [(e["s"], e["n"]) for e in events] == (
        [("plain", n) for n in range(200)]
        + [("txn", n) for n in range(100)]
        + [("plain", n) for n in range(200, 300)]
    )


def test_txn_over_four_segments_is_contiguous_on_each_beside_a_busy_writer(cluster) -> None:
    make_stream(cluster, 4)
    stop = threading.Event()
    written = [0]

    def plain_load() -> None:
        with cluster.create_writer("sc", "st", pr.JsonSerializer()) as plain:
            while not stop.is_set():
                n = written[0]
                plain.write_event(
                    {"k": f"p{n % 16}", "n": n, "s": "plain"}, routing_key=f"p{n % 16}"
                )
                written[0] += 1
                if n % 200 == 0:
                    plain.flush()
                    time.sleep(0.002)  # a busy writer, not one that outruns the reader's check

    load = threading.Thread(target=plain_load)
    load.start()
    try:
        with txn_writer(cluster) as tw:
            txn = tw.begin_txn()
            for n in range(2000):
                txn.write_event({"k": f"k{n % 40}", "n": n, "s": "txn"}, routing_key=f"k{n % 40}")
            txn.commit()
    finally:
        stop.set()
        load.join()  # its count is final only once it closed its writer
    segments = by_segment(read_everything(cluster, 2000 + written[0]))
    assert len(segments) == 4
    assert all(any(e["s"] == "txn" for e in es) for es in segments.values())
    assert_contiguous(segments, "txn")
    assert sorted(e["n"] for es in segments.values() for e in es if e["s"] == "txn") == list(
        range(2000)
    )


def test_aborted_txn_never_appears(cluster) -> None:
    make_stream(cluster, 2)
    with txn_writer(cluster) as tw:
        txn = tw.begin_txn()
        for n in range(50):
            txn.write_event({"k": "a", "n": n, "s": "txn"}, routing_key=str(n))
        txn.flush()
        txn.abort()
        txn.abort()  # again: nothing more
        wait_status(txn, pr.TxnStatus.ABORTED)
        with pytest.raises(pr.TxnFailedError):
            txn.write_event({"k": "a", "n": 99, "s": "txn"})
        with pytest.raises(pr.TxnFailedError):
            txn.commit()
        kept = tw.begin_txn()
        kept.write_event({"k": "a", "n": 0, "s": "kept"})
        kept.commit()
    assert [e.event["s"] for e in read_everything(cluster, 1)] == ["kept"]


def test_write_events_batches_of_one_key_commit_in_order_beside_single_events(cluster) -> None:
    make_stream(cluster, 3)
    with txn_writer(cluster) as tw:
        txn = tw.begin_txn()
        for key in ("a", "b"):
            txn.write_events([{"k": key, "n": n, "s": "txn"} for n in range(100)], key)
        txn.write_event({"k": "a", "n": 100, "s": "txn"}, routing_key="a")
        txn.write_events([{"k": "a", "n": n, "s": "txn"} for n in range(101, 110)], "a")
        with pytest.raises(pr.InvalidArgumentError):
            txn.write_events([], "a")  # nothing queued
        with pytest.raises(pr.InvalidArgumentError):
            txn.write_events(b"not a batch", "a")  # type: ignore[arg-type]
        txn.commit()
        with pytest.raises(pr.TxnFailedError):
            txn.write_events([{"k": "a", "n": 110, "s": "txn"}], "a")
    events = [e.event for e in read_everything(cluster, 210)]
    for key, count in (("a", 110), ("b", 100)):
        assert [e["n"] for e in events if e["k"] == key] == list(range(count))


def test_commit_twice_is_a_no_op_and_writes_after_commit_fail(cluster) -> None:
    make_stream(cluster, 1)
    with txn_writer(cluster) as tw:
        txn = tw.begin_txn()
        txn.write_event({"k": "a", "n": 0, "s": "txn"})
        txn.commit()
        txn.commit()
        with pytest.raises(pr.TxnFailedError):
            txn.write_event({"k": "a", "n": 1, "s": "txn"})
        with pytest.raises(pr.TxnFailedError):
            txn.abort()
        assert tw.get_txn(txn.txn_id).check_status() is pr.TxnStatus.COMMITTED
        tw.get_txn(txn.txn_id).commit()  # a no-op through another handle too
    assert len(read_everything(cluster, 1)) == 1


def test_commit_without_waiting_returns_while_committing_and_completes(cluster) -> None:
    make_stream(cluster, 2)
    with txn_writer(cluster) as tw:
        txn = tw.begin_txn()
        for n in range(10):
            txn.write_event({"k": "a", "n": n, "s": "txn"}, routing_key="a")
        txn.commit(wait=False)
        assert txn.check_status() in (pr.TxnStatus.COMMITTING, pr.TxnStatus.COMMITTED)
        wait_status(txn, pr.TxnStatus.COMMITTED)
        txn.commit()
    assert len(read_everything(cluster, 10)) == 10


def test_get_txn_from_a_second_writer_writes_and_commits(cluster) -> None:
    make_stream(cluster, 2)
    with txn_writer(cluster) as first, txn_writer(cluster) as second:
        txn = first.begin_txn()
        for n in range(20):
            txn.write_event({"k": "a", "n": n, "s": "txn"}, routing_key="a")
        txn.flush()
        resumed = second.get_txn(txn.txn_id)
        assert resumed.txn_id == txn.txn_id
        for n in range(20, 40):
            resumed.write_event({"k": "a", "n": n, "s": "txn"}, routing_key="a")
        resumed.commit()
        assert txn.check_status() is pr.TxnStatus.COMMITTED
        with pytest.raises(pr.TxnNotFoundError):
            second.get_txn(uuid.uuid4())
    events = read_everything(cluster, 40)
    assert [e.event["n"] for e in events] == list(range(40))


def test_get_txn_can_abort_a_txn_begun_elsewhere(cluster) -> None:
    make_stream(cluster, 1)
    with txn_writer(cluster) as first, txn_writer(cluster) as second:
        txn = first.begin_txn()
        txn.write_event({"k": "a", "n": 0, "s": "txn"})
        txn.flush()
        second.get_txn(txn.txn_id).abort()
        wait_status(txn, pr.TxnStatus.ABORTED)
        with pytest.raises(pr.TxnFailedError):
            txn.commit()
    read_everything(cluster, 0)


def test_context_manager_commits_on_a_clean_exit(cluster) -> None:
    make_stream(cluster, 1)
    with txn_writer(cluster) as tw, tw.begin_txn() as txn:
        txn.write_event({"k": "a", "n": 0, "s": "txn"})
    assert txn.check_status() is pr.TxnStatus.COMMITTED
    assert len(read_everything(cluster, 1)) == 1


def test_context_manager_aborts_on_an_exception(cluster) -> None:
    make_stream(cluster, 1)
    with txn_writer(cluster) as tw:
        with pytest.raises(KeyError), tw.begin_txn() as txn:
            txn.write_event({"k": "a", "n": 0, "s": "txn"})
            raise KeyError("boom")
        assert txn.check_status() in (pr.TxnStatus.ABORTING, pr.TxnStatus.ABORTED)
    read_everything(cluster, 0)


def test_txn_of_no_events_commits(cluster) -> None:
    make_stream(cluster, 3)
    with txn_writer(cluster) as tw:
        txn = tw.begin_txn()
        txn.flush()
        txn.commit()
        assert txn.check_status() is pr.TxnStatus.COMMITTED
    read_everything(cluster, 0)


def test_txn_of_ten_thousand_events(cluster) -> None:
    make_stream(cluster, 2)
    n = 10_000
    with txn_writer(cluster) as tw:
        txn = tw.begin_txn()
        for i in range(n):
            txn.write_event({"k": f"k{i % 8}", "n": i, "s": "txn"}, routing_key=f"k{i % 8}")
        txn.commit()
    segments = by_segment(read_everything(cluster, n))
    assert_contiguous(segments, "txn")


def test_container_restarts_while_the_txn_writes_duplicate_nothing(cluster) -> None:
    make_stream(cluster, 3)
    n = 6000
    stop = threading.Event()

    def chaos() -> None:
        while not stop.is_set():
            time.sleep(0.03)
            cluster.restart_container(1)

    chaos_thread = threading.Thread(target=chaos)
    with txn_writer(cluster) as tw:
        txn = tw.begin_txn()
        chaos_thread.start()
        try:
            for i in range(n):
                txn.write_event({"k": f"k{i % 30}", "n": i, "s": "txn"}, routing_key=f"k{i % 30}")
                if i % 500 == 0:
                    time.sleep(0.01)
            txn.flush()
        finally:
            stop.set()
            chaos_thread.join(30)
        txn.commit()
    segments = by_segment(read_everything(cluster, n))
    assert_contiguous(segments, "txn")
    assert sorted(e["n"] for es in segments.values() for e in es) == list(range(n))


# --- leases -------------------------------------------------------------------------------------
def test_lease_runs_out_once_pinging_stops(cluster) -> None:
    make_stream(cluster, 1)
    tw = txn_writer(cluster, lease_s=1.0)
    txn = tw.begin_txn()
    txn.write_event({"k": "a", "n": 0, "s": "txn"})
    txn.flush()
    time.sleep(1.5)  # pinged: still open
    assert txn.check_status() is pr.TxnStatus.OPEN
    tw.close()  # stops pinging, aborts nothing
    wait_status(txn, pr.TxnStatus.ABORTED)
    with pytest.raises(pr.TxnFailedError):
        txn.commit()
    read_everything(cluster, 0)


def test_a_refused_ping_fails_the_txn(cluster) -> None:
    make_stream(cluster, 1)
    with txn_writer(cluster, lease_s=0.5, ping_interval_s=5.0) as tw:
        txn = tw.begin_txn()
        txn.write_event({"k": "a", "n": 0, "s": "txn"})
        txn.flush()
        wait_status(txn, pr.TxnStatus.ABORTED)
        assert tw.ping_all() == 0  # refused: the transaction is marked failed
        with pytest.raises((pr.TxnFailedError, pr.TxnNotFoundError)):
            txn.write_event({"k": "a", "n": 1, "s": "txn"})
        with pytest.raises((pr.TxnFailedError, pr.TxnNotFoundError)):
            txn.commit()
        assert tw.ping_all() == 0  # no longer pinged


# --- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "lease_s", [0, -1.0, float("nan"), float("inf"), True, "30", TXN_LEASE_S_MAX * 2]
)
def test_bad_lease_is_refused(cluster, lease_s: Any) -> None:
    make_stream(cluster, 1)
    with pytest.raises(pr.InvalidArgumentError):
        txn_writer(cluster, lease_s=lease_s)


def test_bad_arguments_raise_typed_errors_and_change_nothing(cluster) -> None:
    make_stream(cluster, 1)
    with pytest.raises(pr.InvalidNameError):
        cluster.create_transactional_writer("sc", "bad/name", pr.JsonSerializer())
    with pytest.raises(pr.InvalidArgumentError):
        cluster.create_transactional_writer("sc", "st", pr.JsonSerializer, lease_s=1.0)
    with pytest.raises(pr.InvalidArgumentError):
        cluster.create_transactional_writer("sc", "st", pr.JsonSerializer(), config={})
    with pytest.raises(pr.StreamNotFoundError):
        cluster.create_transactional_writer("sc", "missing", pr.JsonSerializer()).begin_txn()
    with txn_writer(cluster) as tw:
        with pytest.raises(pr.InvalidArgumentError):
            tw.get_txn(str(uuid.uuid4()))  # type: ignore[arg-type]
        txn = tw.begin_txn()
        with pytest.raises(pr.InvalidArgumentError):
            txn.commit(wait="yes")  # type: ignore[arg-type]
        with pytest.raises(pr.InvalidArgumentError):
            txn.flush(timeout=-1)
        with pytest.raises(pr.SerializationError):
            txn.write_event({"k": object()})
        with pytest.raises(pr.InvalidArgumentError):
            txn.write_event({"k": "a", "n": 0, "s": "txn"}, routing_key=5)  # type: ignore[arg-type]
        txn.write_event({"k": "a", "n": 0, "s": "txn"})
        txn.commit()
    assert len(read_everything(cluster, 1)) == 1


def test_closed_writer_refuses_new_txns_and_writes(cluster) -> None:
    make_stream(cluster, 1)
    tw = txn_writer(cluster)
    txn = tw.begin_txn()
    txn.write_event({"k": "a", "n": 0, "s": "txn"})
    tw.close()
    tw.close()
    with pytest.raises(pr.ClientClosedError):
        tw.begin_txn()
    with pytest.raises(pr.ClientClosedError):
        txn.write_event({"k": "a", "n": 1, "s": "txn"})
    txn.commit()  # the handle still commits what was written before close
    assert len(read_everything(cluster, 1)) == 1


def test_a_sealed_stream_takes_no_txn(cluster) -> None:
    make_stream(cluster, 1)
    cluster.stream_manager().seal_stream("sc", "st")
    with txn_writer(cluster) as tw, pytest.raises(pr.StreamSealedError):
        tw.begin_txn()


# --- commit(): one controller call that waits -------------------------------------------------
class CountingInvoker:
    """The cluster's controller, counting the calls by name; the reply of the first
    ``lose`` call named ``lose_name`` is lost after it ran (ControllerUnavailableError)."""

    def __init__(self, cluster: InProcessCluster, lose_name: str = "", lose: int = 0) -> None:
        self._inner = cluster._locked
        self.calls: list[str] = []
        self._lose_name, self._lose = lose_name, lose

    def invoke(self, method: Any, /, *args: Any, **kwargs: Any) -> Any:
        name = method_name(method)
        self.calls.append(name)
        result = self._inner.invoke(method, *args, **kwargs)
        if name == self._lose_name and self._lose > 0:
            self._lose -= 1
            raise pr.ControllerUnavailableError(f"reply of {name} lost")
        return result


def counted_writer(
    cluster: InProcessCluster, invoker: CountingInvoker
) -> pr.TransactionalEventStreamWriter:
    client = ControllerClient(invoker, pause_s=0.0)
    return pr.TransactionalEventStreamWriter(
        "sc", "st", pr.JsonSerializer(), client, cluster._segments, ping_interval_s=600.0
    )


def test_begin_and_commit_are_one_controller_call_each_and_commit_does_not_poll(cluster) -> None:
    make_stream(cluster, 2)
    invoker = CountingInvoker(cluster)
    with counted_writer(cluster, invoker) as tw:
        txn = tw.begin_txn()
        assert invoker.calls == ["create_transaction"]
        for n in range(100):
            txn.write_event({"k": str(n % 4), "n": n, "s": "txn"}, routing_key=str(n % 4))
        txn.commit()  # returns COMMITTED: the events are readable now
        assert invoker.calls == ["create_transaction", "commit_transaction_and_wait"]
        assert len(read_everything(cluster, 100)) == 100


def test_a_commit_whose_reply_is_lost_is_repeated_and_commits_once(cluster) -> None:
    make_stream(cluster, 2)
    invoker = CountingInvoker(cluster, "commit_transaction_and_wait", lose=2)
    with counted_writer(cluster, invoker) as tw:
        txn = tw.begin_txn()
        for n in range(50):
            txn.write_event({"k": "a", "n": n, "s": "txn"}, routing_key="a")
        txn.commit()
        assert invoker.calls.count("commit_transaction_and_wait") == 3
        assert txn.check_status() is pr.TxnStatus.COMMITTED
    events = read_everything(cluster, 50)
    assert [e.event["n"] for e in events] == list(range(50))


def test_commit_times_out_while_the_processor_is_down_and_completes_later(
    cluster, monkeypatch
) -> None:
    make_stream(cluster, 1)
    monkeypatch.setattr(constants, "WORKFLOW_WAIT_S", 0.6)
    monkeypatch.setattr(transactional_writer, "COMMIT_CALL_WAIT_S", 0.25)
    invoker = CountingInvoker(cluster)
    with counted_writer(cluster, invoker) as tw:
        txn = tw.begin_txn()
        txn.write_event({"k": "a", "n": 0, "s": "txn"})
        cluster.commit_processor.stop()  # as if its actor died
        with pytest.raises(TimeoutError):
            txn.commit()
        # Calls that each waited (0.25 + 0.25 + 0.1 s), not a poll loop.
        assert invoker.calls.count("commit_transaction_and_wait") == 3
        assert txn.check_status() is pr.TxnStatus.COMMITTING
        with pytest.raises(pr.TxnFailedError):
            txn.write_event({"k": "a", "n": 1, "s": "txn"})
        cluster.restart_commit_processor()
        monkeypatch.setattr(constants, "WORKFLOW_WAIT_S", 30.0)
        txn.commit()  # waits again: COMMITTED
        assert txn.check_status() is pr.TxnStatus.COMMITTED
    assert len(read_everything(cluster, 1)) == 1


def test_four_writers_commit_side_by_side_each_contiguous(cluster) -> None:
    make_stream(cluster, 2)
    errors: list[BaseException] = []

    def one(label: str) -> None:
        try:
            with txn_writer(cluster) as tw:
                for t in range(5):
                    with tw.begin_txn() as txn:
                        for n in range(20):
                            k = f"{label}{n % 2}"
                            txn.write_event({"k": k, "n": t * 20 + n, "s": f"{label}{t}"}, k)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(c,)) for c in "abcd"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    segments = by_segment(read_everything(cluster, 4 * 5 * 20))
    for label in "abcd":
        for t in range(5):
            assert_contiguous(segments, f"{label}{t}")


def test_a_ping_answered_while_the_commit_waits_does_not_fail_the_transaction(cluster) -> None:
    make_stream(cluster, 1)
    writers: list[pr.TransactionalEventStreamWriter] = []

    class PingMidCommit(CountingInvoker):
        """The writer's ping round runs while its commit call is under way (after the
        transaction became COMMITTING): the ping is answered TxnFailedError."""

        def invoke(self, method: Any, /, *args: Any, **kwargs: Any) -> Any:
            if method_name(method) == "commit_transaction_and_wait":
                self._inner.invoke(ControllerService.commit_transaction, *args[:3])
                assert writers[0].ping_all() == 0  # refused: "is committing"
            return super().invoke(method, *args, **kwargs)

    invoker = PingMidCommit(cluster)
    with counted_writer(cluster, invoker) as tw:
        writers.append(tw)
        txn = tw.begin_txn()
        txn.write_event({"k": "a", "n": 0, "s": "txn"})
        txn.commit()
        assert "ping_transaction" in invoker.calls
        txn.commit()  # a no-op: the handle did not take the ping's answer as a failure
        assert txn.check_status() is pr.TxnStatus.COMMITTED
    assert len(read_everything(cluster, 1)) == 1


@pytest.mark.parametrize("landed", [True, False])
def test_a_commit_whose_outcome_stayed_unknown_is_asked_again_whatever_a_ping_answered(
    cluster, landed: bool
) -> None:  # type: ignore[no-untyped-def]
    # The commit call fails with an unknown outcome; the ping round then finds the
    # transaction not open. If the commit landed, the ping's "is committing" is no failure:
    # commit() asked again answers COMMITTED (it used to raise TxnFailedError, "its events
    # never appear", for a transaction that committed). If it did not and the transaction
    # was aborted meanwhile, commit() reports the controller's TxnFailedError.
    make_stream(cluster, 1)
    with cluster.create_transactional_writer("sc", "st", pr.JsonSerializer()) as tw:
        txn = tw.begin_txn()
        txn.write_event({"k": "a", "n": 0, "s": "txn"}, routing_key="a")
        controller = tw._controller
        real = controller.commit_transaction_and_wait

        def lost(scope: str, stream: str, txn_id: uuid.UUID, timeout_s: float) -> Any:
            if landed:
                controller.commit_transaction(scope, stream, txn_id)
            else:
                controller.abort_transaction(scope, stream, txn_id)
            raise pr.ControllerUnavailableError("the answer was lost")

        controller.commit_transaction_and_wait = lost  # type: ignore[method-assign]
        with pytest.raises(pr.ControllerUnavailableError):
            txn.commit()
        controller.commit_transaction_and_wait = real  # type: ignore[method-assign]
        assert tw.ping_all() == 0  # refused: committing, or aborting
        if landed:
            txn.commit()
            assert txn.check_status() is pr.TxnStatus.COMMITTED
        else:
            with pytest.raises(pr.TxnFailedError):
                txn.commit()
    assert len(read_everything(cluster, 1 if landed else 0)) == (1 if landed else 0)
