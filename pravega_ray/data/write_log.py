"""The durable record of exactly-once stream writes: which transactions a write opened,
which it commits, and whether it finished.

*design* One key-value table per scope, :data:`WRITE_LOG_TABLE` (created on first use,
one partition), holds one entry per write, keyed ``"<stream>/<write_id>"``; its value is a
:class:`WriteRecord` as JSON. Every change is a conditional ``replace`` on the entry's
version (a lost race reads again and retries), so write tasks appending their transaction
ids and the driver moving the state never overwrite each other::

    (none) --start--> OPEN --commit_intent--> COMMITTING --committed--> COMMITTED
                       |                                                (kept: a second
                       +--aborted--> ABORTED                             write is a no-op)

* OPEN: write tasks add each transaction they begin (before writing to it), under the
  record's ``run_id``; a task of another run (a driver that lost its record to a newer one)
  is refused with IllegalStateError.
* COMMITTING: the driver recorded the transactions to commit, in order, *before* the first
  commit; whoever finds the record so (a driver that died there, run again with the same
  write id) commits exactly those and aborts the rest.
* COMMITTED / ABORTED: final for that run; ABORTED (or OPEN from a dead driver) lets the
  same write id write again under a new run. The record says when it became final
  (``finished_ms``, wall clock).

*retention* A final record is kept for ``retention_s`` (:data:`WRITE_LOG_RETENTION_S`, 7 days,
by default) after it finished, then :meth:`WriteLog.expire` removes it, conditionally on the
version it read, so a record changed meanwhile (the write id started again) is never lost.
That is the contract of a retention period: **a write id reused after its record expired
writes again**, as a new write (Kafka's transactional ids expire likewise). Exactly once
holds for retries within the period. OPEN and COMMITTING records never expire (a driver may
still finish them). A final record written before ``finished_ms`` existed is stamped
"finished now" the first time an expiry sees it, so its period starts then. Each write start
(``WriteRun.begin``) runs one expiry step: one page of the scope's table (at most
:data:`EXPIRY_PAGE_ENTRIES` records, every stream of the scope), resuming where the previous step
stopped (a position kept in the table under :data:`EXPIRY_POSITION_KEY`), removing at most
:data:`EXPIRY_CHANGES_MAX` records: a table of N records is swept every N / 100 write starts
or so (a record goes at most that many writes after its period), and a step's work is
bounded.

This module talks only to the client (no Ray): the Ray Data sink in ``datasink.py`` and
the tests use it.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import logging
import random
import time
import uuid
from collections.abc import Callable
from enum import Enum
from typing import Any

from pravega_ray.client.client_factory import ClientFactory
from pravega_ray.client.key_value_table import KeyValueTable, TableEntry
from pravega_ray.client.serializers import BytesSerializer, Utf8Serializer
from pravega_ray.constants import WRITE_LOG_RETENTION_S, WRITE_LOG_RETENTION_S_MAX
from pravega_ray.contracts.arguments import INT64_MAX, check_int, check_seconds
from pravega_ray.errors import (
    BadKeyVersionError,
    DataCorruptionError,
    IllegalStateError,
    InvalidArgumentError,
    KeyValueTableNotFoundError,
    NoSuchKeyError,
)

log = logging.getLogger(__name__)

__all__ = [
    "EXPIRY_CHANGES_MAX",
    "EXPIRY_PAGE_ENTRIES",
    "EXPIRY_POSITION_KEY",
    "WRITE_ID_LENGTH_MAX",
    "WRITE_LOG_TABLE",
    "WRITE_TXNS_MAX",
    "WriteLog",
    "WriteRecord",
    "WriteState",
    "check_write_id",
]

WRITE_LOG_TABLE = "pravega-ray-writes"
"""Name of the key-value table, in the written stream's scope, that records writes."""

WRITE_LOG_PARTITIONS = 1
"""The table is small and every write touches one key: one table segment is enough."""

WRITE_ID_LENGTH_MAX = 1024
"""Longest write id (the table key is ``stream/write_id``, at most 8 KiB)."""

