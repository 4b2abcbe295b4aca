"""The controller's records in table segments of the system scope (Pravega's
``PravegaTablesStreamMetadataStore``), behind the :class:`MetadataStore` Protocol.

Layout
------

Records live in ``partitions`` table segments (``CONTROLLER_METADATA_PARTITIONS``), named
by :func:`~pravega_ray.naming.system_table_segment_name` (``_system/_kvt.controller/<n>.#epoch.0``).
A record goes to the partition of its *parent* key (``streams/sc`` for ``streams/sc/st``;
``""`` for a key without ``/``), by a stable hash: the children of one prefix share one
partition, so :meth:`TableMetadataStore.list_keys` iterates one table segment, never all
of them. The partition count is part of the data format: changing it strands records.

Each entry: key = the record key in UTF-8; value = the same checksummed JSON as
:class:`~pravega_ray.controller.stream_metadata_store.ChunkMetadataStore` stores
(:func:`encode_record`); version = the table version (the entry's offset, >= 0). A put
is one conditional table update (``NOT_EXISTS`` for "must not exist"), so the table
segment's atomic check-and-append is the compare-and-set.

Exactly once
------------

A table update whose outcome is unknown (the container died mid-call:
:class:`RetriableError`, or the call timed out) is repeated with the same ``client_id``
and ``client_last`` (the table segment's exactly-once retries), so a put that landed the
first time returns its version instead of a false :class:`ConflictingUpdateError`. A
client id sends one batch at a time per table segment; concurrent callers therefore
take a *client slot* (an id and its last batch offset per partition) from a pool under
a lock, and give it back after the call. A slot whose last outcome stayed unknown is
dropped (a new random id replaces it).

Listing children
----------------

The table's index is a hash, so the children of a prefix cannot be read on their own:
:meth:`TableMetadataStore.list_keys` keeps, per partition, every live key grouped by
parent (a *listing*) and the offset of the partition's change log it has read to. A call
first reads the changes appended since (``table_read_changes``: usually none, one call),
so it costs the changes since the last call plus the children listed, not the whole
partition (iterating the partition for every stream made the transaction timer's sweep,
and everything sharing its process, grow with the square of the stream count). The first
call of a partition notes its length, iterates its current keys, then reads the changes
from that length (a key added or removed during the iteration is in them). The listing
holds the partition's live keys (as many as :meth:`all_keys` returns).

A damaged Tier-2 chunk of a partition costs only the records in it: reading them
answers DataCorruptionError naming the chunk, and listing skips an entry whose key
cannot be read (the table's iteration names it and says where to go on; a damaged
chunk among the changes makes the partition listed afresh), logs it once and names
it in :meth:`TableMetadataStore.unreadable`, so every other record is listed and the
controller keeps working.

Caching values
--------------

Values are cached (``stream_store_cache.py``, its module docstring states the guarantee): a
read is served from memory once the key's partition was validated since the read's
operation (:meth:`TableMetadataStore.operation`, or the read alone) started, by one
``table_changes`` call from the offset the cache applied; a partition's changes update the
cached values of their keys. ``cache_bytes=0`` turns caching off (a table read per get).

Thread-safe: several threads of one process may call one store at once. Several
processes may use the same tables at once: a listing and the cache are brought up to date
with the segment before each use, and compare-and-set by version keeps them correct.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, TypeVar

from pravega_ray.constants import (
    CONTAINER_CALL_ATTEMPTS_MAX,
    CONTROLLER_METADATA_CACHE_BYTES,
    CONTROLLER_METADATA_PARTITIONS,
    KVT_PARTITIONS_MAX,
    READ_BYTES_MAX,
    TABLE_ITERATE_LIMIT,
    TABLE_KEY_BYTES_MAX,
    TABLE_VALUE_BYTES_MAX,
    TABLE_WATCH_WAIT_S,
)
from pravega_ray.contracts.attributes import NULL_VALUE
from pravega_ray.contracts.segment_store import (
    NOT_EXISTS,
    TableEntry,
    TableUpdate,
    TableUpdateResult,
)
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.controller.stream_metadata_store import (
    ChunkMetadataStore,
    Versioned,
    damaged,
    decode_record,
    encode_record,
    is_int,
)
from pravega_ray.controller.stream_store_cache import ABSENT, Absent, Cached, RecordCache, Ticket
from pravega_ray.errors import (
    BadKeyVersionError,
    ConflictingUpdateError,
    DataCorruptionError,
    InvalidArgumentError,
    InvalidNameError,
    NoSuchKeyError,
    PravegaError,
    RetriableError,
    SegmentExistsError,
    SegmentStoreUnavailableError,
    SegmentTruncatedError,
)
from pravega_ray.naming import stable_hash64, system_table_segment_name
from pravega_ray.retry import repeat_while
from pravega_ray.segmentstore.table_segment import CLIENT_ID_BYTES, HEADER_BYTES
from pravega_ray.segmentstore.table_watches import HOLDER_BYTES
from pravega_ray.storage.chunk_storage import ChunkStorage, validate_chunk_name
from pravega_ray.timing import DAEMON_THREADS, ThreadScheduler

__all__ = [
    "CONTROLLER_TABLE",
    "MIGRATION_MARKER",
    "TableMetadataStore",
    "migrate_chunk_records",
    "open_metadata_store",
]

log = logging.getLogger(__name__)
R = TypeVar("R")

CONTROLLER_TABLE = "controller"
"""System table (``_system/_kvt.controller``) holding the controller's records."""

