"""The client's controller: which calls it repeats when their outcome is unknown, and how.

:class:`ControllerClient` implements the controller's service surface
(:class:`~pravega_ray.contracts.controller_service.ControllerService`) with one explicit method per
call, and hands each call to a :class:`ControllerInvoker` (the Ray actor or an in-process
controller; the client never imports Ray).

A controller call fails with :class:`ControllerUnavailableError` when the controller
instance died or restarted mid-call: the call may or may not have taken effect. Repeating
it is safe only if doing it twice is the same as doing it once, so
:class:`ControllerClient` repeats (at most ``CONTROLLER_CALL_ATTEMPTS_MAX`` calls in all,
logging each) exactly these. While the invoker has other instances to try (its
``instance_count``), the first ``instance_count - 1`` repeats go out at once (the invoker
sends them to another instance); the later ones 0.5 s apart:

* reads (``list_*``, ``get_*``, ``damaged_records``);
* ``seal_stream``, ``update_stream`` and ``scale_stream``: a repeated request runs the same
  idempotent workflow (a repeated scale of the scale under way answers its epoch; one that
  finished in between fails with ScaleConflictError, its segments being sealed, and the
  client then answers the epoch that scale made if the stream's history shows exactly it);
* transaction calls: a repeated commit (waiting or not) or abort answers the status it
  reached, a repeated ping renews the lease again; a repeated ``create_transaction`` may
  leave the first transaction behind, unused: its lease runs out and the timer aborts it;
* ``create_state_synchronizer``: it creates only what is absent and answers the record;
* creates, which it sends with a ``request_id`` the controller stores in the record,
  so a create that landed before its reply was lost answers True again, not False.
* subscriber calls: a repeated add or delete that landed answers False (done already),
  a repeated cut update True (the same cut again is accepted); one overtaken by a later
  update of the same subscriber fails with InvalidArgumentError (behind its cut).

Deletes (``delete_stream`` too) are not repeated: a repeat could not tell "I deleted it"
from "it was not there". Their ControllerUnavailableError reaches the caller, who knows
whether to try again. (Readers do not sync through the controller: they change their
group's state in its state segment, ``client/reader_group_synchronizer.py``.)
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from pravega_ray.constants import CONTROLLER_CALL_ATTEMPTS_MAX
from pravega_ray.contracts.controller_service import ControllerService
from pravega_ray.contracts.records import (
    EpochInfo,
    KeyValueTableInfo,
    SegmentRange,
    StreamInfo,
    TxnInfo,
    TxnStatus,
)
from pravega_ray.errors import ControllerUnavailableError, ScaleConflictError
from pravega_ray.naming import segment_epoch
from pravega_ray.retry import repeat_while
from pravega_ray.stream_configuration import ReaderGroupConfig, StreamConfiguration
from pravega_ray.stream_cut import StreamCut
from pravega_ray.timing import DAEMON_THREADS, ThreadScheduler

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

RETRY_PAUSE_S = 0.5


class ControllerInvoker(Protocol):
    """Performs one controller call, once.

    ``method`` is the Protocol's own function (``ControllerService.create_scope``); the
    invoker calls the method of that name on its controller
    (:func:`pravega_ray.contracts.controller_service.method_name`). Raises what the call raised,
    and ControllerUnavailableError when the outcome is unknown.

    An invoker over several controller instances may have an int attribute
    ``instance_count``: how many it spreads calls over. After a call failed with
    ControllerUnavailableError, its next calls go to another instance while one is left.
    """

    def invoke(
        self,
        method: Callable[Concatenate[ControllerService, P], R],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R: ...


class ControllerClient:
    """:class:`ControllerService` for clients: each call through ``invoker``, with its policy
    for an unknown outcome (the module docstring); repeats pause through ``scheduler``."""

    def __init__(
        self,
        invoker: ControllerInvoker,
        *,
        attempts_max: int = CONTROLLER_CALL_ATTEMPTS_MAX,
        pause_s: float = RETRY_PAUSE_S,
        scheduler: ThreadScheduler = DAEMON_THREADS,
    ) -> None:
        self._invoker = invoker
        count = getattr(invoker, "instance_count", 1)
        self._instances = count if isinstance(count, int) and count >= 1 else 1
        self._attempts_max = attempts_max
        self._pause_s = pause_s
        self._scheduler = scheduler

    def _once(
        self,
        method: Callable[Concatenate[ControllerService, P], R],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """Not repeated: ControllerUnavailableError reaches the caller."""
        return self._invoker.invoke(method, *args, **kwargs)

    def _repeated(
        self,
        method: Callable[Concatenate[ControllerService, P], R],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """Repeated on ControllerUnavailableError, up to ``attempts_max`` calls in all: the
        first ``instance_count - 1`` repeats at once (on other instances), then ``pause_s``
        apart."""
        return self._repeated_call(
            lambda: self._invoker.invoke(method, *args, **kwargs), method.__name__
        )

    def _repeated_call(self, call: Callable[[], R], name: str) -> R:
        """``call`` (one controller call, ``name``) repeated as :meth:`_repeated` says."""
        failovers = min(self._instances - 1, self._attempts_max - 1)
        for attempt in range(1, failovers + 1):
            try:
                return call()
            except ControllerUnavailableError as e:
                log.info("controller call %s: %s; trying another instance (%d)", name, e, attempt)
        return repeat_while(
            ControllerUnavailableError,
            call,
            what=f"controller call {name}",
            log=log,
            attempts_max=self._attempts_max - failovers,
            pause_s=self._pause_s,
            scheduler=self._scheduler,
        )

    # --- cluster ---------------------------------------------------------------------------------
    def get_cluster_config(self) -> dict[str, Any]:
        return self._repeated(ControllerService.get_cluster_config)

    def damaged_records(self) -> dict[str, str]:
        return self._repeated(ControllerService.damaged_records)

    # --- scopes ----------------------------------------------------------------------------------
    def create_scope(self, scope: str, request_id: str | None = None) -> bool:
        return self._repeated(
            ControllerService.create_scope, scope, request_id=_request_id(request_id)
        )

    def list_scopes(self) -> list[str]:
        return self._repeated(ControllerService.list_scopes)

    def delete_scope(self, scope: str) -> bool:
        return self._once(ControllerService.delete_scope, scope)

    def delete_scope_recursive(self, scope: str) -> bool:
        return self._repeated(ControllerService.delete_scope_recursive, scope)

    # --- streams ---------------------------------------------------------------------------------
    def create_stream(
        self,
        scope: str,
        stream: str,
        config: StreamConfiguration | None,
        request_id: str | None = None,
    ) -> bool:
        return self._repeated(
            ControllerService.create_stream,
            scope,
            stream,
            config,
            request_id=_request_id(request_id),
        )

    def list_streams(self, scope: str) -> list[str]:
        return self._repeated(ControllerService.list_streams, scope)

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        return self._repeated(ControllerService.get_stream_info, scope, stream)

    def get_current_segments(self, scope: str, stream: str) -> tuple[SegmentRange, ...]:
        return self._repeated(ControllerService.get_current_segments, scope, stream)

    def get_successors(
        self, scope: str, stream: str, segment_id: int
    ) -> dict[SegmentRange, list[int]]:
        return self._repeated(ControllerService.get_successors, scope, stream, segment_id)

    def get_predecessors(self, scope: str, stream: str, segment_id: int) -> list[SegmentRange]:
        return self._repeated(ControllerService.get_predecessors, scope, stream, segment_id)

    def get_segments_at_time(self, scope: str, stream: str, time_ms: int) -> StreamCut:
        return self._repeated(ControllerService.get_segments_at_time, scope, stream, time_ms)

    def get_epoch_segments(self, scope: str, stream: str, epoch: int) -> list[SegmentRange]:
        return self._repeated(ControllerService.get_epoch_segments, scope, stream, epoch)

    def get_epoch(self, scope: str, stream: str, epoch: int) -> EpochInfo:
        return self._repeated(ControllerService.get_epoch, scope, stream, epoch)

    def get_segments_between(
        self, scope: str, stream: str, start: dict[int, int], end: dict[int, int] | None
    ) -> list[SegmentRange]:
        return self._repeated(ControllerService.get_segments_between, scope, stream, start, end)

    # --- stream cuts: read-only, repeated on ControllerUnavailableError --------------------------
    def get_head_cut(self, scope: str, stream: str) -> StreamCut:
        return self._repeated(ControllerService.get_head_cut, scope, stream)

    def get_tail_cut(self, scope: str, stream: str) -> StreamCut:
        return self._repeated(ControllerService.get_tail_cut, scope, stream)

    def scale_stream(
        self,
        scope: str,
        stream: str,
        sealed_segment_ids: list[int],
        new_key_ranges: list[tuple[float, float]],
    ) -> int:
        """Repeated as the module docstring says; a repeat after an unknown outcome that
        fails with ScaleConflictError because the scale finished in between (its segments
        were sealed and replaced by exactly ``new_key_ranges``) answers the epoch that scale
        created, as the lost reply would have. A first call's ScaleConflictError stands."""
        repeated = [False]

        def call() -> int:
            try:
                return self._invoker.invoke(
                    ControllerService.scale_stream,
                    scope,
                    stream,
                    sealed_segment_ids,
                    new_key_ranges,
                )
            except ControllerUnavailableError:
                repeated[0] = True
                raise

        try:
            return self._repeated_call(call, "scale_stream")
        except ScaleConflictError:
            if not repeated[0]:
                raise
            epoch = self._finished_scale(scope, stream, sealed_segment_ids, new_key_ranges)
            if epoch is None:
                raise
            log.info("scale of %s/%s: done by the call whose reply was lost", scope, stream)
            return epoch

    def _finished_scale(
        self,
        scope: str,
        stream: str,
        sealed_segment_ids: list[int],
        new_key_ranges: list[tuple[float, float]],
    ) -> int | None:
        """The epoch of the scale that sealed exactly ``sealed_segment_ids`` and replaced
        them by exactly ``new_key_ranges``, if one did; else None."""
        if not sealed_segment_ids:
            return None
        successors = self.get_successors(scope, stream, sealed_segment_ids[0])
        ranges = sorted((r.key_low, r.key_high) for r in successors)
        predecessors = {p for preds in successors.values() for p in preds}
        epochs = {segment_epoch(r.segment_id) for r in successors}
        wanted = sorted((float(low), float(high)) for low, high in new_key_ranges)
        if ranges != wanted or predecessors != set(sealed_segment_ids) or len(epochs) != 1:
            return None
        return epochs.pop()

    def check_scale(self, scope: str, stream: str, epoch: int) -> bool:
        return self._repeated(ControllerService.check_scale, scope, stream, epoch)

    def update_stream(self, scope: str, stream: str, config: StreamConfiguration) -> bool:
        return self._repeated(ControllerService.update_stream, scope, stream, config)

    def check_update(self, scope: str, stream: str) -> bool:
        return self._repeated(ControllerService.check_update, scope, stream)

    def truncate_stream(self, scope: str, stream: str, cut: StreamCut) -> bool:
        return self._repeated(ControllerService.truncate_stream, scope, stream, cut)

    def check_truncate(self, scope: str, stream: str) -> bool:
        return self._repeated(ControllerService.check_truncate, scope, stream)

    def seal_stream(self, scope: str, stream: str) -> bool:
        return self._repeated(ControllerService.seal_stream, scope, stream)

    def delete_stream(self, scope: str, stream: str) -> bool:
        return self._once(ControllerService.delete_stream, scope, stream)

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
        return self._repeated(
            ControllerService.create_key_value_table,
            scope,
            table,
            partitions,
            request_id=_request_id(request_id),
            primary_key_length=primary_key_length,
            secondary_key_length=secondary_key_length,
        )

    def get_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        return self._repeated(ControllerService.get_key_value_table, scope, table)

    def get_active_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        return self._repeated(ControllerService.get_active_key_value_table, scope, table)

    def list_key_value_tables(self, scope: str) -> list[str]:
        return self._repeated(ControllerService.list_key_value_tables, scope)

    def delete_key_value_table(self, scope: str, table: str) -> bool:
        return self._once(ControllerService.delete_key_value_table, scope, table)

    # --- reader groups ---------------------------------------------------------------------------
    def create_reader_group(
        self, scope: str, group: str, config: ReaderGroupConfig, request_id: str | None = None
    ) -> bool:
        return self._repeated(
            ControllerService.create_reader_group,
            scope,
            group,
            config,
            request_id=_request_id(request_id),
        )

    def list_reader_groups(self, scope: str) -> list[str]:
        return self._repeated(ControllerService.list_reader_groups, scope)

    def get_reader_group(self, scope: str, group: str) -> dict[str, Any]:
        return self._repeated(ControllerService.get_reader_group, scope, group)

    def delete_reader_group(self, scope: str, group: str) -> bool:
        return self._once(ControllerService.delete_reader_group, scope, group)

    # --- state synchronizers ----------------------------------------------------------------------
    def create_state_synchronizer(self, scope: str, name: str) -> dict[str, Any]:
        return self._repeated(ControllerService.create_state_synchronizer, scope, name)

    def list_state_synchronizers(self, scope: str) -> list[str]:
        return self._repeated(ControllerService.list_state_synchronizers, scope)

    def delete_state_synchronizer(self, scope: str, name: str) -> bool:
        return self._once(ControllerService.delete_state_synchronizer, scope, name)

    # --- transactions ----------------------------------------------------------------------------
    def create_transaction(self, scope: str, stream: str, lease_s: float) -> TxnInfo:
        return self._repeated(ControllerService.create_transaction, scope, stream, lease_s)

    def ping_transaction(self, scope: str, stream: str, txn_id: uuid.UUID, lease_s: float) -> int:
        return self._repeated(ControllerService.ping_transaction, scope, stream, txn_id, lease_s)

    def commit_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        return self._repeated(ControllerService.commit_transaction, scope, stream, txn_id)

    def commit_transaction_and_wait(
        self, scope: str, stream: str, txn_id: uuid.UUID, timeout_s: float
    ) -> TxnStatus:
        # Repeated: a repeat asks for the same commit and answers the status it reached.
        return self._repeated(
            ControllerService.commit_transaction_and_wait, scope, stream, txn_id, timeout_s
        )

    def abort_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        return self._repeated(ControllerService.abort_transaction, scope, stream, txn_id)

    def check_transaction_status(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        return self._repeated(ControllerService.check_transaction_status, scope, stream, txn_id)

    def get_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnInfo:
        return self._repeated(ControllerService.get_transaction, scope, stream, txn_id)

    def list_transactions(self, scope: str, stream: str) -> dict[uuid.UUID, TxnStatus]:
        return self._repeated(ControllerService.list_transactions, scope, stream)

    def list_completed_transactions(self, scope: str, stream: str) -> dict[uuid.UUID, TxnStatus]:
        return self._repeated(ControllerService.list_completed_transactions, scope, stream)

    # --- writers' marks: all repeated (a repeat stores the same mark, or answers False) --------
    def note_writer_mark(
        self, scope: str, stream: str, writer_id: str, time_ms: int, position: dict[int, int]
    ) -> bool:
        return self._repeated(
            ControllerService.note_writer_mark, scope, stream, writer_id, time_ms, position
        )

    def writer_closed(
        self, scope: str, stream: str, writer_id: str, position: dict[int, int]
    ) -> bool:
        return self._repeated(ControllerService.writer_closed, scope, stream, writer_id, position)

    def remove_writer(self, scope: str, stream: str, writer_id: str) -> bool:
        return self._repeated(ControllerService.remove_writer, scope, stream, writer_id)

    def list_writers(self, scope: str, stream: str) -> dict[str, int]:
        return self._repeated(ControllerService.list_writers, scope, stream)

    # --- subscribers (retention): all repeated ---------------------------------------------------
    # A repeat of a call that landed answers False (add, delete: already done) or True
    # (update: the same cut again is accepted), never a wrong state.
    def add_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        return self._repeated(
            ControllerService.add_subscriber, scope, stream, subscriber, generation
        )

    def update_subscriber_stream_cut(
        self, scope: str, stream: str, subscriber: str, generation: int, cut: StreamCut
    ) -> bool:
        return self._repeated(
            ControllerService.update_subscriber_stream_cut,
            scope,
            stream,
            subscriber,
            generation,
            cut,
        )

    def delete_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        return self._repeated(
            ControllerService.delete_subscriber, scope, stream, subscriber, generation
        )

    def list_subscribers(self, scope: str, stream: str) -> list[str]:
        return self._repeated(ControllerService.list_subscribers, scope, stream)

    # --- reader-group positions (checkpoints and reset_to): repeated (a read) --------------------
    def get_reader_group_positions(
        self, config: ReaderGroupConfig
    ) -> tuple[dict[str, int], dict[str, int]]:
        return self._repeated(ControllerService.get_reader_group_positions, config)


def _request_id(request_id: str | None) -> str:
    """The caller's request id, else a new one: the same for every repeat of a create."""
    return request_id if request_id is not None else uuid.uuid4().hex
