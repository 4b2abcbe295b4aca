"""S3 ChunkStorage: one object per chunk, written with a conditional PUT.

Object layout: chunk ``name`` is the object ``<prefix>/<name>`` of ``bucket`` (just ``<name>``
when the prefix is empty). The prefix and every name pass :func:`validate_chunk_name`, so no
name can address an object outside the prefix. Nothing else is stored: no index, no markers.

Contract (the ChunkStorage contract of :mod:`pravega_ray.storage.chunk_storage`, met this way):

* ``create(name, data)`` is one ``PutObject`` with ``If-None-Match: *``. An S3 PUT is atomic
  (a reader sees the whole object or none) and durable once acknowledged. A 412 means the name
  exists: :class:`AlreadyExistsError`, the original untouched. Among concurrent creators of one
  name exactly one wins.
* ``read(name, offset, length)`` is one ranged ``GetObject`` (``Range: bytes=a-b``); fewer bytes
  come back only at the object's end, and a read starting at or after the end returns ``b""``
  (S3 answers 416 there, even for an empty object). A missing chunk raises
  :class:`NotFoundError`.
* ``length`` / ``exists`` are ``HeadObject``; ``delete`` is ``DeleteObject``, idempotent.
* ``list(prefix)`` pages through ``ListObjectsV2`` (``list_page_size`` keys a page) and returns
  sorted names relative to the storage prefix. Keys under the prefix that are not valid chunk
  names (a console's ``folder/`` marker, ``a//b``) cannot be addressed through this API and are
  left out.
* A missing bucket raises :class:`NotFoundError` naming the bucket (``exists`` cannot tell it
  apart from a missing chunk: HEAD responses carry no error code).
* A failure that passes on its own, once botocore's retries ran out (throttling: ``SlowDown``,
  429; a 5xx; a timeout; a lost connection; see :func:`is_unavailable`), raises
  :class:`StorageUnavailableError`: the container stays up, its callers retry as for a
  restarting container, and the outcome of a failed ``create`` is unknown. Other failures
  (credentials, access denied) propagate as botocore exceptions, as the filesystem backend
  lets ``OSError`` propagate.

Retries and the one ambiguity they create: botocore retries a PUT whose response was lost
(connection reset, 5xx). If the first attempt did store the object, the retry gets 412 although
the chunk is ours. :func:`put_if_absent` sees ``RetryAttempts > 0`` on that 412, reads the object
back and reports success when it holds exactly our bytes. AWS answers 409
``ConditionalRequestConflict`` while another conditional write of the key is in flight; the
request was not applied, so it is retried here (bounded).

Configuration: without an explicit client, :func:`default_s3_client` uses boto3's standard
chain (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION`` /
``AWS_DEFAULT_REGION``, ``AWS_PROFILE``, instance roles) with path-style addressing. See
docs/s3.md.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    IncompleteReadError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from pravega_ray.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
    StorageUnavailableError,
)
from pravega_ray.invariant import invariant
from pravega_ray.storage.chunk_storage import (
    ChunkStorageCapabilities,
    validate_chunk_name,
    validate_chunk_prefix,
)

S3Client = Any
"""A boto3 S3 client (``boto3.client("s3")``); boto3 ships no importable type for it."""

S3_LIST_PAGE_KEYS_MAX = 1000
"""Keys per ListObjectsV2 page (S3's own maximum)."""

S3_REQUEST_ATTEMPTS_MAX = 5
"""botocore attempts per request (standard retry mode) of the default client."""

S3_CONNECT_TIMEOUT_S = 10.0
S3_READ_TIMEOUT_S = 10.0
"""Longest wait for any one read of a response (botocore's ``read_timeout``: between socket
reads, so a big GET streaming its body never hits it). S3 answers in tens of milliseconds;
a request unanswered this long is given up and retried (every request here is idempotent
or conditional). At 60 s, each request the chaos proxy left unanswered held a Tier-1 log
append, and so every acknowledgement of the container behind it, for a minute."""

S3_CONFLICT_RETRIES_MAX = 8
"""Retries of a conditional PUT answered 409 ConditionalRequestConflict."""

S3_CONFLICT_BACKOFF_S = 0.05
"""First pause after a 409; doubles per retry (0.05 s .. 6.4 s, ~13 s in all)."""

_NOT_FOUND_CODES = frozenset({"NoSuchKey", "NotFound", "404"})

_UNAVAILABLE_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestTimeout",
        "RequestTimeoutException",
        "ServiceUnavailable",
        "InternalError",
    }
)
"""S3 error codes of a failure that passes on its own (botocore's standard mode retries
the same ones before giving up)."""