MIGRATION_MARKER = "meta/migrated-from-chunks"
"""Written last by :func:`migrate_chunk_records`: the chunk records were copied."""

WATCH_LEASE_MARGIN = 0.1
"""Share of a lease a watcher does not trust (clock rates of two processes may differ)."""

CALL_TIMEOUT_S = 30.0
"""Default bound of one table call; past it the outcome is unknown and the call repeats."""

_ENTRY_BYTES_MAX = HEADER_BYTES + TABLE_KEY_BYTES_MAX + TABLE_VALUE_BYTES_MAX

RETRY_PAUSE_S = 0.5
"""Pause between repeats of a table call whose outcome is unknown."""


@dataclass
class _Listing:
    """A partition's live keys by parent, as of change-log offset ``offset``."""

    offset: int
    children: dict[str, set[str]] = field(default_factory=dict)

    def apply(self, key: str, live: bool) -> None:
        parent = key.rpartition("/")[0]
        if live:
            self.children.setdefault(parent, set()).add(key)
            return
        siblings = self.children.get(parent)
        if siblings is not None:
            siblings.discard(key)
            if not siblings:
                del self.children[parent]


@dataclass
class _ClientSlot:
    """A table client id and the offset of its last batch on each partition."""

    client_id: bytes
    last: dict[int, int] = field(default_factory=dict)


