"""The Ray-free parts of ``pr.data.write_stream``: rows -> events (``write_rows``) and the
write record (``write_log``) on an in-process cluster."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest

import pravega_ray as pr
from pravega_ray.constants import (
    MAX_EVENT_SIZE_BYTES,
    WRITE_LOG_RETENTION_S,
    WRITE_LOG_RETENTION_S_MAX,
)
from pravega_ray.data import write_log
from pravega_ray.data.datasink import (
    WRITE_BATCH_BYTES,
    WriteRun,
    WriteStreamResult,
    _write_batched,
)
from pravega_ray.data.write_log import (
    EXPIRY_POSITION_KEY,
    WRITE_LOG_TABLE,
    WriteLog,
    WriteRecord,
    WriteState,
    check_write_id,
)
from pravega_ray.data.write_rows import check_schema, events_of_table
from pravega_ray.inprocess import InProcessCluster
from tests.checks import read_exactly

pytestmark = pytest.mark.timeout(60)


class _Table:
    arrow_schema = pa.schema([("n", pa.int64())])

    def serialize(self, event: Any) -> bytes:
        return json.dumps(event).encode()

    def deserialize(self, data: bytes) -> Any:
        return json.loads(data)

    def encode_table(self, table: pa.Table) -> list[bytes]:
        return [json.dumps(table.column("n").to_pylist()).encode()]  # one event per group

    def decode_table(self, payloads: Any) -> pa.Table:
        raise NotImplementedError


def test_events_of_table_payload_column_keys_and_nulls() -> None:
    table = pa.table({"event": ["a", "b", "c"], "k": pa.array([1, None, 1], pa.int64())})
    assert events_of_table(table, "k", None) == [("1", b"a"), (None, b"b"), ("1", b"c")]
    assert events_of_table(table, None, None) == [(None, b"a"), (None, b"b"), (None, b"c")]
    with pytest.raises(pr.InvalidArgumentError):
        events_of_table(pa.table({"event": pa.array([b"x", None])}), None, None)
    with pytest.raises(pr.EventTooLargeError):
        events_of_table(pa.table({"event": [b"x" * (MAX_EVENT_SIZE_BYTES + 1)]}), None, None)
    assert events_of_table(table.slice(0, 0), "k", None) == []


def test_events_of_table_serializers_group_by_key_and_drop_the_key_column() -> None:
    table = pa.table({"n": [1, 2, 3, 4], "k": ["a", "b", "a", "b"]})
    assert events_of_table(table, "k", _Table()) == [("a", b"[1, 3]"), ("b", b"[2, 4]")]
    rows = events_of_table(table, "k", pr.JsonSerializer())
    assert [(k, json.loads(p)) for k, p in rows] == [
        ("a", {"n": 1}),
        ("b", {"n": 2}),
        ("a", {"n": 3}),
        ("b", {"n": 4}),
    ]


def test_check_schema_names_the_problem() -> None:
    schema = pa.schema([("event", pa.binary()), ("k", pa.float64())])
    check_schema(schema, None, None)
    for key, serializer in (("k", None), ("missing", None), (None, _Table())):
        with pytest.raises(pr.InvalidArgumentError):
            check_schema(schema, key, serializer)
    with pytest.raises(pr.InvalidArgumentError):
        check_schema(pa.schema([("event", pa.int32())]), None, None)
    for bad in ("", 5, "x" * 1025):
        with pytest.raises(pr.InvalidArgumentError):
            check_write_id(bad)


def test_write_log_records_transactions_under_races_and_refuses_stale_runs() -> None:
    cluster = InProcessCluster(container_count=2)
    try:
        with pytest.raises(pr.ScopeNotFoundError):
            WriteLog(cluster, "sc", "st")  # no scope: nothing created
        cluster.stream_manager().create_scope("sc")
        with pytest.raises(pr.KeyValueTableNotFoundError):
            WriteLog(cluster, "sc", "st", create=False)  # a task's open creates nothing
        log = WriteLog(cluster, "sc", "st")
        assert WRITE_LOG_TABLE in cluster.stream_manager().list_key_value_tables("sc")
        run = log.start("w", None)
        ids = [uuid.uuid4() for _ in range(20)]
        threads = [threading.Thread(target=log.add_txn, args=("w", run.run_id, t)) for t in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        record = log.get("w")
        assert record is not None and sorted(record.txn_ids()) == sorted(ids)
        with pytest.raises(pr.IllegalStateError):
            log.start("w", None)  # a second driver starting the same id
        newer = log.start("w", record)  # a new run takes over
        with pytest.raises(pr.IllegalStateError):
            log.add_txn("w", run.run_id, uuid.uuid4())  # the old run's tasks are refused
        assert log.get("w").state is WriteState.OPEN and log.get("w").run_id == newer.run_id
        assert WriteLog(cluster, "sc", "other").get("w") is None  # keyed per stream
        log.remove("w")
        assert log.get("w") is None
    finally:
        cluster.shutdown()


def test_write_tasks_batch_rows_per_key_and_keep_each_keys_order_and_every_row() -> None:
    """A write task's rows go to its transaction in per-key batches (a payload over the batch
    size alone, keyless rows batched too): every row once, each key's rows in order."""
    cluster = InProcessCluster(container_count=2)
    try:
        mgr = cluster.stream_manager()
        mgr.create_scope("sc")
        mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(4)))
        big = WRITE_BATCH_BYTES  # over the batch size once framed: written alone
        pending: list[tuple[str | None, bytes]] = []
        for n in range(3000):
            key = None if n % 7 == 0 else f"k{n % 5}"
            pad = "x" * (big if n in (10, 1500) else 50 + n % 13)
            pending.append((key, json.dumps({"k": key, "n": n, "p": pad}).encode()))
        with cluster.create_transactional_writer("sc", "st") as tw:
            txn = tw.begin_txn()
            assert _write_batched(txn, pending) == sum(len(p) for _, p in pending)
            txn.commit()
        got = [e.event for e in read_exactly(cluster, "sc", "st", len(pending))]
        assert sorted(e["n"] for e in got) == list(range(len(pending)))
        for key in {k for k, _ in pending} - {None}:  # keyless rows have no order
            mine = [e["n"] for e in got if e["k"] == key]
            assert mine == sorted(mine), f"key {key} out of order"
    finally:
        cluster.shutdown()


