"""The controller's stream metadata store (Pravega's ``StreamMetadataStore``), in two layers.

**Versioned records.** :class:`MetadataStore` is the Protocol of what the controller
stores: JSON objects under keys such as ``streams/<scope>/<stream>``, each with a version.
An update names the version it read, so two concurrent updaters cannot both win: the
loser gets :class:`ConflictingUpdateError` (compare-and-set, as Pravega's stores do with
versions). :class:`ChunkMetadataStore` keeps the records as Tier-2 chunks (on memory chunk
storage it is the memory implementation unit tests use). The controller keeps them
in table segments of the system scope (``table_metadata_store.py``), behind the same Protocol.

**Stream metadata.** :class:`StreamMetadataStore` is the controller's view of those
records: scopes; streams with their state (changed only through the transition table,
``records.STATE_TRANSITIONS``), configuration and history table of epochs, each a list
of segments with their routing-key ranges; key-value tables; reader groups (their
:class:`ReaderGroupState`); and markers of deleted names, so a re-created stream or
key-value table never reuses a segment number. A record that cannot be read or parsed is
:class:`DataCorruptionError` naming it (attributes ``key`` and, where known, ``chunk``)
and is *quarantined*: logged, listed by :meth:`StreamMetadataStore.damaged_records`,
never overwritten, while every other record keeps working.
"""

from __future__ import annotations

import contextlib
import json
import logging
import string
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

from pravega_ray import json_text
from pravega_ray.constants import KVT_PARTITIONS_MAX, SYSTEM_SCOPE
from pravega_ray.contracts.reader_group_state import ReaderGroupState
from pravega_ray.contracts.records import (
    KeyValueTableInfo,
    KeyValueTableState,
    StreamInfo,
    StreamState,
    check_key_lengths,
)
from pravega_ray.controller.stream_records import StreamRecords
from pravega_ray.controller.transactions import TxnRecords
from pravega_ray.errors import (
    AlreadyExistsError,
    ConflictingUpdateError,
    DataCorruptionError,
    IllegalStateError,
    IllegalStateTransitionError,
    InvalidArgumentError,
    KeyValueTableNotFoundError,
    PravegaError,
    ReaderGroupNotFoundError,
)
from pravega_ray.naming import kvt_segment_name
from pravega_ray.storage.chunk_storage import ChunkStorage, validate_chunk_name

log = logging.getLogger(__name__)

SEGMENT_NUMBERS = 2**32
"""Segment numbers are the low 32 bits of a segment id."""

SCOPE_DELETING = "DELETING"
"""The ``state`` of a scope record whose recursive delete is under way (a scope record
without a state is active)."""

_ROOT = f"{SYSTEM_SCOPE}/controller"
_TOMBSTONE = b"\x00deleted"
_CHECKSUM_TAG = b"crc32:"
_CHECKSUM_HEADER_BYTES = len(_CHECKSUM_TAG) + 8 + 1  # tag, 8 hex digits, newline
_HEX_DIGITS = frozenset(string.hexdigits.encode())


@dataclass(frozen=True, slots=True)
class Versioned:
    value: dict[str, Any]
    version: int


class MetadataStore(Protocol):
    """Versioned records, each a JSON object under a ``/``-separated key (``scopes/sc``).

    A controller calls its store from many threads at once, so the store it runs on must
    be thread-safe (``TableMetadataStore`` is; ``ChunkMetadataStore`` is only read by the
    one-threaded migration).
    """

    def get(self, key: str) -> Versioned | None:
        """The record's latest value and version, or None if absent or deleted.

        Raises DataCorruptionError (attributes ``key``, ``chunk``) if it is damaged.
        """
        ...

    def put(self, key: str, value: dict[str, Any], expected_version: int | None) -> int:
        """Write ``value`` as the next version; ``expected_version=None`` means 'must not exist'.

        Returns the new version. Raises ConflictingUpdateError if the record's version is
        not ``expected_version`` (or it exists when it must not), DataCorruptionError if
        its current version is damaged: a damaged record is never overwritten.
        """
        ...

    def delete(self, key: str) -> None:
        """Delete the record, damaged or not; a no-op if it never existed."""
        ...

    def list_keys(self, prefix: str) -> list[str]:
        """Sorted keys of live records directly under ``prefix`` (e.g. ``scopes``), damaged
        ones too (so a scope holding one is not empty and the damage stays visible), except
        records whose very key cannot be read, which :meth:`unreadable` names."""
        ...

    def unreadable(self, prefix: str | None = None) -> dict[str, str]:
        """Stored entries found so far whose key cannot be read (where -> error), among
        which :meth:`list_keys` of ``prefix`` (None: of any prefix) may miss children."""
        ...


