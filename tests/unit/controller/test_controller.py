"""Controller core and its stream metadata store, on memory backends."""

from __future__ import annotations

import contextlib

import pytest

import pravega_ray as pr
from pravega_ray.contracts.records import StreamState
from pravega_ray.contracts.segment_store import ReadResult
from pravega_ray.controller.controller import Controller
from pravega_ray.controller.event_processor import RequestEventProcessor
from pravega_ray.controller.request_stream import RequestStream
from pravega_ray.controller.stream_metadata_store import ChunkMetadataStore, StreamMetadataStore
from pravega_ray.controller.stream_workflows import StreamWorkflows
from pravega_ray.errors import (
    IllegalStateTransitionError,
    ScopeNotEmptyError,
    SegmentExistsError,
    SegmentNotFoundError,
)
from pravega_ray.storage.memory import InMemoryChunkStorage

pytestmark = pytest.mark.timeout(10)


class FakeSegmentStore:
    """Records calls; optionally fails once, like a crash in the middle of a workflow."""

    def __init__(self) -> None:
        self.segments: dict[str, bool] = {}
        self.system: dict[str, bytearray] = {}  # the request stream's segment
        self.fail_next_create = False
        self.fail_next_delete = False

    def create_segment(self, segment: str) -> None:
        if segment.startswith("_system/"):
            self.system.setdefault(segment, bytearray())
            return
        if self.fail_next_create:
            self.fail_next_create = False
            raise RuntimeError("crash")
        if segment in self.segments:
            raise SegmentExistsError(segment)
        self.segments[segment] = False

    def create_segments(self, segments: list[str]) -> None:
        """As ``SegmentHelper.create_segments``: one that exists already is fine."""
        for segment in segments:
            with contextlib.suppress(SegmentExistsError):
                self.create_segment(segment)

    def create_table_segment(self, segment: str) -> None:
        self.create_segment(segment)

    def seal_segment(self, segment: str) -> int:
        self.segments[segment] = True
        return 0

    def delete_segment(self, segment: str) -> None:
        if self.fail_next_delete:
            self.fail_next_delete = False
            raise RuntimeError("crash")
        if segment not in self.segments:
            raise SegmentNotFoundError(segment)
        del self.segments[segment]

    def append_plain(self, segment: str, data: bytes) -> int:
        buffer = self.system.setdefault(segment, bytearray())
        offset = len(buffer)
        buffer += data
        return offset

    def read(self, segment: str, offset: int, max_bytes: int, wait_s: float) -> ReadResult:
        buffer = self.system.get(segment, bytearray())
        return ReadResult(offset, bytes(buffer[offset : offset + max_bytes]), False, len(buffer))

    def truncate_segment(self, segment: str, offset: int) -> None:
        pass


def run_requests(controller: Controller) -> None:
    """Run every request posted so far, as the request event processor does."""
    segments = controller._segments
    store = controller._store
    processor = RequestEventProcessor(
        RequestStream(segments),
        StreamWorkflows(store, segments).handle,
        store._records,
    )
    try:
        assert processor.drain(5)
    finally:
        processor.stop()


def seal(controller: Controller, scope: str, stream: str) -> bool:
    """Seal through the controller and its workflow; True once SEALED."""
    controller.seal_stream(scope, stream)
    run_requests(controller)
    return controller.get_stream_info(scope, stream).state is StreamState.SEALED


def make(storage=None, segments=None):
    storage = storage or InMemoryChunkStorage()
    segments = segments or FakeSegmentStore()
    return Controller(ChunkMetadataStore(storage), segments, 4), storage, segments


def test_create_stream_splits_the_key_space_evenly() -> None:
    controller, _, segments = make()
    assert controller.create_scope("sc")
    assert not controller.create_scope("sc")
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(4))
    assert controller.create_stream("sc", "st", config)
    info = controller.get_stream_info("sc", "st")
    assert info.state is StreamState.ACTIVE
    assert [(s.key_low, s.key_high) for s in info.segments] == [
        (0.0, 0.25),
        (0.25, 0.5),
        (0.5, 0.75),
        (0.75, 1.0),
    ]
    assert sorted(segments.segments) == sorted(s.name for s in info.segments)
    assert info.configuration == config


def test_records_survive_a_controller_restart() -> None:
    controller, storage, segments = make()
    controller.create_scope("sc")
    controller.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    controller.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    again, _, _ = make(storage, segments)
    assert again.list_scopes() == ["sc"]
    assert again.list_streams("sc") == ["st"]
    assert again.get_reader_group("sc", "rg")["unassigned"] == {
        s.name: 0 for s in again.get_current_segments("sc", "st")
    }


def test_a_create_interrupted_by_a_crash_is_resumed_on_restart() -> None:
    controller, storage, segments = make()
    controller.create_scope("sc")
    segments.fail_next_create = True
    with pytest.raises(RuntimeError):
        controller.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(3)))
    assert controller.get_stream_info("sc", "st").state is StreamState.CREATING
    again, _, _ = make(storage, segments)
    assert again.resume_workflows() == 1
    assert again.get_stream_info("sc", "st").state is StreamState.ACTIVE
    assert len(segments.segments) == 3


def test_seal_is_idempotent_and_final() -> None:
    controller, storage, segments = make()
    controller.create_scope("sc")
    controller.create_stream("sc", "st", None)
    assert seal(controller, "sc", "st")
    assert seal(controller, "sc", "st")
    assert all(segments.segments.values())
    with pytest.raises(IllegalStateTransitionError):
        StreamMetadataStore(ChunkMetadataStore(storage)).transition("sc", "st", StreamState.ACTIVE)
    with pytest.raises(ScopeNotEmptyError):
        controller.delete_scope("sc")


def test_key_value_table_create_and_delete_resume_after_crashes() -> None:
    controller, storage, segments = make()
    controller.create_scope("sc")
    segments.fail_next_create = True
    with pytest.raises(RuntimeError):
        controller.create_key_value_table("sc", "t", 3)
    with pytest.raises(pr.IllegalStateError):  # not usable while CREATING
        controller.get_active_key_value_table("sc", "t")
    restarted, _, _ = make(storage, segments)
    assert restarted.resume_workflows() == 1
    info = restarted.get_active_key_value_table("sc", "t")
    assert info.partitions == 3 and set(info.segments) == set(segments.segments)
    assert [s.rsplit("/", 1)[1] for s in info.segments] == [
        "0.#epoch.0",
        "1.#epoch.0",
        "2.#epoch.0",
    ]
    assert not restarted.create_key_value_table("sc", "t", 5)  # exists: partitions stay 3
    segments.fail_next_delete = True
    with pytest.raises(RuntimeError):
        restarted.delete_key_value_table("sc", "t")
    again, _, _ = make(storage, segments)
    assert again.resume_workflows() == 1
    assert segments.segments == {} and again.list_key_value_tables("sc") == []
    with pytest.raises(pr.KeyValueTableNotFoundError):
        again.get_key_value_table("sc", "t")
