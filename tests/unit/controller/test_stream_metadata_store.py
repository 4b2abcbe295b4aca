"""The stream metadata store: versioned records on Tier-2 chunks (compare-and-set, one
listing per update), and the stream records above them (epoch 0's key ranges, the state
transition table, quarantine of damaged records)."""

from __future__ import annotations

import inspect
import itertools

import pytest

import pravega_ray as pr
from pravega_ray.contracts.records import STATE_TRANSITIONS, KeyHash, StreamState
from pravega_ray.controller.stream_metadata_store import (
    SEGMENT_NUMBERS,
    ChunkMetadataStore,
    MetadataStore,
    StreamMetadataStore,
)
from pravega_ray.errors import (
    ConflictingUpdateError,
    DataCorruptionError,
    IllegalStateError,
    IllegalStateTransitionError,
    StreamNotFoundError,
)
from pravega_ray.invariant import InvariantViolation
from pravega_ray.naming import segment_id
from pravega_ray.storage.memory import InMemoryChunkStorage

pytestmark = pytest.mark.timeout(10)


class CountingStorage(InMemoryChunkStorage):
    """Memory chunk storage that counts its listings."""

    def __init__(self) -> None:
        super().__init__()
        self.lists = 0

    def list(self, prefix: str) -> list[str]:
        self.lists += 1
        return super().list(prefix)


def _stream_store(storage: InMemoryChunkStorage | None = None) -> StreamMetadataStore:
    return StreamMetadataStore(ChunkMetadataStore(storage or InMemoryChunkStorage()))


def test_chunk_metadata_store_has_the_metadata_store_methods() -> None:
    for name in ("get", "put", "delete", "list_keys"):
        protocol = inspect.signature(getattr(MetadataStore, name))
        assert inspect.signature(getattr(ChunkMetadataStore, name)) == protocol, name


def test_put_versions_and_conflicts() -> None:
    store = ChunkMetadataStore(InMemoryChunkStorage())
    v0 = store.put("scopes/a", {"x": 1}, None)
    with pytest.raises(ConflictingUpdateError):
        store.put("scopes/a", {"x": 2}, None)
    v1 = store.put("scopes/a", {"x": 2}, v0)
    with pytest.raises(ConflictingUpdateError):
        store.put("scopes/a", {"x": 3}, v0)  # stale version
    assert store.get("scopes/a").value == {"x": 2} and store.get("scopes/a").version == v1
    store.delete("scopes/a")
    assert store.get("scopes/a") is None
    assert store.list_keys("scopes") == []


def test_put_and_delete_list_the_versions_once_and_leave_one() -> None:
    storage = CountingStorage()
    store = ChunkMetadataStore(storage)
    version = store.put("scopes/a", {"x": 0}, None)
    for x in range(1, 4):
        storage.lists = 0
        version = store.put("scopes/a", {"x": x}, version)
        assert storage.lists == 1
    assert storage.list("_system/controller/scopes/a/") == [
        f"_system/controller/scopes/a/{version:020d}"
    ]
    storage.lists = 0
    store.delete("scopes/a")
    assert storage.lists == 1
    assert store.put("scopes/a", {"x": 9}, None) == version + 2  # after the tombstone


def test_put_over_a_damaged_version_is_corruption_and_keeps_it() -> None:
    storage = InMemoryChunkStorage()
    store = ChunkMetadataStore(storage)
    version = store.put("scopes/a", {"x": 1}, None)
    name = f"_system/controller/scopes/a/{version:020d}"
    storage.delete(name)
    storage.create(name, b"crc32:00000000\n{}")
    for expected in (None, version):
        with pytest.raises(DataCorruptionError, match="scopes/a"):
            store.put("scopes/a", {"x": 2}, expected)
    assert storage.read(name, 0, 100) == b"crc32:00000000\n{}"


def test_create_stream_splits_the_key_space_of_epoch_0_after_a_deleted_name() -> None:
    store = _stream_store()
    store.remember_deleted("streams", "sc", "st", 7)
    store.create_stream("sc", "st", pr.StreamConfiguration().to_dict(), 3, 1000, None)
    info = store.get_stream_info("sc", "st")
    assert info.state is StreamState.CREATING and info.epoch == 0
    assert [s.segment_id for s in info.segments] == [segment_id(0, n) for n in (7, 8, 9)]
    assert [(s.key_low, s.key_high) for s in info.segments] == [
        (0.0, 1 / 3),
        (1 / 3, 2 / 3),
        (2 / 3, 1.0),
    ]
    store.remember_deleted("streams", "sc", "other", SEGMENT_NUMBERS - 1)
    with pytest.raises(IllegalStateError):
        store.create_stream("sc", "other", pr.StreamConfiguration().to_dict(), 2, 1000, None)
    with pytest.raises(StreamNotFoundError):
        store.get_stream_info("sc", "other")


