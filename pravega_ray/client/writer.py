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
    StreamSealedError,
)
from pravega_ray.invariant import invariant
from pravega_ray.naming import routing_key_hash

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


@dataclass(frozen=True, slots=True)
class WriterConfig:
    """Tuning of one writer; the defaults come from :mod:`pravega_ray.constants`.

    Every field is checked when the config is built (InvalidArgumentError naming it):

    * ``block_bytes_target``: int, 1 to ``APPEND_BLOCK_BYTES_MAX`` (9 MiB): a block is
      sent once it holds this many bytes (an event that would overflow the container's
      limit starts a new block instead);
    * ``blocks_in_flight_max``: int, 1 to ``WRITER_BLOCKS_IN_FLIGHT_LIMIT``;
    * ``blocks_queued_max``: int, 1 to ``WRITER_BLOCKS_QUEUED_LIMIT``: full blocks held per
      segment beyond those in flight before ``write_event`` blocks;
    * ``linger_s``, ``reconnect_backoff_s``: finite seconds, 0 to 60;
    * ``reconnect_attempts_max``: int, 1 to 10,000;
    * ``append_call_timeout_s``: finite seconds, above 0 and at most 3,600.
    """

    block_bytes_target: int = constants.APPEND_BLOCK_BYTES_TARGET
    blocks_in_flight_max: int = constants.WRITER_BLOCKS_IN_FLIGHT_MAX
    linger_s: float = constants.WRITER_LINGER_S
    reconnect_attempts_max: int = constants.WRITER_RECONNECT_ATTEMPTS_MAX
    reconnect_backoff_s: float = constants.WRITER_RECONNECT_BACKOFF_S
    append_call_timeout_s: float = constants.APPEND_CALL_TIMEOUT_S
    blocks_queued_max: int = constants.WRITER_BLOCKS_QUEUED_MAX

    def __post_init__(self) -> None:
        limits = constants
        _check_int("block_bytes_target", self.block_bytes_target, limits.APPEND_BLOCK_BYTES_MAX)
        _check_int(
            "blocks_in_flight_max", self.blocks_in_flight_max, limits.WRITER_BLOCKS_IN_FLIGHT_LIMIT
        )
        _check_int("blocks_queued_max", self.blocks_queued_max, limits.WRITER_BLOCKS_QUEUED_LIMIT)
        _check_int("reconnect_attempts_max", self.reconnect_attempts_max, 10_000)
        _check_seconds("linger_s", self.linger_s, 0.0, 60.0)
        _check_seconds("reconnect_backoff_s", self.reconnect_backoff_s, 0.0, 60.0)
        _check_seconds("append_call_timeout_s", self.append_call_timeout_s, 0.0, 3600.0)
        if self.append_call_timeout_s == 0:
            raise InvalidArgumentError("append_call_timeout_s must be above 0")


