"""Durable, versioned records for the controller, stored through Tier-2 chunk storage.

Each record ``key`` is a series of immutable chunks
``_system/controller/<key>/<version, 20 digits>``; the highest version is the
record. An update writes version ``v + 1`` with ``ChunkStorage.create``, which
fails if that version exists, so two concurrent updaters cannot both win:
the loser gets :class:`ConflictingUpdateError` (compare-and-set, as Pravega's
store does with versions). Older versions are deleted after a successful update.
Deleting a record writes a tombstone version, then removes older ones.

Stored form of a version: ``crc32:<8 hex digits>\n<JSON object>``, the CRC-32 (zlib) of
the JSON bytes first, so a version cut short anywhere, or changed in any byte, fails
the check. Versions written before checksums are the bare JSON object (they start with
``{``) and still load; every update writes the checksummed form.

A stored version that fails its checksum or is not a JSON object (cut short,
overwritten, flipped) is :class:`DataCorruptionError` naming the record and its object,
from :meth:`get` and from every update of that record; it is never overwritten
silently. Listing still shows the key, so its scope is not empty and the damage stays
visible.

A later issue moves these records into table segments of the system scope;
the :class:`MetadataStore` interface stays.
"""

from __future__ import annotations

import json
import string
import zlib
from dataclasses import dataclass
from typing import Any

from pravega_ray.constants import SYSTEM_SCOPE
from pravega_ray.errors import AlreadyExistsError, ConflictingUpdateError, DataCorruptionError
from pravega_ray.storage.chunk_storage import ChunkStorage, validate_chunk_name

_ROOT = f"{SYSTEM_SCOPE}/controller"
_TOMBSTONE = b"\x00deleted"
_CHECKSUM_TAG = b"crc32:"
_CHECKSUM_HEADER_BYTES = len(_CHECKSUM_TAG) + 8 + 1  # tag, 8 hex digits, newline
_HEX_DIGITS = frozenset(string.hexdigits.encode())


@dataclass(frozen=True, slots=True)
class Versioned:
    value: dict[str, Any]
    version: int


class MetadataStore:
    def __init__(self, storage: ChunkStorage) -> None:
        self._storage = storage

    def _prefix(self, key: str) -> str:
        validate_chunk_name(key)
        return f"{_ROOT}/{key}/"

    def _versions(self, key: str) -> list[str]:
        return [
            n
            for n in self._storage.list(self._prefix(key))
            if n.rsplit("/", 1)[1].isdigit() and n.count("/") == self._prefix(key).count("/")
        ]

    def get(self, key: str) -> Versioned | None:
        """The record's latest value and version, or None if absent or deleted.

        Raises DataCorruptionError (attributes ``key``, ``chunk``) if it is damaged.
        """
        versions = self._versions(key)
        if not versions:
            return None
        latest = versions[-1]
        raw = self._storage.read(latest, 0, self._storage.length(latest))
        if raw == _TOMBSTONE:
            return None
        return Versioned(_decode(key, latest, raw), int(latest.rsplit("/", 1)[1]))

    def exists(self, key: str) -> bool:
        """Whether the record exists (damaged or not)."""
        versions = self._versions(key)
        if not versions:
            return False
        latest = versions[-1]
        return self._storage.read(latest, 0, len(_TOMBSTONE) + 1) != _TOMBSTONE

    def _latest_version(self, key: str) -> int:
        versions = self._versions(key)
        return int(versions[-1].rsplit("/", 1)[1]) if versions else -1

    def put(self, key: str, value: dict[str, Any], expected_version: int | None) -> int:
        """Write ``value`` as the next version; ``expected_version=None`` means 'must not exist'.

        Returns the new version. Raises ConflictingUpdateError if the record's
        version is not ``expected_version`` (or it exists when it must not).
        """
        latest = self._latest_version(key)
        current = self.get(key)
        if expected_version is None:
            if current is not None:
                raise ConflictingUpdateError(f"record {key} exists")
        elif current is None or current.version != expected_version:
            raise ConflictingUpdateError(f"record {key} changed concurrently")
        version = latest + 1
        data = _encode(value)
        try:
            self._storage.create(f"{self._prefix(key)}{version:020d}", data)
        except AlreadyExistsError:
            raise ConflictingUpdateError(f"record {key} changed concurrently") from None
        self._delete_below(key, version)
        return version

    def delete(self, key: str) -> None:
        latest = self._latest_version(key)
        if latest < 0:
            return
        self._storage.create(f"{self._prefix(key)}{latest + 1:020d}", _TOMBSTONE)
        self._delete_below(key, latest + 1)

    def _delete_below(self, key: str, version: int) -> None:
        for name in self._versions(key):
            if int(name.rsplit("/", 1)[1]) < version:
                self._storage.delete(name)

    def list_keys(self, prefix: str) -> list[str]:
        """Keys of live records directly under ``prefix`` (e.g. ``scopes``), damaged ones too."""
        base = self._prefix(prefix)
        keys = set()
        for name in self._storage.list(base):
            rest = name[len(base) :]
            parts = rest.split("/")
            if len(parts) == 2 and parts[1].isdigit():
                keys.add(f"{prefix}/{parts[0]}")
        return sorted(k for k in keys if self.exists(k))


def _encode(value: dict[str, Any]) -> bytes:
    body = json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return b"%s%08x\n%s" % (_CHECKSUM_TAG, zlib.crc32(body), body)


def _decode(key: str, chunk: str, raw: bytes) -> dict[str, Any]:
    """The record value stored as ``raw``; DataCorruptionError naming ``key`` and ``chunk``."""
    if raw.startswith(_CHECKSUM_TAG):
        header, body = raw[:_CHECKSUM_HEADER_BYTES], raw[_CHECKSUM_HEADER_BYTES:]
        digits = header[len(_CHECKSUM_TAG) : -1]
        if not header.endswith(b"\n") or len(digits) != 8 or not set(digits) <= _HEX_DIGITS:
            raise damaged(key, "malformed checksum header", chunk)
        if zlib.crc32(body) != int(digits, 16):
            raise damaged(key, "checksum mismatch (cut short or changed)", chunk)
    elif raw.startswith(b"{"):
        body = raw  # written before records carried checksums
    else:
        raise damaged(key, "neither a checksummed record nor a JSON object", chunk)
    try:
        value = json.loads(body)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError
        raise damaged(key, f"not JSON ({e})", chunk) from None
    if not isinstance(value, dict):
        raise damaged(key, f"not a JSON object ({type(value).__name__})", chunk)
    return value


def damaged(key: str, reason: str, chunk: str | None = None) -> DataCorruptionError:
    """The error for a controller record that cannot be read or parsed."""
    where = f" (stored object {chunk!r})" if chunk else ""
    return DataCorruptionError(
        f"controller record {key!r}{where} is damaged: {reason}", key=key, chunk=chunk
    )