@pytest.mark.parametrize(
    ("start", "to"), list(itertools.product(StreamState, StreamState)), ids=str
)
def test_transition_follows_the_state_transition_table(start: StreamState, to: StreamState) -> None:
    storage = InMemoryChunkStorage()
    store = _stream_store(storage)
    store.create_stream("sc", "st", pr.StreamConfiguration().to_dict(), 1, 1000, None)
    store.streams.ensure_epoch0("sc", "st")  # as the create's workflow does before ACTIVE
    records = ChunkMetadataStore(storage)
    record = records.get("streams/sc/st")
    records.put("streams/sc/st", {**record.value, "state": start.value}, record.version)
    if to in STATE_TRANSITIONS[start]:
        store.transition("sc", "st", to)
        assert store.get_stream_info("sc", "st").state is to
    else:
        with pytest.raises(IllegalStateTransitionError):
            store.transition("sc", "st", to)
        assert store.get_stream_info("sc", "st").state is start


def test_a_stream_record_that_does_not_parse_is_quarantined() -> None:
    storage = InMemoryChunkStorage()
    store = _stream_store(storage)
    store.create_stream("sc", "st", pr.StreamConfiguration().to_dict(), 1, 1000, None)
    records = ChunkMetadataStore(storage)
    record = records.get("streams/sc/st")
    records.put("streams/sc/st", {**record.value, "epochs": [[["x", 0, 1]]]}, record.version)
    with pytest.raises(DataCorruptionError, match="streams/sc/st") as raised:
        store.get_stream_info("sc", "st")
    assert raised.value.key == "streams/sc/st"  # type: ignore[attr-defined]
    assert set(store.damaged_records()) == {"streams/sc/st"}
    # Every other record keeps working.
    store.create_stream("sc", "ok", pr.StreamConfiguration().to_dict(), 1, 1000, None)
    assert store.get_stream_info("sc", "ok").state is StreamState.CREATING


# --- the stream's routing rule ---------------------------------------------------------------

PRE_RULE_RECORDS = {
    # A stream as stored before streams recorded their routing rule (data format 6: the
    # record names its epoch 0; history and index rows beside it), written as raw values.
    "streams/sc/st": {
        "state": "ACTIVE",
        "config": {
            "retention": None,
            "scaling": {
                "min_segments": 2,
                "scale_factor": 1,
                "scale_type": "fixed",
                "target_rate": 0,
            },
        },
        "created_ms": 1000,
        "request_id": None,
        "epoch": 0,
        "next_number": 2,
        "cold": [],
        "epoch0": {"base": 0, "count": 2},
    },
    "history/sc/st/0000000000": {
        "created_ms": 1000,
        "segments": [[0, 0.0, 0.5], [1, 0.5, 1.0]],
        "sealed": [],
        "partial": False,
    },
    "index/sc/st": {"rows": [[1000, 0]]},
}


def test_create_stream_records_pravegas_routing_rule() -> None:
    storage = InMemoryChunkStorage()
    store = _stream_store(storage)
    store.create_stream("sc", "st", pr.StreamConfiguration().to_dict(), 2, 1000, None)
    assert ChunkMetadataStore(storage).get("streams/sc/st").value["key_hash"] == "pravega"
    assert store.get_stream_info("sc", "st").key_hash is KeyHash.PRAVEGA
    store.streams.ensure_epoch0("sc", "st")  # as the create's workflow does before ACTIVE
    store.transition("sc", "st", StreamState.ACTIVE)
    store.transition("sc", "st", StreamState.UPDATING)
    store.transition("sc", "st", StreamState.ACTIVE)
    assert store.get_stream_info("sc", "st").key_hash is KeyHash.PRAVEGA


