"""Reader-group checkpoints on an in-process cluster: markers, cuts, readers joining, leaving
and declared offline during one, automatic checkpoints, reset_to a checkpoint, retention
publishing, bad input."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.client.reader_group import ReaderGroup
from pravega_ray.constants import CHECKPOINTS_OUTSTANDING_MAX, READER_GROUP_SYNC_INTERVAL_S
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.timing import ManualClock, ManualThreadScheduler
from tests.checks import group_test_cluster, read_count, write_numbered

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = group_test_cluster(3)
    yield c
    c.shutdown()


def _write(cluster: InProcessCluster, start: int, count: int, stream: str = "st") -> None:
    write_numbered(cluster, start, count, stream=stream, keys=7)


def _group(cluster: InProcessCluster, name: str = "g", **options: Any) -> pr.ReaderGroup:
    cluster.create_reader_group("sc", name, pr.ReaderGroupConfig.for_streams("sc/st", **options))
    return cluster.reader_group("sc", name)


def _after_a_sync_interval() -> None:
    time.sleep(READER_GROUP_SYNC_INTERVAL_S * 1.5)


def _wait_started(group: pr.ReaderGroup, name: str) -> None:
    deadline = time.monotonic() + 10
    while group._state.fetch()[0].checkpoints.find(name) is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)


class _Checkpointer:
    """Runs ``initiate_checkpoint`` in a thread (it blocks until the readers pass it)."""

    def __init__(self, group: pr.ReaderGroup, name: str, timeout_s: float = 30.0) -> None:
        self.result: Any = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.result = group.initiate_checkpoint(name, timeout_s=timeout_s)
            except BaseException as e:  # handed to the test
                self.error = e

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> Any:
        self.thread.join(60)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error
        return self.result


def _expect_reset(readers: list[Any]) -> None:
    """Each reader raises ReinitializationRequiredError once, at its first sync after the
    reset (issue 27 item 5); nothing of the old positions is returned after it."""
    for reader in readers:
        with pytest.raises(pr.ReinitializationRequiredError):
            for _ in range(200):
                reader.read_next_event(0.05)


def _read_until_marker(readers: list[Any], name: str, got: list[int]) -> dict[str, bool]:
    """Read in turn until every reader returned the marker ``name`` (events into ``got``);
    each reader then reads once more (that records its position)."""
    seen = {r.reader_id: False for r in readers}
    for _ in range(2000):
        for reader in readers:
            if seen[reader.reader_id]:
                continue
            ev = reader.read_next_event(0.05)
            if ev is None:
                continue
            if ev.checkpoint_name is not None:
                assert ev.checkpoint_name == name and ev.event is None
                seen[reader.reader_id] = True
            else:
                got.append(ev.event["n"])
        if all(seen.values()):
            break
    assert all(seen.values()), seen
    return seen


def _drain(
    readers: list[Any], got: list[int], idle_rounds: int = 6, until: int | None = None
) -> None:
    """Read in turn into ``got`` until ``idle_rounds`` rounds bring nothing; with ``until``,
    not before ``got`` holds that many (up to 30 s: a loaded machine can take longer than the
    idle rounds to hand a reader its segments)."""
    deadline = time.monotonic() + 30
    idle = 0
    while idle < idle_rounds or (
        until is not None and len(got) < until and time.monotonic() < deadline
    ):
        any_event = False
        for reader in readers:
            ev = reader.read_next_event(0.05)
            if ev is not None and ev.checkpoint_name is None:
                got.append(ev.event["n"])
                any_event = True
        idle = 0 if any_event else idle + 1


def test_checkpoint_one_reader_marker_and_cut(cluster: InProcessCluster) -> None:
    _write(cluster, 0, 30)
    group = _group(cluster)
    reader = cluster.create_reader("r1", "sc", "g", pr.JsonSerializer())
    got: list[int] = []
    _drain([reader], got, until=30)
    assert sorted(got) == list(range(30))
    waiter = _Checkpointer(group, "cp1")
    _read_until_marker([reader], "cp1", got)
    reader.read_next_event(0.05)  # records the position
    checkpoint = waiter.join()
    assert isinstance(checkpoint, pr.Checkpoint) and checkpoint.name == "cp1"
    cut = checkpoint.cuts["sc/st"]
    assert cut.positions.keys() == {
        s.segment_id for s in cluster.stream_manager().get_stream_info("sc", "st").segments
    }
    assert sum(cut.positions.values()) > 0
    assert group.get_checkpoint("cp1") == checkpoint
    reader.close()


def test_checkpoint_three_readers_then_reset_to_rereads_exactly_after(
    cluster: InProcessCluster,
) -> None:
    _write(cluster, 0, 40)
    group = _group(cluster)
    readers = [cluster.create_reader(f"r{i}", "sc", "g", pr.JsonSerializer()) for i in range(3)]
    before: list[int] = []
    _drain(readers, before)
    waiter = _Checkpointer(group, "cp")
    _read_until_marker(readers, "cp", before)
    for reader in readers:
        assert reader.read_next_event(0.05) is None or True
    checkpoint = waiter.join()
    assert sorted(before) == list(range(40))
    _write(cluster, 40, 20)
    after: list[int] = []
    _drain(readers, after, until=20)
    assert sorted(after) == list(range(40, 60))
    group.reset_to(checkpoint)
    _expect_reset(readers)
    again: list[int] = []
    _drain(readers, again, until=20)
    assert sorted(again) == list(range(40, 60))  # exactly the events after it, once
    for reader in readers:
        reader.close()


def test_checkpoint_reader_joining_and_leaving_during_it(cluster: InProcessCluster) -> None:
    _write(cluster, 0, 20)
    group = _group(cluster)
    r1 = cluster.create_reader("r1", "sc", "g", pr.JsonSerializer())
    r2 = cluster.create_reader("r2", "sc", "g", pr.JsonSerializer())
    got: list[int] = []
    _drain([r1, r2], got)
    waiter = _Checkpointer(group, "cp")
    _wait_started(group, "cp")
    late = cluster.create_reader("late", "sc", "g", pr.JsonSerializer())  # not waited for
    r2.close()  # leaving counts as passed, at its position
    _read_until_marker([r1], "cp", got)
    r1.read_next_event(0.05)
    checkpoint = waiter.join()
    assert sum(checkpoint.cuts["sc/st"].positions.values()) > 0
    late.close()
    r1.close()


def test_checkpoint_reader_killed_then_declared_offline(cluster: InProcessCluster) -> None:
    _write(cluster, 0, 20)
    group = _group(cluster)
    r1 = cluster.create_reader("r1", "sc", "g", pr.JsonSerializer())
    dead = cluster.create_reader("dead", "sc", "g", pr.JsonSerializer())
    got: list[int] = []
    _drain([r1, dead], got)
    waiter = _Checkpointer(group, "cp")
    _wait_started(group, "cp")
    _read_until_marker([r1], "cp", got)
    r1.read_next_event(0.05)
    # "dead" never reads again (killed, not closed): the checkpoint waits for it ...
    assert waiter.thread.is_alive()
    assert group.reader_offline("dead")  # ... until it is declared offline
    checkpoint = waiter.join()
    assert sorted(got) == list(range(20))
    # The cut is the whole stream's: resetting to it re-reads nothing old.
    group.reset_to(checkpoint)
    _expect_reset([r1])  # at its next sync
    _write(cluster, 20, 5)
    more: list[int] = []
    _drain([r1], more, until=5)
    assert sorted(more) == list(range(20, 25))
    r1.close()


def test_reader_offline_goes_back_to_the_last_checkpoint(cluster: InProcessCluster) -> None:
    _write(cluster, 0, 15)
    group = _group(cluster)
    r1 = cluster.create_reader("r1", "sc", "g", pr.JsonSerializer())
    got: list[int] = []
    _drain([r1], got)
    waiter = _Checkpointer(group, "cp")
    _read_until_marker([r1], "cp", got)
    r1.read_next_event(0.05)
    waiter.join()
    _write(cluster, 15, 10)
    after: list[int] = []
    _drain([r1], after, until=10)
    assert sorted(after) == list(range(15, 25))
    assert group.reader_offline("r1")  # no position: at the checkpoint
    r2 = cluster.create_reader("r2", "sc", "g", pr.JsonSerializer())
    again: list[int] = []
    _drain([r2], again)
    assert sorted(again) == list(range(15, 25))
    r2.close()


def test_checkpoint_with_no_reader_completes_at_once(cluster: InProcessCluster) -> None:
    _write(cluster, 0, 5)
    group = _group(cluster)
    checkpoint = group.initiate_checkpoint("empty", timeout_s=5)
    head = checkpoint.cuts["sc/st"]
    assert set(head.positions.values()) == {0}


def test_checkpoint_timeout_fails_and_frees_the_name(cluster: InProcessCluster) -> None:
    group = _group(cluster)
    reader = cluster.create_reader("r1", "sc", "g", pr.JsonSerializer())
    with pytest.raises(pr.CheckpointFailedError):
        group.initiate_checkpoint("slow", timeout_s=0.2)  # the reader never reads
    assert group.get_checkpoint("slow") is None
    reader.close()
    assert group.initiate_checkpoint("slow", timeout_s=5).name == "slow"


def test_checkpoint_timeout_fires_on_the_groups_clock_without_waiting(
    cluster: InProcessCluster,
) -> None:
    _group(cluster)
    clock = ManualClock()
    scheduler = ManualThreadScheduler(clock)
    group = ReaderGroup(
        "sc", "g", cluster._controller, cluster._segments, clock=clock, scheduler=scheduler
    )
    reader = cluster.create_reader("r1", "sc", "g", pr.JsonSerializer())
    started = time.monotonic()
    with pytest.raises(pr.CheckpointFailedError, match=r"within 10\.0 s"):
        group.initiate_checkpoint("slow", timeout_s=10.0)  # the reader never reads
    assert time.monotonic() - started < 10.0  # 10 s of the group's clock, not of real time
    assert clock.monotonic() >= 10.0 and sum(scheduler.slept_s) == pytest.approx(clock.monotonic())
    assert group.get_checkpoint("slow") is None  # cancelled: the name is free again
    reader.close()
    assert group.initiate_checkpoint("slow", timeout_s=5).name == "slow"


def test_checkpoint_name_in_use_and_too_many_outstanding(cluster: InProcessCluster) -> None:
    group = _group(cluster)
    group.initiate_checkpoint("done", timeout_s=5)
    with pytest.raises(pr.CheckpointFailedError):
        group.initiate_checkpoint("done", timeout_s=5)
    reader = cluster.create_reader("r1", "sc", "g", pr.JsonSerializer())
    # The waiters time out on a manual clock (they poll in real time): once the test moves it.
    clock = ManualClock()
    waiting = ReaderGroup("sc", "g", cluster._controller, cluster._segments, clock=clock)
    names = [f"c{i}" for i in range(CHECKPOINTS_OUTSTANDING_MAX)]
    waiters = [_Checkpointer(waiting, name, 3) for name in names]
    for name in names:
        _wait_started(group, name)
    with pytest.raises(pr.CheckpointFailedError):
        group.initiate_checkpoint("one-too-many", timeout_s=5)
    clock.advance(3)
    for w in waiters:
        with pytest.raises(pr.CheckpointFailedError):
            w.join()
    reader.close()


def test_checkpoint_fails_when_the_group_is_reset_meanwhile(cluster: InProcessCluster) -> None:
    group = _group(cluster)
    reader = cluster.create_reader("r1", "sc", "g", pr.JsonSerializer())
    waiter = _Checkpointer(group, "cp")
    _wait_started(group, "cp")
    group.reset_to(pr.ReaderGroupConfig.for_streams("sc/st"))
    with pytest.raises(pr.CheckpointFailedError):
        waiter.join()
    reader.close()


def test_checkpoint_across_a_scale_gives_a_valid_cut(cluster: InProcessCluster) -> None:
    mgr = cluster.stream_manager()
    _write(cluster, 0, 20)
    group = _group(cluster)
    reader = cluster.create_reader("r1", "sc", "g", pr.JsonSerializer())
    got: list[int] = []
    _drain([reader], got)
    first = sorted(mgr.get_stream_info("sc", "st").segments, key=lambda s: s.key_low)[0]
    middle = (first.key_low + first.key_high) / 2
    assert mgr.scale_stream(
        "sc", "st", [first.segment_id], [(first.key_low, middle), (middle, first.key_high)]
    )
    _write(cluster, 20, 20)
    _drain([reader], got)
    waiter = _Checkpointer(group, "cp")
    _read_until_marker([reader], "cp", got)
    reader.read_next_event(0.05)
    checkpoint = waiter.join()
    assert sorted(got) == list(range(40))
    cut = checkpoint.cuts["sc/st"]
    cluster.core.get_segments_between("sc", "st", cut.positions, None)
    # The controller accepts it as a cut of the stream (covers the key space once).
    cluster.create_reader_group(
        "sc", "from-cp", pr.ReaderGroupConfig.for_streams("sc/st", start_cuts={"sc/st": cut})
    )
    reader.close()


def test_automatic_checkpoints_are_silent_and_complete(cluster: InProcessCluster) -> None:
    _write(cluster, 0, 10)
    group = _group(cluster, automatic_checkpoint_interval_s=0.2)
    reader = cluster.create_reader("r1", "sc", "g", pr.JsonSerializer())
    got: list[int] = []
    deadline = time.monotonic() + 10
    state = None
    while time.monotonic() < deadline:
        ev = reader.read_next_event(0.05)
        if ev is not None:
            assert ev.checkpoint_name is None  # silent: no marker
            got.append(ev.event["n"])
        state = group._state.fetch()[0]
        if state.checkpoints.completed and len(got) == 10:
            break
    assert state is not None and state.checkpoints.completed
    assert sorted(got) == list(range(10))
    reader.close()


def test_automatic_release_publishes_the_checkpoint_cut(cluster: InProcessCluster) -> None:
    _write(cluster, 0, 10)
    group = _group(
        cluster, retention_type=pr.RetentionConfigType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT
    )
    assert cluster.core.list_subscribers("sc", "st") == ["sc/g"]
    reader = cluster.create_reader("r1", "sc", "g", pr.JsonSerializer())
    got: list[int] = []
    _drain([reader], got)
    waiter = _Checkpointer(group, "cp")
    _read_until_marker([reader], "cp", got)
    reader.read_next_event(0.05)
    checkpoint = waiter.join()
    from pravega_ray.controller.subscriber_tasks import subscriber_cuts

    cuts = subscriber_cuts(cluster.core._store, "sc", "st")
    assert cuts["sc/g"] == checkpoint.cuts["sc/st"].positions
    assert group._state.fetch()[0].retention_pending is None
    reader.close()
    # Resetting to NONE removes the subscription; deleting the group too.
    group.reset_to(pr.ReaderGroupConfig.for_streams("sc/st"))
    assert cluster.core.list_subscribers("sc", "st") == []
    _group(cluster, "g2", retention_type="manual_release_at_user_streamcut")
    assert cluster.core.list_subscribers("sc", "st") == ["sc/g2"]
    assert cluster.delete_reader_group("sc", "g2")
    assert cluster.core.list_subscribers("sc", "st") == []


def test_checkpoint_bad_input(cluster: InProcessCluster) -> None:
    group = _group(cluster)
    for name in ("", 3, None, "x" * 300):
        with pytest.raises(pr.InvalidArgumentError):
            group.initiate_checkpoint(name, timeout_s=1)  # type: ignore[arg-type]
    for timeout in (-1, float("nan"), float("inf"), True, "1"):
        with pytest.raises(pr.InvalidArgumentError):
            group.initiate_checkpoint("ok", timeout_s=timeout)  # type: ignore[arg-type]
    with pytest.raises(pr.InvalidArgumentError):
        group.get_checkpoint("")
    assert group.get_checkpoint("never") is None


def test_retention_never_truncates_past_the_last_checkpoint(cluster: InProcessCluster) -> None:
    mgr = cluster.stream_manager()
    config = pr.StreamConfiguration(
        pr.ScalingPolicy.fixed(1), pr.RetentionPolicy.by_size(min_bytes=1, max_bytes=10**9)
    )
    mgr.create_stream("sc", "kept", config)
    with cluster.create_writer("sc", "kept", pr.JsonSerializer()) as writer:
        for n in range(30):
            writer.write_event({"n": n}, routing_key="k")
        writer.flush()
    automatic = pr.RetentionConfigType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT
    cluster.create_reader_group(
        "sc", "sub", pr.ReaderGroupConfig.for_streams("sc/kept", retention_type=automatic)
    )
    group = cluster.reader_group("sc", "sub")
    reader = cluster.create_reader("r", "sc", "sub", pr.JsonSerializer())
    got = [reader.read_next_event(1.0).event["n"] for _ in range(10)]  # type: ignore[union-attr]
    waiter = _Checkpointer(group, "cp")
    _wait_started(group, "cp")
    _read_until_marker([reader], "cp", got)
    reader.read_next_event(0.05)
    checkpoint = waiter.join()
    with cluster.create_writer("sc", "kept", pr.JsonSerializer()) as writer:
        for n in range(30, 60):  # unread by the group: must survive retention
            writer.write_event({"n": n}, routing_key="k")
        writer.flush()
    results = [r for _ in range(3) for r in cluster.run_retention() if r.stream == "kept"]
    deadline = time.monotonic() + 10
    while not cluster.core._store.streams.truncation("sc", "kept")["cut"]:
        assert time.monotonic() < deadline, results
        time.sleep(0.05)
    truncated = cluster.core._store.streams.truncation("sc", "kept")["cut"]
    cut = checkpoint.cuts["sc/kept"].positions
    assert truncated, "retention truncated nothing"
    assert all(int(v) <= cut.get(int(k), 0) for k, v in truncated.items())
    # Everything after the checkpoint is still there for the group.
    reader.close()
    group.reset_to(checkpoint)
    with cluster.create_reader("again", "sc", "sub", pr.JsonSerializer()) as again:
        rest = [ev.event["n"] for ev in read_count(again, 60 - len(got))]
    assert sorted(got + rest) == list(range(60))


@pytest.mark.parametrize("by", ["create", "reset_to"])
def test_a_new_subscriber_holds_retention_at_its_start_before_any_checkpoint(
    cluster: InProcessCluster, by: str
) -> None:
    """Retention ignores a subscriber without a cut (docs/design.md), so a subscriber group
    acknowledges its start when it subscribes: nothing it has not read is truncated, even
    before its first checkpoint."""
    mgr = cluster.stream_manager()
    config = pr.StreamConfiguration(
        pr.ScalingPolicy.fixed(1), pr.RetentionPolicy.by_size(min_bytes=1, max_bytes=0)
    )
    mgr.create_stream("sc", "held", config)
    with cluster.create_writer("sc", "held", pr.JsonSerializer()) as writer:
        for n in range(20):
            writer.write_event({"n": n}, routing_key="k")
        writer.flush()
    automatic = pr.RetentionConfigType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT
    initial = automatic if by == "create" else pr.RetentionConfigType.NONE
    cluster.create_reader_group(
        "sc", "late", pr.ReaderGroupConfig.for_streams("sc/held", retention_type=initial)
    )
    if by == "reset_to":
        cluster.reader_group("sc", "late").reset_to(
            pr.ReaderGroupConfig.for_streams("sc/held", retention_type=automatic)
        )
    assert cluster.core.list_subscribers("sc", "held") == ["sc/late"]
    for batch in (1, 2, 3):  # each cycle adds a tail cut; the set has cuts to choose from
        cluster.run_retention()
        with cluster.create_writer("sc", "held", pr.JsonSerializer()) as writer:
            for n in range(20 * batch, 20 * batch + 20):
                writer.write_event({"n": n}, routing_key="k")
            writer.flush()
    cluster.run_retention()
    time.sleep(0.5)  # a truncation, had one been requested, runs on the processor
    truncated = cluster.core._store.streams.truncation("sc", "held")["cut"]
    assert all(int(offset) == 0 for offset in truncated.values()), truncated  # its start
    with cluster.create_reader("r", "sc", "late", pr.JsonSerializer()) as reader:
        got = [ev.event["n"] for ev in read_count(reader, 80)]
    assert got == list(range(80))
