"""Reads and unconditional writes of one table segment by many threads of one process, sent
in rounds: one call of each kind in flight, the callers that arrive meanwhile served together
by the next.

Why: every reader of a group keeps the group's state in one table segment. When a
checkpoint starts, all the readers of a process look at the state, store their
acknowledgements and look again within a few milliseconds; sixteen readers made about fifty
calls to one container at once, each then waiting behind the others. In rounds they make a
few.

Contracts:

* :meth:`TableRounds.get` answers what a ``table_get`` sent *after the call began* answers:
  a caller joins the round not yet sent, never one already in flight, so it sees every
  update that completed before it called (a read of its own write included).
* :meth:`TableRounds.put` stores unconditional updates (puts or removals, no version): a
  round's updates go in one atomic batch; of two updates of one key in one round the later
  caller's is stored (as if it had come second, which it may have). A caller's answer is
  the round's: the batch stored, or the batch's error (then none of it was stored, or, for
  an outcome-unknown error, perhaps all of it).
* A round is sent by the first of its callers once no round of its kind is in flight; it
  waits at most ``timeout_s`` for the answer, and every caller of the round gets
  ``concurrent.futures.TimeoutError`` if it does not come, or if the sending thread is
  interrupted (KeyboardInterrupt: it alone gets that; outcome unknown). A caller whose
  keys do not fit in the round sends its own call: a read round holds at most
  ``TABLE_GET_KEYS_MAX`` keys, a write round ``TABLE_BATCH_KEYS_MAX`` entries of at most
  ``TABLE_BATCH_BYTES_MAX`` bytes as the container counts them (``table_update_bytes``).

Nothing is cached: every answer comes from a call to the container.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pravega_ray import constants
from pravega_ray.contracts.segment_store import (
    TableEntry,
    TableUpdate,
    check_table_key,
    check_table_update,
    table_update_bytes,
)
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.errors import InvalidArgumentError

__all__ = ["TableRounds", "table_rounds"]

_INTERRUPTED = "the thread sending this round was interrupted: outcome unknown"


@dataclass
class _Round:
    keys: dict[bytes, TableUpdate | None] = field(default_factory=dict)  # insertion order kept
    size: int = 0
    sent: bool = False
    done: bool = False
    answer: dict[bytes, TableEntry | None] = field(default_factory=dict)
    error: BaseException | None = None


class _Rounds:
    """The rounds of one kind (reads, or ``writes``) of one segment."""

    def __init__(self, writes: bool) -> None:
        self._writes = writes
        self._cond = threading.Condition()
        self._next: _Round | None = None
        self._sending = False

    def join(self, keys: Sequence[bytes], updates: Sequence[TableUpdate] | None) -> _Round | None:
        """The round the caller's keys (with ``updates``: one per key) were added to, or
        None if they do not fit in the pending round (the caller sends alone)."""
        size = sum(map(table_update_bytes, updates or ()))
        with self._cond:
            round_ = self._next
            if round_ is None or not self._fits(round_, keys, size):
                if round_ is not None:  # full: this caller goes alone
                    return None
                round_ = self._next = _Round()
            for n, key in enumerate(keys):
                round_.keys.pop(key, None)  # re-inserted last: the later caller's update
                round_.keys[key] = updates[n] if updates is not None else None
            round_.size += size
            return round_

    def _fits(self, round_: _Round, keys: Sequence[bytes], size: int) -> bool:
        """Whether the round stays within the container's bounds of one call with these."""
        new = sum(1 for k in keys if k not in round_.keys)
        if not self._writes:
            return len(round_.keys) + new <= constants.TABLE_GET_KEYS_MAX
        return (
            len(round_.keys) + new <= constants.TABLE_BATCH_KEYS_MAX
            and round_.size + size <= constants.TABLE_BATCH_BYTES_MAX
        )

    def _lead_or_wait(self, round_: _Round) -> bool:
        """Block until ``round_`` is answered (False), or until the caller may send it
        (True: no round of this kind in flight; the caller must then call :meth:`_answered`)."""
        with self._cond:
            while True:
                if round_.done:
                    return False
                if not round_.sent and not self._sending:
                    round_.sent = True
                    self._sending = True
                    if self._next is round_:
                        self._next = None
                    return True
                self._cond.wait()

    def _answered(self, round_: _Round) -> None:
        with self._cond:
            round_.done = True
            self._sending = False
            self._cond.notify_all()

    def serve(self, round_: _Round, send: Callable[[_Round], None]) -> None:
        """Wait for ``round_``'s answer, or send it with ``send`` (which sets ``answer``) if
        that falls to the caller; then raise the round's error, if any. An error of the call
        is every caller's; an interrupt of the sender is its own (the others: TimeoutError)."""
        if self._lead_or_wait(round_):
            try:
                send(round_)
            except Exception as e:
                round_.error = e
            except BaseException:
                round_.error = TimeoutError(_INTERRUPTED)
                raise
            finally:
                self._answered(round_)
        if round_.error is not None:
            raise round_.error


