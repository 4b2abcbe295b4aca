"""Filesystem ChunkStorage: one file per chunk under a root directory.

Atomic, durable create: write a temporary file, fsync it, ``os.link`` it to the
final name (fails if the name exists, so concurrent creators cannot both win),
unlink the temporary, fsync the directory. A crash leaves either no chunk or the
whole chunk; stray temporaries (``.tmp-*``) are ignored by ``list``.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

from pravega_ray.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from pravega_ray.invariant import invariant
from pravega_ray.storage.chunk_storage import (
    ChunkStorageCapabilities,
    validate_chunk_name,
    validate_chunk_prefix,
)

_TMP_PREFIX = ".tmp-"


def fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileSystemChunkStorage:
    capabilities = ChunkStorageCapabilities(
        supports_append=False, supports_concat=False, supports_truncation=False
    )

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root).resolve()
        self._root.mkdir(parents=True, exist_ok=True)

    @property
    def root(self) -> Path:
        return self._root

    def _path(self, name: str) -> Path:
        validate_chunk_name(name)
        path = (self._root / name).resolve()
        # Names were validated; this pairs the check on the resolved path (symlinks).
        invariant(path.is_relative_to(self._root), f"chunk path escapes root: {name!r}")
        return path

    def create(self, name: str, data: bytes) -> None:
        path = self._path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f"{_TMP_PREFIX}{uuid.uuid4().hex}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise AlreadyExistsError(f"chunk {name!r} exists") from None
        finally:
            os.unlink(tmp)
        fsync_directory(path.parent)

    def read(self, name: str, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0:
            raise InvalidArgumentError("offset and length must be non-negative")
        path = self._path(name)
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                return f.read(length)
        except FileNotFoundError:
            raise NotFoundError(f"chunk {name!r} not found") from None

    def length(self, name: str) -> int:
        try:
            return self._path(name).stat().st_size
        except FileNotFoundError:
            raise NotFoundError(f"chunk {name!r} not found") from None

    def exists(self, name: str) -> bool:
        return self._path(name).is_file()

    def delete(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(name).unlink()

    def list(self, prefix: str) -> list[str]:
        validate_chunk_prefix(prefix)
        # Walk only the deepest directory the prefix names.
        directory = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        base = self._root / directory if directory else self._root
        if not base.is_dir():
            return []
        names: list[str] = []
        for dirpath, _dirs, files in os.walk(base):
            for f in files:
                if f.startswith(_TMP_PREFIX):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), self._root).replace(os.sep, "/")
                if rel.startswith(prefix):
                    names.append(rel)
        return sorted(names)
