"""The metrics facade (pravega_ray/metrics.py) with its in-memory sink, its catalog against
docs/metrics.md, and the core's recordings on an in-process cluster."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import pravega_ray as pr
from pravega_ray import metrics
from pravega_ray.client.event_framing import frame_events
from pravega_ray.constants import NO_EVENT_NUMBER
from pravega_ray.controller.event_processor import DONE, POSTPONE, RequestEventProcessor
from pravega_ray.errors import InvalidArgumentError, RetriableError
from pravega_ray.segmentstore.auto_scale import policy_updates
from pravega_ray.storage.fenced import FencedChunkStorage
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.timing import ManualClock
from tests.checks import group_test_cluster, write_numbered
from tests.containers import QUIET, new_container

pytestmark = pytest.mark.timeout(60)

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
SEG = "sc/st/0.#epoch.0"


@pytest.fixture
def sink() -> Iterator[metrics.InMemorySink]:
    with metrics.using_sink(metrics.InMemorySink()) as fresh:
        yield fresh  # type: ignore[misc]


# --- the facade -----------------------------------------------------------------------------------
def test_counter_gauge_histogram_record_into_the_sink(sink: metrics.InMemorySink) -> None:
    c = metrics.counter("pravega_test_things", "things", "Test.", ("kind",))
    g = metrics.gauge("pravega_test_level", "bytes", "Test.", ("kind",))
    h = metrics.histogram("pravega_test_sizes", "bytes", "Test.", ("kind",), boundaries=(1, 10))
    c.inc(2, {"kind": "a"})
    c.inc(3, {"kind": "a"})
    c.inc(1, {"kind": "b"})
    g.set(7, {"kind": "a"})
    g.set(5, {"kind": "a"})
    for value in (0.5, 1, 2, 10, 11):
        h.observe(value, {"kind": "a"})
    assert sink.value("pravega_test_things", kind="a") == 5
    assert sink.total("pravega_test_things") == 6
    assert sink.value("pravega_test_level", kind="a") == 5
    hv = sink.histogram("pravega_test_sizes", kind="a")
    assert hv is not None and hv.count == 5 and hv.sum == 24.5
    assert hv.buckets == [2, 2, 1]  # <= 1, (1, 10], > 10
    assert sink.value("pravega_test_things", kind="never") is None
    assert sink.total("pravega_test_sizes") == 5


def test_declaring_a_metric_twice_gives_the_same_one_or_an_error() -> None:
    first = metrics.counter("pravega_test_twice", "x", "Test.", ("a",))
    assert metrics.counter("pravega_test_twice", "x", "Test.", ("a",)) is first
    with pytest.raises(InvalidArgumentError):
        metrics.counter("pravega_test_twice", "x", "Test.", ("b",))
    with pytest.raises(InvalidArgumentError):
        metrics.gauge("pravega_test_twice", "x", "Test.", ("a",))


@pytest.mark.parametrize(
    ("name", "tags", "bounds"),
    [
        ("test_no_prefix", (), (1.0,)),
        ("pravega_Upper", (), (1.0,)),
        ("pravega_bad_tag", ("Kind",), (1.0,)),
        ("pravega_repeated_tag", ("a", "a"), (1.0,)),
        ("pravega_no_bounds", (), ()),
        ("pravega_unsorted_bounds", (), (2.0, 1.0)),
        ("pravega_zero_bound", (), (0.0, 1.0)),
    ],
)
def test_bad_declarations_are_typed_errors(
    name: str, tags: tuple[str, ...], bounds: tuple[float, ...]
) -> None:
    with pytest.raises(InvalidArgumentError):
        metrics.histogram(name, "x", "Test.", tags, boundaries=bounds)


def test_recording_with_other_tags_or_a_negative_count_is_refused(
    sink: metrics.InMemorySink,
) -> None:
    c = metrics.counter("pravega_test_tagged", "x", "Test.", ("a", "b"))
    for tags in ({"a": "1"}, {"a": "1", "c": "2"}, {"a": "1", "b": "2", "c": "3"}, None):
        with pytest.raises(InvalidArgumentError):
            c.inc(1, tags)
    with pytest.raises(InvalidArgumentError):
        c.inc(-1, {"a": "1", "b": "2"})
    with pytest.raises(InvalidArgumentError):
        sink.total("pravega_test_tagged", c="1")
    c.inc(0, {"a": "1", "b": "2"})  # nothing to add: nothing recorded (Ray refuses 0)
    assert sink.total("pravega_test_tagged") == 0
    assert sink.series("pravega_test_tagged") == {}


def test_the_in_memory_sink_keeps_a_bounded_number_of_series() -> None:
    g = metrics.gauge("pravega_test_bounded", "x", "Test.", ("k",))
    with metrics.using_sink(metrics.InMemorySink(series_per_metric_max=3)) as bounded:
        for i in range(5):
            g.set(i, {"k": str(i)})
        g.set(9, {"k": "0"})  # an existing series still updates
        assert isinstance(bounded, metrics.InMemorySink)
        assert len(bounded.series("pravega_test_bounded")) == 3 and bounded.dropped == 2
        assert bounded.value("pravega_test_bounded", k="0") == 9
    for bad in (0, -1, True, 1.5):
        with pytest.raises(InvalidArgumentError):
            metrics.InMemorySink(series_per_metric_max=bad)  # type: ignore[arg-type]


def test_install_sink_switches_every_metric_and_refuses_non_sinks() -> None:
    c = metrics.counter("pravega_test_switch", "x", "Test.")
    first, second = metrics.InMemorySink(), metrics.InMemorySink()
    with metrics.using_sink(first):
        c.inc()
        with metrics.using_sink(second):
            c.inc(2)
        c.inc(4)
    assert first.value("pravega_test_switch") == 5
    assert second.value("pravega_test_switch") == 2
    with pytest.raises(InvalidArgumentError):
        metrics.install_sink(object())  # type: ignore[arg-type]


# --- the catalog and its document -----------------------------------------------------------------
def test_catalog_names_and_tags_are_bounded() -> None:
    names = [d.name for d in metrics.CATALOG]
    assert len(names) == len(set(names))
    allowed = {"container", "scope", "stream", "group", "workflow", "outcome"}
    for d in metrics.CATALOG:
        assert d.name.startswith("pravega_")
        extra = set(d.tag_keys) - allowed
        assert extra <= {"segment"}, d.name
        if "segment" in d.tag_keys:
            assert d.name in ("pravega_segment_event_rate", "pravega_segment_byte_rate")
    assert metrics.workflow_tag("scale") == "scale"
    assert metrics.workflow_tag("made-up") == metrics.workflow_tag(None) == "other"


def test_docs_list_every_metric_with_its_type_unit_and_tags() -> None:
    text = DOC.read_text()
    row = re.compile(r"^\| `(pravega_\w+)` \| (\w+) \| ([^|]*) \| ([^|]*) \|", re.M)
    rows = {m[0]: m for m in row.findall(text)}
    assert set(rows) == {d.name for d in metrics.CATALOG}
    for d in metrics.CATALOG:
        _, kind, tags, unit = rows[d.name]
        assert kind == d.kind, d.name
        assert [t.strip(" `") for t in tags.split(",") if t.strip()] == list(d.tag_keys), d.name
        assert unit.strip() == d.unit, d.name


# --- the core's recordings ------------------------------------------------------------------------
def test_appends_record_events_bytes_latency_and_group_commits(sink: metrics.InMemorySink) -> None:
    cluster = group_test_cluster(2)
    try:
        write_numbered(cluster, 0, 500)
        tags = {"scope": "sc", "stream": "st"}
        assert sink.total("pravega_segmentstore_appended_events", **tags) == 500
        appended = sink.total("pravega_segmentstore_appended_bytes", **tags)
        assert appended > 500 * len('{"n": 0}')
        latencies = sink.total("pravega_segmentstore_append_latency_seconds")
        commits = sink.total("pravega_durable_log_group_commit_events")
        assert 1 <= commits <= latencies <= 500  # per block and per commit, not per event
        per_commit = [v for v in sink.series("pravega_durable_log_group_commit_events").values()]
        assert sum(v.sum for v in per_commit if isinstance(v, metrics.HistogramValue)) >= 500
        group = "g"
        cluster.create_reader_group("sc", group, pr.ReaderGroupConfig.for_streams("sc/st"))
        rg = cluster.reader_group("sc", group)
        assert rg.unread_bytes() == appended
        assert sink.value("pravega_reader_group_unread_bytes", scope="sc", group=group) == appended
        with cluster.create_reader("r", "sc", group, pr.JsonSerializer()) as reader:
            seen = 0
            while seen < 500 and reader.read_next_event(timeout_s=5.0) is not None:
                seen += 1
            assert seen == 500
            deadline = time.monotonic() + 10
            while rg.unread_bytes() != 0:  # positions reach the group's state on a sync
                assert time.monotonic() < deadline
                reader.read_next_event(timeout_s=0.2)
        assert sink.value("pravega_reader_group_unread_bytes", scope="sc", group=group) == 0
        wait_for(lambda: sink.total("pravega_read_cache_hits") >= 1)
        wait_for(lambda: sink.total("pravega_tier2_written_bytes") >= appended)
        wait_for(lambda: sink.total("pravega_durable_log_bytes") > 0)
    finally:
        cluster.shutdown()


def test_log_size_truncation_and_storage_lag_follow_flushes(sink: metrics.InMemorySink) -> None:
    async def go() -> None:
        container = new_container(config=QUIET)
        await container.create_segment(SEG)
        writer = uuid.uuid4().bytes
        await container.setup_append(SEG, writer)
        last = NO_EVENT_NUMBER
        for i in range(20):
            await container.append(SEG, writer, last, i, 1, frame_events([b"x" * 1000]))
            last = i
        # A storage writer round that flushes nothing (QUIET): the gauges record the lag.
        await container._durable_log.checkpoint_and_truncate(force=False)
        assert sink.value("pravega_storage_writer_lag_bytes", container="0") >= 20_000  # type: ignore[operator]
        before = sink.value("pravega_durable_log_bytes", container="0")
        assert before is not None and before >= 20_000
        await container.checkpoint()  # flush, checkpoint, truncate
        await asyncio.sleep(metrics.GAUGE_INTERVAL_S)  # the gauges record at most this often
        await container.checkpoint()
        await container.close()

    asyncio.run(go())
    assert sink.value("pravega_storage_writer_lag_bytes", container="0") == 0
    log_bytes = sink.value("pravega_durable_log_bytes", container="0")
    records = sink.value("pravega_durable_log_truncation_lag_records", container="0")
    assert log_bytes is not None and records is not None and records >= 1
    assert log_bytes < 20_000  # the flushed appends were truncated away
    assert sink.value("pravega_tier2_written_bytes", container="0") >= 20_000  # type: ignore[operator]


def test_auto_scale_rates_are_recorded_for_segments_with_a_policy(
    sink: metrics.InMemorySink,
) -> None:
    from tests.unit.segmentstore.test_auto_scale import (
        FAST,
        ListReporter,
        Writer,
        scaled_container,
        stepped,
    )

    clock = ManualClock()
    tags = {"scope": "sc", "stream": "st", "segment": "0.#epoch.0"}

    async def scenario() -> None:
        c = scaled_container(ListReporter(), clock, FAST)
        scaler = await stepped(c)
        await c.create_segment(SEG)
        await c.create_segment("sc/st/1.#epoch.0")  # no policy: no rate recorded
        await c.update_attributes(SEG, policy_updates("events", 1000, 4))
        await Writer(c, clock).run(2_000, 3.0)
        await scaler.run_round()
        rate = sink.value("pravega_segment_event_rate", **tags)
        assert rate is not None and 500 < rate < 2_000
        assert sink.value("pravega_segment_byte_rate", **tags) > rate  # type: ignore[operator]
        assert len(sink.series("pravega_segment_event_rate")) == 1
        await c.seal(SEG)
        await scaler.run_round()  # sealed: no longer watched, set to 0 once
        assert sink.value("pravega_segment_event_rate", **tags) == 0
        await c.close()

    asyncio.run(scenario())


def test_tier2_bytes_are_counted_by_container(sink: metrics.InMemorySink) -> None:
    storage = FencedChunkStorage(InMemoryChunkStorage(), "container-7")
    storage.claim(1)
    storage.create("a/b", b"12345")
    assert storage.read("a/b", 1, 10) == b"2345"
    assert sink.value("pravega_tier2_written_bytes", container="7") == 5
    assert sink.value("pravega_tier2_read_bytes", container="7") == 4


def test_workflows_are_counted_by_outcome_and_timed(sink: metrics.InMemorySink) -> None:
    cluster = group_test_cluster(1)
    try:
        manager = cluster.stream_manager()
        manager.seal_stream("sc", "st")
        manager.delete_stream("sc", "st")
        wait_for(lambda: sink.total("pravega_controller_workflows", workflow="delete") >= 1)
        assert sink.total("pravega_controller_workflows", workflow="seal", outcome="done") >= 1
        assert sink.total("pravega_controller_workflow_duration_seconds", workflow="seal") >= 1
    finally:
        cluster.shutdown()


def test_a_failing_or_postponed_request_is_counted_as_such(sink: metrics.InMemorySink) -> None:
    outcomes = iter([POSTPONE, DONE])

    def handler(body: dict[str, object]) -> str:
        if body["type"] == "seal":
            raise RuntimeError("boom")
        if body["type"] == "delete":
            raise RetriableError("unknown")
        return next(outcomes)

    processor = RequestEventProcessor(None, handler, None)  # type: ignore[arg-type]
    for kind in ("seal", "delete", "scale", "scale", "bogus-kind"):
        request = type("R", (), {"body": {"type": kind, "posted_ms": 0}, "offset": 0})()
        processor._handle(request)  # type: ignore[arg-type]
    assert sink.value("pravega_controller_workflows", workflow="seal", outcome="failed") == 1
    assert sink.value("pravega_controller_workflows", workflow="delete", outcome="retried") == 1
    assert sink.value("pravega_controller_workflows", workflow="scale", outcome="expired") == 1
    assert sink.value("pravega_controller_workflows", workflow="scale", outcome="done") == 1
    assert sink.total("pravega_controller_workflows", workflow="other") == 1
    processor.stop()


def wait_for(condition, timeout_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)
