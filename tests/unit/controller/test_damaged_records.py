"""One bad controller record never stops the controller: it is refused before storing,
or, if damaged in storage, named and quarantined while everything else keeps working."""

from __future__ import annotations

from pathlib import Path

import pytest

import pravega_ray as pr
from pravega_ray.controller.controller import Controller
from pravega_ray.controller.metadata_store import MetadataStore
from pravega_ray.errors import (
    DataCorruptionError,
    InvalidArgumentError,
    ScopeNotEmptyError,
)
from pravega_ray.storage.filesystem import FileSystemChunkStorage
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.stream_configuration import ScaleType
from tests.unit.controller.test_controller import FakeSegmentStore

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=["memory", "filesystem"])
def storage(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    if request.param == "memory":
        return InMemoryChunkStorage()
    return FileSystemChunkStorage(tmp_path / "tier2")


def _record_object(storage, key: str) -> str:  # type: ignore[no-untyped-def]
    return storage.list(f"_system/controller/{key}/")[-1]


def _overwrite(storage, name: str, data: bytes) -> None:  # type: ignore[no-untyped-def]
    storage.delete(name)
    storage.create(name, data)


def test_a_config_that_does_not_validate_is_refused_and_nothing_is_stored() -> None:
    controller = Controller(MetadataStore(InMemoryChunkStorage()), FakeSegmentStore(), 4)
    controller.create_scope("sc")
    bogus = pr.StreamConfiguration(pr.ScalingPolicy.fixed(2))
    object.__setattr__(bogus.scaling, "scale_type", "bogus")  # bypassing the dataclass checks
    for config in (bogus, "x", 5, {"scaling": None}):
        with pytest.raises(InvalidArgumentError):
            controller.create_stream("sc", "st", config)  # type: ignore[arg-type]
    assert controller.list_streams("sc") == []


@pytest.mark.parametrize(
    "damage",
    [
        b'{"state": "SEALI',  # cut short
        b"\x00\xff\xfe",  # not text
        b"[1, 2]",  # not an object
        b'{"state": "SEALING", "config": {"scaling": {"scale_type": "bogus", "target_rate": 5,'
        b' "scale_factor": 3, "min_segments": 1}}, "epochs": [[[0, 0, 1]]], "created_ms": 1}',
    ],
)
def test_damaged_stream_record_is_named_and_the_rest_of_the_controller_works(
    storage, damage: bytes
) -> None:
    segments = FakeSegmentStore()
    first = Controller(MetadataStore(storage), segments, 4)
    first.create_scope("sc")
    first.create_stream("sc", "bad", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    first.create_stream("sc", "good", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    name = _record_object(storage, "streams/sc/bad")
    _overwrite(storage, name, damage)

    restarted = Controller(MetadataStore(storage), segments, 4)
    # Everything else works, from the first call on (which resumes workflows).
    assert restarted.create_scope("other")
    assert restarted.create_stream("other", "new", None)
    assert restarted.get_stream_info("sc", "good").state is pr.StreamState.ACTIVE
    assert restarted.seal_stream("sc", "good")
    assert restarted.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/good"))
    assert restarted.list_streams("sc") == ["bad", "good"]
    # The damaged one is named wherever it is touched, and never overwritten.
    for call in (
        lambda: restarted.get_stream_info("sc", "bad"),
        lambda: restarted.seal_stream("sc", "bad"),
        lambda: restarted.create_stream("sc", "bad", None),
        lambda: restarted.create_reader_group(
            "sc", "rg2", pr.ReaderGroupConfig.for_streams("sc/bad")
        ),
    ):
        with pytest.raises(DataCorruptionError, match="streams/sc/bad") as raised:
            call()
        assert raised.value.key == "streams/sc/bad"  # type: ignore[attr-defined]
    assert "streams/sc/bad" in restarted.damaged_records()
    with pytest.raises(ScopeNotEmptyError):
        restarted.delete_scope("sc")
    assert storage.read(name, 0, 1000) == damage


def test_damaged_scope_and_reader_group_records_are_named(storage) -> None:
    controller = Controller(MetadataStore(storage), FakeSegmentStore(), 4)
    controller.create_scope("sc")
    controller.create_scope("fine")
    controller.create_stream("sc", "st", None)
    controller.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    _overwrite(storage, _record_object(storage, "readergroups/sc/rg"), b'{"scope": 1}')
    restarted = Controller(MetadataStore(storage), FakeSegmentStore(), 4)
    with pytest.raises(DataCorruptionError, match="readergroups/sc/rg"):
        restarted.reader_group_add_reader("sc", "rg", "r1", "session")
    _overwrite(storage, _record_object(storage, "scopes/sc"), b"{")
    with pytest.raises(DataCorruptionError, match="scopes/sc"):
        restarted.create_stream("sc", "other", None)
    assert restarted.create_stream("fine", "st", None)
    assert set(restarted.damaged_records()) == {"readergroups/sc/rg", "scopes/sc"}


def test_resumed_workflow_of_a_damaged_record_does_not_stop_the_others(storage) -> None:
    segments = FakeSegmentStore()
    first = Controller(MetadataStore(storage), segments, 4)
    first.create_scope("sc")
    for stream in ("a", "b"):
        first.create_stream("sc", stream, pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    # Both left mid-seal by a crash; then a's record is damaged while the controller is down.
    for stream in ("a", "b"):
        first._transition("sc", stream, pr.StreamState.SEALING)
    name = _record_object(storage, "streams/sc/a")
    record = storage.read(name, 0, 10_000).replace(b'"fixed"', b'"bogus"')
    _overwrite(storage, name, record)
    assert ScaleType.FIXED_NUM_SEGMENTS.value == "fixed"
    restarted = Controller(MetadataStore(storage), segments, 4)
    assert restarted.resume_workflows() == 1
    assert restarted.get_stream_info("sc", "b").state is pr.StreamState.SEALED
    assert "streams/sc/a" in restarted.damaged_records()
    assert restarted.create_scope("x")
