"""Event time (issue 27 item 1): writers note times, the watermark workflow emits watermarks,
readers' time windows follow them. On an in-process cluster (memory backends); the stream
buckets' period is replaced by explicit runs of the workflow.

The invariant every test here leans on (Pravega's): once a reader's window has a lower bound
``L``, every event it reads afterwards has a time >= ``L``, given writers that note times
honestly (each event's time >= the last time its writer noted before writing it)."""

from __future__ import annotations

import itertools
import json
import logging
import time

import pytest

import pravega_ray as pr
from pravega_ray.contracts.watermarks import (
    Watermark,
    mark_segment_name,
    read_watermarks,
)
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.timing import ManualClock

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=3)
    yield c
    c.shutdown()


def make(cluster: InProcessCluster, stream: str = "st", segments: int = 2) -> pr.StreamManager:
    mgr = cluster.stream_manager()
    if "sc" not in mgr.list_scopes():
        mgr.create_scope("sc")
    mgr.create_stream("sc", stream, pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))
    return mgr


class RecordingController:
    """The two controller calls a writer's mark sender makes, recorded: ``calls`` as
    (time, position), -1 for ``writer_closed``; ``times`` the noted times alone."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, dict[int, int]]] = []
        self.times: list[int] = []

    def note_writer_mark(self, scope, stream, writer, time_ms, position):  # type: ignore[no-untyped-def]
        self.calls.append((time_ms, dict(position)))
        self.times.append(time_ms)
        return True

    def writer_closed(self, scope, stream, writer, position):  # type: ignore[no-untyped-def]
        self.calls.append((-1, dict(position)))
        return True


def wait_noted(mgr: pr.StreamManager, writer: pr.EventStreamWriter, time_ms: int) -> None:
    """Until the controller has ``writer``'s mark at ``time_ms`` (marks are sent in the
    background once the events before them are acknowledged)."""
    deadline = time.monotonic() + 20
    while mgr.list_writers("sc", writer.stream).get(writer.writer_id.hex()) != time_ms:
        assert time.monotonic() < deadline, mgr.list_writers("sc", writer.stream)
        time.sleep(0.01)


def emitted(cluster: InProcessCluster, stream: str = "st") -> list[Watermark]:
    """Every watermark in the stream's mark segment, in order."""
    info = cluster.stream_manager().get_stream_info("sc", stream)
    segment = mark_segment_name("sc", stream, info.creation_time_ms)
    reads = read_watermarks(
        lambda at: cluster.segments.read(segment, at, 1 << 20, 0.0).result(10), segment, 0
    )
    return [mark for found, _ in reads for mark in found]


def test_windows_follow_two_writers_and_never_contradict_the_events_read(
    cluster: InProcessCluster,
) -> None:
    mgr = make(cluster)
    writers = [cluster.create_writer("sc", "st", pr.JsonSerializer()) for _ in range(2)]
    for step in range(5):
        for n, writer in enumerate(writers):
            t = 1000 * step + 10 * n  # writer n notes t, then writes events of time >= t
            writer.note_time(t)
            for i in range(20):
                writer.write_event({"t": t + i}, routing_key=f"k{i % 5}")
        for n, writer in enumerate(writers):
            wait_noted(mgr, writer, 1000 * step + 10 * n)
        assert cluster.run_watermarks() == 1
    marks = emitted(cluster)
    assert [m.lower_ms for m in marks] == [0, 1000, 2000, 3000, 4000]
    assert [m.upper_ms for m in marks] == [10, 1010, 2010, 3010, 4010]
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    reader = cluster.create_reader("r", "sc", "g", pr.JsonSerializer())
    lowest_allowed = None
    windows = []
    for _ in range(200):
        ev = reader.read_next_event(5.0)
        assert ev is not None and ev.event is not None
        if lowest_allowed is not None:
            assert ev.event["t"] >= lowest_allowed
        window = reader.get_current_time_window("sc/st")
        windows.append(window)
        if window.lower_ms is not None:
            lowest_allowed = window.lower_ms
    lowers = [w.lower_ms for w in windows if w.lower_ms is not None]
    assert lowers == sorted(lowers)  # never backwards
    assert reader.get_current_time_window("sc/st").lower_ms == 4000  # all read: past the last
    for writer in writers:
        writer.close()
    reader.close()


