"""Reader groups between start and end cuts, get_stream_cuts, unread_bytes, reset_to and
update_retention_stream_cut, on an in-process cluster; bad input to each."""

from __future__ import annotations

import time
from typing import Any

import pytest

import pravega_ray as pr
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import parse_segment_name
from tests.checks import group_test_cluster, write_numbered

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = group_test_cluster(2, other=1)
    yield c
    c.shutdown()


def _write(cluster: InProcessCluster, start: int, count: int) -> None:
    write_numbered(cluster, start, count)


def _read_all(cluster: InProcessCluster, group: str, readers: int = 1, **options: Any) -> list[Any]:
    """Every event a new group ``group`` reads until idle (EventReads)."""
    cluster.create_reader_group("sc", group, pr.ReaderGroupConfig.for_streams("sc/st", **options))
    rs = [
        cluster.create_reader(f"{group}-{i}", "sc", group, pr.JsonSerializer())
        for i in range(readers)
    ]
    got: list[Any] = []
    idle = 0
    while idle < 8:  # 2 s with nothing new (a loaded machine hands segments over slowly)
        found = False
        for r in rs:
            ev = r.read_next_event(0.25)
            if ev is not None and ev.checkpoint_name is None:
                got.append(ev)
                found = True
        idle = 0 if found else idle + 1
    for r in rs:
        r.close()
    return got


def _split_first(cluster: InProcessCluster) -> None:
    mgr = cluster.stream_manager()
    first = sorted(mgr.get_stream_info("sc", "st").segments, key=lambda s: s.key_low)[0]
    middle = (first.key_low + first.key_high) / 2
    assert mgr.scale_stream(
        "sc", "st", [first.segment_id], [(first.key_low, middle), (middle, first.key_high)]
    )


