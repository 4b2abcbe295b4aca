"""Auto-scaling detection: policy attributes, the pure decision, the container's part."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from pravega_ray.client.event_framing import frame_events
from pravega_ray.constants import NO_EVENT_NUMBER
from pravega_ray.contracts.attributes import (
    CREATION_TIME,
    EVENT_COUNT,
    NULL_VALUE,
    AttributeUpdate,
    AttributeUpdateType,
    core_key,
    is_settable_core_key,
)
from pravega_ray.contracts.segment_store import SegmentRole, SegmentTraffic
from pravega_ray.errors import ContainerNotReadyError, FencedError, InvalidArgumentError
from pravega_ray.logs.memory import InMemoryLogStore
from pravega_ray.segmentstore.auto_scale import (
    NO_AUTO_SCALER,
    POLICY_KEYS,
    SCALE_POLICY_FACTOR,
    SCALE_POLICY_KIND,
    SCALE_POLICY_RATE,
    AutoScaleConfig,
    AutoScaleMonitor,
    AutoScaler,
    ScalePolicy,
    ScaleReport,
    policy_attributes,
    policy_from_attributes,
    policy_removal_updates,
    policy_updates,
)
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.timing import AsyncioScheduler, ManualClock
from tests.containers import QUIET, new_container

pytestmark = pytest.mark.timeout(60)
R = TypeVar("R")

SEG = "sc/st/0.#epoch.0"
EVENTS = ScalePolicy("events", 1000.0, 20)
FAST = AutoScaleConfig(period_s=1.0, cooldown_s=5.0, mute_s=20.0, warmup_s=3.0)


class ListReporter:
    """Collects reports; raises while ``failures`` is above zero (then counts it down)."""

    def __init__(self) -> None:
        self.reports: list[ScaleReport] = []
        self.failures = 0
        self.calls = 0

    def report(self, report: ScaleReport) -> None:
        self.calls += 1
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionError("controller unreachable")
        self.reports.append(report)


class ClockScheduler(AsyncioScheduler):
    """Sleeps last until a manual clock has moved past them; blocking calls run inline
    (memory backends, a list reporter), so a round completes within one turn of the loop."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock

    async def sleep(self, seconds: float) -> None:
        deadline = self.clock.monotonic() + seconds
        while self.clock.monotonic() < deadline:
            await asyncio.sleep(0.001)

    async def run_blocking(self, function: Callable[..., R], *args: Any) -> R:
        return function(*args)


def traffic(events: float, size: float = 0.0, segment: str = SEG) -> list[SegmentTraffic]:
    return [SegmentTraffic(segment, events, size)]


def monitor(config: AutoScaleConfig = FAST) -> tuple[AutoScaleMonitor, ListReporter]:
    reporter = ListReporter()
    return AutoScaleMonitor(ManualClock(), reporter, config), reporter


def settle(m: AutoScaleMonitor, rate: float, until: float, policy: ScalePolicy = EVENTS) -> None:
    """Observe ``rate`` once a second from 0 up to (not including) ``until``, delivering none."""
    t = 0.0
    while t < until:
        m.check(traffic(rate), {SEG: policy}, t)
        t += 1.0


# --- policy attributes -----------------------------------------------------------------------
def test_policy_attributes_round_trip_for_events_and_bytes() -> None:
    values = policy_attributes("events", 1000, 4)
    assert values == {SCALE_POLICY_KIND: 1, SCALE_POLICY_RATE: 1_000_000, SCALE_POLICY_FACTOR: 4}
    assert policy_from_attributes(values) == ScalePolicy("events", 1000.0, 4)
    data = policy_from_attributes(policy_attributes("bytes", 0.25, 2))
    assert data == ScalePolicy("bytes", 0.25, 2)
    assert policy_from_attributes({}) is None
    assert policy_from_attributes(dict.fromkeys(POLICY_KEYS, NULL_VALUE)) is None


