"""The controller's calls to segment containers (Pravega's ``SegmentHelper``).

One implementation of the controller's ``SegmentStoreAdmin`` needs, over the
segment store's typed client
(:class:`~pravega_ray.contracts.segment_store_service.SegmentStoreClient`), for the Ray cluster
and the in-process one alike. Workflows are idempotent and must not be left half
done, so a call whose outcome is unknown (the container is restarting:
:class:`RetriableError`) is repeated, ``attempts_max`` times at most, ``pause_s``
apart; any other error reaches the workflow.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from pravega_ray.constants import CONTAINER_CALL_ATTEMPTS_MAX
from pravega_ray.contracts.attributes import AttributeUpdate
from pravega_ray.contracts.segment_store import ReadResult, SegmentRole
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.errors import (
    ConditionalUpdateError,
    PravegaError,
    RetriableError,
    SegmentExistsError,
    SegmentNotFoundError,
)
from pravega_ray.naming import container_for_segment
from pravega_ray.retry import repeat_while
from pravega_ray.segmentstore.auto_scale import policy_removal_updates, policy_updates
from pravega_ray.stream_configuration import ScaleType, ScalingPolicy
from pravega_ray.timing import DAEMON_THREADS, ThreadScheduler

__all__ = ["SegmentHelper", "run_each"]

log = logging.getLogger(__name__)
R = TypeVar("R")
T = TypeVar("T")

RETRY_PAUSE_S = 0.5
EACH_THREADS = 16
"""Calls one :func:`run_each` makes side by side (a transaction has one segment per parent)."""
POOL_THREADS = 256
"""Threads all the :func:`run_each` of a process share (each also runs calls on its caller's
thread, so it makes progress even while the pool is busy)."""

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def run_each(call: Callable[[T], object], items: Iterable[T]) -> None:
    """Run ``call(item)`` for every item, side by side, and return once all finished.

    For per-segment steps of one workflow (create, seal, merge, delete the segments of a
    stream, an epoch or a transaction), which are independent of each other: one round
    trip instead of one per segment. Every call runs even if another fails; then the first
    failure (in item order) is raised.

    Thread-safe. At most ``EACH_THREADS`` calls of one ``run_each`` run at once: the
    caller's thread and up to ``EACH_THREADS - 1`` threads of a pool shared by the process,
    each taking the next item until none is left. So a slow ``run_each`` (a create of a
    100-segment stream, a container answering slowly) never holds another's calls, and a
    ``run_each`` inside a call run side by side cannot deadlock: its caller's thread runs
    them all if no pool thread is free.
    """
    global _pool
    todo = list(items)
    if len(todo) <= 1:
        for item in todo:
            call(item)
        return
    errors: list[BaseException | None] = [None] * len(todo)
    taken = itertools.count()
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                index = next(taken)
            if index >= len(todo):
                return
            try:
                call(todo[index])
            except BaseException as e:  # every call runs; the first failure is raised below
                errors[index] = e

    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="pravega-segment-calls")
    helpers = [_pool.submit(work) for _ in range(min(EACH_THREADS, len(todo)) - 1)]
    work()
    for helper in helpers:  # every item is taken: wait for those a helper runs, start no more
        if not helper.cancel():
            helper.result()
    for error in errors:
        if error is not None:
            raise error


class SegmentHelper:
    """Synchronous segment calls for controller workflows, repeated while a container restarts.

    ``call_timeout_s``: how long one call may take (None: no limit; a Ray call to a live
    actor always answers). ``scheduler`` paces the repeats (tests pass
    a manual one). ``container_count`` (when known) lets calls for several segments of one
    container go as one call.
    """

    def __init__(
        self,
        client: SegmentStoreClient,
        *,
        attempts_max: int = CONTAINER_CALL_ATTEMPTS_MAX,
        pause_s: float = RETRY_PAUSE_S,
        call_timeout_s: float | None = None,
        scheduler: ThreadScheduler = DAEMON_THREADS,
        container_count: int | None = None,
    ) -> None:
        self._client = client
        self._container_count = container_count
        self._attempts_max = attempts_max
        self._pause_s = pause_s
        self._call_timeout_s = call_timeout_s
        self._scheduler = scheduler

    def _call(self, segment: str, call: Callable[[str], Future[R]]) -> R:
        return self._repeat(
            f"segment call {getattr(call, '__name__', 'call')} on {segment}",
            lambda: call(segment).result(self._call_timeout_s),
        )

    def _repeat(self, what: str, once: Callable[[], R]) -> R:
        """``once()``, repeated while its outcome is unknown (RetriableError), paced and
        bounded by this helper's settings."""
        return repeat_while(
            RetriableError,
            once,
            what=what,
            log=log,
            attempts_max=self._attempts_max,
            pause_s=self._pause_s,
            scheduler=self._scheduler,
        )

    def create_segment(self, segment: str) -> None:
        self._call(segment, self._client.create_segment)

    def create_segments(
        self, segments: Sequence[str], role: SegmentRole = SegmentRole.NORMAL
    ) -> None:
        """Create ``segments`` (of ``role``), all sent at once from this thread; one that
        exists already (an earlier run cut short, or another caller) is fine."""
        self._each(
            lambda s: self._client.create_segment(s, role), segments, SegmentExistsError, "create"
        )

    def create_transaction_segments(self, segments: Sequence[str]) -> None:
        """Create transaction segments (role TRANSACTION, each in its parent's container):
        :meth:`create_segments`."""
        self.create_segments(segments, SegmentRole.TRANSACTION)

    def delete_segments(self, segments: Sequence[str]) -> None:
        """Delete ``segments``, all sent at once from this thread; one that is gone already
        is fine."""
        self._each(self._client.delete_segment, segments, SegmentNotFoundError, "delete")

    def _each(
        self,
        call: Callable[[str], Future[Any]],
        segments: Sequence[str],
        done_already: type[PravegaError],
        what: str,
    ) -> None:
        """``call(segment)`` for every segment, sent together from this thread (futures, no
        thread each): one round trip for all. Every call is answered before the first
        failure (in segment order) is raised; ``done_already`` is no failure. An unknown
        outcome repeats the whole set (the calls are idempotent with ``done_already``)."""
        timeout = self._call_timeout_s

        def once() -> None:
            answers = _answers([call(segment) for segment in segments], timeout)
            _raise_first(a for a in answers if not isinstance(a, done_already))

        self._repeat(f"{what} of {len(segments)} segments", once)

    def seal_and_merge(self, sources: Mapping[str, Sequence[str]]) -> None:
        """Seal each parent's ``sources`` and merge them into it, in order: one call per
        container for all its parents (``SegmentStoreService.seal_and_merge``; one per
        parent if the helper does not know the container count), all sent at once.

        A source that is gone was merged already, by an earlier run cut short: skipped. A
        merge that fails stops that parent's later merges, the other parents go on, and
        the first such failure is raised once every call answered. An unknown outcome
        (RetriableError) repeats the whole call, as every call here: seals and merges
        done already are skipped then."""
        timeout = self._call_timeout_s
        groups: dict[object, list[tuple[str, list[str]]]] = {}
        for target, srcs in sources.items():
            if srcs:
                key = (
                    container_for_segment(target, self._container_count)
                    if self._container_count
                    else target
                )
                groups.setdefault(key, []).append((target, list(srcs)))

        def once() -> None:
            futures = [
                self._client.seal_and_merge(jobs[0][0], jobs[0][1], jobs[1:])
                for jobs in groups.values()
            ]
            # A call's own failure, or the first target's that stopped its merges.
            _raise_first(
                a if isinstance(a, BaseException) else next((o for o in a if o is not None), None)
                for a in _answers(futures, timeout)
            )

        self._repeat(f"seal and merge into {len(sources)} segments", once)

    def create_table_segment(self, segment: str) -> None:
        self._call(segment, self._client.table_create)

    def seal_segment(self, segment: str) -> int:
        return self._call(segment, self._client.seal)

    def delete_segment(self, segment: str) -> None:
        self._call(segment, self._client.delete_segment)

    def append_plain(self, segment: str, data: bytes) -> int:
        """Append ``data`` as one block; returns its offset. Repeated on an unknown outcome,
        so it may land twice: for the request stream, whose readers are idempotent."""
        return self._call(segment, lambda s: self._client.append_conditional(s, data)).offset

    def append_at(self, segment: str, data: bytes, expected_offset: int) -> bool:
        """Append ``data`` as one block if the segment's length is ``expected_offset``; False
        if it is not (someone appended first). Repeated on an unknown outcome: a repeat
        finding its own block landed answers False too (callers read the segment again)."""
        try:
            self._call(
                segment,
                lambda s: self._client.append_conditional(s, data, expected_offset=expected_offset),
            )
        except ConditionalUpdateError:
            return False
        return True

    def read(self, segment: str, offset: int, max_bytes: int, wait_s: float) -> ReadResult:
        return self._call(segment, lambda s: self._client.read(s, offset, max_bytes, wait_s))

    def segment_length(self, segment: str) -> int:
        return self._call(segment, self._client.get_info).length

    def truncate_segment(self, segment: str, offset: int) -> None:
        self._call(segment, lambda s: self._client.truncate(s, offset))

    # --- stream cuts (controller/stream_cut_tasks.py) ------------------------------------------
    def offset_at_time(self, segment: str, time_ms: int) -> int:
        """The container's time index answer (SegmentStoreService.get_offset_at_time)."""
        return self._call(segment, lambda s: self._client.get_offset_at_time(s, time_ms))

    def check_event_boundary(self, segment: str, offset: int) -> None:
        """InvalidArgumentError unless ``offset`` is an event boundary of ``segment``."""
        self._call(segment, lambda s: self._client.check_event_boundary(s, offset))

    def update_attributes(self, segment: str, updates: tuple[AttributeUpdate, ...]) -> None:
        self._call(segment, lambda s: self._client.update_attributes(s, updates))

    def set_scale_policy(self, segment: str, policy: ScalingPolicy) -> None:
        """Hand ``policy`` to the segment (reserved attributes its container's auto-scale
        monitor reads, ``segmentstore/auto_scale.py``); a fixed policy removes it."""
        if policy.scale_type is ScaleType.BY_RATE_IN_EVENTS_PER_SEC:
            updates = policy_updates("events", policy.target_rate, policy.scale_factor)
        elif policy.scale_type is ScaleType.BY_RATE_IN_KBYTES_PER_SEC:
            updates = policy_updates("bytes", policy.target_rate * 1024, policy.scale_factor)
        else:
            updates = policy_removal_updates()
        self.update_attributes(segment, updates)


def _answers(futures: list[Future[Any]], timeout: float | None) -> list[Any]:
    """Each future's result, or the error it failed with, once every one answered."""
    answers: list[Any] = []
    for future in futures:
        try:
            answers.append(future.result(timeout))
        except BaseException as e:  # every call is answered first
            answers.append(e)
    return answers


def _raise_first(answers: Iterable[object]) -> None:
    """Raise the first of ``answers`` that is an error (in order); others are no failure."""
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
