"""Controller instances on the shared local Ray: ``start_local`` runs two controller API
actors on one store; any instance serves any call, a slow call of an instance holds none of
its reads, and killing an instance in a loop while writers, a transactional writer and
scales run fails no call and loses or duplicates nothing.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
import ray

import pravega_ray as pr
from pravega_ray_actors.options import controller_name
from tests.checks import read_exactly

pytestmark = [pytest.mark.ray, pytest.mark.timeout(400)]
SLOW_READS = {"timeout_s": 120.0, "poll_s": 0.5, "extra_wait_s": 1.0}


def _stream(cluster: Any, scope: str, segments: int, name: str = "st") -> Any:
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments))
    assert mgr.create_stream(scope, name, config)
    return mgr


def _describe(handle: Any, timeout_s: float = 90.0) -> dict[str, Any]:
    """The instance's description once it answers (a killed one may still be restarting)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            description: dict[str, Any] = ray.get(handle.describe.remote(), timeout=30)
            return description
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_two_instances_serve_any_call_and_connect_finds_both(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    handles = cluster.controller_handles()
    assert len(handles) == 2
    described = [_describe(h) for h in handles]
    assert [d["instance"] for d in described] == [0, 1]
    assert described[0]["pid"] != described[1]["pid"]
    assert handles[0] is cluster.controller_handle()
    for i in range(2):
        assert ray.get_actor(controller_name(i), namespace=cluster.namespace) is not None
    # A stream created through instance 1 is seen by instance 0, and the other way round.
    ray.get(handles[1].create_scope.remote(unique_name, "r1"))
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(3))
    assert ray.get(handles[1].create_stream.remote(unique_name, "a", config, "r2"))
    assert (
        ray.get(handles[0].get_stream_info.remote(unique_name, "a")).state is pr.StreamState.ACTIVE
    )
    assert ray.get(handles[0].create_stream.remote(unique_name, "b", config, "r3"))
    assert len(ray.get(handles[1].get_current_segments.remote(unique_name, "b"))) == 3
    # The same create repeated on the other instance (a client moving on) answers True once.
    assert ray.get(handles[0].create_stream.remote(unique_name, "a", config, "r2"))
    assert not ray.get(handles[0].create_stream.remote(unique_name, "a", config, "other"))
    again = pr.connect(namespace=cluster.namespace)
    assert len(again.controller_handles()) == 2
    assert again.stream_manager().list_streams(unique_name) == ["a", "b"]