def test_policy_keys_are_settable_core_keys_no_writer_can_use() -> None:
    assert all(is_settable_core_key(k) for k in POLICY_KEYS)
    assert len(set(POLICY_KEYS)) == 3
    assert not is_settable_core_key(EVENT_COUNT) and not is_settable_core_key(CREATION_TIME)
    assert not is_settable_core_key(uuid.uuid4().bytes) and not is_settable_core_key("x")
    for key in (EVENT_COUNT, CREATION_TIME, core_key(15), core_key(32)):
        with pytest.raises(InvalidArgumentError):
            AttributeUpdate(key, AttributeUpdateType.REPLACE, 1)
    for bad in (-1, True, 2**63, "16"):
        with pytest.raises(InvalidArgumentError):
            core_key(bad)  # type: ignore[arg-type]


def test_policy_attributes_reject_bad_policies() -> None:
    bad_kinds = ["messages", ["events"], None, "EVENTS"]
    # Below a thousandth once stored; thousandths beyond 64 bits; not finite; not numbers.
    bad_rates = [0, -5, 0.0004, 1e17, math.nan, math.inf, "1000", True, None]
    bad_factors = [1, 0, -2, 10_001, 2.0, True, "4", None]
    cases = [(k, 1000, 2) for k in bad_kinds] + [("events", r, 2) for r in bad_rates]
    for kind, rate, factor in cases + [("bytes", 1000, f) for f in bad_factors]:
        with pytest.raises(InvalidArgumentError):
            policy_attributes(kind, rate, factor)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "values",
    [
        {SCALE_POLICY_KIND: 1},  # partial
        {SCALE_POLICY_KIND: 1, SCALE_POLICY_RATE: 1000},
        {SCALE_POLICY_KIND: 7, SCALE_POLICY_RATE: 1000, SCALE_POLICY_FACTOR: 2},
        {SCALE_POLICY_KIND: 1, SCALE_POLICY_RATE: -1, SCALE_POLICY_FACTOR: 2},
        {SCALE_POLICY_KIND: 1, SCALE_POLICY_RATE: 1000, SCALE_POLICY_FACTOR: 1},
    ],
)
def test_policy_from_attributes_rejects_values_that_do_not_decode(values: dict) -> None:
    with pytest.raises(InvalidArgumentError):
        policy_from_attributes(values)


def test_auto_scale_config_rejects_bad_values() -> None:
    for name, value in [
        *[("period_s", v) for v in (0, -1, math.nan, math.inf, "1", True)],
        *[("cooldown_s", -1), ("mute_s", math.inf), ("warmup_s", None)],
        *[("cold_fraction", v) for v in (1.0, -0.1, math.nan)],
        *[("report_timeout_s", 0), ("reports_per_period_max", 0)],
        *[("policy_reads_per_period_max", v) for v in (True, 1.5, 0)],
    ]:
        with pytest.raises(InvalidArgumentError):
            AutoScaleConfig(**{name: value})  # type: ignore[arg-type]


# --- the pure decision -----------------------------------------------------------------------
def test_check_reports_a_hot_segment_once_warm_and_cooled_down() -> None:
    m, _ = monitor()
    for t in range(5):  # warm-up 3 s, cooldown 5 s from first sight
        assert m.check(traffic(10_000), {SEG: EVENTS}, float(t)) == []
    (report,) = m.check(traffic(10_000), {SEG: EVENTS}, 5.0)
    assert (report.segment, report.direction, report.splits) == (SEG, "up", 10)
    assert (report.rate, report.target_rate) == (10_000, 1000.0)
    assert report.at_ms == ManualClock().wall_time_ms()


@pytest.mark.parametrize(
    ("rate", "factor", "splits"),
    [(1001, 20, 2), (1500, 20, 2), (2500, 20, 3), (9_990, 20, 10), (10_000, 4, 4), (1e12, 3, 3)],
)
def test_splits_bring_each_piece_under_target_capped_by_the_scale_factor(
    rate: float, factor: int, splits: int
) -> None:
    m, _ = monitor()
    policy = ScalePolicy("events", 1000, factor)
    settle(m, rate, 5.0, policy)
    (report,) = m.check(traffic(rate), {SEG: policy}, 5.0)
    assert report.splits == splits


