"""Transactions on the shared local Ray: the commit and abort event processors and the
transaction timer each run in a detached actor of their own; killing any actor (or a
container) mid-commit, mid-abort or mid-timeout changes nothing a reader sees.

The guarantees checked (docs/api.md, "Transactions"): every committed transaction's events
appear exactly once, contiguous on each segment, after the events acknowledged on that
segment before ``commit()`` was called; an aborted or timed-out transaction's never do.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import ray

import pravega_ray as pr
from pravega_ray_actors.options import (
    ABORT_PROCESSOR_NAME,
    COMMIT_PROCESSOR_NAME,
    CONTROLLER_NAME,
    TXN_TIMER_NAME,
    container_name,
)
from tests.checks import by_segment, read_exactly

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]
SLOW_READS = {"timeout_s": 90.0, "poll_s": 0.5, "extra_wait_s": 1.0}
"""Reads through Ray after actor kills: more time for each event and for the check that
nothing more arrives."""


def _stream(cluster: Any, scope: str, segments: int) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    assert mgr.create_stream(scope, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))


def _pid(name: str, namespace: str, timeout_s: float = 60.0) -> int:
    """The process id of actor ``name``, once it answers (a killed one may still be
    restarting: ActorUnavailableError until then)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            handle = ray.get_actor(name, namespace=namespace)
            return int(ray.get(handle.describe.remote())["pid"])
        except ray.exceptions.ActorUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _kill(cluster: Any, victim: str) -> None:
    """Kill ``victim`` (an actor name, or "container" for the first container); Ray restarts it."""
    name = container_name(0) if victim == "container" else victim
    ray.kill(ray.get_actor(name, namespace=cluster.namespace), no_restart=False)


def test_transaction_actors_run_each_in_their_own_process(cluster) -> None:  # type: ignore[no-untyped-def]
    names = [COMMIT_PROCESSOR_NAME, ABORT_PROCESSOR_NAME, TXN_TIMER_NAME, CONTROLLER_NAME]
    pids = {name: _pid(name, cluster.namespace) for name in names}
    assert len(set(pids.values())) == len(names)
    again = pr.connect(namespace=cluster.namespace)  # connect() finds the same actors
    assert again.controller_handle() is not None