DAY_MS = 24 * 3600 * 1000


def test_write_log_expires_finished_records_after_the_retention_and_keeps_the_rest() -> None:
    cluster = InProcessCluster(container_count=2)
    try:
        cluster.stream_manager().create_scope("sc")
        log = WriteLog(cluster, "sc", "st", retention_s=3600.0)
        assert log.retention_s == 3600.0 and WriteLog(cluster, "sc", "st").retention_s == (
            WRITE_LOG_RETENTION_S
        )
        t0 = 1_800_000_000_000

        def finish(
            write_id: str, state: WriteState, at_ms: int, stream_log: WriteLog = log
        ) -> None:
            record = stream_log.start(write_id, stream_log.get(write_id))
            stream_log.update(write_id, lambda r: r.finished(state, at_ms))
            assert record.finished_ms is None

        finish("committed", WriteState.COMMITTED, t0)
        finish("aborted", WriteState.ABORTED, t0 + 1800_000)
        finish("elsewhere", WriteState.COMMITTED, t0, WriteLog(cluster, "sc", "other"))
        log.start("open", None)
        committing = log.start("committing", None)
        log.update("committing", lambda r: dataclasses.replace(r, state=WriteState.COMMITTING))
        legacy = WriteRecord("legacy", "run", WriteState.COMMITTED, events=3)  # no finished_ms
        raw = legacy.to_json().replace(b',"finished_ms":null', b"")
        assert b"finished_ms" not in raw
        log._table.put("st/legacy", raw)  # type: ignore[attr-defined]  # an older version's
        assert WriteRecord.from_json(raw).finished_ms is None

        assert log.expire(t0 + 3599_999) == 0  # nothing old enough; the legacy one is stamped
        assert log.get("legacy").finished_ms == t0 + 3599_999  # type: ignore[union-attr]
        assert log.expire(t0 + 3600_000) == 2  # the committed one, the other stream's too
        assert log.get("committed") is None
        assert WriteLog(cluster, "sc", "other").get("elsewhere") is None
        assert log.expire(t0 + 5400_000) == 1 and log.get("aborted") is None
        assert log.expire(t0 + 2 * 3600_000) == 1 and log.get("legacy") is None
        assert log.expire(t0 + 100 * DAY_MS) == 0  # unfinished records never expire
        assert log.get("open").state is WriteState.OPEN  # type: ignore[union-attr]
        assert log.get("committing").run_id == committing.run_id  # type: ignore[union-attr]
        # A write id reused after its record expired starts afresh: it writes again.
        assert log.start("committed", log.get("committed")).state is WriteState.OPEN
    finally:
        cluster.shutdown()


