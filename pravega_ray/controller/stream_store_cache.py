"""The controller's record cache (Pravega's stream store caching; docs/design.md "The
controller"): values of :class:`~pravega_ray.controller.table_metadata_store.TableMetadataStore`
records kept in memory, validated against the table segments' change logs, so a read of a
record that has not changed costs no table read.

Guarantee
---------

*A read never returns a value older than the latest write completed before the read's
operation started*, whichever process wrote it. :meth:`RecordCache.tick` numbers events; an
*operation* (:meth:`RecordCache.operation`, or a single read outside one) takes a tick when
it starts, and may serve a record from memory only once the record's partition was
*validated* by a round that started after it (a later tick): one ``table_read_changes``
call from the offset the cache has applied, which answers the entries appended since (none,
usually). Every write completed before the operation started is in the segment before that
call, so it is among those changes: the value of its key is cached (replacing the one held,
whether or not the key was cached: a record another process just wrote is usually read
next), and a key removed is cached as absent. No time-to-live is involved.

Values fetched from the table (a miss) or written by this process (a put) enter the cache
only if no newer change of the key was applied while they were in flight
(:meth:`RecordCache.begin` / :meth:`RecordCache.end`): a fetch that raced a validation
cannot leave an older value behind. A partition whose changes cannot be read (truncated, or
a damaged chunk among them) is dropped as a whole and validated afresh from its length.

Values are kept as their stored bytes and decoded on every hit, so a caller mutating a
returned dict never changes the cache, and a value that fails its checksum is dropped, never
served. Memory is bounded by ``max_bytes`` (least recently used first out).

Leases
------

A store that *watches* its partitions (``table_watch``, ``segmentstore/table_watches.py``)
skips validation while a partition's lease holds: the container acknowledges no update of
the segment before the watcher applied it here, so every write completed before now is
applied already (:meth:`RecordCache.lease`). When the lease cannot be renewed in time the
partition is validated per operation again.

A caller may also *subscribe* to a key (:meth:`RecordCache.subscribe`): it is called at the
key's next change applied, or when the partition's lease lapses. A controller instance
waits for a transaction's commit so (the commit processor's write of its completed record
is acknowledged only once this instance applied it).

Thread-safe: one lock guards the entries; validations of one partition are serialized by
the store (concurrent readers of a partition share one validation round).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field

from pravega_ray.constants import CONTROLLER_METADATA_CACHE_BYTES
from pravega_ray.contracts.segment_store import TableEntry
from pravega_ray.errors import InvalidArgumentError

__all__ = ["ABSENT", "Absent", "Cached", "RecordCache", "Ticket"]

CHANGED_KEYS_MAX = 10_000
"""Most changed keys a partition remembers for the fetches in flight; past it, those fetches'
answers are not cached (memory stays bounded when fetches never stop)."""

ENTRY_OVERHEAD_BYTES = 200
"""Bytes counted per cached entry beyond its key and value (the bookkeeping objects)."""


class Absent:
    """The cached answer "no such record"."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = Absent()


@dataclass(frozen=True, slots=True)
class Cached:
    """A cached record: its stored bytes (:data:`ABSENT` if it does not exist) and version
    (the table version; for an absent record the offset of its removal, or -1)."""

    raw: bytes | Absent
    version: int

    def size(self, key: str) -> int:
        raw = 0 if isinstance(self.raw, Absent) else len(self.raw)
        return ENTRY_OVERHEAD_BYTES + len(key) + raw


@dataclass
class _Partition:
    """What the cache knows of one table segment."""

    offset: int | None = None  # change-log offset applied; None: never validated
    epoch: int | None = None  # log epoch of the container that answered the validations
    validated: int = -1  # tick at which the last completed validation started
    leased_until: float = 0.0  # monotonic: until then the partition's watcher keeps it fresh
    generation: int = 0  # bumped when dropped wholesale, or ``changed`` overflowed
    in_flight: int = 0  # fetches and writes of its keys in flight
    changed: dict[str, int] = field(default_factory=dict)  # while in_flight: key -> version
    lock: threading.Lock = field(default_factory=threading.Lock)  # one validation at a time
    # A change read sent by a validation that did not wait for it, the tick at which it was
    # sent and the offset it reads from; used or dropped by the next validation (under
    # ``lock``).
    pending: tuple[Future[tuple[list[TableEntry], int, int]], int, int | None] | None = None


@dataclass(frozen=True, slots=True)
class Ticket:
    """A fetch or write of ``key`` in flight (see :meth:`RecordCache.begin`)."""

    partition: int
    key: str
    generation: int


