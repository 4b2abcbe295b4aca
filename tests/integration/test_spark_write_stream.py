"""A Spark DataFrame written into a stream exactly once (RayDP -> Ray Data -> transactions)."""

from __future__ import annotations

from collections import Counter

import pytest

import pravega_ray as pr
from pravega_ray.data.write_log import WriteLog, WriteState

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
