"""The controller's scope and stream calls (Pravega's ``StreamMetadataTasks``).

Streams follow Pravega's controller design (docs/design.md "The controller"): a stream is a
series of epochs, each a consistent set of segments covering the routing-key space [0, 1)
(records in ``stream_records.py``).
Create is a task (record in CREATING, segments created idempotently, ACTIVE; resumed after
a crash). Scale, update, seal and delete are *requests*: these calls check the input, post
the request to the internal request stream and store its temporary property (scale,
update), and the request event processor (``event_processor.py``, running
``stream_workflows.py``) runs the workflow; callers poll ``check_scale`` /
``get_stream_info`` for the end (the stream manager does). Every state change goes
through the transition table (``records.STATE_TRANSITIONS``).

Every argument is checked before anything is stored (typed errors from
``pravega_ray.errors``); a configuration must survive its own ``from_dict(to_dict())``.
Creates carry a ``request_id`` stored in the record, so a repeated create that had landed
answers True; a repeated scale of the scale under way answers its epoch. A stream
re-created under a deleted one's name numbers its segments after the deleted one's
(Pravega's safe starting segment number, kept in a ``deleted/`` record).

Thread-safe, and safe beside other controller instances on the same records: records change
by compare-and-set only; a create that loses the race for its record answers as for a stream
that exists, and a create finished by two callers at once (a repeat on another instance, an
instance resuming it) completes once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Protocol

from pravega_ray.contracts.records import (
    EpochInfo,
    SegmentRange,
    StreamInfo,
    StreamState,
    check_request_id,
)
from pravega_ray.controller.controller_steps import ControllerSteps, create_racing
from pravega_ray.controller.epochs import check_key_ranges, to_range
from pravega_ray.controller.segment_helper import run_each
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore, is_int
from pravega_ray.errors import (
    ConflictingUpdateError,
    DataCorruptionError,
    IllegalStateTransitionError,
    InvalidArgumentError,
    ScopeNotEmptyError,
    StreamNotFoundError,
    StreamNotSealedError,
    StreamSealedError,
)
from pravega_ray.naming import validate_name, validate_stream_name
from pravega_ray.stream_configuration import ScaleType, ScalingPolicy, StreamConfiguration
from pravega_ray.timing import Clock

__all__ = ["StreamMetadataTasks", "StreamSegments"]


class StreamSegments(Protocol):
    """The segment calls scope and stream calls make (``SegmentHelper`` provides them)."""

    def create_segments(self, segments: Sequence[str]) -> None: ...


class StreamMetadataTasks:
    """Scope and stream calls over the records of ``store`` (module docstring).

    ``set_policy`` hands a new segment its stream's scaling policy (the auto-scale
    monitor's attributes); ``new_id`` names update requests.
    """

    def __init__(
        self,
        store: StreamMetadataStore,
        segments: StreamSegments,
        steps: ControllerSteps,
        clock: Clock,
        *,
        new_id: Callable[[], str],
        set_policy: Callable[[str, ScalingPolicy], None],
    ) -> None:
        self._store = store
        self._segments = segments
        self._steps = steps
        self._clock = clock
        self._new_id = new_id
        self._set_policy = set_policy
        steps.add_finisher("streams", StreamState.CREATING.value, self._finish_create)
        steps.add_finisher("streams", StreamState.SEALING.value, self._request_seal)

    # --- scopes --------------------------------------------------------------------------------
    def create_scope(self, scope: str, request_id: str | None = None) -> bool:
        """Create ``scope``; False if it exists already (True again for a retried request)."""
        self._steps.ready()
        validate_name("scope", scope)
        check_request_id(request_id)
        existing = create_racing(
            lambda: self._store.get_scope(scope),
            lambda: self._store.create_scope(scope, self._clock.wall_time_ms(), request_id),
            f"scope {scope}",
        )
        if existing is None:
            return True
        return request_id is not None and existing.get("request_id") == request_id

    def list_scopes(self) -> list[str]:
        return self._store.list_scopes()

    def delete_scope(self, scope: str) -> bool:
        """Delete an empty scope; False if absent.

        ScopeNotEmptyError while it has streams, key-value tables, reader groups or state
        synchronizers;
        DataCorruptionError if records it may hold cannot be read (it may not be empty).
        """
        self._steps.ready()
        validate_name("scope", scope)
        if self._store.get_scope(scope) is None:
            return False
        for kind in ("streams", "kvtables", "readergroups", "synchronizers"):
            if self._store.list_keys(kind, scope):
                raise ScopeNotEmptyError(
                    f"scope {scope} still has streams, key-value tables, reader groups or "
                    "state synchronizers"
                )
            if unreadable := self._store.unreadable(kind, scope):
                raise DataCorruptionError(
                    f"scope {scope} may still hold {kind} among damaged records, so it is "
                    f"not deleted: {next(iter(unreadable.values()))}",
                    key=f"scopes/{scope}",
                )
        self._store.delete_scope(scope)
        return True

    def delete_scope_recursive(self, scope: str) -> bool:
        """Start the recursive delete of ``scope`` (Pravega's ``deleteScopeRecursive``);
        False if it does not exist. Poll :meth:`list_scopes` for its end.

        The scope is marked DELETING (from now on creates in it are refused with
        IllegalStateError), then a ``delete_scope`` request is posted: the request
        processor deletes its reader groups and key-value tables, seals and deletes its
        streams, and then the scope (``scope_workflows.py``). Repeating the call (or a
        controller resuming) posts the request again, which is harmless.
        """
        self._steps.ready()
        validate_name("scope", scope)
        if not self._store.mark_scope_deleting(scope):
            return False
        self._steps.post("delete_scope", scope, "")
        return True

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
        self._steps.ready()
        validate_stream_name(scope, stream)
        self._steps.check_scope_open(scope)
        check_request_id(request_id)
        config = config if config is not None else StreamConfiguration()
        stored_config = _stored_config(config)
        key = f"streams/{scope}/{stream}"
        existing = create_racing(
            lambda: self._store.get_stream_record(scope, stream),
            lambda: self._store.create_stream(
                scope,
                stream,
                stored_config,
                config.scaling.min_segments,
                self._clock.wall_time_ms(),
                request_id,
            ),
            f"stream {scope}/{stream}",
        )
        if existing is None:
            self._steps.created_in_open_scope(
                scope,
                f"create of stream {scope}/{stream}",
                lambda: self._undo_create(scope, stream),
            )
            self._steps.run_workflow(key, lambda: self._finish_create(scope, stream))
            return True
        # A damaged record is named, not "exists"; a create cut short is finished.
        if self.get_stream_info(scope, stream).state is StreamState.CREATING:
            self._steps.run_workflow(key, lambda: self._finish_create(scope, stream))
        return request_id is not None and existing.get("request_id") == request_id

    def _undo_create(self, scope: str, stream: str) -> None:
        """Remove the records of a stream just created (CREATING, no segment yet) in a
        scope being deleted; one a recursive delete removed meanwhile is fine."""
        with contextlib.suppress(StreamNotFoundError):
            if self._store.streams.state(scope, stream) is StreamState.CREATING:
                self._store.streams.delete(scope, stream)

    def _finish_create(self, scope: str, stream: str) -> None:
        """Store epoch 0's rows (``ensure_epoch0``) and, beside them, create the stream's
        segments (all sent at once) and hand them their scaling policy; then make the
        stream ACTIVE. Idempotent: rows and segments made before a crash are fine, and so is
        another caller (instance) finishing the same create meanwhile.

        A fixed policy is not handed to the new segments: handing it over removes an
        auto-scale policy, and a new segment has none (its name is new: a re-created
        stream numbers its segments after the old one's; one created by an earlier try of
        this create got this same configuration)."""
        info = self.get_stream_info(scope, stream)
        if info.state is not StreamState.CREATING:
            return
        scaling = info.configuration.scaling
        names = [segment.name for segment in info.segments]

        def segments() -> None:
            self._segments.create_segments(names)
            if scaling.scale_type is not ScaleType.FIXED_NUM_SEGMENTS:
                run_each(lambda name: self._set_policy(name, scaling), names)

        steps: list[Callable[[], None]] = [
            partial(self._store.streams.ensure_epoch0, scope, stream),
            segments,
        ]
        run_each(lambda step: step(), steps)
        try:
            self._store.transition(scope, stream, StreamState.ACTIVE)
        except (IllegalStateTransitionError, ConflictingUpdateError):
            if self._store.streams.state(scope, stream) is StreamState.CREATING:
                raise  # not another caller's finish: the error stands

    def list_streams(self, scope: str) -> list[str]:
        self._steps.check_scope(scope)
        return self._store.list_names("streams", scope)

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        """The stream's state, configuration and current segments.

        Raises ScopeNotFoundError, StreamNotFoundError, InvalidNameError, DataCorruptionError.
        """
        self._steps.check_stream_names(scope, stream)  # the record is read next
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
        self._steps.check_stream(scope, stream)
        _check_segment_id(segment_id)
        successors = self._store.streams.successors(scope, stream, segment_id)
        return {to_range(scope, stream, row): preds for row, preds in successors}

    def get_predecessors(self, scope: str, stream: str, segment_id: int) -> list[SegmentRange]:
        """The segments ``segment_id`` replaced (empty for a segment of epoch 0)."""
        self._steps.check_stream(scope, stream)
        _check_segment_id(segment_id)
        rows = self._store.streams.predecessors(scope, stream, segment_id)
        return [to_range(scope, stream, r) for r in rows]

    def get_epoch_segments(self, scope: str, stream: str, epoch: int) -> list[SegmentRange]:
        """The segments of epoch ``epoch``. Raises StreamNotFoundError if it has no such epoch."""
        return list(self.get_epoch(scope, stream, epoch).segments)

    def get_epoch(self, scope: str, stream: str, epoch: int) -> EpochInfo:
        """Epoch ``epoch``: its creation time and segments. Raises StreamNotFoundError if it
        has no such epoch."""
        self._steps.check_stream(scope, stream)
        if not is_int(epoch) or epoch < 0:
            raise InvalidArgumentError("epoch must be an int >= 0")
        row = self._store.streams.epoch(scope, stream, epoch)
        if row is None:
            raise StreamNotFoundError(f"stream {scope}/{stream} has no epoch {epoch}")
        segments = tuple(to_range(scope, stream, r) for r in row.segments)
        return EpochInfo(epoch, row.created_ms, segments)

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
        self._steps.ready()
        state = self._steps.check_stream(scope, stream)
        if not isinstance(sealed_segment_ids, (list, tuple)) or not sealed_segment_ids:
            raise InvalidArgumentError("sealed_segment_ids must be a non-empty list of ids")
        for sid in sealed_segment_ids:
            _check_segment_id(sid)
        ranges = check_key_ranges(new_key_ranges)
        records = self._store.streams
        if state in (StreamState.SEALING, StreamState.SEALED):
            raise StreamSealedError(f"stream {scope}/{stream} is sealed")
        value = records.get(scope, stream)[0]
        # The request first, then the property (Pravega's order): a property without its
        # request would block the stream's scales for good; a request without its
        # property expires.
        self._steps.post("scale", scope, stream, epoch=int(value["epoch"]) + 1)
        record = records.start_scale(
            scope, stream, list(sealed_segment_ids), ranges, self._clock.wall_time_ms()
        )
        self._steps.wake(scope, stream)
        return record.epoch

    def check_scale(self, scope: str, stream: str, epoch: int) -> bool:
        """Whether the scale that creates ``epoch`` is done (the epoch is current)."""
        self._steps.check_stream(scope, stream)
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
        self._steps.ready()
        state = self._steps.check_stream(scope, stream)
        stored = _stored_config(config)
        if state in (StreamState.SEALING, StreamState.SEALED):
            raise StreamSealedError(f"stream {scope}/{stream} is sealed")
        request = self._new_id()
        self._steps.post("update", scope, stream, request=request)
        try:
            self._store.streams.put_update(scope, stream, stored, request)
        except ConflictingUpdateError:
            raise ConflictingUpdateError(
                f"an update of {scope}/{stream} is under way; try again once it is done"
            ) from None
        self._steps.wake(scope, stream)
        return True

    def check_update(self, scope: str, stream: str) -> bool:
        """Whether no update of the stream is pending."""
        self._steps.check_stream(scope, stream)
        return self._store.streams.pending_update(scope, stream) is None

    def seal_stream(self, scope: str, stream: str) -> bool:
        """Ask for the stream to be sealed; True if it is SEALED already (else poll
        :meth:`get_stream_info`)."""
        self._steps.ready()
        state = self.get_stream_info(scope, stream).state
        if state is StreamState.SEALED:
            return True
        if state is StreamState.CREATING:  # a create interrupted earlier: finish it first
            key = f"streams/{scope}/{stream}"
            self._steps.run_workflow(key, lambda: self._finish_create(scope, stream))
        self._steps.post("seal", scope, stream)
        return False

    def _request_seal(self, scope: str, stream: str) -> None:
        """Post a seal request for a stream found SEALING (a seal cut short before its
        request was posted, by a controller of data format 5); a duplicate is harmless."""
        self.get_stream_info(scope, stream)  # a damaged record is quarantined, not posted
        self._steps.post("seal", scope, stream)

    def delete_stream(self, scope: str, stream: str) -> bool:
        """Ask for a sealed stream to be deleted; False if it does not exist (poll
        :meth:`get_stream_info` until StreamNotFoundError).

        Raises StreamNotSealedError (seal it first), ScopeNotFoundError, InvalidNameError.
        """
        self._steps.ready()
        try:
            state = self._steps.check_stream(scope, stream)
        except StreamNotFoundError:
            return False
        if state is not StreamState.SEALED:
            raise StreamNotSealedError(f"stream {scope}/{stream} is {state.value}; seal it first")
        self._steps.post("delete", scope, stream)
        return True


def _check_segment_id(segment_id: object) -> None:
    """InvalidArgumentError unless ``segment_id`` is an int in [0, 2**63)."""
    if not (isinstance(segment_id, int) and is_int(segment_id) and 0 <= segment_id < 1 << 63):
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
