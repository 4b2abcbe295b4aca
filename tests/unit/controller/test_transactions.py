"""Transactions on the controller: create, ping, commit, abort and status, with the commit
and abort event processors of an in-process cluster (real containers on memory backends).
Transaction segments are written with plain appends (the client's transactional writer is
tested with the client)."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable

import pytest

import pravega_ray as pr
from pravega_ray.constants import TXN_LEASE_S_MAX
from pravega_ray.contracts.records import KeyHash, TxnInfo, TxnStatus
from pravega_ray.controller.stream_records import StreamRecords
from pravega_ray.controller.stream_transaction_metadata_tasks import new_transaction_id
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import transaction_segment_name
from tests.checks import stable_id

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    c = InProcessCluster(container_count=3)
    yield c
    c.shutdown()


def make_stream(cluster: InProcessCluster, segments: int = 2, name: str = "st") -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope("sc")
    assert mgr.create_stream("sc", name, pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments)))


def make_stream_named(cluster: InProcessCluster, name: str) -> None:
    config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(1))
    assert cluster.stream_manager().create_stream("sc", name, config)


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def append(cluster: InProcessCluster, segment: str, data: bytes) -> None:
    cluster.segments.append_conditional(segment, data).result(10)


def read_all(cluster: InProcessCluster, segment: str) -> bytes:
    length = cluster.segments.get_info(segment).result(10).length
    out = b""
    while len(out) < length:
        out += cluster.segments.read(segment, len(out), length - len(out), 0.0).result(10).data
    return out


def write_txn(cluster: InProcessCluster, txn: TxnInfo, tag: bytes) -> dict[str, bytes]:
    """Append ``tag + parent name`` to the transaction's segment on every parent."""
    out = {}
    for parent in txn.segments:
        data = tag + b":" + parent.name.encode()
        append(cluster, transaction_segment_name(parent.name, txn.txn_id.bytes), data)
        out[parent.name] = data
    return out


def status(cluster: InProcessCluster, txn: TxnInfo) -> TxnStatus:
    return cluster._controller.check_transaction_status("sc", "st", txn.txn_id)


def test_create_gives_one_transaction_segment_per_active_segment(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 3)
    txn = cluster._controller.create_transaction("sc", "st", 30.0)
    assert isinstance(txn.txn_id, uuid.UUID) and txn.status is TxnStatus.OPEN
    assert txn.epoch == 0 and len(txn.segments) == 3
    assert txn.lease_deadline_ms <= txn.max_deadline_ms
    for parent in txn.segments:
        name = transaction_segment_name(parent.name, txn.txn_id.bytes)
        assert cluster.segments.get_info(name).result(10).length == 0
    assert cluster._controller.list_transactions("sc", "st") == {txn.txn_id: TxnStatus.OPEN}
    assert cluster._controller.get_transaction("sc", "st", txn.txn_id) == txn


def test_a_transaction_carries_its_streams_routing_rule(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster)
    controller = cluster.core
    txn = controller.create_transaction("sc", "st", 30.0)
    assert txn.key_hash is KeyHash.PRAVEGA
    assert controller.get_transaction("sc", "st", txn.txn_id).key_hash is KeyHash.PRAVEGA
    # A stream whose record has no rule (created before streams recorded one): legacy.
    make_stream_named(cluster, "old")
    key = StreamRecords.key("sc", "old")
    record = cluster.metadata.get(key)
    old = {k: v for k, v in record.value.items() if k != "key_hash"}
    cluster.metadata.put(key, old, record.version)
    txn = controller.create_transaction("sc", "old", 30.0)
    assert txn.key_hash is KeyHash.LEGACY
    assert controller.get_transaction("sc", "old", txn.txn_id).key_hash is KeyHash.LEGACY