def test_check_reports_a_cold_segment_only_after_a_cold_period() -> None:
    m, _ = monitor(AutoScaleConfig(period_s=2.0, cooldown_s=0.0, warmup_s=3.0))
    assert m.check(traffic(0), {SEG: EVENTS}, 0.0) == []  # warming up: not judged
    assert m.check(traffic(0), {SEG: EVENTS}, 3.0) == []  # cold since 3 s
    assert m.check(traffic(499), {SEG: EVENTS}, 4.0) == []
    (report,) = m.check(traffic(100), {SEG: EVENTS}, 5.0)
    assert (report.direction, report.splits, report.rate) == ("down", 0, 100)


def test_a_rate_between_cold_and_hot_breaks_a_cold_run_and_reports_nothing() -> None:
    m, _ = monitor(AutoScaleConfig(period_s=2.0, cooldown_s=0.0, warmup_s=0.0))
    assert m.check(traffic(0), {SEG: EVENTS}, 0.0) == []
    assert m.check(traffic(600), {SEG: EVENTS}, 1.0) == []  # at 0.6 of target: not cold
    assert m.check(traffic(0), {SEG: EVENTS}, 2.0) == []  # a new cold run starts
    assert m.check(traffic(1000), {SEG: EVENTS}, 3.5) == []  # exactly target: not hot
    assert m.check(traffic(0), {SEG: EVENTS}, 4.0) == []
    assert [r.direction for r in m.check(traffic(0), {SEG: EVENTS}, 6.0)] == ["down"]


def test_cooldown_and_mute_follow_a_delivered_report() -> None:
    m, _ = monitor(AutoScaleConfig(period_s=1.0, cooldown_s=5.0, mute_s=20.0, warmup_s=0.0))
    settle(m, 5000, 5.0)
    (up,) = m.check(traffic(5000), {SEG: EVENTS}, 5.0)
    m.record_delivered(up, 5.0)
    for t in range(6, 25):  # muted for 20 s: no second "up", and no "down" either
        rate = 5000 if t < 15 else 0
        assert m.check(traffic(rate), {SEG: EVENTS}, float(t)) == [], t
    (down,) = m.check(traffic(0), {SEG: EVENTS}, 25.0)
    assert down.direction == "down"
    m.record_delivered(down, 25.0)
    assert m.check(traffic(5000), {SEG: EVENTS}, 29.0) == []  # cooldown after any report
    (up_again,) = m.check(traffic(5000), {SEG: EVENTS}, 30.0)  # a "down" mutes only "down"
    assert up_again.direction == "up"  # (not delivered)
    for t in range(31, 45):  # cold for long enough, but "down" is muted until 45 s
        assert m.check(traffic(0), {SEG: EVENTS}, float(t)) == [], t
    assert [r.direction for r in m.check(traffic(0), {SEG: EVENTS}, 45.0)] == ["down"]


def test_an_undelivered_report_is_due_again() -> None:
    m, _ = monitor()
    settle(m, 5000, 5.0)
    first = m.check(traffic(5000), {SEG: EVENTS}, 5.0)
    again = m.check(traffic(5000), {SEG: EVENTS}, 6.0)
    assert [r.direction for r in first] == [r.direction for r in again] == ["up"]


def test_warm_up_holds_judgement_even_of_a_hot_segment() -> None:
    m, _ = monitor(AutoScaleConfig(cooldown_s=0.0, warmup_s=10.0))
    for t in range(10):
        assert m.check(traffic(1e9), {SEG: EVENTS}, float(t)) == []
    assert len(m.check(traffic(1e9), {SEG: EVENTS}, 10.0)) == 1


def test_sealed_segments_and_segments_without_policy_are_never_reported() -> None:
    m, _ = monitor(AutoScaleConfig(cooldown_s=0.0, warmup_s=0.0))
    other = "sc/st/1.#epoch.0"
    rates = traffic(1e6) + traffic(1e6, segment=other)
    for t in range(30):
        assert m.check(rates, {SEG: EVENTS}, float(t), sealed={SEG}) == []
        assert m.check(rates, {}, float(t)) == []
    assert m.watched() == []