def test_a_time_behind_one_noted_is_ignored_with_a_warning(
    cluster: InProcessCluster, caplog: pytest.LogCaptureFixture
) -> None:
    mgr = make(cluster)
    with cluster.create_writer("sc", "st", pr.Utf8Serializer()) as writer:
        writer.note_time(500)
        wait_noted(mgr, writer, 500)
        with caplog.at_level(logging.WARNING):
            writer.note_time(400)
        assert "behind 500" in caplog.text
        assert mgr.list_writers("sc", "st") == {writer.writer_id.hex(): 500}
        # The controller refuses it too (another process with this writer's id).
        position = {0: 0, 1: 0}
        assert not cluster.core.note_writer_mark("sc", "st", writer.writer_id.hex(), 400, position)
        for bad in (-1, True, 1.5, "9", float("nan")):
            with pytest.raises(InvalidArgumentError):
                writer.note_time(bad)  # type: ignore[arg-type]
    with pytest.raises(pr.ClientClosedError):
        writer.note_time(600)


def test_a_closed_writer_stops_holding_watermarks_back_and_its_mark_goes(
    cluster: InProcessCluster,
) -> None:
    mgr = make(cluster)
    fast = cluster.create_writer("sc", "st", pr.Utf8Serializer())
    slow = cluster.create_writer("sc", "st", pr.Utf8Serializer())
    slow.note_time(100)
    slow.write_event("slow", routing_key="a")
    fast.note_time(200)
    wait_noted(mgr, slow, 100)
    wait_noted(mgr, fast, 200)
    assert cluster.run_watermarks() == 1
    fast.note_time(300)
    wait_noted(mgr, fast, 300)
    assert cluster.run_watermarks() == 0  # slow is still at 100
    slow.close()
    assert cluster.run_watermarks() == 1  # slow's time no longer counts
    assert emitted(cluster)[-1].lower_ms == 300
    assert set(mgr.list_writers("sc", "st")) == {fast.writer_id.hex()}  # slow's mark went
    fast.close()


def test_a_silent_writer_times_out_and_remove_writer_forgets_one(
    cluster: InProcessCluster,
) -> None:
    mgr = make(cluster)
    with cluster.create_writer("sc", "st", pr.Utf8Serializer()) as writer:
        writer.note_time(100)
        wait_noted(mgr, writer, 100)
        later = ManualClock(wall_start_ms=int(time.time() * 1000) + 3_600_000)
        assert cluster.watermark_tasks(clock=later).run("sc", "st") is None
        assert mgr.list_writers("sc", "st") == {}  # dropped after the timeout
        writer.note_time(200)
        wait_noted(mgr, writer, 200)
        assert mgr.remove_writer("sc", "st", writer.writer_id.hex())
        assert not mgr.remove_writer("sc", "st", writer.writer_id.hex())
        assert mgr.list_writers("sc", "st") == {}
        for bad in ("", "a/b", "../x", 7, "x" * 256):
            with pytest.raises(InvalidArgumentError):
                mgr.remove_writer("sc", "st", bad)  # type: ignore[arg-type]
        with pytest.raises(pr.StreamNotFoundError):
            mgr.list_writers("sc", "nope")


@pytest.mark.parametrize("step", ["marks read", "last read", "computed", "appended", "recorded"])
def test_a_run_killed_at_any_step_emits_each_watermark_once_and_in_order(
    cluster: InProcessCluster, step: str
) -> None:
    mgr = make(cluster)

    class Killed(Exception):
        pass

    def kill(name: str) -> None:
        if name == step:
            raise Killed(name)

    with cluster.create_writer("sc", "st", pr.Utf8Serializer()) as writer:
        for t in (100, 200, 300):
            writer.write_event(f"e{t}", routing_key="k")
            writer.note_time(t)
            wait_noted(mgr, writer, t)
            with pytest.raises(Killed):
                cluster.watermark_tasks(step=kill).run("sc", "st")
            cluster.run_watermarks()
            cluster.run_watermarks()
    marks = emitted(cluster)
    assert [m.lower_ms for m in marks] == [100, 200, 300]
    cuts = [m.cut for m in marks]
    for before, after in itertools.pairwise(cuts):
        assert all(after.get(s, 0) >= o for s, o in before.items())


