"""Tier-2 chunk storage: the Protocol every backend implements.

A chunk is an immutable-once-written object named by a relative path of
``/``-separated components (``segments/iot/sensors/0.#epoch.0/0000000000000000``).
Backends differ in what they can do, stated by :class:`ChunkStorageCapabilities`
(Pravega's ``ChunkStorage`` does the same): S3 cannot append to an object in
place, so the chunked segment storage above writes each flush as a new chunk.

Contracts shared by every backend (tests/unit/storage/test_chunk_storage_contract.py):

* ``create(name, data)`` writes a whole new chunk atomically and durably: after
  it returns the chunk survives a crash; a reader never sees a partial chunk;
  it raises :class:`AlreadyExistsError` if the name exists (so it doubles as a
  conditional put).
* ``read(name, offset, length)`` returns exactly the bytes asked for, or fewer
  only at the chunk's end; it raises :class:`NotFoundError` for a missing chunk.
* ``list(prefix)`` returns the names under ``prefix`` in sorted order.
* ``delete(name)`` is idempotent.
* Every name is checked by :func:`validate_chunk_name`: relative, no empty,
  ``.`` or ``..`` components, no backslashes or NULs; so no name can address
  anything outside the backend's root or prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pravega_ray.errors import InvalidNameError


@dataclass(frozen=True, slots=True)
class ChunkStorageCapabilities:
    supports_append: bool
    supports_concat: bool
    supports_truncation: bool


class ChunkStorage(Protocol):
    """Tier-2 object store for segment chunks and small durable records."""

    @property
    def capabilities(self) -> ChunkStorageCapabilities: ...

    def create(self, name: str, data: bytes) -> None: ...

    def read(self, name: str, offset: int, length: int) -> bytes: ...

    def length(self, name: str) -> int: ...

    def exists(self, name: str) -> bool: ...

    def delete(self, name: str) -> None: ...

    def list(self, prefix: str) -> list[str]: ...


def validate_chunk_name(name: object) -> str:
    """Return ``name`` if it is a safe relative chunk name, else raise InvalidNameError."""
    if not isinstance(name, str) or not name:
        raise InvalidNameError(f"chunk name must be a non-empty str, got {name!r}")
    if name.startswith("/") or "\\" in name or "\x00" in name:
        raise InvalidNameError(f"chunk name {name!r} is not a safe relative name")
    for part in name.split("/"):
        if part in ("", ".", ".."):
            raise InvalidNameError(f"chunk name {name!r} has an empty, '.' or '..' component")
    return name


def validate_chunk_prefix(prefix: str) -> str:
    """A prefix is a chunk name or the empty string (everything)."""
    return (
        prefix
        if prefix == ""
        else validate_chunk_name(prefix.rstrip("/")) + ("/" if prefix.endswith("/") else "")
    )