class TableRounds:
    """Rounds of ``table_get`` and unconditional ``table_update`` calls to ``segment`` through
    ``segments`` (module docstring). Thread-safe; one per (connection, segment) in a
    process: :func:`table_rounds`."""

    def __init__(self, segments: SegmentStoreClient, segment: str) -> None:
        self._segments = segments
        self.segment = segment
        self._reads = _Rounds(writes=False)
        self._writes = _Rounds(writes=True)

    def get(self, keys: Sequence[bytes], timeout_s: float) -> list[TableEntry | None]:
        """The entries of ``keys`` (None: absent), as a ``table_get`` sent after this call
        began answers them; raises what that call raises, or TimeoutError. A key that is not
        one (InvalidArgumentError) fails this call before it joins a round, never others."""
        keys = list(keys)
        for key in keys:
            check_table_key(key)
        round_ = self._reads.join(keys, None)
        if round_ is None:
            return self._segments.table_get(self.segment, keys).result(timeout_s)

        def send(round_: _Round) -> None:
            sent = list(round_.keys)
            entries = self._segments.table_get(self.segment, sent).result(timeout_s)
            round_.answer = dict(zip(sent, entries, strict=True))

        self._reads.serve(round_, send)
        return [round_.answer[k] for k in keys]

    def put(self, updates: Sequence[TableUpdate], timeout_s: float) -> None:
        """Store ``updates`` (unconditional: InvalidArgumentError for one with a version)
        in a round's batch; raises what that batch's ``table_update`` raises, or
        TimeoutError."""
        updates = [check_table_update(u) for u in updates]  # a bad one fails this call alone
        if any(u.expected_version is not None for u in updates):
            raise InvalidArgumentError("only unconditional updates are sent in rounds")
        if len({u.key for u in updates}) != len(updates):
            raise InvalidArgumentError("a key updated twice in one call")
        round_ = self._writes.join([u.key for u in updates], updates)
        if round_ is None:
            self._segments.table_update(self.segment, updates).result(timeout_s)
            return

        def send(round_: _Round) -> None:
            batch = [u for u in round_.keys.values() if u is not None]
            self._segments.table_update(self.segment, batch).result(timeout_s)

        self._writes.serve(round_, send)


_PerSegment = weakref.WeakValueDictionary[str, "TableRounds"]
_ROUNDS: weakref.WeakKeyDictionary[SegmentStoreClient, _PerSegment] = weakref.WeakKeyDictionary()
_ROUNDS_LOCK = threading.Lock()


def table_rounds(segments: SegmentStoreClient, segment: str) -> TableRounds:
    """The process's rounds of ``segment`` through ``segments`` (one per pair while anyone
    holds it: callers through one connection share them)."""
    with _ROUNDS_LOCK:
        per_segment = _ROUNDS.get(segments)
        if per_segment is None:
            per_segment = _ROUNDS[segments] = weakref.WeakValueDictionary()
        rounds = per_segment.get(segment)
        if rounds is None:
            rounds = per_segment[segment] = TableRounds(segments, segment)
        return rounds