def test_a_stream_deleted_and_created_again_starts_without_marks_or_watermarks(
    cluster: InProcessCluster,
) -> None:
    mgr = make(cluster)
    with cluster.create_writer("sc", "st", pr.Utf8Serializer()) as writer:
        writer.note_time(100)
        wait_noted(mgr, writer, 100)
        assert cluster.run_watermarks() == 1
    assert emitted(cluster)
    assert mgr.seal_stream("sc", "st")
    assert mgr.delete_stream("sc", "st")
    make(cluster)
    assert mgr.list_writers("sc", "st") == {}
    assert cluster.run_watermarks() == 0
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    with cluster.create_reader("r", "sc", "g", pr.Utf8Serializer()) as reader:
        assert reader.get_current_time_window("sc/st") == pr.TimeWindow(None, None)


def test_the_window_of_a_stream_not_in_the_group_is_refused(cluster: InProcessCluster) -> None:
    make(cluster)
    make(cluster, "other")
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    with cluster.create_reader("r", "sc", "g", pr.Utf8Serializer()) as reader:
        for bad in ("sc/other", "nope", 7, None, "sc/st/x"):
            with pytest.raises(InvalidArgumentError):
                reader.get_current_time_window(bad)  # type: ignore[arg-type]
        assert reader.get_current_time_window("sc/st") == pr.TimeWindow(None, None)
    with pytest.raises(pr.ClientClosedError):
        reader.get_current_time_window("sc/st")


def test_a_damaged_watermark_is_named_and_reading_goes_on(cluster: InProcessCluster) -> None:
    mgr = make(cluster, segments=1)
    info = mgr.get_stream_info("sc", "st")
    segment = mark_segment_name("sc", "st", info.creation_time_ms)
    cluster.segments.create_segment(segment).result(10)
    body = json.dumps({"lower_ms": 1}).encode()
    cluster.segments.append_conditional(segment, b"\x00\x00\x00\x20" + b"\x00" * 4 + body).result(
        10
    )
    with cluster.create_writer("sc", "st", pr.Utf8Serializer()) as writer:
        writer.write_event("x")
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    with cluster.create_reader("r", "sc", "g", pr.Utf8Serializer()) as reader:
        with pytest.raises(pr.DataCorruptionError, match="mark segment"):
            reader.get_current_time_window("sc/st")
        ev = reader.read_next_event(5.0)
        assert ev is not None and ev.event == "x"


def test_events_a_writer_wrote_after_its_last_note_before_closing_stay_behind_the_window(
    cluster: InProcessCluster,
) -> None:
    """A closed writer's time stops counting at once; its events after its last noted time
    (older than the other writers' times) must still be read before the window passes
    them: its close reports where its last event ends."""
    mgr = make(cluster, segments=3)
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as early:
        early.note_time(0)
        wait_noted(mgr, early, 0)
        for i in range(50):
            early.write_event({"t": i}, routing_key=f"k{i % 7}")
    late = cluster.create_writer("sc", "st", pr.JsonSerializer())
    late.note_time(10_000)
    for i in range(50):
        late.write_event({"t": 10_000 + i}, routing_key=f"k{i % 7}")
    wait_noted(mgr, late, 10_000)
    assert cluster.run_watermarks() == 1
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    with cluster.create_reader("r", "sc", "g", pr.JsonSerializer()) as reader:
        lowest_allowed = None
        for _ in range(100):
            ev = reader.read_next_event(5.0)
            assert ev is not None and ev.event is not None
            if lowest_allowed is not None:
                assert ev.event["t"] >= lowest_allowed, (ev.event, lowest_allowed)
            lowest_allowed = reader.get_current_time_window("sc/st").lower_ms
        assert lowest_allowed == 10_000
    late.close()


