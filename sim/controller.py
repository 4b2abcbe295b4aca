"""The controller's process in the simulation: the project's real controller parts.

:class:`SimController` builds what ``InProcessCluster._new_controller`` and
``_new_processor`` build (``pravega_ray/inprocess.py``), on the simulated network and
clock:

* a :class:`~pravega_ray.controller.table_metadata_store.TableMetadataStore` whose records
  live in table segments of the simulated containers (created, and the migration marker
  checked, as ``open_metadata_store`` does; not watched, as in-process);
* the :class:`~pravega_ray.controller.controller.Controller` over it, with a
  :class:`~pravega_ray.controller.segment_helper.SegmentHelper` for its segment calls;
* the :class:`~pravega_ray.controller.event_processor.RequestEventProcessor` reading the
  request stream (a segment of a container) from its checkpoint (a record of the store),
  handing each request to :class:`~pravega_ray.controller.stream_workflows.StreamWorkflows`.
  whose ``delete_scope`` requests go to
  :class:`~pravega_ray.controller.scope_workflows.ScopeWorkflows` (the recursive delete of a
  scope: ``sim/scope.py``);
* with ``transactions=True`` (seeds with the ``transactions`` feature, whose client is
  ``sim/transactions.py``), the commit and abort event processors and the transaction
  timer, as ``InProcessCluster._start_transaction_services`` builds them; a commit that
  finds its epoch scaled away posts a ``roll`` request, which the request processor's
  rolling commit (``StreamWorkflows.run_roll``) handles.

Three changes make them run in the simulator's one thread, in an order the seed sets:

* each processor's thread pool is a :class:`SimPool`: a submitted task waits in
  :attr:`SimPool.tasks` until the simulator runs it, in a step of its own; a processor's
  reading loop is not started either: the simulator calls ``run_once(0)`` in a step
  (:class:`SimProcessor`), at once when a request is posted to its stream
  (:func:`controller_hooks`), else when its read wait is over; the timer's thread is
  not started: the simulator calls ``run_once()`` every ``TXN_TIMER_PERIOD_S``;
* ``run_each`` (the controller's side-by-side segment calls on a thread pool) runs its
  calls one after the other (:func:`sequential_workflows`, installed for a run);
* the controller's segment calls are *lossless* (``Network.invoker(lossless=True)``): on
  Ray a call to a live actor always answers (``SegmentHelper`` waits without a limit), so
  the simulation never loses them; a container crash still fails them (outcome unknown).

A blocking call of any of them (a table read, a seal) lets the rest of the world run, as
the writer's reconnect does (``sim/network.py``).

**Crashes.** :meth:`SimController.crash` kills the process: the controller, its store,
its processor and the tasks it had queued are dropped; :meth:`SimController.start`
builds new ones from the table segments, and each new processor reads its stream again
from its checkpoint (a scale cut short runs again, idempotently, to the same end).
The workflows' ``step`` hook (called between the steps of a scale, of a scope delete, of
a seal and delete, of the commit and abort handlers and of a rolling commit) is where the
``controller_crash`` fault strikes mid-workflow: it raises :class:`ControllerCrash`, which no
code of the controller catches. While the process is down, the clients' calls fail with
ControllerUnavailableError (retriable), as a dead actor's would.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import random
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any, TypeVar

from pravega_ray.constants import TXN_TIMER_PERIOD_S
from pravega_ray.contracts.records import EpochInfo, SegmentRange, StreamInfo
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.contracts.watermarks import Watermark
from pravega_ray.controller import (
    segment_helper,
    stream_transaction_metadata_tasks,
    stream_workflows,
)
from pravega_ray.controller.controller import Controller
from pravega_ray.controller.event_processor import RequestEventProcessor
from pravega_ray.controller.request_stream import RequestStream
from pravega_ray.controller.scope_workflows import ScopeWorkflows
from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.controller.stream_metadata_store import ChunkMetadataStore, StreamMetadataStore
from pravega_ray.controller.table_metadata_store import (
    MIGRATION_MARKER,
    TableMetadataStore,
    migrate_chunk_records,
)
from pravega_ray.controller.transaction_timer import TransactionTimer, transaction_timer
from pravega_ray.controller.transaction_workflows import (
    ABORT_SEGMENT,
    COMMIT_SEGMENT,
    abort_processor,
    commit_processor,
)
from pravega_ray.controller.watermark_tasks import PeriodicWatermarking
from pravega_ray.errors import ControllerUnavailableError, InvalidArgumentError, RetriableError
from pravega_ray.segmentstore.table_segment import CLIENT_ID_BYTES
from pravega_ray.storage.chunk_storage import ChunkStorage
from pravega_ray.timing import ManualClock, ThreadScheduler

__all__ = [
    "ControllerCrash",
    "SimController",
    "SimPool",
    "SimProcessor",
    "controller_hooks",
    "covers_key_space",
    "sequential_workflows",
]

R = TypeVar("R")
T = TypeVar("T")


class ControllerCrash(BaseException):
    """The controller's process dies here (the ``controller_crash`` fault). A BaseException,
    so no ``except Exception`` of the controller's code stops it."""


