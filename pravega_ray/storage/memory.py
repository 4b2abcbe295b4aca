"""In-memory ChunkStorage for unit tests and the in-process cluster. Thread-safe."""

from __future__ import annotations

import threading

from pravega_ray.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from pravega_ray.storage.chunk_storage import (
    ChunkStorageCapabilities,
    validate_chunk_name,
    validate_chunk_prefix,
)


class InMemoryChunkStorage:
    capabilities = ChunkStorageCapabilities(
        supports_append=False, supports_concat=False, supports_truncation=False
    )

    def __init__(self) -> None:
        self._chunks: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def create(self, name: str, data: bytes) -> None:
        validate_chunk_name(name)
        with self._lock:
            if name in self._chunks:
                raise AlreadyExistsError(f"chunk {name!r} exists")
            self._chunks[name] = bytes(data)

    def read(self, name: str, offset: int, length: int) -> bytes:
        validate_chunk_name(name)
        if offset < 0 or length < 0:
            raise InvalidArgumentError("offset and length must be non-negative")
        with self._lock:
            data = self._chunks.get(name)
        if data is None:
            raise NotFoundError(f"chunk {name!r} not found")
        return data[offset : offset + length]

    def length(self, name: str) -> int:
        validate_chunk_name(name)
        with self._lock:
            data = self._chunks.get(name)
        if data is None:
            raise NotFoundError(f"chunk {name!r} not found")
        return len(data)

    def exists(self, name: str) -> bool:
        validate_chunk_name(name)
        with self._lock:
            return name in self._chunks

    def delete(self, name: str) -> None:
        validate_chunk_name(name)
        with self._lock:
            self._chunks.pop(name, None)

    def list(self, prefix: str) -> list[str]:
        validate_chunk_prefix(prefix)
        with self._lock:
            return sorted(n for n in self._chunks if n.startswith(prefix))
