"""The event writer: routing, batching into append blocks, pipelining, reconnects.

How a write travels (ARCHITECTURE.md §3, seed 000 "Preventing Duplication or Loss"):

1. ``write_event`` serializes and frames the event, picks the segment whose
   key range holds the routing key's hash, gives the event the segment's next
   *event number* and adds it to the segment's open block. It returns a
   :class:`WriteFuture`, a small handle on the block's single future (one
   future per block, not per event: STACK.md measured 3.5 us per future).
2. A pump thread sends blocks without waiting for earlier acks, up to
   ``WRITER_BLOCKS_IN_FLIGHT_MAX`` per segment. A block is sent when full, when
   the segment has nothing in flight (so a light load is not delayed), or
   after ``WRITER_LINGER_S``. Each block is a conditional append: *the
   writer's last event number on this segment is the previous block's last*.
3. A block's future completes once the container has the block in its durable
   log. If a call fails with an outcome-unknown error (container died or is
   restarting) or its condition, the pump waits for the segment's other calls
   to finish, asks the container for the writer's last persisted event number
   (``setup_append``), completes every block at or below it, and resends the
   rest. So nothing acknowledged is lost and nothing is written twice; order
   per routing key is kept because a key always maps to one segment and
   blocks of a segment are applied in event-number order.
4. A block the store *refuses* (any other error, e.g. InvalidArgumentError: the
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
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import math
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pravega_ray import constants
from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.client.serializers import BytesSerializer, Serializer, check_serializer
from pravega_ray.errors import (
    ClientClosedError,
    ConditionalAppendFailedError,
    EventTooLargeError,
    InvalidArgumentError,
    PravegaError,
    RetriableError,
    SegmentSealedError,
    SerializationError,
    StreamSealedError,
)
from pravega_ray.invariant import invariant
from pravega_ray.naming import routing_key_hash, validate_name

log = logging.getLogger(__name__)

T = TypeVar("T")
_in_callback = threading.local()  # set while a writer completes futures (runs user callbacks)
_EVENT_PREFIX = constants.EVENT_TYPE_PLAIN.to_bytes(4, "big")
_HEADER_CACHE_SIZE_MAX = 64 * 1024
_HEADERS: dict[int, bytes] = {}
"""Frame headers by payload size: sizes repeat, and a dict lookup is cheaper than packing."""


def _event_header(size: int) -> bytes:
    """The frame header of a payload of ``size`` bytes; EventTooLargeError past the limit."""
    if size > constants.MAX_EVENT_SIZE_BYTES:
        raise EventTooLargeError(
            f"event of {size} bytes exceeds {constants.MAX_EVENT_SIZE_BYTES} bytes"
        )
    header = _EVENT_PREFIX + size.to_bytes(4, "big")
    if size < _HEADER_CACHE_SIZE_MAX:
        _HEADERS[size] = header
    return header


def _payload_bytes(payload: object) -> bytes:
    """A serializer's output as bytes; SerializationError if it returned something else.

    Checked at the call, because the pump joins payloads long after and a str there
    would crash it.
    """
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    raise SerializationError(
        f"serializer returned {type(payload).__name__}, not bytes",
        data=None,
        segment=None,
        offset=None,
        key=None,
    )


@dataclass(frozen=True, slots=True)
class WriterConfig:
    """Tuning of one writer; the defaults come from :mod:`pravega_ray.constants`.

    Every field is checked when the config is built; a bad one raises
    InvalidArgumentError naming it (bools, NaN, infinities and strs are refused):

    * ``block_bytes_target``: int, 1 to ``APPEND_BLOCK_BYTES_MAX`` (9 MiB + 8 bytes, the
      largest block a container accepts): a block is sent once it holds this many bytes.
      An event that would take the open block past ``APPEND_BLOCK_BYTES_MAX`` closes that
      block and starts the next, so every block fits whatever the target;
    * ``blocks_in_flight_max``: int, 1 to ``WRITER_BLOCKS_IN_FLIGHT_LIMIT`` (1024): append
      calls in flight per segment;
    * ``blocks_queued_max``: int, 1 to ``WRITER_BLOCKS_QUEUED_LIMIT`` (4096): full blocks
      held per segment beyond those in flight before ``write_event`` blocks;
    * ``linger_s``, ``reconnect_backoff_s``: finite seconds, 0 to ``WRITER_DELAY_S_LIMIT``
      (60);
    * ``reconnect_attempts_max``: int, 1 to ``WRITER_RECONNECT_ATTEMPTS_LIMIT`` (10,000);
    * ``append_call_timeout_s``: finite seconds, above 0 and at most
      ``APPEND_CALL_TIMEOUT_S_LIMIT`` (3,600).
    """

    block_bytes_target: int = constants.APPEND_BLOCK_BYTES_TARGET
    blocks_in_flight_max: int = constants.WRITER_BLOCKS_IN_FLIGHT_MAX
    linger_s: float = constants.WRITER_LINGER_S
    reconnect_attempts_max: int = constants.WRITER_RECONNECT_ATTEMPTS_MAX
    reconnect_backoff_s: float = constants.WRITER_RECONNECT_BACKOFF_S
    append_call_timeout_s: float = constants.APPEND_CALL_TIMEOUT_S
    blocks_queued_max: int = constants.WRITER_BLOCKS_QUEUED_MAX

    def __post_init__(self) -> None:
        c = constants
        _check_int("block_bytes_target", self.block_bytes_target, c.APPEND_BLOCK_BYTES_MAX)
        _check_int(
            "blocks_in_flight_max", self.blocks_in_flight_max, c.WRITER_BLOCKS_IN_FLIGHT_LIMIT
        )
        _check_int("blocks_queued_max", self.blocks_queued_max, c.WRITER_BLOCKS_QUEUED_LIMIT)
        _check_int(
            "reconnect_attempts_max", self.reconnect_attempts_max, c.WRITER_RECONNECT_ATTEMPTS_LIMIT
        )
        _check_seconds("linger_s", self.linger_s, c.WRITER_DELAY_S_LIMIT)
        _check_seconds("reconnect_backoff_s", self.reconnect_backoff_s, c.WRITER_DELAY_S_LIMIT)
        _check_seconds(
            "append_call_timeout_s",
            self.append_call_timeout_s,
            c.APPEND_CALL_TIMEOUT_S_LIMIT,
            positive=True,
        )


def _check_int(name: str, value: object, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidArgumentError(
            f"WriterConfig.{name} must be an int in [1, {high}], got {value!r}"
        )


def _check_seconds(name: str, value: object, high: float, *, positive: bool = False) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
        or value > high
    ):
        low = "above 0" if positive else "at least 0"
        raise InvalidArgumentError(
            f"WriterConfig.{name} must be a finite number of seconds, {low} and at most "
            f"{high}, got {value!r}"
        )


def _refused_earlier(rejection: PravegaError, segment: str) -> PravegaError:
    """The error of a block behind one the store refused: same type, saying so."""
    message = f"not written: an earlier event on segment {segment} was refused: {rejection}"
    try:
        error = type(rejection)(message)
    except TypeError:  # a subclass with another constructor
        error = PravegaError(message)
    error.__cause__ = rejection
    return error


class _Block:
    """Events bound for one segment, sent and acknowledged together."""

    __slots__ = (
        "created",
        "data",
        "first",
        "future",
        "last",
        "parts",
        "rejection",
        "sent_at",
        "size",
    )

    def __init__(self, first_event_number: int) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.first = first_event_number
        self.last = first_event_number - 1
        self.future: Future[None] = Future()
        self.created = time.monotonic()
        self.sent_at = 0.0
        self.data: bytes | None = None
        # The store refused this block itself (not its condition): fail it, never resend it.
        self.rejection: PravegaError | None = None

    @property
    def count(self) -> int:
        return self.last - self.first + 1

    def seal(self) -> bytes:
        if self.data is None:
            self.data = b"".join(self.parts)
            self.parts = []
        return self.data


class WriteFuture:
    """Completion of one ``write_event``: done when the event is durably stored.

    ``result()`` returns None or raises the error that failed the event
    (e.g. :class:`StreamSealedError`).
    """

    __slots__ = ("_block",)

    def __init__(self, block: _Block) -> None:
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


class _SegmentWriter:
    __slots__ = (
        "inflight",
        "name",
        "next_event_number",
        "open",
        "queued",
        "reconnecting",
        "sealed",
        "sent_last",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.next_event_number = 0
        self.open: _Block | None = None
        self.queued: deque[_Block] = deque()
        self.inflight: deque[tuple[_Block, Future[Any]]] = deque()
        self.sent_last = constants.NO_EVENT_NUMBER  # last event number of the last sent block
        self.reconnecting = False
        self.sealed = False

    def pending_blocks(self) -> list[_Block]:
        blocks = [b for b, _ in self.inflight] + list(self.queued)
        if self.open is not None:
            blocks.append(self.open)
        return blocks


class EventStreamWriter(Generic[T]):
    """Writes events to one stream; from ``cluster.create_writer``, used as a context manager.

    The constructor checks its arguments before it starts anything (no thread, no
    call): InvalidArgumentError if ``config`` is neither a WriterConfig nor None or
    ``serializer`` has no callable ``serialize``/``deserialize`` (or is a class, not
    an instance); InvalidNameError for a bad scope or stream name. It then asks the
    controller for the stream's segments: StreamNotFoundError / ScopeNotFoundError,
    and StreamSealedError for a sealed stream.
    """

    def __init__(
        self,
        scope: str,
        stream: str,
        serializer: Serializer[T],
        controller: ControllerConnection,
        segments: SegmentStoreConnection,
        config: WriterConfig | None = None,
    ) -> None:
        if config is not None and not isinstance(config, WriterConfig):
            raise InvalidArgumentError(
                f"config must be a WriterConfig or None, got {type(config).__name__}"
            )
        check_serializer(serializer)
        validate_name("scope", scope)
        validate_name("stream", stream)
        self.scope = scope
        self.stream = stream
        self.writer_id = uuid.uuid4().bytes
        self._serializer = serializer
        self._controller = controller
        self._connection = segments
        self._config = config or WriterConfig()
        info = controller.get_stream_info(scope, stream)
        if info.sealed:
            raise StreamSealedError(f"stream {scope}/{stream} is sealed")
        ranges = sorted(info.segments, key=lambda s: s.key_low)
        self._lows = [s.key_low for s in ranges]
        self._writers = [_SegmentWriter(s.name) for s in ranges]
        self._key_cache: dict[str, _SegmentWriter] = {}
        self._bytes_passthrough = isinstance(serializer, BytesSerializer)
        self._block_bytes_target = self._config.block_bytes_target
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._space = threading.Condition(self._lock)  # queued blocks fell below the bound
        self._to_settle: list[tuple[_Block, BaseException | None]] = []
        self._closed = False
        self._failure: PravegaError | None = None
        self._pump = threading.Thread(
            target=self._run_pump, name=f"pravega-writer-{stream}", daemon=True
        )
        self._pump.start()

    # --- public API ----------------------------------------------------------------------------
    def write_event(self, event: T, routing_key: str | None = None) -> WriteFuture:
        """Queue ``event`` for ``routing_key`` and return its :class:`WriteFuture`.

        Events with the same routing key are stored and read in the order they
        were written; without a key the event goes to a random segment. Raises,
        queuing nothing:

        * SerializationError if the serializer cannot encode ``event`` or returns
          something other than bytes (errors a custom serializer raises propagate);
        * EventTooLargeError for a serialized event over ``MAX_EVENT_SIZE_BYTES`` (8 MiB);
        * InvalidArgumentError for a routing key that is not a str (or None) or not
          encodable as UTF-8 (e.g. a lone surrogate);
        * StreamSealedError once the writer knows the stream is sealed;
        * ClientClosedError after close().

        Blocks (backpressure) while the segment has ``blocks_queued_max`` blocks waiting
        to be sent, except inside a future's callback. The future fails with the error
        that failed the event (see the module docstring).
        """
        # The hot path of the client: kept flat on purpose (STACK.md: per-event Python
        # work on the writer is the throughput budget on a 2-core machine).
        if self._bytes_passthrough and type(event) is bytes:
            payload: bytes = event
        else:
            payload = self._serializer.serialize(event)
            if type(payload) is not bytes:
                payload = _payload_bytes(payload)
        size = len(payload)
        header = _HEADERS.get(size)
        if header is None:
            header = _event_header(size)
        with self._lock:
            if self._closed or self._failure is not None:
                self._raise_unusable()
            segment = self._key_cache.get(routing_key) if type(routing_key) is str else None
            if segment is None:
                segment = self._route(routing_key)
            block = segment.open
            if block is not None and block.size + size + 8 > constants.APPEND_BLOCK_BYTES_MAX:
                # The event would take the block past what the store accepts: send it as is.
                segment.queued.append(block)
                block = segment.open = None
                self._wake.notify()
            if block is None:
                block = segment.open = _Block(segment.next_event_number)
                if not segment.inflight:
                    self._wake.notify()
            parts = block.parts
            parts.append(header)
            parts.append(payload)
            block.size += size + 8
            block.last = segment.next_event_number
            segment.next_event_number += 1
            if block.size >= self._block_bytes_target:
                segment.queued.append(block)
                segment.open = None
                self._wake.notify()
            if len(segment.queued) >= self._config.blocks_queued_max:
                self._wait_for_space(segment)
            return WriteFuture(block)

    def _wait_for_space(self, segment: _SegmentWriter) -> None:
        """Under the lock: block the caller while too many blocks wait to be sent (backpressure).

        Not from inside a future's callback: that thread may be the one that
        delivers the acknowledgements which would make room.
        """
        if getattr(_in_callback, "active", False) or threading.current_thread() is self._pump:
            return
        while (
            len(segment.queued) >= self._config.blocks_queued_max
            and not self._closed
            and self._failure is None
            and not segment.sealed
        ):
            self._space.wait(1.0)

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
        payloads: list[tuple[bytes, bytes]] = []
        total = 0
        for event in events:
            if self._bytes_passthrough and type(event) is bytes:
                payload: bytes = event
            else:
                payload = self._serializer.serialize(event)
                if type(payload) is not bytes:
                    payload = _payload_bytes(payload)
            header = _HEADERS.get(len(payload)) or _event_header(len(payload))
            payloads.append((header, payload))
            total += len(payload) + constants.EVENT_HEADER_BYTES
            if total > constants.APPEND_BLOCK_BYTES_MAX:
                raise EventTooLargeError(
                    f"write_events batch is over {constants.APPEND_BLOCK_BYTES_MAX} bytes framed "
                    f"after {len(payloads)} events: one atomic batch must fit in one append block"
                )
        if not payloads:
            raise InvalidArgumentError("write_events needs at least one event")
        with self._lock:
            if self._closed or self._failure is not None:
                self._raise_unusable()
            segment = self._route(routing_key)
            block = segment.open
            if block is not None and block.size + total > constants.APPEND_BLOCK_BYTES_MAX:
                segment.queued.append(block)  # keep the batch whole in the next block
                block = segment.open = None
            if block is None:
                block = segment.open = _Block(segment.next_event_number)
            for header, payload in payloads:
                block.parts.append(header)
                block.parts.append(payload)
            block.size += total
            segment.next_event_number += len(payloads)
            block.last = segment.next_event_number - 1
            if block.size >= self._block_bytes_target:
                segment.queued.append(block)
                segment.open = None
            self._wake.notify()
            if len(segment.queued) >= self._config.blocks_queued_max:
                self._wait_for_space(segment)
            return WriteFuture(block)

    def _raise_unusable(self) -> None:
        if self._closed:
            raise ClientClosedError("writer is closed")
        assert self._failure is not None
        raise self._failure

    def flush(self, timeout: float | None = None) -> None:
        """Block until every event written before the call is durable or failed.

        Sends open blocks at once. Returns None once all are durable; raises the error
        of the first of them (in segment order) that failed, e.g. StreamSealedError or
        the InvalidArgumentError of a block the store refused (its future has the same
        error); TimeoutError if ``timeout`` seconds pass first (the events stay queued).
        InvalidArgumentError if ``timeout`` is not None or a finite number >= 0.
        """
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not math.isfinite(timeout)
            or timeout < 0
        ):
            raise InvalidArgumentError(
                f"flush timeout must be None or a finite number of seconds >= 0, got {timeout!r}"
            )
        with self._lock:
            blocks: list[_Block] = []
            for segment in self._writers:
                if segment.open is not None:
                    segment.queued.append(segment.open)
                    segment.open = None
                blocks += segment.pending_blocks()
            self._wake.notify()
        deadline = None if timeout is None else time.monotonic() + timeout
        for block in blocks:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                block.future.result(remaining)
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
        try:
            self.flush()
        finally:
            with self._lock:
                self._closed = True
                self._wake.notify()
                self._space.notify_all()
            self._pump.join(timeout=10)

    def __enter__(self) -> EventStreamWriter[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- routing -------------------------------------------------------------------------------
    def _route(self, routing_key: str | None) -> _SegmentWriter:
        if routing_key is None:
            return random.choice(self._writers)
        if not isinstance(routing_key, str):
            raise InvalidArgumentError(
                f"routing_key must be a str or None, got {type(routing_key).__name__}"
            )
        segment = self._key_cache.get(routing_key)
        if segment is None:
            try:
                point = routing_key_hash(routing_key)
            except UnicodeEncodeError:
                raise InvalidArgumentError(
                    f"routing_key {routing_key!r} is not encodable as UTF-8"
                ) from None
            index = bisect.bisect_right(self._lows, point) - 1
            segment = self._writers[index]
            if len(self._key_cache) >= constants.ROUTING_KEY_CACHE_ENTRIES_MAX:
                self._key_cache.clear()
            self._key_cache[routing_key] = segment
        return segment

    # --- the pump ------------------------------------------------------------------------------
    def _run_pump(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._closed:
                        return
                    sends = self._collect_sends()
                    self._give_up_on_stuck_calls()
                    reconnects = [
                        s
                        for s in self._writers
                        if s.reconnecting and all(f.done() for _, f in s.inflight)
                    ]
                    if not sends and not reconnects:
                        self._wake.wait(self._idle_wait_s())
                        continue
                for segment, block, expected in sends:
                    self._send(segment, block, expected)
                for segment in reconnects:
                    self._reconnect(segment)
        except BaseException as e:  # pragma: no cover - a bug; fail loudly, not silently
            log.exception("writer pump crashed")
            self._fail_all(PravegaError(f"writer pump crashed: {e!r}"))

    def _idle_wait_s(self) -> float:
        """Under the lock: how long the pump may sleep when it has nothing to do now.

        Until the oldest sendable open block's linger runs out; otherwise up to 0.5 s (for
        the stuck-call watchdog), since acknowledgements, failures and new blocks wake it.
        An open block that cannot go (its segment reconnects or has a full window) must
        not shorten the sleep: with ``linger_s`` 0 the pump would spin.
        """
        now = time.monotonic()
        wait = 0.5
        window = self._config.blocks_in_flight_max
        for segment in self._writers:
            block = segment.open
            if (
                block is not None
                and not segment.reconnecting
                and not segment.sealed
                and len(segment.inflight) < window
            ):
                wait = min(wait, block.created + self._config.linger_s - now)
        return max(wait, 0.0005)

    def _collect_sends(self) -> list[tuple[_SegmentWriter, _Block, int]]:
        """Under the lock: pick blocks to send now and mark them in flight."""
        sends = []
        now = time.monotonic()
        window = self._config.blocks_in_flight_max
        for segment in self._writers:
            if segment.reconnecting or segment.sealed:
                continue
            while len(segment.inflight) < window:
                if segment.queued:
                    block = segment.queued.popleft()
                    self._space.notify_all()
                elif segment.open is not None and (
                    not segment.inflight or now - segment.open.created >= self._config.linger_s
                ):
                    block, segment.open = segment.open, None
                else:
                    break
                expected = segment.sent_last
                segment.sent_last = block.last
                block.sent_at = now
                future: Future[Any] = Future()  # replaced by the connection's future in _send
                segment.inflight.append((block, future))
                sends.append((segment, block, expected))
        return sends

    def _give_up_on_stuck_calls(self) -> None:
        """Under the lock: treat calls unanswered for ``append_call_timeout_s`` as outcome-unknown.

        Defense in depth against a lost completion: the reconnect's
        setup_append finds out what was persisted, and resends are conditional,
        so a late answer can neither duplicate nor lose anything.
        """
        now = time.monotonic()
        for segment in self._writers:
            if segment.reconnecting:
                continue
            stuck = [
                i
                for i, (block, call) in enumerate(segment.inflight)
                if not call.done() and now - block.sent_at > self._config.append_call_timeout_s
            ]
            if not stuck:
                continue
            log.warning(
                "append to %s unanswered for %.1fs; reconnecting",
                segment.name,
                self._config.append_call_timeout_s,
            )
            for i, (block, call) in enumerate(segment.inflight):
                if not call.done():
                    given_up: Future[Any] = Future()
                    given_up.set_exception(RetriableError("append call unanswered"))
                    segment.inflight[i] = (block, given_up)
            segment.reconnecting = True

    def _send(self, segment: _SegmentWriter, block: _Block, expected: int) -> None:
        data = block.seal()
        call = self._connection.append(
            segment.name, self.writer_id, expected, block.last, block.count, data
        )
        with self._lock:
            for i, (b, _) in enumerate(segment.inflight):
                if b is block:
                    segment.inflight[i] = (block, call)
                    break
        call.add_done_callback(lambda f, s=segment, b=block: self._on_append_done(s, b, f))

    def _settle(self, block: _Block, error: BaseException | None = None) -> None:
        """Under the lock: note that ``block`` is done; its future completes in :meth:`_drain`.

        Futures are completed only after the lock is released, because their
        callbacks run user code, which may call this writer again.
        """
        self._to_settle.append((block, error))

    def _drain(self) -> None:
        """Not under the lock: complete the futures of settled blocks."""
        with self._lock:
            items, self._to_settle = self._to_settle, []
        if not items:
            return
        _in_callback.active = True
        try:
            for block, error in items:
                with contextlib.suppress(InvalidStateError):  # settled twice: first wins
                    if error is None:
                        block.future.set_result(None)
                    else:
                        block.future.set_exception(error)
        finally:
            _in_callback.active = False

    def _on_append_done(self, segment: _SegmentWriter, block: _Block, call: Future[Any]) -> None:
        error = call.exception()
        try:
            self._on_append_done_locked(segment, block, error)
        finally:
            self._drain()

    def _on_append_done_locked(
        self, segment: _SegmentWriter, block: _Block, error: BaseException | None
    ) -> None:
        with self._lock:
            if error is None:
                self._complete_acked(segment, upto=block.last)
            elif isinstance(error, (RetriableError, ConditionalAppendFailedError)):
                segment.reconnecting = True
            elif isinstance(error, (SegmentSealedError, StreamSealedError)):
                segment.reconnecting = True  # the reconnect finds out whether the stream is sealed
            else:
                # The store refused the block itself (InvalidArgumentError, DataCorruptionError,
                # ...): resending it cannot help. The reconnect settles what persisted and
                # fails this block and every later one of the segment (they were conditional
                # on it); the warning is logged there, once.
                block.rejection = (
                    error if isinstance(error, PravegaError) else PravegaError(repr(error))
                )
                segment.reconnecting = True
            self._wake.notify()

    def _complete_acked(self, segment: _SegmentWriter, upto: int) -> None:
        """Under the lock: complete in-flight blocks whose events are all at or below ``upto``."""
        while segment.inflight and segment.inflight[0][0].last <= upto:
            self._settle(segment.inflight.popleft()[0])
        self._space.notify_all()

    def _reconnect(self, segment: _SegmentWriter) -> None:
        """Re-establish the segment after a failed call; resend only what was not persisted.

        Called by the pump once every in-flight call of the segment has finished.
        """
        try:
            self._reconnect_locked(segment)
        finally:
            self._drain()

    def _reconnect_locked(self, segment: _SegmentWriter) -> None:
        """Ask the store what persisted, then settle, fail or resend every in-flight block.

        In event-number order, each in-flight block is: persisted (at or below the last
        event number ``setup_append`` reports): completed; refused by the store
        (``rejection``): failed with that error, never resent; behind a refused block:
        failed, as is everything queued or open on the segment, because each block's
        condition chains on its predecessor and the refused events will never be there
        (``_refused_earlier``); otherwise resent, in order, before anything newer.
        """
        last: int | None = None
        error: BaseException | None = None
        for attempt in range(self._config.reconnect_attempts_max):
            try:
                last = self._connection.setup_append(segment.name, self.writer_id).result(
                    constants.CONTROLLER_CALL_TIMEOUT_S
                )
                break
            except (RetriableError, FutureTimeoutError) as e:
                error = e
                time.sleep(min(2.0, self._config.reconnect_backoff_s * (attempt + 1)))
            except PravegaError as e:
                error = e
                break
        sealed_error = self._sealed_error(segment) if last is not None else None
        with self._lock:
            blocks = [b for b, _ in segment.inflight]
            segment.inflight.clear()
            if last is None:
                failure = error if isinstance(error, PravegaError) else PravegaError(repr(error))
                for block in blocks:
                    if block.rejection is not None:
                        self._settle(block, block.rejection)  # its own error first wins
                self._fail_segment(segment, blocks, failure)
                return
            resend: list[_Block] = []
            behind: list[_Block] = []
            refused: _Block | None = None
            for block in blocks:
                if block.last <= last:
                    self._settle(block)  # persisted before the failure
                elif refused is not None:
                    behind.append(block)
                elif block.rejection is not None:
                    refused = block
                else:
                    invariant(block.first > last, "a block was partly persisted")
                    resend.append(block)
            segment.sent_last = last
            segment.reconnecting = False
            if refused is not None:
                self._fail_refused(segment, refused, behind)
            if sealed_error is not None:
                segment.sealed = True
                if isinstance(sealed_error, StreamSealedError):
                    self._failure = sealed_error
                self._fail_segment(segment, resend, sealed_error)
                return
            segment.queued.extendleft(reversed(resend))
            if refused is None:
                log.info(
                    "writer reconnected to %s: last persisted event %d, resending %d blocks",
                    segment.name,
                    last,
                    len(resend),
                )
            self._wake.notify()

    def _fail_refused(self, segment: _SegmentWriter, refused: _Block, behind: list[_Block]) -> None:
        """Under the lock: fail a block the store refused and every later block of ``segment``.

        The later ones (in flight behind it, queued, open) get an error of the same type
        saying an earlier event was refused; the segment then goes on with new writes.
        """
        rejection = refused.rejection
        invariant(rejection is not None, "a refused block has its error")
        assert rejection is not None
        later = behind + list(segment.queued)
        if segment.open is not None:
            later.append(segment.open)
        segment.queued.clear()
        segment.open = None
        self._settle(refused, rejection)
        derived = _refused_earlier(rejection, segment.name)
        for block in later:
            self._settle(block, derived)
        self._space.notify_all()
        log.warning(
            "append to %s refused: %r; failed events %d to %d and %d later blocks, not resent",
            segment.name,
            rejection,
            refused.first,
            refused.last,
            len(later),
        )

    def _sealed_error(self, segment: _SegmentWriter) -> PravegaError | None:
        """A typed error if the segment is sealed (StreamSealedError if its stream is)."""
        try:
            if not self._connection.get_info(segment.name).result(60).sealed:
                return None
        except (PravegaError, FutureTimeoutError):
            return None
        with contextlib.suppress(PravegaError):
            if self._controller.get_stream_info(self.scope, self.stream).sealed:
                return StreamSealedError(f"stream {self.scope}/{self.stream} is sealed")
        return SegmentSealedError(f"segment {segment.name} is sealed")

    def _fail_segment(
        self, segment: _SegmentWriter, blocks: list[_Block], error: PravegaError
    ) -> None:
        """Under the lock: fail ``blocks`` and everything queued behind them on ``segment``."""
        pending = blocks + [b for b in segment.pending_blocks() if b not in blocks]
        segment.inflight.clear()
        segment.queued.clear()
        segment.open = None
        for block in pending:
            self._settle(block, error)
        self._space.notify_all()

    def _fail_all(self, error: PravegaError) -> None:
        with self._lock:
            self._failure = error
            for segment in self._writers:
                self._fail_segment(segment, segment.pending_blocks(), error)
        self._drain()
