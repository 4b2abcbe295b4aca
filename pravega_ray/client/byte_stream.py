"""Byte streams: raw bytes on a stream of one segment (Pravega's ``ByteStreamWriter`` and
``ByteStreamReader``, ``io.pravega.client.byteStream``).

A *byte stream* is a stream with a fixed scaling policy of one segment that was never
scaled: its bytes are that segment's bytes, with no event envelope, at the offsets they
have in the segment. :class:`ByteStreamWriter` appends to it; :class:`ByteStreamReader`
reads it from any offset. Both call the segment container's own service surface
(``append_conditional``, ``read``, ``get_info``, ``truncate``, ``get_attributes``), the same
calls the wire gateway makes for Pravega's official client (``wire/gateway_segments.py``,
WIRE.md 3.10), so bytes written through either front door read back through the other.

*design* (the writer)

* ``write`` copies the bytes into a bounded buffer (``BYTE_WRITER_BUFFER_BYTES_MAX``; it
  blocks while the buffer is full) and returns. A write is cut into *chunks* of at most
  ``BYTE_WRITE_PIECE_BYTES_MAX`` (8 MiB, below the container's append limit).
* A pump thread sends the buffer as *pieces*: whole chunks joined up to 8 MiB, **one piece in
  flight at a time**. Each piece is a conditional append: it lands only if the segment ends
  exactly where this writer's last piece ended (``expected_offset``). Pipelined conditional
  appends could reach the container out of order (actor calls with large arguments may
  start out of order) and fail for no reason; with one in flight, everything written while
  a piece travels is coalesced into the next, so throughput holds.
* The same append sets the writer's attribute (its 16-byte id) to the piece's sequence
  number. A call whose outcome is unknown (``RetriableError``: the container died or
  restarted; or no answer within ``APPEND_CALL_TIMEOUT_S``) is resolved by reading that
  attribute: the piece landed if it holds the piece's number, else it is sent again,
  conditional on the same offset. So a piece is stored once, never twice, and never after
  someone else's bytes.
* A piece whose condition fails because another writer appended meanwhile makes the writer
  *fail*: the piece and every byte buffered after it are dropped, nothing more is sent, and
  every later call raises the same ConditionalUpdateError. Two writers therefore never
  interleave silently: the stale one learns it and stores nothing more.

The writer starts at the segment's tail as it is when the writer is made (Java's and
Rust's writers differ here: Rust starts at offset 0, so on a non-empty stream its first
write always fails). Either way every write is conditional on the offset this writer last
saw, so neither can interleave with another writer; starting at the tail makes a new
writer append, as a file opened for appending does, and a writer still fails if anyone
appends between its creation and its first piece.

*design* (the reader) keeps one read in flight (issued at creation, after each seek, and
as soon as a read returns data: a read-ahead), long-polling at the tail for up to
``READER_LONG_POLL_S`` per call, like the event reader. At most one read's bytes are
buffered beside it, plus what a read-ahead brought before the buffer was read: about two
reads' bytes (``BYTE_READ_BYTES`` each) at most.

Thread-safety: the writer's calls may come from any thread (a write is never interleaved
with another thread's write); a reader is used by one thread.
"""

from __future__ import annotations

import io
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import TypeVar

from pravega_ray import constants
from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.client.stream_manager import StreamManager
from pravega_ray.client.writer_config import check_timeout
from pravega_ray.contracts.arguments import check_offset
from pravega_ray.contracts.attributes import NULL_VALUE, AttributeUpdate, AttributeUpdateType
from pravega_ray.contracts.records import SegmentRange, StreamInfo
from pravega_ray.contracts.segment_store import ReadResult
from pravega_ray.errors import (
    ClientClosedError,
    ConditionalUpdateError,
    IllegalStateError,
    InvalidArgumentError,
    PravegaError,
    RetriableError,
    SegmentSealedError,
    SegmentStoreUnavailableError,
    SegmentTruncatedError,
    StreamSealedError,
)
from pravega_ray.invariant import invariant
from pravega_ray.naming import validate_stream_name
from pravega_ray.stream_configuration import ScaleType
from pravega_ray.timing import (
    DAEMON_THREADS,
    SYSTEM_CLOCK,
    Clock,
    Joinable,
    ThreadScheduler,
    check_clock,
    check_thread_scheduler,
)

