"""One segment's sending side of an event writer: in-flight blocks, acks, reconnects.

*design* (after Pravega's ``SegmentOutputStreamImpl``) A writer has one
:class:`SegmentOutputStream` per segment. The writer's pump asks each for the blocks
it may send now (:meth:`SegmentOutputStream.collect_sends`) and sends them
(:meth:`~SegmentOutputStream.send`) without waiting for earlier acks, up to
``blocks_in_flight_max`` per segment. Each block is a conditional append: *the
writer's last event number on this segment is the previous block's last*
(``sent_last``). A block is sent when full, when the segment has nothing in flight
(so a light load is not delayed), or after ``linger_s``.

What an answer does:

* an ack completes every in-flight block up to the acknowledged one;
* an outcome-unknown error (:class:`RetriableError`: the container died or is
  restarting; a call unanswered for ``append_call_timeout_s``, see
  :meth:`~SegmentOutputStream.give_up_on_stuck_calls`), a failed condition, or a
  sealed segment marks the stream *reconnecting*. Once its other calls have finished,
  the pump calls :meth:`~SegmentOutputStream.reconnect`: ``setup_append`` returns the
  writer's last persisted event number, every block at or below it completes, and the
  rest are sent again, in order, before anything newer. Nothing acknowledged is lost
  and nothing is written twice. A sealed segment of a stream that is not sealed hands
  what is left (in flight, queued, open: in order) to the writer with the segment's
  successors (``WriterContext.on_segment_sealed``), which re-routes it (after Pravega's
  ``EventStreamWriterImpl.handleSegmentSealed``); StreamSealedError fails it if the
  stream is sealed (or being sealed), SegmentSealedError if a sealed segment has no
  successors while its stream is not sealed (which a scale never leaves). A stream
  segment *gone* (SegmentNotFoundError: sealed by a scale, then deleted by a truncation
  while the writer had nothing for it, as Pravega's writer treats NoSuchSegment) is sealed
  too, and everything in flight goes to its successors (a deleted segment was sealed
  first, so none of it was stored there);
* a late answer to a call already given up on: a success completes what it covers; a
  failure changes nothing (the give-up counted as outcome unknown). A reconnect completes
  queued blocks its last event number covers, too: a given-up call may land after the
  reconnect that queued its block again;
* any other error means the store *refused* the block itself (e.g.
  InvalidArgumentError). It is never resent: the reconnect fails it with the store's
  error and every later block of the segment (in flight, queued or open: each was
  conditional on its predecessor) with an error of the same type saying an earlier
  event was refused, and the segment goes on with new writes.

A stream opened for a successor segment starts with a *handshake*: before it sends
anything it asks ``setup_append`` for the writer's last event number there. A writer
that already wrote to that segment (it was reached earlier through another sealed
predecessor, and retired since) numbers its events after that number, so no conditional
append takes new events for ones already there.

Backpressure: :meth:`~SegmentOutputStream.wait_for_space` blocks a writing thread
while ``blocks_queued_max`` full blocks wait to be sent, except a thread that
completes the writer's futures (it may be the one that delivers the acks that would
make room).

Locking: the output streams of a writer share its lock (:class:`WriterContext`).
Methods say whether they run under it. Futures are completed only after the lock is
released (:meth:`WriterContext.complete_settled`), because their callbacks run user
code, which may call the writer again.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import TYPE_CHECKING, Any

from pravega_ray import constants
from pravega_ray.client.event_accumulator import Block, SegmentBlocks
from pravega_ray.client.large_events import send_large_event
from pravega_ray.client.writer_context import Successors, WriterContext, refused_earlier
from pravega_ray.contracts.records import StreamState
from pravega_ray.errors import (
    ConditionalAppendFailedError,
    PravegaError,
    RetriableError,
    SegmentNotFoundError,
    SegmentSealedError,
    StreamSealedError,
)
from pravega_ray.invariant import invariant
from pravega_ray.naming import is_transaction_segment, parse_segment_name

if TYPE_CHECKING:
    pass

__all__ = ["SegmentOutputStream", "Send", "Successors", "WriterContext"]

# The writer's logger: its messages keep the one name users configure, as before the
# writer was split into parts.
log = logging.getLogger("pravega_ray.client.writer")

Send = tuple["SegmentOutputStream", Block, int]
"""A block to send now: its stream, the block, and the last event number it expects."""


class SegmentOutputStream:
    """The sending side of one segment of a writer (see the module docstring)."""

    __slots__ = (
        "_context",
        "acked_length",
        "blocks",
        "handshake",
        "length_unknown",
        "name",
        "reconnecting",
        "sealed",
        "sealed_error",
        "sent_last",
    )

    def __init__(self, name: str, context: WriterContext, *, handshake: bool = False) -> None:
        """``handshake``: ask ``setup_append`` for the writer's last event number before
        sending anything (a successor segment the writer may have written to before)."""
        self.name = name
        self.blocks = SegmentBlocks(name)
        self._context = context
        self.sent_last = constants.NO_EVENT_NUMBER  # last event number of the last sent block
        # Where this writer's acknowledged events end (a writer's mark, writer_marks.py);
        # unknown after a reconnect settled events without telling where they end.
        self.acked_length = 0
        self.length_unknown = False
        # A handshake is a reconnect with nothing in flight: the pump runs it first.
        self.handshake = handshake
        self.reconnecting = handshake
        # Sealed: nothing more is sent. Re-routed (sealed_error None: the writer no longer
        # routes here) or failed for good (later events fail with sealed_error).
        self.sealed = False
        self.sealed_error: PravegaError | None = None

    # --- sending (the pump) --------------------------------------------------------------------
    def collect_sends(self, now: float, sends: list[Send]) -> None:
        """Under the lock: add the blocks to send now to ``sends`` and mark them in flight.

        On a segment sealed for good, fails every block written to it since instead.
        """
        if self.sealed:
            if self.sealed_error is not None and (self.blocks.queued or self.blocks.open):
                self.fail(self.sealed_error)
            return
        if self.reconnecting:
            return
        context = self._context
        blocks = self.blocks
        window = context.config.blocks_in_flight_max
        linger_s = context.config.linger_s
        inflight = blocks.inflight
        while len(inflight) < window:
            # A large event goes alone, once everything before it is acknowledged (the
            # segment is flushed), and nothing goes after it until it is merged: the order per
            # routing key with small events holds.
            if inflight and inflight[-1][0].large is not None:
                break
            if blocks.queued:
                if blocks.queued[0].large is not None and inflight:
                    break
                block = blocks.queued.popleft()
                context.space.notify_all()
            elif blocks.open is not None and (
                not blocks.inflight or now - blocks.open.created >= linger_s
            ):
                block, blocks.open = blocks.open, None
            else:
                break
            expected = self.sent_last
            self.sent_last = block.last
            block.sent_at = now
            future: Future[Any] = Future()  # replaced by the connection's future in send()
            blocks.inflight.append((block, future))
            sends.append((self, block, expected))

    def idle_wait_s(self, now: float, wait_s: float) -> float:
        """Under the lock: ``wait_s``, shortened to when this segment's open block may go.

        An open block that cannot go (the segment reconnects or has a full window) must
        not shorten the pump's sleep: with ``linger_s`` 0 the pump would spin.
        """
        block = self.blocks.open
        config = self._context.config
        if (
            block is not None
            and not self.reconnecting
            and not self.sealed
            and len(self.blocks.inflight) < config.blocks_in_flight_max
        ):
            return min(wait_s, block.created + config.linger_s - now)
        return wait_s

    def send(self, block: Block, expected: int) -> None:
        """Not under the lock: send ``block`` (collected by :meth:`collect_sends`)."""
        context = self._context
        call: Future[Any]
        if block.large is not None:
            call = send_large_event(context, self.name, block, expected)
        else:
            data = block.seal()
            call = context.connection.append(
                self.name, context.writer_id, expected, block.last, block.count, data
            )
        with context.lock:
            inflight = self.blocks.inflight
            for i, (b, _) in enumerate(inflight):
                if b is block:
                    inflight[i] = (block, call)
                    break
        call.add_done_callback(functools.partial(self._on_append_done, block))

    def give_up_on_stuck_calls(self, now: float) -> None:
        """Under the lock: treat calls unanswered for ``append_call_timeout_s`` as outcome-unknown.

        Defense in depth against a lost completion: the reconnect's setup_append finds
        out what was persisted, and resends are conditional, so a late answer can
        neither duplicate nor lose anything. It applies while the segment is already
        reconnecting too: the reconnect waits for every call of the segment to finish, so
        one call whose answer is lost would otherwise stall the segment for good (found by
        the deterministic simulation, ``sim/``: seed 7).
        """
        timeout_s = self._context.config.append_call_timeout_s
        inflight = self.blocks.inflight
        # A large event is exempt: its sender times each of its own calls.
        if not any(
            not call.done() and block.large is None and now - block.sent_at > timeout_s
            for block, call in inflight
        ):
            return
        log.warning("append to %s unanswered for %.1fs; reconnecting", self.name, timeout_s)
        for i, (block, call) in enumerate(inflight):
            if not call.done() and block.large is None:
                given_up: Future[Any] = Future()
                given_up.set_exception(RetriableError("append call unanswered"))
                inflight[i] = (block, given_up)
        self.reconnecting = True

    def reconnect_due(self) -> bool:
        """Under the lock: a call failed and every call of the segment has finished."""
        return self.reconnecting and all(f.done() for _, f in self.blocks.inflight)

    # --- answers -------------------------------------------------------------------------------
    def _on_append_done(self, block: Block, call: Future[Any]) -> None:
        error = call.exception()
        try:
            with self._context.lock:
                self._on_append_done_locked(block, call, error)
        finally:
            self._context.complete_settled()

    def _on_append_done_locked(
        self, block: Block, call: Future[Any], error: BaseException | None
    ) -> None:
        if error is None:
            # Even the late success of a call given up on: its events are in the segment.
            length = getattr(call.result(), "length", None)
            if isinstance(length, int):
                self.acked_length = max(self.acked_length, length)
            else:
                self.length_unknown = True
            self._complete_acked(upto=block.last)
        elif not any(b is block and c is call for b, c in self.blocks.inflight):
            # A late failure of a call given up on (give_up_on_stuck_calls): that already
            # counted as outcome unknown, and the block was settled or queued again by the
            # reconnect. Reconnecting once more for it would find a block queued again that
            # the same late call may have persisted meanwhile (the simulation's seed
            # 238155196); _resolve settles such blocks anyway.
            return
        elif isinstance(error, (RetriableError, ConditionalAppendFailedError)):
            self.reconnecting = True
        elif isinstance(error, (SegmentSealedError, StreamSealedError)) or self._gone(error):
            self.reconnecting = True  # the reconnect finds out whether the stream is sealed
        else:
            # The store refused the block itself (InvalidArgumentError, DataCorruptionError,
            # ...): resending it cannot help. The reconnect settles what persisted and fails
            # this block and every later one of the segment (they were conditional on it);
            # the warning is logged there, once.
            block.rejection = (
                error if isinstance(error, PravegaError) else PravegaError(repr(error))
            )
            self.reconnecting = True
        self._context.wake.notify()

    def _complete_acked(self, upto: int) -> None:
        """Under the lock: complete in-flight blocks whose events are all at or below ``upto``."""
        inflight = self.blocks.inflight
        while inflight and inflight[0][0].last <= upto:
            self._context.settle(inflight.popleft()[0])
        self._context.space.notify_all()

    # --- reconnecting --------------------------------------------------------------------------
    def reconnect(self) -> None:
        """Not under the lock: re-establish the segment; resend only what was not persisted.

        Called by the pump once :meth:`reconnect_due`. Asks the store for the writer's
        last persisted event number, ``reconnect_attempts_max`` times while it is
        unavailable (``reconnect_backoff_s`` more between each attempt, at most 2 s).
        """
        try:
            last, error = self._last_persisted()
            if last is not None:
                sealed = self._sealed_outcome()
            elif self._gone(error):
                sealed = self._successors(SegmentNotFoundError(f"segment {self.name} is gone"))
            else:
                sealed = None
            with self._context.lock:
                self._resolve(last, error, sealed)
        finally:
            self._context.complete_settled()

    def _gone(self, error: BaseException | None) -> bool:
        """Whether ``error`` says this stream segment was deleted: truncated away by
        retention or a truncation after a scale sealed it, while this writer had nothing
        to write to it (or the stream deleted). As Pravega's writer does with
        NoSuchSegment, what is left goes to its successors (a transaction segment gone is
        an aborted transaction: its writes fail)."""
        return isinstance(error, SegmentNotFoundError) and not is_transaction_segment(self.name)

    def _last_persisted(self) -> tuple[int | None, BaseException | None]:
        """The writer's last event number the store holds, or None and why it is unknown."""
        context = self._context
        backoff_s = context.config.reconnect_backoff_s
        error: BaseException | None = None
        for attempt in range(context.config.reconnect_attempts_max):
            try:
                last: int = context.connection.setup_append(self.name, context.writer_id).result(
                    constants.CONTROLLER_CALL_TIMEOUT_S
                )
                return last, None
            except (RetriableError, FutureTimeoutError) as e:
                error = e
                context.scheduler.sleep(min(2.0, backoff_s * (attempt + 1)))
            except PravegaError as e:
                return None, e
        return None, error

    def _resolve(
        self,
        last: int | None,
        error: BaseException | None,
        sealed: PravegaError | Successors | None,
    ) -> None:
        """Under the lock: settle, fail or resend every in-flight block, given ``last``.

        In event-number order, each in-flight block is: persisted (at or below ``last``):
        completed; refused by the store (``rejection``): failed with that error, never
        resent; behind a refused block: failed, as is everything queued or open on the
        segment, because each block's condition chains on its predecessor and the refused
        events will never be there (:func:`refused_earlier`); otherwise resent, in order,
        before anything newer. Without ``last`` (the store stayed unavailable), everything
        pending fails with ``error``. A sealed segment (``sealed``: its successors or the
        error to fail with) resends nothing: what is left is re-routed or failed.
        """
        context = self._context
        blocks = [b for b, _ in self.blocks.inflight]
        self.blocks.inflight.clear()
        self.length_unknown = True  # blocks may be settled below: their ends unknown
        if last is None and isinstance(sealed, dict):
            # The segment is gone (_gone): a segment is deleted only once sealed and wholly
            # before a truncation, so nothing in flight now was stored in it; all of it goes
            # to the successors.
            last = min([b.first for b in blocks], default=self.sent_last + 1) - 1
            for block in blocks:
                if self._gone(block.rejection):
                    block.rejection = None
        if last is None:
            failure = error if isinstance(error, PravegaError) else PravegaError(repr(error))
            for block in blocks:
                if block.rejection is not None:
                    context.settle(block, block.rejection)  # its own error first wins
            self.fail(failure, blocks)
            return
        resend: list[Block] = []
        behind: list[Block] = []
        refused: Block | None = None
        for block in blocks:
            if block.last <= last:
                context.settle(block)  # persisted before the failure
            elif refused is not None:
                behind.append(block)
            elif block.rejection is not None:
                refused = block
            else:
                invariant(block.first > last, "a block was partly persisted")
                resend.append(block)
        if not self.handshake:  # before a handshake, queued blocks are not numbered yet
            self._settle_requeued(last)
        self.sent_last = last
        self.reconnecting = False
        if refused is not None:
            self._fail_refused(refused, behind)
        if isinstance(sealed, dict):
            self.sealed = True
            unsent = resend + self.blocks.take_unsent()
            context.space.notify_all()
            log.info(
                "writer: %s sealed, re-routing %d blocks to %s",
                self.name,
                len(unsent),
                sorted(r.name for r in sealed),
            )
            context.on_segment_sealed(self, sealed, unsent)
            context.wake.notify()
            return
        if isinstance(sealed, RetriableError):
            # The controller stayed unreachable: fail what is left (outcome unknown, as
            # when setup_append gives up) and look again on the next round.
            self.reconnecting = True
            self.fail(sealed, resend)
            return
        if sealed is not None:
            self.sealed = True
            self.sealed_error = sealed
            if isinstance(sealed, StreamSealedError):
                context.on_stream_sealed(sealed)
            self.fail(sealed, resend)
            return
        handshake, self.handshake = self.handshake, False
        if handshake:
            invariant(not resend, "nothing is sent before the handshake")
            self.blocks.renumber_after(last)
        self.blocks.requeue(resend)
        if refused is None and not handshake:
            log.info(
                "writer reconnected to %s: last persisted event %d, resending %d blocks",
                self.name,
                last,
                len(resend),
            )
        context.wake.notify()

    def _settle_requeued(self, last: int) -> None:
        """Under the lock: complete the queued blocks at or below ``last``.

        A block queued again by an earlier reconnect is not yet sent again, but its first
        call, given up on as unanswered, may have landed since: then the store holds its
        events, and sending it again (conditional on ``last``) would be refused as a block
        numbered below its condition, or, re-routed to a sealed segment's successors,
        would store its events twice. Queued blocks follow every in-flight one, so this
        runs after those are settled.
        """
        queued = self.blocks.queued
        if queued and queued[0].last <= last:
            while queued and queued[0].last <= last:
                self._context.settle(queued.popleft())
            self._context.space.notify_all()
        invariant(not queued or queued[0].first > last, "a queued block was partly persisted")

    def _fail_refused(self, refused: Block, behind: list[Block]) -> None:
        """Under the lock: fail a block the store refused and every later block of the segment.

        The later ones (in flight behind it, queued, open) get an error of the same type
        saying an earlier event was refused; the segment then goes on with new writes.
        """
        rejection = refused.rejection
        invariant(rejection is not None, "a refused block has its error")
        assert rejection is not None
        later = behind + self.blocks.take_unsent()
        context = self._context
        context.settle(refused, rejection)
        derived = refused_earlier(rejection, self.name)
        for block in later:
            context.settle(block, derived)
        context.space.notify_all()
        log.warning(
            "append to %s refused: %r; failed events %d to %d and %d later blocks, not resent",
            self.name,
            rejection,
            refused.first,
            refused.last,
            len(later),
        )

    def _sealed_outcome(self) -> PravegaError | Successors | None:
        """Not under the lock: None if the segment is not sealed (or that cannot be found
        out: the resend finds out again); else its successors, or the error that fails
        what is left: StreamSealedError if the stream is sealed or being sealed,
        SegmentSealedError if it is not and the segment has no successors, or the
        controller's error once ``reconnect_attempts_max`` calls could not reach it."""
        context = self._context
        try:
            if not context.connection.get_info(self.name).result(60).sealed:
                return None
        except (PravegaError, FutureTimeoutError):
            return None
        return self._successors(SegmentSealedError(f"segment {self.name} is sealed"))

    def _successors(self, failure: PravegaError) -> PravegaError | Successors:
        """Not under the lock: the sealed (or gone) segment's successors, or the error
        that fails what is left (:meth:`_sealed_outcome`; ``failure`` when it has none
        while the stream is not sealed)."""
        context = self._context
        scope, stream = context.scope, context.stream
        backoff_s = context.config.reconnect_backoff_s
        for attempt in range(context.config.reconnect_attempts_max):
            try:
                segment_id = parse_segment_name(self.name).segment_id
                successors = context.controller.get_successors(scope, stream, segment_id)
                if successors:
                    return successors
                # None: the stream was sealed (a scale adds its successors before it
                # seals a segment), or is being sealed.
                state = context.controller.get_stream_info(scope, stream).state
                if state in (StreamState.SEALING, StreamState.SEALED):
                    return StreamSealedError(f"stream {scope}/{stream} is sealed")
                return failure
            except RetriableError as e:
                failure = e
                context.scheduler.sleep(min(2.0, backoff_s * (attempt + 1)))
            except PravegaError as e:
                log.warning("successors of sealed %s not found: %r", self.name, e)
                return failure
        return failure

    # --- failing and backpressure --------------------------------------------------------------
    def fail(self, error: PravegaError, first: list[Block] | None = None) -> None:
        """Under the lock: fail ``first`` and then every other pending block of the segment."""
        head = first or []
        pending = head + [b for b in self.blocks.pending() if b not in head]
        self.blocks.inflight.clear()
        self.blocks.take_unsent()
        for block in pending:
            self._context.settle(block, error)
        self._context.space.notify_all()

    def wait_for_space(self, usable: Callable[[], bool]) -> None:
        """Under the lock: block the caller while too many blocks wait to be sent.

        Returns at once on a thread that must not block (:meth:`WriterContext.may_block`),
        and once the segment is sealed or ``usable()`` (the writer is open and not failed)
        turns false.
        """
        context = self._context
        if not context.may_block():
            return
        limit = context.config.blocks_queued_max
        queued = self.blocks.queued
        while len(queued) >= limit and usable() and not self.sealed:
            context.space.wait(1.0)
