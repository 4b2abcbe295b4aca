"""The event writer: routing, batching into append blocks, pipelining, reconnects.

How a write travels (docs/design.md, "The append path"):

1. ``write_event`` serializes and frames the event, picks the segment whose
   key range holds the routing key's hash (by the stream's routing rule,
   ``StreamInfo.key_hash``: ``segment_selector.py``), gives the event the segment's next
   *event number* and adds it to the segment's open block. It returns a
   :class:`WriteFuture`, a small handle on the block's single future (one
   future per block, not per event: a future costs 3.5 us, docs/stack.md).
2. A pump thread sends blocks without waiting for earlier acks, up to
   ``WRITER_BLOCKS_IN_FLIGHT_MAX`` per segment. A block is sent when full, when
   the segment has nothing in flight (so a light load is not delayed: an ack
   wakes the pump), or after ``WRITER_LINGER_S``. Each block is a conditional
   append: *the writer's last event number on this segment is the previous
   block's last*.
3. A block's future completes once the container has the block in its durable
   log. If a call fails with an outcome-unknown error (container died or is
   restarting) or its condition, the pump waits for the segment's other calls
   to finish, asks the container for the writer's last persisted event number
   (``setup_append``), completes every block at or below it, and resends the
   rest. So nothing acknowledged is lost and nothing is written twice; order
   per routing key is kept because a key always maps to one segment and
   blocks of a segment are applied in event-number order.
4. A sealed segment of a stream that is not sealed (the stream scaled): once its
   other calls finished, the pump completes what persisted (``setup_append``), asks
   the controller for the segment's successors, puts them in its place in the
   segment selector (each over its part of the sealed segment's key range) and moves
   every unacknowledged event of the segment, in order, to the successor owning its
   routing key, before anything written later (the move and the new routing happen
   under the writer's lock). Their futures complete once the successors acknowledge
   them. Events written meanwhile queue behind them on the sealed segment and move
   with them. A successor sealed in turn does the same, so any number of scales in a
   row work; two sealed segments merged into one successor share its output stream.
   Only a sealed *stream* fails events (StreamSealedError).
5. A block the store *refuses* (any other error, e.g. InvalidArgumentError: the
   request itself is bad) is never resent. After the segment's other calls finish,
   the reconnect completes what persisted, fails the refused block with the store's
   error and every later block of the segment (in flight, queued or open: each was
   conditional on its predecessor) with an error of the same type saying an
   earlier event was refused, and the segment goes on: later writes succeed. The
   writer itself never builds such a block (``write_event`` closes a block before
   it would outgrow ``APPEND_BLOCK_BYTES_MAX``; ``write_events`` refuses a batch
   that does not fit one), so this is defense in depth.

Thread-safety: ``write_event``, ``flush`` and ``close`` may be called from any
thread. Futures' callbacks run on the pump or a connection thread.

*design* (after Kafka's accumulator and sender, and Pravega's ``SegmentOutputStream``)
The writer is four parts, each in its own module, sharing one lock:

* :class:`~pravega_ray.client.segment_selector.SegmentSelector`: routing key -> segment;
* :class:`~pravega_ray.client.event_accumulator.EventAccumulator`: framing, event
  numbers, open and queued blocks, the block-size limit;
* :class:`~pravega_ray.client.segment_output_stream.SegmentOutputStream`, one per
  segment: blocks in flight, acks, the stuck-call watchdog, reconnects and resends,
  refused blocks, backpressure;
* this module: the public API and the pump (the sender), which moves blocks from the
  accumulator to the output streams and runs reconnects.

Seams for a deterministic simulation: the writer takes a ``clock`` (linger and the
watchdog), an ``rng`` (the writer id and the segment of an event without a routing
key) and a ``scheduler`` that starts the pump and sleeps between reconnect attempts.
With a scheduler that starts no thread (``ManualThreadScheduler``), the caller drives
the pump by calling :meth:`EventStreamWriter.pump_round`.
"""

from __future__ import annotations

import logging
import random
import threading
import uuid
from collections.abc import Iterable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, Generic, TypeVar

