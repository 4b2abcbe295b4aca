"""Ray shell of the controller API: owns one ``Controller``; its records live in table segments
of ``_system`` (the request event processor and the stream buckets are actors of their own).

A cluster runs one or more instances of this actor (``controller``, ``controller-1``, ...), all
on the same records: any instance serves any call, since the records change by compare-and-set
only and the workflows are serialized per stream by the request event processor."""

from __future__ import annotations

import os
import uuid
from typing import Any

import ray

from pravega_ray.contracts.records import (
    EpochInfo,
    KeyValueTableInfo,
    SegmentRange,
    StreamInfo,
    TxnInfo,
    TxnStatus,
)
from pravega_ray.controller.controller import Controller
from pravega_ray.controller.stream_transaction_metadata_tasks import WatchedCommitWaiter
from pravega_ray.stream_configuration import ReaderGroupConfig, StreamConfiguration
from pravega_ray.stream_cut import StreamCut
from pravega_ray_actors.commit_processor_actor import ProcessorCommitWaiter
from pravega_ray_actors.controller_parts import controller_parts
from pravega_ray_actors.options import CONTROLLER_READS_GROUP, CONTROLLER_TXNS_GROUP, NAMESPACE
from pravega_ray_actors.ray_metrics import setup_actor_process


class ControllerActor:
    """The controller's service surface (``ControllerService``) as actor methods.

    Each method forwards to the one ``Controller`` this actor owns: Ray needs real
    methods, and a forward per call keeps the actor's surface the Protocol's, checked by
    ``tests/unit/controller/test_service_surface.py``. The actor is threaded: the controller
    core is thread-safe, and each call runs in the concurrency group of its family
    (:data:`CALL_GROUPS`), so reads never wait behind a slow create or scale, and a
    ``commit_transaction_and_wait`` waits on a thread of the transactions group (for its
    store's watcher to apply the completed record, :class:`WatchedCommitWaiter`, or through
    the commit processor, :class:`ProcessorCommitWaiter`) while other calls are answered.
    ``instance`` is this actor's number among the cluster's controller instances.
    """

    def __init__(
        self,
        tier1: str,
        tier2: str,
        container_count: int,
        namespace: str = NAMESPACE,
        instance: int = 0,
    ) -> None:
        setup_actor_process()
        self._tiers = {"tier1": tier1, "tier2": tier2}
        self._instance = instance
        parts = controller_parts(tier2, container_count, namespace, watch=True)
        segments = parts.segments
        store = parts.metadata
        self._controller = Controller(
            store,
            segments,
            container_count,
            set_policy=segments.set_scale_policy,
            commit_waiter=WatchedCommitWaiter(store, ProcessorCommitWaiter(namespace)),
        )

    def describe(self) -> dict[str, object]:
        return {
            **self._tiers,
            "container_count": self._controller.container_count,
            "instance": self._instance,
            "pid": os.getpid(),
        }

    # --- cluster ---------------------------------------------------------------------------------
    def get_cluster_config(self) -> dict[str, Any]:
        return self._controller.get_cluster_config()

    def damaged_records(self) -> dict[str, str]:
        return self._controller.damaged_records()

    # --- scopes ----------------------------------------------------------------------------------
    def create_scope(self, scope: str, request_id: str | None = None) -> bool:
        return self._controller.create_scope(scope, request_id)

    def list_scopes(self) -> list[str]:
        return self._controller.list_scopes()

    def delete_scope(self, scope: str) -> bool:
        return self._controller.delete_scope(scope)

    def delete_scope_recursive(self, scope: str) -> bool:
        return self._controller.delete_scope_recursive(scope)

    # --- streams ---------------------------------------------------------------------------------
    def create_stream(
        self,
        scope: str,
        stream: str,
        config: StreamConfiguration | None,
        request_id: str | None = None,
    ) -> bool:
        return self._controller.create_stream(scope, stream, config, request_id)

    def list_streams(self, scope: str) -> list[str]:
        return self._controller.list_streams(scope)

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        return self._controller.get_stream_info(scope, stream)

    def get_current_segments(self, scope: str, stream: str) -> tuple[SegmentRange, ...]:
        return self._controller.get_current_segments(scope, stream)

    def get_successors(
        self, scope: str, stream: str, segment_id: int
    ) -> dict[SegmentRange, list[int]]:
        return self._controller.get_successors(scope, stream, segment_id)

    def get_predecessors(self, scope: str, stream: str, segment_id: int) -> list[SegmentRange]:
        return self._controller.get_predecessors(scope, stream, segment_id)

    def get_segments_at_time(self, scope: str, stream: str, time_ms: int) -> StreamCut:
        return self._controller.get_segments_at_time(scope, stream, time_ms)

    def get_epoch_segments(self, scope: str, stream: str, epoch: int) -> list[SegmentRange]:
        return self._controller.get_epoch_segments(scope, stream, epoch)

    def get_epoch(self, scope: str, stream: str, epoch: int) -> EpochInfo:
        return self._controller.get_epoch(scope, stream, epoch)

    def get_segments_between(
        self, scope: str, stream: str, start: dict[int, int], end: dict[int, int] | None
    ) -> list[SegmentRange]:
        return self._controller.get_segments_between(scope, stream, start, end)

    # --- stream cuts ----------------------------------------------------------------
    def get_head_cut(self, scope: str, stream: str) -> StreamCut:
        return self._controller.get_head_cut(scope, stream)

    def get_tail_cut(self, scope: str, stream: str) -> StreamCut:
        return self._controller.get_tail_cut(scope, stream)

    def scale_stream(
        self,
        scope: str,
        stream: str,
        sealed_segment_ids: list[int],
        new_key_ranges: list[tuple[float, float]],
    ) -> int:
        return self._controller.scale_stream(scope, stream, sealed_segment_ids, new_key_ranges)

    def check_scale(self, scope: str, stream: str, epoch: int) -> bool:
        return self._controller.check_scale(scope, stream, epoch)

    def update_stream(self, scope: str, stream: str, config: StreamConfiguration) -> bool:
        return self._controller.update_stream(scope, stream, config)

    def check_update(self, scope: str, stream: str) -> bool:
        return self._controller.check_update(scope, stream)

    def truncate_stream(self, scope: str, stream: str, cut: StreamCut) -> bool:
        return self._controller.truncate_stream(scope, stream, cut)

    def check_truncate(self, scope: str, stream: str) -> bool:
        return self._controller.check_truncate(scope, stream)

    def seal_stream(self, scope: str, stream: str) -> bool:
        return self._controller.seal_stream(scope, stream)

    def delete_stream(self, scope: str, stream: str) -> bool:
        return self._controller.delete_stream(scope, stream)

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
        return self._controller.create_key_value_table(
            scope, table, partitions, request_id, primary_key_length, secondary_key_length
        )

    def get_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        return self._controller.get_key_value_table(scope, table)

    def get_active_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        return self._controller.get_active_key_value_table(scope, table)

    def list_key_value_tables(self, scope: str) -> list[str]:
        return self._controller.list_key_value_tables(scope)

    def delete_key_value_table(self, scope: str, table: str) -> bool:
        return self._controller.delete_key_value_table(scope, table)

    # --- reader groups ---------------------------------------------------------------------------
    def create_reader_group(
        self, scope: str, group: str, config: ReaderGroupConfig, request_id: str | None = None
    ) -> bool:
        return self._controller.create_reader_group(scope, group, config, request_id)

    def list_reader_groups(self, scope: str) -> list[str]:
        return self._controller.list_reader_groups(scope)

    def get_reader_group(self, scope: str, group: str) -> dict[str, Any]:
        return self._controller.get_reader_group(scope, group)

    def delete_reader_group(self, scope: str, group: str) -> bool:
        return self._controller.delete_reader_group(scope, group)

    # --- state synchronizers ----------------------------------------------------------------------
    def create_state_synchronizer(self, scope: str, name: str) -> dict[str, Any]:
        return self._controller.create_state_synchronizer(scope, name)

    def list_state_synchronizers(self, scope: str) -> list[str]:
        return self._controller.list_state_synchronizers(scope)

    def delete_state_synchronizer(self, scope: str, name: str) -> bool:
        return self._controller.delete_state_synchronizer(scope, name)

    # --- transactions ----------------------------------------------------------------------------
    def create_transaction(self, scope: str, stream: str, lease_s: float) -> TxnInfo:
        return self._controller.create_transaction(scope, stream, lease_s)

    def ping_transaction(self, scope: str, stream: str, txn_id: uuid.UUID, lease_s: float) -> int:
        return self._controller.ping_transaction(scope, stream, txn_id, lease_s)

    def commit_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        return self._controller.commit_transaction(scope, stream, txn_id)

    def commit_transaction_and_wait(
        self, scope: str, stream: str, txn_id: uuid.UUID, timeout_s: float
    ) -> TxnStatus:
        # Waits in this actor: a thread of its own (see controller_options' concurrency).
        return self._controller.commit_transaction_and_wait(scope, stream, txn_id, timeout_s)

    def abort_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        return self._controller.abort_transaction(scope, stream, txn_id)

    def check_transaction_status(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        return self._controller.check_transaction_status(scope, stream, txn_id)

    def get_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnInfo:
        return self._controller.get_transaction(scope, stream, txn_id)

    def list_transactions(self, scope: str, stream: str) -> dict[uuid.UUID, TxnStatus]:
        return self._controller.list_transactions(scope, stream)

    def list_completed_transactions(self, scope: str, stream: str) -> dict[uuid.UUID, TxnStatus]:
        return self._controller.list_completed_transactions(scope, stream)

    # --- writers' marks (watermarks) -------------------------------------------------------------
    def note_writer_mark(
        self, scope: str, stream: str, writer_id: str, time_ms: int, position: dict[int, int]
    ) -> bool:
        return self._controller.note_writer_mark(scope, stream, writer_id, time_ms, position)

    def writer_closed(
        self, scope: str, stream: str, writer_id: str, position: dict[int, int]
    ) -> bool:
        return self._controller.writer_closed(scope, stream, writer_id, position)

    def remove_writer(self, scope: str, stream: str, writer_id: str) -> bool:
        return self._controller.remove_writer(scope, stream, writer_id)

    def list_writers(self, scope: str, stream: str) -> dict[str, int]:
        return self._controller.list_writers(scope, stream)

    # --- subscribers (retention) ------------------------------------------------------
    def add_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        return self._controller.add_subscriber(scope, stream, subscriber, generation)

    def update_subscriber_stream_cut(
        self, scope: str, stream: str, subscriber: str, generation: int, cut: StreamCut
    ) -> bool:
        return self._controller.update_subscriber_stream_cut(
            scope, stream, subscriber, generation, cut
        )

    def delete_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        return self._controller.delete_subscriber(scope, stream, subscriber, generation)

    def list_subscribers(self, scope: str, stream: str) -> list[str]:
        return self._controller.list_subscribers(scope, stream)

    # --- reader-group positions (checkpoints and reset_to) ----------------------------
    def get_reader_group_positions(
        self, config: ReaderGroupConfig
    ) -> tuple[dict[str, int], dict[str, int]]:
        return self._controller.get_reader_group_positions(config)


CALL_GROUPS: dict[str, tuple[str, ...]] = {
    CONTROLLER_READS_GROUP: (
        "describe",
        "get_cluster_config",
        "damaged_records",
        "list_scopes",
        "list_streams",
        "get_stream_info",
        "get_current_segments",
        "get_successors",
        "get_predecessors",
        "get_segments_at_time",
        "get_epoch_segments",
        "get_epoch",
        "get_segments_between",
        "get_head_cut",
        "get_tail_cut",
        "check_scale",
        "check_update",
        "check_truncate",
        "get_key_value_table",
        "get_active_key_value_table",
        "list_key_value_tables",
        "list_reader_groups",
        "get_reader_group",
        "list_state_synchronizers",
        "ping_transaction",
        "check_transaction_status",
        "get_transaction",
        "list_transactions",
        "list_completed_transactions",
        "list_subscribers",
        "list_writers",
        "get_reader_group_positions",
    ),
    CONTROLLER_TXNS_GROUP: (
        "create_transaction",
        "commit_transaction",
        "commit_transaction_and_wait",
        "abort_transaction",
    ),
}
"""The calls of each concurrency group but the default one (creates, scales, updates, seals,
truncates, deletes, subscriber changes), whose sizes ``actors/options.py`` sets."""

for _group, _names in CALL_GROUPS.items():
    for _name in _names:
        ray.method(concurrency_group=_group)(getattr(ControllerActor, _name))