class RecordCache:
    """Cached records of ``partitions`` table segments (module docstring), ``partition_of``
    naming a key's; at most ``max_bytes`` of them, counted by :meth:`Cached.size`."""

    def __init__(
        self,
        partitions: int,
        partition_of: Callable[[str], int],
        max_bytes: int = CONTROLLER_METADATA_CACHE_BYTES,
    ) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise InvalidArgumentError(f"max_bytes must be an int >= 0, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self.partitions = [_Partition() for _ in range(partitions)]
        self._partition_of = partition_of
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, Cached] = OrderedDict()
        self._bytes = 0
        self._ticks = itertools.count()
        self._local = threading.local()
        self._subscribers: dict[str, list[Callable[[], None]]] = {}
        self.hits = 0
        """Reads served from memory (a diagnostic, not locked)."""

    # --- operations ------------------------------------------------------------------------------
    def tick(self) -> int:
        """The next number of the event sequence (thread-safe, strictly increasing)."""
        return next(self._ticks)

    @contextlib.contextmanager
    def operation(self) -> Iterator[None]:
        """Reads on this thread inside the block form one *operation*: each partition is
        validated at most once, at the first read needing it after the block started, and
        the block's reads see every write completed before it started. Nested blocks join
        the outermost one."""
        if getattr(self._local, "start", None) is not None:
            yield
            return
        self._local.start = self.tick()
        try:
            yield
        finally:
            self._local.start = None

    def operation_start(self) -> int | None:
        """The tick at which this thread's operation started, None outside one."""
        start: int | None = getattr(self._local, "start", None)
        return start

    def stale(self, partitions: Iterable[int], since: int) -> list[int]:
        """Those of ``partitions`` neither validated by a round started after tick ``since``
        nor under a watcher's lease now (:meth:`lease`)."""
        now = time.monotonic()
        return [
            p
            for p in partitions
            if self.partitions[p].validated <= since and self.partitions[p].leased_until <= now
        ]

    def lease(self, partition: int, until: float) -> None:
        """Note that until ``until`` (``time.monotonic()``) the container acknowledges no
        update of the partition before its changes were applied here (the caller applied
        every change up to the segment's end first: ``segmentstore/table_watches.py``)."""
        with self._lock:
            state = self.partitions[partition]
            state.leased_until = max(state.leased_until, until)

    def lapse(self, partition: int) -> None:
        """The partition's lease is no longer known to hold: validate again (and wake the
        partition's subscribers: no change of theirs may come)."""
        with self._lock:
            self.partitions[partition].leased_until = 0.0
            woken = self._partition_subscribers(partition)
        _call_all(woken)

    # --- entries ---------------------------------------------------------------------------------
    def lookup(self, key: str) -> Cached | None:
        """The cached entry of ``key`` (None: not cached); the caller validated it first."""
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            return cached

    def drop(self, key: str) -> None:
        """Forget ``key`` (a write whose outcome is unknown, a conflict, a damaged value)."""
        with self._lock:
            self._remove(key)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def bytes(self) -> int:
        """Bytes held, counted by :meth:`Cached.size`."""
        with self._lock:
            return self._bytes

    def begin(self, partition: int, key: str) -> Ticket:
        """Note a fetch or write of ``key`` about to be sent: until :meth:`end`, changes
        applied to the partition are remembered, so its answer is cached only if no newer
        change of ``key`` was applied meanwhile."""
        with self._lock:
            state = self.partitions[partition]
            state.in_flight += 1
            return Ticket(partition, key, state.generation)

    def end(self, ticket: Ticket, answer: Cached | None) -> None:
        """Close ``ticket``; cache ``answer`` (None: nothing to cache) unless a change of
        its key newer than it was applied meanwhile, or the partition was dropped. Never
        replaces a cached entry by an older version; an absent answer (version -1, its
        age unknown) next to a cached value drops both."""
        with self._lock:
            state = self.partitions[ticket.partition]
            key = ticket.key
            held = self._entries.get(key)
            if answer is None:
                pass
            elif state.generation != ticket.generation:
                # Changes in flight were not all remembered: cache nothing, and drop what
                # may be older than the answer.
                if held is not None and (answer.version < 0 or held.version < answer.version):
                    self._remove(key)
            else:
                newer = state.changed.get(key)
                if newer is not None and newer > answer.version:
                    self._remove(key)
                elif answer.version < 0:
                    if held is None:
                        self._store(key, answer)
                    elif not isinstance(held.raw, Absent):
                        self._remove(key)
                elif held is None or held.version <= answer.version:
                    self._store(key, answer)
            state.in_flight -= 1
            if state.in_flight == 0:
                state.changed.clear()

    def holds(self, key: str) -> bool:
        """Whether ``key`` is cached (not counted as a hit, not touched)."""
        with self._lock:
            return key in self._entries

    def apply(self, partition: int, changes: list[tuple[str, TableEntry]], offset: int) -> None:
        """Apply the partition's change log up to ``offset`` (every change after the offset
        applied so far, in log order): each changed key's entry becomes the change
        (removals: absent), cached whether or not the key was (a record another process
        just wrote is read here next, usually), and its subscribers (:meth:`subscribe`) are
        called. ``raw`` is not checked here: :meth:`lookup`'s caller decodes and drops
        damage."""
        with self._lock:
            state = self.partitions[partition]
            for key, entry in changes:
                if state.in_flight:
                    state.changed[key] = max(state.changed.get(key, -1), entry.version)
                    if len(state.changed) > CHANGED_KEYS_MAX:  # in flight for ever, under load
                        state.changed.clear()
                        state.generation += 1
                cached = self._entries.get(key)
                if cached is not None and cached.version > entry.version:
                    continue
                raw: bytes | Absent = ABSENT if entry.value is None else entry.value
                self._store(key, Cached(raw, entry.version), touch=False)
            state.offset = offset
            woken = self._take_subscribers(key for key, _ in changes)
        _call_all(woken)

    # --- subscriptions ---------------------------------------------------------------------------
    def subscribe(self, key: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` once, at the next change of ``key`` applied here (by
        :meth:`apply`), or when its partition's lease lapses or the partition is dropped
        (:meth:`lapse`, :meth:`reset`: the subscriber reads the record then, and subscribes
        again or stops relying on the cache). Returns the call that cancels the
        subscription (harmless after it fired). Callbacks run on the applying thread,
        outside the lock, and must not block."""
        with self._lock:
            self._subscribers.setdefault(key, []).append(callback)

        def cancel() -> None:
            with self._lock:
                callbacks = self._subscribers.get(key)
                if callbacks is not None and callback in callbacks:
                    callbacks.remove(callback)
                    if not callbacks:
                        del self._subscribers[key]

        return cancel

    def leased(self, partition: int) -> bool:
        """Whether the partition is under a watcher's lease now (:meth:`lease`)."""
        with self._lock:
            return self.partitions[partition].leased_until > time.monotonic()

    def _take_subscribers(self, keys: Iterable[str]) -> list[Callable[[], None]]:
        """Remove and return the subscriptions of ``keys`` (the caller holds the lock)."""
        woken: list[Callable[[], None]] = []
        if self._subscribers:
            for key in keys:
                woken.extend(self._subscribers.pop(key, ()))
        return woken

    def _partition_subscribers(self, partition: int) -> list[Callable[[], None]]:
        """Remove and return every subscription of the partition's keys (under the lock)."""
        keys = [k for k in self._subscribers if self._partition_of(k) == partition]
        return self._take_subscribers(keys)

    def reset(self, partition: int, offset: int, epoch: int | None) -> None:
        """Drop every cached entry of the partition and start its change log at ``offset``
        as answered by a container of log epoch ``epoch`` (its changes could not be read,
        its container recovered, or it was never validated)."""
        with self._lock:
            state = self.partitions[partition]
            state.epoch = epoch
            state.leased_until = 0.0
            for key in [k for k in self._entries if self._partition_of(k) == partition]:
                self._remove(key)
            state.generation += 1
            state.offset = offset
            woken = self._partition_subscribers(partition)
        _call_all(woken)

    def keys(self) -> list[str]:
        """The cached keys (least recently used first)."""
        with self._lock:
            return list(self._entries)

    def validated(self, partition: int, started: int) -> None:
        """Note a completed validation of ``partition`` that started at tick ``started``."""
        with self._lock:
            state = self.partitions[partition]
            state.validated = max(state.validated, started)

    # --- under the lock --------------------------------------------------------------------------
    def _store(self, key: str, cached: Cached, *, touch: bool = True) -> None:
        old = self._entries.get(key)
        if old is not None:
            self._bytes -= old.size(key)
        size = cached.size(key)
        if size > self.max_bytes:
            self._entries.pop(key, None)
            return
        self._entries[key] = cached
        if touch:
            self._entries.move_to_end(key)
        self._bytes += size
        while self._bytes > self.max_bytes:
            evicted, entry = self._entries.popitem(last=False)
            self._bytes -= entry.size(evicted)

    def _remove(self, key: str) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.size(key)


def _call_all(callbacks: list[Callable[[], None]]) -> None:
    for callback in callbacks:
        callback()
