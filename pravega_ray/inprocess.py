"""A whole pravega-ray cluster in one process, without Ray.

Containers run on one asyncio event loop in a background thread; the
controller is called directly under a lock. Clients reach the containers through
the same service surface as on Ray (the cluster is the segment-store connection's
invoker, calling ``SegmentStoreService`` methods on the owning container), so
writers, readers and the stream manager behave identically. Used by unit tests,
which also crash containers through it (the seeded simulation of the data path, ``sim/``,
builds its containers itself; docs/chaos.md):
:meth:`InProcessCluster.restart_container` kills a container mid-flight (pending
calls fail with an outcome-unknown error) and recovers a new one from the same
durable log and Tier-2, as a Ray restart would.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from pravega_ray.client.client_factory import ClientFactory
from pravega_ray.client.connection import SegmentStoreConnection
from pravega_ray.client.controller_connection import ControllerClient
from pravega_ray.constants import WATERMARK_SEGMENT_KEEP_BYTES, WATERMARK_WRITER_TIMEOUT_S
from pravega_ray.contracts.controller_service import method_name
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.controller.controller import Controller
from pravega_ray.controller.event_processor import RequestEventProcessor
from pravega_ray.controller.request_stream import RequestStream
from pravega_ray.controller.retention_service import CycleResult, RetentionService
from pravega_ray.controller.scope_workflows import ScopeWorkflows
from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.controller.stream_workflows import StreamWorkflows
from pravega_ray.controller.table_metadata_store import TableMetadataStore, open_metadata_store
from pravega_ray.controller.transaction_timer import transaction_timer
from pravega_ray.controller.transaction_workflows import abort_processor, commit_processor
from pravega_ray.controller.watermark_tasks import PeriodicWatermarking
from pravega_ray.errors import ContainerNotReadyError, SegmentStoreUnavailableError
from pravega_ray.logs.memory import InMemoryLogStore
from pravega_ray.naming import container_for_segment
from pravega_ray.segmentstore.builder import build_in_memory_container
from pravega_ray.segmentstore.config import ContainerConfig
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.timing import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)
R = TypeVar("R")

IN_PROCESS_LEASE_S = 1.0
"""``table_watch_lease_s`` of an in-process cluster's containers unless told otherwise,
when its controller watches its records (``watch_metadata``)."""

IN_PROCESS_UNWATCHED_LEASE_S = 0.02
"""``table_watch_lease_s`` of an in-process cluster whose controller does not watch its
records: nothing holds a lease there (unless a test calls ``table_watch`` itself, and
passes its own lease), so the grace period a restarted container waits out before it
acknowledges an update of the controller's records protects nobody. At a second, each
restart of a test cost a second (the hostile-user state machine restarts hundreds of
times)."""


class _LockedController:
    """Invokes each controller call on a controller in this process, one call at a time
    under a lock, as its actor shell serializes calls (a ``ControllerInvoker``)."""

    def __init__(self, controller: Controller) -> None:
        self._controller = controller
        self._lock = threading.Lock()

    def replace(self, controller: Controller) -> None:
        """Swap in a new controller (a restart); clients keep their connection."""
        with self._lock:
            self._controller = controller

    def invoke(self, method: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
        # The Protocol's function only names the call: Controller implements it.
        with self._lock:
            implementation: Callable[..., R] = getattr(self._controller, method_name(method))
            return implementation(*args, **kwargs)


class InProcessCluster(ClientFactory):
    def __init__(
        self, container_count: int = 4, *, watch_metadata: bool = False, **container_options: Any
    ) -> None:
        """``watch_metadata``: the controller's record store holds leases on its table
        segments (``segmentstore/table_watches.py``), as the controller actors on Ray do;
        off by default here, where every call is in-process anyway."""
        self.container_count = container_count
        self._watch_metadata = watch_metadata
        # A short lease: each container restart of a test holds updates of the controller's
        # records for it (the grace period of segmentstore/table_watches.py).
        lease_s = IN_PROCESS_LEASE_S if watch_metadata else IN_PROCESS_UNWATCHED_LEASE_S
        self._options = {"table_watch_lease_s": lease_s, **container_options}
        self._loop = asyncio.new_event_loop()
        # Held while a coroutine is handed to the loop and while shutdown stops accepting
        # them: every coroutine handed over before shutdown is on the loop, and is run or
        # cancelled there; none is left scheduled on a stopped loop (never awaited).
        self._submit_lock = threading.Lock()
        self._accepting = True
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="pravega-inprocess"
        )
        self._thread.start()
        self.log_stores = [InMemoryLogStore() for _ in range(container_count)]
        self.storage = InMemoryChunkStorage()
        self._containers: list[SegmentContainer | None] = [
            self._new_container(i) for i in range(container_count)
        ]
        self.metadata: TableMetadataStore
        self._locked = _LockedController(self._new_controller())
        self.processor = self._new_processor()
        self.processor.start()
        self._start_transaction_services()
        super().__init__(ControllerClient(self._locked), SegmentStoreConnection(self))

    @property
    def core(self) -> Controller:
        """The controller core itself (tests call it directly, without a client)."""
        return self._locked._controller

    @property
    def segments(self) -> SegmentStoreClient:
        """A typed client of this cluster's containers."""
        return SegmentStoreClient(self)

    def _segment_helper(self) -> SegmentHelper:
        # No repeats: a container of this cluster is down only while a test restarts it.
        return SegmentHelper(
            SegmentStoreClient(self),
            attempts_max=1,
            call_timeout_s=30,
            container_count=self.container_count,
        )

    def _new_controller(self) -> Controller:
        self.metadata = open_metadata_store(
            SegmentStoreClient(self), self.storage, watch=self._watch_metadata
        )
        helper = self._segment_helper()
        return Controller(
            self.metadata, helper, self.container_count, set_policy=helper.set_scale_policy
        )

    def new_workflows(self, step: Callable[[str], None] = lambda name: None) -> StreamWorkflows:
        """Stream workflows over this cluster's records (``step`` is called between steps)."""
        store = StreamMetadataStore(self.metadata)
        helper = self._segment_helper()
        # The recursive delete of a scope works through a controller instance of its own
        # over the same records, as the request processor's actor does.
        controller = Controller(
            self.metadata, helper, self.container_count, set_policy=helper.set_scale_policy
        )
        scopes = ScopeWorkflows(store, controller, step=step)
        return StreamWorkflows(
            store,
            helper,
            step=step,
            set_policy=helper.set_scale_policy,
            scopes=scopes.handle,
            container_count=self.container_count,
        )

    def _new_processor(
        self, step: Callable[[str], None] = lambda name: None
    ) -> RequestEventProcessor:
        return RequestEventProcessor(
            RequestStream(self._segment_helper()), self.new_workflows(step).handle, self.metadata
        )

    def restart_processor(self, step: Callable[[str], None] = lambda name: None) -> None:
        """Stop the request event processor (as if its actor died) and start a new one,
        which resumes from its checkpoint; ``step`` is handed to its workflows."""
        self.processor.stop()
        self.processor = self._new_processor(step)
        self.processor.start()

    # --- retention: what the stream buckets run every retention_period_s ------------------------
    def retention_service(
        self, clock: Clock = SYSTEM_CLOCK, step: Callable[[str], None] = lambda name: None
    ) -> RetentionService:
        """A retention service over this cluster's records (``clock``: a manual one for
        tests; ``step`` is called between a cycle's steps)."""
        return RetentionService(self.metadata, self._segment_helper(), clock=clock, step=step)

    def run_retention(self) -> list[CycleResult]:
        """One retention cycle of every stream, as the stream buckets run them."""
        return self.retention_service().run_streams()

    def watermark_tasks(
        self,
        clock: Clock = SYSTEM_CLOCK,
        step: Callable[[str], None] = lambda name: None,
        writer_timeout_s: float = WATERMARK_WRITER_TIMEOUT_S,
        keep_bytes: int = WATERMARK_SEGMENT_KEEP_BYTES,
    ) -> PeriodicWatermarking:
        """The watermark workflow over this cluster's records, as the stream buckets run it
        (``clock``: a manual one for tests; ``step`` is called between a run's steps;
        ``keep_bytes``: the mark segments' bound)."""
        records = self.metadata
        return PeriodicWatermarking(
            StreamMetadataStore(records),
            records,
            self._segment_helper(),
            clock=clock,
            step=step,
            writer_timeout_s=writer_timeout_s,
            keep_bytes=keep_bytes,
        )

    def run_watermarks(self) -> int:
        """One watermark iteration of every stream with writers' marks; how many emitted."""
        return self.watermark_tasks().run_streams()

    # --- transactions: the commit and abort event processors and the timer -----------------------
    def _start_transaction_services(self) -> None:
        self.commit_processor = commit_processor(self.metadata, self._segment_helper())
        self.abort_processor = abort_processor(self.metadata, self._segment_helper())
        self.txn_timer = transaction_timer(self.metadata, self._segment_helper())
        self.commit_processor.start()
        self.abort_processor.start()
        self.txn_timer.start()

    def _stop_processors(self) -> None:
        """Stop the request, commit and abort processors (side by side) and the timer."""
        processors = [self.processor, self.commit_processor, self.abort_processor]
        for processor in processors:
            processor.request_stop()
        self.txn_timer.stop()
        for processor in processors:
            processor.stop()

    def restart_commit_processor(self, step: Callable[[str], None] = lambda name: None) -> None:
        """Stop the commit event processor (as if its actor died) and start a new one, which
        resumes from its checkpoint; ``step`` is called between its handler's steps."""
        self.commit_processor.stop()
        self.commit_processor = commit_processor(self.metadata, self._segment_helper(), step=step)
        self.commit_processor.start()

    def restart_abort_processor(self, step: Callable[[str], None] = lambda name: None) -> None:
        """As :meth:`restart_commit_processor`, for the abort event processor."""
        self.abort_processor.stop()
        self.abort_processor = abort_processor(self.metadata, self._segment_helper(), step=step)
        self.abort_processor.start()

    def restart_txn_timer(self) -> None:
        """Stop the transaction timer and start a new one (it rebuilds from the records)."""
        self.txn_timer.stop()
        self.txn_timer = transaction_timer(self.metadata, self._segment_helper())
        self.txn_timer.start()

    def _new_container(self, container_id: int) -> SegmentContainer:
        container = build_in_memory_container(
            ContainerConfig(container_id, **self._options),
            self.log_stores[container_id],
            self.storage,
        )
        container.recover()
        return container

    def container(self, container_id: int) -> SegmentContainer:
        container = self._containers[container_id]
        if container is None:
            raise SegmentStoreUnavailableError(f"container {container_id} is down")
        return container

    def invoke(self, method: Callable[..., Awaitable[R]], segment: str, *args: Any) -> Future[R]:
        """Run the container's ``method`` for ``segment`` on the loop; a concurrent Future.

        ``method`` is a :class:`SegmentStoreService` function (this cluster is the invoker
        of its segment-store connection); the owning container's method of that name runs.
        """
        container_id = container_for_segment(segment, self.container_count)
        container = self._containers[container_id]
        if container is None:
            failed: Future[Any] = Future()
            failed.set_exception(SegmentStoreUnavailableError(f"container {container_id} is down"))
            return failed
        return self.run(_translate(getattr(container, method.__name__), segment, *args))

    def run(self, coro: Coroutine[Any, Any, R]) -> Future[R]:
        """Run ``coro`` on the cluster's loop; once the cluster is shut down, a Future that
        failed with SegmentStoreUnavailableError (a processor's last read, say) and the
        coroutine closed unrun. One handed over while the cluster shuts down ends: run, or
        cancelled by the shutdown (its Future then raises CancelledError)."""
        with self._submit_lock:
            if self._accepting:
                return asyncio.run_coroutine_threadsafe(coro, self._loop)
        coro.close()
        failed: Future[R] = Future()
        failed.set_exception(SegmentStoreUnavailableError("the in-process cluster is shut down"))
        return failed

    def restart_container(self, container_id: int) -> None:
        """Kill a container (in-flight calls fail, outcome unknown) and recover a new one."""
        old = self._containers[container_id]
        self._containers[container_id] = None
        if old is not None:
            self.run(old.close()).result(10)
        self._containers[container_id] = self._new_container(container_id)

    def restart(self) -> None:
        """Restart the whole cluster: every container and the controller recover from storage.

        Clients made before keep working (as after a restart of a Ray cluster's actors).
        """
        self._stop_processors()
        for container_id in range(self.container_count):
            self.restart_container(container_id)
        self.metadata.close()
        self._locked.replace(self._new_controller())
        self.processor = self._new_processor()
        self.processor.start()
        self._start_transaction_services()

    def shutdown(self) -> None:
        """Stop everything; every call handed over before ends (run, or cancelled). The waits
        are long (SHUTDOWN_WAIT_S): the loop reaches each step in order, and on a starved
        machine (the fast tier at the lowest priority beside the Ray tests) 10 s were not
        enough, which left calls that never ended."""
        self._stop_processors()
        self.metadata.close()
        for container in self._containers:
            if container is not None:
                self.run(container.close()).result(SHUTDOWN_WAIT_S)
        # The loop's default executor threads would outlive it (two per cluster a test made).
        try:
            self.run(self._loop.shutdown_default_executor()).result(SHUTDOWN_WAIT_S)
        except TimeoutError:
            log.warning("in-process cluster: executor threads still busy at shutdown")
        with self._submit_lock:
            self._accepting = False
            # After every coroutine handed over before (the loop runs callbacks in order).
            last = asyncio.run_coroutine_threadsafe(_cancel_the_rest(), self._loop)
        try:
            last.result(SHUTDOWN_WAIT_S)
        except TimeoutError:
            log.warning("in-process cluster: calls still running at shutdown")
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()