def test_a_record_stored_before_streams_recorded_a_rule_reads_as_legacy_for_good() -> None:
    storage = InMemoryChunkStorage()
    records = ChunkMetadataStore(storage)
    for key, value in PRE_RULE_RECORDS.items():
        records.put(key, value, None)
    store = _stream_store(storage)
    info = store.get_stream_info("sc", "st")
    assert info.key_hash is KeyHash.LEGACY and info.state is StreamState.ACTIVE
    assert [(s.key_low, s.key_high) for s in info.segments] == [(0.0, 0.5), (0.5, 1.0)]
    # Updates of the record (states, fields of workflows) keep it without a rule.
    store.transition("sc", "st", StreamState.UPDATING)
    store.streams.update("sc", "st", lambda v: {**v, "config": v["config"], "updated_by": "r"})
    store.transition("sc", "st", StreamState.ACTIVE)
    store.transition("sc", "st", StreamState.SEALED)
    assert "key_hash" not in records.get("streams/sc/st").value
    assert _stream_store(storage).get_stream_info("sc", "st").key_hash is KeyHash.LEGACY


def test_a_record_format_5_upgraded_to_history_rows_stays_legacy() -> None:
    storage = InMemoryChunkStorage()
    records = ChunkMetadataStore(storage)
    old = {k: v for k, v in PRE_RULE_RECORDS["streams/sc/st"].items() if k != "epoch0"}
    records.put("streams/sc/st", {**old, "epochs": [[[0, 0.0, 0.5], [1, 0.5, 1.0]]]}, None)
    store = _stream_store(storage)
    assert store.get_stream_info("sc", "st").key_hash is KeyHash.LEGACY
    upgraded = records.get("streams/sc/st").value
    assert "epochs" not in upgraded and "key_hash" not in upgraded


@pytest.mark.parametrize("rule", ["murmur", "", None, 1, ["pravega"]])
def test_a_stream_record_naming_no_routing_rule_is_quarantined(rule: object) -> None:
    storage = InMemoryChunkStorage()
    store = _stream_store(storage)
    store.create_stream("sc", "st", pr.StreamConfiguration().to_dict(), 1, 1000, None)
    records = ChunkMetadataStore(storage)
    record = records.get("streams/sc/st")
    records.put("streams/sc/st", {**record.value, "key_hash": rule}, record.version)
    with pytest.raises(DataCorruptionError, match="streams/sc/st"):
        store.get_stream_info("sc", "st")
    assert set(store.damaged_records()) == {"streams/sc/st"}


@pytest.mark.parametrize(
    "change",
    [
        lambda v: {k: x for k, x in v.items() if k != "key_hash"},  # dropped
        lambda v: {**v, "key_hash": "legacy"},  # replaced
    ],
    ids=["dropped", "replaced"],
)
def test_an_update_that_changes_the_routing_rule_is_refused(change) -> None:  # type: ignore[no-untyped-def]
    storage = InMemoryChunkStorage()
    store = _stream_store(storage)
    store.create_stream("sc", "st", pr.StreamConfiguration().to_dict(), 1, 1000, None)
    before = ChunkMetadataStore(storage).get("streams/sc/st")
    with pytest.raises(InvariantViolation, match="routing rule"):
        store.streams.update("sc", "st", change)
    assert ChunkMetadataStore(storage).get("streams/sc/st") == before
    assert store.get_stream_info("sc", "st").key_hash is KeyHash.PRAVEGA


def test_a_create_cut_short_after_its_record_answers_epoch_0_from_the_record() -> None:
    """The create stores the record; epoch 0's rows are written by whoever finishes it
    (beside the segments). Between the two, epoch 0 is the one the record names."""
    storage = InMemoryChunkStorage()
    store = _stream_store(storage)
    store.create_stream("sc", "st", pr.StreamConfiguration().to_dict(), 2, 1000, None)
    records = ChunkMetadataStore(storage)
    assert records.get("history/sc/st/0000000000") is None
    derived = store.streams.epoch("sc", "st", 0)
    assert derived is not None and [s for s, _, _ in derived.segments] == [0, 1]
    assert [s.segment_id for s in store.get_stream_info("sc", "st").segments] == [0, 1]
    store.streams.ensure_epoch0("sc", "st")
    assert records.get("history/sc/st/0000000000") is not None
    assert store.streams.epoch("sc", "st", 0) == derived
    store.streams.ensure_epoch0("sc", "st")  # again, as a second finisher: the same rows
    assert store.streams.epoch("sc", "st", 0) == derived
    assert store.streams.epoch("sc", "st", 1) is None
