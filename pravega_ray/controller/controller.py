"""The controller's API: scopes, streams, key-value tables and reader groups, stored durably.

Streams follow the controller seed: a stream is a series of epochs, each a consistent set
of segments covering the routing-key space [0, 1) (records in ``stream_records.py``).
Create is a task (record in CREATING, segments created idempotently, ACTIVE; resumed after
a crash). Scale, update, seal and delete are *requests*: this API checks the input, posts
the request to the internal request stream and stores its temporary property (scale,
update), and the request event processor (``event_processor.py``, running
``stream_workflows.py``) runs the workflow; callers poll ``check_scale`` /
``get_stream_info`` for the end (the stream manager does). Every state change goes
through the transition table (``records.STATE_TRANSITIONS``).

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

Key-value table calls are in ``key_value_tables.py``, reader-group calls in
``reader_groups.py``, stream-cut and truncation calls in ``stream_cuts.py``, transaction
calls in ``transaction_calls.py``, subscriber calls (retention) in ``subscribers.py``
(mixins of :class:`Controller`). Not thread-safe: the actor shell serializes calls.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from pravega_ray.contracts.records import (
    KeyValueTableState,
    SegmentRange,
    StreamInfo,
    StreamState,
    check_request_id,
)
from pravega_ray.contracts.segment_store import ReadResult
from pravega_ray.controller.epochs import check_key_ranges, to_range
from pravega_ray.controller.key_value_tables import KeyValueTableCalls
from pravega_ray.controller.reader_groups import ReaderGroupCalls
from pravega_ray.controller.request_stream import RequestStream
from pravega_ray.controller.stream_cuts import StreamCutCalls
from pravega_ray.controller.stream_metadata_store import (
    MetadataStore,
    StreamMetadataStore,
    is_int,
)
from pravega_ray.controller.subscribers import SubscriberCalls
from pravega_ray.controller.transaction_calls import TransactionCalls
from pravega_ray.errors import (
    ConflictingUpdateError,
    DataCorruptionError,
    InvalidArgumentError,
    PravegaError,
    RetriableError,
    ScopeNotEmptyError,
    ScopeNotFoundError,
    SegmentExistsError,
    StreamNotFoundError,
    StreamNotSealedError,
    StreamSealedError,
)
from pravega_ray.naming import validate_name, validate_stream_name
from pravega_ray.stream_configuration import ScalingPolicy, StreamConfiguration

log = logging.getLogger(__name__)

RESUME_RETRY_INTERVAL_S = 5.0
"""How soon a workflow whose resumption failed with an outcome-unknown error is tried again."""


class SegmentStoreAdmin(Protocol):
    """What the controller needs from segment containers (synchronous, retrying restarts)."""

    def create_segment(self, segment: str) -> None: ...

    def create_table_segment(self, segment: str) -> None: ...

    def seal_segment(self, segment: str) -> int: ...

    def delete_segment(self, segment: str) -> None: ...

    def append_plain(self, segment: str, data: bytes) -> int: ...

    def read(self, segment: str, offset: int, max_bytes: int, wait_s: float) -> ReadResult: ...

    def truncate_segment(self, segment: str, offset: int) -> None: ...

    def segment_length(self, segment: str) -> int: ...

    def offset_at_time(self, segment: str, time_ms: int) -> int: ...

    def check_event_boundary(self, segment: str, offset: int) -> None: ...

    def create_transaction_segment(self, segment: str) -> None: ...

    def merge(self, target: str, source: str) -> int: ...


class Controller(
    KeyValueTableCalls, ReaderGroupCalls, StreamCutCalls, TransactionCalls, SubscriberCalls
):
    """Implements the controller's service surface
    (:class:`~pravega_ray.contracts.controller_service.ControllerService`) over the records of
    ``store`` (through a :class:`StreamMetadataStore`) and the segment containers reached
    through ``segments``."""

    def __init__(
        self,
        store: MetadataStore,
        segments: SegmentStoreAdmin,
        container_count: int,
        *,
        wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        monotonic: Callable[[], float] = time.monotonic,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        set_policy: Callable[[str, ScalingPolicy], None] = lambda segment, policy: None,
    ) -> None:
        self._store = StreamMetadataStore(store)
        self._segments = segments
        self._requests = RequestStream(segments)
        self._set_policy = set_policy
        self.container_count = container_count
        self._wall_clock_ms = wall_clock_ms
        self._monotonic = monotonic
        self._new_id = new_id
        self._resumed = False
        self._unresumed: dict[str, str] = {}  # key -> state, to retry (outcome unknown)
        self._last_resume = 0.0
        self._txn_workflows = None

    # --- cluster -------------------------------------------------------------------------------
    def get_cluster_config(self) -> dict[str, Any]:
        return {"container_count": self.container_count}

    def damaged_records(self) -> dict[str, str]:
        """Records found damaged (key -> what is wrong): quarantined, never overwritten."""
        return self._store.damaged_records()

    def resume_workflows(self) -> int:
        """Finish create/seal/delete workflows a crash interrupted; returns how many finished.

        Each record is handled on its own: a damaged one is quarantined (logged, in
        :meth:`damaged_records`), one that fails with an outcome-unknown error is tried
        again later; neither stops the others or the calls that follow.
        """
        resumed = 0
        for scope in self.list_scopes():
            for kind in ("streams", "kvtables"):
                try:
                    keys = self._store.list_keys(kind, scope)
                except DataCorruptionError as e:  # their records' calls answer it; not the rest
                    self._store.quarantine(f"{kind}/{scope}/*", e)
                    continue
                for key in keys:
                    resumed += self._resume(key)
        self._resumed = True
        self._last_resume = self._monotonic()
        if resumed:
            log.info("controller resumed %d interrupted workflows", resumed)
        return resumed

    def _finisher(self, kind: str, state: object) -> Callable[[str, str], None] | None:
        """The workflow step that finishes a record of ``kind`` left in ``state``, if any."""
        finishers: dict[str, dict[str, Callable[[str, str], None]]] = {
            "streams": {
                StreamState.CREATING.value: self._finish_create,
                StreamState.SEALING.value: self._request_seal,
            },
            "kvtables": {
                KeyValueTableState.CREATING.value: self._finish_create_kvt,
                KeyValueTableState.DELETING.value: self._finish_delete_kvt,
            },
        }
        return finishers[kind].get(state) if isinstance(state, str) else None

    def _resume(self, key: str) -> int:
        """Finish the workflow of record ``key`` (``<kind>/<scope>/<name>``); 1 if one ran."""
        kind, scope, name = key.split("/", 2)
        try:
            finish = self._finisher(kind, self._store.record_state(key))
            if finish is None:
                return 0
            finish(scope, name)
        except RetriableError as e:
            log.warning("controller: resuming %s failed (%r); will retry", key, e)
            self._unresumed[key] = "retry"
            return 0
        except PravegaError as e:  # damage, here or reported by a container: leave it, say so
            self._store.quarantine(key, e)
            return 0
        self._unresumed.pop(key, None)
        return 1

    def _run_workflow(self, key: str, finish: Callable[[], None]) -> None:
        """Run a workflow step now; if its outcome is unknown, resume it again later too."""
        try:
            finish()
        except RetriableError:
            self._unresumed[key] = "retry"
            raise
        self._unresumed.pop(key, None)

    def _ready(self) -> None:
        if not self._resumed:
            self.resume_workflows()
        elif self._unresumed and (self._monotonic() - self._last_resume >= RESUME_RETRY_INTERVAL_S):
            self._last_resume = self._monotonic()
            for key in list(self._unresumed):
                self._resume(key)

    # --- scopes --------------------------------------------------------------------------------
    def create_scope(self, scope: str, request_id: str | None = None) -> bool:
        """Create ``scope``; False if it exists already (True again for a retried request)."""
        self._ready()
        validate_name("scope", scope)
        check_request_id(request_id)
        existing = self._store.get_scope(scope)
        if existing is not None:
            return request_id is not None and existing.get("request_id") == request_id
        self._store.create_scope(scope, self._wall_clock_ms(), request_id)
        return True

    def list_scopes(self) -> list[str]:
        return self._store.list_scopes()

    def delete_scope(self, scope: str) -> bool:
        """Delete an empty scope; False if absent.

        ScopeNotEmptyError while it has streams, key-value tables or reader groups;
        DataCorruptionError if records it may hold cannot be read (it may not be empty).
        """
        self._ready()
        validate_name("scope", scope)
        if self._store.get_scope(scope) is None:
            return False
        for kind in ("streams", "kvtables", "readergroups"):
            if self._store.list_keys(kind, scope):
                raise ScopeNotEmptyError(
                    f"scope {scope} still has streams, key-value tables or reader groups"
                )
            if unreadable := self._store.unreadable(kind, scope):
                raise DataCorruptionError(
                    f"scope {scope} may still hold {kind} among damaged records, so it is "
                    f"not deleted: {next(iter(unreadable.values()))}",
                    key=f"scopes/{scope}",
                )
        self._store.delete_scope(scope)
        return True

    def _check_scope(self, scope: str) -> None:
        """InvalidNameError for a bad scope name, then ScopeNotFoundError. A call naming
        something in the scope checks that name first (names before existence)."""
        validate_name("scope", scope)
        if self._store.get_scope(scope) is None:
            raise ScopeNotFoundError(f"scope {scope} does not exist")

    def _stream_args(self, scope: str, stream: str, *, exists: bool = True) -> StreamState | None:
        """Where every stream call starts: both names (InvalidNameError; a leading ``_``
        is the system's, see :func:`~pravega_ray.naming.validate_stream_name`), then the
        scope (ScopeNotFoundError), then, with ``exists``, the stream (StreamNotFoundError,
        DataCorruptionError for a damaged record), whose state it returns (else None)."""
        validate_stream_name(scope, stream)
        self._check_scope(scope)
        return self._store.streams.state(scope, stream) if exists else None

    # --- streams -------------------------------------------------------------------------------
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
        self._ready()
        self._stream_args(scope, stream, exists=False)
        check_request_id(request_id)
        config = config if config is not None else StreamConfiguration()
        stored_config = _stored_config(config)
        key = f"streams/{scope}/{stream}"
        existing = self._store.get_stream_record(scope, stream)
        if existing is not None:
            # A damaged record is named, not "exists"; a create cut short is finished.
            if self.get_stream_info(scope, stream).state is StreamState.CREATING:
                self._run_workflow(key, lambda: self._finish_create(scope, stream))
            return request_id is not None and existing.get("request_id") == request_id
        self._store.create_stream(
            scope,
            stream,
            stored_config,
            config.scaling.min_segments,
            self._wall_clock_ms(),
            request_id,
        )
        self._run_workflow(key, lambda: self._finish_create(scope, stream))
        return True

    def _finish_create(self, scope: str, stream: str) -> None:
        info = self.get_stream_info(scope, stream)
        for segment in info.segments:
            # A segment created before a crash is fine: the workflow is idempotent.
            with contextlib.suppress(SegmentExistsError):
                self._segments.create_segment(segment.name)
            self._set_policy(segment.name, info.configuration.scaling)
        self._store.transition(scope, stream, StreamState.ACTIVE)

    def list_streams(self, scope: str) -> list[str]:
        self._check_scope(scope)
        return self._store.list_names("streams", scope)

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        """The stream's state, configuration and current segments.

        Raises ScopeNotFoundError, StreamNotFoundError, InvalidNameError, DataCorruptionError.
        """
        self._stream_args(scope, stream, exists=False)  # the record is read next
        return self._store.get_stream_info(scope, stream)

    def get_current_segments(self, scope: str, stream: str) -> tuple[SegmentRange, ...]:
        return self.get_stream_info(scope, stream).segments

    def get_successors(
        self, scope: str, stream: str, segment_id: int
    ) -> dict[SegmentRange, list[int]]:
        """The segments that replaced ``segment_id``, each with all its predecessors' ids;
        empty while the segment is active, or once the stream is sealed.

        Raises InvalidNameError, ScopeNotFoundError, StreamNotFoundError,
        InvalidArgumentError.
        """
        self._stream_args(scope, stream)
        _check_segment_id(segment_id)
        successors = self._store.streams.successors(scope, stream, segment_id)
        return {to_range(scope, stream, row): preds for row, preds in successors}

    def get_predecessors(self, scope: str, stream: str, segment_id: int) -> list[SegmentRange]:
        """The segments ``segment_id`` replaced (empty for a segment of epoch 0)."""
        self._stream_args(scope, stream)
        _check_segment_id(segment_id)
        rows = self._store.streams.predecessors(scope, stream, segment_id)
        return [to_range(scope, stream, r) for r in rows]

    def get_epoch_segments(self, scope: str, stream: str, epoch: int) -> list[SegmentRange]:
        """The segments of epoch ``epoch``. Raises StreamNotFoundError if it has no such epoch."""
        self._stream_args(scope, stream)
        if not is_int(epoch) or epoch < 0:
            raise InvalidArgumentError("epoch must be an int >= 0")
        row = self._store.streams.epoch(scope, stream, epoch)
        if row is None:
            raise StreamNotFoundError(f"stream {scope}/{stream} has no epoch {epoch}")
        return [to_range(scope, stream, r) for r in row.segments]

    def _post(self, kind: str, scope: str, stream: str, **fields: Any) -> None:
        body = {"type": kind, "scope": scope, "stream": stream, "posted_ms": self._wall_clock_ms()}
        self._requests.post({**body, **fields})

    def scale_stream(
        self,
        scope: str,
        stream: str,
        sealed_segment_ids: list[int],
        new_key_ranges: list[tuple[float, float]],
    ) -> int:
        """Ask for a scale; returns the epoch it creates (poll :meth:`check_scale`).

        Raises StreamNotFoundError, StreamSealedError, InvalidArgumentError (input of the
        wrong shape), ScaleConflictError (segments not in the current epoch, ranges that do
        not exactly cover theirs, another scale under way); nothing changed then. Repeating
        the scale under way answers its epoch.
        """
        self._ready()
        state = self._stream_args(scope, stream)
        if not isinstance(sealed_segment_ids, (list, tuple)) or not sealed_segment_ids:
            raise InvalidArgumentError("sealed_segment_ids must be a non-empty list of ids")
        for sid in sealed_segment_ids:
            _check_segment_id(sid)
        ranges = check_key_ranges(new_key_ranges)
        records = self._store.streams
        if state in (StreamState.SEALING, StreamState.SEALED):
            raise StreamSealedError(f"stream {scope}/{stream} is sealed")
        value = records.get(scope, stream)[0]
        # The request first, then the property (the seed's order): a property without its
        # request would block the stream's scales for good; a request without its
        # property expires.
        self._post("scale", scope, stream, epoch=int(value["epoch"]) + 1)
        record = records.start_scale(
            scope, stream, list(sealed_segment_ids), ranges, self._wall_clock_ms()
        )
        return record.epoch

    def check_scale(self, scope: str, stream: str, epoch: int) -> bool:
        """Whether the scale that creates ``epoch`` is done (the epoch is current)."""
        self._stream_args(scope, stream)
        if not is_int(epoch) or epoch < 0:
            raise InvalidArgumentError("epoch must be an int >= 0")
        records = self._store.streams
        running = records.scale_record(scope, stream)
        current = records.get(scope, stream)[0]["epoch"]
        return current >= epoch and (running is None or running.epoch > epoch)

    def update_stream(self, scope: str, stream: str, config: StreamConfiguration) -> bool:
        """Ask for a configuration update (poll :meth:`check_update`).

        Raises StreamNotFoundError, StreamSealedError, InvalidArgumentError,
        ConflictingUpdateError (another update is under way).
        """
        self._ready()
        state = self._stream_args(scope, stream)
        stored = _stored_config(config)
        if state in (StreamState.SEALING, StreamState.SEALED):
            raise StreamSealedError(f"stream {scope}/{stream} is sealed")
        request = self._new_id()
        self._post("update", scope, stream, request=request)
        try:
            self._store.streams.put_update(scope, stream, stored, request)
        except ConflictingUpdateError:
            raise ConflictingUpdateError(
                f"an update of {scope}/{stream} is under way; try again once it is done"
            ) from None
        return True

    def check_update(self, scope: str, stream: str) -> bool:
        """Whether no update of the stream is pending."""
        self._stream_args(scope, stream)
        return self._store.streams.pending_update(scope, stream) is None

    def seal_stream(self, scope: str, stream: str) -> bool:
        """Ask for the stream to be sealed; True if it is SEALED already (else poll
        :meth:`get_stream_info`)."""
        self._ready()
        state = self.get_stream_info(scope, stream).state
        if state is StreamState.SEALED:
            return True
        if state is StreamState.CREATING:  # a create interrupted earlier: finish it first
            key = f"streams/{scope}/{stream}"
            self._run_workflow(key, lambda: self._finish_create(scope, stream))
        self._post("seal", scope, stream)
        return False

    def check_truncate(self, scope: str, stream: str) -> bool:
        """Whether no truncation of the stream is pending."""
        self._stream_args(scope, stream)
        return self._store.streams.pending_truncate(scope, stream) is None

    def _request_seal(self, scope: str, stream: str) -> None:
        """Post a seal request for a stream found SEALING (a seal cut short before its
        request was posted, by a controller of data format 5); a duplicate is harmless."""
        self.get_stream_info(scope, stream)  # a damaged record is quarantined, not posted
        self._post("seal", scope, stream)

    def delete_stream(self, scope: str, stream: str) -> bool:
        """Ask for a sealed stream to be deleted; False if it does not exist (poll
        :meth:`get_stream_info` until StreamNotFoundError).

        Raises StreamNotSealedError (seal it first), ScopeNotFoundError, InvalidNameError.
        """
        self._ready()
        self._stream_args(scope, stream, exists=False)
        try:
            state = self._store.streams.state(scope, stream)
        except StreamNotFoundError:
            return False
        if state is not StreamState.SEALED:
            raise StreamNotSealedError(f"stream {scope}/{stream} is {state.value}; seal it first")
        self._post("delete", scope, stream)
        return True


def _check_segment_id(segment_id: object) -> None:
    if not is_int(segment_id) or not 0 <= segment_id < 1 << 63:
        raise InvalidArgumentError(f"a segment id is an int in [0, 2**63), got {segment_id!r}")


def _stored_config(config: object) -> dict[str, Any]:
    """``config`` as stored; InvalidArgumentError unless it is a valid StreamConfiguration."""
    if not isinstance(config, StreamConfiguration):
        raise InvalidArgumentError(
            f"config must be a StreamConfiguration, got {type(config).__name__}"
        )
    try:
        stored = config.to_dict()
        StreamConfiguration.from_dict(stored)  # what is stored must load again
    except InvalidArgumentError:
        raise
    except (AttributeError, TypeError, ValueError) as e:  # a tampered-with object
        raise InvalidArgumentError(f"config does not validate: {e!r}") from None
    return stored