def test_transaction_end_to_end_through_ray(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    _stream(cluster, unique_name, 2)
    with cluster.create_transactional_writer(unique_name, "st", pr.JsonSerializer()) as tw:
        with tw.begin_txn() as txn:
            for n in range(100):
                txn.write_event({"k": f"k{n % 4}", "n": n, "s": "t"}, routing_key=f"k{n % 4}")
        assert txn.check_status() is pr.TxnStatus.COMMITTED
        aborted = tw.begin_txn()
        aborted.write_event({"k": "x", "n": 0, "s": "a"})
        aborted.abort()
        with pytest.raises(pr.TxnFailedError):
            aborted.commit()
    events = read_exactly(cluster, unique_name, "st", 100, **SLOW_READS)
    assert sorted(e.event["n"] for e in events) == list(range(100))


def test_a_scale_with_an_open_transaction_ends_and_the_commit_rolls_through_ray(
    cluster, unique_name
) -> None:  # type: ignore[no-untyped-def]
    """Rolling transactions through the actors: the scale does not wait for the open
    transaction; its commit (the commit processor's actor hands it to the request
    processor's) lands after what was acknowledged before commit(), per key."""
    _stream(cluster, unique_name, 2)
    mgr = cluster.stream_manager()
    keys = [f"k{n}" for n in range(8)]
    with (
        cluster.create_writer(unique_name, "st", pr.JsonSerializer()) as writer,
        cluster.create_transactional_writer(unique_name, "st", pr.JsonSerializer()) as tw,
    ):
        txn = tw.begin_txn()
        for key in keys:
            txn.write_event({"k": key, "s": "txn"}, routing_key=key)
        segment = mgr.get_stream_info(unique_name, "st").segments[0]
        started = time.monotonic()
        assert mgr.scale_stream(
            unique_name, "st", [segment.segment_id], [(0.0, 0.25), (0.25, 0.5)], timeout_s=60
        )
        scaled_s = time.monotonic() - started
        for key in keys:
            writer.write_event({"k": key, "s": "before"}, routing_key=key)
        writer.flush()
        txn.commit()
        assert txn.check_status() is pr.TxnStatus.COMMITTED
        for key in keys:
            writer.write_event({"k": key, "s": "after"}, routing_key=key)
    assert scaled_s < 30  # it waited for no transaction
    deadline = time.monotonic() + 30  # COMMITTED just before the roll's epoch is current
    while mgr.get_stream_info(unique_name, "st").epoch != 3:  # the roll's two epochs
        assert time.monotonic() < deadline
        time.sleep(0.05)
    events = read_exactly(cluster, unique_name, "st", 3 * len(keys), **SLOW_READS)
    for key in keys:
        assert [e.event["s"] for e in events if e.event["k"] == key] == ["before", "txn", "after"]


@pytest.mark.parametrize(
    "victim", [COMMIT_PROCESSOR_NAME, CONTROLLER_NAME, "container", TXN_TIMER_NAME]
)
def test_actor_killed_mid_commit_abort_and_timeout_keeps_every_guarantee(
    cluster, unique_name, victim: str
) -> None:  # type: ignore[no-untyped-def]
    """12 transactions over 4 segments beside a plain writer: even ones commit, odd ones
    abort, two more time out; ``victim`` is killed once the completions are under way."""
    scope = unique_name
    _stream(cluster, scope, 4)
    per_txn = 40
    stop = threading.Event()
    acked = [-1]  # the plain writer's events 0..acked[0] are all acknowledged
    written = [0]

    def plain_load() -> None:
        with cluster.create_writer(scope, "st", pr.JsonSerializer()) as plain:
            while not stop.is_set():
                base = written[0]
                futures = [
                    plain.write_event(
                        {"k": f"p{n % 8}", "n": n, "s": "plain"}, routing_key=f"p{n % 8}"
                    )
                    for n in range(base, base + 20)
                ]
                written[0] = base + 20
                for f in futures:
                    f.result(120)
                acked[0] = base + 19
                time.sleep(0.01)

    load = threading.Thread(target=plain_load)
    load.start()
    tw = cluster.create_transactional_writer(scope, "st", pr.JsonSerializer(), lease_s=60.0)
    txns = [tw.begin_txn() for _ in range(12)]
    for i, txn in enumerate(txns):
        for n in range(per_txn):
            txn.write_event({"k": f"k{n % 8}", "n": n, "s": f"t{i}"}, routing_key=f"k{n % 8}")
        txn.flush()
    # Two transactions nobody pings once their writer closes: the timer aborts them about
    # when the victim dies.
    timed_out: list[pr.Transaction] = []
    idle = cluster.create_transactional_writer(scope, "st", pr.JsonSerializer(), lease_s=3.0)
    for t in range(2):
        txn = idle.begin_txn()
        for n in range(per_txn):
            txn.write_event({"k": f"k{n % 8}", "n": n, "s": f"late{t}"}, routing_key=f"k{n % 8}")
        txn.flush()
        timed_out.append(txn)
    idle.close()
    acked_before: dict[str, int] = {}
    completed: list[int] = []
    errors: list[BaseException] = []

    def complete() -> None:
        try:
            for i, txn in enumerate(txns):
                if i % 2 == 0:
                    acked_before[f"t{i}"] = acked[0]
                    txn.commit()
                else:
                    txn.abort()
                completed.append(i)
        except BaseException as e:  # reported below
            errors.append(e)

    worker = threading.Thread(target=complete)
    worker.start()
    deadline = time.monotonic() + 120
    while len(completed) < 3 and worker.is_alive():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    pid = _pid(container_name(0) if victim == "container" else victim, cluster.namespace)
    _kill(cluster, victim)
    worker.join(240)
    stop.set()
    load.join(120)
    tw.close()
    assert not errors, errors
    restarted = _pid(container_name(0) if victim == "container" else victim, cluster.namespace)
    assert restarted != pid, f"{victim} was not restarted"
    assert len(completed) == len(txns)
    for i, txn in enumerate(txns):
        expected = pr.TxnStatus.COMMITTED if i % 2 == 0 else pr.TxnStatus.ABORTED
        _wait_status(txn, expected)
    for txn in timed_out:
        _wait_status(txn, pr.TxnStatus.ABORTED)
    committed = [f"t{i}" for i in range(0, len(txns), 2)]
    events = read_exactly(cluster, scope, "st", written[0] + per_txn * len(committed), **SLOW_READS)
    segments = by_segment(events)
    sources = {e["s"] for es in segments.values() for e in es}
    assert sources == {"plain", *committed}, "an aborted or timed-out transaction is visible"
    for source in committed:
        numbers = sorted(e["n"] for es in segments.values() for e in es if e["s"] == source)
        assert numbers == list(range(per_txn)), f"{source}: lost or duplicated events"
        for segment, seg_events in segments.items():
            at = [j for j, e in enumerate(seg_events) if e["s"] == source]
            if not at:
                continue
            assert at == list(range(at[0], at[0] + len(at))), f"{source} split on {segment}"
            before = {e["n"] for e in seg_events[: at[0]] if e["s"] == "plain"}
            acked_here = {
                e["n"] for e in seg_events if e["s"] == "plain" and e["n"] <= acked_before[source]
            }
            assert acked_here <= before, f"{source} on {segment} is before an acked event"
    plain = sorted(e["n"] for es in segments.values() for e in es if e["s"] == "plain")
    assert plain == list(range(written[0])), "the plain writer lost or duplicated events"


def _wait_status(txn: pr.Transaction, status: pr.TxnStatus, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while (now := txn.check_status()) is not status:
        assert time.monotonic() < deadline, f"{txn} is {now}, not {status}"
        time.sleep(0.1)


@pytest.mark.parametrize("victim", [COMMIT_PROCESSOR_NAME, CONTROLLER_NAME])
def test_writers_side_by_side_commit_exactly_once_while_a_commit_waiter_dies(
    cluster, unique_name, victim: str
) -> None:  # type: ignore[no-untyped-def]
    """4 transactional writers commit (their commits batched, each waiting in the
    controller) while ``victim`` is killed: every commit() returns, each transaction's
    events appear once, contiguous on each segment."""
    scope = unique_name
    _stream(cluster, scope, 2)
    per_txn, rounds = 30, 6
    done: list[str] = []
    errors: list[BaseException] = []

    def one(label: str) -> None:
        try:
            with cluster.create_transactional_writer(scope, "st", pr.JsonSerializer()) as tw:
                for t in range(rounds):
                    txn = tw.begin_txn()
                    for n in range(per_txn):
                        k = f"{label}{n % 4}"
                        txn.write_event({"k": k, "n": n, "s": f"{label}{t}"}, routing_key=k)
                    txn.commit()
                    assert txn.check_status() is pr.TxnStatus.COMMITTED
                    done.append(f"{label}{t}")
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(c,)) for c in "abcd"]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while len(done) < 4 and not errors:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    _kill(cluster, victim)
    for t in threads:
        t.join(240)
    assert not errors, errors
    assert len(done) == 4 * rounds
    events = read_exactly(cluster, scope, "st", 4 * rounds * per_txn, **SLOW_READS)
    segments = by_segment(events)
    for source in done:
        numbers = sorted(e["n"] for es in segments.values() for e in es if e["s"] == source)
        assert numbers == list(range(per_txn)), f"{source}: lost or duplicated events"
        for segment, seg_events in segments.items():
            at = [j for j, e in enumerate(seg_events) if e["s"] == source]
            assert at == list(range(at[0], at[0] + len(at))) if at else True, (
                f"{source} split on {segment}"
            )