class SimPool:
    """An event processor's thread pool: tasks wait for the simulator to run them."""

    def __init__(self) -> None:
        self.tasks: deque[Callable[[], None]] = deque()

    def submit(self, function: Callable[..., Any], *args: Any) -> None:
        self.tasks.append(partial(function, *args))

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        self.tasks.clear()


def _run_each_in_turn(call: Callable[[T], object], items: Iterable[T]) -> None:
    """``run_each`` in one thread: every call runs (in item order) even if another fails,
    then the first failure is raised, as ``segment_helper.run_each`` does."""
    errors: list[Exception] = []
    for item in items:
        try:
            call(item)
        except Exception as e:  # a ControllerCrash is no failure of the call: it propagates
            errors.append(e)
    if errors:
        raise errors[0]


_RUN_EACH_USERS = (
    "stream_metadata_tasks",
    "stream_records",
    "stream_transaction_metadata_tasks",
    "stream_workflows",
    "table_metadata_tasks",
    "transaction_workflows",
)
"""The controller's modules that import ``segment_helper.run_each``."""


@contextlib.contextmanager
def sequential_workflows() -> Iterator[None]:
    """For the ``with`` block, every controller module's ``run_each`` (side-by-side segment
    calls on a thread pool) runs its calls one after the other: the simulation has one
    thread, and a thread of the pool would run the world's steps concurrently."""
    modules = [importlib.import_module(f"pravega_ray.controller.{m}") for m in _RUN_EACH_USERS]
    for module in modules:
        assert getattr(module, "run_each") is segment_helper.run_each, module.__name__  # noqa: B009
        setattr(module, "run_each", _run_each_in_turn)  # noqa: B010
    try:
        yield
    finally:
        for module in modules:
            setattr(module, "run_each", segment_helper.run_each)  # noqa: B010


class SimProcessor:
    """One event processor of the controller's process, stepped by the simulator: its
    reading loop (``run_once(0)``: :meth:`SimController.read`) and its pool's tasks
    (:meth:`SimController.run_task`). ``segment`` is the stream it reads; a post there
    (:func:`controller_hooks`) makes it read at once."""

    def __init__(self, name: str, processor: RequestEventProcessor, segment: str, now: float):
        self.name = name
        self.processor = processor
        self.segment = segment
        self.pool = SimPool()
        processor._pool = self.pool  # type: ignore[assignment]  # tasks wait for the simulator
        self.read_at = now  # when it reads its stream next (at once: from its checkpoint)

    @property
    def busy(self) -> bool:
        """A request not finished (read, or posted and not read yet: a read is due)."""
        return bool(self.pool.tasks) or self.read_at < float("inf") or bool(self.processor._pending)


class _CountingContents:
    """The recursive scope delete's view of the controller (``ScopeContents``), counting
    the scopes it deleted (``delete_scope`` answering True): each must be deleted once."""

    def __init__(self, controller: Controller, deleted: dict[str, int]) -> None:
        self._controller = controller
        self._deleted = deleted

    def __getattr__(self, name: str) -> Any:
        return getattr(self._controller, name)

    def delete_scope(self, scope: str) -> bool:
        deleted = self._controller.delete_scope(scope)
        if deleted:
            self._deleted[scope] = self._deleted.get(scope, 0) + 1
        return deleted


