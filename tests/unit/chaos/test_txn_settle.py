"""The chaos load's transaction settling must not keep alive what it waits to see end.

Run p (seed 20261131) reported "transaction w0t13 (unknown) still OPEN 60s after the load
stopped": settling asked through ``get_txn`` on a live writer, which pings every open
transaction it hands out, so the lease it waited to run out never did. On an in-process
cluster (its transaction timer aborts expired leases)."""

from __future__ import annotations

import time

import pytest

import pravega_ray as pr
from chaos.load import SCOPE, TXN_STREAM, TxnWriters
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(120)


def test_an_open_transaction_whose_writer_closed_is_seen_aborted() -> None:
    cluster = InProcessCluster(container_count=2)
    try:
        mgr = cluster.stream_manager()
        mgr.create_scope(SCOPE)
        mgr.create_stream(SCOPE, TXN_STREAM, pr.StreamConfiguration(pr.ScalingPolicy.fixed(1)))
        txns = TxnWriters(cluster, 1, writers=0, every_s=3600.0)
        # A lease longer than a writer's ping interval (30 s / 3): a settling writer that
        # pinged it would keep it open past the wait.
        writer = cluster.create_transactional_writer(SCOPE, TXN_STREAM, lease_s=11.0)
        txn = writer.begin_txn()
        txn.write_event(b"x")
        writer.close()  # open, and nobody pings it any more
        txns._record("t0", 1, "unknown", txn.txn_id)
        started = time.monotonic()
        txns.settle(wait_s=25.0)
        assert txns.problems == []
        assert [o.status for o in txns.outcomes] == ["aborted"]
        assert time.monotonic() - started < 20  # the lease (11 s) ran out, then the timer
        txns.stop()
    finally:
        cluster.shutdown()