def test_the_batch_client_gives_the_window_at_a_cut(cluster: InProcessCluster) -> None:
    mgr = make(cluster)
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        head = mgr.get_head_cut("sc", "st")
        for t in (100, 200):
            writer.note_time(t)
            # The mark is sent once the events before the note are acknowledged, with the
            # writer's position then: noted before the next events, its cut is exactly
            # there (sent later, it would be later, and the windows later: never early).
            wait_noted(mgr, writer, t)
            for i in range(10):
                writer.write_event({"t": t + i}, routing_key=f"k{i}")
            writer.flush()
            assert cluster.run_watermarks() == 1
        writer.flush()
        tail = mgr.get_tail_cut("sc", "st")
    batch = cluster.batch_client()
    assert batch.time_window(tail) == pr.TimeWindow(200, None)
    # The first watermark's cut is where the writer stood when it noted 100: the head (it had
    # written nothing), so every event after the head is of time >= 100.
    assert batch.time_window(head) == pr.TimeWindow(100, 200)
    for bad in (pr.StreamCut.UNBOUNDED, None, "cut"):
        with pytest.raises(InvalidArgumentError):
            batch.time_window(bad)  # type: ignore[arg-type]


def test_a_note_landing_while_its_writer_times_out_keeps_it_live(
    cluster: InProcessCluster,
) -> None:
    """Expiry is a compare-and-set: a note stored between the run's read of the marks and
    its expiry wins (an unconditional delete would drop it, and the watermark could pass the
    writer's time); a mark silent for ten timeouts is deleted."""
    from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
    from pravega_ray.controller.watermark_tasks import PeriodicWatermarking

    mgr = make(cluster, segments=1)
    writer_id = "w1"
    position = {0: 0}
    assert cluster.core.note_writer_mark("sc", "st", writer_id, 100, position)
    records = cluster.metadata

    class Racing:
        """The store, with a note of the writer landing just before the expiry's put."""

        def __getattr__(self, name: str) -> object:
            return getattr(records, name)

        def put(self, key: str, value: dict, version: int | None) -> int:  # type: ignore[type-arg]
            if value.get("expired"):
                assert cluster.core.note_writer_mark("sc", "st", writer_id, 200, position)
            return records.put(key, value, version)

    later = ManualClock(wall_start_ms=int(time.time() * 1000) + 120_000)
    run = PeriodicWatermarking(
        StreamMetadataStore(records),
        Racing(),
        cluster._segment_helper(),
        clock=later,  # type: ignore[arg-type]
    )
    run.run("sc", "st")
    assert mgr.list_writers("sc", "st") == {writer_id: 200}  # the note won: still live
    plain = cluster.watermark_tasks(clock=later)
    plain.run("sc", "st")
    assert mgr.list_writers("sc", "st") == {}  # expired (kept, out of watermarks)
    assert records.list_keys("marks/sc/st") == ["marks/sc/st/w1"]
    much_later = ManualClock(wall_start_ms=int(time.time() * 1000) + 3_600_000)
    cluster.watermark_tasks(clock=much_later).run("sc", "st")
    assert records.list_keys("marks/sc/st") == []  # ten timeouts silent: deleted


def test_a_reset_to_an_earlier_cut_starts_the_windows_again(cluster: InProcessCluster) -> None:
    """After ``reset_to`` the group reads from earlier positions: a window kept from before
    would claim a lower bound the events read again contradict."""
    mgr = make(cluster, segments=1)
    head = mgr.get_head_cut("sc", "st")
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        for t in (100, 200):
            writer.note_time(t)
            for i in range(5):
                writer.write_event({"t": t + i})
            wait_noted(mgr, writer, t)
            assert cluster.run_watermarks() == 1
        writer.note_time(300)  # keeps the writer's time ahead (it closes next)
        wait_noted(mgr, writer, 300)
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    with cluster.create_reader("r", "sc", "g", pr.JsonSerializer()) as reader:
        for _ in range(10):
            ev = reader.read_next_event(5.0)
            assert ev is not None and ev.event is not None
        assert reader.get_current_time_window("sc/st").lower_ms == 200
        cluster.reader_group("sc", "g").reset_to({"sc/st": head})
        with pytest.raises(pr.ReinitializationRequiredError):
            while True:
                reader.read_next_event(5.0)
        lowest_allowed = None
        for _ in range(10):
            ev = reader.read_next_event(5.0)
            assert ev is not None and ev.event is not None
            if lowest_allowed is not None:
                assert ev.event["t"] >= lowest_allowed
            lowest_allowed = reader.get_current_time_window("sc/st").lower_ms


