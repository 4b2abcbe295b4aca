"""The segment calls a transaction makes for all its parents at once.

``SegmentStoreService.seal_and_merge`` (one call per container: every source sealed, then
each target's merges in order) and ``SegmentHelper.seal_and_merge`` over it: the merges
land in order, a repeat skips what was merged, a failed merge stops that target's later
ones (not the other targets'), a call whose outcome was unknown is repeated to the same
end, and bad arguments change nothing. ``create_transaction_segments`` and
``delete_segments``: sent together, idempotent."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import Any

import pytest

from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.errors import (
    InvalidArgumentError,
    PravegaError,
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


def _unknown() -> Future[Any]:
    failed: Future[Any] = Future()
    failed.set_exception(SegmentStoreUnavailableError("restarting, outcome unknown"))
    return failed


class Client:
    """The cluster's client, counting the merge calls; calls can be made to fail once with
    an unknown outcome (as a container restarting does)."""

    def __init__(self, cluster: InProcessCluster) -> None:
        self._client = SegmentStoreClient(cluster)
        self.invoker = self._client.invoker
        self.calls = 0
        self.fail_merges = 0
        self.fail_deletes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def seal_and_merge(
        self, target: str, sources: Sequence[str], more: Sequence[tuple[str, Sequence[str]]] = ()
    ) -> Future[list[PravegaError | None]]:
        self.calls += 1
        if self.fail_merges:
            self.fail_merges -= 1
            self._client.seal_and_merge(target, sources, more).result(10)  # done, then lost
            return _unknown()
        return self._client.seal_and_merge(target, sources, more)

    def delete_segment(self, segment: str) -> Future[None]:
        if self.fail_deletes:
            self.fail_deletes -= 1
            return _unknown()
        return self._client.delete_segment(segment)


def _helper(cluster: InProcessCluster) -> tuple[Client, SegmentHelper]:
    client = Client(cluster)
    helper = SegmentHelper(
        client,  # type: ignore[arg-type]
        attempts_max=3,
        pause_s=0.01,
        call_timeout_s=10,
        container_count=cluster.container_count,
    )
    return client, helper


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
        helper.create_transaction_segments([source])
        append(cluster, source, f"<{n}>".encode())
        sources.append(source)
    return sources


def test_sources_are_merged_in_order_and_a_repeat_skips_the_merged(
    cluster: InProcessCluster,
) -> None:
    client, helper = _helper(cluster)
    sources = _sources(cluster, helper, TARGET, 3)
    helper.seal_and_merge({TARGET: sources})
    assert read_all(cluster, TARGET) == b"T;<0><1><2>"
    helper.seal_and_merge({TARGET: sources})  # a processor's repeat: all merged already
    assert read_all(cluster, TARGET) == b"T;<0><1><2>"
    for source in sources:
        with pytest.raises(SegmentNotFoundError):
            read_all(cluster, source)
    assert client.calls == 2


def test_targets_of_one_container_go_in_one_call_and_a_refused_one_stops_only_itself(
    cluster: InProcessCluster,
) -> None:
    client, helper = _helper(cluster)
    targets = [TARGET, *(stream_segment_name("sc", "st", n) for n in (1, 2))]
    first, second, third = (_sources(cluster, helper, t, 2) for t in targets)
    helper.seal_segment(targets[1])  # its merges are refused
    with pytest.raises(SegmentSealedError):
        helper.seal_and_merge({targets[0]: first, targets[1]: second, targets[2]: third})
    assert client.calls == 1  # one container: one call for the three
    assert read_all(cluster, targets[0]) == b"T;<0><1>"
    assert read_all(cluster, targets[1]) == b"T;"
    assert read_all(cluster, targets[2]) == b"T;<0><1>"
    assert read_all(cluster, second[1]) == b"<1>"  # never tried: still there (sealed)


def test_an_unknown_outcome_is_repeated_to_the_same_end(cluster: InProcessCluster) -> None:
    client, helper = _helper(cluster)
    sources = _sources(cluster, helper, TARGET, 2)
    client.fail_merges = 1  # merged, but the answer was lost: the whole call again
    helper.seal_and_merge({TARGET: sources})
    assert read_all(cluster, TARGET) == b"T;<0><1>"
    assert client.calls == 2


def test_the_container_skips_sources_gone_or_listed_twice_and_refuses_bad_arguments(
    cluster: InProcessCluster,
) -> None:
    _, helper = _helper(cluster)
    sources = _sources(cluster, helper, TARGET, 2)
    client = SegmentStoreClient(cluster)
    missing = transaction_segment_name(TARGET, b"x" * 16)
    outcomes = client.seal_and_merge(TARGET, [sources[0], missing, sources[0], sources[1]])
    assert outcomes.result(10) == [None]
    assert read_all(cluster, TARGET) == b"T;<0><1>"
    other = stream_segment_name("sc", "st", 1)
    more = _sources(cluster, helper, other, 1)
    for bad in (
        (TARGET, "not a list", ()),
        (TARGET, [b"bytes"], ()),
        (TARGET, [], [(7, [])]),
        (TARGET, [], [(other,)]),
        (TARGET, [], [(other, more, "extra")]),
        (TARGET, [], "not a list"),
    ):
        with pytest.raises(InvalidArgumentError):
            client.seal_and_merge(*bad).result(10)  # type: ignore[arg-type]
    assert read_all(cluster, other) == b"T;" and read_all(cluster, more[0]) == b"<0>"


def test_transaction_segments_are_created_and_deleted_together_idempotently(
    cluster: InProcessCluster,
) -> None:
    client, helper = _helper(cluster)
    existing = _sources(cluster, helper, TARGET, 1)
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
