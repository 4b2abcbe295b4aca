"""A stream's records (Pravega's controller design, "Stream Metadata"; docs/design.md
"The controller"): epochs, segments, state, policies.

Every record is a versioned JSON object in the controller's :class:`MetadataStore`; an
update names the version it read (compare-and-set), so two concurrent workflows cannot
both win. Keys, for stream ``sc/st``:

``streams/sc/st`` (the stream record; written last on create, deleted last on delete)
    ``state`` (moved only through ``records.STATE_TRANSITIONS``), ``config``,
    ``created_ms``, ``request_id``, ``epoch`` (the current, completed epoch),
    ``next_number`` (the next unused segment number), ``cold`` (segment ids an auto-scale
    report marked cold, waiting for a cold neighbour), ``key_hash`` (the stream's routing
    rule, ``records.KeyHash``: written by the create, never changed; every update copies the
    record's other fields, so it survives updates, scales, seals and truncations; a record
    without it, of a stream created before streams recorded one, reads as ``legacy``).
``history/sc/st/<epoch, 10 digits>`` (history table, one row per epoch)
    ``created_ms``; ``segments`` ``[[id, key_low, key_high], ...]`` sorted by key, a
    consistent set (they cover [0, 1) without overlap); ``sealed``: the ids this epoch
    replaced (its segments' predecessors); ``partial``: true while its scale runs.
    The *segment table* is part of it: segment ``id``'s record (key range, creation time)
    is in the row of its creation epoch ``id >> 32``, found in O(1).
``indexrows/sc/st/<chunk, 8 digits>`` (index table, in chunks of ``INDEX_CHUNK`` epochs)
    ``rows`` ``[[created_ms, epoch], ...]`` of epochs ``chunk * INDEX_CHUNK`` up to the
    next chunk's, in time order (times never go back, across chunks too): segments-at-time
    is a binary search over the chunks' first rows, one in the chunk, then one history row.
    Streams created before the index was chunked keep their rows in the one record
    ``index/sc/st``, read for every chunk not stored (a new chunk starts from its rows).
``sealed/sc/st/<shard, 8 digits>``: ``sizes`` ``{id: length}`` of every sealed segment whose
    number (``id`` & 0xFFFFFFFF) is in ``[shard, shard + 1) * SEALED_SIZES_SHARD``; older
    streams' sizes stay in the one record ``sealedsizes/sc/st`` too, read with them. So no
    record grows with the stream's history: a stream scaled every minute for years stays
    under the table entry's size limit (the single records of before held it for about
    40,000 epochs).
``truncation/sc/st``: the truncation record (``cut``, ``deleted``), written by the truncate
workflow (``stream_workflows.py``), whoever asked for the truncation.
``transition/sc/st``: the temporary scale property (Pravega's epoch transition record):
    the new ``epoch``, the ``sealed`` ids and the new ``segments``; one at a time.
``update/sc/st``: the temporary update property (the new ``config``).
``subscribers/sc/st``: the stream's subscriber reader groups (``controller/subscriber_tasks.py``):
    ``subscribers`` ``{"scope/group": {"generation": g, "cut": {id: offset} or null}}``.
``retention/sc/st``: the retention set (``controller/retention_service.py``): ``records``
    ``[{"time_ms", "size", "cut"}, ...]`` oldest first, and ``head`` ``{"time_ms",
    "size"}`` of the cut retention last truncated at.
``marks/sc/st/<writer id>`` and ``watermark/sc/st``: writers' noted times and the stream's
    last watermark (``controller/watermark_tasks.py``).

A segment is *active* in a contiguous run of epochs, from its creation epoch until the
epoch that sealed it, so the epoch that sealed it (and with it its successors) is found by
binary search over the history rows.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

from pravega_ray.constants import STREAM_SEGMENTS_MAX
from pravega_ray.contracts.records import STATE_TRANSITIONS, KeyHash, StreamInfo, StreamState
from pravega_ray.controller.epochs import (
    EpochRecord,
    RollPlan,
    Row,
    ScaleRecord,
    overlaps,
    to_range,
    union,
)
from pravega_ray.controller.segment_helper import run_each
from pravega_ray.errors import (
    ConflictingUpdateError,
    IllegalStateTransitionError,
    InvalidArgumentError,
    ScaleConflictError,
    StreamNotFoundError,
    StreamSealedError,
)
from pravega_ray.invariant import invariant
from pravega_ray.naming import segment_epoch, segment_id
from pravega_ray.stream_configuration import StreamConfiguration

INDEX_CHUNK = 1000
"""Epochs per record of the index table (Pravega's history time series chunks)."""
SEALED_SIZES_SHARD = 1000
"""Segment numbers per record of sealed sizes (Pravega's sealed segments map shards)."""

KEY_HASH_OF_NEW_STREAMS = KeyHash.PRAVEGA
"""The routing rule a stream created from now on records: Pravega's clients' own (issue 25)."""

KEY_HASH_UNRECORDED = KeyHash.LEGACY
"""The routing rule of a stream record without ``key_hash``: every stream created before
streams recorded their rule routed keys so, and keeps doing so for its whole life."""


def key_hash_of(value: Mapping[str, Any]) -> KeyHash:
    """The routing rule stream record ``value`` holds (``KEY_HASH_UNRECORDED`` if none).

    Raises ValueError for a value that names no rule (callers read records in a
    ``parsing`` context, which turns it into DataCorruptionError).
    """
    if "key_hash" not in value:
        return KEY_HASH_UNRECORDED
    rule = value["key_hash"]
    if not isinstance(rule, str):
        raise ValueError(f"key_hash {rule!r} is not a str")
    return KeyHash(rule)


class StreamRecords:
    """Reads and compare-and-set updates of streams' records (see the module docstring).

    ``parsing(key)`` is a context in which reading or parsing record ``key`` fails with
    DataCorruptionError naming it (and quarantines it); ``records`` is the raw versioned
    store. Thread-safe as far as ``records`` is: every update is one compare-and-set.
    """

    def __init__(
        self, records: Any, parsing: Callable[[str], AbstractContextManager[None]]
    ) -> None:
        self._records = records
        self._parsing = parsing

    def _read(self, key: str) -> dict[str, Any] | None:
        with self._parsing(key):
            record = self._records.get(key)
        return None if record is None else record.value

    # --- the stream record -----------------------------------------------------------------------
    @staticmethod
    def key(scope: str, stream: str) -> str:
        return f"streams/{scope}/{stream}"

    def get(self, scope: str, stream: str) -> tuple[dict[str, Any], int]:
        """The stream record and its version; StreamNotFoundError if absent.

        A record of data format 5 or older (one ``epochs`` list inside) is upgraded to
        history rows here, once (keeping its lack of ``key_hash``: it stays ``legacy``).
        DataCorruptionError (quarantined) for a record that does not parse, a ``key_hash``
        naming no rule included.
        """
        key = self.key(scope, stream)
        with self._parsing(key):
            record = self._records.get(key)
            if record is None:
                raise StreamNotFoundError(f"stream {scope}/{stream} does not exist")
            if "epochs" in record.value:
                StreamState(record.value["state"])
                StreamConfiguration.from_dict(record.value["config"])
                key_hash_of(record.value)
                return self._upgrade(scope, stream, record.value, record.version)
            StreamState(record.value["state"])
            for field in ("epoch", "next_number"):
                if not isinstance(record.value[field], int) or record.value[field] < 0:
                    raise ValueError(f"{field} {record.value[field]!r} is not an int >= 0")
            key_hash_of(record.value)
            return record.value, record.version

    def _upgrade(
        self, scope: str, stream: str, value: dict[str, Any], version: int
    ) -> tuple[dict[str, Any], int]:
        epochs = value["epochs"]
        numbers = [sid & 0xFFFFFFFF for row in epochs for sid, _, _ in row]
        for epoch, row in enumerate(epochs):
            record = EpochRecord(
                epoch,
                int(value["created_ms"]),
                tuple((int(s), float(lo), float(hi)) for s, lo, hi in row),
                (),
                False,
            )
            self.put_epoch(scope, stream, record)
        upgraded = {k: v for k, v in value.items() if k != "epochs"}
        upgraded.update(epoch=len(epochs) - 1, next_number=max(numbers) + 1, cold=[])
        new_version = self._records.put(self.key(scope, stream), upgraded, version)
        return upgraded, new_version

    def create(
        self,
        scope: str,
        stream: str,
        config: dict[str, Any],
        base: int,
        count: int,
        created_ms: int,
        request_id: str | None,
    ) -> None:
        """The stream record in state CREATING (ConflictingUpdateError if it exists), naming
        its epoch 0 (``count`` segments numbered from ``base`` splitting [0, 1) evenly). The
        epoch's history and index rows are written by whoever finishes the create
        (:meth:`ensure_epoch0`, beside the segments' creation); until then :meth:`info`
        answers epoch 0 from the record.

        The record comes first, so the loser of two creates racing on one name (threads of
        an instance, or instances) writes nothing: the epoch 0 stored is always the one the
        stored record names. Rows left by an older create cut short are overwritten.

        The record holds the stream's routing rule, ``KEY_HASH_OF_NEW_STREAMS``, for good.
        """
        record = {
            "state": StreamState.CREATING.value,
            "config": config,
            "created_ms": created_ms,
            "request_id": request_id,
            "epoch": 0,
            "next_number": base + count,
            "cold": [],
            "epoch0": {"base": base, "count": count},
            "key_hash": KEY_HASH_OF_NEW_STREAMS.value,
        }
        self._records.put(self.key(scope, stream), record, None)

    @staticmethod
    def _epoch0_of(value: dict[str, Any]) -> EpochRecord | None:
        """Epoch 0 as a stream record names it (None for records stored before they did)."""
        spec = value.get("epoch0")
        if spec is None:
            return None
        base, count = int(spec["base"]), int(spec["count"])
        rows = tuple(
            (segment_id(0, base + i), i / count, (i + 1) / count if i + 1 < count else 1.0)
            for i in range(count)
        )
        return EpochRecord(0, int(value["created_ms"]), rows, (), False)

    def _write_epoch0(self, scope: str, stream: str, value: dict[str, Any]) -> None:
        """Epoch 0's history and index rows, and the leftovers of an earlier stream of the
        name removed: independent keys, written side by side (a create cut short between
        them is completed by :meth:`ensure_epoch0`)."""
        row = self._epoch0_of(value)
        if row is None:
            return

        def clear(key: str) -> None:
            if self._records.get(key) is not None:  # a read (cached) costs less than a write
                self._records.delete(key)  # left by an earlier stream of the same name

        clears: list[Callable[[], None]] = [
            partial(clear, f"sealedsizes/{scope}/{stream}"),
            partial(clear, f"index/{scope}/{stream}"),
            partial(clear, f"transition/{scope}/{stream}"),
        ]
        puts: list[Callable[[], None]] = [
            partial(self._put_same, f"history/{scope}/{stream}/{0:010d}", row.to_dict()),
            partial(self._put_same, self._index_key(scope, stream, 0), _index0(row.created_ms)),
        ]
        # (The shards of sealed sizes and the index chunks of an earlier stream of the name
        # are gone: its delete removes them before its stream record.)
        run_each(lambda step: step(), [*clears, *puts])

    def ensure_epoch0(self, scope: str, stream: str) -> None:
        """For a stream still CREATING: store the epoch 0 its record names (history and
        index rows, each written unless stored already) and clear what an earlier stream of
        the name left. Idempotent; callers racing on it store the same rows."""
        value = self.get(scope, stream)[0]
        if value["state"] == StreamState.CREATING.value:
            self._write_epoch0(scope, stream, value)

    @staticmethod
    def _index_key(scope: str, stream: str, chunk: int) -> str:
        return f"indexrows/{scope}/{stream}/{chunk:08d}"

    def _put_same(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` under ``key`` unless it is stored already (another value stored
        there is overwritten); a concurrent writer of the same value is success, of another
        value ConflictingUpdateError. An absent key costs one conditional write, no read."""
        value = json.loads(json.dumps(value))  # as stored: lists, not tuples
        try:  # a new row, as almost always: one write, no read before it
            self._records.put(key, value, None)
            return
        except ConflictingUpdateError:
            current = self._records.get(key)
        if current is not None and current.value == value:
            return
        try:
            self._records.put(key, value, None if current is None else current.version)
        except ConflictingUpdateError:
            again = self._records.get(key)
            if again is None or again.value != value:
                raise

    def update(
        self, scope: str, stream: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> dict[str, Any]:
        """Compare-and-set the stream record with ``change(value)`` (None: leave it).

        ConflictingUpdateError if another update won in between. ``change`` must keep the
        record's ``key_hash`` as it is (absent included): a stream's routing rule never
        changes (an InvariantViolation otherwise, and nothing is stored).
        """
        value, version = self.get(scope, stream)
        new = change(dict(value))
        if new is None:
            return value
        invariant(
            new.get("key_hash") == value.get("key_hash"),
            "an update of a stream record keeps its routing rule",
        )
        self._records.put(self.key(scope, stream), new, version)
        return new

    def transition(self, scope: str, stream: str, to: StreamState, **fields: Any) -> None:
        """Move the stream to ``to`` (and set ``fields``), as the transition table allows.

        A no-op if it is in ``to`` already. IllegalStateTransitionError otherwise.
        """

        def change(value: dict[str, Any]) -> dict[str, Any] | None:
            current = StreamState(value["state"])
            if current is to:
                return None
            if to not in STATE_TRANSITIONS[current]:
                raise IllegalStateTransitionError(
                    f"stream {scope}/{stream} cannot go from {current.value} to {to.value}"
                )
            return {**value, "state": to.value, **fields}

        self.update(scope, stream, change)

    def state(self, scope: str, stream: str) -> StreamState:
        return StreamState(self.get(scope, stream)[0]["state"])

    # --- history and index tables ----------------------------------------------------------------
    def epoch(self, scope: str, stream: str, epoch: int) -> EpochRecord | None:
        """The history row of ``epoch`` (None if there is none); epoch 0 of a stream still
        CREATING whose rows are not stored yet is the one its record names."""
        key = f"history/{scope}/{stream}/{epoch:010d}"
        value = self._read(key)
        if value is None:
            if epoch != 0:
                return None
            record = self._read(self.key(scope, stream))
            if record is None or record.get("state") != StreamState.CREATING.value:
                return None
            with self._parsing(self.key(scope, stream)):
                return self._epoch0_of(record)
        with self._parsing(key):
            return EpochRecord(
                epoch,
                int(value["created_ms"]),
                tuple((int(s), float(lo), float(hi)) for s, lo, hi in value["segments"]),
                tuple(int(s) for s in value["sealed"]),
                bool(value["partial"]),
            )

    def put_epoch(
        self, scope: str, stream: str, record: EpochRecord, *, overwrite: bool = False
    ) -> EpochRecord:
        """Store a history row; if it exists already, keep it (or replace it: ``overwrite``).

        Returns the row stored. The index table gets the row's time unless it has it.
        """
        key = f"history/{scope}/{stream}/{record.epoch:010d}"
        existing = self.epoch(scope, stream, record.epoch)
        if existing is not None and not overwrite:
            return existing
        if overwrite:
            self._put_any(key, record.to_dict())
        else:
            try:
                self._records.put(key, record.to_dict(), None)
            except ConflictingUpdateError:  # a concurrent writer of the same row won
                stored = self.epoch(scope, stream, record.epoch)
                assert stored is not None
                return stored
        if record.epoch > 0:
            self._index_add(scope, stream, record.created_ms, record.epoch)
        return record

    def set_epoch_complete(self, scope: str, stream: str, epoch: int) -> None:
        row = self.epoch(scope, stream, epoch)
        if row is not None and row.partial:
            key = f"history/{scope}/{stream}/{epoch:010d}"
            current = self._records.get(key)
            self._records.put(key, {**current.value, "partial": False}, current.version)

    def _index_add(self, scope: str, stream: str, created_ms: int, epoch: int) -> None:
        chunk = epoch // INDEX_CHUNK
        key = self._index_key(scope, stream, chunk)
        current = self._records.get(key)
        rows = list(current.value["rows"]) if current else self._legacy_rows(scope, stream, chunk)
        if rows and rows[-1][1] >= epoch:
            if current is None:  # a chunk of the old single record: stored on its own now
                self._records.put(key, {"rows": rows}, None)
            return
        # Times never go back in the index (across chunks too), so the binary search holds
        # with a skewed clock.
        before = rows[-1][0] if rows else self._last_time(scope, stream, chunk)
        rows.append([max(created_ms, before if before is not None else created_ms), epoch])
        self._records.put(key, {"rows": rows}, None if current is None else current.version)

    def _legacy_rows(self, scope: str, stream: str, chunk: int) -> list[list[int]]:
        """Rows of ``chunk``'s epochs in the single index record of older streams."""
        value = self._read(f"index/{scope}/{stream}")
        if not value:
            return []
        low, high = chunk * INDEX_CHUNK, (chunk + 1) * INDEX_CHUNK
        return [[int(t), int(e)] for t, e in value["rows"] if low <= int(e) < high]

    def _chunk_rows(self, scope: str, stream: str, chunk: int) -> list[tuple[int, int]]:
        value = self._read(self._index_key(scope, stream, chunk))
        rows = value["rows"] if value else self._legacy_rows(scope, stream, chunk)
        return [(int(t), int(e)) for t, e in rows]

    def _last_time(self, scope: str, stream: str, chunk: int) -> int | None:
        """The time of the last index row before ``chunk`` (None: there is none)."""
        for earlier in range(chunk - 1, -1, -1):
            rows = self._chunk_rows(scope, stream, earlier)
            if rows:
                return rows[-1][0]
        return None

    def index(self, scope: str, stream: str) -> list[tuple[int, int]]:
        """Every row of the index table (every chunk), in time order."""
        highest = self.highest_epoch(scope, stream)
        rows: list[tuple[int, int]] = []
        for chunk in range(highest // INDEX_CHUNK + 1):
            rows.extend(self._chunk_rows(scope, stream, chunk))
        return rows or [(0, 0)]

    def epoch_at(self, scope: str, stream: str, time_ms: int) -> int:
        """The epoch that was current at ``time_ms`` (epoch 0 before the stream existed):
        a binary search over the index chunks' first rows, then one in a chunk."""
        current = int(self.get(scope, stream)[0]["epoch"])
        low, high = 0, self.highest_epoch(scope, stream) // INDEX_CHUNK
        while low < high:  # the last chunk whose first row is at or before time_ms
            mid = (low + high + 1) // 2
            rows = self._chunk_rows(scope, stream, mid)
            if rows and rows[0][0] <= time_ms:
                low = mid
            else:
                high = mid - 1
        rows = self._chunk_rows(scope, stream, low) or [(0, 0)]
        at = bisect.bisect_right([t for t, _ in rows], time_ms) - 1
        return min(rows[max(at, 0)][1], current)

    def _active_epoch_row(self, scope: str, stream: str, epoch: int) -> EpochRecord:
        row = self.epoch(scope, stream, epoch)
        if row is None:
            raise StreamNotFoundError(f"stream {scope}/{stream} has no epoch {epoch}")
        return row

    def highest_epoch(self, scope: str, stream: str) -> int:
        """The current epoch, or the one a running scale is adding once its row exists (a
        rolling commit adds two: the second counts once the first exists too)."""
        current = int(self.get(scope, stream)[0]["epoch"])
        if self.epoch(scope, stream, current + 1) is None:
            return current
        return current + 2 if self.epoch(scope, stream, current + 2) is not None else current + 1

    def txn_low_epoch(self, value: dict[str, Any]) -> int:
        """The lowest epoch that may still hold active transactions, from the stream record
        ``value`` (kept by scales and rolling commits; a record without it: the epoch before
        the current one, where a scale used to leave them at most)."""
        current = int(value["epoch"])
        low = value.get("txn_low_epoch")
        return max(0, current - 1) if low is None else min(int(low), current)

    def segment_row(self, scope: str, stream: str, sid: int) -> tuple[Row, int] | None:
        """Segment ``sid``'s ``(row, created_ms)`` from its creation epoch, None if unknown."""
        row = self.epoch(scope, stream, segment_epoch(sid))
        if row is None:
            return None
        for r in row.segments:
            if r[0] == sid:
                return r, row.created_ms
        return None

    def sealed_in(self, scope: str, stream: str, sid: int) -> EpochRecord | None:
        """The epoch that replaced segment ``sid`` (binary search), None while it is active."""
        lo, hi = segment_epoch(sid) + 1, self.highest_epoch(scope, stream)
        found: EpochRecord | None = None
        while lo <= hi:
            mid = (lo + hi) // 2
            row = self._active_epoch_row(scope, stream, mid)
            if sid in row.ids():
                lo = mid + 1
            else:
                found, hi = row, mid - 1
        return found

    def successors(self, scope: str, stream: str, sid: int) -> list[tuple[Row, list[int]]]:
        """Segment ``sid``'s successors, each with all its predecessors; empty while it is
        active or once the stream is sealed without a successor."""
        me = self.segment_row(scope, stream, sid)
        if me is None:
            return []
        replaced = self.sealed_in(scope, stream, sid)
        if replaced is None:
            return []
        sealed_rows = [r for r in self._rows_of(scope, stream, replaced.sealed)]
        new = [r for r in replaced.segments if segment_epoch(r[0]) == replaced.epoch]
        out = []
        for succ in new:
            if overlaps(succ, me[0]):
                out.append((succ, sorted(p[0] for p in sealed_rows if overlaps(p, succ))))
        return out

    def predecessors(self, scope: str, stream: str, sid: int) -> list[Row]:
        me = self.segment_row(scope, stream, sid)
        created = segment_epoch(sid)
        if me is None or created == 0:
            return []
        row = self._active_epoch_row(scope, stream, created)
        return [p for p in self._rows_of(scope, stream, row.sealed) if overlaps(p, me[0])]

    def _rows_of(self, scope: str, stream: str, ids: Sequence[int]) -> list[Row]:
        out = []
        for sid in ids:
            found = self.segment_row(scope, stream, sid)
            if found is not None:
                out.append(found[0])
        return out

    def all_segment_ids(self, scope: str, stream: str, from_epoch: int = 0) -> list[int]:
        """Every segment of every epoch from ``from_epoch`` on (a running scale's new ones
        too), sorted."""
        ids: set[int] = set()
        for epoch in range(from_epoch, self.highest_epoch(scope, stream) + 1):
            row = self.epoch(scope, stream, epoch)
            if row is not None:
                ids |= row.ids()
        transition = self.scale_record(scope, stream)
        if transition is not None:
            ids |= {r[0] for r in transition.segments}
            if transition.rolling is not None:
                ids |= {r[0] for r in transition.rolling.duplicates}
        return sorted(ids)

    def info(self, scope: str, stream: str) -> StreamInfo:
        value = self.get(scope, stream)[0]
        epoch = int(value["epoch"])
        # Epoch 0 of a stream still CREATING comes from its record until its rows are stored.
        row = self._active_epoch_row(scope, stream, epoch)
        with self._parsing(self.key(scope, stream)):
            return self._info(scope, stream, value, epoch, row)

    @staticmethod
    def _info(
        scope: str, stream: str, value: dict[str, Any], epoch: int, row: EpochRecord
    ) -> StreamInfo:
        return StreamInfo(
            scope=scope,
            stream=stream,
            state=StreamState(value["state"]),
            configuration=StreamConfiguration.from_dict(value["config"]),
            epoch=epoch,
            segments=tuple(to_range(scope, stream, r) for r in row.segments),
            creation_time_ms=int(value["created_ms"]),
            key_hash=key_hash_of(value),
        )

    # --- sealed sizes, truncation ----------------------------------------------------------------
    @staticmethod
    def _sizes_key(scope: str, stream: str, sid: int) -> str:
        return f"sealed/{scope}/{stream}/{(sid & 0xFFFFFFFF) // SEALED_SIZES_SHARD:08d}"

    def add_sealed_sizes(self, scope: str, stream: str, sizes: dict[int, int]) -> None:
        """Record the sealed lengths ``sizes`` (id -> length), each in its shard."""
        shards: dict[str, dict[str, int]] = {}
        for sid, size in sizes.items():
            shards.setdefault(self._sizes_key(scope, stream, sid), {})[str(sid)] = size
        for key, part in sorted(shards.items()):
            current = self._records.get(key)
            stored = dict(current.value["sizes"]) if current else {}
            merged = {**stored, **part}
            if merged != stored:
                version = None if current is None else current.version
                self._records.put(key, {"sizes": merged}, version)

    def sealed_sizes(
        self, scope: str, stream: str, ids: Sequence[int] | None = None
    ) -> dict[int, int]:
        """Sealed lengths by id: of ``ids`` (reading only their shards; ids without a
        recorded size are left out), or of every sealed segment (None)."""
        legacy = self._read(f"sealedsizes/{scope}/{stream}")
        out = {int(k): int(v) for k, v in legacy["sizes"].items()} if legacy else {}
        if ids is None:
            keys = self._records.list_keys(f"sealed/{scope}/{stream}")
        else:
            keys = sorted({self._sizes_key(scope, stream, sid) for sid in ids})
        for key in keys:
            value = self._read(key)
            if value:
                out.update((int(k), int(v)) for k, v in value["sizes"].items())
        return out if ids is None else {sid: out[sid] for sid in ids if sid in out}

    def truncation(self, scope: str, stream: str) -> dict[str, Any]:
        """The truncation record: ``cut`` (segment id, as a str -> offset) the stream was last
        truncated at; the segments wholly before it, deleted: every segment created in an
        epoch below ``floor`` (absent: 0), and the ids in ``deleted`` (use
        :func:`truncated_away`)."""
        return self._read(f"truncation/{scope}/{stream}") or {"cut": {}, "deleted": []}

    def set_truncation(
        self, scope: str, stream: str, cut: dict[int, int], deleted: list[int]
    ) -> None:
        """Record the truncation at ``cut`` with the ids of the segments wholly before it
        (deleted). Every segment created in an epoch below the earliest creation epoch of
        the cut's segments is before it (each overlaps a cut segment created after it, so
        was sealed before that one began): those are kept as that ``floor``, not by id, so
        the record holds only the ids of the epochs the cut spans, however long the
        stream's history."""
        old = self.truncation(scope, stream)
        floor = max(int(old.get("floor", 0)), min((segment_epoch(s) for s in cut), default=0))
        kept = sorted(s for s in deleted if segment_epoch(s) >= floor)
        value = {"cut": {str(k): v for k, v in cut.items()}, "deleted": kept, "floor": floor}
        self._put_any(f"truncation/{scope}/{stream}", value)

    def put_truncate(self, scope: str, stream: str, cut: dict[int, int], request: str) -> None:
        """Store the temporary truncate property; ConflictingUpdateError if one is pending."""
        value = {"cut": {str(k): v for k, v in cut.items()}, "request": request}
        self._records.put(f"truncate/{scope}/{stream}", value, None)

    def pending_truncate(self, scope: str, stream: str) -> tuple[dict[int, int], str] | None:
        key = f"truncate/{scope}/{stream}"
        value = self._read(key)
        if value is None:
            return None
        with self._parsing(key):
            return {int(k): int(v) for k, v in value["cut"].items()}, str(value["request"])

    def end_truncate(self, scope: str, stream: str) -> None:
        self._records.delete(f"truncate/{scope}/{stream}")

    def before_cut(
        self, scope: str, stream: str, cut: dict[int, int], from_epoch: int = 0
    ) -> list[int]:
        """Ids of the segments wholly before ``cut``: sealed by an epoch no later than the
        creation epoch of every cut segment overlapping them (of the epochs from
        ``from_epoch`` on: a segment active in an earlier one and later too is found in
        that later one's row)."""
        rows = {sid: self.segment_row(scope, stream, sid) for sid in cut}
        out = []
        for sid in self.all_segment_ids(scope, stream, from_epoch):
            if sid in cut:
                continue
            me = self.segment_row(scope, stream, sid)
            replaced = self.sealed_in(scope, stream, sid)
            if me is None or replaced is None:
                continue
            overlapping = [c for c, r in rows.items() if r is not None and overlaps(r[0], me[0])]
            if overlapping and all(segment_epoch(c) >= replaced.epoch for c in overlapping):
                out.append(sid)
        return out

    def check_cut(self, scope: str, stream: str, cut: dict[int, int]) -> None:
        """InvalidArgumentError unless ``cut``'s segments are segments of the stream whose key
        ranges cover [0, 1) without overlap (a stream cut)."""
        ranges = []
        for sid in cut:
            row = self.segment_row(scope, stream, sid)
            if row is None:
                raise InvalidArgumentError(f"segment {sid} is not a segment of {scope}/{stream}")
            ranges.append((row[0][1], row[0][2]))
        try:
            covered = union(ranges)
        except ScaleConflictError:
            raise InvalidArgumentError("a stream cut's segments overlap") from None
        if covered != [(0.0, 1.0)]:
            raise InvalidArgumentError("a stream cut's segments must cover the key space [0, 1)")

    # --- temporary properties: scale and update --------------------------------------------------
    def start_scale(
        self,
        scope: str,
        stream: str,
        sealed: Sequence[int],
        ranges: Sequence[tuple[float, float]],
        created_ms: int,
    ) -> ScaleRecord:
        """Check a scale and store its temporary property; returns it.

        Raises StreamSealedError, ScaleConflictError (segments not in the current epoch,
        ranges that do not exactly cover theirs, another scale under way); nothing is
        stored then. A repeat of the scale under way (same input) returns its record.
        """
        value, _ = self.get(scope, stream)
        if value["state"] in (StreamState.SEALING.value, StreamState.SEALED.value):
            raise StreamSealedError(f"stream {scope}/{stream} is sealed")
        epoch = int(value["epoch"])
        running = self.scale_record(scope, stream)
        current = self._active_epoch_row(scope, stream, epoch)
        by_id = {r[0]: r for r in current.segments}
        missing = [s for s in sealed if s not in by_id]
        if missing:
            raise ScaleConflictError(
                f"segments {missing} are not in the current epoch {epoch} of {scope}/{stream}"
            )
        if len(set(sealed)) != len(sealed):
            raise ScaleConflictError("a segment is named twice in sealed_segment_ids")
        new_union = union(ranges)
        if union([(by_id[s][1], by_id[s][2]) for s in sealed]) != new_union:
            raise ScaleConflictError(
                "the new key ranges must exactly cover the sealed segments' ranges, "
                "with no gap and no overlap"
            )
        if len(by_id) - len(sealed) + len(ranges) > STREAM_SEGMENTS_MAX:
            raise ScaleConflictError(f"a stream has at most {STREAM_SEGMENTS_MAX} segments")
        number = int(value["next_number"])
        record = ScaleRecord(
            epoch + 1,
            tuple(sorted(sealed)),
            tuple(
                (segment_id(epoch + 1, number + i), lo, hi)
                for i, (lo, hi) in enumerate(sorted(ranges))
            ),
            created_ms,
        )
        if running is not None:
            same = (running.sealed, [r[1:] for r in running.segments]) == (
                record.sealed,
                [r[1:] for r in record.segments],
            )
            if same and running.epoch == record.epoch:
                return running
            raise ScaleConflictError(f"a scale of {scope}/{stream} is under way")
        payload = {
            "epoch": record.epoch,
            "sealed": list(record.sealed),
            "segments": [list(r) for r in record.segments],
            "created_ms": created_ms,
        }
        try:
            self._records.put(f"transition/{scope}/{stream}", payload, None)
        except ConflictingUpdateError:
            raise ScaleConflictError(f"a scale of {scope}/{stream} is under way") from None
        return record

    def scale_record(self, scope: str, stream: str) -> ScaleRecord | None:
        value = self._read(f"transition/{scope}/{stream}")
        if value is None:
            return None
        rolling = value.get("rolling")
        return ScaleRecord(
            int(value["epoch"]),
            tuple(int(s) for s in value["sealed"]),
            tuple((int(s), float(lo), float(hi)) for s, lo, hi in value["segments"]),
            int(value["created_ms"]),
            None if rolling is None else RollPlan.from_dict(rolling),
        )

    def start_roll(self, scope: str, stream: str, record: ScaleRecord) -> bool:
        """Store a rolling commit's temporary property (``record.rolling`` set); False if a
        scale (or another roll) holds the property already."""
        assert record.rolling is not None
        payload = {
            "epoch": record.epoch,
            "sealed": list(record.sealed),
            "segments": [list(r) for r in record.segments],
            "created_ms": record.created_ms,
            "rolling": record.rolling.to_dict(),
        }
        try:
            self._records.put(f"transition/{scope}/{stream}", payload, None)
        except ConflictingUpdateError:
            return False
        return True

    def end_scale(self, scope: str, stream: str) -> None:
        self._records.delete(f"transition/{scope}/{stream}")

    def put_update(self, scope: str, stream: str, config: dict[str, Any], request: str) -> None:
        """Store the temporary update property of request ``request``;
        ConflictingUpdateError if one is pending."""
        value = {"config": config, "request": request}
        self._records.put(f"update/{scope}/{stream}", value, None)

    def pending_update(self, scope: str, stream: str) -> tuple[dict[str, Any], str] | None:
        """The pending update's configuration and request id, if one is pending."""
        value = self._read(f"update/{scope}/{stream}")
        return None if value is None else (value["config"], str(value.get("request")))

    def end_update(self, scope: str, stream: str) -> None:
        self._records.delete(f"update/{scope}/{stream}")

    # --- subscribers and the retention set (retention) -------------------------------------------
    def versioned(
        self, kind: str, scope: str, stream: str
    ) -> tuple[dict[str, Any] | None, int | None]:
        """Record ``<kind>/sc/st`` (``subscribers``, ``retention``) and its version (None, None
        if absent); DataCorruptionError naming it if it is damaged."""
        key = f"{kind}/{scope}/{stream}"
        with self._parsing(key):
            record = self._records.get(key)
        return (None, None) if record is None else (record.value, record.version)

    def put_versioned(
        self, kind: str, scope: str, stream: str, value: dict[str, Any], version: int | None
    ) -> None:
        """Compare-and-set record ``<kind>/sc/st`` (``version`` None: must not exist);
        ConflictingUpdateError if another update won in between."""
        self._records.put(f"{kind}/{scope}/{stream}", value, version)

    # --- removal ---------------------------------------------------------------------------------
    def delete(self, scope: str, stream: str) -> None:
        """Remove every record of the stream, the stream record last (so a delete cut short
        is found and finished)."""
        highest = self.highest_epoch(scope, stream)
        for epoch in range(highest + 1):
            self._records.delete(f"history/{scope}/{stream}/{epoch:010d}")
        for parent in (
            f"sealed/{scope}/{stream}",
            f"indexrows/{scope}/{stream}",
            f"marks/{scope}/{stream}",
        ):
            for key in self._records.list_keys(parent):
                self._records.delete(key)
        kinds = ("index", "sealedsizes", "truncation", "transition", "update", "truncate")
        for kind in (*kinds, "subscribers", "retention", "watermark"):
            self._records.delete(f"{kind}/{scope}/{stream}")
        self._records.delete(self.key(scope, stream))

    def _put_any(self, key: str, value: dict[str, Any]) -> None:
        current = self._records.get(key)
        self._records.put(key, value, None if current is None else current.version)


def truncated_away(truncation: Mapping[str, Any], sid: int) -> bool:
    """Whether segment ``sid`` is wholly before the truncation record ``truncation``'s cut
    (deleted by it or an earlier truncation); see :meth:`StreamRecords.set_truncation`."""
    return segment_epoch(sid) < int(truncation.get("floor", 0)) or sid in truncation["deleted"]


def _index0(created_ms: int) -> dict[str, Any]:
    """The index of a stream that has only its epoch 0, created at ``created_ms``."""
    return {"rows": [[created_ms, 0]]}