def test_a_transaction_id_carries_its_epoch_and_a_low_half_never_negative(cluster) -> None:  # type: ignore[no-untyped-def]
    """As Pravega's do: its clients read the epoch back from the top 32 bits, and the Rust
    client (the official Python client's core) sign-extends a negative low half into the
    high one, naming transaction segments that do not exist (its writer panicked on about
    half the transactions: tests/wire)."""
    make_stream(cluster, 1)
    cluster._controller.scale_stream("sc", "st", [0], [(0.0, 0.5), (0.5, 1.0)])
    wait_for(lambda: cluster._controller.get_stream_info("sc", "st").epoch == 1)
    for _ in range(64):
        txn = cluster._controller.create_transaction("sc", "st", 30.0)
        assert txn.txn_id.int >> 96 == txn.epoch == 1
        assert txn.txn_id.int & (1 << 63) == 0
    with pytest.raises(pr.InvalidArgumentError):
        new_transaction_id(2**32)


def test_commit_merges_after_what_was_appended_before(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    txn = cluster._controller.create_transaction("sc", "st", 30.0)
    for parent in txn.segments:
        append(cluster, parent.name, b"before;")
    written = write_txn(cluster, txn, b"T")
    assert cluster._controller.commit_transaction("sc", "st", txn.txn_id) in (
        TxnStatus.COMMITTING,
        TxnStatus.COMMITTED,
    )
    wait_for(lambda: status(cluster, txn) is TxnStatus.COMMITTED)
    for parent in txn.segments:
        assert read_all(cluster, parent.name) == b"before;" + written[parent.name]
    # A repeat is a no-op answering the status; an abort now is refused.
    assert cluster._controller.commit_transaction("sc", "st", txn.txn_id) is TxnStatus.COMMITTED
    with pytest.raises(pr.TxnFailedError):
        cluster._controller.abort_transaction("sc", "st", txn.txn_id)
    assert cluster._controller.list_transactions("sc", "st") == {}
    ended = cluster._controller.get_transaction("sc", "st", txn.txn_id)
    assert ended.status is TxnStatus.COMMITTED and ended.segments == txn.segments


def test_abort_deletes_the_segments_and_commit_then_fails(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 2)
    txn = cluster._controller.create_transaction("sc", "st", 30.0)
    write_txn(cluster, txn, b"T")
    assert cluster._controller.abort_transaction("sc", "st", txn.txn_id) in (
        TxnStatus.ABORTING,
        TxnStatus.ABORTED,
    )
    wait_for(lambda: status(cluster, txn) is TxnStatus.ABORTED)
    for parent in txn.segments:
        assert read_all(cluster, parent.name) == b""
        with pytest.raises(pr.SegmentNotFoundError):
            cluster.segments.get_info(
                transaction_segment_name(parent.name, txn.txn_id.bytes)
            ).result(10)
    assert cluster._controller.abort_transaction("sc", "st", txn.txn_id) is TxnStatus.ABORTED
    with pytest.raises(pr.TxnFailedError):
        cluster._controller.commit_transaction("sc", "st", txn.txn_id)
    with pytest.raises(pr.TxnFailedError):
        cluster._controller.ping_transaction("sc", "st", txn.txn_id, 10.0)


def test_ping_moves_the_lease_clamped_to_the_maximum(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    txn = cluster._controller.create_transaction("sc", "st", 1.0)
    deadline = cluster._controller.ping_transaction("sc", "st", txn.txn_id, TXN_LEASE_S_MAX)
    assert txn.lease_deadline_ms < deadline <= txn.max_deadline_ms
    info = cluster._controller.get_transaction("sc", "st", txn.txn_id)
    assert info.lease_deadline_ms == deadline


BAD_LEASES = [0, -1.0, math.nan, math.inf, True, "30", None, TXN_LEASE_S_MAX + 1]


@pytest.mark.parametrize("lease", BAD_LEASES, ids=stable_id)
def test_bad_leases_are_refused_and_nothing_is_stored(cluster, lease: object) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    txn = cluster._controller.create_transaction("sc", "st", 30.0)
    with pytest.raises(pr.InvalidArgumentError):
        cluster._controller.create_transaction("sc", "st", lease)  # type: ignore[arg-type]
    with pytest.raises(pr.InvalidArgumentError):
        cluster._controller.ping_transaction("sc", "st", txn.txn_id, lease)  # type: ignore[arg-type]
    assert cluster._controller.list_transactions("sc", "st") == {txn.txn_id: TxnStatus.OPEN}
    assert cluster._controller.get_transaction("sc", "st", txn.txn_id) == txn


@pytest.mark.parametrize(
    "txn_id", ["0" * 32, 7, None, b"x" * 16, "d83663c4f8f04773a74a25501760a9fd"], ids=stable_id
)
def test_ids_that_are_not_uuids_are_refused(cluster, txn_id: object) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    calls = [
        lambda: cluster._controller.ping_transaction("sc", "st", txn_id, 1.0),
        lambda: cluster._controller.commit_transaction("sc", "st", txn_id),
        lambda: cluster._controller.abort_transaction("sc", "st", txn_id),
        lambda: cluster._controller.check_transaction_status("sc", "st", txn_id),
        lambda: cluster._controller.get_transaction("sc", "st", txn_id),
    ]
    for call in calls:
        with pytest.raises(pr.InvalidArgumentError):
            call()


def test_unknown_transactions_streams_and_names(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    unknown = uuid.uuid4()
    c = cluster._controller
    for call in (c.commit_transaction, c.abort_transaction, c.check_transaction_status):
        with pytest.raises(pr.TxnNotFoundError):
            call("sc", "st", unknown)
    with pytest.raises(pr.TxnNotFoundError):
        c.ping_transaction("sc", "st", unknown, 1.0)
    make_stream_named(cluster, "other")
    elsewhere = c.create_transaction("sc", "other", 10.0)
    with pytest.raises(pr.TxnNotFoundError):  # an id of another stream
        c.commit_transaction("sc", "st", elsewhere.txn_id)
    assert c.check_transaction_status("sc", "other", elsewhere.txn_id) is TxnStatus.OPEN
    with pytest.raises(pr.StreamNotFoundError):
        c.create_transaction("sc", "nope", 1.0)
    with pytest.raises(pr.ScopeNotFoundError):
        c.create_transaction("nope", "st", 1.0)
    with pytest.raises(pr.InvalidNameError):
        c.create_transaction("sc", "bad/name", 1.0)
    with pytest.raises(pr.InvalidNameError):
        c.list_transactions("sc", "")


def test_create_on_a_sealed_stream_is_refused(cluster) -> None:  # type: ignore[no-untyped-def]
    make_stream(cluster, 1)
    cluster.stream_manager().seal_stream("sc", "st")
    with pytest.raises(pr.StreamSealedError):
        cluster._controller.create_transaction("sc", "st", 10.0)
    assert cluster._controller.list_transactions("sc", "st") == {}


def test_a_transaction_whose_completed_record_is_written_is_committed_to_every_call(
    cluster: InProcessCluster,
) -> None:
    """The commit processor ends a transaction with two writes: the completed record, then the
    active record's removal; ``commit()`` answers COMMITTED from the first. Between the two,
    every call must say COMMITTED too (``check_status`` said COMMITTING from the active record:
    found by the Ray test of writers committing while a controller instance dies, once writes
    waited for the instances' watchers and the gap between the two writes grew)."""
    make_stream(cluster)
    cluster.commit_processor.request_stop()
    cluster.commit_processor.stop()  # the commit stays COMMITTING: the records are ours
    controller = cluster._controller
    txn = controller.create_transaction("sc", "st", 30.0)
    assert controller.commit_transaction("sc", "st", txn.txn_id) is TxnStatus.COMMITTING
    key = f"completedtxn/sc/st/{txn.txn_id.hex}"
    now = int(time.time() * 1000)
    cluster.metadata.put(key, {"status": "committed", "epoch": 0, "completed_ms": now}, None)
    assert controller.check_transaction_status("sc", "st", txn.txn_id) is TxnStatus.COMMITTED
    assert controller.get_transaction("sc", "st", txn.txn_id).status is TxnStatus.COMMITTED
    assert controller.commit_transaction("sc", "st", txn.txn_id) is TxnStatus.COMMITTED
    with pytest.raises(pr.TxnFailedError):
        controller.abort_transaction("sc", "st", txn.txn_id)