class _Hooks:
    """What :func:`controller_hooks` reaches during a run: the world's controller (told of
    each request posted) and the generator of transaction ids."""

    on_post: Callable[[str], None] | None = None
    txn_ids: random.Random | None = None


_HOOKS = _Hooks()
_ORIGINAL_POST = RequestStream.post
_ORIGINAL_TXN_ID = stream_transaction_metadata_tasks.new_transaction_id


def _post_noticed(self: RequestStream, body: dict[str, Any]) -> int:
    offset = _ORIGINAL_POST(self, body)
    if _HOOKS.on_post is not None:
        _HOOKS.on_post(self.segment)
    return offset


def _seeded_transaction_id(epoch: int) -> uuid.UUID:
    """``new_transaction_id`` with its 96 random bits from the run's generator (it draws
    them from ``os.urandom``: the ids name segments and table keys, so a run would differ)."""
    rng = _HOOKS.txn_ids
    if rng is None:
        return _ORIGINAL_TXN_ID(epoch)
    if not 0 <= epoch < 2**32:
        raise InvalidArgumentError(f"an epoch of a transaction id is in [0, 2**32), got {epoch}")
    random_bits = rng.getrandbits(96)
    high = (epoch << 32) | (random_bits >> 64)
    low = random_bits & ((1 << 63) - 1)
    return uuid.UUID(int=(high << 64) | low)


@contextlib.contextmanager
def controller_hooks(txn_ids: random.Random) -> Iterator[None]:
    """For the ``with`` block (one run): every request posted to a request stream (the
    controller's, the commit and abort streams) is told to the run's controller, whose
    processor of that stream then reads at once (a real processor's loop would wake
    within its read wait; the simulated one is stepped, and would otherwise sleep), and
    transaction ids are drawn from ``txn_ids`` (``_seeded_transaction_id``)."""
    module = stream_transaction_metadata_tasks
    assert module.new_transaction_id is _ORIGINAL_TXN_ID
    RequestStream.post = _post_noticed  # type: ignore[method-assign]
    module.new_transaction_id = _seeded_transaction_id
    _HOOKS.txn_ids = txn_ids
    try:
        yield
    finally:
        RequestStream.post = _ORIGINAL_POST  # type: ignore[method-assign]
        module.new_transaction_id = _ORIGINAL_TXN_ID
        _HOOKS.on_post = _HOOKS.txn_ids = None