class ChunkMetadataStore:
    """:class:`MetadataStore` on Tier-2 chunk storage.

    Each record ``key`` is a series of immutable chunks
    ``_system/controller/<key>/<version, 20 digits>``; the highest version is the record.
    An update writes version ``v + 1`` with ``ChunkStorage.create``, which fails if that
    version exists: that is the compare-and-set. Older versions are deleted after a
    successful update. Deleting a record writes a tombstone version, then removes older
    ones.

    Stored form of a version: ``crc32:<8 hex digits>\\n<JSON object>``, the CRC-32 (zlib)
    of the JSON bytes first, so a version cut short anywhere, or changed in any byte,
    fails the check. Versions written before checksums are the bare JSON object (they
    start with ``{``) and still load; every update writes the checksummed form.

    A stored version that fails its checksum or is not a JSON object (cut short,
    overwritten, flipped) is :class:`DataCorruptionError` naming the record and its
    object, from :meth:`get` and from every update of that record.
    """

    def __init__(self, storage: ChunkStorage) -> None:
        self._storage = storage

    def _prefix(self, key: str) -> str:
        validate_chunk_name(key)
        return f"{_ROOT}/{key}/"

    def _versions(self, key: str) -> list[str]:
        """The chunks of ``key``'s versions, oldest first (a tombstone may be last)."""
        prefix = self._prefix(key)
        depth = prefix.count("/")
        return [
            n
            for n in self._storage.list(prefix)
            if n.rsplit("/", 1)[1].isdigit() and n.count("/") == depth
        ]

    def _load(self, key: str, chunk: str) -> Versioned | None:
        """The version stored as ``chunk``; None for a tombstone."""
        raw = self._storage.read(chunk, 0, self._storage.length(chunk))
        if raw == _TOMBSTONE:
            return None
        return Versioned(decode_record(key, chunk, raw), _version_of(chunk))

    def get(self, key: str) -> Versioned | None:
        """See :meth:`MetadataStore.get`."""
        versions = self._versions(key)
        return self._load(key, versions[-1]) if versions else None

    def exists(self, key: str) -> bool:
        """Whether the record exists (damaged or not)."""
        versions = self._versions(key)
        if not versions:
            return False
        return self._storage.read(versions[-1], 0, len(_TOMBSTONE) + 1) != _TOMBSTONE

    def put(self, key: str, value: dict[str, Any], expected_version: int | None) -> int:
        """See :meth:`MetadataStore.put`."""
        # Listed once: the latest is checked (and must decode), all of them go once the
        # new version is written.
        versions = self._versions(key)
        current = self._load(key, versions[-1]) if versions else None
        if expected_version is None:
            if current is not None:
                raise ConflictingUpdateError(f"record {key} exists")
        elif current is None or current.version != expected_version:
            raise ConflictingUpdateError(f"record {key} changed concurrently")
        version = _version_of(versions[-1]) + 1 if versions else 0
        try:
            self._storage.create(f"{self._prefix(key)}{version:020d}", encode_record(value))
        except AlreadyExistsError:
            raise ConflictingUpdateError(f"record {key} changed concurrently") from None
        self._delete_chunks(versions)
        return version

    def delete(self, key: str) -> None:
        """See :meth:`MetadataStore.delete`."""
        versions = self._versions(key)
        if not versions:
            return
        self._storage.create(f"{self._prefix(key)}{_version_of(versions[-1]) + 1:020d}", _TOMBSTONE)
        self._delete_chunks(versions)

    def _delete_chunks(self, chunks: list[str]) -> None:
        for chunk in chunks:
            self._storage.delete(chunk)

    def all_keys(self) -> list[str]:
        """Sorted keys of every live record, damaged ones too, at any depth (one listing).

        For copying the whole store (the migration to table segments). A record whose
        latest version cannot be read counts as live: the copy reports it as damaged.
        """
        latest: dict[str, str] = {}
        for name in self._storage.list(f"{_ROOT}/"):
            key, _, version = name[len(_ROOT) + 1 :].rpartition("/")
            fresher = key not in latest or name > latest[key]
            if key and version.isdigit() and len(version) == 20 and fresher:
                latest[key] = name
        live = []
        for key, chunk in latest.items():
            try:
                tombstone = self._storage.read(chunk, 0, len(_TOMBSTONE) + 1) == _TOMBSTONE
            except PravegaError:
                tombstone = False  # unreadable: the copy reads it again and reports it
            if not tombstone:
                live.append(key)
        return sorted(live)

    def list_keys(self, prefix: str) -> list[str]:
        """See :meth:`MetadataStore.list_keys`."""
        base = self._prefix(prefix)
        keys = set()
        for name in self._storage.list(base):
            rest = name[len(base) :]
            parts = rest.split("/")
            if len(parts) == 2 and parts[1].isdigit():
                keys.add(f"{prefix}/{parts[0]}")
        return sorted(k for k in keys if self.exists(k))

    def unreadable(self, prefix: str | None = None) -> dict[str, str]:
        """See :meth:`MetadataStore.unreadable`: none (keys are chunk names, always readable)."""
        return {}