def test_bytes_policies_judge_the_byte_rate_and_events_policies_the_event_rate() -> None:
    m, _ = monitor(AutoScaleConfig(cooldown_s=0.0, warmup_s=0.0))
    by_bytes = ScalePolicy("bytes", 1024 * 1024, 8)
    assert m.check(traffic(1e9, 10), {SEG: by_bytes}, 0.0) == []
    (report,) = m.check(traffic(0, 3.5 * 1024 * 1024), {SEG: by_bytes}, 1.0)
    assert (report.direction, report.splits, report.target_rate) == ("up", 4, 1024 * 1024)
    m2, _ = monitor(AutoScaleConfig(cooldown_s=0.0, warmup_s=0.0))
    assert m2.check(traffic(10, 1e12), {SEG: EVENTS}, 0.0) == []


@pytest.mark.parametrize("bad", [math.nan, -1.0, -math.inf, math.inf])
def test_nan_infinite_or_negative_rates_are_never_reported(bad: float) -> None:
    m, _ = monitor(AutoScaleConfig(period_s=1.0, cooldown_s=0.0, warmup_s=0.0))
    for t in range(20):
        assert m.check(traffic(bad, bad), {SEG: EVENTS}, float(t)) == []
    # A bad reading breaks a cold run: the run starts again after it.
    assert m.check(traffic(0), {SEG: EVENTS}, 20.0) == []
    assert m.check(traffic(bad), {SEG: EVENTS}, 21.0) == []
    assert m.check(traffic(0), {SEG: EVENTS}, 21.5) == []
    assert len(m.check(traffic(0), {SEG: EVENTS}, 22.5)) == 1


def test_a_segment_gone_from_the_traffic_is_forgotten_and_judged_afresh() -> None:
    m, _ = monitor()
    settle(m, 5000, 5.0)
    assert m.watched() == [SEG]
    assert m.check([], {SEG: EVENTS}, 5.0) == []
    assert m.watched() == []
    assert m.check(traffic(5000), {SEG: EVENTS}, 6.0) == []  # first seen again: warming up


def test_reports_per_period_are_bounded_and_the_rest_stay_due() -> None:
    m, _ = monitor(AutoScaleConfig(cooldown_s=0.0, warmup_s=0.0, reports_per_period_max=3))
    names = [f"sc/st/{i}.#epoch.0" for i in range(5)]
    rates = [SegmentTraffic(n, 5000, 0) for n in names]
    policies = dict.fromkeys(names, EVENTS)
    first = m.check(rates, policies, 0.0)
    assert len(first) == 3
    for r in first:
        m.record_delivered(r, 0.0)
    assert {r.segment for r in m.check(rates, policies, 1.0)} == set(names[3:])


def test_deliver_stops_at_the_first_failure_and_keeps_the_rest_due() -> None:
    m, reporter = monitor(AutoScaleConfig(cooldown_s=0.0, warmup_s=0.0))
    names = [f"sc/st/{i}.#epoch.0" for i in range(3)]
    rates = [SegmentTraffic(n, 5000, 0) for n in names]
    policies = dict.fromkeys(names, EVENTS)
    reporter.failures = 1
    due = m.check(rates, policies, 0.0)
    assert asyncio.run(m.report(due, 0.0, AsyncioScheduler())) == []
    assert reporter.calls == 1
    due = m.check(rates, policies, 1.0)
    assert len(asyncio.run(m.report(due, 1.0, AsyncioScheduler()))) == 3
    assert m.check(rates, policies, 2.0) == []


def test_a_reporter_that_hangs_is_given_up_after_the_timeout() -> None:
    class Hanging:
        def report(self, report: ScaleReport) -> None:
            import time

            time.sleep(0.5)

    m = AutoScaleMonitor(ManualClock(), Hanging(), AutoScaleConfig(report_timeout_s=0.05))
    report = ScaleReport(SEG, "up", 2, 2000.0, 1000.0, 0)
    assert asyncio.run(m.report([report], 0.0, AsyncioScheduler())) == []


