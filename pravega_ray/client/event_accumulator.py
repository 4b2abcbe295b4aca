"""The event accumulator: framed events gathered into append blocks, per segment.

*design* (after Kafka's ``RecordAccumulator``) Each segment of a writer has one
:class:`SegmentBlocks`: every block of the segment not yet settled, oldest first ::

    in flight (sent, unanswered)  <-  queued (full, waiting)  <-  open (taking events)

The accumulator owns the right-hand side: it frames events (through
:class:`~pravega_ray.client.event_framing.EventHeaders`), numbers them (the segment's
next *event number*), adds them to the open block and closes a block once it holds
``block_bytes_target`` bytes, or before an event would take it past
``APPEND_BLOCK_BYTES_MAX``, the largest block a container accepts. Blocks are held
to that limit here and nowhere else in the writer (a ``write_events`` batch that
could never fit one block is refused here too), so no block the writer builds is
ever too large. The segment's output stream (``segment_output_stream.py``) owns the
left-hand side: it moves blocks from queued (or open) into flight and settles them.

One future per block, not per event (docs/stack.md: 3.5 us per future): a
``WriteFuture`` is a handle on its block's future.

*re-routing* A block remembers each event's routing key (and where a ``write_events``
batch lies in it), so that when its segment is sealed, :meth:`EventAccumulator.reroute`
can move its events, in order, to the successor segments owning their keys. The moved
events land in *child* blocks (the successors' open blocks, shared with other events);
the original block becomes their *parent*: its future completes once every child that
holds some of its events has completed (or fails with the first child's error), which
:meth:`~pravega_ray.client.segment_output_stream.WriterContext.settle` arranges. A
child may itself be re-routed (its successor was sealed too): the chain resolves from
the bottom up.

Not thread-safe by itself: every method runs under the writer's lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

from pravega_ray.client.event_framing import EventHeaders, parse_events
from pravega_ray.client.serializers import serialized_bytes
from pravega_ray.constants import APPEND_BLOCK_BYTES_MAX, EVENT_HEADER_BYTES, NO_EVENT_NUMBER
from pravega_ray.errors import EventTooLargeError, PravegaError
from pravega_ray.invariant import invariant
from pravega_ray.timing import Clock

__all__ = ["Block", "EventAccumulator", "SegmentBlocks"]


class Block:
    """Events bound for one segment, sent and acknowledged together.

    Its events are numbered ``first`` to ``last``; ``parts`` are their frames until
    :meth:`seal` joins them into ``data``. ``created`` (when the block opened) drives
    the linger and ``sent_at`` (when it last went out) the stuck-call watchdog, both
    in seconds of the writer's clock.

    ``keys`` holds each event's routing key, in event order; ``batches`` the
    ``(index, count)`` of each ``write_events`` batch in it (None if none), so a
    re-route keeps a batch whole. ``parents`` are the blocks whose events were
    re-routed into this one (None if none); ``waiting`` counts the children of a
    re-routed block that have not completed yet.

    A *large event* (over ``MAX_EVENT_SIZE_BYTES``, ``large_events.py``) is a block of its own with
    no ``parts``: ``large`` holds its payload (never copied whole; the sender writes it
    to a transient segment in slices and merges that into the segment).
    """

    __slots__ = (
        "batches",
        "created",
        "data",
        "first",
        "future",
        "keys",
        "large",
        "large_attempts",
        "last",
        "parents",
        "parts",
        "rejection",
        "sent_at",
        "size",
        "waiting",
    )

    def __init__(self, first_event_number: int, created_s: float) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.first = first_event_number
        self.last = first_event_number - 1
        self.future: Future[None] = Future()
        self.created = created_s
        self.sent_at = 0.0
        self.data: bytes | None = None
        # The store refused this block itself (not its condition): fail it, never resend it.
        self.rejection: PravegaError | None = None
        self.keys: list[str | None] = []
        self.batches: list[tuple[int, int]] | None = None
        self.parents: list[Block] | None = None
        self.waiting = 0
        self.large: bytes | None = None
        self.large_attempts = 0  # how often the large-event protocol ran for it

    @property
    def count(self) -> int:
        return self.last - self.first + 1

    def seal(self) -> bytes:
        """The block's bytes, joined once; no event can be added after."""
        if self.data is None:
            self.data = b"".join(self.parts)
            self.parts = []
        return self.data

    def units(self) -> list[tuple[str | None, bytes, int]]:
        """The block's events as ``(routing_key, bytes, count)`` units, in order: a single
        event is its payload (count 0), a ``write_events`` batch of ``count`` events its
        framed bytes. A large event's unit is its payload."""
        if self.large is not None:
            return [(self.keys[0], self.large, 0)]
        data = self.seal()
        frames, consumed = parse_events(data)
        invariant(
            len(frames) == self.count == len(self.keys) and consumed == len(data),
            "a block's frames match its events",
        )
        batches = dict(self.batches or ())
        units: list[tuple[str | None, bytes, int]] = []
        i = 0
        while i < len(frames):
            count = batches.get(i, 0)
            if count:
                start = frames[i][0]
                end_offset, end_payload = frames[i + count - 1]
                end = end_offset + EVENT_HEADER_BYTES + len(end_payload)
                units.append((self.keys[i], data[start:end], count))
                i += count
            else:
                units.append((self.keys[i], frames[i][1], 0))
                i += 1
        return units


