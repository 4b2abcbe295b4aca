"""A stream's transaction records (Pravega's controller design, "Transaction Manager";
docs/design.md "The controller").

Every record is a versioned JSON object in the controller's :class:`MetadataStore`, changed
by compare-and-set on its version (as ``stream_records.py``), so the controller API, the
commit and abort event processors and the transaction timer, each possibly in its own
process, never both win a race. Keys, for stream ``sc/st`` and transaction id ``<hex>``
(the UUID's 32 hex digits):

``txn/sc/st/<epoch, 10 digits>/<hex>`` (the *active* record, under its epoch's root)
    ``status`` (OPEN, COMMITTING or ABORTING), ``epoch``, ``lease_deadline_ms``,
    ``max_deadline_ms``, ``created_ms``, ``status_ms`` (when ``status`` last changed or
    its event was last posted).
``completedtxn/sc/st/<hex>`` (written when the transaction ends, *before* its active
    record is removed): ``status`` (COMMITTED or ABORTED), ``epoch``, ``completed_ms``.
    Forgotten after ``TXN_COMPLETED_KEEP_S`` (the timer deletes it).
``txnclosed/sc/st/<epoch, 10 digits>``: the epoch is *closed to new transactions*; written
    by a scale (or seal) before it counts the epoch's transactions. A creation writes its
    active record first and checks this mark after, so a scale that found no transaction
    of a closed epoch can seal it: any creation racing with it sees the mark and moves to
    the next epoch. Every epoch below the stream's current one is closed (a scale and a
    rolling commit close the old epochs before the new one becomes current), so once a
    scale or roll made its epoch current it deletes the marks below it
    (:meth:`TxnRecords.forget_closed_below`), and a creation that finds no mark also
    counts its epoch closed if it is below the current epoch it reads *after* the mark:
    the marks stay bounded by the epochs a running scale holds, not the stream's history.

A transaction's record is looked up under the epochs where an active transaction can be:
the stream's current epoch, the one a running scale adds, and the one before (a scale
never completes while its old epoch has active transactions, so none are older).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from typing import Any

from pravega_ray.contracts.records import TxnStatus
from pravega_ray.errors import ConflictingUpdateError

__all__ = ["ACTIVE_STATES", "TxnRecord", "TxnRecords"]

ACTIVE_STATES = frozenset({TxnStatus.OPEN, TxnStatus.COMMITTING, TxnStatus.ABORTING})


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """One transaction's stored state (active or completed) and the record's version."""

    scope: str
    stream: str
    txn_id: uuid.UUID
    status: TxnStatus
    epoch: int
    lease_deadline_ms: int
    max_deadline_ms: int
    created_ms: int
    status_ms: int
    version: int
    rolling: bool = False
    """COMMITTING, and handed to a rolling commit: its epoch's segments were (or are
    being) sealed by a scale, so it is merged into duplicates of them in a new epoch
    (``stream_workflows.py``, "Rolling transactions")."""

    @property
    def deadline_ms(self) -> int:
        """When the timer aborts it if still OPEN: its lease's end, at most its max."""
        return min(self.lease_deadline_ms, self.max_deadline_ms)

    def value(self, **changes: Any) -> dict[str, Any]:
        """The stored form, with ``changes`` (``status`` as a TxnStatus) applied."""
        out = {
            "status": self.status.value,
            "epoch": self.epoch,
            "lease_deadline_ms": self.lease_deadline_ms,
            "max_deadline_ms": self.max_deadline_ms,
            "created_ms": self.created_ms,
            "status_ms": self.status_ms,
        }
        if self.rolling:
            out["rolling"] = True
        for name, change in changes.items():
            out[name] = change.value if isinstance(change, TxnStatus) else change
        return out


