"""Spark reads what Pravega's official client (``pravega`` 0.3.8) wrote through the endpoints
(issue 25, item 3): ``pr.spark.read_stream`` returns its events byte for byte, each routing
key's events in the order written."""

from __future__ import annotations

import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from pravega_ray.spark import read_stream
from tests.endpoints import session_endpoints
from tests.wire.official_client import client_runner, install_client


def test_spark_reads_the_official_writer_s_events_in_key_order(
    cluster: Any, cluster_data_dir: Path, spark: Any
) -> None:
    with session_endpoints(cluster_data_dir, 4) as (joined, described):
        run = client_runner(install_client(), described["controller"])
        scope = "s" + uuid.uuid4().hex[:10]
        run(
            f"""
            manager.create_scope("{scope}")
            manager.create_stream("{scope}", "s", 3)
            writer = manager.create_writer("{scope}", "s")
            for i in range(600):
                writer.write_event(f"key-{{i % 12}}:{{i:05d}}", f"key-{{i % 12}}")
            writer.flush()
            """
        )
        rows = read_stream(spark, f"{scope}/s", cluster=joined).collect()
    expected = [f"key-{i % 12}:{i:05d}".encode() for i in range(600)]
    assert sorted(bytes(r.event) for r in rows) == sorted(expected)
    by_key: dict[bytes, list[bytes]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: (r.segment_id, r.offset)):
        by_key[bytes(r.event).split(b":")[0]].append(bytes(r.event))
    for key, events in by_key.items():
        assert events == [e for e in expected if e.startswith(key + b":")]
    assert len({r.segment_id for r in rows}) == 3  # Pravega's hash spread the 12 keys
