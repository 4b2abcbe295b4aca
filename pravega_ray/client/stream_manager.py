"""Stream manager: scopes and streams (Pravega's ``StreamManager``).

Scale, update, seal, delete and truncate run as workflows on the controller's request event
processor; these calls ask for one and wait (polling, at most ``timeout_s``, by default
``WORKFLOW_WAIT_S``) until it is done, as Pravega's client waits on ``checkScale``. A
``timeout_s`` that is not a finite number >= 0 is InvalidArgumentError before the workflow
is asked for. Names and existence are checked by the controller, names first. The waits
read the manager's ``clock`` and pause through its ``scheduler``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from pravega_ray.client.batch_client import BatchClient
from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.constants import KVT_PARTITIONS_DEFAULT, WORKFLOW_POLL_S, WORKFLOW_WAIT_S
from pravega_ray.contracts.arguments import check_wait
from pravega_ray.contracts.records import (
    KeyValueTableInfo,
    SegmentRange,
    StreamInfo,
    StreamState,
    TxnStatus,
)
from pravega_ray.errors import (
    InvalidArgumentError,
    StreamNotFoundError,
)
from pravega_ray.stream_configuration import StreamConfiguration
from pravega_ray.stream_cut import StreamCut
from pravega_ray.timing import DAEMON_THREADS, SYSTEM_CLOCK, Clock, ThreadScheduler


class StreamManager:
    def __init__(
        self,
        controller: ControllerConnection,
        *,
        segments: SegmentStoreConnection | None = None,
        clock: Clock = SYSTEM_CLOCK,
        scheduler: ThreadScheduler = DAEMON_THREADS,
    ) -> None:
        self._controller = controller
        self._segments = segments  # for get_distance (the segments' lengths)
        self._clock = clock
        self._scheduler = scheduler

    def _wait(self, done: Callable[[], bool], what: str, timeout_s: float) -> None:
        """Poll ``done`` until it answers True; TimeoutError after ``timeout_s`` of the
        clock (checked by the caller with :func:`check_wait` before it asked for the
        workflow)."""
        deadline = self._clock.monotonic() + timeout_s
        while not done():
            if self._clock.monotonic() > deadline:
                raise TimeoutError(f"{what} did not finish within {timeout_s:.0f} s")
            self._scheduler.sleep(WORKFLOW_POLL_S)

    def create_scope(self, scope: str) -> bool:
        """Create a scope; False if it exists. Raises InvalidNameError for a bad name."""
        return self._controller.create_scope(scope)

    def list_scopes(self) -> list[str]:
        return self._controller.list_scopes()

    def delete_scope(
        self, scope: str, recursive: bool = False, timeout_s: float = WORKFLOW_WAIT_S
    ) -> bool:
        """Delete a scope; False if absent.

        Without ``recursive``: ScopeNotEmptyError while it has streams, key-value tables,
        reader groups or state synchronizers. With it (Pravega's ``deleteScopeRecursive``):
        the controller marks the scope as being deleted, so creates in it fail with
        IllegalStateError from then on, and its request processor deletes the reader groups,
        key-value tables and state synchronizers, seals and
        deletes the streams (open transactions are aborted), then the scope, resuming after
        any kill; this call waits for the end (at most ``timeout_s``; TimeoutError then,
        the delete going on). A repeated call waits for the same delete.
        """
        if not isinstance(recursive, bool):
            raise InvalidArgumentError("recursive must be a bool")
        if not recursive:
            return self._controller.delete_scope(scope)
        check_wait("timeout_s", timeout_s)
        if not self._controller.delete_scope_recursive(scope):
            return False
        self._wait(
            lambda: scope not in self._controller.list_scopes(),
            f"the recursive delete of scope {scope}",
            timeout_s,
        )
        return True

    def create_stream(
        self, scope: str, stream: str, config: StreamConfiguration | None = None
    ) -> bool:
        """Create a stream; False if it exists.

        Raises ScopeNotFoundError, InvalidNameError, InvalidArgumentError (config is not a
        StreamConfiguration); nothing is created then.
        """
        config = StreamConfiguration() if config is None else config
        return self._controller.create_stream(scope, stream, config)

    def list_streams(self, scope: str, tag: str | None = None) -> list[str]:
        """The streams of ``scope``, sorted; with ``tag``, only those whose configuration
        carries it (``StreamConfiguration.tags``; one configuration read per stream of the
        scope). Raises ScopeNotFoundError, InvalidNameError, InvalidArgumentError (a tag
        that is not a str)."""
        if tag is not None and not isinstance(tag, str):
            raise InvalidArgumentError(f"tag must be a str or None, got {type(tag).__name__}")
        streams = self._controller.list_streams(scope)
        if tag is None:
            return streams
        tagged = []
        for stream in streams:
            try:
                info = self._controller.get_stream_info(scope, stream)
            except StreamNotFoundError:
                continue  # deleted since the list
            if tag in info.configuration.tags:
                tagged.append(stream)
        return tagged

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        """State, configuration and current segments. Raises StreamNotFoundError."""
        return self._controller.get_stream_info(scope, stream)

    def seal_stream(self, scope: str, stream: str, timeout_s: float = WORKFLOW_WAIT_S) -> bool:
        """Seal the stream: later writes fail with StreamSealedError. Idempotent; True once
        SEALED."""
        check_wait("timeout_s", timeout_s)
        if not self._controller.seal_stream(scope, stream):
            self._wait(
                lambda: self._controller.get_stream_info(scope, stream).state is StreamState.SEALED,
                f"sealing {scope}/{stream}",
                timeout_s,
            )
        return True

    def delete_stream(self, scope: str, stream: str, timeout_s: float = WORKFLOW_WAIT_S) -> bool:
        """Delete a sealed stream and every segment it ever had; False if it does not exist.

        Raises StreamNotSealedError (seal it first), ScopeNotFoundError, InvalidNameError.
        """
        check_wait("timeout_s", timeout_s)
        if not self._controller.delete_stream(scope, stream):
            return False

        # Gone once its stream record is (deleted last: its history rows go first).
        self._wait(
            lambda: stream not in self._controller.list_streams(scope),
            f"deleting {scope}/{stream}",
            timeout_s,
        )
        return True

    def update_stream(
        self,
        scope: str,
        stream: str,
        config: StreamConfiguration,
        timeout_s: float = WORKFLOW_WAIT_S,
    ) -> bool:
        """Change the stream's configuration (scaling and retention policies); True once
        stored and handed to its segments.

        Raises StreamNotFoundError, StreamSealedError, InvalidArgumentError,
        ConflictingUpdateError (another update is under way).
        """
        check_wait("timeout_s", timeout_s)
        self._controller.update_stream(scope, stream, config)
        self._wait(
            lambda: self._controller.check_update(scope, stream),
            f"updating {scope}/{stream}",
            timeout_s,
        )
        return True

    def scale_stream(
        self,
        scope: str,
        stream: str,
        sealed_segment_ids: list[int],
        new_key_ranges: list[tuple[float, float]],
        timeout_s: float = WORKFLOW_WAIT_S,
    ) -> bool:
        """Seal ``sealed_segment_ids`` (of the current epoch) and replace them by new
        segments owning ``new_key_ranges``; True once the new epoch is active.

        Raises ScaleConflictError (segments not in the current epoch, ranges that do not
        exactly cover theirs, another scale under way), StreamSealedError,
        StreamNotFoundError, InvalidArgumentError; nothing changed then.
        """
        check_wait("timeout_s", timeout_s)
        epoch = self._controller.scale_stream(scope, stream, sealed_segment_ids, new_key_ranges)
        self._wait(
            lambda: self._controller.check_scale(scope, stream, epoch),
            f"scaling {scope}/{stream} to epoch {epoch}",
            timeout_s,
        )
        return True

    def truncate_stream(
        self, scope: str, stream: str, cut: StreamCut, timeout_s: float = WORKFLOW_WAIT_S
    ) -> bool:
        """Drop everything before ``cut``: segments wholly before it are deleted, the cut's
        segments truncated at its offsets; True once done.

        Raises InvalidArgumentError (not a cut of this stream, an offset not at an event
        boundary, or behind its current head), StreamSealedError, StreamNotFoundError,
        ConflictingUpdateError; nothing changed then.
        """
        check_wait("timeout_s", timeout_s)
        self._controller.truncate_stream(scope, stream, cut)
        self._wait(
            lambda: self._controller.check_truncate(scope, stream),
            f"truncating {scope}/{stream}",
            timeout_s,
        )
        return True

    def get_successors(
        self, scope: str, stream: str, segment_id: int
    ) -> dict[SegmentRange, list[int]]:
        """The segments that replaced ``segment_id``, each with its predecessors' ids; empty
        while it is active. Raises InvalidNameError, ScopeNotFoundError,
        StreamNotFoundError, InvalidArgumentError (a segment id that is not an int)."""
        return self._controller.get_successors(scope, stream, segment_id)

    def list_segments(self, scope: str, stream: str) -> list[SegmentRange]:
        """Every segment the stream has now, of every epoch (sealed predecessors too), in
        creation order; segments truncated away are left out."""
        return self._controller.get_segments_between(scope, stream, {}, None)

    def get_epoch_segments(self, scope: str, stream: str, epoch: int) -> list[SegmentRange]:
        """The segments of epoch ``epoch`` (0 .. ``get_stream_info(...).epoch``).

        Raises StreamNotFoundError if the stream has no such epoch."""
        return self._controller.get_epoch_segments(scope, stream, epoch)

    def get_segments_at_time(self, scope: str, stream: str, time_ms: int) -> StreamCut:
        """The cut at ``time_ms`` (ms since 1970), exact to the event: the epoch current then,
        each segment at the first event appended at or after ``time_ms`` (10 ms slots of the
        containers' time index). The head cut for a time before it, the tail for a future one.
        """
        return self._controller.get_segments_at_time(scope, stream, time_ms)

    def get_head_cut(self, scope: str, stream: str) -> StreamCut:
        """The stream's head: the cut of its last truncation, else epoch 0's segments at 0."""
        return self._controller.get_head_cut(scope, stream)

    def get_tail_cut(self, scope: str, stream: str) -> StreamCut:
        """The current epoch's segments at their lengths now (event boundaries)."""
        return self._controller.get_tail_cut(scope, stream)

    def get_distance(self, start: StreamCut, end: StreamCut) -> int:
        """Bytes (event frames included) between two cuts of one stream: what a reader
        reads from ``start`` to ``end`` (``StreamCut.UNBOUNDED``: the tail now), across
        scales. Raises InvalidArgumentError (not cuts, cuts of two streams, ``end`` behind
        ``start``, an unbounded start), StreamNotFoundError; SegmentNotFoundError if a
        segment between them was truncated away (measure from the head instead)."""
        if not isinstance(start, StreamCut) or not isinstance(end, StreamCut):
            raise InvalidArgumentError("get_distance takes two StreamCuts")
        if start.is_unbounded:
            raise InvalidArgumentError("the start of a distance must be a bounded cut")
        if not end.is_unbounded and (end.scope, end.stream) != (start.scope, start.stream):
            raise InvalidArgumentError(
                f"cuts of two streams: {start.scope}/{start.stream} and {end.scope}/{end.stream}"
            )
        if self._segments is None:
            raise InvalidArgumentError("this stream manager has no segment store connection")
        batch = BatchClient(self._controller, self._segments, scheduler=self._scheduler)
        ranges = batch.segment_ranges(start.scope, start.stream, start, end)
        return sum(r.length for r in ranges)

    def list_completed_transactions(self, scope: str, stream: str) -> dict[uuid.UUID, TxnStatus]:
        """The stream's transactions that ended (COMMITTED or ABORTED) in the last
        ``TXN_COMPLETED_KEEP_S`` (10 minutes), by id (Pravega's
        ``listCompletedTransactions``). Raises InvalidNameError, StreamNotFoundError."""
        return self._controller.list_completed_transactions(scope, stream)

    def list_writers(self, scope: str, stream: str) -> dict[str, int]:
        """The writers whose noted time (``writer.note_time``) the stream's watermarks follow,
        by writer id (``writer.writer_id.hex()``), each with the last time it noted, in
        ms. A writer leaves the list when it closes (once a watermark covers what it wrote),
        after ``WATERMARK_WRITER_TIMEOUT_S`` without noting, or by :meth:`remove_writer`.
        Raises InvalidNameError, ScopeNotFoundError, StreamNotFoundError."""
        return self._controller.list_writers(scope, stream)

    def remove_writer(self, scope: str, stream: str, writer_id: str) -> bool:
        """Forget writer ``writer_id`` (``writer.writer_id.hex()``) in the stream's watermarks
        (Pravega's ``removeWriter``): they go on without waiting for its time. Only for a
        writer that will write no more: events it writes later may be older than the
        watermarks. False if the stream has no mark of it. Raises InvalidArgumentError (a
        bad id), InvalidNameError, ScopeNotFoundError, StreamNotFoundError."""
        return self._controller.remove_writer(scope, stream, writer_id)

    def create_key_value_table(
        self,
        scope: str,
        table: str,
        partitions: int = KVT_PARTITIONS_DEFAULT,
        primary_key_length: int | None = None,
        secondary_key_length: int | None = None,
    ) -> bool:
        """Create a key-value table of ``partitions`` table segments; False if it exists.

        With ``primary_key_length`` (and ``secondary_key_length``, None: 0) the table has
        key families: every key is exactly ``primary + secondary`` bytes once serialized,
        and entries of one primary key share a partition (``kvt.update`` is atomic for
        them). Raises ScopeNotFoundError, InvalidNameError, InvalidArgumentError
        (partitions outside [1, 1024]; key lengths not ints, primary < 1, secondary < 0,
        sum over 8 KiB, a secondary length alone). Partitions and key lengths are fixed
        for the table's life.
        """
        return self._controller.create_key_value_table(
            scope,
            table,
            partitions,
            primary_key_length=primary_key_length,
            secondary_key_length=secondary_key_length,
        )

    def get_key_value_table_info(self, scope: str, table: str) -> KeyValueTableInfo:
        """Partitions and segments. Raises KeyValueTableNotFoundError."""
        return self._controller.get_key_value_table(scope, table)

    def list_key_value_tables(self, scope: str) -> list[str]:
        return self._controller.list_key_value_tables(scope)

    def list_reader_groups(self, scope: str) -> list[str]:
        """The reader groups of ``scope``, sorted. Raises ScopeNotFoundError, InvalidNameError."""
        return self._controller.list_reader_groups(scope)

    def delete_key_value_table(self, scope: str, table: str) -> bool:
        """Delete the table and all its data; False if it does not exist."""
        return self._controller.delete_key_value_table(scope, table)
