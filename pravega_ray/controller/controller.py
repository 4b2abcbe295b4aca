"""The controller's API: scopes, streams, key-value tables and reader groups, stored durably.

:class:`Controller` implements the controller's service surface
(:class:`~pravega_ray.contracts.controller_service.ControllerService`) by composing
services, as Pravega's ``ControllerService`` composes ``StreamMetadataTasks``,
``StreamTransactionMetadataTasks``, ``TableMetadataTasks`` and its stores. Each service
is a class whose constructor takes exactly what it uses:

* ``StreamMetadataTasks`` (``stream_metadata_tasks.py``): scopes and streams (create,
  scale, update, seal, delete, queries); takes the store, the segments, the steps, the
  clock, ``new_id`` and ``set_policy``;
* ``StreamTransactionMetadataTasks`` (``stream_transaction_metadata_tasks.py``):
  transactions; the store, the segments, the steps, the clock, the scheduler, the
  commit waiter;
* ``TableMetadataTasks`` (``table_metadata_tasks.py``): key-value tables; the store, the
  segments, the steps, the clock;
* ``ReaderGroupTasks`` (``reader_group_tasks.py``): reader groups and their positions;
  the store, the segments, the steps, the ``SubscriberTasks``, ``new_id``;
* ``StreamCutTasks`` (``stream_cut_tasks.py``): head, tail and time cuts, truncation,
  the segments between two cuts; the store, the segments, the steps, ``new_id``;
* ``SubscriberTasks`` (``subscriber_tasks.py``): retention subscribers and their
  acknowledgement cuts; the store, the segments, the steps;
* ``StateSynchronizerTasks`` (``state_synchronizer_tasks.py``): state synchronizers'
  records and segments; the store (and the records under it), the segments, the steps,
  ``new_id``.

*store* is the one :class:`StreamMetadataStore` over the records; *segments* the segment
containers (``SegmentHelper``), each service seeing only the calls it makes (a small
Protocol in its file); *steps* the one :class:`ControllerSteps` (``controller_steps.py``):
resuming workflows a crash interrupted, checking scope and stream names, running a
workflow step, posting a request to the request stream.

Robustness:

* Every argument is checked before anything is stored (typed errors from
  ``pravega_ray.errors``); a configuration must survive its own ``from_dict(to_dict())``.
* A record that cannot be read or parsed is :class:`DataCorruptionError` naming it, for
  the calls that touch it; it is *quarantined* by the stream metadata store: logged,
  listed by :meth:`Controller.damaged_records`, never overwritten, and every other
  record keeps working (workflows are resumed one record at a time).
* Calls are safe to repeat after a lost reply where the client retries them
  (``client/controller_connection.py``): creates carry a ``request_id`` stored in the
  record, so a repeated create that had landed answers True; a repeated scale of the
  scale under way answers its epoch; reader-group calls carry the reader's session.
* Names are never reused: a stream or key-value table re-created under a deleted one's
  name numbers its segments after the deleted one's (Pravega's safe starting segment
  number, kept in a ``deleted/`` record).

Thread-safe: a controller instance runs many calls at once, and several instances (actors)
may serve calls on the same records. The services keep no state between calls but what
:class:`ControllerSteps` keeps (locked); the records change by compare-and-set only, and
the workflows that change a stream are serialized per stream by the request event
processor, so any instance may serve any call.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pravega_ray.contracts.controller_service import ControllerService
from pravega_ray.contracts.records import (
    EpochInfo,
    KeyValueTableInfo,
    SegmentRange,
    StreamInfo,
    TxnInfo,
    TxnStatus,
)
from pravega_ray.contracts.segment_store import ReadResult
from pravega_ray.controller.controller_steps import ControllerSteps
from pravega_ray.controller.reader_group_tasks import ReaderGroupTasks
from pravega_ray.controller.request_stream import RequestStream
from pravega_ray.controller.state_synchronizer_tasks import StateSynchronizerTasks
from pravega_ray.controller.stream_cut_tasks import StreamCutTasks
from pravega_ray.controller.stream_metadata_store import MetadataStore, StreamMetadataStore
from pravega_ray.controller.stream_metadata_tasks import StreamMetadataTasks
from pravega_ray.controller.stream_transaction_metadata_tasks import (
    CommitWaiter,
    StreamTransactionMetadataTasks,
    local_commit_waiter,
)
from pravega_ray.controller.subscriber_tasks import SubscriberTasks
from pravega_ray.controller.table_metadata_tasks import TableMetadataTasks
from pravega_ray.controller.watermark_tasks import WatermarkTasks
from pravega_ray.stream_configuration import ReaderGroupConfig, ScalingPolicy, StreamConfiguration
from pravega_ray.stream_cut import StreamCut
from pravega_ray.timing import DAEMON_THREADS, SYSTEM_CLOCK, Clock, ThreadScheduler

__all__ = ["Controller", "SegmentStoreAdmin"]


class SegmentStoreAdmin(Protocol):
    """What the controller needs from segment containers (synchronous, retrying restarts):
    every call its services and the request stream make."""

    def create_segment(self, segment: str) -> None: ...

    def create_table_segment(self, segment: str) -> None: ...

    def seal_segment(self, segment: str) -> int: ...

    def delete_segment(self, segment: str) -> None: ...

    def append_plain(self, segment: str, data: bytes) -> int: ...

    def append_at(self, segment: str, data: bytes, expected_offset: int) -> bool: ...

    def read(self, segment: str, offset: int, max_bytes: int, wait_s: float) -> ReadResult: ...

    def truncate_segment(self, segment: str, offset: int) -> None: ...

    def segment_length(self, segment: str) -> int: ...

    def offset_at_time(self, segment: str, time_ms: int) -> int: ...

    def check_event_boundary(self, segment: str, offset: int) -> None: ...

    def create_segments(self, segments: Sequence[str]) -> None: ...

    def create_transaction_segments(self, segments: Sequence[str]) -> None: ...

    def delete_segments(self, segments: Sequence[str]) -> None: ...

    def seal_and_merge(self, sources: Mapping[str, Sequence[str]]) -> None: ...


class Controller:
    """Implements the controller's service surface
    (:class:`~pravega_ray.contracts.controller_service.ControllerService`, whose methods
    document each call) over the records of ``store`` and the segment containers reached
    through ``segments``, by delegating each call to the service that owns it (module
    docstring).

    ``clock`` gives the times records store and the pace of resuming workflows;
    ``scheduler`` paces the repeats of a request post whose outcome is unknown; ``new_id``
    names requests and reader-group incarnations; ``set_policy`` hands a new segment its
    stream's scaling policy; ``commit_waiter`` is how ``commit_transaction_and_wait``
    learns of a commit (by default this process's commit notices).
    """

    def __init__(
        self,
        store: MetadataStore,
        segments: SegmentStoreAdmin,
        container_count: int,
        *,
        clock: Clock = SYSTEM_CLOCK,
        scheduler: ThreadScheduler = DAEMON_THREADS,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        set_policy: Callable[[str, ScalingPolicy], None] = lambda segment, policy: None,
        commit_waiter: CommitWaiter = local_commit_waiter,
    ) -> None:
        self.container_count = container_count
        self._store = StreamMetadataStore(store)
        self._segments = segments
        requests = RequestStream(segments, scheduler=scheduler)
        self._steps = ControllerSteps(self._store, requests, clock)
        # Streams first: interrupted workflows are resumed in this order.
        self._streams = StreamMetadataTasks(
            self._store, segments, self._steps, clock, new_id=new_id, set_policy=set_policy
        )
        self._key_value_tables = TableMetadataTasks(self._store, segments, self._steps, clock)
        self._subscribers = SubscriberTasks(self._store, segments, self._steps)
        self._reader_groups = ReaderGroupTasks(
            self._store, segments, self._steps, self._subscribers, new_id=new_id
        )
        self._stream_cuts = StreamCutTasks(self._store, segments, self._steps, new_id=new_id)
        self._synchronizers = StateSynchronizerTasks(
            self._store, store, segments, self._steps, new_id=new_id
        )
        self._transactions = StreamTransactionMetadataTasks(
            self._store, segments, self._steps, clock, scheduler, commit_waiter
        )
        self._watermarks = WatermarkTasks(self._store, store, self._steps, clock=clock)

    # --- cluster ---------------------------------------------------------------------------------
    def get_cluster_config(self) -> dict[str, Any]:
        return {"container_count": self.container_count}

    def damaged_records(self) -> dict[str, str]:
        """Records found damaged (key -> what is wrong): quarantined, never overwritten."""
        return self._store.damaged_records()

    def resume_workflows(self) -> int:
        """Finish create/seal/delete workflows a crash interrupted; returns how many finished
        (:meth:`ControllerSteps.resume_workflows`)."""
        return self._steps.resume_workflows()

    # --- scopes ----------------------------------------------------------------------------------
    def create_scope(self, scope: str, request_id: str | None = None) -> bool:
        return self._streams.create_scope(scope, request_id)

    def list_scopes(self) -> list[str]:
        return self._streams.list_scopes()

    def delete_scope(self, scope: str) -> bool:
        return self._streams.delete_scope(scope)

    def delete_scope_recursive(self, scope: str) -> bool:
        return self._streams.delete_scope_recursive(scope)

    def request_seal_and_delete(self, scope: str, stream: str) -> None:
        """Post a seal request that deletes the stream once sealed (the recursive delete of
        its scope, ``scope_workflows.py``; not a service call); a duplicate is harmless."""
        self._steps.post("seal", scope, stream, then_delete=True)

    # --- streams ---------------------------------------------------------------------------------
    def create_stream(
        self,
        scope: str,
        stream: str,
        config: StreamConfiguration | None,
        request_id: str | None = None,
    ) -> bool:
        return self._streams.create_stream(scope, stream, config, request_id)

    def list_streams(self, scope: str) -> list[str]:
        return self._streams.list_streams(scope)

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        return self._streams.get_stream_info(scope, stream)

    def get_current_segments(self, scope: str, stream: str) -> tuple[SegmentRange, ...]:
        return self._streams.get_current_segments(scope, stream)

    def get_successors(
        self, scope: str, stream: str, segment_id: int
    ) -> dict[SegmentRange, list[int]]:
        return self._streams.get_successors(scope, stream, segment_id)

    def get_predecessors(self, scope: str, stream: str, segment_id: int) -> list[SegmentRange]:
        return self._streams.get_predecessors(scope, stream, segment_id)

    def get_segments_at_time(self, scope: str, stream: str, time_ms: int) -> StreamCut:
        return self._stream_cuts.get_segments_at_time(scope, stream, time_ms)

    def get_epoch_segments(self, scope: str, stream: str, epoch: int) -> list[SegmentRange]:
        return self._streams.get_epoch_segments(scope, stream, epoch)

    def get_epoch(self, scope: str, stream: str, epoch: int) -> EpochInfo:
        return self._streams.get_epoch(scope, stream, epoch)

    def get_segments_between(
        self, scope: str, stream: str, start: dict[int, int], end: dict[int, int] | None
    ) -> list[SegmentRange]:
        return self._stream_cuts.get_segments_between(scope, stream, start, end)

    # --- stream cuts (controller/stream_cut_tasks.py) -----------------------------------
    def get_head_cut(self, scope: str, stream: str) -> StreamCut:
        return self._stream_cuts.get_head_cut(scope, stream)

    def get_tail_cut(self, scope: str, stream: str) -> StreamCut:
        return self._stream_cuts.get_tail_cut(scope, stream)

    def scale_stream(
        self,
        scope: str,
        stream: str,
        sealed_segment_ids: list[int],
        new_key_ranges: list[tuple[float, float]],
    ) -> int:
        return self._streams.scale_stream(scope, stream, sealed_segment_ids, new_key_ranges)

    def check_scale(self, scope: str, stream: str, epoch: int) -> bool:
        return self._streams.check_scale(scope, stream, epoch)

    def update_stream(self, scope: str, stream: str, config: StreamConfiguration) -> bool:
        return self._streams.update_stream(scope, stream, config)

    def check_update(self, scope: str, stream: str) -> bool:
        return self._streams.check_update(scope, stream)

    def truncate_stream(self, scope: str, stream: str, cut: StreamCut) -> bool:
        return self._stream_cuts.truncate_stream(scope, stream, cut)

    def check_truncate(self, scope: str, stream: str) -> bool:
        return self._stream_cuts.check_truncate(scope, stream)

    def seal_stream(self, scope: str, stream: str) -> bool:
        return self._streams.seal_stream(scope, stream)

    def delete_stream(self, scope: str, stream: str) -> bool:
        return self._streams.delete_stream(scope, stream)

    # --- key-value tables ------------------------------------------------------------------------
    def create_key_value_table(
        self,
        scope: str,
        table: str,
        partitions: int,
        request_id: str | None = None,
        primary_key_length: int | None = None,
        secondary_key_length: int | None = None,
    ) -> bool:
        return self._key_value_tables.create_key_value_table(
            scope, table, partitions, request_id, primary_key_length, secondary_key_length
        )

    def get_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        return self._key_value_tables.get_key_value_table(scope, table)

    def get_active_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        return self._key_value_tables.get_active_key_value_table(scope, table)

    def list_key_value_tables(self, scope: str) -> list[str]:
        return self._key_value_tables.list_key_value_tables(scope)

    def delete_key_value_table(self, scope: str, table: str) -> bool:
        return self._key_value_tables.delete_key_value_table(scope, table)

    # --- reader groups ---------------------------------------------------------------------------
    def create_reader_group(
        self, scope: str, group: str, config: ReaderGroupConfig, request_id: str | None = None
    ) -> bool:
        return self._reader_groups.create_reader_group(scope, group, config, request_id)

    def list_reader_groups(self, scope: str) -> list[str]:
        return self._reader_groups.list_reader_groups(scope)

    def get_reader_group(self, scope: str, group: str) -> dict[str, Any]:
        return self._reader_groups.get_reader_group(scope, group)

    def delete_reader_group(self, scope: str, group: str) -> bool:
        return self._reader_groups.delete_reader_group(scope, group)

    # --- state synchronizers ----------------------------------------------------------------------
    def create_state_synchronizer(self, scope: str, name: str) -> dict[str, Any]:
        return self._synchronizers.create_state_synchronizer(scope, name)

    def list_state_synchronizers(self, scope: str) -> list[str]:
        return self._synchronizers.list_state_synchronizers(scope)

    def delete_state_synchronizer(self, scope: str, name: str) -> bool:
        return self._synchronizers.delete_state_synchronizer(scope, name)

    # --- transactions ----------------------------------------------------------------------------
    def create_transaction(self, scope: str, stream: str, lease_s: float) -> TxnInfo:
        return self._transactions.create_transaction(scope, stream, lease_s)

    def ping_transaction(self, scope: str, stream: str, txn_id: uuid.UUID, lease_s: float) -> int:
        return self._transactions.ping_transaction(scope, stream, txn_id, lease_s)

    def commit_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        return self._transactions.commit_transaction(scope, stream, txn_id)

    def commit_transaction_and_wait(
        self, scope: str, stream: str, txn_id: uuid.UUID, timeout_s: float
    ) -> TxnStatus:
        return self._transactions.commit_transaction_and_wait(scope, stream, txn_id, timeout_s)

    def abort_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        return self._transactions.abort_transaction(scope, stream, txn_id)

    def check_transaction_status(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        return self._transactions.check_transaction_status(scope, stream, txn_id)

    def get_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnInfo:
        return self._transactions.get_transaction(scope, stream, txn_id)

    def list_transactions(self, scope: str, stream: str) -> dict[uuid.UUID, TxnStatus]:
        return self._transactions.list_transactions(scope, stream)

    def list_completed_transactions(self, scope: str, stream: str) -> dict[uuid.UUID, TxnStatus]:
        return self._transactions.list_completed_transactions(scope, stream)

    # --- writers' marks (watermarks) -------------------------------------------------------------
    def note_writer_mark(
        self, scope: str, stream: str, writer_id: str, time_ms: int, position: dict[int, int]
    ) -> bool:
        return self._watermarks.note_writer_mark(scope, stream, writer_id, time_ms, position)

    def writer_closed(
        self, scope: str, stream: str, writer_id: str, position: dict[int, int]
    ) -> bool:
        return self._watermarks.writer_closed(scope, stream, writer_id, position)

    def remove_writer(self, scope: str, stream: str, writer_id: str) -> bool:
        return self._watermarks.remove_writer(scope, stream, writer_id)

    def list_writers(self, scope: str, stream: str) -> dict[str, int]:
        return self._watermarks.list_writers(scope, stream)

    # --- subscribers (retention) ------------------------------------------------------
    def add_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        return self._subscribers.add_subscriber(scope, stream, subscriber, generation)

    def update_subscriber_stream_cut(
        self, scope: str, stream: str, subscriber: str, generation: int, cut: StreamCut
    ) -> bool:
        return self._subscribers.update_subscriber_stream_cut(
            scope, stream, subscriber, generation, cut
        )

    def delete_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        return self._subscribers.delete_subscriber(scope, stream, subscriber, generation)

    def list_subscribers(self, scope: str, stream: str) -> list[str]:
        return self._subscribers.list_subscribers(scope, stream)

    # --- reader-group positions (checkpoints and reset_to) ----------------------------
    def get_reader_group_positions(
        self, config: ReaderGroupConfig
    ) -> tuple[dict[str, int], dict[str, int]]:
        return self._reader_groups.get_reader_group_positions(config)


def _implements_the_surface(controller: Controller) -> ControllerService:
    """Never called: the type checker holds :class:`Controller` to the Protocol here."""
    return controller


# --- one record-cache operation per call ----------------------------------------------------------
ONE_OPERATION_CALLS = (
    "get_stream_info",
    "get_current_segments",
    "get_successors",
    "get_predecessors",
    "get_epoch_segments",
    "get_epoch",
    "get_segments_at_time",
    "create_transaction",
    "ping_transaction",
    "check_transaction_status",
    "get_transaction",
    "get_key_value_table",
    "get_active_key_value_table",
    "get_reader_group",
)
"""Calls that run as one operation of the record cache (``StreamMetadataStore.operation``):
short calls that never wait for another process's write, so their reads of unchanged records
cost one round of change-log reads in all, not a table read each."""


def _one_operation(name: str) -> None:
    method = getattr(Controller, name)

    @functools.wraps(method)
    def call(self: Controller, *args: Any, **kwargs: Any) -> Any:
        with self._store.operation():
            return method(self, *args, **kwargs)

    setattr(Controller, name, call)


for _name in ONE_OPERATION_CALLS:
    _one_operation(_name)
