"""The controller's service surface: every call a client makes, typed, in one Protocol.

:class:`ControllerService` is implemented once, by
:class:`~pravega_ray.controller.controller.Controller`, and reached three ways, each
with an explicit method per call (no dispatch on name strings):

* the Ray actor (``actors/controller_actor.py``) forwards each method to its Controller;
* the client's :class:`~pravega_ray.client.controller_connection.ControllerClient`
  implements it too, holding the retry policy of each call, and hands every call to an
  *invoker*: :class:`~pravega_ray.cluster.RayControllerConnection` (one actor call, Ray's
  errors unwrapped in ``actors/ray_calls.py``) or ``pravega_ray.inprocess._LockedController``
  (a Controller in this process, under a lock, as the actor serializes calls).

An invoker is given the Protocol's own function (``ControllerService.create_scope``) and
calls the method of that name on its controller; :func:`method_name` checks it is one.
``tests/unit/controller/test_service_surface.py`` checks every implementation's signatures
against this Protocol.

Errors are the typed errors of :mod:`pravega_ray.errors`. Through an invoker, a call whose
outcome is unknown (the controller actor died or restarted mid-call) raises
:class:`~pravega_ray.errors.ControllerUnavailableError`. Creates take an optional
``request_id``, stored in the record, so a repeated create that landed answers True.
Reader groups: the controller creates, looks up and deletes them (and their state
segments); their members read and change the group's state in its state segment
themselves (``client/reader_group_synchronizer.py``), asking the controller only for
successors of segments they read to their ends.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from pravega_ray.contracts.records import (
    EpochInfo,
    KeyValueTableInfo,
    SegmentRange,
    StreamInfo,
    TxnInfo,
    TxnStatus,
)
from pravega_ray.invariant import invariant
from pravega_ray.stream_configuration import ReaderGroupConfig, StreamConfiguration
from pravega_ray.stream_cut import StreamCut


class ControllerService(Protocol):
    """Scopes, streams, key-value tables, reader groups and transactions (Pravega's
    controller service)."""

    # --- cluster ---------------------------------------------------------------------------------
    def get_cluster_config(self) -> dict[str, Any]:
        """``{"container_count": N}``: how segments are placed on containers."""
        ...

    def damaged_records(self) -> dict[str, str]:
        """Records found damaged (key -> what is wrong): quarantined, never overwritten."""
        ...

    # --- scopes ----------------------------------------------------------------------------------
    def create_scope(self, scope: str, request_id: str | None = None) -> bool:
        """Create ``scope``; False if it exists already (True again for a repeated request)."""
        ...

    def list_scopes(self) -> list[str]:
        """Every scope, sorted."""
        ...

    def delete_scope(self, scope: str) -> bool:
        """Delete an empty scope; False if absent.

        ScopeNotEmptyError while it has streams, key-value tables or reader groups.
        """
        ...

    def delete_scope_recursive(self, scope: str) -> bool:
        """Start deleting ``scope`` with everything in it (Pravega's
        ``deleteScopeRecursive``); False if absent, True once started (again: harmless).

        From now on creates in the scope raise IllegalStateError; the controller's request
        processor deletes its reader groups and key-value tables, seals and deletes its
        streams, then the scope. Poll :meth:`list_scopes` for the end.
        """
        ...

    # --- streams ---------------------------------------------------------------------------------
    def create_stream(
        self,
        scope: str,
        stream: str,
        config: StreamConfiguration | None,
        request_id: str | None = None,
    ) -> bool:
        """Create a stream with ``config.scaling.min_segments`` segments; False if it exists.

        Raises ScopeNotFoundError, InvalidNameError, InvalidArgumentError (config not a
        valid StreamConfiguration); nothing is stored then.
        """
        ...

    def list_streams(self, scope: str) -> list[str]:
        """The streams of ``scope``, sorted. Raises ScopeNotFoundError."""
        ...

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        """The stream's state, configuration and current segments.

        Raises ScopeNotFoundError, StreamNotFoundError, InvalidNameError, DataCorruptionError.
        """
        ...

    def get_current_segments(self, scope: str, stream: str) -> tuple[SegmentRange, ...]:
        """The segments of the stream's current epoch, with their routing-key ranges."""
        ...

    def get_successors(
        self, scope: str, stream: str, segment_id: int
    ) -> dict[SegmentRange, list[int]]:
        """The segments that replaced ``segment_id``, each with all its predecessors' ids;
        empty while it is active or once the stream is sealed."""
        ...

    def get_predecessors(self, scope: str, stream: str, segment_id: int) -> list[SegmentRange]:
        """The segments ``segment_id`` replaced (empty for a segment of epoch 0)."""
        ...

    def get_segments_at_time(self, scope: str, stream: str, time_ms: int) -> StreamCut:
        """The cut at ``time_ms``, exact to the event (the container's time index)."""
        ...

    def get_epoch_segments(self, scope: str, stream: str, epoch: int) -> list[SegmentRange]:
        """The segments of epoch ``epoch``; StreamNotFoundError if there is no such epoch."""
        ...

    def get_epoch(self, scope: str, stream: str, epoch: int) -> EpochInfo:
        """Epoch ``epoch`` with its creation time and segments (the REST API's scaling
        events); StreamNotFoundError if there is no such epoch."""
        ...

    def get_segments_between(
        self, scope: str, stream: str, start: dict[int, int], end: dict[int, int] | None
    ) -> list[SegmentRange]:
        """Every segment between two cuts (id -> offset; ``end`` None: the tail)."""
        ...

    # --- stream cuts (controller/stream_cut_tasks.py) -----------------------------------
    def get_head_cut(self, scope: str, stream: str) -> StreamCut:
        """The stream's head: its truncation cut, else epoch 0's segments at 0."""
        ...

    def get_tail_cut(self, scope: str, stream: str) -> StreamCut:
        """The current epoch's segments at their lengths (event boundaries)."""
        ...

    def scale_stream(
        self,
        scope: str,
        stream: str,
        sealed_segment_ids: list[int],
        new_key_ranges: list[tuple[float, float]],
    ) -> int:
        """Ask for a scale; returns the epoch it creates (poll ``check_scale``).

        StreamSealedError, ScaleConflictError, InvalidArgumentError; nothing changed then.
        """
        ...

    def check_scale(self, scope: str, stream: str, epoch: int) -> bool:
        """Whether the scale that creates ``epoch`` is done."""
        ...

    def update_stream(self, scope: str, stream: str, config: StreamConfiguration) -> bool:
        """Ask for a configuration update (poll ``check_update``); ConflictingUpdateError
        while another runs, StreamSealedError, InvalidArgumentError."""
        ...

    def check_update(self, scope: str, stream: str) -> bool:
        """Whether no update of the stream is pending."""
        ...

    def truncate_stream(self, scope: str, stream: str, cut: StreamCut) -> bool:
        """Ask for the stream to be truncated at ``cut`` (poll ``check_truncate``);
        InvalidArgumentError (not a cut of the stream, or behind its truncation),
        StreamSealedError, ConflictingUpdateError."""
        ...

    def check_truncate(self, scope: str, stream: str) -> bool:
        """Whether no truncation of the stream is pending."""
        ...

    def seal_stream(self, scope: str, stream: str) -> bool:
        """Ask for the stream to be sealed; True if it is SEALED already (else poll
        ``get_stream_info``)."""
        ...

    def delete_stream(self, scope: str, stream: str) -> bool:
        """Ask for a sealed stream's deletion; False if absent; StreamNotSealedError."""
        ...

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
        """Create a key-value table of ``partitions`` table segments; False if it exists.

        ``primary_key_length`` (and ``secondary_key_length``, None: 0) give the table key
        families (``records.check_key_lengths``), kept in its record. Raises
        ScopeNotFoundError, InvalidNameError, InvalidArgumentError (partitions outside
        [1, KVT_PARTITIONS_MAX], bad key lengths). A table of that name with another
        partition count or key lengths is still "exists" (False): both are fixed at creation.
        """
        ...

    def get_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        """The table's partitions and segments. Raises KeyValueTableNotFoundError."""
        ...

    def get_active_key_value_table(self, scope: str, table: str) -> KeyValueTableInfo:
        """As :meth:`get_key_value_table`, but IllegalStateError unless it is ACTIVE."""
        ...

    def list_key_value_tables(self, scope: str) -> list[str]:
        """The key-value tables of ``scope``, sorted. Raises ScopeNotFoundError."""
        ...

    def delete_key_value_table(self, scope: str, table: str) -> bool:
        """Delete the table and its segments; False if it does not exist."""
        ...

    # --- reader groups ---------------------------------------------------------------------------
    def create_reader_group(
        self, scope: str, group: str, config: ReaderGroupConfig, request_id: str | None = None
    ) -> bool:
        """Create a reader group at the head of its streams; False if it exists.

        Raises ScopeNotFoundError, StreamNotFoundError, InvalidNameError,
        InvalidArgumentError (config not a valid ReaderGroupConfig); nothing is stored then.
        Each creation is a new incarnation with a new group id.
        """
        ...

    def list_reader_groups(self, scope: str) -> list[str]:
        """The reader groups of ``scope``, sorted. Raises ScopeNotFoundError."""
        ...

    def get_reader_group(self, scope: str, group: str) -> dict[str, Any]:
        """The group's record: its state at creation, ``group_id`` and ``state_segment``,
        the table segment where its members keep the live state (readers and
        ``ReaderGroup`` objects read and change it there, not through the controller)."""
        ...

    def delete_reader_group(self, scope: str, group: str) -> bool:
        """Delete the group and its state segment; False if it does not exist. Its readers'
        next syncs fail.

        Raises ScopeNotFoundError, InvalidNameError, DataCorruptionError (a damaged
        record is not deleted blindly).
        """
        ...

    # --- state synchronizers (controller/state_synchronizer_tasks.py) ----------------------------
    def create_state_synchronizer(self, scope: str, name: str) -> dict[str, Any]:
        """The record of state synchronizer ``scope/name`` (``scope``, ``name``, ``sync_id``,
        ``segment``: the table segment its clients keep the state in), created if absent.
        Safe to repeat (two racing creates answer the same record).

        Raises InvalidNameError, ScopeNotFoundError, IllegalStateError (scope being
        deleted), DataCorruptionError.
        """
        ...

    def list_state_synchronizers(self, scope: str) -> list[str]:
        """The state synchronizers of ``scope``, sorted. Raises ScopeNotFoundError."""
        ...

    def delete_state_synchronizer(self, scope: str, name: str) -> bool:
        """Delete the synchronizer and its segment; False if it does not exist.

        Raises InvalidNameError, ScopeNotFoundError, DataCorruptionError.
        """
        ...

    # --- transactions ----------------------------------------------------------------------------
    def create_transaction(self, scope: str, stream: str, lease_s: float) -> TxnInfo:
        """Create a transaction on the stream's newest epoch, with one transaction segment
        per segment of it, OPEN for ``lease_s`` seconds unless pinged.

        Raises InvalidArgumentError (lease not a finite number in (0, TXN_LEASE_S_MAX]),
        StreamSealedError, StreamNotFoundError; nothing is stored then.
        """
        ...

    def ping_transaction(self, scope: str, stream: str, txn_id: uuid.UUID, lease_s: float) -> int:
        """Renew the lease to now + ``lease_s``, clamped to the transaction's maximum
        deadline; returns the new lease deadline (wall-clock ms).

        LeaseExpiredError if the lease already ran out or the maximum is reached (the
        transaction is aborted); TxnFailedError if it is not OPEN; TxnNotFoundError.
        """
        ...

    def commit_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        """Ask for the commit (COMMITTING; the commit event processor merges it); a repeat
        answers COMMITTING or COMMITTED. TxnFailedError if aborting or aborted;
        LeaseExpiredError if its lease ran out (it is aborted); TxnNotFoundError."""
        ...

    def commit_transaction_and_wait(
        self, scope: str, stream: str, txn_id: uuid.UUID, timeout_s: float
    ) -> TxnStatus:
        """Ask for the commit as ``commit_transaction``, then wait in the controller until
        the transaction is COMMITTED, at most ``timeout_s`` seconds (a finite number in
        [0, 60]): returns COMMITTED, or COMMITTING if the time ran out first (it still
        commits; calling again waits again). A repeat answers the status reached. Raises
        what ``commit_transaction`` raises; InvalidArgumentError for a bad ``timeout_s``
        (nothing changes then)."""
        ...

    def abort_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        """Ask for the abort (ABORTING); a repeat answers ABORTING or ABORTED.
        TxnFailedError if committing or committed; TxnNotFoundError."""
        ...

    def check_transaction_status(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnStatus:
        """The transaction's status; TxnNotFoundError if unknown or long forgotten."""
        ...

    def get_transaction(self, scope: str, stream: str, txn_id: uuid.UUID) -> TxnInfo:
        """The transaction's info (to resume it in another process); for an ended one
        (COMMITTED, ABORTED) both deadlines are when it ended. TxnNotFoundError."""
        ...

    def list_transactions(self, scope: str, stream: str) -> dict[uuid.UUID, TxnStatus]:
        """The stream's active transactions (OPEN, COMMITTING, ABORTING) by id."""
        ...

    def list_completed_transactions(self, scope: str, stream: str) -> dict[uuid.UUID, TxnStatus]:
        """The stream's transactions that ended (COMMITTED, ABORTED) within the last
        ``TXN_COMPLETED_KEEP_S``, by id (Pravega's ``listCompletedTransactions``)."""
        ...

    # --- writers' marks (watermarks; contracts/watermarks.py) ---------------------------------
    def note_writer_mark(
        self, scope: str, stream: str, writer_id: str, time_ms: int, position: dict[int, int]
    ) -> bool:
        """Store writer ``writer_id``'s noted time and its position (``{segment id: offset}``,
        at or after the end of every event it wrote before noting). False, nothing stored,
        if it noted a later time before (times go forward per writer). StreamNotFoundError,
        InvalidNameError, InvalidArgumentError (a bad id, time or position)."""
        ...

    def writer_closed(
        self, scope: str, stream: str, writer_id: str, position: dict[int, int]
    ) -> bool:
        """The writer closed at ``position`` (its last event acknowledged): its time stops
        holding watermarks back; its mark goes once a watermark's cut covers ``position``.
        False if it has no mark. As ``note_writer_mark`` for bad arguments."""
        ...

    def remove_writer(self, scope: str, stream: str, writer_id: str) -> bool:
        """Forget the writer's mark (Pravega's ``removeWriter``). False if it had none."""
        ...

    def list_writers(self, scope: str, stream: str) -> dict[str, int]:
        """The writers with a mark on the stream, each with the last time it noted."""
        ...

    # --- subscribers (retention) ------------------------------------------------------
    def add_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        """Register reader group ``subscriber`` ("scope/group") as a subscriber of the stream:
        retention will not truncate what it has not acknowledged. True if added or its
        generation moved forward; False if there with this generation, or ``generation``
        is lower than stored (refused, nothing changed)."""
        ...

    def update_subscriber_stream_cut(
        self, scope: str, stream: str, subscriber: str, generation: int, cut: StreamCut
    ) -> bool:
        """Store ``subscriber``'s acknowledgement cut (only the latest is kept). False if it
        is not a subscriber or ``generation`` is lower than stored; InvalidArgumentError if
        ``cut`` is not a cut of the stream or is behind its stored cut; nothing changed then."""
        ...

    def delete_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        """Remove ``subscriber`` and its cut; False if it is not one or ``generation`` is
        lower than stored."""
        ...

    def list_subscribers(self, scope: str, stream: str) -> list[str]:
        """The stream's subscribers ("scope/group"), sorted."""
        ...

    # --- reader-group positions (checkpoints and reset_to) ----------------------------
    def get_reader_group_positions(
        self, config: ReaderGroupConfig
    ) -> tuple[dict[str, int], dict[str, int]]:
        """Where a group with ``config`` starts (segment name -> offset: its start cuts,
        else each stream's head) and ends (its end cuts); InvalidArgumentError for a cut
        not of its stream, a start cut behind the head, an end cut before a start cut."""
        ...


SERVICE_METHODS: dict[str, Callable[..., Any]] = {
    name: function
    for name, function in vars(ControllerService).items()
    if inspect.isfunction(function) and not name.startswith("_")
}
"""Every call of the surface by name, each the Protocol's own function."""


def method_name(method: Callable[..., Any]) -> str:
    """The name of ``method``, which must be one of :class:`ControllerService`'s functions.

    Invokers call only the surface: anything else (another class's method, a private
    one) is a bug, an InvariantViolation.
    """
    name = getattr(method, "__name__", "")
    invariant(SERVICE_METHODS.get(name) is method, f"{method!r} is not a ControllerService call")
    return name