class SimController:
    """The controller's process (module docstring): the clients' controller connection
    (``get_stream_info``, ``get_successors``, ``get_current_segments``, ``scale_stream``,
    the scope and transaction calls), and the event processors the simulator steps.

    ``invoker``: the network (lossless) the controller's segment calls go through;
    ``storage``: Tier-2 (for the format-5 migration check); ``crash_at_step()`` is asked
    at each step of a workflow whether the process dies there; ``rng`` seeds the client
    ids and request ids the controller would draw at random; ``transactions``: the
    process also runs the commit and abort event processors and the transaction timer
    (seeds that draw the ``transactions`` feature; others run as before it existed).
    """

    def __init__(
        self,
        invoker: Any,
        storage: ChunkStorage,
        clock: ManualClock,
        scheduler: ThreadScheduler,
        rng: random.Random,
        container_count: int,
        crash_at_step: Callable[[str], bool],
        transactions: bool = False,
    ) -> None:
        self._invoker = invoker
        self._storage = storage
        self._clock = clock
        self._scheduler = scheduler
        self._rng = rng
        self._container_count = container_count
        self._crash_at_step = crash_at_step
        self.transactions = transactions
        self.controller: Controller | None = None
        self.store: TableMetadataStore | None = None
        self.processors: list[SimProcessor] = []
        self.timer: TransactionTimer | None = None
        self.timer_at = float("inf")  # when the transaction timer sweeps next
        self.restart_at: float | None = None
        self.incarnations = 0
        self.active = 0  # calls of the process under way (its own, and the clients')
        self.scopes_deleted: dict[str, int] = {}  # by every incarnation's scope workflow
        _HOOKS.on_post = self._posted

    @property
    def up(self) -> bool:
        return self.controller is not None

    @property
    def idle(self) -> bool:
        """Up, and no call of it under way: a crash now kills no call in the middle (one
        under way dies only at a workflow step, where :class:`ControllerCrash` unwinds it;
        else it would go on as a zombie after the restart)."""
        return self.controller is not None and self.active == 0

    @contextlib.contextmanager
    def _busy(self) -> Iterator[None]:
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1

    def _helper(self) -> SegmentHelper:
        return SegmentHelper(
            SegmentStoreClient(self._invoker),
            scheduler=self._scheduler,
            container_count=self._container_count,
        )

    def start(self) -> None:
        """Build the process anew from the table segments (a start or a restart). While it
        is built (its calls let the world run) the process is still down."""
        self.restart_at = None
        rng = self._rng
        store = TableMetadataStore(
            SegmentStoreClient(self._invoker),
            scheduler=self._scheduler,
            new_client_id=lambda: rng.getrandbits(8 * CLIENT_ID_BYTES).to_bytes(
                CLIENT_ID_BYTES, "big"
            ),
        )
        store.ensure_created()
        if store.get(MIGRATION_MARKER) is None:  # as open_metadata_store
            migrate_chunk_records(ChunkMetadataStore(self._storage), store)
        helper = self._helper()
        controller = Controller(
            store,
            helper,
            self._container_count,
            clock=self._clock,
            scheduler=self._scheduler,
            new_id=lambda: uuid.UUID(int=rng.getrandbits(128), version=4).hex,
            set_policy=helper.set_scale_policy,
        )
        workflows_helper = self._helper()
        records = StreamMetadataStore(store)
        contents = _CountingContents(controller, self.scopes_deleted)
        workflows = stream_workflows.StreamWorkflows(
            records,
            workflows_helper,
            clock=self._clock,
            scheduler=self._scheduler,
            step=self._step,
            set_policy=workflows_helper.set_scale_policy,
            scopes=ScopeWorkflows(records, contents, step=self._step).handle,
            container_count=self._container_count,
        )
        requests = RequestStream(self._helper(), scheduler=self._scheduler)
        processor = RequestEventProcessor(
            requests,
            workflows.handle,
            store,
            clock=self._clock,
            scheduler=self._scheduler,
        )
        now = self._clock.monotonic()
        processors = [SimProcessor("controller", processor, requests.segment, now)]
        timer = None
        if self.transactions:  # as InProcessCluster._start_transaction_services
            options = dict(clock=self._clock, scheduler=self._scheduler, step=self._step)
            commits = commit_processor(store, self._helper(), **options)  # type: ignore[arg-type]
            aborts = abort_processor(store, self._helper(), **options)  # type: ignore[arg-type]
            processors.append(SimProcessor("commits", commits, COMMIT_SEGMENT, now))
            processors.append(SimProcessor("aborts", aborts, ABORT_SEGMENT, now))
            timer = transaction_timer(
                store, self._helper(), clock=self._clock, scheduler=self._scheduler
            )
        self.controller, self.store, self.processors, self.timer = (
            controller,
            store,
            processors,
            timer,
        )
        self.timer_at = now if timer is not None else float("inf")
        self.restart_at = None
        self.incarnations += 1

    def _step(self, name: str) -> None:
        if self._crash_at_step(name):
            raise ControllerCrash(name)

    def _posted(self, segment: str) -> None:
        """A request was posted to ``segment``: its processor reads it at once."""
        for p in self.processors:
            if p.segment == segment:
                p.read_at = min(p.read_at, self._clock.monotonic())

    def crash(self, restart_in_s: float) -> None:
        """Kill the process: everything it held is dropped; it restarts later."""
        self.controller = self.store = self.timer = None
        for p in self.processors:
            p.pool.tasks.clear()
        self.processors = []
        self.timer_at = float("inf")
        self.restart_at = self._clock.monotonic() + restart_in_s

    # --- the event processors and the timer, stepped by the simulator ------------------------
    @property
    def busy(self) -> bool:
        """Whether a processor has a request not finished."""
        return any(p.busy for p in self.processors)

    def read(self, p: SimProcessor) -> int:
        """One round of ``p``'s reading loop (no wait); requests read."""
        with self._busy():
            read = p.processor.run_once(0.0)
        busy = bool(p.pool.tasks) or bool(p.processor._pending)
        p.read_at = self._clock.monotonic() + p.processor.read_wait_s() if busy else float("inf")
        return read

    def run_task(self, p: SimProcessor) -> None:
        """Run the oldest task of ``p``'s pool (the requests of one stream)."""
        with self._busy():
            p.pool.tasks.popleft()()
        if p in self.processors and (p.pool.tasks or p.processor._pending):
            p.read_at = min(p.read_at, self._clock.monotonic() + p.processor.read_wait_s())

    def sweep(self) -> int:
        """One sweep of the transaction timer (at the wall clock's time); aborted count."""
        timer = self.timer
        assert timer is not None
        self.timer_at = self._clock.monotonic() + TXN_TIMER_PERIOD_S
        with self._busy():
            return timer.run_once()

    # --- the clients' controller connection ----------------------------------------------------
    def _call(self, call: Callable[[Controller], R]) -> R:
        controller = self.controller
        if controller is None:
            raise ControllerUnavailableError("the controller is down")
        try:
            with self._busy():
                return call(controller)
        except RetriableError as e:  # its records' container is restarting
            raise ControllerUnavailableError(f"controller call failed: {e}") from e

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        return self._call(lambda c: c.get_stream_info(scope, stream))

    def get_current_segments(self, scope: str, stream: str) -> tuple[SegmentRange, ...]:
        return self._call(lambda c: c.get_current_segments(scope, stream))

    def get_successors(
        self, scope: str, stream: str, segment_id: int
    ) -> dict[SegmentRange, list[int]]:
        return self._call(lambda c: c.get_successors(scope, stream, segment_id))

    def get_epoch(self, scope: str, stream: str, epoch: int) -> EpochInfo:
        return self._call(lambda c: c.get_epoch(scope, stream, epoch))

    def scale_stream(
        self, scope: str, stream: str, sealed: list[int], ranges: list[tuple[float, float]]
    ) -> int:
        """Ask for a scale (the request is posted: the processor reads it at once)."""
        epoch = self._call(lambda c: c.scale_stream(scope, stream, sealed, ranges))
        if self.processors:
            self.processors[0].read_at = self._clock.monotonic()
        return epoch

    def note_writer_mark(
        self, scope: str, stream: str, writer_id: str, time_ms: int, position: dict[int, int]
    ) -> bool:
        """A writer's mark (``MarkSender`` calls it): as a client's call of the controller."""
        return self._call(lambda c: c.note_writer_mark(scope, stream, writer_id, time_ms, position))

    def writer_closed(
        self, scope: str, stream: str, writer_id: str, position: dict[int, int]
    ) -> bool:
        return self._call(lambda c: c.writer_closed(scope, stream, writer_id, position))

    def watermark(self, scope: str, stream: str) -> Watermark | None:
        """One iteration of the watermark workflow (``PeriodicWatermarking.run``, as a stream
        bucket runs it) on this process's records and segments, at the virtual clock; the
        ``controller_crash`` fault strikes between its steps (:class:`ControllerCrash`).
        ControllerUnavailableError while the process is down."""
        store = self.store
        if store is None or self.controller is None:
            raise ControllerUnavailableError("the controller is down")
        workflow = PeriodicWatermarking(
            StreamMetadataStore(store), store, self._helper(), clock=self._clock, step=self._step
        )
        with self._busy():
            return workflow.run(scope, stream)

    def call(self, call: Callable[[Controller], R]) -> R:
        """Any other call of the controller's API (``call(controller)``), as a client makes
        it: ControllerUnavailableError while it is down or its records' container restarts."""
        return self._call(call)

    def all_keys(self) -> list[str]:
        """Every record's key (the final checks)."""
        store = self.store
        if store is None:
            raise ControllerUnavailableError("the controller is down")
        with self._busy():
            return store.all_keys()


def covers_key_space(segments: Iterable[SegmentRange]) -> bool:
    """Whether ``segments`` cover [0, 1) exactly: contiguous, no overlap."""
    ordered = sorted(segments, key=lambda s: s.key_low)
    if not ordered or ordered[0].key_low != 0.0 or ordered[-1].key_high != 1.0:
        return False
    return all(a.key_high == b.key_low for a, b in itertools.pairwise(ordered))