SHUTDOWN_WAIT_S = 120.0
"""How long ``InProcessCluster.shutdown`` waits for each of its steps on the loop."""

ALL_TASKS_TRIES = 1000
"""How often :func:`_loop_tasks` copies the task set before giving up (as Python 3.10 did)."""


def _loop_tasks() -> set[asyncio.Task[Any]]:
    """``asyncio.all_tasks()`` of the running loop, tried again while it fails: Python 3.11
    copies one set shared by every loop of the process, and another thread's loop adding a
    task meanwhile raises RuntimeError ("Set changed size during iteration"; seen in the
    suite, where each container runs a loop of its own)."""
    for attempt in range(ALL_TASKS_TRIES):
        try:
            return asyncio.all_tasks()
        except RuntimeError:
            if attempt == ALL_TASKS_TRIES - 1:
                raise
    raise AssertionError("unreachable")


async def _cancel_the_rest() -> None:
    """Cancel every other task on the running loop and wait (5 s at most) until they end."""
    tasks = _loop_tasks() - {asyncio.current_task()}
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=5)


async def _translate(method: Callable[..., Awaitable[R]], *args: Any) -> R:
    """``method(*args)``, a closed container looking like a dead actor to the client (outcome
    unknown). The call is made here, so a run refused by a closed loop never creates it."""
    try:
        return await method(*args)
    except ContainerNotReadyError as e:
        raise SegmentStoreUnavailableError(str(e)) from e
