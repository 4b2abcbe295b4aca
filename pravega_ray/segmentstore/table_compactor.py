"""Compaction of table segments (Pravega's ``TableCompactor``): a table segment's size
follows its live entries, not its history.

Every update of a table appends entries, so without compaction a table segment (the
controller's records, a key-value table, a reader group's state, a pipeline's write log)
grows for ever and everything that reads it from its start reads all of it. The compactor
works from the head of a segment (docs/tables.md, "Compaction"):

1. A *round* reads up to ``table_compaction_round_bytes`` of whole entries from the
   segment's *compaction offset* (an attribute; its start at first).
2. In one atomic append (:meth:`SegmentContainer.append_composed`) it re-appends, at the
   tail, a *copy* of each put that is still its key's latest, points the key's hash
   attribute at the copy (``moved_to``), moves the compaction offset past what it read and
   lowers the entry count. Removals and replaced puts are dropped. A copy keeps the version
   of the put it copies, so a client's conditional update still names the right version.
3. It truncates the segment at the compaction offset.

Kills: step 2 is one log operation, all or nothing, and checks that each key still points
where the round read it, and that the compaction offset has not moved (a concurrent
round). A kill between 2 and 3 leaves the segment untruncated: the next round truncates it
first. A read that meets the truncation looks its key up again (``TableSegments``).

When: after each update (:meth:`TableCompactor.consider`), a segment that stores at least
``table_compaction_min_bytes`` and whose live keys are fewer than
``table_compaction_min_utilization`` of its stored entries is compacted by a background
task, round after round, until it no longer is; those rounds leave the newest half of the
minimum size alone (entries there are the likeliest to be replaced soon, and readers at the
tail, such as a reader watching its group's state, are not truncated under). The counts
are attributes the updates keep (``LIVE_KEYS``, ``ENTRY_COUNT``); a segment written before
they existed is counted once, while it is updated (:meth:`TableCompactor.count`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from pravega_ray.constants import ATTRIBUTE_UPDATES_MAX
from pravega_ray.contracts.attributes import NULL_VALUE
from pravega_ray.contracts.segment_store import table_entry_end
from pravega_ray.errors import ContainerNotReadyError, PravegaError, SegmentNotFoundError
from pravega_ray.segmentstore.table_segment import (
    COMPACTION_OFFSET,
    COUNTED,
    COUNTS,
    ENTRY_COUNT,
    LIVE_KEYS,
    counter_value,
    decode_entries,
    encode_copy,
    key_hash,
    location,
    moved_to,
    stored_bytes,
)
from pravega_ray.timing import Scheduler

if TYPE_CHECKING:
    from pravega_ray.segmentstore.container import SegmentContainer
    from pravega_ray.segmentstore.table_segment import TableSegments

__all__ = ["CompactionRound", "TableCompactor"]

log = logging.getLogger(__name__)

_ROUND_ENTRIES_MAX = ATTRIBUTE_UPDATES_MAX - 4  # one hash attribute each, and the counters


class CompactionRound:
    """What one round did: the bytes it read (and truncated), the entries it copied."""

    __slots__ = ("copied", "read", "truncated_to")

    def __init__(self, read: int = 0, copied: int = 0, truncated_to: int = 0) -> None:
        self.read, self.copied, self.truncated_to = read, copied, truncated_to

    def __repr__(self) -> str:
        return f"CompactionRound(read={self.read}, copied={self.copied}, to={self.truncated_to})"


class TableCompactor:
    """The compactor of one container's table segments; see the module docstring.

    Methods run on the container's event loop. :meth:`compact` and :meth:`count` are also
    what the background task calls, so tests drive compaction step by step with them.
    """

    def __init__(
        self, container: SegmentContainer, tables: TableSegments, scheduler: Scheduler
    ) -> None:
        self._container = container
        self._tables = tables
        self._scheduler = scheduler
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopped = False
        self.rounds = 0
        """Rounds that copied or dropped something, since this compactor started."""

    # --- when -----------------------------------------------------------------------------------
    def due(self, segment: str, counters: dict[bytes, int]) -> bool:
        """Whether ``segment`` is due for compaction, given its counter attributes."""
        config = self._container.config
        if counters.get(COUNTS) != COUNTED or config.table_compaction_min_utilization <= 0:
            return False
        state = self._container.metadata.get(segment)
        if state.pending_length - state.pending_start_offset < config.table_compaction_min_bytes:
            return False
        entries, live = counters.get(ENTRY_COUNT, 0), counters.get(LIVE_KEYS, 0)
        return entries > 0 and live < entries * config.table_compaction_min_utilization

    def consider(self, segment: str) -> None:
        """Start compacting ``segment`` in the background if it may be due (after an update:
        its counters are in memory then), or counting it if it has no counters."""
        if self._stopped or segment in self._tasks:
            return
        if self._container.config.table_compaction_min_utilization <= 0:
            return
        try:
            attributes = self._container.metadata.get(segment).pending_attributes
        except SegmentNotFoundError:
            return  # deleted since the update (which succeeded: it must not fail now)
        if attributes.get(COUNTS) == COUNTED and not self.due(segment, attributes):
            return
        task = self._scheduler.start(self._run(segment), f"table-compaction {segment}")
        self._tasks[segment] = task
        task.add_done_callback(lambda _: self._tasks.pop(segment, None))

    def stop(self) -> None:
        self._stopped = True
        for task in list(self._tasks.values()):
            task.cancel()
        self._tasks.clear()

    async def _counters(self, segment: str) -> dict[bytes, int]:
        return await self._container.get_attributes(segment, [COUNTS, ENTRY_COUNT, LIVE_KEYS])

    async def _run(self, segment: str) -> None:
        try:
            counters = await self._counters(segment)
            if counters.get(COUNTS) != COUNTED:
                await self.count(segment)
                counters = await self._counters(segment)
            tail = self._container.config.table_compaction_min_bytes // 2
            while not self._stopped and self.due(segment, counters):
                done = await self.compact(segment, keep_tail_bytes=tail)
                if not done.read:
                    return
                log.debug("table compaction of %s: %r", segment, done)
                counters = await self._counters(segment)
        except asyncio.CancelledError:
            raise
        except (ContainerNotReadyError, SegmentNotFoundError):
            return  # the container stopped, or the segment went
        except PravegaError as e:  # the next update tries again
            log.warning("table compaction of %s stopped: %r", segment, e)
        except Exception:  # a bug; keep the container serving
            log.exception("table compaction of %s", segment)

    # --- how ------------------------------------------------------------------------------------
    async def compact(self, segment: str, keep_tail_bytes: int = 0) -> CompactionRound:
        """One round (module docstring). Returns what it did: ``read == 0`` when there was
        nothing to read, another round moved the compaction offset meanwhile, or the
        segment is not counted (:meth:`count`). ``keep_tail_bytes``: the newest bytes are
        left alone (the background rounds keep half the minimum size: entries there are the
        likeliest to be replaced soon, and readers of the tail are not truncated under)."""
        container = self._container
        await container.durable_barrier()  # read what the counters count
        info = await container.get_info(segment)
        found = await container.get_attributes(segment, [COMPACTION_OFFSET])
        compacted = found.get(COMPACTION_OFFSET, 0)
        if compacted > info.start_offset:  # a round copied, then stopped before truncating
            await container.truncate(segment, compacted)
        start = max(compacted, info.start_offset)
        if start >= info.length - keep_tail_bytes:
            return CompactionRound()
        budget = min(
            container.config.table_compaction_round_bytes, info.length - keep_tail_bytes - start
        )
        entries, used = decode_entries(await container.read_range(segment, start, budget), start)
        if len(entries) > _ROUND_ENTRIES_MAX:
            entries = entries[:_ROUND_ENTRIES_MAX]
        if entries:
            used = table_entry_end(entries[-1]) - start
        else:  # one entry bigger than a round
            entry = await self._tables.read_entry(segment, start, with_value=True)
            entries, used = [entry], stored_bytes(entry)
        end = start + used
        puts = [e for e in entries if e.value is not None]
        hashes = {e.key: key_hash(e.key) for e in puts}
        keys = [COMPACTION_OFFSET, COUNTS, ENTRY_COUNT, *dict.fromkeys(hashes.values())]
        done = CompactionRound(used, 0, end)

        def compose(offset: int, current: Callable[[bytes], int]) -> tuple[bytes, dict[bytes, int]]:
            now = current(COMPACTION_OFFSET)
            if (now if now != NULL_VALUE else 0) != compacted or current(COUNTS) != COUNTED:
                done.read = 0  # another round went on meanwhile, or a count is under way
                return b"", {}
            data = bytearray()
            changed: dict[bytes, int] = {}
            for entry in puts:
                hashed = hashes[entry.key]
                value = current(hashed)
                if value == NULL_VALUE or location(value) != entry.offset:
                    continue  # removed or replaced since
                changed[hashed] = moved_to(offset + len(data))
                data += encode_copy(entry.key, entry.value or b"", entry.version)
                done.copied += 1
            changed[COMPACTION_OFFSET] = end
            changed[ENTRY_COUNT] = max(current(ENTRY_COUNT) - len(entries) + done.copied, 0)
            return bytes(data), changed

        await container.append_composed(segment, keys, compose)
        if not done.read:
            return done
        await container.truncate(segment, end)
        self.rounds += 1
        return done

    async def count(self, segment: str) -> bool:
        """Count a segment written before the counters existed (no ``COUNTS``), exactly,
        while it is updated: mark a cut (``COUNTS`` = its length; updates add to the
        counters from then on), count the entries and live keys below the cut by reading
        them, then add those counts and set ``COUNTS`` to ``COUNTED``, atomically. A count
        killed part-way is resumed from its cut. False if the segment was counted already."""
        container = self._container
        cut: int | None = None

        def mark(offset: int, current: Callable[[bytes], int]) -> tuple[bytes, dict[bytes, int]]:
            nonlocal cut
            counts = current(COUNTS)
            if counts == COUNTED:
                return b"", {}
            if counts != NULL_VALUE:  # a count under way (or killed): resume it
                cut = counts
                return b"", {}
            cut = offset
            return b"", {COUNTS: offset, ENTRY_COUNT: 0, LIVE_KEYS: 0}

        await container.append_composed(segment, [COUNTS], mark)
        if cut is None:
            return False
        await container.durable_barrier()
        entries, live = 0, set()
        position = (await container.get_info(segment)).start_offset
        while position < cut:
            found, position = await self._tables.read_changes(
                segment, position, container.config.table_compaction_round_bytes
            )
            for entry in found:
                if (entry.offset or 0) >= cut:
                    break
                entries += 1
                if entry.value is None:
                    live.discard(entry.key)
                else:
                    live.add(entry.key)
        finished = False

        def finish(offset: int, current: Callable[[bytes], int]) -> tuple[bytes, dict[bytes, int]]:
            nonlocal finished
            if current(COUNTS) != cut:
                return b"", {}  # another count finished it
            finished = True
            return b"", {
                COUNTS: COUNTED,
                ENTRY_COUNT: max(current(ENTRY_COUNT), 0) + entries,
                LIVE_KEYS: counter_value(current(LIVE_KEYS)) + len(live),
            }

        await container.append_composed(segment, [COUNTS, ENTRY_COUNT, LIVE_KEYS], finish)
        if finished:
            log.info(
                "table segment %s counted: %d live keys in %d entries below %d",
                segment,
                len(live),
                entries,
                cut,
            )
        return finished