__all__ = [
    "BYTE_READ_BYTES",
    "BYTE_WRITER_BUFFER_BYTES_MAX",
    "BYTE_WRITE_PIECE_BYTES_MAX",
    "ByteStreamReader",
    "ByteStreamWriter",
    "byte_stream_segment",
]

log = logging.getLogger(__name__)

R = TypeVar("R")

BYTE_WRITE_PIECE_BYTES_MAX = constants.MAX_EVENT_SIZE_BYTES
"""Most bytes of one append of a byte writer (8 MiB, below ``APPEND_BLOCK_BYTES_MAX``); a
write of at most this many bytes is stored atomically, all of it or none."""

BYTE_WRITER_BUFFER_BYTES_MAX = 2 * BYTE_WRITE_PIECE_BYTES_MAX
"""Bytes a byte writer holds beyond the piece in flight; ``write`` blocks while it is full
(16 MiB, as the Rust client's byte writer)."""

BYTE_READ_BYTES = constants.READER_READ_BYTES
"""Bytes a byte reader asks for per read (one read in flight; a read-ahead stops once this
many bytes are buffered)."""

CALL_ATTEMPTS_MAX = constants.WRITER_RECONNECT_ATTEMPTS_MAX
"""Tries of one call (or one piece) whose outcome stays unknown before giving up."""

RETRY_BACKOFF_S = constants.WRITER_RECONNECT_BACKOFF_S
"""Pause between two tries after an outcome-unknown failure."""

CALL_TIMEOUT_S = constants.APPEND_CALL_TIMEOUT_S
"""A call unanswered this long is treated as outcome-unknown."""

PUMP_JOIN_TIMEOUT_S = 10.0

_WHENCES = (io.SEEK_SET, io.SEEK_CUR, io.SEEK_END)


def byte_stream_segment(
    controller: ControllerConnection, scope: str, stream: str
) -> tuple[StreamInfo, SegmentRange]:
    """The stream's info and its one segment, if ``scope/stream`` is a byte stream.

    Raises InvalidNameError for bad names, ScopeNotFoundError / StreamNotFoundError;
    InvalidArgumentError unless its scaling policy is fixed at one segment (a stream that
    may scale would spread its bytes over several segments); IllegalStateError if it has
    more than one segment or was scaled (its bytes are in more than one segment).
    """
    validate_stream_name(scope, stream)
    info = controller.get_stream_info(scope, stream)
    scaling = info.configuration.scaling
    if scaling.scale_type is not ScaleType.FIXED_NUM_SEGMENTS or scaling.min_segments != 1:
        raise InvalidArgumentError(
            f"{scope}/{stream} is not a byte stream: a byte stream has a fixed scaling policy "
            f"of 1 segment (ScalingPolicy.fixed(1)); this one is {scaling.scale_type.value} "
            f"with {scaling.min_segments} segment(s)"
        )
    if len(info.segments) != 1 or info.epoch != 0:
        raise IllegalStateError(
            f"{scope}/{stream} is not a byte stream: it has {len(info.segments)} segment(s) "
            f"in epoch {info.epoch}; a byte stream's bytes are in one segment, never scaled"
        )
    return info, info.segments[0]


def _call(start: Callable[[], Future[R]], scheduler: ThreadScheduler, what: str) -> R:
    """``start()``'s result, started again after an outcome-unknown failure (safe only for
    calls that may be repeated: reads, and truncations, which are idempotent), up to
    ``CALL_ATTEMPTS_MAX`` tries ``RETRY_BACKOFF_S`` apart; then that failure is raised.
    Any other error is raised at once."""
    last: PravegaError = SegmentStoreUnavailableError(f"{what}: not tried")
    for attempt in range(CALL_ATTEMPTS_MAX):
        if attempt:
            scheduler.sleep(RETRY_BACKOFF_S)
        try:
            return start().result(CALL_TIMEOUT_S)
        except RetriableError as e:
            last = e
        except FutureTimeoutError:
            last = SegmentStoreUnavailableError(f"{what}: no answer in {CALL_TIMEOUT_S}s")
        log.info("%s failed (%r); trying again", what, last)
    raise last