class TableMetadataStore:
    """:class:`~pravega_ray.controller.stream_metadata_store.MetadataStore` on table segments.

    Same contract as ``ChunkMetadataStore`` (see the module docstring for the layout):
    ``get`` returns the value and version or None; ``put`` is compare-and-set by version
    (``ConflictingUpdateError`` to the loser; ``DataCorruptionError`` naming the key if the
    current entry is damaged, which is never overwritten); ``delete`` removes the key;
    ``list_keys`` lists direct children, damaged ones too, except entries whose very key
    cannot be read, which :meth:`unreadable` names. Keys follow the chunk store's
    rule (non-empty ``/``-separated components, no ``.``/``..``), at most
    ``TABLE_KEY_BYTES_MAX`` UTF-8 bytes (else InvalidNameError); encoded values at most
    ``TABLE_VALUE_BYTES_MAX`` (else InvalidArgumentError). Versions are ints >= 0.

    Calls whose outcome is unknown are repeated ``attempts_max`` times at most,
    ``pause_s`` apart (slept through ``scheduler``), each bounded by ``call_timeout_s``;
    after the last one its ``RetriableError`` (``SegmentStoreUnavailableError`` for a
    timeout) reaches the caller, outcome still unknown. Call :meth:`ensure_created` once before use.
    Thread-safe (client slots, see the module docstring).

    ``watch=True`` holds a lease on each table segment from a thread per partition
    (``table_watch``; ``segmentstore/table_watches.py``): while it holds, reads of the
    partition need no validation round, and the container acknowledges no update of it
    before this store applied it. Call :meth:`close` to give the leases back.

    One gap against the chunk store: a put naming the *current* version of an entry
    whose value was damaged in place (the version unchanged) replaces it, as the table
    checks versions, not values; the damaged bytes stay in the append-only segment.
    """

    def __init__(
        self,
        client: SegmentStoreClient,
        *,
        partitions: int = CONTROLLER_METADATA_PARTITIONS,
        call_timeout_s: float | None = CALL_TIMEOUT_S,
        attempts_max: int = CONTAINER_CALL_ATTEMPTS_MAX,
        pause_s: float = RETRY_PAUSE_S,
        scheduler: ThreadScheduler = DAEMON_THREADS,
        new_client_id: Callable[[], bytes] = lambda: os.urandom(CLIENT_ID_BYTES),
        cache_bytes: int = CONTROLLER_METADATA_CACHE_BYTES,
        watch: bool = False,
        watch_wait_s: float = TABLE_WATCH_WAIT_S,
    ) -> None:
        if not is_int(partitions) or not 1 <= partitions <= KVT_PARTITIONS_MAX:
            raise InvalidArgumentError(
                f"partitions must be an int in [1, {KVT_PARTITIONS_MAX}], got {partitions!r}"
            )
        if not is_int(attempts_max) or attempts_max < 1:
            raise InvalidArgumentError(f"attempts_max must be an int >= 1, got {attempts_max!r}")
        for name, seconds in (("call_timeout_s", call_timeout_s), ("pause_s", pause_s)):
            if seconds is None and name == "call_timeout_s":
                continue
            least = 0.0 if name == "pause_s" else 1e-3
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < least:
                raise InvalidArgumentError(f"{name} must be a number >= {least}, got {seconds!r}")
        self._client = client
        self.segments = [system_table_segment_name(CONTROLLER_TABLE, p) for p in range(partitions)]
        self._call_timeout_s = call_timeout_s
        self._attempts_max = attempts_max
        self._pause_s = pause_s
        self._scheduler = scheduler
        self._new_client_id = new_client_id
        self._lock = threading.Lock()
        self._idle: list[_ClientSlot] = []
        self._listings: list[_Listing | None] = [None] * partitions
        self._listing_locks = [threading.Lock() for _ in range(partitions)]
        self._unreadable: dict[str, str] = {}  # "<segment>@<offset>" -> why
        self.cache = RecordCache(partitions, self.partition_of, cache_bytes)
        """The record cache (``stream_store_cache.py``); ``cache_bytes=0`` turns it off."""
        self._caching = cache_bytes > 0
        self._holder = os.urandom(HOLDER_BYTES)
        self._watch_wait_s = watch_wait_s
        self._closed = threading.Event()
        self._watchers: list[threading.Thread] = []
        self._watching = watch and self._caching  # from ensure_created() on
        self.entries_scanned = 0
        """Table entries read by listings so far (iterated or read as changes), a diagnostic
        (not locked across partitions): tests check that listing one stream's children
        does not grow with the stream count."""

    # --- layout ----------------------------------------------------------------------------------
    def partition_of(self, key: str) -> int:
        """The partition of record ``key``: the one of its parent key's children."""
        return self.children_partition(key.rpartition("/")[0])

    def children_partition(self, parent: str) -> int:
        """The partition holding every record directly under ``parent``: a stable hash of it."""
        return _parent_hash(parent) % len(self.segments)

    def ensure_created(self) -> None:
        """Create the table segments; those that exist already are left as they are. A
        watching store starts watching them."""
        for segment in self.segments:
            with contextlib.suppress(SegmentExistsError):
                self._call(f"create {segment}", partial(self._client.table_create, segment))
        with self._lock:
            if not self._watching or self._watchers or self._closed.is_set():
                return
            for p in range(len(self.segments)):
                thread = threading.Thread(
                    target=self._watch, args=(p,), daemon=True, name=f"pravega-watch-{p}"
                )
                self._watchers.append(thread)
                thread.start()

    # --- MetadataStore ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def operation(self) -> Iterator[None]:
        """Reads on this thread inside the block form one operation of the record cache
        (``stream_store_cache.py``): they see every write completed before the block
        started, and cost one round of change-log reads (all partitions at once, at the
        first read) plus a table read per record not cached. Outside a block each read is
        an operation of its own. Nested blocks join the outermost."""
        with self.cache.operation():
            yield

    def get(self, key: str) -> Versioned | None:
        """See :meth:`MetadataStore.get`; DataCorruptionError names ``key`` (and the segment).

        Served from the record cache when the key's partition was validated since the
        operation started and the record is cached (module docstring of
        ``stream_store_cache.py``); otherwise one table read, sent together with the
        validation."""
        raw_key = _key_bytes(key)
        partition = self.partition_of(key)
        if not self._caching:
            return self._fetch(key, raw_key, partition, None, None)
        cache = self.cache
        start = cache.operation_start()
        if start is None:
            start, wanted = cache.tick(), [partition]
        else:
            wanted = list(range(len(self.segments)))
        if not cache.stale([partition], start):
            cached = cache.lookup(key)
            if cached is None:
                return self._fetch(key, raw_key, partition, None, cache.begin(partition, key))
            return self._served(key, raw_key, partition, cached)
        # Not known to be fresh: validate, the table read sent alongside unless cached
        # (or the partition was never validated: its first validation drops what was sent).
        ticket: Ticket | None = None
        fetched: Future[list[TableEntry | None]] | None = None
        if not cache.holds(key) and cache.partitions[partition].offset is not None:
            ticket = cache.begin(partition, key)
            fetched = self._client.table_get(self.segments[partition], [raw_key])
        try:
            self._validate(partition, cache.stale(wanted, start), start)
        except BaseException:
            if ticket is not None:
                cache.end(ticket, None)
            raise
        if fetched is None:
            cached = cache.lookup(key)
            if cached is not None:
                return self._served(key, raw_key, partition, cached)
            ticket = cache.begin(partition, key)
        return self._fetch(key, raw_key, partition, fetched, ticket)

    def _served(self, key: str, raw_key: bytes, partition: int, cached: Cached) -> Versioned | None:
        """A cached record decoded; one that does not decode is dropped and read again (the
        error then names its table entry)."""
        if isinstance(cached.raw, Absent):
            return None
        where = f"{self.segments[partition]}@{cached.version}"
        try:
            return Versioned(decode_record(key, where, cached.raw), cached.version)
        except DataCorruptionError:
            return self._refetch(key, raw_key, partition)

    def _refetch(self, key: str, raw_key: bytes, partition: int) -> Versioned | None:
        """The record read from its table segment, whatever the cache holds (dropped first),
        and cached again as :meth:`_fetch` caches."""
        self.cache.drop(key)
        ticket = self.cache.begin(partition, key) if self._caching else None
        return self._fetch(key, raw_key, partition, None, ticket)

    def _fetch(
        self,
        key: str,
        raw_key: bytes,
        partition: int,
        sent: Future[list[TableEntry | None]] | None,
        ticket: Ticket | None,
    ) -> Versioned | None:
        """The record read from its table segment (``sent``: the read already sent), then
        cached under ``ticket`` (see :meth:`RecordCache.begin`; None: not cached) if it
        decodes."""
        answer: Cached | None = None
        try:
            segment = self.segments[partition]
            try:
                (entry,) = self._call(
                    f"get {key}",
                    _first(sent, lambda: self._client.table_get(segment, [raw_key])),
                )
            except DataCorruptionError as e:
                raise damaged(key, f"its table entry cannot be read ({e})", segment) from e
            if entry is None or entry.value is None:
                answer = Cached(ABSENT, -1)
                return None
            where = f"{segment}@{entry.version}"
            record = Versioned(decode_record(key, where, entry.value), entry.version)
            answer = Cached(entry.value, entry.version)
            return record
        finally:
            if ticket is not None:
                self.cache.end(ticket, answer)

    def put(self, key: str, value: dict[str, Any], expected_version: int | None) -> int:
        """See :meth:`MetadataStore.put`.

        InvalidArgumentError for a value that is not a JSON-encodable dict or is too big,
        or an ``expected_version`` that is not an int (a negative one never matches).
        A conflict drops the cached record, so the caller's next read is the table's.
        """
        raw_key = _key_bytes(key)
        if not isinstance(value, dict):
            raise InvalidArgumentError(f"record {key}: a value is a dict, not {type(value)}")
        try:
            data = encode_record(value)
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(f"record {key}: value is not JSON: {e}") from None
        if len(data) > TABLE_VALUE_BYTES_MAX:
            raise InvalidArgumentError(
                f"record {key} is {len(data)} bytes encoded, over {TABLE_VALUE_BYTES_MAX}"
            )
        if expected_version is None:
            condition = NOT_EXISTS
        elif not is_int(expected_version):
            raise InvalidArgumentError(f"expected_version {expected_version!r} is not an int")
        elif expected_version < 0:
            self.cache.drop(key)
            self.get(key)  # damage first, as the chunk store reports it
            raise ConflictingUpdateError(f"record {key} changed concurrently")
        else:
            condition = expected_version
        partition = self.partition_of(key)
        ticket = self.cache.begin(partition, key) if self._caching else None
        answer: Cached | None = None
        try:
            result = self._update(partition, TableUpdate(raw_key, data, condition), key)
            answer = Cached(data, result.versions[0])
        except (BadKeyVersionError, NoSuchKeyError):
            result = None
        finally:
            self._end(ticket, answer, key)
        if result is None:
            # Read from the table, not the cache: the write that won may be durable and not
            # acknowledged yet (its watchers are applying it), and a caller reading after a
            # conflict expects to see it. A damaged entry is DataCorruptionError here.
            self._refetch(key, raw_key, partition)
            if expected_version is None:
                raise ConflictingUpdateError(f"record {key} exists")
            raise ConflictingUpdateError(f"record {key} changed concurrently")
        return result.versions[0]

    def delete(self, key: str) -> None:
        """See :meth:`MetadataStore.delete`: one unconditional removal, damaged or not."""
        raw_key = _key_bytes(key)
        partition = self.partition_of(key)
        ticket = self.cache.begin(partition, key) if self._caching else None
        answer: Cached | None = None
        try:
            result = self._update(partition, TableUpdate(raw_key, None), key)
            if result.offset is not None:
                answer = Cached(ABSENT, result.offset)  # the removal's own entry
        finally:
            self._end(ticket, answer, key)

    def _end(self, ticket: Ticket | None, answer: Cached | None, key: str) -> None:
        """Close a write's cache ticket: cache ``answer``, or forget ``key`` (the write
        failed or its outcome is unknown)."""
        if ticket is None:
            return
        if answer is None:
            self.cache.drop(key)
        self.cache.end(ticket, answer)

    def list_keys(self, prefix: str) -> list[str]:
        """See :meth:`MetadataStore.list_keys`: the listing of ``prefix``'s partition,
        brought up to date with its change log first (module docstring, "Listing
        children"). An entry whose key cannot be read (its Tier-2 chunk damaged) is left
        out, logged and named by :meth:`unreadable`: one damaged chunk costs only the
        records in it."""
        _key_bytes(prefix)
        partition = self.children_partition(prefix)
        with self._listing_locks[partition]:
            listing = self._listing(partition)
            return sorted(listing.children.get(prefix, ()))

    def unreadable(self, prefix: str | None = None) -> dict[str, str]:
        """See :meth:`MetadataStore.unreadable`: entries found so far whose key could not
        be read, as ``"<table segment>@<offset>"`` -> the error."""
        with self._lock:
            found = dict(self._unreadable)
        if prefix is None:
            return found
        segment = self.segments[self.children_partition(prefix)]
        return {where: e for where, e in found.items() if where.startswith(f"{segment}@")}

    def _listing(self, partition: int) -> _Listing:
        """The partition's listing, loaded on first use and caught up with its changes."""
        segment = self.segments[partition]
        listing = self._listings[partition]
        if listing is None:
            listing = self._load_listing(partition)
        listed_afresh = False
        while True:
            try:
                entries, offset = self._call(
                    f"changes {segment}",
                    partial(
                        self._client.table_read_changes, segment, listing.offset, READ_BYTES_MAX
                    ),
                )
            except SegmentTruncatedError:  # compacted under us: list it afresh
                self._listings[partition] = None
                return self._listing(partition)
            except DataCorruptionError as e:
                # A damaged chunk among the changes since the listing was made: list the
                # partition afresh (its iteration skips what it cannot read), once.
                if listed_afresh:
                    raise DataCorruptionError(
                        f"controller records in {segment} cannot be listed: {e}", chunk=segment
                    ) from e
                self._note_unreadable(segment, listing.offset, e)
                listing, listed_afresh = self._load_listing(partition), True
                continue
            self.entries_scanned += len(entries)
            for entry in entries:
                try:
                    key = entry.key.decode("utf-8")
                except UnicodeDecodeError:
                    log.error(
                        "controller: %s holds a key that is not UTF-8: %r", segment, entry.key
                    )
                    continue
                listing.apply(key, entry.value is not None)
            read_to_end = _reached_end(listing.offset, offset)
            listing.offset = offset
            if not entries or read_to_end:
                return listing

    # --- the record cache's validation -----------------------------------------------------------
    def _validate(self, needed: int, others: Sequence[int], since: int) -> None:
        """Bring the cache of partition ``needed``, and of ``others`` as it can, up to date
        with their change logs, in one round of concurrent calls, skipping those a round
        started after tick ``since`` validated meanwhile.

        ``needed`` is waited for (its calls repeated while unavailable); of the others, only
        those no other thread is validating are sent, and only the answers already there
        when ``needed`` is done are applied: one still under way is kept for the next read
        that needs its partition. A slow or restarting container delays the reads of its
        own partition alone."""
        cache = self.cache
        held = [needed]
        cache.partitions[needed].lock.acquire()
        try:
            for p in sorted(set(others) - {needed}):
                if cache.partitions[p].lock.acquire(blocking=False):
                    held.append(p)
            todo = cache.stale(held, since)
            if not todo:
                return
            started = cache.tick()
            sent: dict[int, tuple[Future[tuple[list[TableEntry], int, int]], int]] = {}
            for p in todo:
                state = cache.partitions[p]
                pending, state.pending = state.pending, None
                if pending is not None and pending[1] > since and pending[2] == state.offset:
                    sent[p] = pending[:2]  # sent after the operation started: fresh enough
                else:
                    segment, offset = self.segments[p], state.offset
                    sent[p] = (self._client.table_changes(segment, offset, READ_BYTES_MAX), started)
            if needed in sent:
                future, tick = sent.pop(needed)
                self._catch_up(needed, future)
                cache.validated(needed, tick)
            for p, (future, tick) in sent.items():
                if not future.done():
                    cache.partitions[p].pending = (future, tick, cache.partitions[p].offset)
                    continue
                if future.exception() is not None:
                    continue  # validated when a read needs it
                try:
                    self._catch_up(p, future)
                except PravegaError as e:
                    log.info("controller: record cache of %s not validated: %s", p, e)
                    continue
                cache.validated(p, tick)
        finally:
            for p in reversed(held):
                cache.partitions[p].lock.release()

    def _catch_up(self, partition: int, sent: Future[tuple[list[TableEntry], int, int]]) -> None:
        """Apply the partition's changes since the cache's offset (``sent``: the first read
        of them). A partition never validated, or whose container recovered since (its log
        epoch changed), or whose changes cannot be read, is dropped from the cache and
        followed from where the container answers."""
        cache = self.cache
        state = cache.partitions[partition]
        segment = self.segments[partition]
        first: Future[tuple[list[TableEntry], int, int]] | None = sent
        while True:
            offset = state.offset
            try:
                entries, end, epoch = self._call(
                    f"changes {segment}",
                    _first(
                        first,
                        partial(self._client.table_changes, segment, offset, READ_BYTES_MAX),
                    ),
                )
            except (SegmentTruncatedError, DataCorruptionError) as e:
                # The changes cannot be read: forget the partition, start from its length.
                log.warning("controller: record cache of %s dropped: %s", segment, e)
                state.offset, first = None, None
                continue
            first = None
            if offset is None or epoch != state.epoch:
                cache.reset(partition, end, epoch)
                if offset is None or not entries:
                    return  # none of the changes matter: nothing of the partition is cached
                continue  # read on from there
            cache.apply(partition, _record_changes(entries), end)
            if not entries or _reached_end(offset, end):
                return

    # --- watching (segmentstore/table_watches.py) -----------------------------------------------
    def _watch(self, partition: int) -> None:
        """Hold a lease on the partition's table segment for as long as the store is open:
        apply each change the container answers, then call again (the acknowledgement), and
        note the lease in the cache while it is known to hold (module docstring of
        ``stream_store_cache.py``). Any failure lapses the lease; the next call renews it."""
        cache, segment = self.cache, self.segments[partition]
        state = cache.partitions[partition]
        wait_s = self._watch_wait_s
        while not self._closed.is_set():
            with state.lock:
                offset = state.offset
            sent_at = time.monotonic()
            try:
                future = self._client.table_watch(
                    segment, self._holder, offset, wait_s, READ_BYTES_MAX
                )
                entries, end, epoch, lease_s = future.result(wait_s + CALL_TIMEOUT_S)
                wait_s = min(self._watch_wait_s, lease_s / 3)  # renewed well before it ends
            except (PravegaError, TimeoutError) as e:
                cache.lapse(partition)
                if not self._closed.is_set():
                    log.debug("controller: watch of %s failed: %r", segment, e)
                    self._closed.wait(self._pause_s)
                continue
            with state.lock:
                if state.offset != offset:
                    continue  # a validation moved on meanwhile: acknowledge from there
                if offset is None or epoch != state.epoch:
                    cache.reset(partition, end, epoch)  # nothing cached predates this answer
                    if offset is not None and entries:
                        continue  # the changes after them are read next
                else:
                    cache.apply(partition, _record_changes(entries), end)
                # Trusted only once the answer reached the segment's end, and never after
                # close() began (it gives the lease back).
                if self._closed.is_set():
                    break
                if offset is None or _reached_end(offset, end):
                    cache.lease(partition, sent_at + lease_s * (1 - WATCH_LEASE_MARGIN))

    def subscribe(self, key: str, callback: Callable[[], None]) -> Callable[[], None] | None:
        """Call ``callback`` once, when this store's watcher applies the next change of
        record ``key``, or when the key's partition stops being under its lease (the
        caller reads the record then); returns the call that cancels it. None (nothing
        subscribed) if the partition is not under a lease now: no change would be
        announced. ``callback`` runs on a watcher's thread and must not block."""
        if not self._watching:
            return None
        cancel = self.cache.subscribe(key, callback)
        if not self.cache.leased(self.partition_of(key)):
            cancel()  # a lapse after this check calls it: the caller is never left waiting
            return None
        return cancel

    def close(self) -> None:
        """Stop watching (leases are given back, so updates stop waiting for this store);
        reads go on, validated per operation. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        for p, state in enumerate(self.cache.partitions):
            with state.lock:  # a watcher leases under it, and only while not closed
                self.cache.lapse(p)
        if self._watchers:
            # Giving a lease back also wakes the watcher's waiting call, so its thread ends.
            released = [self._client.table_unwatch(s, self._holder) for s in self.segments]
            for future in released:
                with contextlib.suppress(Exception):  # a container down: the lease runs out
                    future.result(1.0)
            for thread in self._watchers:
                thread.join(self._watch_wait_s + 1.0)

    # --- whole store -----------------------------------------------------------------------------
    def all_keys(self) -> list[str]:
        """Sorted keys of every record in every partition (damaged ones too)."""
        return sorted(k for segment in self.segments for k in self._iterate_keys(segment))

    def _load_listing(self, partition: int) -> _Listing:
        """A new listing of the partition: its length, then its keys (module docstring)."""
        segment = self.segments[partition]
        info = self._call(f"info {segment}", lambda: self._client.get_info(segment))
        listing = _Listing(info.length)
        for key in self._iterate_keys(segment):
            listing.apply(key, True)
        self._listings[partition] = listing
        return listing

    def _note_unreadable(self, segment: str, offset: object, error: DataCorruptionError) -> None:
        where = f"{segment}@{offset}"
        with self._lock:
            known = where in self._unreadable
            self._unreadable[where] = str(error)
        if not known:
            log.error("controller: records in %s cannot all be read: %s", segment, error)

    def _iterate_keys(self, segment: str) -> list[str]:
        """The keys of ``segment``; an entry whose key cannot be read is noted and skipped
        (the table's iteration names it and says where to go on)."""
        keys: list[str] = []
        cursor: bytes | None = None
        while True:
            try:
                entries, cursor = self._call(
                    f"iterate {segment}",
                    partial(
                        self._client.table_iterate, segment, cursor, TABLE_ITERATE_LIMIT, False
                    ),
                )
            except DataCorruptionError as e:
                after = getattr(e, "cursor", None)
                if not isinstance(after, bytes):
                    raise DataCorruptionError(
                        f"controller records in {segment} cannot be listed: {e}", chunk=segment
                    ) from e
                self._note_unreadable(segment, getattr(e, "offset", "?"), e)
                entries, cursor = getattr(e, "entries", []), after
            self.entries_scanned += len(entries)
            for entry in entries:
                try:
                    keys.append(entry.key.decode("utf-8"))
                except UnicodeDecodeError:
                    log.error(
                        "controller: %s holds a key that is not UTF-8: %r", segment, entry.key
                    )
            if cursor is None:
                return keys

    # --- calls -----------------------------------------------------------------------------------
    def _call(self, what: str, call: Callable[[], Future[R]]) -> R:
        """``call().result()``, repeated while its outcome is unknown (a timeout counts)."""

        def once() -> R:
            future = call()
            try:
                return future.result(self._call_timeout_s)
            except TimeoutError:
                raise SegmentStoreUnavailableError(
                    f"{what}: no answer in {self._call_timeout_s} s"
                ) from None

        return repeat_while(
            RetriableError,
            once,
            what=f"controller metadata: {what}",
            log=log,
            attempts_max=self._attempts_max,
            pause_s=self._pause_s,
            scheduler=self._scheduler,
        )

    def _update(self, partition: int, update: TableUpdate, key: str) -> TableUpdateResult:
        """Apply one update exactly once, repeated while its outcome is unknown. A watching
        store names its own lease, so the update does not wait for this store's watcher:
        the caller applies the update to the cache itself when it answers (``put``,
        ``delete``)."""
        segment = self.segments[partition]
        own_lease = self._holder if self._watching else None
        slot = self._checkout()
        known = False
        try:
            last = slot.last.get(partition, NULL_VALUE)
            try:
                result = self._call(
                    f"update {key}",
                    lambda: self._client.table_update(
                        segment, [update], slot.client_id, last, own_lease
                    ),
                )
            except (BadKeyVersionError, NoSuchKeyError):
                known = True  # nothing was appended: the slot's offsets still hold
                raise
            if result.offset is not None:
                slot.last[partition] = result.offset
            known = True
            return result
        finally:
            if known:
                with self._lock:
                    self._idle.append(slot)
            # Otherwise the slot's last batch may or may not have landed: drop it.

    def _checkout(self) -> _ClientSlot:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        client_id = self._new_client_id()
        if not isinstance(client_id, bytes) or len(client_id) != CLIENT_ID_BYTES:
            raise InvalidArgumentError(f"new_client_id must return {CLIENT_ID_BYTES} bytes")
        return _ClientSlot(client_id)


def _reached_end(start: int, end: int) -> bool:
    """Whether a read of a table segment's changes from ``start`` that stopped at ``end``
    reached the segment's end: it fell short of ``READ_BYTES_MAX`` by more than one entry (a
    table segment holds whole entries only), so no second call is needed to learn that."""
    return end - start <= READ_BYTES_MAX - _ENTRY_BYTES_MAX


def _record_changes(entries: list[TableEntry]) -> list[tuple[str, TableEntry]]:
    """Changes as ``(record key, entry)`` for the record cache; a key that is not UTF-8 is
    never a record's (``list_keys`` logs it) and is left out."""
    changes = []
    for entry in entries:
        with contextlib.suppress(UnicodeDecodeError):
            changes.append((entry.key.decode("utf-8"), entry))
    return changes


def _first(sent: Future[R] | None, call: Callable[[], Future[R]]) -> Callable[[], Future[R]]:
    """A call for :meth:`TableMetadataStore._call` answering ``sent`` (a call already made)
    the first time, then calling ``call`` (its repeats)."""
    pending = [sent] if sent is not None else []

    def once() -> Future[R]:
        return pending.pop() if pending else call()

    return once


KEY_MEMO_SIZE = 16384
"""Record keys whose checked bytes (and parents' hashes) each store process remembers: a
call reads its stream's few records again and again (checking a key's name costs more than
reading the record from the cache)."""


def _key_bytes(key: object) -> bytes:
    """``key`` in UTF-8 after the chunk store's key rule; InvalidNameError otherwise."""
    if isinstance(key, str):
        return _str_key_bytes(key)
    validate_chunk_name(key)  # raises InvalidNameError: not a str
    raise InvalidNameError(f"a record key is a str, got {key!r}")


@lru_cache(maxsize=KEY_MEMO_SIZE)
def _str_key_bytes(key: str) -> bytes:
    """:func:`_key_bytes` of a str (remembered; a key refused is not: it raises)."""
    validate_chunk_name(key)
    try:
        raw = key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidNameError(f"record key {key!r} is not valid UTF-8") from None
    if len(raw) > TABLE_KEY_BYTES_MAX:
        raise InvalidNameError(f"record key longer than {TABLE_KEY_BYTES_MAX} bytes")
    return raw


_parent_hash = lru_cache(maxsize=KEY_MEMO_SIZE)(stable_hash64)
"""``stable_hash64`` of a record's parent key, remembered."""


# --- migration from chunk records (data format 5 -> 6) -------------------------------------------
def migrate_chunk_records(source: ChunkMetadataStore, target: TableMetadataStore) -> int:
    """Copy every record of ``source`` into ``target``; returns how many ``target`` holds.

    Idempotent and crash-safe: a record already copied (same value) is left alone, one
    copied with another value is brought up to date by version, and the marker
    :data:`MIGRATION_MARKER` is written last, naming the count and the skipped records,
    so a rerun after a crash finishes the copy. Damaged source records (and records the
    target holds damaged) are logged and skipped, never stopping the rest; they are listed
    in the marker's ``skipped`` (key -> reason). ``source`` is left unchanged. Other
    errors (the target unavailable, a record too big for a table entry) propagate with
    no marker written: the copy is not complete.

    Several controller instances starting at once may copy side by side: a record or the
    marker another start wrote first is left as it is, and once the marker exists a record
    that differs from its source is a live update, never overwritten.
    """
    copied = 0
    skipped: dict[str, str] = {}
    for key in source.all_keys():
        if key == MIGRATION_MARKER:
            continue
        try:
            record = source.get(key)
        except DataCorruptionError as e:
            log.error("migration: controller record %s is damaged and not copied: %s", key, e)
            skipped[key] = str(e)
            continue
        if record is None:
            continue
        try:
            current = target.get(key)
        except DataCorruptionError as e:
            log.error("migration: target record %s is damaged; left as it is: %s", key, e)
            skipped[key] = str(e)
            continue
        if current is None:
            with contextlib.suppress(ConflictingUpdateError):  # a racing start copied it
                target.put(key, record.value, None)
        elif current.value != record.value:
            finished = target.get(MIGRATION_MARKER)
            if finished is not None:  # another start finished the copy: records may be live
                log.info("migration: finished by another controller start meanwhile")
                return int(finished.value.get("records", copied))
            with contextlib.suppress(ConflictingUpdateError):  # a racing start copied it
                target.put(key, record.value, current.version)
        copied += 1
    marker = {"records": copied, "skipped": skipped}
    current_marker = target.get(MIGRATION_MARKER)
    with contextlib.suppress(ConflictingUpdateError):  # a racing start wrote it: complete
        target.put(
            MIGRATION_MARKER, marker, None if current_marker is None else current_marker.version
        )
    log.info("migration: %d controller records in table segments, %d skipped", copied, len(skipped))
    return copied


def open_metadata_store(
    client: SegmentStoreClient, chunk_storage: ChunkStorage, *, watch: bool = False
) -> TableMetadataStore:
    """The controller's record store: its table segments created, the chunk records of a
    format-5 data directory copied into them on the first start (see
    :func:`migrate_chunk_records`; a start after a crash mid-copy finishes it).

    Once :data:`MIGRATION_MARKER` exists, a start costs one table get. ``watch``: hold leases
    on the table segments (:class:`TableMetadataStore`), for a process that serves many reads.
    """
    store = TableMetadataStore(client, watch=watch)
    store.ensure_created()
    if store.get(MIGRATION_MARKER) is None:
        migrate_chunk_records(ChunkMetadataStore(chunk_storage), store)
    return store
