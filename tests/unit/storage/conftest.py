"""Every ChunkStorage backend, for the storage tests: memory, files, and S3 (SeaweedFS)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pravega_ray.storage.filesystem import FileSystemChunkStorage
from pravega_ray.storage.memory import InMemoryChunkStorage


@pytest.fixture(params=["memory", "filesystem", pytest.param("s3", marks=pytest.mark.s3)])
def storage(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    if request.param == "memory":
        return InMemoryChunkStorage()
    if request.param == "filesystem":
        return FileSystemChunkStorage(tmp_path / "tier2")
    from pravega_ray.storage.s3 import S3ChunkStorage

    client, bucket = request.getfixturevalue("s3_bucket")
    return S3ChunkStorage(bucket, "tier2", client=client)
