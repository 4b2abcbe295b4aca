"""The controller core serves calls from many threads, and several instances (cores) serve
calls on one store: creates racing on one name create it once, a create resumed by two
instances at once completes once, a blocked create holds no other call, and the client moves
to another instance at once when one is unavailable.

Instances here are ``Controller`` objects over one ``InProcessCluster``'s records (what each
controller actor owns on Ray); calls run on plain threads, without the cluster's lock.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.controller_connection import ControllerClient
from pravega_ray.contracts.controller_service import method_name
from pravega_ray.contracts.records import StreamState
from pravega_ray.controller.controller import Controller
from pravega_ray.controller.segment_helper import run_each
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.errors import ControllerUnavailableError, InvalidArgumentError
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.timing import ManualThreadScheduler

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=2, watch_metadata=True)
    yield c
    c.shutdown()


def _instance(cluster: InProcessCluster, segments: Any = None) -> Controller:
    """Another controller instance on ``cluster``'s records and containers."""
    helper = cluster._segment_helper()
    return Controller(
        cluster.metadata,
        segments if segments is not None else helper,
        cluster.container_count,
        set_policy=helper.set_scale_policy,
    )


def _run_together(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` on threads of their own, started together; their results in order
    (a call's exception is re-raised)."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], Any]) -> Any:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(run, call) for call in calls]
        return [f.result(60) for f in futures]


def test_creates_racing_on_one_name_on_two_instances_create_it_once(cluster) -> None:  # type: ignore[no-untyped-def]
    instances = [cluster.core, _instance(cluster)]
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(3))
    calls: list[Callable[[], Any]] = []
    for t in range(12):
        core, rid = instances[t % 2], f"req{t}"
        calls.append(lambda core=core, rid=rid: core.create_scope("sc", rid))
    assert sum(_run_together(calls)) == 1  # each caller its own request id: one created it
    calls = []
    for t in range(12):
        core, rid = instances[t % 2], f"req{t}"
        for s in range(4):
            calls.append(
                lambda core=core, rid=rid, s=s: (s, core.create_stream("sc", f"s{s}", config, rid))
            )
    results = _run_together(calls)
    for s in range(4):
        assert sum(created for name, created in results if name == s) == 1
        for core in instances:
            info = core.get_stream_info("sc", f"s{s}")
            assert info.state is StreamState.ACTIVE
            assert len(info.segments) == 3
        for segment in info.segments:
            assert cluster.segments.get_info(segment.name).result(10).length == 0
    for core in instances:
        assert core.damaged_records() == {}
        assert core.list_streams("sc") == ["s0", "s1", "s2", "s3"]


def test_creates_of_one_name_with_different_segment_counts_racing_never_tear_it(cluster) -> None:  # type: ignore[no-untyped-def]
    """Creates of one stream racing with different configurations: one wins, and the stored
    record, its epoch 0 and the segments created are all the winner's (a loser used to
    overwrite epoch 0 before its record write failed)."""
    instances = [cluster.core, _instance(cluster)]
    cluster.core.create_scope("sc")
    for round_ in range(6):
        name = f"torn{round_}"
        calls: list[Callable[[], Any]] = [
            lambda core=instances[t % 2], t=t, name=name: (
                t + 1,
                core.create_stream(
                    "sc", name, pr.StreamConfiguration(pr.ScalingPolicy.fixed(t + 1)), f"r{t}"
                ),
            )
            for t in range(8)
        ]
        winners = [count for count, created in _run_together(calls) if created]
        assert len(winners) == 1
        for core in instances:
            info = core.get_stream_info("sc", name)
            assert info.state is StreamState.ACTIVE
            assert info.configuration.scaling.min_segments == winners[0]
            assert len(info.segments) == winners[0]
            assert core.get_epoch_segments("sc", name, 0) == list(info.segments)
        for segment in info.segments:
            assert cluster.segments.get_info(segment.name).result(10).length == 0
    assert instances[0].damaged_records() == {}


def test_a_create_cut_short_between_its_record_and_its_epoch_completes(cluster) -> None:  # type: ignore[no-untyped-def]
    """A create stopped after its stream record, before its history row (a killed instance):
    the stream reads as CREATING with the record's segments, and a repeat finishes it."""
    core = cluster.core
    core.create_scope("sc")
    store = StreamMetadataStore(cluster.metadata)
    store.create_stream("sc", "half", pr.StreamConfiguration().to_dict(), 3, 0, "r1")
    cluster.metadata.delete("history/sc/half/0000000000")
    cluster.metadata.delete("indexrows/sc/half/00000000")
    info = core.get_stream_info("sc", "half")
    assert info.state is StreamState.CREATING and len(info.segments) == 3
    assert core.create_stream("sc", "half", None, "r1")  # the caller's repeat
    after = _instance(cluster).get_stream_info("sc", "half")
    assert after.state is StreamState.ACTIVE and after.segments == info.segments
    assert core.get_epoch_segments("sc", "half", 0) == list(info.segments)
    assert core.damaged_records() == {}


def test_key_value_table_creates_racing_on_two_instances_create_it_once(cluster) -> None:  # type: ignore[no-untyped-def]
    instances = [cluster.core, _instance(cluster)]
    cluster.core.create_scope("sc")
    calls: list[Callable[[], Any]] = [
        lambda core=instances[t % 2], t=t: core.create_key_value_table("sc", "kv", 4, f"r{t}")
        for t in range(10)
    ]
    assert sum(_run_together(calls)) == 1
    info = instances[1].get_active_key_value_table("sc", "kv")
    assert len(info.segments) == 4
    assert instances[0].damaged_records() == {}


def test_a_create_cut_short_resumed_by_two_instances_at_once_completes_once(cluster) -> None:  # type: ignore[no-untyped-def]
    """Creates cut short after their records (a killed instance): two instances starting at
    once both resume them, while calls arrive on many threads of each."""
    core = cluster.core
    core.create_scope("sc")
    store = StreamMetadataStore(cluster.metadata)
    for s in range(6):
        store.create_stream("sc", f"cut{s}", pr.StreamConfiguration().to_dict(), 4, 0, f"r{s}")
        assert core.get_stream_info("sc", f"cut{s}").state is StreamState.CREATING
    instances = [_instance(cluster), _instance(cluster)]
    calls: list[Callable[[], Any]] = [
        lambda core=instances[t % 2], t=t: core.create_scope(f"other{t}") for t in range(16)
    ]
    assert all(_run_together(calls))
    for s in range(6):
        for instance in instances:
            assert instance.get_stream_info("sc", f"cut{s}").state is StreamState.ACTIVE
        for segment in core.get_stream_info("sc", f"cut{s}").segments:
            assert cluster.segments.get_info(segment.name).result(10).length == 0
    for instance in instances:
        assert instance.damaged_records() == {}
    # A repeat of one of those creates (its caller's retry on another instance) answers True.
    assert instances[1].create_stream("sc", "cut3", None, "r3")


def test_a_create_cut_short_between_its_history_and_index_rows_gets_both(cluster) -> None:  # type: ignore[no-untyped-def]
    """Epoch 0's rows are written side by side: a create killed after its history row and
    before its index row is resumed with both (an index left missing would place every
    time before the stream's first scale in the epoch after it)."""
    cluster.core.create_scope("sc")
    store = StreamMetadataStore(cluster.metadata)
    store.create_stream("sc", "half", pr.StreamConfiguration().to_dict(), 2, 1234, None)
    cluster.metadata.delete("indexrows/sc/half/00000000")  # the kill, between the two rows
    instance = _instance(cluster)
    instance.create_scope("other")  # its first call resumes the create
    assert instance.get_stream_info("sc", "half").state is StreamState.ACTIVE
    assert store.streams.index("sc", "half") == [(1234, 0)]
    assert store.streams.epoch("sc", "half", 0) is not None


class _BlockingSegments:
    """The cluster's segment helper, but creating a segment of stream ``slow`` waits for
    ``release`` (a create of a big stream, or a container answering slowly)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.release = threading.Event()
        self.blocked = threading.Event()

    def create_segment(self, segment: str) -> None:
        if "/slow/" in segment:
            self.blocked.set()
            assert self.release.wait(60)
        self._inner.create_segment(segment)

    def create_segments(self, segments: list[str]) -> None:
        if any("/slow/" in segment for segment in segments):
            self.blocked.set()
            assert self.release.wait(60)
        self._inner.create_segments(segments)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_blocked_create_holds_no_other_call_of_the_instance(cluster) -> None:  # type: ignore[no-untyped-def]
    segments = _BlockingSegments(cluster._segment_helper())
    core = _instance(cluster, segments)
    core.create_scope("sc")
    core.create_stream("sc", "fast", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)), None)
    big = pr.StreamConfiguration(pr.ScalingPolicy.fixed(100))
    creating = threading.Thread(target=core.create_stream, args=("sc", "slow", big, "r"))
    creating.start()
    try:
        assert segments.blocked.wait(30)
        # Meanwhile, on other threads of the same instance: reads, a transaction, a create.
        info = core.get_stream_info("sc", "fast")
        assert info.state is StreamState.ACTIVE
        first = info.segments[0].segment_id
        assert core.get_successors("sc", "fast", first) == {}
        txn = core.create_transaction("sc", "fast", 30.0)
        assert core.ping_transaction("sc", "fast", txn.txn_id, 30.0) > 0
        assert core.create_stream("sc", "other", None, None)
        assert core.get_stream_info("sc", "slow").state is StreamState.CREATING
        assert creating.is_alive()  # all of it answered while the big create still waits
    finally:
        segments.release.set()
        creating.join(60)
    assert core.get_stream_info("sc", "slow").state is StreamState.ACTIVE
    assert len(core.get_stream_info("sc", "slow").segments) == 100


def test_many_threads_on_two_instances_mix_every_call_family(cluster) -> None:  # type: ignore[no-untyped-def]
    instances = [cluster.core, _instance(cluster)]
    cluster.core.create_scope("sc")
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(2))

    def work(t: int) -> int:
        core = instances[t % 2]
        assert core.create_stream("sc", f"st{t}", config, None)
        done = 0
        for _ in range(5):
            other = instances[(t + 1) % 2]  # the other instance sees what this one wrote
            assert other.get_stream_info("sc", f"st{t}").state is StreamState.ACTIVE
            txn = core.create_transaction("sc", f"st{t}", 30.0)
            assert other.ping_transaction("sc", f"st{t}", txn.txn_id, 30.0) > 0
            other.commit_transaction("sc", f"st{t}", txn.txn_id)
            done += 1
        return done

    assert _run_together([lambda t=t: work(t) for t in range(8)]) == [5] * 8
    assert cluster.core.damaged_records() == {}


def test_run_each_inside_run_each_does_not_deadlock() -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def inner(n: int) -> None:
        with lock:
            seen.append(n)

    def outer(n: int) -> None:
        run_each(inner, [n * 100 + i for i in range(20)])

    run_each(outer, range(40))  # 40 outer calls, more than the pool's threads
    assert sorted(seen) == sorted(n * 100 + i for n in range(40) for i in range(20))


class _Instances:
    """An invoker over several controller cores, round robin, moving on from an instance
    whose call failed (as ``RayControllerConnection`` does); ``down`` instances fail every
    call with ControllerUnavailableError without performing it."""

    def __init__(self, cores: list[Controller]) -> None:
        self._cores = cores
        self.instance_count = len(cores)
        self.down: set[int] = set()
        self.calls = [0] * len(cores)
        self._next = 0
        self._lock = threading.Lock()

    def invoke(self, method: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            index = self._next % len(self._cores)
            self._next += 1
            self.calls[index] += 1
        if index in self.down:
            raise ControllerUnavailableError(f"instance {index} is down")
        return getattr(self._cores[index], method_name(method))(*args, **kwargs)


def test_the_client_moves_to_another_instance_at_once_for_safe_calls(cluster) -> None:  # type: ignore[no-untyped-def]
    instances = _Instances([cluster.core, _instance(cluster), _instance(cluster)])
    scheduler = ManualThreadScheduler()
    client = ControllerClient(instances, scheduler=scheduler)
    assert client.create_scope("sc")
    assert client.create_stream("sc", "st", None)
    instances.down = {0, 1}
    for _ in range(10):  # every call lands on a dead instance first, some twice in a row
        assert client.get_stream_info("sc", "st").state is StreamState.ACTIVE
        txn = client.create_transaction("sc", "st", 30.0)
        assert client.ping_transaction("sc", "st", txn.txn_id, 30.0) > 0
    assert scheduler.slept_s == []  # never paused: another instance answered at once
    assert instances.calls[0] > 0 and instances.calls[1] > 0
    assert client.seal_stream("sc", "st") in (True, False)
    # A delete is not repeated: its unknown outcome reaches the caller.
    instances.down = {0, 1, 2}
    with pytest.raises(ControllerUnavailableError):
        client.delete_scope("other")
    # Every instance down: safe calls pause between rounds, then give up.
    client = ControllerClient(instances, attempts_max=5, scheduler=scheduler)
    before = sum(instances.calls)
    with pytest.raises(ControllerUnavailableError):
        client.list_scopes()
    assert sum(instances.calls) - before == 5
    assert scheduler.slept_s == [0.5, 0.5]  # 5 calls: 2 at once (other instances), 3 paused


def test_start_local_refuses_a_bad_instance_count(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for bad in (0, -1, 65, True, 2.0, "2", None):
        with pytest.raises(InvalidArgumentError, match="controller_instances"):
            pr.start_local(tmp_path / uuid.uuid4().hex, controller_instances=bad)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []  # nothing was created