# --- the container's part --------------------------------------------------------------------
def scaled_container(
    reporter: ListReporter,
    clock: ManualClock,
    config: AutoScaleConfig = FAST,
    store: InMemoryLogStore | None = None,
    storage: InMemoryChunkStorage | None = None,
) -> SegmentContainer:
    return new_container(
        store,
        storage,
        config=QUIET,
        clock=clock,
        scheduler=ClockScheduler(clock),
        scale_reporter=reporter,
        auto_scale=config,
    )


class Writer:
    """Appends ``rate`` events a second to one segment in 0.1 s steps of the manual clock."""

    def __init__(self, container: SegmentContainer, clock: ManualClock, segment: str = SEG):
        self.container, self.clock, self.segment = container, clock, segment
        self.writer_id = uuid.uuid4().bytes
        self.last = NO_EVENT_NUMBER

    async def run(self, rate: int, seconds: float, until: Callable[[], bool] = lambda: False):
        per_step = rate // 10
        for _ in range(round(seconds * 10)):
            if until():
                return
            if per_step:
                data = frame_events([b"x" * 8] * per_step)
                new_last = (0 if self.last == NO_EVENT_NUMBER else self.last + 1) + per_step - 1
                await self.container.append(
                    self.segment, self.writer_id, self.last, new_last, per_step, data
                )
                self.last = new_last
            self.clock.advance(0.1)
            await asyncio.sleep(0.002)  # the auto-scaler's round may run


def test_container_reports_a_segment_written_at_ten_times_target_once() -> None:
    clock, reporter = ManualClock(), ListReporter()
    config = dataclasses.replace(FAST, mute_s=60.0)

    async def scenario() -> None:
        c = scaled_container(reporter, clock, config)
        await c.create_segment(SEG)
        await c.update_attributes(SEG, policy_updates("events", 1000, 4))
        assert isinstance(c.auto_scaler, AutoScaler)
        w = Writer(c, clock)
        # The first round (at 1 s) sees it; warm-up 3 s; cooldown 5 s from that round.
        await w.run(10_000, 6.0)
        assert reporter.reports == []
        await w.run(10_000, 4.0, until=lambda: bool(reporter.reports))
        assert clock.monotonic() <= 6.0 + 2 * config.period_s  # within a period or so
        (up,) = reporter.reports
        assert (up.segment, up.direction, up.splits, up.target_rate) == (SEG, "up", 4, 1000)
        assert up.rate > 4000  # smoothed: still rising towards 10,000
        up_at = clock.monotonic()
        await w.run(10_000, 10.0)  # still hot (the controller did not act), but muted
        assert len(reporter.reports) == 1
        # Stop writing: the rate decays below half the target (after about 30 s), stays there
        # for a period, and once the mute of the "up" (60 s) is over: one "down".
        await w.run(0, 60.0, until=lambda: len(reporter.reports) > 1)
        assert len(reporter.reports) == 2
        down = reporter.reports[1]
        assert down.direction == "down" and down.splits == 0 and down.rate < 500
        assert config.mute_s <= clock.monotonic() - up_at <= config.mute_s + 2 * config.period_s
        await c.close()

    asyncio.run(scenario())


def test_a_failing_reporter_never_fails_the_container_and_the_report_comes_again() -> None:
    clock, reporter = ManualClock(), ListReporter()
    reporter.failures = 3

    async def scenario() -> None:
        c = scaled_container(reporter, clock)
        await c.create_segment(SEG)
        await c.update_attributes(SEG, policy_updates("events", 1000, 4))
        w = Writer(c, clock)
        await w.run(10_000, 12.0, until=lambda: bool(reporter.reports))
        assert reporter.calls == 4  # three failed rounds, then delivered
        assert [r.direction for r in reporter.reports] == ["up"]
        assert (await c.get_info(SEG)).event_count == w.last + 1  # the appends all went on
        await c.close()

    asyncio.run(scenario())