def test_a_writer_whose_events_wait_keeps_its_mark_alive() -> None:
    """Events stuck behind a container that is down (chaos run p: acks of 79 s) must not
    let the writer time out while its older events may still land beyond the next cut: the
    mark thread stores its last mark again while it waits, and sends the new one after."""
    from concurrent.futures import Future

    from pravega_ray.client.writer_marks import MarkSender
    from pravega_ray.timing import DAEMON_THREADS

    controller = RecordingController()
    where = {"at": 10}
    sender = MarkSender(
        "sc",
        "st",
        "w",
        controller,
        lambda: {0: where["at"]},
        DAEMON_THREADS,
        keepalive_s=0.05,  # type: ignore[arg-type]
    )
    sender.note(100, [])
    assert sender.flush(5)
    stuck: Future[None] = Future()
    sender.note(200, [stuck])
    time.sleep(0.5)
    assert controller.calls[0] == (100, {0: 10})
    assert len(controller.calls) >= 4  # kept alive while waiting...
    assert all(call == (100, {0: 10}) for call in controller.calls)  # ...with the old mark only
    where["at"] = 50
    stuck.set_result(None)
    assert sender.flush(5)
    assert controller.calls[-1] == (200, {0: 50})
    sender.close()
    assert controller.calls[-1] == (-1, {0: 50})  # closed where it stands


def test_a_writer_noting_nothing_stays_alive_only_while_it_has_unacknowledged_events() -> None:
    """Blocked writing (no new time noted) but with events in flight: kept alive; idle with
    everything acknowledged: left to time out, as a writer that stopped noting time."""
    from pravega_ray.client.writer_marks import MarkSender
    from pravega_ray.timing import DAEMON_THREADS

    controller = RecordingController()
    calls = controller.times

    in_flight = {"yes": True}
    sender = MarkSender(
        "sc",
        "st",
        "w",
        controller,
        lambda: {0: 0},
        DAEMON_THREADS,  # type: ignore[arg-type]
        keepalive_s=0.05,
        unacknowledged=lambda: in_flight["yes"],
    )
    sender.note(100, [])
    assert sender.flush(5)
    time.sleep(0.4)
    assert len(calls) >= 4 and set(calls) == {100}
    in_flight["yes"] = False
    time.sleep(0.1)
    before = len(calls)
    time.sleep(0.4)
    assert len(calls) == before  # nothing in flight: no keep-alive
    sender.close()


def test_the_mark_thread_survives_a_position_that_times_out() -> None:
    """The writer's position asks a container for a segment's length after a reconnect; an
    unanswered call is a TimeoutError, not a PravegaError (the simulation's seed 24 ended
    the thread on it, and no later mark was ever sent)."""
    from concurrent.futures import TimeoutError as FutureTimeoutError

    from pravega_ray.client.writer_marks import MarkSender
    from pravega_ray.timing import DAEMON_THREADS

    controller = RecordingController()
    sent = controller.times

    failures = [FutureTimeoutError()]

    def position() -> dict[int, int]:
        if failures:
            raise failures.pop()
        return {0: 0}

    sender = MarkSender("sc", "st", "w", controller, position, DAEMON_THREADS)  # type: ignore[arg-type]
    sender.note(100, [])
    assert sender.flush(5)
    assert sent == []  # lost, logged
    sender.note(200, [])
    assert sender.flush(5)
    assert sent == [200]
    sender.close()


