"""The Ray-free parts of ``pr.data.write_stream``: rows -> events (``write_rows``) and the
write record (``write_log``) on an in-process cluster."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pyarrow as pa
import pytest

import pravega_ray as pr
from pravega_ray.constants import MAX_EVENT_SIZE_BYTES
from pravega_ray.data.datasink import WRITE_BATCH_BYTES, _write_batched
from pravega_ray.data.write_log import WRITE_LOG_TABLE, WriteLog, WriteState, check_write_id
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
