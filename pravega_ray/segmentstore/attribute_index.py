"""Attribute index: where a segment's extended attributes live in Tier-2.

Seed 000 ("Storing Attributes"): the ingestion pipeline keeps recently used
attributes in memory; the *attribute index* persists all of them in Tier-2
and serves the rest. The storage writer coalesces updates (latest value wins)
and hands them to :meth:`AttributeIndex.update` in batches.

:class:`ChunkAttributeIndex` is the seed's "initial approach", a stand-in until
the B+tree issue replaces it behind the same Protocol: every update batch is a
new chunk ``attributes/<segment>/<version, 20 digits>`` of sorted 24-byte
records ``[key 16][value i64 BE]`` (``NULL_VALUE`` records a removal); once a
segment has more than ``chunks_max`` chunks they are compacted into one. Lookups
load a segment's chunks once and keep the merged map in a bounded LRU (the
seed's lower-level cache); each lookup of a segment not in it costs one pass
over its chunks.

Contracts: ``update`` is durable when it returns; ``get`` returns the latest
durable value of each key it knows (absent keys are left out); ``delete``
removes everything of the segment (idempotent). Not thread-safe: one caller
at a time (the container calls it from one worker thread at a time).
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Iterable
from typing import Protocol

from pravega_ray.errors import AlreadyExistsError
from pravega_ray.segmentstore.attributes import NULL_VALUE
from pravega_ray.storage.chunk_storage import ChunkStorage

_RECORD = struct.Struct(">16sq")


class AttributeIndex(Protocol):
    def get(self, segment: str, keys: Iterable[bytes]) -> dict[bytes, int]: ...

    def update(self, segment: str, values: dict[bytes, int]) -> None: ...

    def delete(self, segment: str) -> None: ...


class ChunkAttributeIndex:
    def __init__(
        self, storage: ChunkStorage, *, chunks_max: int = 8, cached_segments_max: int = 64
    ) -> None:
        self._storage = storage
        self._chunks_max = chunks_max
        self._cached_segments_max = cached_segments_max
        self._cache: OrderedDict[str, dict[bytes, int]] = OrderedDict()
        self.reads = 0  # Tier-2 chunk reads, for tests and benchmarks

    @staticmethod
    def _prefix(segment: str) -> str:
        return f"attributes/{segment}/"

    def _chunks(self, segment: str) -> list[str]:
        return self._storage.list(self._prefix(segment))

    def _load(self, segment: str) -> dict[bytes, int]:
        values = self._cache.get(segment)
        if values is not None:
            self._cache.move_to_end(segment)
            return values
        values = {}
        for name in self._chunks(segment):
            data = self._storage.read(name, 0, self._storage.length(name))
            self.reads += 1
            for key, value in _RECORD.iter_unpack(data):
                if value == NULL_VALUE:
                    values.pop(key, None)
                else:
                    values[key] = value
        self._cache[segment] = values
        while len(self._cache) > self._cached_segments_max:
            self._cache.popitem(last=False)
        return values

    def get(self, segment: str, keys: Iterable[bytes]) -> dict[bytes, int]:
        values = self._load(segment)
        return {k: values[k] for k in keys if k in values}

    def update(self, segment: str, values: dict[bytes, int]) -> None:
        if not values:
            return
        current = self._load(segment)
        chunks = self._chunks(segment)
        version = int(chunks[-1].rsplit("/", 1)[1]) + 1 if chunks else 0
        merged = {**current, **values}
        compact = len(chunks) + 1 > self._chunks_max
        batch = merged if compact else values
        data = b"".join(
            _RECORD.pack(k, v)
            for k, v in sorted(batch.items())
            if not (compact and v == NULL_VALUE)
        )
        name = f"{self._prefix(segment)}{version:020d}"
        try:
            self._storage.create(name, data)
        except AlreadyExistsError:  # a crash left it after a failed update: not referenced
            self._storage.delete(name)
            self._storage.create(name, data)
        if compact:
            for old in chunks:
                self._storage.delete(old)
        for key, value in values.items():
            if value == NULL_VALUE:
                current.pop(key, None)
            else:
                current[key] = value

    def delete(self, segment: str) -> None:
        for name in self._chunks(segment):
            self._storage.delete(name)
        self._cache.pop(segment, None)