WRITE_TXNS_MAX = 10_000
"""Most transactions one write may open (retries included): a record stays far below the
1 MiB value limit of a key-value table."""

UPDATE_ATTEMPTS_MAX = 200
"""Conditional updates of one record tried at most this often under contention."""

UPDATE_BACKOFF_S = 0.005
"""Pause (times a random factor in [0.5, 1.5)) before retrying a lost conditional update."""

TABLE_READY_WAIT_S = 30.0
"""How long to wait for a table being created by someone else to become active."""

EXPIRY_PAGE_ENTRIES = 100
"""Records one expiry step reads (a record holds up to WRITE_TXNS_MAX transaction ids)."""

EXPIRY_CHANGES_MAX = 100
"""Most records one expiry step removes or stamps (each is a table call); a step that reaches
it leaves the position where it was, and the next step reads the same page again."""

EXPIRY_POSITION_KEY = "/expiry-position"
"""The table key holding where the next expiry step starts (a table position, opaque). No
record has it: a record's key starts with its stream's name, never empty."""


class WriteState(str, Enum):
    OPEN = "open"
    COMMITTING = "committing"
    COMMITTED = "committed"
    ABORTED = "aborted"


@dataclasses.dataclass(frozen=True)
class WriteRecord:
    """One write's entry. ``txns``: every transaction any of its tasks began (ids as
    strings, in record order); ``commit``: the ones to commit, in commit order (set when
    COMMITTING); ``events``/``bytes``: what the committed transactions hold."""

    write_id: str
    run_id: str
    state: WriteState
    txns: tuple[str, ...] = ()
    commit: tuple[str, ...] = ()
    events: int = 0
    bytes: int = 0
    finished_ms: int | None = None
    """When the record became COMMITTED or ABORTED (wall clock, ms); None before, and in
    records written before the field existed."""

    def finished(self, state: WriteState, now_ms: int | None = None) -> WriteRecord:
        """This record in final ``state`` (COMMITTED or ABORTED), finished at ``now_ms``
        (the wall clock if None)."""
        if state not in (WriteState.COMMITTED, WriteState.ABORTED):
            raise InvalidArgumentError(f"{state} is not a final state")
        at = int(time.time() * 1000) if now_ms is None else now_ms
        return dataclasses.replace(self, state=state, finished_ms=at)

    def to_json(self) -> builtins.bytes:  # (the field ``bytes`` hides the type here)
        value = dataclasses.asdict(self)
        value["state"] = self.state.value
        return json.dumps(value, separators=(",", ":")).encode()

    @staticmethod
    def from_json(data: builtins.bytes) -> WriteRecord:
        value: dict[str, Any] = json.loads(data)
        return WriteRecord(
            write_id=value["write_id"],
            run_id=value["run_id"],
            state=WriteState(value["state"]),
            txns=tuple(value["txns"]),
            commit=tuple(value["commit"]),
            events=int(value["events"]),
            bytes=int(value["bytes"]),
            finished_ms=None if value.get("finished_ms") is None else int(value["finished_ms"]),
        )

    def txn_ids(self) -> list[uuid.UUID]:
        return [uuid.UUID(t) for t in self.txns]

    def commit_ids(self) -> list[uuid.UUID]:
        return [uuid.UUID(t) for t in self.commit]


def check_write_id(write_id: object) -> str | None:
    """``write_id`` if None or a str of 1 to WRITE_ID_LENGTH_MAX characters, else
    InvalidArgumentError."""
    if write_id is None:
        return None
    if not isinstance(write_id, str) or not write_id:
        raise InvalidArgumentError(f"write_id must be a non-empty str or None, got {write_id!r}")
    if len(write_id) > WRITE_ID_LENGTH_MAX:
        raise InvalidArgumentError(f"write_id longer than {WRITE_ID_LENGTH_MAX} characters")
    return write_id