def test_write_log_expiry_never_loses_a_record_reused_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = InProcessCluster(container_count=1)
    try:
        cluster.stream_manager().create_scope("sc")
        log = WriteLog(cluster, "sc", "st", retention_s=1.0)
        log.start("w", None)
        log.update("w", lambda r: r.finished(WriteState.COMMITTED, 1000))
        table = log._table  # type: ignore[attr-defined]
        read_page = table.entries_page
        restarted = []

        def page_then_restart(position: bytes | None, limit: int | None = None) -> Any:
            page = read_page(position, limit)  # the expiry reads the finished record ...
            restarted.append(log.start("w", log.get("w")))  # ... a driver reuses the id
            return page

        with monkeypatch.context() as m:
            m.setattr(table, "entries_page", page_then_restart)
            assert log.expire(10_000_000) == 0  # its remove was conditional on the old version
        record = log.get("w")
        assert record is not None and record.run_id == restarted[0].run_id
        assert record.state is WriteState.OPEN
    finally:
        cluster.shutdown()


def test_write_log_expiry_does_bounded_work_per_step_and_sweeps_everything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(write_log, "EXPIRY_PAGE_ENTRIES", 7)
    monkeypatch.setattr(write_log, "EXPIRY_CHANGES_MAX", 3)
    cluster = InProcessCluster(container_count=1)
    try:
        cluster.stream_manager().create_scope("sc")
        log = WriteLog(cluster, "sc", "st", retention_s=1.0)
        for i in range(30):
            log.start(f"w{i}", None)
            log.update(f"w{i}", lambda r: r.finished(WriteState.ABORTED, 1000))
            log.start(f"open{i}", None)
        table = log._table  # type: ignore[attr-defined]
        read_page = table.entries_page
        pages: list[int] = []

        def counted(position: bytes | None, limit: int | None = None) -> Any:
            page, after = read_page(position, limit)
            pages.append(len(page))
            return page, after

        monkeypatch.setattr(table, "entries_page", counted)
        removed: list[int] = []
        while len(removed) < 100 and sum(removed) < 30:
            removed.append(log.expire(10_000))
        assert sum(removed) == 30 and max(removed) <= 3 and max(pages) <= 7
        assert all(log.get(f"w{i}") is None for i in range(30))
        assert all(log.get(f"open{i}") is not None for i in range(30))
        assert [e.key for e in table.iter_entries()].count(EXPIRY_POSITION_KEY) == 1
        # A position that is not this table's (say, of a table re-created) starts over.
        table.put(EXPIRY_POSITION_KEY, ((5).to_bytes(2, "big") + b"x").hex().encode())
        log.expire(10_000)
        table.put(EXPIRY_POSITION_KEY, b"not hex")
        log.expire(10_000)
    finally:
        cluster.shutdown()


def test_write_log_retention_must_be_finite_and_positive() -> None:
    for bad in (0, -1.0, float("nan"), float("inf"), True, "60", WRITE_LOG_RETENTION_S_MAX * 2):
        with pytest.raises(pr.InvalidArgumentError):
            WriteLog(None, "sc", "st", retention_s=bad)  # type: ignore[arg-type]  # checked first
    with pytest.raises(pr.InvalidArgumentError):
        WriteRecord("w", "r", WriteState.OPEN).finished(WriteState.OPEN)


def test_a_write_start_runs_an_expiry_step_and_an_expired_write_id_writes_again() -> None:
    cluster = InProcessCluster(container_count=1)
    try:
        mgr = cluster.stream_manager()
        mgr.create_scope("sc")
        mgr.create_stream("sc", "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
        log = WriteLog(cluster, "sc", "st")
        log.start("old", None)
        long_ago = int(time.time() * 1000) - int(WRITE_LOG_RETENTION_S * 1000) - 1
        log.update("old", lambda r: r.finished(WriteState.COMMITTED, long_ago))
        log.start("recent", None)
        log.update("recent", lambda r: r.finished(WriteState.COMMITTED))
        recent = WriteRun.begin(cluster, "sc", "st", "recent", 30.0)
        assert isinstance(recent, WriteStreamResult) and recent.outcome == "already-committed"
        assert log.get("old") is None  # that start's expiry step removed it
        again = WriteRun.begin(cluster, "sc", "st", "old", 30.0)
        assert isinstance(again, WriteRun)  # expired: a new run, which writes again
        again.abort(RuntimeError("test"))
        again.close()
        aborted = log.get("old")
        assert aborted is not None and aborted.state is WriteState.ABORTED
        assert aborted.finished_ms is not None and aborted.finished_ms > long_ago
    finally:
        cluster.shutdown()
