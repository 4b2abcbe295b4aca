"""Upgrades of stored data between formats (``cluster.json``'s ``"format"``).

Format 2 -> 3: extended attributes moved from the first stand-in index
(``attributes/<segment>/<version, 20 digits>``: chunks of sorted 24-byte records
``[key 16][value i64 BE]``, later chunks win, ``NULL_VALUE`` removes) into the
B+tree attribute index (``attributes-btree/<segment>/...``). Each segment's old
chunks are replayed in version order into one B+tree update, then deleted.
Idempotent: a crash part-way leaves old chunks that the next run replays again
(latest value wins), so nothing is lost. Run it only while the cluster is down.
"""

from __future__ import annotations

import logging
import struct
from collections import defaultdict

from pravega_ray.contracts.attributes import NULL_VALUE
from pravega_ray.errors import DataCorruptionError
from pravega_ray.segmentstore.btree_attribute_index import BTreeAttributeIndex
from pravega_ray.storage.chunk_storage import ChunkStorage

__all__ = ["migrate_attributes_2_to_3"]

log = logging.getLogger(__name__)

_OLD_PREFIX = "attributes/"
_OLD_RECORD = struct.Struct(">16sq")


def migrate_attributes_2_to_3(storage: ChunkStorage) -> int:
    """Move every segment's format-2 attribute chunks into the B+tree index; returns segments."""
    chunks: dict[str, list[str]] = defaultdict(list)
    for name in storage.list(_OLD_PREFIX):
        segment, _, version = name[len(_OLD_PREFIX) :].rpartition("/")
        if segment and len(version) == 20 and version.isdigit():
            chunks[segment].append(name)
    index = BTreeAttributeIndex(storage)
    for segment, names in sorted(chunks.items()):
        values: dict[bytes, int] = {}
        for name in sorted(names):
            data = storage.read(name, 0, storage.length(name))
            if len(data) % _OLD_RECORD.size:
                raise DataCorruptionError(f"format-2 attribute chunk {name!r} has a torn record")
            for key, value in _OLD_RECORD.iter_unpack(data):
                values[key] = value
        index.update(segment, {k: v for k, v in values.items() if v != NULL_VALUE})
        for name in names:
            storage.delete(name)
        log.info("migrated %d attributes of %s to the B+tree index", len(values), segment)
    return len(chunks)