def default_s3_client() -> S3Client:
    """An S3 client from boto3's standard chain, path-style, with bounded retries and timeouts.

    The endpoint comes from ``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``) when set, else AWS.
    """
    return boto3.client(
        "s3",
        config=Config(
            s3={"addressing_style": "path"},
            retries={"mode": "standard", "max_attempts": S3_REQUEST_ATTEMPTS_MAX},
            connect_timeout=S3_CONNECT_TIMEOUT_S,
            read_timeout=S3_READ_TIMEOUT_S,
        ),
    )


def error_code(error: BaseException) -> str:
    """The S3 error code of a botocore ClientError ("" for anything else)."""
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return ""
    return str(response.get("Error", {}).get("Code", ""))


def http_status(error: BaseException) -> int:
    """The HTTP status of a botocore ClientError (0 for anything else)."""
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return 0
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def _retry_attempts(error: BaseException) -> int:
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return 0
    return int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)


def is_not_found(error: BaseException) -> bool:
    """A missing key (GET: NoSuchKey; HEAD: bare 404). A missing bucket is not this."""
    return error_code(error) in _NOT_FOUND_CODES


def is_precondition_failed(error: BaseException) -> bool:
    return http_status(error) == 412 or error_code(error) == "PreconditionFailed"


def is_no_such_bucket(error: BaseException) -> bool:
    return error_code(error) == "NoSuchBucket"


def is_unavailable(error: BaseException) -> bool:
    """Whether ``error`` is an S3 failure that passes on its own: throttling (``SlowDown``,
    429), a 5xx, a timeout, a lost or refused connection, a body cut short."""
    if isinstance(error, ClientError):
        status = http_status(error)
        return status >= 500 or status == 429 or error_code(error) in _UNAVAILABLE_CODES
    return isinstance(error, (BotoConnectionError, HTTPClientError, IncompleteReadError))


@contextlib.contextmanager
def unavailable_as_typed(what: str) -> Iterator[None]:
    """Raise :class:`StorageUnavailableError` (naming ``what`` and the cause) for a failure
    :func:`is_unavailable` says passes on its own; anything else goes through unchanged."""
    try:
        yield
    except (ClientError, BotoCoreError) as e:
        if not is_unavailable(e):
            raise
        raise StorageUnavailableError(f"S3 {what} failed for now, retry later: {e}") from e


def get_object_bytes(client: S3Client, bucket: str, key: str) -> bytes | None:
    """The whole object, or None if the key does not exist. Other errors propagate."""
    try:
        response = client.get_object(Bucket=bucket, Key=key)
    except ClientError as e:
        if is_not_found(e):
            return None
        raise
    with contextlib.closing(response["Body"]) as body:
        return bytes(body.read())


def put_if_absent(client: S3Client, bucket: str, key: str, body: bytes) -> bool:
    """PUT ``key`` with ``If-None-Match: *``. True if this call stored it, False if it existed.

    Both answers are certain. A 412 that may hide our own earlier attempt (botocore retried, or
    a 409 came first) is settled by reading the object back: ours if it holds exactly ``body``.
    Any other failure propagates and leaves the outcome unknown.
    """
    maybe_ours = False
    pause_s = S3_CONFLICT_BACKOFF_S
    for attempt in range(S3_CONFLICT_RETRIES_MAX + 1):
        try:
            client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
            return True
        except ClientError as e:
            if is_precondition_failed(e):
                if not maybe_ours and _retry_attempts(e) == 0:
                    return False
                # An earlier attempt of this call may have stored the object: is it ours?
                return get_object_bytes(client, bucket, key) == body
            if error_code(e) == "ConditionalRequestConflict" and attempt < S3_CONFLICT_RETRIES_MAX:
                # Not applied: another conditional write of the key is in flight, which may
                # be an earlier attempt of ours whose response was lost.
                maybe_ours = maybe_ours or _retry_attempts(e) > 0
                time.sleep(pause_s)
                pause_s *= 2
                continue
            raise
    invariant(False, "unreachable: the loop returns or raises")
    return False