from pravega_ray import constants
from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.client.event_accumulator import Block, EventAccumulator, SegmentBlocks
from pravega_ray.client.segment_output_stream import (
    SegmentOutputStream,
    Send,
    Successors,
    WriterContext,
)
from pravega_ray.client.segment_selector import SegmentSelector
from pravega_ray.client.serializers import (
    BytesSerializer,
    Serializer,
    check_serializer,
    serialized_bytes,
)
from pravega_ray.client.switch_interval import hold_switch_interval, release_switch_interval
from pravega_ray.client.writer_config import WriterConfig, check_timeout
from pravega_ray.client.writer_marks import MarkSender
from pravega_ray.contracts.watermarks import check_time_ms
from pravega_ray.errors import (
    ClientClosedError,
    EventTooLargeError,
    IllegalStateError,
    InvalidArgumentError,
    PravegaError,
    StreamSealedError,
)
from pravega_ray.naming import is_transaction_segment, parse_segment_name, validate_stream_name
from pravega_ray.timing import (
    DAEMON_THREADS,
    SYSTEM_CLOCK,
    Clock,
    Joinable,
    ThreadScheduler,
    check_clock,
    check_rng,
    check_thread_scheduler,
    wait_futures,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

PUMP_IDLE_WAIT_S_MAX = 0.5
"""The longest the pump sleeps with nothing to do: the stuck-call watchdog's tick."""


class WriteFuture:
    """Completion of one ``write_event``: done when the event is durably stored.

    ``result()`` returns None or raises the error that failed the event
    (e.g. :class:`StreamSealedError`).
    """

    __slots__ = ("_block",)

    def __init__(self, block: Block) -> None:
        self._block = block

    def result(self, timeout: float | None = None) -> None:
        self._block.future.result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._block.future.exception(timeout)

    def done(self) -> bool:
        return self._block.future.done()

    def add_done_callback(self, fn: Any) -> None:
        """Call ``fn(self)`` once the event is acknowledged or failed."""
        self._block.future.add_done_callback(lambda _f: fn(self))


# Builds a WriteFuture without running ``__init__``: on the hot path a class call with
# a Python ``__init__`` costs about twice as much (~0.16 us against ~0.09 us here).
_new_write_future = object.__new__


class EventStreamWriter(Generic[T]):
    """Writes events to one stream; from ``cluster.create_writer``, used as a context manager.

    The constructor checks its arguments before it starts anything (no thread, no
    call): InvalidArgumentError if ``config`` is neither a WriterConfig nor None,
    ``serializer`` has no callable ``serialize``/``deserialize`` (or is a class, not
    an instance), or a seam below is not what it must be; InvalidNameError for a bad
    scope or stream name. It then asks the
    controller for the stream's segments: StreamNotFoundError / ScopeNotFoundError,
    and StreamSealedError for a sealed stream.

    Keyword-only seams (module docstring): ``clock`` times the linger and the
    watchdog; ``rng``, if given, makes the writer id and the choice of segment for
    events without a routing key reproducible; ``scheduler`` starts the pump (a
    daemon thread by default) and sleeps between reconnect attempts.
    """

    def __init__(
        self,
        scope: str,
        stream: str,
        serializer: Serializer[T],
        controller: ControllerConnection,
        segments: SegmentStoreConnection,
        config: WriterConfig | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        scheduler: ThreadScheduler = DAEMON_THREADS,
    ) -> None:
        if config is not None and not isinstance(config, WriterConfig):
            raise InvalidArgumentError(
                f"config must be a WriterConfig or None, got {type(config).__name__}"
            )
        check_serializer(serializer)
        check_clock(clock)
        check_rng(rng)
        check_thread_scheduler(scheduler)
        validate_stream_name(scope, stream)
        self.scope = scope
        self.stream = stream
        self.writer_id = (
            uuid.uuid4().bytes
            if rng is None
            else uuid.UUID(int=rng.getrandbits(128), version=4).bytes
        )
        self._serializer = serializer
        self._config = config or WriterConfig()
        info = controller.get_stream_info(scope, stream)
        if info.sealed:
            raise StreamSealedError(f"stream {scope}/{stream} is sealed")
        self._closed = False
        self._failure: PravegaError | None = None
        self._scheduler = scheduler
        self._marks: MarkSender | None = None  # made by the first note_time
        self._context = WriterContext(
            scope=scope,
            stream=stream,
            writer_id=self.writer_id,
            connection=segments,
            controller=controller,
            config=self._config,
            scheduler=scheduler,
            on_stream_sealed=self._on_stream_sealed,
            on_segment_sealed=self._on_segment_sealed,
        )
        self._lock = self._context.lock
        self._wake = self._context.wake
        self._monotonic = clock.monotonic
        ranges = sorted(info.segments, key=lambda s: s.key_low)
        self._streams = [SegmentOutputStream(s.name, self._context) for s in ranges]
        # The live output streams by segment name: successors shared by merged segments.
        self._by_name = {out.name: out for out in self._streams}
        # The stream's routing rule (Pravega's or the legacy one), fixed for its life.
        self._selector = SegmentSelector(
            [(s.key_low, out) for s, out in zip(ranges, self._streams, strict=True)],
            rng,
            key_hash=info.key_hash,
        )
        self._accumulator = EventAccumulator(
            self._config.block_bytes_target, clock, self._wake.notify
        )
        # The hot path reads these directly: one attribute lookup each, no call.
        self._key_cache = self._selector.key_cache
        self._headers = self._accumulator.headers
        self._append = self._accumulator.append
        self._blocks_queued_max = self._config.blocks_queued_max
        self._bytes_passthrough = isinstance(serializer, BytesSerializer)
        self._pump: Joinable | None = scheduler.start(self._run_pump, f"pravega-writer-{stream}")
        self._context.pump_is_caller = self._pump is None
        # While open, the process's thread switch interval is at most the config's
        # (switch_interval.py): only a writer whose pump is a thread needs it.
        self._holds_switch = False
        interval = self._config.switch_interval_s
        if self._pump is not None and interval is not None:
            hold_switch_interval(interval)
            self._holds_switch = True

    # --- public API ----------------------------------------------------------------------------
    def write_event(self, event: T, routing_key: str | None = None) -> WriteFuture:
        """Queue ``event`` for ``routing_key`` and return its :class:`WriteFuture`.

        Events with the same routing key are stored and read in the order they
        were written; without a key the event goes to a random segment. Raises,
        queuing nothing:

        * SerializationError if the serializer cannot encode ``event`` or returns
          something other than bytes (errors a custom serializer raises propagate);
        * EventTooLargeError for a serialized event over ``LARGE_EVENT_BYTES_MAX`` (1 GiB),
          or over ``MAX_EVENT_SIZE_BYTES`` (8 MiB) on a transaction's segments.

        A serialized event over ``MAX_EVENT_SIZE_BYTES`` is a *large event*
        (``large_events.py``): written through a transient segment merged into
        its segment, in order with the events before and after it on the writer; its
        future completes once it is merged. The payload is held (not copied) until then.
        * InvalidArgumentError for a routing key that is not a str (or None) or not
          encodable as UTF-8 (e.g. a lone surrogate);
        * StreamSealedError once the writer knows the stream is sealed;
        * ClientClosedError after close().

        Blocks (backpressure) while the segment has ``blocks_queued_max`` blocks waiting
        to be sent, except inside a future's callback. The future fails with the error
        that failed the event (see the module docstring).
        """
        # The hot path of the client: kept flat on purpose (docs/stack.md: per-event Python
        # work on the writer is the throughput budget on a 2-core machine). The parts'
        # state is reached through references taken in __init__, and the accumulator's
        # append is the one call per event.
        if self._bytes_passthrough and type(event) is bytes:
            # mypy does not narrow a TypeVar by ``type(x) is``; a cast would cost a call per event.
            payload: bytes = event  # type: ignore[assignment]
        else:
            payload = self._serializer.serialize(event)
            if type(payload) is not bytes:
                payload = serialized_bytes(payload)
        try:
            header = self._headers[len(payload)]
        except EventTooLargeError:  # over MAX_EVENT_SIZE_BYTES: a large event, or too large
            return self._write_large_event(payload, routing_key)
        with self._lock:
            if self._closed or self._failure is not None:
                self._raise_unusable()
            stream = self._key_cache.get(routing_key) if type(routing_key) is str else None
            if stream is None:
                stream = self._selector.select(routing_key)
            blocks = stream.blocks
            block = self._append(blocks, header, payload, routing_key)
            if len(blocks.queued) >= self._blocks_queued_max:
                stream.wait_for_space(self._usable)
            future: WriteFuture = _new_write_future(WriteFuture)
            future._block = block
            return future

    def _write_large_event(self, payload: bytes, routing_key: str | None) -> WriteFuture:
        """``write_event`` of a payload over ``MAX_EVENT_SIZE_BYTES``; see its docstring."""
        if len(payload) > constants.LARGE_EVENT_BYTES_MAX:
            raise EventTooLargeError(
                f"event of {len(payload)} bytes exceeds {constants.LARGE_EVENT_BYTES_MAX} bytes"
            )
        with self._lock:
            if self._closed or self._failure is not None:
                self._raise_unusable()
            stream = self._selector.select(routing_key)
            if is_transaction_segment(stream.name):
                raise EventTooLargeError(
                    f"event of {len(payload)} bytes exceeds {constants.MAX_EVENT_SIZE_BYTES} "
                    "bytes: large events are not supported in transactions"
                )
            block = self._accumulator.append_large(stream.blocks, payload, routing_key)
            if len(stream.blocks.queued) >= self._blocks_queued_max:
                stream.wait_for_space(self._usable)
            return WriteFuture(block)

    def write_events(self, events: Iterable[T], routing_key: str | None = None) -> WriteFuture:
        """Queue several events for one routing key, in order, with one future for all.

        The batch is one append block, so it is stored atomically: all or none
        (Pravega's ``writeEvents``). Hence its framed size (each payload plus an
        8-byte header) must fit in one block, ``APPEND_BLOCK_BYTES_MAX`` (9 MiB + 8
        bytes): a larger batch raises EventTooLargeError as soon as the events read
        so far exceed it; split it (giving up atomicity) yourself. Also raises
        InvalidArgumentError if ``events`` is not an iterable of events (a str or
        bytes is refused, not split) or is empty, and whatever :meth:`write_event`
        raises for one of its events or the routing key. Nothing is queued when it
        raises. Blocks for backpressure as :meth:`write_event` does.
        """
        if isinstance(events, (str, bytes, bytearray, memoryview)) or not isinstance(
            events, Iterable
        ):
            raise InvalidArgumentError(
                f"write_events needs an iterable of events, got {type(events).__name__}"
            )
        data, count = self._accumulator.frame_batch(
            events, self._serializer.serialize, self._bytes_passthrough
        )
        if not count:
            raise InvalidArgumentError("write_events needs at least one event")
        with self._lock:
            if self._closed or self._failure is not None:
                self._raise_unusable()
            stream = self._selector.select(routing_key)
            block = self._accumulator.append_batch(stream.blocks, data, count, routing_key)
            if len(stream.blocks.queued) >= self._blocks_queued_max:
                stream.wait_for_space(self._usable)
            return WriteFuture(block)

    def note_time(self, time_ms: int) -> None:
        """Promise that every event written from now on has an event time of at least
        ``time_ms`` (Pravega's ``noteTime``): the stream's watermarks, and readers' time
        windows (``reader.get_current_time_window``), follow the times its writers note.

        Returns at once; the time reaches the controller once every event written before
        the call is acknowledged (``writer_marks.py``). A time behind one noted before is
        ignored with a WARNING. Raises InvalidArgumentError (not an int in [0, 2**63)),
        ClientClosedError, or the writer's failure.
        """
        check_time_ms(time_ms)
        with self._lock:
            if self._closed or self._failure is not None:
                self._raise_unusable()
            awaited = self._awaited()
            if self._marks is None:
                self._marks = MarkSender(
                    self.scope,
                    self.stream,
                    self.writer_id.hex(),
                    self._context.controller,
                    self._position,
                    self._scheduler,
                    unacknowledged=self._unacknowledged,
                )
            marks = self._marks
        marks.note(time_ms, awaited)

    def _awaited(self) -> list[Future[Any]]:
        """Under the lock: the futures of every block not yet settled, which a time noted
        now waits for before it is sent."""
        return [block.future for out in self._streams for block in out.blocks.pending()]

    def _unacknowledged(self) -> bool:
        """Whether any event written is not acknowledged yet (the mark sender's keep-alive)."""
        with self._lock:
            return any(out.blocks.pending() for out in self._streams)

    def _position(self) -> dict[int, int]:
        """The writer's position for a mark (on the mark sender's thread): each current
        segment at the end of this writer's last acknowledged event there, or at its length
        where a reconnect settled events without telling where they end."""
        with self._lock:
            outs = list(self._streams)
            known = {out.name: out.acked_length for out in outs if not out.length_unknown}
        position: dict[int, int] = {}
        for out in outs:
            length = known.get(out.name)
            if length is None:
                length = (
                    self._context.connection.get_info(out.name)
                    .result(constants.APPEND_CALL_TIMEOUT_S)
                    .length
                )
                with self._lock:
                    out.length_unknown = False
                    out.acked_length = max(out.acked_length, length)
            position[parse_segment_name(out.name).segment_id] = length
        return position

    def flush(self, timeout: float | None = None) -> None:
        """Block until every event written before the call is durable or failed.

        Sends open blocks at once. Returns None once all are durable; raises the error
        of the first of them (in segment order) that failed, e.g. StreamSealedError or
        the InvalidArgumentError of a block the store refused (its future has the same
        error); TimeoutError if ``timeout`` seconds pass first (the events stay queued).
        InvalidArgumentError if ``timeout`` is not None or a finite number >= 0.
        """
        check_timeout("flush timeout", timeout)
        with self._lock:
            blocks: list[Block] = []
            for stream in self._streams:
                stream.blocks.close_open()
                blocks += stream.blocks.pending()
            self._wake.notify()
        # Real time, not the writer's clock: a wait on futures (timing.wait_futures).
        try:
            wait_futures([block.future for block in blocks], timeout)
        except FutureTimeoutError:
            raise TimeoutError(f"flush did not complete within {timeout}s") from None

    def close(self) -> None:
        """Flush, then stop the writer. Idempotent.

        Waits for every pending event (no timeout: the reconnect logic bounds how long a
        segment can stay unresolved) and stops the pump even if the flush raises; then
        re-raises that flush error. Later calls return at once; writes raise
        ClientClosedError.
        """
        if self._closed:
            return
        flushed = False
        try:
            self.flush()
            flushed = True
        finally:
            if self._marks is not None:
                self._marks.close(flushed)
            with self._lock:
                self._closed = True
                self._wake.notify()
                self._context.space.notify_all()
            if self._pump is not None:
                self._pump.join(timeout=10)
            if self._holds_switch:
                self._holds_switch = False
                release_switch_interval()

    def __enter__(self) -> EventStreamWriter[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the pump (the sender) -----------------------------------------------------------------
    def pump_round(self) -> float | None:
        """Run one round of the pump now, without waiting; for a caller driving the pump.

        Only for a writer whose scheduler started no pump thread (``ManualThreadScheduler``);
        IllegalStateError otherwise. One round sends every block that may go, gives up on
        calls unanswered for ``append_call_timeout_s``, and reconnects every segment whose
        calls have all finished after a failure (a reconnect waits for ``setup_append`` and
        sleeps through the scheduler between attempts). Returns None once the writer is
        closed; 0.0 if the round did work (call again); otherwise the seconds, on the
        writer's clock, after which a round has work even if no answer arrives (a linger
        runs out, or the watchdog's tick).

        The caller is the pump, so ``write_event`` never waits for room (the queues are
        bounded by how often the caller pumps), and ``flush`` and ``close`` wait for
        futures only the pump can complete: pump until every future is done first.
        """
        if not self._context.pump_is_caller:
            raise IllegalStateError("this writer's pump runs on its own thread")
        with self._lock:
            if self._closed:
                return None
            sends, reconnects = self._plan_round()
            wait_s = self._idle_wait_s() if not sends and not reconnects else 0.0
        self._context.complete_settled()  # blocks a round failed (written to a sealed segment)
        if not sends and not reconnects:
            return wait_s
        self._run_round(sends, reconnects)
        return wait_s

    def _run_pump(self) -> None:
        """The pump thread: rounds until close, sleeping while there is nothing to do."""
        self._context.pump_thread_ident = threading.get_ident()
        try:
            while True:
                with self._lock:
                    if self._closed:
                        return
                    sends, reconnects = self._plan_round()
                    idle = not sends and not reconnects
                    if idle and not self._context.has_settled():
                        # Waits under the same lock the round was planned under, so an
                        # answer or a new block arriving in between is not missed.
                        self._wake.wait(self._idle_wait_s())
                        continue
                self._context.complete_settled()
                if not idle:
                    self._run_round(sends, reconnects)
        except BaseException as e:  # pragma: no cover - a bug; fail loudly, not silently
            log.exception("writer pump crashed")
            self._fail_all(PravegaError(f"writer pump crashed: {e!r}"))

    def _plan_round(self) -> tuple[list[Send], list[SegmentOutputStream]]:
        """Under the lock: the blocks to send now and the segments to reconnect."""
        now = self._monotonic()
        sends: list[Send] = []
        for stream in self._streams:
            stream.collect_sends(now, sends)
        now = self._monotonic()
        for stream in self._streams:
            stream.give_up_on_stuck_calls(now)
        return sends, [s for s in self._streams if s.reconnect_due()]

    def _run_round(self, sends: list[Send], reconnects: list[SegmentOutputStream]) -> None:
        """Not under the lock: send, then reconnect, what :meth:`_plan_round` chose."""
        for stream, block, expected in sends:
            stream.send(block, expected)
        for stream in reconnects:
            stream.reconnect()

    def _idle_wait_s(self) -> float:
        """Under the lock: how long the pump may sleep when it has nothing to do now.

        Until the oldest sendable open block's linger runs out; otherwise up to
        ``PUMP_IDLE_WAIT_S_MAX`` (for the stuck-call watchdog), since acknowledgements,
        failures and new blocks wake it.
        """
        now = self._monotonic()
        wait_s = PUMP_IDLE_WAIT_S_MAX
        for stream in self._streams:
            wait_s = stream.idle_wait_s(now, wait_s)
        return max(wait_s, 0.0005)

    # --- internals -----------------------------------------------------------------------------
    def _usable(self) -> bool:
        """Under the lock: open and not failed (a sealed stream fails the writer)."""
        return not self._closed and self._failure is None

    def _raise_unusable(self) -> None:
        if self._closed:
            raise ClientClosedError("writer is closed")
        assert self._failure is not None
        raise self._failure

    def _on_stream_sealed(self, error: StreamSealedError) -> None:
        """Under the lock: a reconnect found the stream sealed; refuse every later write."""
        self._failure = error

    def _on_segment_sealed(
        self, sealed: SegmentOutputStream, successors: Successors, blocks: list[Block]
    ) -> None:
        """Under the lock: put ``successors`` in the place of ``sealed`` and re-route
        ``blocks`` (its unacknowledged blocks, in order) to them by routing key.

        A successor this writer has no stream for gets one that starts with a handshake
        (``SegmentOutputStream``): the writer may have written to it before, through
        another predecessor, and retired it since.
        """
        targets: list[tuple[float, float, SegmentOutputStream]] = []
        for segment in sorted(successors, key=lambda r: r.key_low):
            out = self._by_name.get(segment.name)
            if out is None:
                out = SegmentOutputStream(segment.name, self._context, handshake=True)
            targets.append((segment.key_low, segment.key_high, out))
        self._selector.replace(sealed, targets)  # checks the ranges before anything changes
        for _, _, out in targets:
            if out.name not in self._by_name:
                self._by_name[out.name] = out
                self._streams.append(out)
        if self._by_name.get(sealed.name) is sealed:
            del self._by_name[sealed.name]
        if sealed in self._streams:
            self._streams.remove(sealed)
        outs = [out for _, _, out in targets]
        select = self._selector.select

        def target(routing_key: str | None) -> SegmentBlocks:
            if routing_key is None:
                return self._selector.choose(outs).blocks
            return select(routing_key).blocks

        for block in blocks:
            self._accumulator.reroute(block, target)
        self._context.space.notify_all()

    def _fail_all(self, error: PravegaError) -> None:
        with self._lock:
            self._failure = error
            for stream in self._streams:
                stream.fail(error)
        self._context.complete_settled()
