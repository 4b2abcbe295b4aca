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
  same write id write again under a new run.

This module talks only to the client (no Ray): the Ray Data sink in ``datasink.py`` and
the tests use it.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import random
import time
import uuid
from collections.abc import Callable
from enum import Enum
from typing import Any

from pravega_ray.client.client_factory import ClientFactory
from pravega_ray.client.key_value_table import KeyValueTable
from pravega_ray.client.serializers import BytesSerializer, Utf8Serializer
from pravega_ray.errors import (
    BadKeyVersionError,
    IllegalStateError,
    InvalidArgumentError,
    KeyValueTableNotFoundError,
    NoSuchKeyError,
)

__all__ = [
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
    opens it, saving a controller call. Thread-safe as its key-value table is.
    """

    def __init__(
        self, factory: ClientFactory, scope: str, stream: str, *, create: bool = True
    ) -> None:
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