def _by_segment(events: list[Any]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for ev in events:
        out.setdefault(parse_segment_name(ev.segment).segment_id, []).append(ev.offset)
    return {k: sorted(v) for k, v in out.items()}


def test_start_and_end_cuts_across_a_split_read_exactly_between(
    cluster: InProcessCluster,
) -> None:
    _write(cluster, 0, 30)
    _split_first(cluster)
    _write(cluster, 30, 30)
    everything = _read_all(cluster, "all")
    assert sorted(ev.event["n"] for ev in everything) == list(range(60))
    offsets = _by_segment(everything)
    mgr = cluster.stream_manager()
    epoch0 = {s.segment_id for s in cluster.core.get_epoch_segments("sc", "st", 0)}
    current = {s.segment_id for s in mgr.get_stream_info("sc", "st").segments}
    start = {sid: offsets[sid][2] for sid in epoch0}
    end = {sid: offsets[sid][-2] for sid in current}
    expected = sorted(
        ev.event["n"]
        for ev in everything
        if (lambda sid, o: o >= start.get(sid, 0) and o < end.get(sid, 1 << 60))(
            parse_segment_name(ev.segment).segment_id, ev.offset
        )
    )
    start_cut = pr.StreamCut("sc", "st", start)
    end_cut = pr.StreamCut("sc", "st", end)
    t0 = time.monotonic()
    got = _read_all(
        cluster, "between", readers=2, start_cuts={"sc/st": start_cut}, end_cuts={"sc/st": end_cut}
    )
    assert sorted(ev.event["n"] for ev in got) == expected
    assert time.monotonic() - t0 < 30
    # Once at the end, read_next_event returns None at once, for ever.
    reader = cluster.create_reader("late", "sc", "between", pr.JsonSerializer())
    for _ in range(3):
        t = time.monotonic()
        assert reader.read_next_event(5.0) is None
        assert time.monotonic() - t < 2.0
    group = cluster.reader_group("sc", "between")
    assert group.unread_bytes() == 0
    reader.close()


def test_unread_bytes_falls_to_zero_as_readers_read(cluster: InProcessCluster) -> None:
    _write(cluster, 0, 40)
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    group = cluster.reader_group("sc", "g")
    first = group.unread_bytes()
    assert first > 40 * 8
    reader = cluster.create_reader("r", "sc", "g", pr.JsonSerializer())
    n = 0
    while n < 40:
        if reader.read_next_event(1.0) is not None:
            n += 1
    deadline = time.monotonic() + 10
    while group.unread_bytes() != 0 and time.monotonic() < deadline:
        reader.read_next_event(0.3)  # reports offsets every READER_GROUP_OFFSETS_SAVE_INTERVAL_S
    assert group.unread_bytes() == 0
    cuts = group.get_stream_cuts()
    assert set(cuts) == {"sc/st"} and sum(cuts["sc/st"].positions.values()) == first
    reader.close()


def test_start_cut_behind_the_head_is_refused(cluster: InProcessCluster) -> None:
    _write(cluster, 0, 20)
    everything = _read_all(cluster, "all")
    offsets = _by_segment(everything)
    mgr = cluster.stream_manager()
    cut = pr.StreamCut("sc", "st", {sid: o[3] for sid, o in offsets.items()})
    mgr.truncate_stream("sc", "st", cut)
    behind = pr.StreamCut("sc", "st", {sid: o[1] for sid, o in offsets.items()})
    with pytest.raises(pr.InvalidArgumentError):
        cluster.create_reader_group(
            "sc", "old", pr.ReaderGroupConfig.for_streams("sc/st", start_cuts={"sc/st": behind})
        )
    assert "old" not in cluster.core.list_reader_groups("sc")


def test_reset_to_cuts_and_config(cluster: InProcessCluster) -> None:
    _write(cluster, 0, 20)
    everything = _read_all(cluster, "all")
    offsets = _by_segment(everything)
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    group = cluster.reader_group("sc", "g")
    reader = cluster.create_reader("r", "sc", "g", pr.JsonSerializer())
    n = 0
    while n < 20:
        if reader.read_next_event(1.0) is not None:
            n += 1
    start = {sid: o[2] for sid, o in offsets.items()}
    group.reset_to({"sc/st": pr.StreamCut("sc", "st", start)})
    with pytest.raises(pr.ReinitializationRequiredError):  # once, at its next sync
        while True:
            assert reader.read_next_event(2.0) is None  # nothing old is left to return
    again = []
    while True:
        ev = reader.read_next_event(2.0)
        if ev is None:
            break
        again.append(ev.event["n"])
    expected = sorted(
        ev.event["n"]
        for ev in everything
        if ev.offset >= start[parse_segment_name(ev.segment).segment_id]
    )
    assert sorted(again) == expected
    group.reset_to(pr.ReaderGroupConfig.for_streams("sc/st", raise_on_truncated_data=True))
    assert group.get_config().raise_on_truncated_data
    reader.close()


def test_reset_to_bad_input_changes_nothing(cluster: InProcessCluster) -> None:
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    group = cluster.reader_group("sc", "g")
    generation = group._state.fetch()[0].generation
    bad: list[Any] = [
        None,
        3,
        "sc/st",
        {"sc/other": pr.StreamCut("sc", "other", {0: 0})},  # a stream it does not read
        {"sc/st": pr.StreamCut("sc", "other", {0: 0})},  # another stream's cut
        {"sc/st": pr.StreamCut("sc", "st", {0: 0})},  # does not cover the key space
        {"sc/st": pr.StreamCut("sc", "st", {0: 0, 1: 10**9})},  # past the end
        {"sc/st": "cut"},
        pr.ReaderGroupConfig.for_streams("sc/other"),
    ]
    for target in bad:
        with pytest.raises(pr.InvalidArgumentError):
            group.reset_to(target)
    assert group._state.fetch()[0].generation == generation


def test_update_retention_stream_cut(cluster: InProcessCluster) -> None:
    _write(cluster, 0, 10)
    cluster.create_reader_group("sc", "none", pr.ReaderGroupConfig.for_streams("sc/st"))
    cut = pr.StreamCut("sc", "st", {0: 0, 1: 0})
    with pytest.raises(pr.IllegalStateError):
        cluster.reader_group("sc", "none").update_retention_stream_cut({"sc/st": cut})
    cluster.create_reader_group(
        "sc",
        "manual",
        pr.ReaderGroupConfig.for_streams(
            "sc/st", retention_type="manual_release_at_user_streamcut"
        ),
    )
    group = cluster.reader_group("sc", "manual")
    group.update_retention_stream_cut({"sc/st": cut})
    from pravega_ray.controller.subscriber_tasks import subscriber_cuts

    assert subscriber_cuts(cluster.core._store, "sc", "st")["sc/manual"] == {0: 0, 1: 0}
    for bad in (
        {},
        None,
        {"sc/other": pr.StreamCut("sc", "other", {0: 0})},
        {"sc/st": pr.StreamCut.UNBOUNDED},
        {"sc/st": pr.StreamCut("sc", "st", {0: 0})},
        {"sc/st": 5},
    ):
        with pytest.raises(pr.InvalidArgumentError):
            group.update_retention_stream_cut(bad)  # type: ignore[arg-type]


def test_create_with_bad_cuts_is_refused(cluster: InProcessCluster) -> None:
    for start, end in (
        ({"sc/st": pr.StreamCut("sc", "st", {0: 0})}, None),  # half the key space
        ({"sc/st": pr.StreamCut("sc", "st", {0: 0, 7: 0})}, None),  # no segment 7
        (None, {"sc/st": pr.StreamCut("sc", "st", {0: 0, 1: 0, 2: 0})}),
    ):
        with pytest.raises(pr.InvalidArgumentError):
            cluster.create_reader_group(
                "sc",
                "bad",
                pr.ReaderGroupConfig.for_streams("sc/st", start_cuts=start, end_cuts=end),
            )
    _write(cluster, 0, 10)
    everything = _read_all(cluster, "all")
    offsets = _by_segment(everything)
    late = pr.StreamCut("sc", "st", {sid: o[-1] for sid, o in offsets.items()})
    early = pr.StreamCut("sc", "st", {sid: o[0] for sid, o in offsets.items()})
    with pytest.raises(pr.InvalidArgumentError):  # the end before the start
        cluster.create_reader_group(
            "sc",
            "bad",
            pr.ReaderGroupConfig.for_streams(
                "sc/st", start_cuts={"sc/st": late}, end_cuts={"sc/st": early}
            ),
        )
    # A cut inside an event would have readers start (or stop) mid-frame.
    inside = pr.StreamCut("sc", "st", {sid: o[0] + 3 for sid, o in offsets.items()})
    for start, end in (({"sc/st": inside}, None), (None, {"sc/st": inside})):
        with pytest.raises(pr.InvalidArgumentError, match="event boundary"):
            cluster.create_reader_group(
                "sc",
                "bad",
                pr.ReaderGroupConfig.for_streams("sc/st", start_cuts=start, end_cuts=end),
            )
    with pytest.raises(pr.InvalidArgumentError, match="event boundary"):
        cluster.reader_group("sc", "all").reset_to({"sc/st": inside})
    assert "bad" not in cluster.stream_manager().list_reader_groups("sc")


def _tampered(**fields: Any) -> pr.ReaderGroupConfig:
    """A config of sc/st with ``fields`` changed after construction (past its checks)."""
    config = pr.ReaderGroupConfig.for_streams("sc/st")
    for name, value in fields.items():
        object.__setattr__(config, name, value)
    return config


def _tampered_cut(positions: Any) -> pr.StreamCut:
    cut = pr.StreamCut("sc", "st", {0: 0, 1: 0})
    object.__setattr__(cut, "_positions", positions)
    return cut


def test_reset_to_a_tampered_config_is_invalid_argument_and_changes_nothing(
    cluster: InProcessCluster,
) -> None:
    """reset_to re-checks a config as create_reader_group does (it once did not); a
    config that does not validate is refused and the group stays usable, across restarts."""
    _write(cluster, 0, 10)
    original = pr.ReaderGroupConfig.for_streams("sc/st")
    cluster.create_reader_group("sc", "g", original)
    group = cluster.reader_group("sc", "g")
    generation = group._state.fetch()[0].generation
    other = cluster.stream_manager().get_head_cut("sc", "other")
    bad: list[Any] = [
        _tampered(automatic_checkpoint_interval_s=float("nan")),
        _tampered(automatic_checkpoint_interval_s=-1.0),
        _tampered(automatic_checkpoint_interval_s=float("inf")),
        _tampered(automatic_checkpoint_interval_s="30"),
        _tampered(automatic_checkpoint_interval_s=True),
        _tampered(retention_type="bogus"),
        _tampered(retention_type=None),
        _tampered(raise_on_truncated_data=1),
        _tampered(streams="sc/st"),
        _tampered(start_cuts={"sc/other": other}),  # a stream it does not read
        _tampered(start_cuts=5),
        _tampered(start_cuts={"sc/st": "cut"}),
        _tampered(end_cuts={"sc/st": other}),
        _tampered(start_cuts={"sc/st": _tampered_cut({0: -1, 1: 0})}),
        {"sc/st": _tampered_cut((("0", 0), (1, 0)))},  # a segment id that is a str
        {"sc/st": _tampered_cut(5)},
        pr.Checkpoint("cp", {"sc/st": _tampered_cut(((0, 0.5), (1, 0)))}),
    ]
    for target in bad:
        with pytest.raises(pr.InvalidArgumentError):
            group.reset_to(target)
        assert group._state.fetch()[0].generation == generation
        assert group.get_config() == original
    cluster.restart()
    group = cluster.reader_group("sc", "g")
    assert group.get_config() == original
    with cluster.create_reader("r", "sc", "g", pr.JsonSerializer()) as reader:
        assert reader.read_next_event(1.0) is not None
    group.reset_to(pr.ReaderGroupConfig.for_streams("sc/st", automatic_checkpoint_interval_s=5))
    assert group.get_config().automatic_checkpoint_interval_s == 5
    # A valid value as a str is taken, as the constructor takes it, and stored as the enum.
    group.reset_to(_tampered(retention_type="manual_release_at_user_streamcut"))
    manual = pr.RetentionConfigType.MANUAL_RELEASE_AT_USER_STREAMCUT
    assert group.get_config().retention_type is manual
    assert cluster.core.list_subscribers("sc", "st") == ["sc/g"]