class TxnRecords:
    """Reads and compare-and-set updates of transaction records (module docstring).

    ``records`` is the raw versioned store; ``parsing(key)`` is the context in which a
    record that cannot be parsed becomes DataCorruptionError naming it (and quarantined).
    Thread-safe as far as ``records`` is: every update is one compare-and-set.
    """

    def __init__(
        self, records: Any, parsing: Callable[[str], AbstractContextManager[None]]
    ) -> None:
        self._records = records
        self._parsing = parsing

    # --- keys ------------------------------------------------------------------------------------
    @staticmethod
    def epoch_root(scope: str, stream: str, epoch: int) -> str:
        return f"txn/{scope}/{stream}/{epoch:010d}"

    @classmethod
    def active_key(cls, scope: str, stream: str, epoch: int, txn_id: uuid.UUID) -> str:
        return f"{cls.epoch_root(scope, stream, epoch)}/{txn_id.hex}"

    @staticmethod
    def completed_key(scope: str, stream: str, txn_id: uuid.UUID) -> str:
        return f"completedtxn/{scope}/{stream}/{txn_id.hex}"

    @staticmethod
    def closed_key(scope: str, stream: str, epoch: int) -> str:
        return f"txnclosed/{scope}/{stream}/{epoch:010d}"

    # --- active records --------------------------------------------------------------------------
    def create(
        self,
        scope: str,
        stream: str,
        txn_id: uuid.UUID,
        epoch: int,
        lease_deadline_ms: int,
        max_deadline_ms: int,
        now_ms: int,
    ) -> TxnRecord:
        """Store a new OPEN transaction under ``epoch``; ConflictingUpdateError if it exists."""
        record = TxnRecord(
            scope,
            stream,
            txn_id,
            TxnStatus.OPEN,
            epoch,
            lease_deadline_ms,
            max_deadline_ms,
            now_ms,
            now_ms,
            -1,
        )
        key = self.active_key(scope, stream, epoch, txn_id)
        version = self._records.put(key, record.value(), None)
        return _with_version(record, version)

    def active(self, scope: str, stream: str, epoch: int, txn_id: uuid.UUID) -> TxnRecord | None:
        """The active record of ``txn_id`` under ``epoch``, None if there is none."""
        key = self.active_key(scope, stream, epoch, txn_id)
        with self._parsing(key):
            found = self._records.get(key)
            if found is None:
                return None
            value = found.value
            status = TxnStatus(value["status"])
            if status not in ACTIVE_STATES or int(value["epoch"]) != epoch:
                raise ValueError(f"an active record with status {status} of epoch {epoch}")
            return TxnRecord(
                scope,
                stream,
                txn_id,
                status,
                epoch,
                int(value["lease_deadline_ms"]),
                int(value["max_deadline_ms"]),
                int(value["created_ms"]),
                int(value.get("status_ms", value["created_ms"])),
                found.version,
                bool(value.get("rolling", False)),
            )

    def update(self, record: TxnRecord, **changes: Any) -> TxnRecord:
        """Compare-and-set ``record`` (as read) with ``changes``; ConflictingUpdateError if
        it changed (or was removed) since it was read."""
        key = self.active_key(record.scope, record.stream, record.epoch, record.txn_id)
        version = self._records.put(key, record.value(**changes), record.version)
        return _replace(record, **changes, version=version)

    def remove(self, scope: str, stream: str, epoch: int, txn_id: uuid.UUID) -> None:
        """Remove the active record (a no-op if absent)."""
        self._records.delete(self.active_key(scope, stream, epoch, txn_id))

    def list_epoch(self, scope: str, stream: str, epoch: int) -> list[uuid.UUID]:
        """Ids of the transactions with an active record under ``epoch``."""
        keys = self._records.list_keys(self.epoch_root(scope, stream, epoch))
        out = []
        for key in keys:
            with self._parsing(key):
                out.append(uuid.UUID(hex=key.rsplit("/", 1)[1]))
        return out

    # --- completed records -----------------------------------------------------------------------
    def complete(self, record: TxnRecord, status: TxnStatus, now_ms: int) -> None:
        """End the transaction as ``status``: the completed record first, then the active one
        removed (so a reader finds one or the other, always). Idempotent."""
        assert status.completed, status
        key = self.completed_key(record.scope, record.stream, record.txn_id)
        value = {"status": status.value, "epoch": record.epoch, "completed_ms": now_ms}
        with suppress(ConflictingUpdateError):  # written before a crash: keep the first
            self._records.put(key, value, None)
        self.remove(record.scope, record.stream, record.epoch, record.txn_id)

    def completed(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnRecord | None:
        """An ended transaction's record (status COMMITTED or ABORTED; its times all the
        time it ended, ``status_ms``), None if unknown or forgotten."""
        key = self.completed_key(scope, stream, txn_id)
        with self._parsing(key):
            found = self._records.get(key)
            if found is None:
                return None
            status = TxnStatus(found.value["status"])
            if not status.completed:
                raise ValueError(f"a completed record with status {status}")
            at = int(found.value["completed_ms"])
            epoch = int(found.value["epoch"])
            return TxnRecord(scope, stream, txn_id, status, epoch, at, at, at, at, found.version)

    def list_completed(self, scope: str, stream: str) -> list[uuid.UUID]:
        out = []
        for key in self._records.list_keys(f"completedtxn/{scope}/{stream}"):
            with self._parsing(key):
                out.append(uuid.UUID(hex=key.rsplit("/", 1)[1]))
        return out

    def forget(self, scope: str, stream: str, txn_id: uuid.UUID) -> None:
        self._records.delete(self.completed_key(scope, stream, txn_id))

    # --- the closed mark -------------------------------------------------------------------------
    def close_epoch(self, scope: str, stream: str, epoch: int) -> None:
        """Mark ``epoch`` closed to new transactions (idempotent)."""
        with suppress(ConflictingUpdateError):
            self._records.put(self.closed_key(scope, stream, epoch), {"closed": True}, None)

    def is_closed(self, scope: str, stream: str, epoch: int) -> bool:
        """Whether ``epoch``'s mark exists (epochs below the current one may have none any
        more: the caller compares with the current epoch, read after this; module docstring)."""
        return self._records.get(self.closed_key(scope, stream, epoch)) is not None

    def closed_marks(self, scope: str, stream: str) -> list[int]:
        """The epochs of ``scope/stream`` whose closed mark is stored, in order (a key that
        does not name an epoch is no mark of ours: left out, and left alone)."""
        epochs = []
        for key in self._records.list_keys(f"txnclosed/{scope}/{stream}"):
            name = key.rsplit("/", 1)[1]
            if name.isdigit():
                epochs.append(int(name))
        return sorted(epochs)

    def forget_closed_below(self, scope: str, stream: str, current: int) -> int:
        """Delete the closed marks of epochs below ``current``, the stream's current epoch
        as stored (every one of them is closed for good: module docstring); how many.
        Idempotent: a run cut short leaves marks the next one deletes."""
        below = [e for e in self.closed_marks(scope, stream) if e < current]
        for epoch in below:
            self._records.delete(self.closed_key(scope, stream, epoch))
        return len(below)

    # --- removal with the stream -----------------------------------------------------------------
    def delete_stream(self, scope: str, stream: str, highest_epoch: int) -> None:
        """Remove every transaction record of a stream being deleted (a re-created stream of
        the same name starts with open epochs and no history)."""
        for epoch in range(highest_epoch + 1):
            for txn_id in self.list_epoch(scope, stream, epoch):
                self.remove(scope, stream, epoch, txn_id)
        for epoch in self.closed_marks(scope, stream):
            self._records.delete(self.closed_key(scope, stream, epoch))
        for txn_id in self.list_completed(scope, stream):
            self.forget(scope, stream, txn_id)


def _with_version(record: TxnRecord, version: int) -> TxnRecord:
    return _replace(record, version=version)


def _replace(record: TxnRecord, **fields: Any) -> TxnRecord:
    return dataclasses.replace(record, **fields)
