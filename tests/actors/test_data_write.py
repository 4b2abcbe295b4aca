"""``pr.data.write_stream`` on the shared local Ray: exactly once through Ray Data.

Checked (docs/pipelines.md): every row becomes one event, a routing key's events land
on one segment in the dataset's order; a failing task leaves nothing visible and every
transaction ABORTED; a write task whose worker is SIGKILLed after writing events into its
transaction is retried and the stream still holds each row once (the killed attempt's
transaction ABORTED); a ``write_id`` makes a second call a no-op and finishes a write whose
driver died between recording the commit and committing; bad input raises a typed error
before anything is written.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import ray

import pravega_ray as pr
from pravega_ray.constants import MAX_EVENT_SIZE_BYTES
from pravega_ray.data.write_log import WriteLog, WriteState

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


def _stream(cluster: Any, scope: str, segments: int = 3) -> str:
    mgr = cluster.stream_manager()
    mgr.create_scope(scope)
    mgr.create_stream(scope, "st", pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))
    return f"{scope}/st"


def _segments(cluster: Any, scope: str) -> dict[int, list[bytes]]:
    """Each segment's events in offset order (batch client, head to tail)."""
    bc = cluster.batch_client()
    return {
        r.segment_id: list(bc.read_segment(r)) for r in bc.segment_ranges(scope, "st") if r.length
    }


def _all(cluster: Any, scope: str) -> list[bytes]:
    return [e for events in _segments(cluster, scope).values() for e in events]


def _rows(n: int, keys: int = 5) -> list[dict[str, Any]]:
    return [{"event": f"k{i % keys}:{i}".encode(), "key": f"k{i % keys}", "n": i} for i in range(n)]