class SegmentBlocks:
    """Every unsettled block of one segment, oldest first: in flight, queued, open.

    ``inflight`` holds ``(block, call)`` pairs in event-number order, ``call`` being
    the append's future; the output stream alone changes it.
    """

    __slots__ = ("inflight", "name", "next_event_number", "open", "queued")

    def __init__(self, name: str) -> None:
        self.name = name
        self.next_event_number = 0
        self.open: Block | None = None
        self.queued: deque[Block] = deque()
        self.inflight: deque[tuple[Block, Future[Any]]] = deque()

    def pending(self) -> list[Block]:
        """Every block not yet settled, in event-number order."""
        blocks = [b for b, _ in self.inflight] + list(self.queued)
        if self.open is not None:
            blocks.append(self.open)
        return blocks

    def close_open(self) -> None:
        """Queue the open block as it is (a flush sends it without waiting for its linger)."""
        if self.open is not None:
            self.queued.append(self.open)
            self.open = None

    def requeue(self, blocks: list[Block]) -> None:
        """Put ``blocks`` (to be sent again, in order) before everything queued."""
        self.queued.extendleft(reversed(blocks))

    def renumber_after(self, last: int) -> None:
        """Number the events, none of them sent yet, from ``last + 1`` instead of 0: the
        writer's last event number on the segment, from a handshake."""
        invariant(not self.inflight, "nothing is sent before the handshake")
        if last == NO_EVENT_NUMBER:
            return
        shift = last + 1
        for block in self.pending():
            block.first += shift
            block.last += shift
        self.next_event_number += shift

    def take_unsent(self) -> list[Block]:
        """Remove and return the queued and open blocks, in order (they are to be failed)."""
        blocks = list(self.queued)
        if self.open is not None:
            blocks.append(self.open)
        self.queued.clear()
        self.open = None
        return blocks


