"""The segment calls a transaction makes for all its parents at once, from one thread.

``SegmentHelper.seal_and_merge``, the commit's one round trip per source, every parent from
one thread: the seals sent together and each merge right behind them. The merges land in
order, a repeat skips what was merged, a merge that overtook its seal waits for it and is
made again, a failed merge stops that parent's later ones (not the other parents'), and a
call whose outcome was unknown is repeated to the same end."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.errors import (
    SegmentNotFoundError,
    SegmentSealedError,
    SegmentStoreUnavailableError,
)
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import stream_segment_name, transaction_segment_name
from tests.unit.controller.test_transactions import append, read_all

pytestmark = pytest.mark.timeout(60)

TARGET = stream_segment_name("sc", "st", 0)


@pytest.fixture
def cluster() -> Iterator[InProcessCluster]:
    c = InProcessCluster(container_count=1)
    yield c
    c.shutdown()


class Client:
    """The cluster's client, with seals that can be held back and merges that can fail."""

    def __init__(self, cluster: InProcessCluster) -> None:
        self._client = SegmentStoreClient(cluster)
        self.invoker = self._client.invoker
        self.seal_delay_s = 0.0
        self.merges: list[str] = []
        self.fail_merges = 0
        self.fail_deletes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def seal(self, segment: str) -> Future[int]:
        if not self.seal_delay_s:
            return self._client.seal(segment)
        held: Future[int] = Future()

        def later() -> None:
            time.sleep(self.seal_delay_s)
            try:
                held.set_result(self._client.seal(segment).result(10))
            except BaseException as e:
                held.set_exception(e)

        threading.Thread(target=later, daemon=True).start()
        return held

    def delete_segment(self, segment: str) -> Future[None]:
        if self.fail_deletes:
            self.fail_deletes -= 1
            failed: Future[None] = Future()
            failed.set_exception(SegmentStoreUnavailableError("restarting, outcome unknown"))
            return failed
        return self._client.delete_segment(segment)

    def merge(self, target: str, source: str) -> Future[int]:
        self.merges.append(source)
        if self.fail_merges:
            self.fail_merges -= 1
            failed: Future[int] = Future()
            failed.set_exception(SegmentStoreUnavailableError("restarting, outcome unknown"))
            return failed
        return self._client.merge(target, source)


def _setup(cluster: InProcessCluster, count: int) -> tuple[Client, SegmentHelper, list[str]]:
    client = Client(cluster)
    helper = SegmentHelper(client, attempts_max=3, pause_s=0.01, call_timeout_s=10)  # type: ignore[arg-type]
    return client, helper, _sources(cluster, helper, TARGET, count)


def _sources(
    cluster: InProcessCluster, helper: SegmentHelper, target: str, count: int
) -> list[str]:
    """``target`` created holding ``T;``, and ``count`` transaction segments of it holding
    ``<n>``."""
    helper.create_segment(target)
    append(cluster, target, b"T;")
    sources = []
    for n in range(count):
        source = transaction_segment_name(target, uuid.uuid4().bytes)
        helper.create_transaction_segment(source)
        append(cluster, source, f"<{n}>".encode())
        sources.append(source)
    return sources


def test_sources_are_merged_in_order_and_a_repeat_skips_the_merged(
    cluster: InProcessCluster,
) -> None:
    client, helper, sources = _setup(cluster, 3)
    helper.seal_and_merge({TARGET: sources})
    assert read_all(cluster, TARGET) == b"T;<0><1><2>"
    assert client.merges == sources  # one merge each: none overtook its seal
    helper.seal_and_merge({TARGET: sources})  # a processor's repeat: all merged already
    assert read_all(cluster, TARGET) == b"T;<0><1><2>"


def test_a_merge_that_overtook_its_seal_waits_for_it_and_is_made_again(
    cluster: InProcessCluster,
) -> None:
    client, helper, sources = _setup(cluster, 2)
    client.seal_delay_s = 0.2  # every merge arrives before its seal
    helper.seal_and_merge({TARGET: sources})
    assert read_all(cluster, TARGET) == b"T;<0><1>"
    assert client.merges[:2] == [sources[0], sources[0]]  # refused, then made again
    assert client.merges[2:] in ([sources[1]], [sources[1], sources[1]])  # its seal may be in


def test_an_unknown_outcome_is_repeated_and_a_refused_merge_stops_the_later_ones(
    cluster: InProcessCluster,
) -> None:
    client, helper, sources = _setup(cluster, 2)
    client.fail_merges = 1  # the first merge's outcome is unknown: the whole call again
    helper.seal_and_merge({TARGET: sources})
    assert read_all(cluster, TARGET) == b"T;<0><1>"
    more = [transaction_segment_name(TARGET, uuid.uuid4().bytes) for _ in range(2)]
    for n, source in enumerate(more):
        helper.create_transaction_segment(source)
        append(cluster, source, f"[{n}]".encode())
    helper.seal_segment(TARGET)  # the parent sealed: the first merge is refused
    with pytest.raises(SegmentSealedError):
        helper.seal_and_merge({TARGET: more})
    assert client.merges[-1] == more[0]  # the second was never tried
    assert read_all(cluster, TARGET) == b"T;<0><1>"


def test_parents_go_side_by_side_and_one_refused_stops_only_its_own_merges(
    cluster: InProcessCluster,
) -> None:
    client, helper, first = _setup(cluster, 2)
    targets = [stream_segment_name("sc", "st", n) for n in (1, 2)]
    second, third = (_sources(cluster, helper, t, 2) for t in targets)
    helper.seal_segment(targets[0])  # its merges are refused
    with pytest.raises(SegmentSealedError):
        helper.seal_and_merge({TARGET: first, targets[0]: second, targets[1]: third})
    assert read_all(cluster, TARGET) == b"T;<0><1>"
    assert read_all(cluster, targets[0]) == b"T;"
    assert read_all(cluster, targets[1]) == b"T;<0><1>"
    assert second[0] in client.merges and second[1] not in client.merges  # stopped there


def test_transaction_segments_are_created_and_deleted_together_idempotently(
    cluster: InProcessCluster,
) -> None:
    client, helper, existing = _setup(cluster, 1)
    names = [*existing, *(transaction_segment_name(TARGET, uuid.uuid4().bytes) for _ in range(3))]
    helper.create_transaction_segments(names)  # one exists already: fine
    helper.create_transaction_segments(names)  # a repeat: fine
    assert read_all(cluster, names[0]) == b"<0>"  # the existing one untouched
    assert all(read_all(cluster, n) == b"" for n in names[1:])
    client.fail_deletes = 1  # one outcome unknown: the set again
    helper.delete_segments([*names, transaction_segment_name(TARGET, b"x" * 16)])  # one absent
    for name in names:
        with pytest.raises(SegmentNotFoundError):
            read_all(cluster, name)