def _kept(cluster: InProcessCluster, stream: str = "st") -> tuple[list[Watermark], int, int]:
    """The watermarks the mark segment still holds (from its start), its start and length."""
    info = cluster.stream_manager().get_stream_info("sc", stream)
    segment = mark_segment_name("sc", stream, info.creation_time_ms)
    seg = cluster.segments.get_info(segment).result(10)
    reads = read_watermarks(
        lambda at: cluster.segments.read(segment, at, 1 << 20, 0.0).result(10),
        segment,
        seg.start_offset,
    )
    return [m for found, _ in reads for m in found], seg.start_offset, seg.length


@pytest.mark.parametrize("killed_at", [None, "truncated", "recorded"])
def test_the_mark_segment_keeps_only_its_newest_watermarks_and_windows_stay_true(
    cluster: InProcessCluster, killed_at: str | None
) -> None:
    # A stream noting time for a year would keep one watermark per period for ever; the
    # workflow truncates its mark segment at an entry's start once ``keep_bytes`` more were
    # appended, so it holds between keep_bytes and twice as many (plus the newest entry).
    mgr = make(cluster, segments=1)
    keep = 600  # a few watermarks of one segment
    reader_before = None
    kills = [0]

    class Killed(Exception):
        pass

    def kill(name: str) -> None:
        if name == killed_at and kills[0] < 4:  # the first four times it gets there
            kills[0] += 1
            raise Killed(name)

    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        for n in range(1, 41):
            t = 100 * n
            writer.note_time(t)
            writer.write_event({"t": t}, routing_key="k")
            wait_noted(mgr, writer, t)
            if n == 30:  # a run whose record points below the segment's start reads on
                cluster.metadata.delete("watermark/sc/st")
            try:
                emitted_now = cluster.watermark_tasks(step=kill, keep_bytes=keep).run("sc", "st")
            except Killed:
                emitted_now = None  # emitted or not: the next run finds out
            if emitted_now is None:
                cluster.watermark_tasks(keep_bytes=keep).run("sc", "st")
            if n == 5:
                cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
                reader_before = cluster.create_reader("r0", "sc", "g", pr.JsonSerializer())
                assert reader_before.get_current_time_window("sc/st").upper_ms is not None
        writer.flush()
    assert kills[0] == (0 if killed_at is None else 4)
    marks, start, length = _kept(cluster)
    entry = len(json.dumps(marks[-1].to_dict())) + 64  # an upper bound of one entry's size
    assert start > 0 and length - start <= 2 * keep + entry, (start, length)
    lowers = [m.lower_ms for m in marks]
    assert lowers == sorted(set(lowers)) and lowers[-1] == 4000  # once each, in order
    assert lowers[0] > 100  # the oldest are gone
    # A reader whose window last fetched before the truncations, and one that never fetched:
    # both read on from the segment's start, and no window contradicts an event read after.
    assert reader_before is not None
    reader_after = cluster.create_reader("r1", "sc", "g", pr.JsonSerializer())
    for reader in (reader_before, reader_after):
        lowest_allowed = None
        while (ev := reader.read_next_event(0.5)) is not None and ev.event is not None:
            if lowest_allowed is not None:
                assert ev.event["t"] >= lowest_allowed
            window = reader.get_current_time_window("sc/st")
            lowest_allowed = window.lower_ms if window.lower_ms is not None else lowest_allowed
    # The reader holding the segment has passed every watermark. The other one sees the
    # group's position as the holder last reported it (offsets are stored at most every
    # READER_GROUP_OFFSETS_SAVE_INTERVAL_S), so its window may err late, never early.
    assert reader_before.get_current_time_window("sc/st").lower_ms == 4000
    assert reader_after.get_current_time_window("sc/st").lower_ms in {*lowers, None}
    reader_before.close()  # hands the segment back at its end: the other takes it there
    assert reader_after.read_next_event(0.5) is None
    assert reader_after.get_current_time_window("sc/st").lower_ms == 4000
    reader_after.close()
    batch = cluster.batch_client()
    assert batch.time_window(mgr.get_tail_cut("sc", "st")).lower_ms == 4000
    assert batch.time_window(mgr.get_head_cut("sc", "st")).lower_ms is None  # before every kept
