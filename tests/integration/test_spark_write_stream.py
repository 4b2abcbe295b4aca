"""A Spark DataFrame written into a stream exactly once: each partition by its executor
into one transaction, committed together by the driver; a partition task retried by Spark
after writing leaves its first transaction uncommitted (aborted); a bad row raises typed."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from pyspark import cloudpickle

import pravega_ray as pr
from pravega_ray.data.datasink import PartitionResult
from pravega_ray.data.write_log import WriteLog, WriteState
from pravega_ray.spark.stream_writer import _PartitionWriter, _write_dataframe

pytestmark = [pytest.mark.ray, pytest.mark.spark, pytest.mark.timeout(300)]


def test_spark_write_stream_writes_a_dataframe_exactly_once(cluster, spark, unique_name) -> None:  # type: ignore[no-untyped-def]
    mgr = cluster.stream_manager()
    mgr.create_scope(unique_name)
    mgr.create_stream(unique_name, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    rows = [(f"k{i % 4}", f"k{i % 4}:{i}") for i in range(500)]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), "key string, event string")
    target = f"{unique_name}/st"

    result = pr.spark.write_stream(df, target, "key", cluster=cluster, write_id="batch-0")
    again = pr.spark.write_stream(df, target, "key", cluster=cluster, write_id="batch-0")

    assert (result.outcome, result.events) == ("written", 500)
    assert (again.outcome, again.events) == ("already-committed", 500)
    bc = cluster.batch_client()
    segments = [list(bc.read_segment(r)) for r in bc.segment_ranges(unique_name, "st")]
    assert Counter(e for s in segments for e in s) == Counter(e.encode() for _, e in rows)
    for events in segments:  # one key's events: one segment, in the DataFrame's order per key
        per_key: dict[str, list[int]] = {}
        for e in events:
            key, n = e.decode().split(":")
            per_key.setdefault(key, []).append(int(n))
        assert all(ns == sorted(ns) for ns in per_key.values())
    record = WriteLog(cluster, unique_name, "st").get("batch-0")
    assert record is not None and record.state is WriteState.COMMITTED
    with pytest.raises(pr.InvalidArgumentError):
        pr.spark.write_stream(df.select("key"), target, cluster=cluster)


class _FailsOnceAfterWrite(_PartitionWriter):
    """Fails the first attempt of partition 1 after its rows are in its transaction (a marker
    file, shared by the executor's Python workers, says it happened)."""

    marker = ""

    def after_write(self, result: PartitionResult) -> None:
        if result.task_index == 1 and not os.path.exists(self.marker):
            Path(self.marker).write_text(result.txn_id or "")
            raise RuntimeError("partition task failing after its write")


def test_spark_partition_failing_after_its_write_is_retried_exactly_once(  # type: ignore[no-untyped-def]
    cluster, spark, unique_name, tmp_path
) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope(unique_name)
    mgr.create_stream(unique_name, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    rows = [(f"k{i % 3}", f"{i}") for i in range(300)]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), "key string, event string")
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the class, to the executors
    writer = type("FailsOnce", (_FailsOnceAfterWrite,), {"marker": str(tmp_path / "failed")})

    result = _write_dataframe(
        df,
        f"{unique_name}/st",
        "key",
        serializer=None,
        cluster=cluster,
        write_id="retried",
        lease_s=60.0,
        min_rows_per_write=None,
        partition_writer=writer,
    )

    failed_txn = (tmp_path / "failed").read_text()  # the first attempt wrote, then failed
    assert (result.outcome, result.events, result.transactions) == ("written", 300, 2)
    bc = cluster.batch_client()
    events = [e for r in bc.segment_ranges(unique_name, "st") for e in bc.read_segment(r)]
    assert sorted(int(e) for e in events) == list(range(300))  # each row once
    record = WriteLog(cluster, unique_name, "st").get("retried")
    assert record is not None and record.state is WriteState.COMMITTED
    assert failed_txn in record.txns and failed_txn not in record.commit
    with cluster.create_transactional_writer(unique_name, "st") as tw:
        deadline = time.monotonic() + 30
        txn = tw.get_txn(uuid.UUID(failed_txn))
        while txn.check_status() is not pr.TxnStatus.ABORTED:
            assert time.monotonic() < deadline, txn.check_status()
            time.sleep(0.05)


def test_spark_write_stream_bad_rows_raise_typed_and_write_nothing(  # type: ignore[no-untyped-def]
    cluster, spark, unique_name
) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope(unique_name)
    mgr.create_stream(unique_name, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
    rows = [("a", "x"), ("b", None), ("c", "z")]  # a null event: InvalidArgumentError
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), "key string, event string")
    with pytest.raises(pr.InvalidArgumentError, match="nulls"):
        pr.spark.write_stream(df, f"{unique_name}/st", "key", cluster=cluster, write_id="bad")
    record = WriteLog(cluster, unique_name, "st").get("bad")
    assert record is not None and record.state is WriteState.ABORTED
    bc = cluster.batch_client()
    assert [e for r in bc.segment_ranges(unique_name, "st") for e in bc.read_segment(r)] == []
    with pytest.raises(pr.InvalidArgumentError):
        pr.spark.write_stream(df, f"{unique_name}/st", 7, cluster=cluster)  # type: ignore[arg-type]
    with pytest.raises(pr.InvalidArgumentError):
        pr.spark.write_stream([], f"{unique_name}/st", cluster=cluster)  # type: ignore[arg-type]