def _check_bytes(data: object) -> memoryview:
    """``data`` (bytes, bytearray or memoryview) as a flat memoryview of bytes."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(
            f"a byte stream writes bytes, bytearray or memoryview, got {type(data).__name__}"
        )
    view = memoryview(data)
    if not view.c_contiguous:  # e.g. a strided slice: its bytes, in order
        return memoryview(view.tobytes())
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


class ByteStreamWriter:
    """Writes raw bytes to a byte stream; from ``cluster.create_byte_writer``.

    The constructor raises what :func:`byte_stream_segment` raises, StreamSealedError for a
    sealed stream, and InvalidArgumentError for a ``scheduler`` that is not a
    ThreadScheduler. Keyword-only seam: ``scheduler`` starts the pump (a daemon thread by
    default) and sleeps between tries; one that starts no thread (``ManualThreadScheduler``)
    makes ``flush``, ``close`` and a ``write`` that finds the buffer full send the
    buffered bytes themselves, on the caller's thread.

    After a failure (another writer appended, the stream was sealed, a piece was refused,
    or an outcome stayed unknown after ``CALL_ATTEMPTS_MAX`` tries) the bytes not yet
    stored are dropped, and every later ``write`` and ``flush`` raises that error, as does
    the first ``close`` (which closes the writer all the same); what was stored before it
    stays.
    """

    def __init__(
        self,
        scope: str,
        stream: str,
        controller: ControllerConnection,
        segments: SegmentStoreConnection,
        *,
        scheduler: ThreadScheduler = DAEMON_THREADS,
    ) -> None:
        check_thread_scheduler(scheduler)
        info, segment = byte_stream_segment(controller, scope, stream)
        if info.sealed:
            raise StreamSealedError(f"byte stream {scope}/{stream} is sealed")
        self.scope = scope
        self.stream = stream
        self.segment = segment.name
        self.writer_id = uuid.uuid4().bytes  # version 4: never a core attribute key
        self._controller = controller
        self._segments = segments
        self._scheduler = scheduler
        tail = _call(lambda: segments.get_info(self.segment), scheduler, "byte writer get_info")
        if tail.sealed:
            raise StreamSealedError(f"byte stream {scope}/{stream} is sealed")
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._write_lock = threading.Lock()  # one write's chunks stay together
        self._chunks: deque[bytes] = deque()  # buffered, not yet sent
        self._buffered_bytes = 0
        self._in_flight_bytes = 0
        self._acked_offset = tail.length  # the segment ends here, as far as this writer knows
        self._sequence = 0
        self._failure: PravegaError | None = None
        self._closed = False
        self._pump: Joinable | None = scheduler.start(
            self._run_pump, f"pravega-byte-writer-{stream}"
        )

    # --- public API ----------------------------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Queue ``data`` (bytes, bytearray or memoryview; copied) for the stream's end and
        return its length. Durable once :meth:`flush` returns.

        Bytes are stored in write order, each write contiguous. A write of at most
        ``BYTE_WRITE_PIECE_BYTES_MAX`` (8 MiB) bytes is stored atomically; a larger one is
        stored as several appends, in order. An empty write does nothing and returns 0.
        Blocks while ``BYTE_WRITER_BUFFER_BYTES_MAX`` bytes wait to be sent. Raises
        InvalidArgumentError for anything else than a bytes-like object (a str too),
        ClientClosedError after close, and the writer's failure once it failed (see the
        class docstring); bytes of a write that raises midway may be partly queued, and are
        then dropped by the failure.
        """
        view = _check_bytes(data)
        size = view.nbytes
        with self._write_lock:
            with self._lock:
                self._raise_unusable()
            for start in range(0, size, BYTE_WRITE_PIECE_BYTES_MAX):
                chunk = view[start : start + BYTE_WRITE_PIECE_BYTES_MAX].tobytes()
                self._queue(chunk)
        return size

    def flush(self, timeout: float | None = None) -> None:
        """Block until every byte written before the call is durable.

        Raises the writer's failure (the first error that stopped it, also if it failed
        earlier), ClientClosedError after close, TimeoutError once ``timeout`` seconds pass
        first (the bytes stay queued), InvalidArgumentError for a timeout that is not None or
        a finite number >= 0.
        """
        timeout = check_timeout("flush timeout", timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            self._raise_unusable()
            target = self._acked_offset + self._in_flight_bytes + self._buffered_bytes
        if self._pump is None:
            while self._pump_once(wait=False):
                pass
        with self._changed:
            while self._failure is None and self._acked_offset < target:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"byte writer flush did not complete within {timeout}s")
                self._changed.wait(remaining)
            if self._failure is not None:
                raise self._failure

    def close(self) -> None:
        """Flush, then stop the writer. Idempotent.

        Stops the pump even if the flush raises, then re-raises that error (the writer's
        failure). Later calls return at once; other calls raise ClientClosedError.
        """
        if self._closed:
            return
        try:
            self.flush()
        finally:
            with self._changed:
                self._closed = True
                self._changed.notify_all()
            if self._pump is not None:
                self._pump.join(PUMP_JOIN_TIMEOUT_S)

    def close_and_seal(self) -> None:
        """Close (flushing), then seal the stream, so no one can ever append to it again;
        readers then read its bytes to the end and get ``b""`` there.

        The stream is sealed through the controller (``StreamManager.seal_stream``: its
        segment and its record). A writer that failed (e.g. another writer appended first)
        raises its failure and seals nothing: the stream is not this writer's to end.
        Raises also what ``seal_stream`` raises (e.g. TimeoutError).
        """
        self.close()
        with self._lock:
            if self._failure is not None:
                raise self._failure
        StreamManager(self._controller, scheduler=self._scheduler).seal_stream(
            self.scope, self.stream
        )

    def fetch_tail_offset(self) -> int:
        """The segment's durable length as the segment store knows it now: the offset the
        next byte anyone appends gets. Bytes this writer buffered are not counted.

        Raises ClientClosedError after close; SegmentNotFoundError once the stream is deleted;
        an outcome-unknown RetriableError once retries ran out.
        """
        self._raise_if_closed()
        info = _call(lambda: self._segments.get_info(self.segment), self._scheduler, "get_info")
        return info.length

    def truncate_data_before(self, offset: int) -> None:
        """Durably drop the bytes below ``offset`` (an int >= 0): reads there then raise
        SegmentTruncatedError. Idempotent at or below the current head.

        Bytes this writer has not flushed do not count: InvalidArgumentError for an offset
        past the segment's durable length (flush first), and for an ``offset`` that is not an
        int >= 0. Raises ClientClosedError after close, SegmentNotFoundError once the stream is
        deleted.
        """
        self._raise_if_closed()
        check_offset("offset", offset)
        _call(
            lambda: self._segments.truncate(self.segment, offset),
            self._scheduler,
            "truncate",
        )

    def __enter__(self) -> ByteStreamWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals -----------------------------------------------------------------------------
    def _raise_if_closed(self) -> None:
        if self._closed:
            raise ClientClosedError(f"byte writer of {self.scope}/{self.stream} is closed")

    def _raise_unusable(self) -> None:
        """Under the lock: raise if closed or failed."""
        self._raise_if_closed()
        if self._failure is not None:
            raise self._failure

    def _queue(self, chunk: bytes) -> None:
        """Add one chunk to the buffer, waiting for room (or making it, without a pump)."""
        while True:
            with self._changed:
                self._raise_unusable()
                size = self._buffered_bytes
                if size == 0 or size + len(chunk) <= BYTE_WRITER_BUFFER_BYTES_MAX:
                    self._chunks.append(chunk)
                    self._buffered_bytes += len(chunk)
                    self._changed.notify_all()
                    return
                if self._pump is not None:
                    self._changed.wait()
                    continue
            self._pump_once(wait=False)  # no pump thread: the caller sends

    def _run_pump(self) -> None:
        """The pump thread: a piece at a time until closed (and drained) or failed."""
        try:
            while self._pump_once(wait=True):
                pass
        except BaseException as e:  # pragma: no cover - a bug; fail loudly, not silently
            log.exception("byte writer pump crashed")
            with self._changed:
                self._fail(PravegaError(f"byte writer pump crashed: {e!r}"))

    def _pump_once(self, *, wait: bool) -> bool:
        """Send the next piece and wait for its outcome. False once there is nothing to do:
        failed, closed with nothing buffered, or (``wait`` false) nothing buffered."""
        with self._changed:
            while not self._chunks and not self._closed and self._failure is None and wait:
                self._changed.wait()
            if self._failure is not None or not self._chunks:
                return False
            piece = self._take_piece()
            self._sequence += 1
            sequence = self._sequence
            offset = self._acked_offset
            self._in_flight_bytes = len(piece)
            self._changed.notify_all()  # room in the buffer
        error = self._append(piece, offset, sequence)
        with self._changed:
            self._in_flight_bytes = 0
            if error is None:
                self._acked_offset = offset + len(piece)
            else:
                self._fail(error, len(piece))
            self._changed.notify_all()
        return error is None

    def _take_piece(self) -> bytes:
        """Under the lock: whole buffered chunks, in order, up to one append's size."""
        parts = [self._chunks.popleft()]
        size = len(parts[0])
        while self._chunks and size + len(self._chunks[0]) <= BYTE_WRITE_PIECE_BYTES_MAX:
            chunk = self._chunks.popleft()
            parts.append(chunk)
            size += len(chunk)
        self._buffered_bytes -= size
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _fail(self, error: PravegaError, in_flight: int = 0) -> None:
        """Under the lock: stop for good; drop what is buffered."""
        dropped = in_flight + self._buffered_bytes
        log.warning(
            "byte writer of %s/%s failed (%s); %d bytes not stored",
            self.scope,
            self.stream,
            error,
            dropped,
        )
        self._failure = error
        self._chunks.clear()
        self._buffered_bytes = 0
        self._changed.notify_all()

    def _landed(self) -> int:
        """The sequence number of this writer's last stored piece (NULL_VALUE if none)."""
        values = self._segments.get_attributes(self.segment, [self.writer_id]).result(
            CALL_TIMEOUT_S
        )
        return values.get(self.writer_id, NULL_VALUE)

    def _append(self, piece: bytes, offset: int, sequence: int) -> PravegaError | None:
        """Store ``piece`` at ``offset`` exactly once: None once it is stored, else the error
        that fails the writer (see the module docstring).

        Once a try's outcome is unknown, any later answer is checked against the writer's
        attribute before it is believed: a refusal (the end moved, the segment is sealed)
        may be the doing of that earlier try, which landed after all.
        """
        update = AttributeUpdate(self.writer_id, AttributeUpdateType.REPLACE, sequence)
        doubtful = False  # an earlier try's outcome is unknown: it may have landed
        check = False  # ask whether the piece landed before doing anything else
        refusal: PravegaError | None = None  # the answer to believe if it did not land
        unknown: PravegaError | None = None
        attempts = 0
        while True:
            if unknown is not None:
                attempts += 1
                if attempts >= CALL_ATTEMPTS_MAX:
                    return type(unknown)(
                        f"byte writer of {self.scope}/{self.stream}: the append at offset "
                        f"{offset} stayed outcome-unknown after {attempts} tries: {unknown}",
                        segment=self.segment,
                        offset=offset,
                    )
                self._scheduler.sleep(RETRY_BACKOFF_S)
                unknown = None
            if check:
                try:
                    landed = self._landed()
                except RetriableError as e:
                    unknown = e
                    continue
                except FutureTimeoutError:
                    unknown = SegmentStoreUnavailableError(f"no answer in {CALL_TIMEOUT_S}s")
                    continue
                except PravegaError as e:
                    return e
                invariant(landed <= sequence, "a byte writer's attribute ran ahead of it")
                if landed == sequence:
                    return None
                if refusal is not None:
                    return refusal
                check = False
            try:
                result = self._segments.append_conditional(
                    self.segment, piece, (update,), expected_offset=offset
                ).result(CALL_TIMEOUT_S)
            except RetriableError as e:
                unknown, doubtful, check = e, True, True
                continue
            except FutureTimeoutError:
                unknown = SegmentStoreUnavailableError(f"no answer in {CALL_TIMEOUT_S}s")
                doubtful = check = True
                continue
            except PravegaError as e:
                refusal = self._refusal(e, offset)
                if doubtful:  # perhaps an earlier try of this very piece landed
                    check = True
                    continue
                return refusal
            invariant(result.offset == offset, "a conditional append landed elsewhere")
            return None

    def _refusal(self, error: PravegaError, offset: int) -> PravegaError:
        """The writer's failure for a piece at ``offset`` the container refused with
        ``error``: another writer appended (ConditionalUpdateError), the stream is sealed
        (StreamSealedError), or the container's own error (never sent again)."""
        if isinstance(error, ConditionalUpdateError):
            return self._stale(error, offset)
        if isinstance(error, SegmentSealedError):
            return StreamSealedError(
                f"byte stream {self.scope}/{self.stream} is sealed; "
                f"nothing from offset {offset} on was stored by this writer",
                segment=self.segment,
                offset=offset,
            )
        return error

    def _stale(self, error: ConditionalUpdateError, offset: int) -> ConditionalUpdateError:
        actual = getattr(error, "actual", None)
        return ConditionalUpdateError(
            f"byte writer of {self.scope}/{self.stream}: expected segment {self.segment} to "
            f"end at offset {offset}, but it ends at {actual}: another writer appended to it. "
            "Nothing from that offset on was stored by this writer, and it takes no more "
            "writes (make a new writer to append after the other's bytes)",
            segment=self.segment,
            expected_offset=offset,
            actual_offset=actual,
        )