class WriteLog:
    """The write records of one stream (see the module docstring).

    The constructor creates the scope's table if needed (ScopeNotFoundError if the scope
    does not exist); with ``create=False`` (write tasks: their driver created it) it only
    opens it, saving a controller call. ``retention_s``: how long :meth:`expire` keeps a
    finished record (a finite number of seconds above 0, at most WRITE_LOG_RETENTION_S_MAX;
    InvalidArgumentError otherwise, before anything is opened). Thread-safe as its
    key-value table is.
    """

    def __init__(
        self,
        factory: ClientFactory,
        scope: str,
        stream: str,
        *,
        create: bool = True,
        retention_s: float = WRITE_LOG_RETENTION_S,
    ) -> None:
        self.retention_s = check_seconds(
            "retention_s", retention_s, WRITE_LOG_RETENTION_S_MAX, positive=True
        )
        self.scope = scope
        self.stream = stream
        self._table = _open_table(factory, scope, create)

    def close(self) -> None:
        self._table.close()

    def _key(self, write_id: str) -> str:
        return f"{self.stream}/{write_id}"

    def get(self, write_id: str) -> WriteRecord | None:
        """The write's record, or None if it has none."""
        entry = self._table.get(self._key(write_id))
        return None if entry is None else WriteRecord.from_json(entry.value)

    def start(self, write_id: str, expected: WriteRecord | None) -> WriteRecord:
        """Begin a new run of ``write_id``: a fresh OPEN record replacing ``expected`` (the
        record read before, None if there was none). IllegalStateError if the record changed
        since (another driver runs the same write id)."""
        record = WriteRecord(write_id, uuid.uuid4().hex, WriteState.OPEN)
        key = self._key(write_id)
        try:
            if expected is None:
                self._table.put_if_absent(key, record.to_json())
                return record
            entry = self._table.get(key)
            if entry is not None and WriteRecord.from_json(entry.value) == expected:
                self._table.replace(key, record.to_json(), entry.version)
                return record
        except (BadKeyVersionError, NoSuchKeyError):
            pass
        raise IllegalStateError(
            f"write {write_id!r} of {self.scope}/{self.stream} changed while starting: "
            "another driver runs it"
        )

    def add_txn(self, write_id: str, run_id: str, txn_id: uuid.UUID) -> None:
        """Record that a task of run ``run_id`` began ``txn_id`` (before it writes to it).

        IllegalStateError if the record is gone, not OPEN, or of another run; also once
        the write holds WRITE_TXNS_MAX transactions.
        """

        def change(record: WriteRecord) -> WriteRecord:
            if record.run_id != run_id or record.state is not WriteState.OPEN:
                raise IllegalStateError(
                    f"write {write_id!r}: run {run_id} is no longer the open run "
                    f"({record.state.value}, run {record.run_id})"
                )
            if len(record.txns) >= WRITE_TXNS_MAX:
                raise IllegalStateError(
                    f"write {write_id!r} opened {WRITE_TXNS_MAX} transactions (the limit)"
                )
            return dataclasses.replace(record, txns=(*record.txns, str(txn_id)))

        self.update(write_id, change)

    def update(self, write_id: str, change: Callable[[WriteRecord], WriteRecord]) -> WriteRecord:
        """Apply ``change(record) -> record`` with a conditional replace, retrying lost races
        (at most UPDATE_ATTEMPTS_MAX). ``change`` may raise to refuse. IllegalStateError if the
        record is gone or the races never end."""
        key = self._key(write_id)
        for _ in range(UPDATE_ATTEMPTS_MAX):
            entry = self._table.get(key)
            if entry is None:
                raise IllegalStateError(f"write {write_id!r} has no record (it was removed)")
            new = change(WriteRecord.from_json(entry.value))
            try:
                self._table.replace(key, new.to_json(), entry.version)
                return new
            except BadKeyVersionError:
                time.sleep(UPDATE_BACKOFF_S * (0.5 + random.random()))
        raise IllegalStateError(f"write {write_id!r}: {UPDATE_ATTEMPTS_MAX} lost update races")

    def remove(self, write_id: str) -> None:
        """Forget the write (a no-op if it has no record)."""
        self._table.remove(self._key(write_id))

    def expire(self, now_ms: int | None = None) -> int:
        """One expiry step (module docstring, *retention*): removes the final records of the
        next page of the scope's table that finished at least ``retention_s`` before
        ``now_ms`` (the wall clock if None), stamps final records without ``finished_ms``
        with ``now_ms``, and stores where the next step starts. Returns how many records it
        removed.

        Every change is conditional on the version read, so a record that changed meanwhile
        is left for a later step. At most one page (EXPIRY_PAGE_ENTRIES records) is read
        and at most EXPIRY_CHANGES_MAX records changed. A stored position that is not this
        table's starts over; an entry that cannot be read (DataCorruptionError) is stepped
        over, and so is a value that is not a record (logged). Errors of the table calls
        (the table deleted, a container unreachable) propagate: callers doing this
        opportunistically catch PravegaError.
        """
        now = (
            int(time.time() * 1000) if now_ms is None else check_int("now_ms", now_ms, 0, INT64_MAX)
        )
        cutoff = now - int(self.retention_s * 1000)
        position = _position_of(self._table.get(EXPIRY_POSITION_KEY))
        try:
            page, after = self._table.entries_page(position, EXPIRY_PAGE_ENTRIES)
        except InvalidArgumentError:  # not this table's: start over
            page, after = self._table.entries_page(None, EXPIRY_PAGE_ENTRIES)
        except DataCorruptionError as e:
            page, after = [], getattr(e, "position", None)
            log.warning("write log of %s: stepping over an unreadable entry: %s", self.scope, e)
        removed = changed = 0
        for entry in page:
            if changed >= EXPIRY_CHANGES_MAX:
                after = position  # the rest of this page next time
                break
            if entry.key == EXPIRY_POSITION_KEY:
                continue
            try:
                record = WriteRecord.from_json(entry.value)
            except (ValueError, KeyError, TypeError) as e:
                log.warning(
                    "write log of %s: %s is not a write record: %r", self.scope, entry.key, e
                )
                continue
            if record.state not in (WriteState.COMMITTED, WriteState.ABORTED):
                continue
            try:
                if record.finished_ms is None:  # written before the field: its period starts now
                    stamped = dataclasses.replace(record, finished_ms=now)
                    self._table.replace(entry.key, stamped.to_json(), entry.version)
                    changed += 1
                elif record.finished_ms <= cutoff:
                    self._table.remove(entry.key, entry.version)
                    removed += 1
                    changed += 1
            except (BadKeyVersionError, NoSuchKeyError):
                continue  # changed or removed meanwhile: a later step sees it again
        self._table.put(EXPIRY_POSITION_KEY, b"" if after is None else after.hex().encode())
        return removed


def _position_of(entry: TableEntry[str, bytes] | None) -> bytes | None:
    """The stored expiry position (None: the table's start, also for a damaged value)."""
    if entry is None or not entry.value:
        return None
    try:
        return bytes.fromhex(entry.value.decode())
    except (UnicodeDecodeError, ValueError):
        log.warning("write log: ignoring a damaged expiry position %r", entry.value[:64])
        return None


def _open_table(factory: ClientFactory, scope: str, create: bool) -> KeyValueTable[str, bytes]:
    """The scope's write-log table, created on first use if ``create`` (opened first: once it
    exists, as for every write but the scope's first, that is one controller call); waits
    while someone else creates it."""
    deadline = time.monotonic() + TABLE_READY_WAIT_S
    tried_create = not create
    while True:
        try:
            return factory.key_value_table(
                scope, WRITE_LOG_TABLE, Utf8Serializer(), BytesSerializer()
            )
        except KeyValueTableNotFoundError:
            if tried_create:
                raise
            factory.stream_manager().create_key_value_table(
                scope, WRITE_LOG_TABLE, WRITE_LOG_PARTITIONS
            )
            tried_create = True
        except IllegalStateError:  # CREATING: another writer's create is in flight
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