def is_int(value: object) -> TypeGuard[int]:
    """An int that is not a bool (stored records and arguments alike)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _version_of(chunk: str) -> int:
    return int(chunk.rsplit("/", 1)[1])


def encode_record(value: dict[str, Any]) -> bytes:
    """A record's stored form: ``crc32:<8 hex digits>\\n<JSON object, sorted keys>``.

    Shared by every :class:`MetadataStore` (chunks and table segments store the same bytes).
    """
    body = json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return b"%s%08x\n%s" % (_CHECKSUM_TAG, zlib.crc32(body), body)


def decode_record(key: str, chunk: str, raw: bytes) -> dict[str, Any]:
    """The record value stored as ``raw``; DataCorruptionError naming ``key`` and ``chunk``.

    ``chunk`` names the stored object (a chunk, or a table segment and version).
    """
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
        value = json_text.loads(body)
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


class StreamMetadataStore:
    """The controller's records of scopes, streams, key-value tables, reader groups and
    deleted names, over a :class:`MetadataStore`.

    Keys: ``scopes/<scope>``, ``streams/<scope>/<stream>``, ``kvtables/<scope>/<table>``,
    ``readergroups/<scope>/<group>``, ``deleted/<kind>/<scope>/<name>``. Callers check
    names and arguments; this checks what is stored, and quarantines what is damaged.
    Thread-safe as far as ``records`` is (every update is one compare-and-set; the
    quarantine list has a lock of its own).
    """

    def __init__(self, records: MetadataStore) -> None:
        self._records = records
        self._damaged: dict[str, str] = {}
        self._damaged_lock = threading.Lock()
        self.streams = StreamRecords(records, self._parsing)
        self.txns = TxnRecords(records, self._parsing)

    def operation(self) -> contextlib.AbstractContextManager[None]:
        """A block of reads on this thread that form one operation of the record cache, if
        the records have one (``TableMetadataStore.operation``; else nothing): the block's
        reads see every write completed before it started, and a record not changed since
        costs no table read. Only for a short call that never waits for another process's
        write inside the block (it would not see it before the block ends)."""
        operation = getattr(self._records, "operation", None)
        if operation is None:
            return contextlib.nullcontext()
        block: contextlib.AbstractContextManager[None] = operation()
        return block

    def txn_epoch_closed(self, scope: str, stream: str, epoch: int) -> bool:
        """Whether ``epoch`` of ``scope/stream`` is closed to new transactions: its mark is
        stored, or, read after the mark, it is below the stream's current epoch (a scale
        deletes the marks below the epoch it made current only after storing it:
        transactions.py). StreamNotFoundError if the stream is gone."""
        return self.txns.is_closed(scope, stream, epoch) or epoch < int(
            self.streams.get(scope, stream)[0]["epoch"]
        )

    # --- any record, and damage ------------------------------------------------------------------
    def damaged_records(self) -> dict[str, str]:
        """Records found damaged (key -> what is wrong): quarantined, never overwritten;
        and stored entries whose key cannot be read (``<where>`` -> what is wrong)."""
        with self._damaged_lock:
            damaged = dict(self._damaged)
        return {**self._records.unreadable(), **damaged}

    def quarantine(self, key: str, error: BaseException) -> None:
        """Remember ``key`` as damaged (logged once), e.g. when a workflow on it failed."""
        with self._damaged_lock:
            known = key in self._damaged
            self._damaged[key] = str(error)
        if not known:
            log.error("controller: record %s quarantined: %s", key, error)

    @contextlib.contextmanager
    def _parsing(self, key: str) -> Iterator[None]:
        """Reading or parsing record ``key``: damage is DataCorruptionError naming it, and
        the record is quarantined (fields that do not parse count as damage)."""
        try:
            try:
                yield
            except DataCorruptionError:
                raise
            except (InvalidArgumentError, KeyError, TypeError, ValueError, IndexError) as e:
                raise damaged(key, f"{type(e).__name__}: {e}") from None
        except DataCorruptionError as e:
            self.quarantine(key, e)
            raise

    def _read(self, key: str) -> dict[str, Any] | None:
        """A record's value (None if absent); damage is quarantined and raised."""
        with self._parsing(key):
            record = self._records.get(key)
        return None if record is None else record.value

    def record_state(self, key: str) -> object:
        """The ``state`` field of any record ``key`` (None if absent or it has none).

        Raises DataCorruptionError if the record is damaged; the caller quarantines it.
        """
        record = self._records.get(key)
        return record.value.get("state") if record else None

    # --- scopes ----------------------------------------------------------------------------------
    def get_scope(self, scope: str) -> dict[str, Any] | None:
        return self._read(f"scopes/{scope}")

    def create_scope(self, scope: str, created_ms: int, request_id: str | None) -> None:
        """Store a new scope record; ConflictingUpdateError if one exists."""
        self._records.put(
            f"scopes/{scope}", {"created_ms": created_ms, "request_id": request_id}, None
        )

    def list_scopes(self) -> list[str]:
        return [k.rsplit("/", 1)[1] for k in self._records.list_keys("scopes")]

    def scope_deleting(self, scope: str) -> bool | None:
        """Whether a recursive delete of ``scope`` is under way; None if the scope does not
        exist. Damage is quarantined and raised."""
        record = self._read(f"scopes/{scope}")
        return None if record is None else record.get("state") == SCOPE_DELETING

    def mark_scope_deleting(self, scope: str) -> bool:
        """Mark ``scope`` as being deleted recursively (no create is accepted in it from
        now on); False if it does not exist. Idempotent; a concurrent update of the
        record is read again."""
        key = f"scopes/{scope}"
        while True:
            with self._parsing(key):
                record = self._records.get(key)
            if record is None:
                return False
            if record.value.get("state") == SCOPE_DELETING:
                return True
            try:
                self._records.put(key, {**record.value, "state": SCOPE_DELETING}, record.version)
            except ConflictingUpdateError:
                continue
            return True

    def list_keys(self, kind: str, scope: str) -> list[str]:
        """Keys of the ``kind`` records (``streams``, ``kvtables``, ``readergroups``) of
        ``scope``, damaged ones too (but for those whose key cannot be read: :meth:`unreadable`)."""
        return self._records.list_keys(f"{kind}/{scope}")

    def unreadable(self, kind: str, scope: str) -> dict[str, str]:
        """Stored entries whose key cannot be read, among which ``kind`` records of
        ``scope`` may hide (where -> error)."""
        return self._records.unreadable(f"{kind}/{scope}")

    def list_names(self, kind: str, scope: str) -> list[str]:
        """Names of the ``kind`` records of ``scope``, damaged ones too."""
        return [k.rsplit("/", 1)[1] for k in self.list_keys(kind, scope)]

    def delete_scope(self, scope: str) -> None:
        self._records.delete(f"scopes/{scope}")

    # --- names of deleted streams and tables -----------------------------------------------------
    def safe_start(self, kind: str, scope: str, name: str, count: int) -> int:
        """The first segment number a new incarnation of ``kind`` ``scope/name`` may use
        for its ``count`` segments (Pravega's ``getSafeStartingSegmentNumberFor``).

        IllegalStateError once the name has used up the 2**32 segment numbers.
        """
        key = f"deleted/{kind}/{scope}/{name}"
        record = self._read(key)
        if record is None:
            return 0
        with self._parsing(key):
            start: int = record["next_segment_number"]
            if not is_int(start) or start < 0:
                raise ValueError(f"next_segment_number {start!r} is not an int >= 0")
        if start + count > SEGMENT_NUMBERS:
            raise IllegalStateError(
                f"{kind} {scope}/{name} was re-created so often that its segment numbers "
                "are used up; use another name"
            )
        return start

    def remember_deleted(self, kind: str, scope: str, name: str, next_number: int) -> None:
        """Record that ``scope/name`` of ``kind`` used segment numbers below ``next_number``."""
        key = f"deleted/{kind}/{scope}/{name}"
        current = self._records.get(key)
        value = {"next_segment_number": next_number}
        self._records.put(key, value, None if current is None else current.version)

    # --- streams: see stream_records.py ----------------------------------------------------------
    def get_stream_record(self, scope: str, stream: str) -> dict[str, Any] | None:
        """The stream's record as stored (None if absent); damage is quarantined and raised."""
        return self._read(StreamRecords.key(scope, stream))

    def create_stream(
        self,
        scope: str,
        stream: str,
        config: dict[str, Any],
        segment_count: int,
        created_ms: int,
        request_id: str | None,
    ) -> None:
        """Store a new stream in state CREATING, its epoch 0 of ``segment_count`` segments
        splitting the routing-key space [0, 1) evenly.

        Raises ConflictingUpdateError if it exists, IllegalStateError if its name has used
        up its segment numbers.
        """
        base = self.safe_start("streams", scope, stream, segment_count)
        self.streams.create(scope, stream, config, base, segment_count, created_ms, request_id)

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        """The stream's state, configuration and current epoch with its segments.

        Raises StreamNotFoundError, DataCorruptionError (quarantined).
        """
        return self.streams.info(scope, stream)

    def transition(self, scope: str, stream: str, to: StreamState, **fields: Any) -> None:
        """Move the stream to state ``to``; IllegalStateTransitionError unless the
        transition table (``records.STATE_TRANSITIONS``) allows it from its state now.

        Raises StreamNotFoundError, DataCorruptionError, ConflictingUpdateError.
        """
        if self.streams.state(scope, stream) is to:
            raise IllegalStateTransitionError(f"stream {scope}/{stream} is {to.value} already")
        self.streams.transition(scope, stream, to, **fields)

    # --- key-value tables (Pravega keeps them in a KVTableMetadataStore of their own) ------------
    def get_key_value_table_record(self, scope: str, table: str) -> dict[str, Any] | None:
        """The table's record as stored (None if absent); damage is quarantined and raised."""
        return self._read(f"kvtables/{scope}/{table}")

    def create_key_value_table(
        self,
        scope: str,
        table: str,
        partitions: int,
        created_ms: int,
        request_id: str | None,
        key_lengths: tuple[int, int] | None = None,
    ) -> None:
        """Store a new table of ``partitions`` table segments in state CREATING, with key
        families ``key_lengths`` (primary, secondary) if given.

        Raises ConflictingUpdateError if it exists, IllegalStateError if its name has used
        up its segment numbers.
        """
        record: dict[str, Any] = {
            "state": KeyValueTableState.CREATING.value,
            "partitions": partitions,
            "segment_base": self.safe_start("kvtables", scope, table, partitions),
            "created_ms": created_ms,
            "request_id": request_id,
        }
        if key_lengths is not None:  # absent: no key families (also records from before them)
            record["key_lengths"] = list(key_lengths)
        self._records.put(f"kvtables/{scope}/{table}", record, None)

    def get_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        """The table's state, partitions and segments.

        Raises KeyValueTableNotFoundError, DataCorruptionError (quarantined).
        """
        key = f"kvtables/{scope}/{table}"
        record = self._read(key)
        if record is None:
            raise KeyValueTableNotFoundError(f"key-value table {scope}/{table} does not exist")
        with self._parsing(key):
            partitions = record["partitions"]
            base = record.get("segment_base", 0)  # records from before it: 0
            if not (is_int(partitions) and 1 <= partitions <= KVT_PARTITIONS_MAX):
                raise ValueError(f"partitions {partitions!r} out of range")
            if not (is_int(base) and base >= 0 and base + partitions <= SEGMENT_NUMBERS):
                raise ValueError(f"segment_base {base!r} out of range")
            lengths = record.get("key_lengths") or [None, None]
            if not isinstance(lengths, list) or len(lengths) != 2:
                raise ValueError(f"key_lengths {lengths!r} is not a pair")
            primary, secondary = check_key_lengths(*lengths)  # damage: InvalidArgumentError
            return KeyValueTableInfo(
                scope=scope,
                name=table,
                state=KeyValueTableState(record["state"]),
                partitions=partitions,
                segments=tuple(kvt_segment_name(scope, table, i, base) for i in range(partitions)),
                creation_time_ms=int(record["created_ms"]),
                primary_key_length=primary,
                secondary_key_length=secondary,
            )

    def set_key_value_table_state(
        self, scope: str, table: str, expected: KeyValueTableState, to: KeyValueTableState
    ) -> None:
        """Move the table from state ``expected`` to ``to``.

        Raises KeyValueTableNotFoundError, IllegalStateTransitionError (it is not in state
        ``expected``), DataCorruptionError, ConflictingUpdateError.
        """
        key = f"kvtables/{scope}/{table}"
        record = self._records.get(key)
        if record is None:
            raise KeyValueTableNotFoundError(f"key-value table {scope}/{table} does not exist")
        if record.value.get("state") != expected.value:
            raise IllegalStateTransitionError(
                f"key-value table {scope}/{table} is {record.value.get('state')}, "
                f"not {expected.value}"
            )
        self._records.put(key, {**record.value, "state": to.value}, record.version)

    def delete_key_value_table(self, scope: str, table: str) -> None:
        self._records.delete(f"kvtables/{scope}/{table}")

    # --- reader groups ---------------------------------------------------------------------------
    def get_reader_group_record(self, scope: str, group: str) -> dict[str, Any] | None:
        """The group's record as stored (None if absent); damage is quarantined and raised."""
        return self._read(f"readergroups/{scope}/{group}")

    def create_reader_group(self, state: ReaderGroupState) -> None:
        """Store a new reader group; ConflictingUpdateError if one exists."""
        self._records.put(f"readergroups/{state.scope}/{state.name}", state.to_dict(), None)

    def get_reader_group(self, scope: str, group: str) -> tuple[ReaderGroupState, int]:
        """The group's state and the version to save it over.

        Raises ReaderGroupNotFoundError, DataCorruptionError (quarantined).
        """
        key = f"readergroups/{scope}/{group}"
        with self._parsing(key):
            record = self._records.get(key)
        if record is None:
            raise ReaderGroupNotFoundError(f"reader group {scope}/{group} does not exist")
        with self._parsing(key):
            return ReaderGroupState.from_dict(record.value), record.version

    def save_reader_group(self, state: ReaderGroupState, version: int) -> None:
        """Store ``state`` over ``version``; ConflictingUpdateError if it changed since."""
        self._records.put(f"readergroups/{state.scope}/{state.name}", state.to_dict(), version)

    def delete_reader_group(self, scope: str, group: str) -> None:
        self._records.delete(f"readergroups/{scope}/{group}")