async def stepped(c: SegmentContainer) -> AutoScaler:
    """The container's auto-scaler with its timed rounds stopped: the test runs each round."""
    await c.list_segments()  # starts the pipeline and the rounds
    scaler = c.auto_scaler
    assert isinstance(scaler, AutoScaler)
    scaler.stop()
    return scaler


def test_segments_without_policy_table_segments_and_sealed_ones_are_not_reported() -> None:
    clock, reporter = ManualClock(), ListReporter()
    config = AutoScaleConfig(period_s=1.0, cooldown_s=0.0, warmup_s=0.0)

    async def scenario() -> None:
        c = scaled_container(reporter, clock, config)
        scaler = await stepped(c)
        plain, table, sealed = SEG, "sc/st/1.#epoch.0", "sc/st/2.#epoch.0"
        await c.create_segment(plain)
        await c.table_create(table)
        await c.create_segment(sealed)
        for segment in (table, sealed):
            await c.update_attributes(segment, policy_updates("events", 0.001, 4))
        await c.seal(sealed)
        for _ in range(5):
            clock.advance(1.0)
            assert await scaler.run_round() == []
        assert scaler.monitor.watched() == []
        await c.close()

    asyncio.run(scenario())


def test_a_round_works_out_rates_only_for_segments_with_a_policy() -> None:
    """The monitor judges no other segment, and a container holds tens of thousands: the
    rates of the others are never computed (they were, every round, for every segment)."""
    clock, reporter = ManualClock(), ListReporter()
    config = AutoScaleConfig(period_s=1.0, cooldown_s=0.0, warmup_s=0.0)

    async def scenario() -> None:
        c = scaled_container(reporter, clock, config)
        scaler = await stepped(c)
        plain = [f"sc/st/{n}.#epoch.0" for n in range(1, 200)]
        for segment in [SEG, *plain]:
            await c.create_segment(segment)
        await c.update_attributes(SEG, policy_updates("events", 1000, 4))
        traffic, policies, sealed = await scaler._observe(clock.monotonic())
        assert [t.segment for t in traffic] == [SEG] and list(policies) == [SEG]
        assert sealed == set()
        await c.close()

    asyncio.run(scenario())


def test_a_policy_set_or_changed_later_is_seen_by_the_next_round() -> None:
    clock, reporter = ManualClock(), ListReporter()
    config = AutoScaleConfig(period_s=1.0, cooldown_s=0.0, warmup_s=0.0, mute_s=0.0)

    async def scenario() -> None:
        c = scaled_container(reporter, clock, config)
        scaler = await stepped(c)
        await c.create_segment(SEG)
        await scaler.run_round()  # the round ran before the controller set the policy
        assert scaler.monitor.watched() == []
        await c.update_attributes(SEG, policy_updates("events", 1000, 4))
        clock.advance(1.0)
        assert await scaler.run_round() == []  # cold since now
        clock.advance(1.0)
        (down,) = await scaler.run_round()  # idle: cold for a period
        assert (down.direction, down.target_rate) == ("down", 1000)
        await c.update_attributes(SEG, policy_updates("events", 0.5, 4))
        clock.advance(1.0)
        (again,) = await scaler.run_round()
        assert (again.direction, again.target_rate) == ("down", 0.5)
        await c.update_attributes(SEG, policy_removal_updates())
        clock.advance(1.0)
        assert await scaler.run_round() == []
        assert scaler.monitor.watched() == []
        assert [r.target_rate for r in reporter.reports] == [1000, 0.5]
        await c.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("checkpointed", [False, True])
