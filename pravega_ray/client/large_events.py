"""Large events: one event over ``MAX_EVENT_SIZE_BYTES`` through a transient segment.

*protocol* (Pravega's design proposal PDP-43A, "Client"; docs/design.md, "Large events")
A large event is a block of its own in its segment's queue
(``EventAccumulator.append_large``). The segment's output stream sends it only once
every earlier block of the segment is acknowledged (the target is flushed) and sends
nothing after it until it is done, so the order with small events of the same routing key
holds. Sending it (:func:`send_large_event`, on a thread of its own) runs, in order:

1. ``create_transient_segment(target)``: the store names the segment;
2. append the framed event (8-byte header + payload) to it in slices of at most
   ``LARGE_EVENT_CHUNK_BYTES``, each conditional on the transient segment's length
   (``LARGE_EVENT_CHUNKS_IN_FLIGHT`` pipelined); the payload is sliced through a
   memoryview, so only the slices in flight are ever copied;
3. seal the transient segment;
4. ``merge(target, transient, (mark,))`` where *mark* sets the writer's attribute on the
   target (writer id -> the event's number) if it still equals the previous block's last
   event number: the merge is the large event's conditional append.

The block's future completes when the merge is acknowledged. Its answers travel the
output stream's usual paths: a merge whose outcome is unknown (the container restarted)
is a RetriableError, and the reconnect's ``setup_append`` reads the mark: if it landed the
event is done, else the whole protocol runs again (exactly once). A sealed target
(SegmentSealedError from step 1 or 4) re-routes the event to the successor owning its
routing key, where the protocol runs again. A failed step on the transient segment (it
was deleted by the container's cleanup after a restart, a call timed out) is retriable
too, up to ``reconnect_attempts_max`` runs. A transient segment left unmerged is deleted
here when possible and otherwise by the container's cleanup; nothing of it is ever
visible in the target.
"""

from __future__ import annotations

import logging
from collections import deque
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, TypeVar

from pravega_ray.client.event_accumulator import Block
from pravega_ray.client.writer_context import WriterContext
from pravega_ray.constants import APPEND_BLOCK_BYTES_MAX, EVENT_TYPE_PLAIN, MIB
from pravega_ray.contracts.attributes import AttributeUpdate, AttributeUpdateType
from pravega_ray.errors import (
    ConditionalAppendFailedError,
    ConditionalUpdateError,
    NotFoundError,
    PravegaError,
    RetriableError,
    SegmentSealedError,
)

__all__ = ["LARGE_EVENT_CHUNKS_IN_FLIGHT", "LARGE_EVENT_CHUNK_BYTES", "send_large_event"]

log = logging.getLogger("pravega_ray.client.writer")

LARGE_EVENT_CHUNK_BYTES = 8 * MIB
"""The largest slice of a large event sent in one append to its transient segment."""
LARGE_EVENT_CHUNKS_IN_FLIGHT = 4
"""Appends of one large event in flight at once (bounds the copies of its slices)."""

assert LARGE_EVENT_CHUNK_BYTES <= APPEND_BLOCK_BYTES_MAX

R = TypeVar("R")


class _TransientStepFailed(RetriableError):
    """A step on the transient segment failed; the protocol runs again from the start."""


def send_large_event(
    context: WriterContext, target: str, block: Block, expected: int
) -> Future[None]:
    """Start writing ``block``'s large event to ``target``; the future completes when merged.

    Runs on a thread of the writer's scheduler (inline when the scheduler starts none: a
    test driving the pump by hand). The future fails with the typed error of the step that
    failed (see the module docstring).
    """
    future: Future[None] = Future()
    block.large_attempts += 1

    def run() -> None:
        try:
            write_large_event(context, target, block, expected)
        except PravegaError as e:
            future.set_exception(e)
        except BaseException as e:  # a bug: fail the event, not the thread silently
            log.exception("large event to %s", target)
            future.set_exception(PravegaError(f"large event failed: {e!r}"))
        else:
            future.set_result(None)

    if context.scheduler.start(run, f"pravega-large-event-{target}") is None:
        run()
    return future


def write_large_event(context: WriterContext, target: str, block: Block, expected: int) -> None:
    """The protocol, synchronously: transient segment, slices, seal, merge with the mark."""
    payload = block.large
    assert payload is not None
    connection = context.connection
    timeout_s = context.config.append_call_timeout_s
    transient = _wait(connection.create_transient_segment(target), timeout_s)
    merged = False
    try:
        try:
            _write_framed(context, transient, payload)
            _wait(connection.seal(transient), timeout_s)
        except (RetriableError, NotFoundError, ConditionalUpdateError) as e:
            _check_attempts(context, target, block, e)
            raise _TransientStepFailed(f"large event to {target}: {e!r}; retrying") from e
        mark = AttributeUpdate(
            context.writer_id, AttributeUpdateType.REPLACE_IF_EQUALS, block.last, expected
        )
        try:
            _wait(connection.merge(target, transient, (mark,)), timeout_s)
        except ConditionalUpdateError as e:
            raise ConditionalAppendFailedError(
                f"large event to {target}: the writer's last event number is not {expected}"
            ) from e
        except SegmentSealedError:
            raise  # the output stream re-routes it to the successors
        except NotFoundError as e:  # the cleanup deleted the transient segment (a restart)
            _check_attempts(context, target, block, e)
            raise _TransientStepFailed(f"large event to {target}: {e!r}; retrying") from e
        merged = True
    finally:
        if not merged:
            # Best effort; the container's cleanup deletes it otherwise. Deleting one whose
            # merge did land (outcome unknown) finds it gone.
            connection.delete_segment(transient)


def _write_framed(context: WriterContext, transient: str, payload: bytes) -> None:
    """Append the frame (header + payload) to ``transient`` in conditional slices."""
    connection = context.connection
    timeout_s = context.config.append_call_timeout_s
    size = len(payload)
    view = memoryview(payload)
    header = EVENT_TYPE_PLAIN.to_bytes(4, "big") + size.to_bytes(4, "big")
    calls: deque[Future[Any]] = deque()
    offset = position = 0
    while position < size:
        if position == 0:
            data = header + view[: LARGE_EVENT_CHUNK_BYTES - len(header)]
        else:
            data = bytes(view[position : position + LARGE_EVENT_CHUNK_BYTES])
        position += len(data) - (len(header) if offset == 0 else 0)
        event_count = 1 if position >= size else 0  # the target counts the event on merge
        calls.append(connection.append_conditional(transient, data, (), offset, event_count))
        offset += len(data)
        del data
        while len(calls) >= LARGE_EVENT_CHUNKS_IN_FLIGHT:
            _wait(calls.popleft(), timeout_s)
    while calls:
        _wait(calls.popleft(), timeout_s)


def _check_attempts(
    context: WriterContext, target: str, block: Block, error: BaseException
) -> None:
    """PravegaError (not retried) once the protocol ran ``reconnect_attempts_max`` times."""
    if block.large_attempts >= context.config.reconnect_attempts_max:
        raise PravegaError(
            f"large event to {target} failed {block.large_attempts} times: {error!r}"
        ) from error


def _wait(call: Future[R], timeout_s: float) -> R:
    try:
        return call.result(timeout_s)
    except FutureTimeoutError:
        raise RetriableError(f"call unanswered for {timeout_s}s") from None
