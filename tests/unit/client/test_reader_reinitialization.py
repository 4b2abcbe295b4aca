"""A reset is not silent (issue 27 item 5, Pravega's ReinitializationRequiredException): a
reader that had not seen a reset raises ReinitializationRequiredError once, at its next sync,
then reads from the new positions; a reader that joined after it never does. On an
in-process cluster (memory backends)."""

from __future__ import annotations

import pytest

import pravega_ray as pr
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=3)
    mgr = c.stream_manager()
    mgr.create_scope("sc")
    mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    yield c
    c.shutdown()


def write(cluster: InProcessCluster, values: range) -> None:
    with cluster.create_writer("sc", "st", pr.JsonSerializer()) as writer:
        for n in values:
            writer.write_event({"n": n}, routing_key="k")


def read(reader: pr.EventStreamReader, count: int) -> list[int]:  # type: ignore[type-arg]
    out: list[int] = []
    while len(out) < count:
        ev = reader.read_next_event(2.0)
        assert ev is not None, f"read {out}"
        if ev.event is not None:
            out.append(ev.event["n"])
    return out


def until_reset(reader: pr.EventStreamReader) -> None:  # type: ignore[type-arg]
    """Read until the reset shows: ReinitializationRequiredError, exactly once."""
    with pytest.raises(pr.ReinitializationRequiredError, match="was reset"):
        for _ in range(100):
            reader.read_next_event(0.1)


def read_to_the_end(
    cluster: InProcessCluster, count: int
) -> tuple[pr.ReaderGroup, pr.EventStreamReader]:  # type: ignore[type-arg]
    """``count`` events written, and a group's one reader that has read them all."""
    write(cluster, range(count))
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    reader = cluster.create_reader("r", "sc", "g", pr.JsonSerializer())
    assert read(reader, count) == list(range(count))
    return cluster.reader_group("sc", "g"), reader


def test_a_reset_is_raised_once_then_reading_resumes_at_the_new_positions(cluster) -> None:  # type: ignore[no-untyped-def]
    group, reader = read_to_the_end(cluster, 10)
    group.reset_to(pr.ReaderGroupConfig.for_streams("sc/st"))  # back to the head
    group.reset_to(pr.ReaderGroupConfig.for_streams("sc/st"))  # twice before it looks: once
    until_reset(reader)
    assert read(reader, 10) == list(range(10))  # from the new positions: the head
    extra = reader.read_next_event(0.5)  # and no second error
    assert extra is None or extra.event is None
    reader.close()


def test_a_reader_that_joined_after_the_reset_is_not_told(cluster) -> None:  # type: ignore[no-untyped-def]
    write(cluster, range(5))
    cluster.create_reader_group("sc", "g", pr.ReaderGroupConfig.for_streams("sc/st"))
    cluster.reader_group("sc", "g").reset_to(pr.ReaderGroupConfig.for_streams("sc/st"))
    reader = cluster.create_reader("late", "sc", "g", pr.JsonSerializer())
    assert read(reader, 5) == list(range(5))
    reader.close()


def test_read_next_events_raises_it_too(cluster) -> None:  # type: ignore[no-untyped-def]
    group, reader = read_to_the_end(cluster, 6)
    group.reset_to(pr.ReaderGroupConfig.for_streams("sc/st"))
    with pytest.raises(pr.ReinitializationRequiredError):
        for _ in range(100):
            reader.read_next_events(10, 0.1)
    got: list[int] = []
    while len(got) < 6:
        got += [e.event["n"] for e in reader.read_next_events(10, 2.0) if e.event is not None]
    assert got == list(range(6))
    reader.close()
