"""The controller refuses bad input before storing it, detects every damaged record (cut short
on disk, one byte changed, malformed fields), quarantines it, and keeps everything else
working across restarts. A restart is a new Controller on the same storage."""

from __future__ import annotations

from pathlib import Path

import pytest

import pravega_ray as pr
from pravega_ray.contracts.records import KeyHash
from pravega_ray.controller.controller import Controller
from pravega_ray.controller.stream_metadata_store import ChunkMetadataStore, StreamMetadataStore
from pravega_ray.errors import (
    DataCorruptionError,
    InvalidArgumentError,
    ScopeNotEmptyError,
    SegmentStoreUnavailableError,
)
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.storage.filesystem import FileSystemChunkStorage
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.stream_configuration import ScaleType
from pravega_ray.timing import ManualClock
from tests.unit.controller.test_controller import FakeSegmentStore, run_requests, seal

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=["memory", "filesystem"])
def storage(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    if request.param == "memory":
        return InMemoryChunkStorage()
    return FileSystemChunkStorage(tmp_path / "tier2")


def _latest(storage, key: str) -> str:  # type: ignore[no-untyped-def]
    return storage.list(f"_system/controller/{key}/")[-1]


def _damage(storage, key: str, change) -> str:  # type: ignore[no-untyped-def]
    """Rewrite the latest stored version of ``key`` as ``change(bytes)``; returns its name.

    On the filesystem the file itself is rewritten (as a disk or an operator would),
    not through the storage API.
    """
    name = _latest(storage, key)
    data = change(storage.read(name, 0, storage.length(name)))
    if isinstance(storage, FileSystemChunkStorage):
        (storage.root / name).write_bytes(data)
    else:
        storage.delete(name)
        storage.create(name, data)
    return name


def _change_one_digit(data: bytes) -> bytes:
    """Change the first digit of the JSON body: still valid JSON, still parses."""
    start = data.index(b"\n") + 1 if data.startswith(b"crc32:") else 0
    i = next(i for i in range(start, len(data)) if chr(data[i]).isdigit())
    return data[:i] + str((int(chr(data[i])) + 1) % 10).encode() + data[i + 1 :]


def _populated(storage) -> Controller:  # type: ignore[no-untyped-def]
    controller = Controller(ChunkMetadataStore(storage), FakeSegmentStore(), 4)
    controller.create_scope("sc")
    controller.create_scope("fine")
    for stream in ("a", "b"):
        controller.create_stream("sc", stream, pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    controller.create_stream("fine", "st", None)
    controller.create_key_value_table("sc", "t", 2)
    controller.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/a"))
    return controller


def test_create_stream_with_a_tampered_config_through_the_public_api_stores_nothing() -> None:
    cluster = InProcessCluster(container_count=2)
    try:
        mgr = cluster.stream_manager()
        mgr.create_scope("sc")
        config = pr.StreamConfiguration(pr.ScalingPolicy.by_event_rate(5, 3, 1))
        object.__setattr__(config.scaling, "scale_type", "bogus")  # past the dataclass checks
        with pytest.raises(InvalidArgumentError):
            mgr.create_stream("sc", "p", config)
        assert mgr.list_streams("sc") == []
        cluster.restart()  # nothing stored, so nothing stops the restarted controller
        assert mgr.create_stream("sc", "p", None)
        assert mgr.create_scope("other")
        assert mgr.seal_stream("sc", "p")
    finally:
        cluster.shutdown()


def test_create_reader_group_with_a_tampered_config_is_invalid_argument() -> None:
    controller = _populated(InMemoryChunkStorage())
    for streams in (5, ("sc/a", "sc/a"), ("sc/../x",), ()):
        config = pr.ReaderGroupConfig.for_streams("sc/a")
        object.__setattr__(config, "streams", streams)
        with pytest.raises(InvalidArgumentError):
            controller.create_reader_group("sc", "rg2", config)
    with pytest.raises(pr.ReaderGroupNotFoundError):
        controller.get_reader_group("sc", "rg2")


@pytest.mark.parametrize("key", ["streams/sc/a", "kvtables/sc/t", "readergroups/sc/rg"])
@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda data: data[: len(data) // 2], id="cut-short"),
        pytest.param(lambda data: data[:-1], id="last-byte-cut"),
        pytest.param(lambda data: b"", id="empty"),
        pytest.param(_change_one_digit, id="one-digit-changed"),
    ],
)
def test_restart_with_a_damaged_record_names_it_and_everything_else_works(
    storage, key: str, change
) -> None:  # type: ignore[no-untyped-def]
    _populated(storage)
    name = _damage(storage, key, change)
    damaged_bytes = storage.read(name, 0, storage.length(name))
    restarted = Controller(ChunkMetadataStore(storage), FakeSegmentStore(), 4)
    # The first call resumes workflows; the damaged record does not stop it.
    assert restarted.create_scope("new")
    assert restarted.create_stream("fine", "other", None)
    assert seal(restarted, "fine", "st")
    assert restarted.create_reader_group("fine", "rg", pr.ReaderGroupConfig.for_streams("fine/st"))
    assert restarted.get_stream_info("sc", "b").state is pr.StreamState.ACTIVE
    touch = {
        "streams/sc/a": lambda: restarted.get_stream_info("sc", "a"),
        "kvtables/sc/t": lambda: restarted.get_key_value_table("sc", "t"),
        "readergroups/sc/rg": lambda: restarted.get_reader_group("sc", "rg"),
    }[key]
    with pytest.raises(DataCorruptionError, match=key) as raised:
        touch()
    assert raised.value.key == key  # type: ignore[attr-defined]
    assert raised.value.chunk == name  # type: ignore[attr-defined]
    assert key in restarted.damaged_records()
    with pytest.raises(ScopeNotEmptyError):
        restarted.delete_scope("sc")
    # A create of the same name names the damage instead of overwriting it.
    create = {
        "streams/sc/a": lambda: restarted.create_stream("sc", "a", None),
        "kvtables/sc/t": lambda: restarted.create_key_value_table("sc", "t", 2),
        "readergroups/sc/rg": lambda: restarted.create_reader_group(
            "sc", "rg", pr.ReaderGroupConfig.for_streams("sc/b")
        ),
    }[key]
    with pytest.raises(DataCorruptionError, match=key):
        create()
    assert storage.read(name, 0, storage.length(name)) == damaged_bytes
    # And again after another restart.
    again = Controller(ChunkMetadataStore(storage), FakeSegmentStore(), 4)
    assert again.list_scopes() == ["fine", "new", "sc"]
    assert again.create_stream("new", "st", None)


def test_get_record_written_before_checksums_still_loads(storage) -> None:
    """Old data directories hold bare JSON records; they load, and updates checksum them."""
    legacy = {
        "scopes/sc": b'{"created_ms":1}',
        "streams/sc/st": b'{"config":{"retention":null,"scaling":{"min_segments":1,'
        b'"scale_factor":1,"scale_type":"fixed","target_rate":0}},"created_ms":1,'
        b'"epochs":[[[0,0.0,1.0]]],"state":"ACTIVE"}',
        "kvtables/sc/t": b'{"created_ms":1,"partitions":2,"state":"ACTIVE"}',
    }
    for key, data in legacy.items():
        storage.create(f"_system/controller/{key}/{0:020d}", data)
    controller = Controller(ChunkMetadataStore(storage), FakeSegmentStore(), 4)
    assert controller.get_stream_info("sc", "st").state is pr.StreamState.ACTIVE
    # Stored before streams recorded a routing rule: the legacy one, also once sealed.
    assert controller.get_stream_info("sc", "st").key_hash is KeyHash.LEGACY
    info = controller.get_key_value_table("sc", "t")
    assert info.segments == ("sc/_kvt.t/0.#epoch.0", "sc/_kvt.t/1.#epoch.0")  # no base: 0
    assert not controller.create_scope("sc")
    assert seal(controller, "sc", "st")
    assert controller.get_stream_info("sc", "st").key_hash is KeyHash.LEGACY
    stored = storage.read(_latest(storage, "streams/sc/st"), 0, 10_000)
    assert stored.startswith(b"crc32:")
    assert b"key_hash" not in stored
    assert controller.damaged_records() == {}


def test_resume_workflows_quarantines_a_damaged_deleted_marker_and_finishes_the_rest(
    storage,
) -> None:
    segments = FakeSegmentStore()
    first = Controller(ChunkMetadataStore(storage), segments, 4)
    first.create_scope("sc")
    first.create_key_value_table("sc", "t", 2)
    first.delete_key_value_table("sc", "t")
    first.create_key_value_table("sc", "t", 2)
    first.create_key_value_table("sc", "u", 1)
    for table in ("t", "u"):  # both cut short mid-delete by a crash
        StreamMetadataStore(ChunkMetadataStore(storage)).set_key_value_table_state(
            "sc", table, pr.KeyValueTableState.ACTIVE, pr.KeyValueTableState.DELETING
        )
    _damage(storage, "deleted/kvtables/sc/t", lambda data: data[:5])
    restarted = Controller(ChunkMetadataStore(storage), segments, 4)
    assert restarted.resume_workflows() == 1
    assert restarted.list_key_value_tables("sc") == ["t"]  # u finished, t kept and named
    assert "deleted/kvtables/sc/t" in restarted.damaged_records()
    with pytest.raises(DataCorruptionError, match="deleted/kvtables/sc/t"):
        restarted.delete_key_value_table("sc", "t")
    assert restarted.create_key_value_table("sc", "v", 1)


def test_reader_group_record_holding_a_segment_twice_is_damaged(storage) -> None:
    _populated(storage)
    _damage(
        storage,
        "readergroups/sc/rg",
        lambda data: data.split(b"\n", 1)[1].replace(
            b'"assigned":{}', b'"assigned":{"r1":{"sc/a/0.#epoch.0":0}}'
        ),
    )
    restarted = Controller(ChunkMetadataStore(storage), FakeSegmentStore(), 4)
    with pytest.raises(DataCorruptionError, match="readergroups/sc/rg"):
        restarted.get_reader_group("sc", "rg")
    assert restarted.create_reader_group("sc", "rg2", pr.ReaderGroupConfig.for_streams("sc/a"))


class FlakySegmentStore(FakeSegmentStore):
    """Containers that are unreachable for the next ``unavailable`` calls (outcome unknown)."""

    def __init__(self) -> None:
        super().__init__()
        self.unavailable = 0

    def create_segment(self, segment: str) -> None:
        if self.unavailable > 0:
            self.unavailable -= 1
            raise SegmentStoreUnavailableError("container restarting")
        super().create_segment(segment)


def test_create_stream_cut_short_by_unreachable_containers_is_finished_later() -> None:
    segments = FlakySegmentStore()
    clock = ManualClock()
    controller = Controller(ChunkMetadataStore(InMemoryChunkStorage()), segments, 4, clock=clock)
    controller.create_scope("sc")
    segments.unavailable = 1
    with pytest.raises(SegmentStoreUnavailableError):
        controller.create_stream("sc", "a", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    assert controller.get_stream_info("sc", "a").state is pr.StreamState.CREATING
    # Creating it again finishes the create (it exists: False).
    assert not controller.create_stream("sc", "a", None)
    assert controller.get_stream_info("sc", "a").state is pr.StreamState.ACTIVE
    # A key-value table left CREATING is finished by the controller itself, a little later.
    segments.unavailable = 1
    with pytest.raises(SegmentStoreUnavailableError):
        controller.create_key_value_table("sc", "t", 2)
    clock.advance(60)
    controller.list_scopes()  # a read does not run workflows
    assert controller.create_scope("other")  # any update call does, once the pause passed
    assert controller.get_key_value_table("sc", "t").state is pr.KeyValueTableState.ACTIVE


def _overwrite(storage, name: str, data: bytes) -> None:  # type: ignore[no-untyped-def]
    storage.delete(name)
    storage.create(name, data)


def test_a_config_that_does_not_validate_is_refused_and_nothing_is_stored() -> None:
    controller = Controller(ChunkMetadataStore(InMemoryChunkStorage()), FakeSegmentStore(), 4)
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
    first = Controller(ChunkMetadataStore(storage), segments, 4)
    first.create_scope("sc")
    first.create_stream("sc", "bad", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    first.create_stream("sc", "good", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    name = _latest(storage, "streams/sc/bad")
    _overwrite(storage, name, damage)

    restarted = Controller(ChunkMetadataStore(storage), segments, 4)
    # Everything else works, from the first call on (which resumes workflows).
    assert restarted.create_scope("other")
    assert restarted.create_stream("other", "new", None)
    assert restarted.get_stream_info("sc", "good").state is pr.StreamState.ACTIVE
    assert seal(restarted, "sc", "good")
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
    controller = Controller(ChunkMetadataStore(storage), FakeSegmentStore(), 4)
    controller.create_scope("sc")
    controller.create_scope("fine")
    controller.create_stream("sc", "st", None)
    controller.create_reader_group("sc", "rg", pr.ReaderGroupConfig.for_streams("sc/st"))
    _overwrite(storage, _latest(storage, "readergroups/sc/rg"), b'{"scope": 1}')
    restarted = Controller(ChunkMetadataStore(storage), FakeSegmentStore(), 4)
    with pytest.raises(DataCorruptionError, match="readergroups/sc/rg"):
        restarted.get_reader_group("sc", "rg")
    _overwrite(storage, _latest(storage, "scopes/sc"), b"{")
    with pytest.raises(DataCorruptionError, match="scopes/sc"):
        restarted.create_stream("sc", "other", None)
    assert restarted.create_stream("fine", "st", None)
    assert set(restarted.damaged_records()) == {"readergroups/sc/rg", "scopes/sc"}


def test_resumed_workflow_of_a_damaged_record_does_not_stop_the_others(storage) -> None:
    segments = FakeSegmentStore()
    first = Controller(ChunkMetadataStore(storage), segments, 4)
    first.create_scope("sc")
    for stream in ("a", "b"):
        first.create_stream("sc", stream, pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    # Both left mid-seal by a crash; then a's record is damaged while the controller is down.
    for stream in ("a", "b"):
        StreamMetadataStore(ChunkMetadataStore(storage)).transition(
            "sc", stream, pr.StreamState.SEALING
        )
    name = _latest(storage, "streams/sc/a")
    record = storage.read(name, 0, 10_000).replace(b'"fixed"', b'"bogus"')
    _overwrite(storage, name, record)
    assert ScaleType.FIXED_NUM_SEGMENTS.value == "fixed"
    restarted = Controller(ChunkMetadataStore(storage), segments, 4)
    assert restarted.resume_workflows() == 1  # b's seal is asked for again; a is quarantined
    run_requests(restarted)
    assert restarted.get_stream_info("sc", "b").state is pr.StreamState.SEALED
    assert "streams/sc/a" in restarted.damaged_records()
    assert restarted.create_scope("x")
