"""Format 2 -> 3: attributes move from sorted-batch chunks into the B+tree index."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from pravega_ray.contracts.attributes import NULL_VALUE
from pravega_ray.errors import DataCorruptionError
from pravega_ray.segmentstore.btree_attribute_index import BTreeAttributeIndex
from pravega_ray.segmentstore.migrations import migrate_attributes_2_to_3
from pravega_ray.storage.memory import InMemoryChunkStorage

RECORD = struct.Struct(">16sq")
SEG = "sc/st/0.#epoch.0"


def key(i: int) -> bytes:
    return i.to_bytes(16, "big")


def old_chunk(storage, segment: str, version: int, values: dict[bytes, int]) -> None:
    data = b"".join(RECORD.pack(k, v) for k, v in sorted(values.items()))
    storage.create(f"attributes/{segment}/{version:020d}", data)


def test_later_chunks_win_removals_drop_and_a_rerun_changes_nothing() -> None:
    storage = InMemoryChunkStorage()
    old_chunk(storage, SEG, 0, {key(1): 10, key(2): 20, key(3): 30})
    old_chunk(storage, SEG, 1, {key(2): 21, key(3): NULL_VALUE})
    old_chunk(storage, "sc/st/1.#epoch.0", 0, {key(9): 9})
    assert migrate_attributes_2_to_3(storage) == 2
    assert storage.list("attributes/") == []
    index = BTreeAttributeIndex(storage)
    assert index.get(SEG, [key(1), key(2), key(3)]) == {key(1): 10, key(2): 21}
    assert index.get("sc/st/1.#epoch.0", [key(9)]) == {key(9): 9}
    assert migrate_attributes_2_to_3(storage) == 0
    assert BTreeAttributeIndex(storage).get(SEG, [key(2)]) == {key(2): 21}


def test_a_torn_old_chunk_is_reported_not_skipped() -> None:
    storage = InMemoryChunkStorage()
    storage.create(f"attributes/{SEG}/{0:020d}", b"x" * 25)
    with pytest.raises(DataCorruptionError):
        migrate_attributes_2_to_3(storage)
    assert storage.list("attributes/")  # nothing deleted


def test_start_local_upgrades_a_format_2_data_directory(tmp_path: Path) -> None:
    from pravega_ray.cluster import _FORMAT, _check_data_dir
    from pravega_ray.storage.filesystem import FileSystemChunkStorage

    tier2 = FileSystemChunkStorage(str(tmp_path / "tier2"))
    old_chunk(tier2, SEG, 0, {key(1): 5})
    (tmp_path / "cluster.json").write_text(json.dumps({"format": 2, "container_count": 2}))
    _check_data_dir(tmp_path, 2, None, None)
    assert json.loads((tmp_path / "cluster.json").read_text())["format"] == _FORMAT
    assert BTreeAttributeIndex(tier2).get(SEG, [key(1)]) == {key(1): 5}
    assert tier2.list("attributes/") == []


@pytest.mark.parametrize("old", [3, 4, 5, 6])
def test_start_local_upgrades_a_format_3_to_6_directory_by_recording_the_number(
    tmp_path: Path, old: int
) -> None:
    from pravega_ray.cluster import _FORMAT, _check_data_dir

    (tmp_path / "cluster.json").write_text(json.dumps({"format": old, "container_count": 2}))
    _check_data_dir(tmp_path, 2, None, None)
    assert json.loads((tmp_path / "cluster.json").read_text())["format"] == _FORMAT


def test_start_local_refuses_a_newer_format(tmp_path: Path) -> None:
    from pravega_ray.cluster import _FORMAT, _check_data_dir
    from pravega_ray.errors import ConfigurationError

    (tmp_path / "cluster.json").write_text(
        json.dumps({"format": _FORMAT + 1, "container_count": 2})
    )
    with pytest.raises(ConfigurationError, match=f"format {_FORMAT + 1}"):
        _check_data_dir(tmp_path, 2, None, None)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", "\udcff"])
def test_a_damaged_cluster_json_is_named(tmp_path: Path, content: str) -> None:
    from pravega_ray.cluster import _check_data_dir
    from pravega_ray.errors import DataCorruptionError as Damaged

    (tmp_path / "cluster.json").write_bytes(content.encode("utf-8", "surrogateescape"))
    with pytest.raises(Damaged, match=r"cluster\.json"):
        _check_data_dir(tmp_path, 2, None, None)
