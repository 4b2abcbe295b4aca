from __future__ import annotations

from pathlib import Path

import pytest

from pravega_ray.errors import InvalidArgumentError, InvalidNameError
from pravega_ray.logs.filesystem import FileSystemDurableLog
from pravega_ray.segmentstore.builder import (
    build_chunk_storage,
    build_durable_log,
    default_tier_urls,
    parse_storage_url,
)
from pravega_ray.storage.filesystem import FileSystemChunkStorage

pytestmark = pytest.mark.timeout(10)


def test_file_and_s3_urls_parse() -> None:
    assert str(parse_storage_url("file:///tmp/x/../y")) == "file:///tmp/y"
    s3 = parse_storage_url("s3://bucket/some/prefix/")
    assert (s3.scheme, s3.location, s3.prefix) == ("s3", "bucket", "some/prefix")
    assert str(s3) == "s3://bucket/some/prefix"
    assert str(parse_storage_url("s3://bucket")) == "s3://bucket"


@pytest.mark.parametrize(
    "bad", ["relative/path", "file://host/x", "http://x/y", "s3:///nobucket", 7]
)
def test_bad_urls_are_rejected(bad) -> None:
    with pytest.raises(InvalidArgumentError):
        parse_storage_url(bad)


def test_s3_prefixes_cannot_escape() -> None:
    with pytest.raises(InvalidNameError):
        parse_storage_url("s3://bucket/a/../../b")


def test_file_urls_build_filesystem_backends(tmp_path: Path) -> None:
    tier1, tier2 = default_tier_urls(tmp_path)
    log = build_durable_log(tier1, 3)
    assert isinstance(log, FileSystemDurableLog)
    log.initialize()
    assert (tmp_path / "tier1" / "container-3" / "epoch").exists()
    assert isinstance(build_chunk_storage(tier2), FileSystemChunkStorage)


def test_s3_tier1_batches_longer_than_files() -> None:
    from pravega_ray.segmentstore.builder import tuned_for_tier1
    from pravega_ray.segmentstore.config import ContainerConfig

    base = ContainerConfig(0)
    assert tuned_for_tier1("file:///x", base) == base
    s3 = tuned_for_tier1("s3://b/p", base)
    assert s3.group_commit_delay_s > 0 and s3.group_commit_bytes_max > base.group_commit_bytes_max