def _check_int(name: str, value: object, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidArgumentError(
            f"WriterConfig.{name} must be an int in [1, {high}], got {value!r}"
        )


def _check_seconds(name: str, value: object, low: float, high: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise InvalidArgumentError(
            f"WriterConfig.{name} must be a number of seconds in [{low}, {high}], got {value!r}"
        )


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
    """Writes events to one stream; from ``cluster.create_writer``, used as a context manager."""

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
        were written. Raises EventTooLargeError for events over 8 MiB,
        StreamSealedError once the stream is known to be sealed,
        ClientClosedError after close(). None of these queue anything.
        """
        # The hot path of the client: kept flat on purpose (STACK.md: per-event Python
        # work on the writer is the throughput budget on a 2-core machine).
        if self._bytes_passthrough and type(event) is bytes:
            payload: bytes = event
        else:
            payload = self._serializer.serialize(event)
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
                segment.queued.append(block)  # the event would take it past the store's limit
                block = segment.open = None
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
        """Queue several events for one routing key; one future for all of them.

        The events are stored in order and, if they fit in one append block
        (``APPEND_BLOCK_BYTES_MAX``), atomically: all or none (Pravega's
        ``writeEvents``). Raises as :meth:`write_event` does, queuing nothing, and
        EventTooLargeError if the framed events (8 bytes each plus the payload) exceed
        one append block (``APPEND_BLOCK_BYTES_MAX``, 9 MiB): split such a batch (and
        lose its atomicity) yourself.
        """
        if isinstance(events, (str, bytes, bytearray, memoryview)) or not isinstance(
            events, Iterable
        ):
            raise InvalidArgumentError(
                f"write_events needs an iterable of events, got {type(events).__name__}"
            )
        payloads = []
        for event in events:
            payload = (
                event
                if self._bytes_passthrough and type(event) is bytes
                else (self._serializer.serialize(event))
            )
            header = _HEADERS.get(len(payload)) or _event_header(len(payload))
            payloads.append((header, payload))
        if not payloads:
            raise InvalidArgumentError("write_events needs at least one event")
        total = sum(len(p) + 8 for _, p in payloads)
        if total > constants.APPEND_BLOCK_BYTES_MAX:
            raise EventTooLargeError(
                f"write_events batch of {len(payloads)} events is {total} bytes framed; one "
                f"atomic batch holds at most {constants.APPEND_BLOCK_BYTES_MAX}"
            )
        with self._lock:
            if self._closed or self._failure is not None:
                self._raise_unusable()
            segment = self._route(routing_key)
            block = segment.open
            if block is not None and block.size + total > constants.APPEND_BLOCK_BYTES_MAX - 8:
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
            return WriteFuture(block)

    def _raise_unusable(self) -> None:
        if self._closed:
            raise ClientClosedError("writer is closed")
        assert self._failure is not None
        raise self._failure

    def flush(self, timeout: float | None = None) -> None:
        """Block until every event written so far is durable; raise the first failure."""
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
        """Flush, then stop the writer. Idempotent."""
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
                        has_open = any(s.open is not None for s in self._writers)
                        self._wake.wait(self._config.linger_s if has_open else 0.5)
                        continue
                for segment, block, expected in sends:
                    self._send(segment, block, expected)
                for segment in reconnects:
                    self._reconnect(segment)
        except BaseException as e:  # pragma: no cover - a bug; fail loudly, not silently
            log.exception("writer pump crashed")
            self._fail_all(PravegaError(f"writer pump crashed: {e!r}"))

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
            elif isinstance(error, SegmentSealedError):
                segment.reconnecting = True  # the reconnect finds out whether the stream is sealed
            else:
                # The store refused the block itself (InvalidArgumentError, DataCorruptionError,
                # ...): resending it cannot help. The reconnect settles what persisted, fails
                # this block and resends the blocks after it (they were conditional on it).
                block.rejection = (
                    error if isinstance(error, PravegaError) else PravegaError(repr(error))
                )
                segment.reconnecting = True
                log.warning("append to %s refused: %r; failing that block", segment.name, error)
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
        last: int | None = None
        error: BaseException | None = None
        for attempt in range(self._config.reconnect_attempts_max):
            try:
                last = self._connection.setup_append(segment.name, self.writer_id).result(
                    constants.CONTROLLER_CALL_TIMEOUT_S
                )
                break
            except RetriableError as e:
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
                self._fail_segment(segment, blocks, failure)
                return
            resend = []
            for block in blocks:
                if block.last <= last:
                    self._settle(block)  # persisted before the failure
                elif block.rejection is not None:
                    self._settle(block, block.rejection)
                else:
                    invariant(block.first > last, "a block was partly persisted")
                    resend.append(block)
            segment.sent_last = last
            segment.reconnecting = False
            if sealed_error is not None:
                segment.sealed = True
                if isinstance(sealed_error, StreamSealedError):
                    self._failure = sealed_error
                self._fail_segment(segment, resend, sealed_error)
                return
            segment.queued.extendleft(reversed(resend))
            log.info(
                "writer reconnected to %s: last persisted event %d, resending %d blocks",
                segment.name,
                last,
                len(resend),
            )
            self._wake.notify()

    def _sealed_error(self, segment: _SegmentWriter) -> PravegaError | None:
        """A typed error if the segment is sealed (StreamSealedError if its stream is)."""
        try:
            if not self._connection.get_info(segment.name).result(60).sealed:
                return None
        except PravegaError:
            return None
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