class ByteStreamReader:
    """Reads the raw bytes of a byte stream from any offset; from ``cluster.create_byte_reader``.

    Starts at the segment's head (its first byte not truncated away; 0 unless the stream was
    truncated). The constructor raises what :func:`byte_stream_segment` raises (a sealed
    stream is fine), and InvalidArgumentError for a ``clock`` or ``scheduler`` that is not
    one. Keyword-only seams: ``clock`` times ``read``'s timeout; ``scheduler`` sleeps
    between tries after outcome-unknown failures. Not thread-safe.
    """

    def __init__(
        self,
        scope: str,
        stream: str,
        controller: ControllerConnection,
        segments: SegmentStoreConnection,
        *,
        clock: Clock = SYSTEM_CLOCK,
        scheduler: ThreadScheduler = DAEMON_THREADS,
    ) -> None:
        check_clock(clock)
        check_thread_scheduler(scheduler)
        _, segment = byte_stream_segment(controller, scope, stream)
        self.scope = scope
        self.stream = stream
        self.segment = segment.name
        self._segments = segments
        self._clock = clock
        self._scheduler = scheduler
        head = _call(lambda: segments.get_info(self.segment), scheduler, "get_info")
        self._buffer = b""  # bytes from self._offset up to self._fetch_offset
        self._offset = head.start_offset  # of the next byte read returns
        self._fetch_offset = self._offset  # where the next read starts
        self._pending: Future[ReadResult] | None = None
        self._end_of_segment = False  # sealed, and read up to its end
        self._failures = 0  # outcome-unknown failures in a row
        self._closed = False
        self._issue_read()

    # --- public API ----------------------------------------------------------------------------
    def read(self, max_bytes: int, timeout_s: float | None = None) -> bytes:
        """Between 1 and ``max_bytes`` bytes from the current offset, which moves past them;
        ``b""`` only at the end of a sealed stream.

        Returns what is buffered at once; otherwise waits for a read, at the tail until
        someone appends or the stream is sealed, at most ``timeout_s`` seconds (None: no
        limit), then raises TimeoutError (nothing consumed). Raises SegmentTruncatedError
        (attributes ``segment``, ``offset``, ``start_offset``, the head) if the bytes at the
        current offset were truncated away: the offset stays, so seek to
        :meth:`fetch_head_offset` to go on. Raises InvalidArgumentError for an offset past
        the stream's tail (a seek too far), for ``max_bytes`` not an int >= 1 and a
        ``timeout_s`` not None or a finite number >= 0; SegmentNotFoundError once the stream
        is deleted; ClientClosedError after close; an outcome-unknown RetriableError after
        ``CALL_ATTEMPTS_MAX`` failed tries in a row.
        """
        self._raise_if_closed()
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise InvalidArgumentError(f"max_bytes must be an int >= 1, got {max_bytes!r}")
        timeout_s = check_timeout("timeout_s", timeout_s)
        deadline = None if timeout_s is None else self._clock.monotonic() + timeout_s
        while True:
            self._collect()
            if self._buffer:
                return self._take(max_bytes)
            if self._end_of_segment:
                return b""
            pending = self._pending or self._issue_read()
            remaining = None if deadline is None else deadline - self._clock.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(
                    f"no bytes of {self.scope}/{self.stream} at offset {self._offset} "
                    f"within {timeout_s}s"
                )
            slice_s = constants.READER_LONG_POLL_S
            wait(
                [pending],
                timeout=slice_s if remaining is None else min(remaining, slice_s),
                return_when=FIRST_COMPLETED,
            )

    def available(self) -> int:
        """Bytes :meth:`read` returns without waiting (already fetched); -1 at the end of a
        sealed stream (``read`` returns ``b""``), as Java's ``available()``. Starts a read if
        none is under way; never raises for a failed one (``read`` does)."""
        self._raise_if_closed()
        pending = self._pending
        if pending is not None and pending.done() and pending.exception() is None:
            self._collect()
        if self._buffer:
            return len(self._buffer)
        if self._end_of_segment:
            return -1
        if self._pending is None:
            self._issue_read()
        return 0

    def current_offset(self) -> int:
        """The offset of the next byte :meth:`read` returns."""
        return self._offset

    def tell(self) -> int:
        """:meth:`current_offset` (``io`` naming)."""
        return self._offset

    def seek_to_offset(self, offset: int) -> None:
        """Read from ``offset`` (an int >= 0) on. Buffered bytes are kept if ``offset`` is
        among them, else dropped. Nothing is checked against the stream here: a read then
        raises SegmentTruncatedError below the head and InvalidArgumentError past the tail.
        InvalidArgumentError for an ``offset`` that is not an int >= 0 (NaN, floats,
        bools); ClientClosedError after close."""
        self._raise_if_closed()
        check_offset("offset", offset)
        if offset == self._offset:
            return
        if self._offset < offset < self._fetch_offset:  # among the buffered bytes
            self._buffer = self._buffer[offset - self._offset :]
            self._offset = offset
            return
        self._drop_pending()
        self._buffer = b""
        self._offset = self._fetch_offset = offset
        self._end_of_segment = False
        self._issue_read()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """``io``-style seek: ``offset`` from the head of the segment's offsets (``SEEK_SET``,
        0), from the current offset (``SEEK_CUR``, 1) or from the tail (``SEEK_END``, 2,
        asking the segment store); returns the new offset. Offsets count from the segment's
        first byte ever, truncated or not. InvalidArgumentError for another ``whence``, an
        ``offset`` that is not an int, or a resulting offset below 0."""
        self._raise_if_closed()
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise InvalidArgumentError(f"offset must be an int, got {offset!r}")
        if isinstance(whence, bool) or not isinstance(whence, int) or whence not in _WHENCES:
            raise InvalidArgumentError(f"whence must be 0, 1 or 2 (io.SEEK_*), got {whence!r}")
        if whence == io.SEEK_SET:
            base = 0
        elif whence == io.SEEK_CUR:
            base = self._offset
        else:
            base = self.fetch_tail_offset()
        target = base + offset
        if target < 0:
            raise InvalidArgumentError(f"seek to offset {target}: offsets are >= 0")
        self.seek_to_offset(target)
        return target

    def fetch_head_offset(self) -> int:
        """The segment's first readable offset now (0 unless truncated). Raises
        ClientClosedError after close, SegmentNotFoundError once the stream is deleted."""
        self._raise_if_closed()
        return _call(
            lambda: self._segments.get_info(self.segment), self._scheduler, "get_info"
        ).start_offset

    def fetch_tail_offset(self) -> int:
        """The segment's durable length now: one past its last byte. Raises as
        :meth:`fetch_head_offset`."""
        self._raise_if_closed()
        return _call(
            lambda: self._segments.get_info(self.segment), self._scheduler, "get_info"
        ).length

    def close(self) -> None:
        """Drop the read under way and the buffered bytes. Idempotent; later calls (but
        close and current_offset) raise ClientClosedError."""
        if self._closed:
            return
        self._closed = True
        self._drop_pending()
        self._buffer = b""

    def __enter__(self) -> ByteStreamReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals -----------------------------------------------------------------------------
    def _raise_if_closed(self) -> None:
        if self._closed:
            raise ClientClosedError(f"byte reader of {self.scope}/{self.stream} is closed")

    def _take(self, max_bytes: int) -> bytes:
        data = self._buffer[:max_bytes]
        self._buffer = self._buffer[len(data) :]
        self._offset += len(data)
        if not self._buffer and self._pending is None and not self._end_of_segment:
            self._issue_read()  # keep one read in flight
        return data

    def _issue_read(self) -> Future[ReadResult]:
        """Start the next read at the fetch offset (none is under way); its future."""
        invariant(self._pending is None, "a byte reader keeps one read in flight")
        pending = self._segments.read(
            self.segment, self._fetch_offset, BYTE_READ_BYTES, constants.READER_LONG_POLL_S
        )
        self._pending = pending
        return pending

    def _drop_pending(self) -> None:
        # Dropped, not cancelled: a Ray call's future completes from Ray's callback thread,
        # which fails on a cancelled future. A long poll ends by itself within a second.
        self._pending = None

    def _collect(self) -> None:
        """Take the read under way if it is done: its bytes join the buffer (and the next
        read starts: read-ahead), or its error is raised (an outcome-unknown one only after
        ``CALL_ATTEMPTS_MAX`` in a row; before that the read is started again)."""
        pending = self._pending
        if pending is None or not pending.done():
            return
        self._pending = None
        error = pending.exception()
        if error is not None:
            if isinstance(error, RetriableError):
                self._failures += 1
                if self._failures >= CALL_ATTEMPTS_MAX:
                    self._failures = 0
                    raise error
                log.info("byte read of %s failed (%r); trying again", self.segment, error)
                self._scheduler.sleep(RETRY_BACKOFF_S)
                self._issue_read()
                return
            if isinstance(error, SegmentTruncatedError):
                head = getattr(error, "start_offset", None)
                raise SegmentTruncatedError(
                    f"bytes of {self.segment} ({self.scope}/{self.stream}) at offset "
                    f"{self._fetch_offset} were truncated away; its head is now at {head}: "
                    "seek_to_offset(fetch_head_offset()) to read on",
                    segment=self.segment,
                    offset=self._fetch_offset,
                    start_offset=head,
                ) from error
            raise error
        self._failures = 0
        result = pending.result()
        invariant(result.offset == self._fetch_offset, "a byte read answered another offset")
        if result.data:
            self._buffer += result.data
            self._fetch_offset += len(result.data)
        self._end_of_segment = result.end_of_segment
        if result.data and not self._end_of_segment and len(self._buffer) < BYTE_READ_BYTES:
            self._issue_read()  # read ahead while these bytes are handed out
