"""The ChunkStorage contract, run against every backend; plus filesystem and S3 specifics.

The S3 runs (marker ``s3``) use a real SeaweedFS server (tests/s3_server.py) and a fresh bucket
per test; faults are injected through botocore's own event hooks on a real client, or by the
chaos harness's fault-injecting proxy (``chaos/s3_proxy.py``) in front of the real server.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)

from chaos.s3_proxy import FaultKind, FaultyS3Proxy, ProxyFaults
from pravega_ray.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    InvalidNameError,
    NotFoundError,
    SegmentStoreUnavailableError,
    StorageUnavailableError,
)
from pravega_ray.storage.filesystem import FileSystemChunkStorage
from pravega_ray.storage.s3 import S3ChunkStorage, is_unavailable

pytestmark = pytest.mark.timeout(30)


def test_create_then_read_ranges(storage) -> None:
    storage.create("a/b/c", b"0123456789")
    assert storage.read("a/b/c", 0, 10) == b"0123456789"
    assert storage.read("a/b/c", 3, 4) == b"3456"
    assert storage.read("a/b/c", 8, 100) == b"89"
    assert storage.length("a/b/c") == 10
    assert storage.exists("a/b/c")


def test_read_at_or_after_the_end_returns_nothing(storage) -> None:
    storage.create("ten", b"0123456789")
    storage.create("empty", b"")
    assert storage.read("ten", 10, 5) == b""
    assert storage.read("ten", 50, 5) == b""
    assert storage.read("ten", 4, 0) == b""
    assert storage.read("empty", 0, 10) == b""
    assert storage.length("empty") == 0
    assert storage.exists("empty")
    with pytest.raises(NotFoundError):
        storage.read("nope", 0, 0)
    with pytest.raises(InvalidArgumentError):
        storage.read("ten", -1, 2)


def test_create_existing_fails_and_keeps_the_original(storage) -> None:
    storage.create("x", b"first")
    with pytest.raises(AlreadyExistsError):
        storage.create("x", b"second")
    assert storage.read("x", 0, 100) == b"first"


def test_concurrent_creates_of_one_name_have_one_winner(storage) -> None:
    wins = []

    def racer(i: int) -> None:
        try:
            storage.create("race", str(i).encode())
            wins.append(i)
        except AlreadyExistsError:
            pass

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert storage.read("race", 0, 10) == str(wins[0]).encode()


def test_missing_chunk_raises_not_found(storage) -> None:
    with pytest.raises(NotFoundError):
        storage.read("nope", 0, 1)
    with pytest.raises(NotFoundError):
        storage.length("nope")
    assert not storage.exists("nope")
    storage.delete("nope")  # idempotent


def test_list_is_sorted_and_prefix_bounded(storage) -> None:
    for name in ["s/b/2", "s/b/1", "s/a/1", "t/1", "s/bb/1"]:
        storage.create(name, b"x")
    assert storage.list("s/b/") == ["s/b/1", "s/b/2"]
    assert storage.list("s/") == ["s/a/1", "s/b/1", "s/b/2", "s/bb/1"]
    storage.delete("s/b/1")
    assert storage.list("s/b/") == ["s/b/2"]


@pytest.mark.parametrize(
    "bad", ["", "/abs", "../up", "a/../../b", "a//b", "a/./b", "a\\b", "a\x00"]
)
def test_unsafe_names_are_rejected(storage, bad: str) -> None:
    with pytest.raises(InvalidNameError):
        storage.create(bad, b"x")
    with pytest.raises(InvalidNameError):
        storage.read(bad, 0, 1)


def test_filesystem_never_writes_outside_its_root(tmp_path: Path) -> None:
    storage = FileSystemChunkStorage(tmp_path / "root")
    with pytest.raises(InvalidNameError):
        storage.create("../escaped", b"x")
    assert not (tmp_path / "escaped").exists()
    storage.create("inside", b"x")
    assert [p.name for p in (tmp_path / "root").iterdir()] == ["inside"]


# --- S3 specifics -------------------------------------------------------------------------


@pytest.mark.s3
def test_s3_list_pages_through_many_keys_relative_to_the_prefix(s3_bucket) -> None:
    client, bucket = s3_bucket
    storage = S3ChunkStorage(bucket, "root/tier2/", client=client, list_page_size=3)
    names = [f"seg/{i:03d}" for i in range(10)]
    for name in reversed(names):
        storage.create(name, name.encode())
    client.put_object(Bucket=bucket, Key="root/other/seg/x", Body=b"outside the prefix")
    assert storage.list("") == names
    assert storage.list("seg/00") == names[:10]
    assert storage.list("seg/005") == ["seg/005"]
    assert client.get_object(Bucket=bucket, Key="root/tier2/seg/004")["Body"].read() == b"seg/004"


@pytest.mark.s3
def test_s3_list_leaves_out_keys_no_chunk_name_can_address(s3_bucket) -> None:
    client, bucket = s3_bucket
    storage = S3ChunkStorage(bucket, "p", client=client)
    storage.create("good", b"x")
    # A console's "folder" marker. (SeaweedFS normalizes "a//b" to "a/b" and refuses "./..",
    # so this is the foreign key it lets us plant.)
    client.put_object(Bucket=bucket, Key="p/folder/", Body=b"")
    assert storage.list("") == ["good"]


@pytest.mark.s3
def test_s3_empty_prefix_is_the_bucket_root(s3_bucket) -> None:
    client, bucket = s3_bucket
    storage = S3ChunkStorage(bucket, client=client)
    storage.create("a/b", b"x")
    assert [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]] == ["a/b"]
    assert storage.list("a/") == ["a/b"]


@pytest.mark.parametrize("bad", ["/abs", "../up", "a//b", "a/./b", "a\\b"])
def test_s3_unsafe_prefix_is_rejected(bad: str) -> None:
    with pytest.raises(InvalidNameError):
        S3ChunkStorage("bucket", bad, client=object())


def test_s3_bad_arguments_are_rejected() -> None:
    with pytest.raises(InvalidArgumentError):
        S3ChunkStorage("", client=object())
    with pytest.raises(InvalidArgumentError):
        S3ChunkStorage("bucket", client=object(), list_page_size=0)


@pytest.mark.s3
def test_s3_missing_bucket_raises_not_found(s3_server) -> None:
    storage = S3ChunkStorage("no-such-bucket-here", client=s3_server.client())
    with pytest.raises(NotFoundError, match="bucket"):
        storage.list("")
    with pytest.raises(NotFoundError, match="bucket"):
        storage.read("x", 0, 1)
    with pytest.raises(NotFoundError, match="bucket"):
        storage.create("x", b"x")  # SeaweedFS runs with -s3.autoCreateBucket=false, like AWS


def _force_one_retry_of_put_object(client) -> None:
    """Make botocore retry the next PutObject once whatever its outcome: a lost response."""
    state = {"forced": False}

    def needs_retry(attempts: int, **_kwargs) -> float | None:
        if not state["forced"] and attempts == 1:
            state["forced"] = True
            return 0.0  # retry now
        return None

    client.meta.events.register_first("needs-retry.s3.PutObject", needs_retry)


@pytest.mark.s3
def test_s3_create_whose_response_was_lost_still_succeeds(s3_bucket) -> None:
    client, bucket = s3_bucket
    storage = S3ChunkStorage(bucket, "p", client=client)
    _force_one_retry_of_put_object(client)
    storage.create("c", b"ours")  # attempt 1 stores it; the retry gets 412; read back: ours
    assert storage.read("c", 0, 10) == b"ours"


@pytest.mark.s3
def test_s3_create_retried_onto_someone_elses_chunk_fails(s3_bucket) -> None:
    client, bucket = s3_bucket
    storage = S3ChunkStorage(bucket, "p", client=client)
    storage.create("c", b"theirs")
    _force_one_retry_of_put_object(client)
    with pytest.raises(AlreadyExistsError):
        storage.create("c", b"ours")
    assert storage.read("c", 0, 10) == b"theirs"


@pytest.mark.s3
def test_s3_default_client_comes_from_the_environment(
    s3_bucket, s3_server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _client, bucket = s3_bucket
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    # Keep the developer's own ~/.aws out of it.
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    storage = S3ChunkStorage(bucket, "env")
    storage.create("x", b"via the standard chain")
    assert storage.read("x", 4, 3) == b"the"


# --- failures that pass on their own: typed, and nothing changed -------------------------------
def _client_error(status: int, code: str) -> ClientError:
    response: Any = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, "GetObject")


@pytest.mark.parametrize(
    ("error", "passes"),
    [
        (_client_error(503, "SlowDown"), True),
        (_client_error(500, "InternalError"), True),
        (_client_error(429, "TooManyRequests"), True),
        (_client_error(400, "RequestTimeout"), True),
        (_client_error(400, "ThrottlingException"), True),
        (ReadTimeoutError(endpoint_url="http://x"), True),
        (ConnectionClosedError(endpoint_url="http://x"), True),
        (EndpointConnectionError(endpoint_url="http://x"), True),
        (_client_error(403, "AccessDenied"), False),
        (_client_error(404, "NoSuchKey"), False),
        (_client_error(412, "PreconditionFailed"), False),
        (NoCredentialsError(), False),
        (OSError("not botocore's"), False),
    ],
)
def test_s3_failures_that_pass_on_their_own_are_told_apart(
    error: BaseException, passes: bool
) -> None:
    assert is_unavailable(error) is passes


READ_TIMEOUT_S = 1.5
"""The read timeout of the client through the proxy: short, for the TIMEOUT case, and not so
short that a request the proxy forwards on a loaded machine is taken for one (0.5 s was)."""


@pytest.fixture
def faulty(s3_bucket, s3_server) -> Iterator[tuple[FaultyS3Proxy, S3ChunkStorage, S3ChunkStorage]]:
    """``(proxy, storage through it, the same storage direct)``: the proxy starts faultless;
    the client through it tries once (botocore's retries are not the subject, and a throttled
    retry waits up to a second) and times out a read after READ_TIMEOUT_S."""
    client, bucket = s3_bucket
    with FaultyS3Proxy(s3_server.endpoint_url, seed=1, faults=ProxyFaults(rate=0.0)) as proxy:
        through = dataclasses.replace(s3_server, endpoint_url=proxy.endpoint).client(
            retries={"mode": "standard", "max_attempts": 1}, read_timeout=READ_TIMEOUT_S
        )
        try:
            yield proxy, S3ChunkStorage(bucket, "p", client=through), S3ChunkStorage(
                bucket, "p", client=client
            )
        finally:
            through.close()


@pytest.mark.s3
@pytest.mark.parametrize("kind", [FaultKind.ERROR_503, FaultKind.ERROR_500, FaultKind.TIMEOUT])
def test_s3_throttled_or_failing_server_is_a_typed_retriable_error(faulty, kind) -> None:
    """Found by the chaos run: a SlowDown that outlasted botocore's retries reached a reader as
    a bare botocore ClientError out of a container's table read."""
    proxy, storage, direct = faulty
    direct.create("kept", b"stored before the outage")
    proxy.set_faults(ProxyFaults(rate=1.0, kinds=(kind,), timeout_s=READ_TIMEOUT_S + 2.0))
    calls = {
        "read": lambda: storage.read("kept", 0, 6),
        "length": lambda: storage.length("kept"),
        "exists": lambda: storage.exists("kept"),
        "list": lambda: storage.list(""),
        "create": lambda: storage.create("new", b"outcome unknown"),
        "delete": lambda: storage.delete("kept"),
    }
    if kind is FaultKind.TIMEOUT:  # each waits out the read timeout: the ones that matter
        calls = {k: calls[k] for k in ("read", "create")}
    for what, call in calls.items():
        with pytest.raises(StorageUnavailableError, match=r"S3 .* failed for now") as raised:
            call()
        assert isinstance(raised.value, SegmentStoreUnavailableError), what
    assert proxy.counts()[kind.value] >= len(calls)
    proxy.set_faults(ProxyFaults(rate=0.0))
    assert storage.read("kept", 0, 6) == b"stored"  # nothing was changed by the failures
    assert direct.list("") == ["kept"]