class EventAccumulator:
    """Frames events and adds them to their segment's open block; one per writer.

    ``wake`` is called (under the writer's lock) whenever a block becomes sendable at
    once: it was closed, or it opened on a segment with nothing in flight, so a light
    load is not delayed by the linger. ``clock`` stamps each block's creation.
    """

    __slots__ = ("_block_bytes_target", "_monotonic", "_wake", "headers")

    def __init__(self, block_bytes_target: int, clock: Clock, wake: Callable[[], None]) -> None:
        self.headers = EventHeaders()
        """Frame headers by payload size (``headers[size]``; EventTooLargeError past 8 MiB)."""
        self._block_bytes_target = block_bytes_target
        self._monotonic = clock.monotonic
        self._wake = wake

    def append(
        self, blocks: SegmentBlocks, header: bytes, payload: bytes, routing_key: str | None
    ) -> Block:
        """Add one event (its frame ``header`` from :attr:`headers`, and ``payload``) for
        ``routing_key`` to the segment's open block, numbered after the segment's last;
        return that block.

        Never raises: the size was checked when the header was looked up.
        """
        # The writer's hot path: kept flat on purpose (see write_event). The room check is
        # _block_with_room inlined, since a call per event costs about 60 ns.
        size = len(payload) + EVENT_HEADER_BYTES
        block = blocks.open
        if block is None or block.size + size > APPEND_BLOCK_BYTES_MAX:
            block = self._next_block(blocks)
        parts = block.parts
        parts.append(header)
        parts.append(payload)
        block.keys.append(routing_key)
        block.size += size
        block.last = number = blocks.next_event_number
        blocks.next_event_number = number + 1
        if block.size >= self._block_bytes_target:
            blocks.queued.append(block)
            blocks.open = None
            self._wake()
        return block

    def append_large(self, blocks: SegmentBlocks, payload: bytes, routing_key: str | None) -> Block:
        """Add a large event (its payload over ``MAX_EVENT_SIZE_BYTES``) for ``routing_key``
        as a block of its own, queued behind the segment's open block (so the order with
        the events before and after it holds); return that block."""
        blocks.close_open()
        block = Block(blocks.next_event_number, self._monotonic())
        block.large = payload
        block.keys.append(routing_key)
        block.size = len(payload) + EVENT_HEADER_BYTES
        block.last = blocks.next_event_number
        blocks.next_event_number += 1
        blocks.queued.append(block)
        self._wake()
        return block

    def frame_batch(
        self, events: Iterable[Any], serialize: Callable[[Any], bytes], bytes_passthrough: bool
    ) -> tuple[bytes, int]:
        """Serialize and frame a ``write_events`` batch: its bytes and its event count.

        ``serialize`` is the writer's serializer; with ``bytes_passthrough`` (a
        BytesSerializer) a ``bytes`` event is its own payload. SerializationError if the
        serializer returns something other than bytes (its own errors propagate). The
        batch is stored atomically, so it must fit in one block: EventTooLargeError as
        soon as the payloads read so far (plus 8 bytes each) exceed
        ``APPEND_BLOCK_BYTES_MAX``, before an endless iterable is read further; also for
        one payload over ``MAX_EVENT_SIZE_BYTES``. Returns ``(b"", 0)`` for no events.
        """
        headers = self.headers
        parts: list[bytes] = []
        total = 0
        for event in events:
            if bytes_passthrough and type(event) is bytes:
                payload: bytes = event
            else:
                payload = serialize(event)
                if type(payload) is not bytes:
                    payload = serialized_bytes(payload)
            size = len(payload)
            parts.append(headers[size])
            parts.append(payload)
            total += size + EVENT_HEADER_BYTES
            if total > APPEND_BLOCK_BYTES_MAX:
                raise EventTooLargeError(
                    f"write_events batch is over {APPEND_BLOCK_BYTES_MAX} bytes framed "
                    f"after {len(parts) // 2} events: one atomic batch must fit in one "
                    "append block"
                )
        return b"".join(parts), len(parts) // 2

    def append_batch(
        self, blocks: SegmentBlocks, data: bytes, count: int, routing_key: str | None
    ) -> Block:
        """Add a framed batch of ``count`` events (from :meth:`frame_batch`) for
        ``routing_key`` to one block.

        The batch goes whole into the segment's open block, or into a new one if it does
        not fit; the events are numbered after the segment's last. Returns that block.
        """
        block = self._block_with_room(blocks, len(data))
        if block.batches is None:
            block.batches = []
        block.batches.append((block.count, count))
        block.keys.extend([routing_key] * count)
        block.parts.append(data)
        block.size += len(data)
        blocks.next_event_number += count
        block.last = blocks.next_event_number - 1
        if block.size >= self._block_bytes_target:
            blocks.queued.append(block)
            blocks.open = None
        self._wake()
        return block

    def reroute(self, block: Block, target: Callable[[str | None], SegmentBlocks]) -> None:
        """Move ``block``'s events, in order, to the segments ``target(routing_key)`` names.

        Each event (a ``write_events`` batch whole) is appended as a new event of its
        target segment, numbered there; the blocks that take them become ``block``'s
        children (see the module docstring), so its future completes once they all have.
        ``block`` keeps no data afterwards. Run under the writer's lock, after ``block``
        left its own segment's queues.
        """
        children: list[Block] = []
        seen: set[int] = set()
        for key, data, count in block.units():
            if count:
                child = self.append_batch(target(key), data, count, key)
            elif block.large is not None:
                child = self.append_large(target(key), data, key)
            else:
                child = self.append(target(key), self.headers[len(data)], data, key)
            if id(child) not in seen:
                seen.add(id(child))
                children.append(child)
        invariant(bool(children), "a block has at least one event")
        block.waiting = len(children)
        for child in children:
            if child.parents is None:
                child.parents = []
            child.parents.append(block)
        block.data = None
        block.large = None
        block.parts = []
        block.keys = []
        block.batches = None

    def _block_with_room(self, blocks: SegmentBlocks, size_bytes: int) -> Block:
        """The open block if it can take ``size_bytes`` more, else a new one.

        The one rule that keeps every block within ``APPEND_BLOCK_BYTES_MAX``, the
        largest block a container accepts (:meth:`append` has it inlined).
        """
        block = blocks.open
        if block is None or block.size + size_bytes > APPEND_BLOCK_BYTES_MAX:
            block = self._next_block(blocks)
        return block

    def _next_block(self, blocks: SegmentBlocks) -> Block:
        """Queue the open block (if any) as it is and open a new one; wake the pump if
        either can be sent now."""
        if blocks.open is not None:
            # The next events would take the block past what the store accepts: send it.
            blocks.queued.append(blocks.open)
            self._wake()
        block = blocks.open = Block(blocks.next_event_number, self._monotonic())
        if not blocks.inflight:
            self._wake()
        return block