def _wait_status(txn: Any, status: pr.TxnStatus, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while txn.check_status() is not status:
        assert time.monotonic() < deadline, f"{txn} is {txn.check_status()}, not {status}"
        time.sleep(0.05)


def _assert_all_aborted(cluster: Any, scope: str, txn_ids: list[uuid.UUID]) -> None:
    with cluster.create_transactional_writer(scope, "st") as tw:
        for txn_id in txn_ids:
            _wait_status(tw.get_txn(txn_id), pr.TxnStatus.ABORTED)


class _JsonRows:
    """A tiny stand-in for a table serializer (arrow_schema / encode_table / decode_table)."""

    arrow_schema = pa.schema([("n", pa.int64()), ("tag", pa.string())])

    def serialize(self, event: Any) -> bytes:
        return json.dumps(event).encode()

    def deserialize(self, data: bytes) -> Any:
        return json.loads(data)

    def encode_table(self, table: pa.Table) -> list[bytes]:
        return [self.serialize(r) for r in table.select(self.arrow_schema.names).to_pylist()]

    def decode_table(self, payloads: Any) -> pa.Table:
        return pa.Table.from_pylist([self.deserialize(p) for p in payloads], self.arrow_schema)


class _FailingRows:
    """A row serializer that raises on the first row of a task's second block."""

    def __init__(self) -> None:
        self.count = 0

    def serialize(self, row: Any) -> bytes:
        self.count += 1
        if self.count == 51:
            raise pr.SerializationError(
                "row refused", data=None, segment=None, offset=None, key=None
            )
        return json.dumps(row).encode()

    def deserialize(self, data: bytes) -> Any:
        return json.loads(data)


class _KillingRows:
    """A row serializer that SIGKILLs its own worker on the first row of its second block,
    once (a marker file): the task's first block is written into its transaction by then."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.count = 0

    def serialize(self, row: Any) -> bytes:
        self.count += 1
        if self.count == 51 and not os.path.exists(self.marker):
            Path(self.marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return json.dumps(row).encode()

    def deserialize(self, data: bytes) -> Any:
        return json.loads(data)


def test_write_stream_every_row_once_keys_on_one_segment_in_order(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    target = _stream(cluster, unique_name)
    ds = ray.data.from_items(_rows(300), override_num_blocks=3)
    result = pr.data.write_stream(ds, target, routing_key_column="key", cluster=cluster)
    assert (result.outcome, result.events, result.transactions) == ("written", 300, 3)
    assert result.bytes == sum(len(r["event"]) for r in _rows(300))
    segments = _segments(cluster, unique_name)
    assert Counter(e for es in segments.values() for e in es) == Counter(
        r["event"] for r in _rows(300)
    )
    for events in segments.values():
        per_key: dict[str, list[int]] = {}
        for e in events:
            key, n = e.decode().split(":")
            per_key.setdefault(key, []).append(int(n))
        for key, ns in per_key.items():
            assert ns == sorted(ns), key  # the dataset's order
            assert all(
                key not in _keys(other) for other in segments.values() if other is not events
            )
    # A random write id's record is removed once committed.
    assert WriteLog(cluster, unique_name, "st").get(result.write_id) is None


def _keys(events: list[bytes]) -> set[str]:
    return {e.decode().split(":")[0] for e in events}


def test_write_stream_task_failure_leaves_nothing_and_aborts_all(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    target = _stream(cluster, unique_name)
    ds = ray.data.from_items([{"n": i} for i in range(200)], override_num_blocks=4)
    with pytest.raises(pr.SerializationError):
        pr.data.write_stream(
            ds,
            target,
            serializer=_FailingRows(),
            cluster=cluster,
            write_id="fails",
            min_rows_per_write=100,
        )
    record = WriteLog(cluster, unique_name, "st").get("fails")
    assert record is not None and record.state is WriteState.ABORTED and record.txns
    _assert_all_aborted(cluster, unique_name, record.txn_ids())
    assert _all(cluster, unique_name) == []


def test_write_stream_worker_killed_mid_write_retried_exactly_once(  # type: ignore[no-untyped-def]
    cluster, unique_name, tmp_path
) -> None:
    target = _stream(cluster, unique_name)
    marker = tmp_path / "killed"
    ds = ray.data.from_items(
        [{"n": i, "key": f"k{i % 7}"} for i in range(200)], override_num_blocks=4
    )
    result = pr.data.write_stream(
        ds,
        target,
        "key",
        _KillingRows(str(marker)),
        cluster=cluster,
        write_id="killed",
        min_rows_per_write=100,
    )
    assert marker.exists()  # the kill happened (in a write task's worker, not here)
    assert int(marker.read_text()) != os.getpid()
    assert (result.events, result.transactions) == (200, 2)
    events = [json.loads(e) for e in _all(cluster, unique_name)]
    assert sorted(e["n"] for e in events) == list(range(200))
    record = WriteLog(cluster, unique_name, "st").get("killed")
    assert record is not None and record.state is WriteState.COMMITTED
    killed = [uuid.UUID(t) for t in record.txns if t not in record.commit]
    assert len(killed) == 1  # the first attempt's transaction: never committed, aborted
    _assert_all_aborted(cluster, unique_name, killed)


def test_write_stream_write_id_is_idempotent_and_resumes_a_commit(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    target = _stream(cluster, unique_name, segments=2)
    rows = [{"n": i, "tag": f"t{i % 3}"} for i in range(60)]
    ds = ray.data.from_items(rows, override_num_blocks=2)
    first = pr.data.write_stream(ds, target, "tag", _JsonRows(), cluster=cluster, write_id="job/0")
    again = pr.data.write_stream(ds, target, "tag", _JsonRows(), cluster=cluster, write_id="job/0")
    assert first.outcome == "written" and again.outcome == "already-committed"
    assert (again.events, again.transactions) == (first.events, first.transactions) == (60, 2)
    assert sorted(json.loads(e)["n"] for e in _all(cluster, unique_name)) == list(range(60))

    # A driver that died after recording the commit of t1 and t2 (t3: a killed attempt),
    # having committed t1 only: the next run commits t2, aborts t3, writes nothing new.
    write_log = WriteLog(cluster, unique_name, "st")
    with cluster.create_transactional_writer(unique_name, "st") as tw:
        txns = [tw.begin_txn() for _ in range(3)]
        for i, txn in enumerate(txns):
            txn.write_event(json.dumps({"n": 100 + i, "tag": "r"}).encode(), "r")
            txn.flush()
        run = write_log.start("job/1", None)
        for txn in txns:
            write_log.add_txn("job/1", run.run_id, txn.txn_id)
        write_log.update(
            "job/1",
            lambda r: r.__class__(
                r.write_id, r.run_id, WriteState.COMMITTING, r.txns, r.txns[:2], 2, 40
            ),
        )
        txns[0].commit()
    resumed = pr.data.write_stream(
        ds, target, "tag", _JsonRows(), cluster=cluster, write_id="job/1"
    )
    assert (resumed.outcome, resumed.events, resumed.transactions) == ("resumed", 2, 2)
    ns = sorted(json.loads(e)["n"] for e in _all(cluster, unique_name))
    assert ns == [*range(60), 100, 101]
    _assert_all_aborted(cluster, unique_name, [txns[2].txn_id])


def test_write_stream_bad_input_raises_before_writing(cluster, unique_name) -> None:  # type: ignore[no-untyped-def]
    target = _stream(cluster, unique_name)
    good = ray.data.from_items([{"event": b"x", "key": "a"}])
    cases: list[tuple[type[Exception], Any, dict[str, Any]]] = [
        (pr.InvalidArgumentError, ray.data.from_items([{"payload": b"x"}]), {}),
        (pr.InvalidArgumentError, ray.data.from_items([{"event": 7}]), {}),
        (pr.InvalidArgumentError, good, {"routing_key_column": "nope"}),
        (
            pr.InvalidArgumentError,
            ray.data.from_items([{"event": b"x", "k": 1.5}]),
            {"routing_key_column": "k"},
        ),
        (pr.InvalidArgumentError, ray.data.from_items([{"x": 1}]), {"serializer": _JsonRows()}),
        (pr.InvalidArgumentError, good, {"serializer": _JsonRows}),
        (pr.InvalidArgumentError, good, {"write_id": ""}),
        (pr.InvalidArgumentError, good, {"lease_s": 0}),
        (pr.InvalidArgumentError, good, {"min_rows_per_write": 0}),
        (pr.InvalidArgumentError, [{"event": b"x"}], {}),
        (pr.InvalidNameError, good, {"scoped_stream": "no-slash"}),
        (pr.StreamNotFoundError, good, {"scoped_stream": f"{unique_name}/missing"}),
        (pr.ScopeNotFoundError, good, {"scoped_stream": f"{unique_name}x/st"}),
    ]
    for error, ds, kwargs in cases:
        kwargs.setdefault("scoped_stream", target)
        with pytest.raises(error):
            pr.data.write_stream(ds, cluster=cluster, **kwargs)
    # An event over the transaction limit fails its task; nothing becomes visible.
    big = ray.data.from_items([{"event": b"y"}, {"event": b"z" * (MAX_EVENT_SIZE_BYTES + 1)}])
    with pytest.raises(pr.EventTooLargeError):
        pr.data.write_stream(big, target, cluster=cluster)
    # An empty dataset writes nothing and succeeds.
    empty = pr.data.write_stream(good.limit(0), target, cluster=cluster)
    assert (empty.events, empty.transactions) == (0, 0)
    assert _all(cluster, unique_name) == []
    cluster.stream_manager().seal_stream(unique_name, "st")
    with pytest.raises(pr.StreamSealedError):
        pr.data.write_stream(good, target, cluster=cluster)