class S3ChunkStorage:
    """ChunkStorage on an S3 bucket (see the module docstring for the contract and layout)."""

    capabilities = ChunkStorageCapabilities(
        supports_append=False, supports_concat=False, supports_truncation=False
    )

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        client: S3Client | None = None,
        *,
        list_page_size: int = S3_LIST_PAGE_KEYS_MAX,
    ) -> None:
        """``prefix``: "" (the bucket's root) or a chunk-name-like path, one trailing "/" allowed.

        No request is made here; a missing bucket shows on first use.
        """
        if not isinstance(bucket, str) or not bucket:
            raise InvalidArgumentError(f"bucket must be a non-empty str, got {bucket!r}")
        if not 1 <= list_page_size <= S3_LIST_PAGE_KEYS_MAX:
            raise InvalidArgumentError(
                f"list_page_size must be in 1..{S3_LIST_PAGE_KEYS_MAX}, got {list_page_size}"
            )
        if prefix:
            prefix = validate_chunk_name(prefix.removesuffix("/"))
        self._bucket = bucket
        self._prefix = prefix
        self._root = f"{prefix}/" if prefix else ""
        self._client = client if client is not None else default_s3_client()
        self._list_page_size = list_page_size

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def prefix(self) -> str:
        return self._prefix

    def key(self, name: str) -> str:
        """The object key of chunk ``name`` (validated)."""
        return self._root + validate_chunk_name(name)

    def _missing_bucket(self) -> NotFoundError:
        return NotFoundError(f"S3 bucket {self._bucket!r} does not exist", bucket=self._bucket)

    def create(self, name: str, data: bytes) -> None:
        key = self.key(name)
        try:
            with unavailable_as_typed(f"PUT of {key!r}"):
                created = put_if_absent(self._client, self._bucket, key, bytes(data))
        except ClientError as e:
            if is_no_such_bucket(e):
                raise self._missing_bucket() from None
            raise
        if not created:
            raise AlreadyExistsError(f"chunk {name!r} exists")

    def read(self, name: str, offset: int, length: int) -> bytes:
        key = self.key(name)
        if offset < 0 or length < 0:
            raise InvalidArgumentError("offset and length must be non-negative")
        if length == 0:
            self.length(name)  # raises NotFoundError for a missing chunk
            return b""
        with unavailable_as_typed(f"GET of {key!r}"):  # the request and its body's read
            try:
                response = self._client.get_object(
                    Bucket=self._bucket, Key=key, Range=f"bytes={offset}-{offset + length - 1}"
                )
            except ClientError as e:
                if http_status(e) == 416 or error_code(e) == "InvalidRange":
                    return b""  # the object exists; the range starts at or after its end
                if is_not_found(e):
                    raise NotFoundError(f"chunk {name!r} not found") from None
                if is_no_such_bucket(e):
                    raise self._missing_bucket() from None
                raise
            with contextlib.closing(response["Body"]) as body:
                data = bytes(body.read())
        if not response.get("ContentRange"):
            data = data[offset : offset + length]  # a server that ignored the Range header
        invariant(len(data) <= length, f"ranged GET of {key!r} returned {len(data)} > {length}")
        return data

    def length(self, name: str) -> int:
        key = self.key(name)
        try:
            with unavailable_as_typed(f"HEAD of {key!r}"):
                response = self._client.head_object(Bucket=self._bucket, Key=key)
        except ClientError as e:
            if is_not_found(e):
                raise NotFoundError(f"chunk {name!r} not found") from None
            raise
        return int(response["ContentLength"])

    def exists(self, name: str) -> bool:
        try:
            self.length(name)
        except NotFoundError:
            return False
        return True

    def delete(self, name: str) -> None:
        key = self.key(name)
        try:
            with unavailable_as_typed(f"DELETE of {key!r}"):
                self._client.delete_object(Bucket=self._bucket, Key=key)
        except ClientError as e:
            if is_not_found(e):
                return  # some servers answer 404 for a missing key; S3 itself answers 204
            if is_no_such_bucket(e):
                raise self._missing_bucket() from None
            raise

    def list(self, prefix: str) -> list[str]:
        validate_chunk_prefix(prefix)
        names: list[str] = []
        paginator = self._client.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=self._bucket,
            Prefix=self._root + prefix,
            PaginationConfig={"PageSize": self._list_page_size},
        )
        try:
            with unavailable_as_typed(f"listing of {self._root + prefix!r}"):
                for page in pages:
                    for entry in page.get("Contents", ()):
                        key: str = entry["Key"]
                        invariant(key.startswith(self._root), f"listed key {key!r} outside")
                        name = key[len(self._root) :]
                        try:
                            validate_chunk_name(name)
                        except InvalidArgumentError:
                            continue  # not addressable through this API (module docstring)
                        names.append(name)
        except ClientError as e:
            if is_no_such_bucket(e):
                raise self._missing_bucket() from None
            raise
        return sorted(names)