def test_policy_attributes_survive_a_container_restart(checkpointed: bool) -> None:
    """From the log's replay, or (after a checkpoint) from the attribute index, read in
    rounds of at most ``policy_reads_per_period_max`` segments."""
    clock, reporter = ManualClock(), ListReporter()
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()
    config = AutoScaleConfig(
        period_s=1.0, cooldown_s=0.0, warmup_s=0.0, policy_reads_per_period_max=1
    )
    names = [f"sc/st/{i}.#epoch.0" for i in range(3)]

    async def first_life() -> None:
        c = scaled_container(reporter, clock, config, store, storage)
        await stepped(c)
        for name in names:
            await c.create_segment(name)
            await c.update_attributes(name, policy_updates("bytes", 2048, 3))
        if checkpointed:
            await c.checkpoint()
        await c.close()

    async def second_life() -> None:
        c = scaled_container(reporter, clock, config, store, storage)
        scaler = await stepped(c)
        watched = []
        for _ in range(4):
            clock.advance(1.0)
            await scaler.run_round()
            watched.append(len(scaler.monitor.watched()))
        # Replayed from the log, the values are in memory; from a checkpoint, they are in the
        # attribute index, read one segment per round.
        assert watched == ([1, 2, 3, 3] if checkpointed else [3, 3, 3, 3])
        for name in names:
            values = await c.get_attributes(name, list(POLICY_KEYS))
            assert policy_from_attributes(values) == ScalePolicy("bytes", 2048, 3)
        await c.close()

    asyncio.run(first_life())
    asyncio.run(second_life())


def test_the_auto_scaler_stops_when_the_container_closes_or_fails() -> None:
    clock, reporter = ManualClock(), ListReporter()

    async def scenario() -> None:
        for end in ("close", "fenced"):
            c = scaled_container(reporter, clock)
            await c.create_segment(SEG)
            scaler = c.auto_scaler
            assert isinstance(scaler, AutoScaler)
            task = scaler._task
            assert task is not None and not task.done()
            if end == "fenced":
                c.fenced(FencedError("a successor took the log over"))
            await c.close()
            await asyncio.sleep(0)
            assert task.done() and scaler._task is None
        plain = new_container()
        assert plain.auto_scaler is NO_AUTO_SCALER
        await plain.create_segment(SEG)
        await plain.close()

    asyncio.run(scenario())


def test_a_round_on_a_stopped_container_ends_the_loop() -> None:
    """After a recovery the policies must be read; a closed container refuses, which ends
    the timed loop instead of failing every period."""
    clock, reporter = ManualClock(), ListReporter()
    store, storage = InMemoryLogStore(), InMemoryChunkStorage()

    async def scenario() -> None:
        c = scaled_container(reporter, clock, FAST, store, storage)
        await c.create_segment(SEG)
        await c.update_attributes(SEG, policy_updates("events", 1000, 4))
        await c.checkpoint()
        await c.close()
        c = scaled_container(reporter, clock, FAST, store, storage)
        scaler = await stepped(c)
        await c.close()
        with pytest.raises(ContainerNotReadyError):
            await scaler.run_round()

    asyncio.run(scenario())


def test_build_container_rejects_a_bad_reporter_or_config() -> None:
    class AsyncReporter:
        async def report(self, report: ScaleReport) -> None:
            return None

    for reporter in (object(), ListReporter, "reporter", AsyncReporter()):
        with pytest.raises(InvalidArgumentError):
            new_container(scale_reporter=reporter, recover=False)
    with pytest.raises(InvalidArgumentError):
        new_container(scale_reporter=ListReporter(), auto_scale={"period_s": 1}, recover=False)


def test_writers_cannot_use_policy_keys_and_iteration_hides_them() -> None:
    async def scenario() -> None:
        c = new_container()
        await c.create_segment(SEG)
        with pytest.raises(InvalidArgumentError):
            await c.append(SEG, SCALE_POLICY_RATE, NO_EVENT_NUMBER, 0, 1, frame_events([b"e"]))
        writer = uuid.uuid4().bytes
        await c.update_attributes(
            SEG,
            (
                *policy_updates("events", 10, 2),
                AttributeUpdate(writer, AttributeUpdateType.REPLACE, 7),
            ),
        )
        items, _ = await c.iterate_attributes(SEG, None, 100)
        assert items == [(writer, 7)]
        assert c.segment_role(SEG) == SegmentRole.NORMAL.value
        await c.close()

    asyncio.run(scenario())