def test_a_slow_create_on_an_instance_does_not_hold_its_reads(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    """Ordering, not timing: reads sent to an instance after a create of a 100-segment
    stream answer before that create does."""
    mgr = _stream(cluster, unique_name, 2, "small")
    handle = cluster.controller_handles()[1]
    small = mgr.get_stream_info(unique_name, "small").segments[0].segment_id
    txn = cluster._controller.create_transaction(unique_name, "small", 60.0)
    big = pr.StreamConfiguration(pr.ScalingPolicy.fixed(100))
    create = handle.create_stream.remote(unique_name, "big", big, "rbig")
    answered_first = 0
    while not ray.wait([create], timeout=0)[0]:
        ray.get(handle.get_stream_info.remote(unique_name, "small"))
        ray.get(handle.get_successors.remote(unique_name, "small", small))
        ray.get(handle.ping_transaction.remote(unique_name, "small", txn.txn_id, 60.0))
        if not ray.wait([create], timeout=0)[0]:
            answered_first += 1
    assert ray.get(create)
    assert answered_first >= 1  # a single-call-at-a-time instance would answer none first
    assert len(mgr.get_stream_info(unique_name, "big").segments) == 100


def test_an_instance_killed_mid_create_a_repeat_completes_it_once(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    cluster.stream_manager().create_scope(unique_name)
    victim = cluster.controller_handles()[1]
    before = _describe(victim)["pid"]
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(60))
    request_id = uuid.uuid4().hex
    create = victim.create_stream.remote(unique_name, "st", config, request_id)
    time.sleep(0.05)  # let the create start; wherever it was, it is cut short
    ray.kill(victim, no_restart=False)
    with pytest.raises((ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)):
        ray.get(create, timeout=60)
    # The client's repeat (same request id) goes to whichever instance: done once, True.
    assert cluster._controller.create_stream(unique_name, "st", config, request_id)
    info = cluster.stream_manager().get_stream_info(unique_name, "st")
    assert info.state is pr.StreamState.ACTIVE and len(info.segments) == 60
    assert cluster._controller.create_stream(unique_name, "st", config, request_id)
    assert not cluster._controller.create_stream(unique_name, "st", config, "another")
    assert _describe(victim)["pid"] != before
    assert cluster._controller.damaged_records() == {}


def test_instances_killed_in_a_loop_fail_no_call_and_lose_nothing(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    scope = unique_name
    mgr = _stream(cluster, scope, 2)
    stop = threading.Event()
    errors: list[BaseException] = []
    written = [0, 0]
    committed: list[str] = []
    scales = [0]

    def guarded(body: Any) -> Any:
        def run() -> None:
            try:
                body()
            except BaseException as e:  # reported below
                errors.append(e)

        return threading.Thread(target=run)

    def plain(w: int) -> None:
        with cluster.create_writer(scope, "st", pr.JsonSerializer()) as writer:
            while not stop.is_set():
                base = written[w]
                futures = [
                    writer.write_event(
                        {"k": f"p{w}-{n % 4}", "n": n, "s": f"plain{w}"},
                        routing_key=f"p{w}-{n % 4}",
                    )
                    for n in range(base, base + 20)
                ]
                for f in futures:
                    f.result(120)
                written[w] = base + 20
                time.sleep(0.02)

    def transactions() -> None:
        with cluster.create_transactional_writer(
            scope, "st", pr.JsonSerializer(), lease_s=60.0
        ) as tw:
            t = 0
            while not stop.is_set():
                txn = tw.begin_txn()
                for n in range(10):
                    txn.write_event({"k": f"t{t}", "n": n, "s": f"t{t}"}, routing_key=f"t{n}")
                txn.commit()
                committed.append(f"t{t}")
                t += 1

    def scaling() -> None:
        while not stop.is_set() and scales[0] < 4:
            last = mgr.get_stream_info(scope, "st").segments[-1]
            middle = (last.key_low + last.key_high) / 2
            new = [(last.key_low, middle), (middle, last.key_high)]
            try:
                assert mgr.scale_stream(scope, "st", [last.segment_id], new)
            except pr.ScaleConflictError:
                continue  # a rolling commit replaced the segments read: read them again
            scales[0] += 1
            time.sleep(0.5)

    workers = [guarded(lambda: plain(0)), guarded(lambda: plain(1))]
    workers += [guarded(transactions), guarded(scaling)]
    for worker in workers:
        worker.start()
    handles = cluster.controller_handles()
    pids = [_describe(h)["pid"] for h in handles]
    for kill in range(4):
        time.sleep(1.5)
        victim = handles[kill % 2]
        ray.kill(victim, no_restart=False)
        _describe(victim)  # back before the other one goes: one instance lives throughout
    time.sleep(1.0)
    stop.set()
    for worker in workers:
        worker.join(240)
    assert not errors, errors
    assert all(not w.is_alive() for w in workers)
    assert [_describe(h)["pid"] for h in handles] != pids
    assert committed and scales[0] >= 1
    total = written[0] + written[1] + 10 * len(committed)
    events = read_exactly(cluster, scope, "st", total, **SLOW_READS)
    for w in range(2):
        mine = [e.event for e in events if e.event["s"] == f"plain{w}"]
        assert sorted(e["n"] for e in mine) == list(range(written[w])), "lost or duplicated"
        for key in {e["k"] for e in mine}:
            numbers = [e["n"] for e in mine if e["k"] == key]
            assert numbers == sorted(numbers), f"routing key {key} out of order"
    for name in committed:
        assert sorted(e.event["n"] for e in events if e.event["s"] == name) == list(range(10))
    epoch = mgr.get_stream_info(scope, "st").epoch
    assert epoch >= scales[0] and (epoch - scales[0]) % 2 == 0  # a rolling commit adds two
    assert cluster._controller.damaged_records() == {}
