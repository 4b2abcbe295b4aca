"""ReadIndex on its own: unflushed entries, Tier-2 reads through the cache, tail waits, ranges."""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Coroutine
from typing import Any

import pytest

from pravega_ray.errors import DataCorruptionError, InvalidArgumentError, SegmentTruncatedError
from pravega_ray.invariant import InvariantViolation
from pravega_ray.segmentstore.chunk_layout import ChunkRef, chunk_name
from pravega_ray.segmentstore.container_metadata import SegmentMetadata, wake_all
from pravega_ray.segmentstore.read_index import READ_AHEAD_CHUNKS, ReadIndex
from pravega_ray.storage.chunk_storage import ChunkStorageCapabilities
from pravega_ray.storage.memory import InMemoryChunkStorage
from pravega_ray.timing import AsyncioScheduler

pytestmark = pytest.mark.timeout(30)

SEGMENT = "sc/st/0.#epoch.0"


class CountingStorage:
    """In-memory Tier-2 that remembers which chunks were read."""

    def __init__(self, read_delay_s: float = 0.0) -> None:
        self.inner = InMemoryChunkStorage()
        self.reads: list[str] = []
        self.read_delay_s = read_delay_s  # a slow Tier-2 (S3's latency), in the worker thread

    @property
    def capabilities(self) -> ChunkStorageCapabilities:
        return self.inner.capabilities

    def read(self, name: str, offset: int, length: int) -> bytes:
        self.reads.append(name)
        time.sleep(self.read_delay_s)
        return self.inner.read(name, offset, length)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Segment:
    """One segment's metadata and a read index, updated as the durable log would."""

    def __init__(
        self, cache_bytes_max: int = 1 << 20, read_ahead: bool = False, read_delay_s: float = 0.0
    ) -> None:
        self.storage = CountingStorage(read_delay_s)
        self.index = ReadIndex(
            cache_bytes_max,
            self.storage,  # type: ignore[arg-type]
            AsyncioScheduler(),
            read_ahead=read_ahead,
        )
        self.state = SegmentMetadata(SEGMENT, 0)
        self.index.add_segment(SEGMENT)

    def append(self, *entries: bytes) -> None:
        for data in entries:
            self.index.append(SEGMENT, self.state.length, data)
            self.state.length += len(data)

    def flush(self, bytes_max: int = 1 << 30, cache: bool = True) -> ChunkRef:
        """Move the leading unflushed entries (up to ``bytes_max``) into one Tier-2 chunk."""
        offset, entries = self.index.unflushed(SEGMENT, bytes_max)
        data = b"".join(entries)
        chunk = ChunkRef(offset, len(data), chunk_name(SEGMENT, offset), zlib.crc32(data))
        self.storage.create(chunk.name, data)
        self.state.chunks.add(chunk, SEGMENT)
        self.index.chunk_flushed(SEGMENT, chunk, data if cache else None)
        self.state.storage_length = chunk.end
        return chunk

    async def read(self, offset: int, max_bytes: int = 1 << 20, wait_s: float = 0.0) -> bytes:
        return (await self.index.read(self.state, offset, max_bytes, wait_s)).data


def run(body: Coroutine[Any, Any, None]) -> None:
    asyncio.run(body)


# --- unflushed entries ----------------------------------------------------------------------------
def test_read_of_unflushed_entries_crosses_entry_boundaries() -> None:
    async def body() -> None:
        s = Segment()
        s.append(b"abc", b"def", b"ghi")
        assert await s.read(1, 7) == b"bcdefgh"
        assert await s.read(0) == b"abcdefghi"
        assert await s.read(3, 3) == b"def"
        assert await s.read(8) == b"i"
        assert await s.index.read_range(s.state, 2, 5) == b"cdefg"
        assert s.storage.reads == []

    run(body())


def test_unflushed_takes_leading_entries_up_to_bytes_max_but_at_least_one() -> None:
    s = Segment()
    assert s.index.unflushed(SEGMENT, 10) == (0, [])
    assert s.index.first_unflushed_offset(SEGMENT) is None
    s.append(b"abcd", b"ef", b"ghijkl")
    assert s.index.unflushed(SEGMENT, 6) == (0, [b"abcd", b"ef"])
    assert s.index.unflushed(SEGMENT, 5) == (0, [b"abcd"])
    assert s.index.unflushed(SEGMENT, 1) == (0, [b"abcd"])  # an entry is never split
    assert s.index.first_unflushed_offset(SEGMENT) == 0


def test_append_with_a_gap_trips_the_invariant() -> None:
    s = Segment()
    s.append(b"abc")
    with pytest.raises(InvariantViolation, match="gap"):
        s.index.append(SEGMENT, 4, b"x")


# --- chunk_flushed and Tier-2 reads ---------------------------------------------------------------
def test_chunk_flushed_drops_covered_entries_and_caches_the_data() -> None:
    async def body() -> None:
        s = Segment()
        s.append(b"abc", b"def", b"ghi")
        chunk = s.flush(bytes_max=6)
        assert (chunk.offset, chunk.length) == (0, 6)
        assert s.index.unflushed(SEGMENT, 100) == (6, [b"ghi"])
        assert s.index.cache_bytes == 6
        s.storage.delete(chunk.name)  # served from the cache, not from Tier-2
        assert await s.read(1) == b"bcdef"  # stops at the chunk's end
        assert await s.read(6) == b"ghi"
        assert await s.index.read_range(s.state, 4, 4) == b"efgh"  # across chunk and memory
        assert s.storage.reads == []

    run(body())


def test_chunk_flushed_that_splits_an_entry_trips_the_invariant() -> None:
    s = Segment()
    s.append(b"abc", b"def")
    with pytest.raises(InvariantViolation, match="splits an entry"):
        s.index.chunk_flushed(SEGMENT, ChunkRef(0, 4, chunk_name(SEGMENT, 0)), None)


def test_read_from_tier2_goes_through_the_cache() -> None:
    async def body() -> None:
        s = Segment()
        s.append(b"abc", b"def")
        chunk = s.flush(cache=False)
        assert s.index.cache_bytes == 0
        assert await s.read(2) == b"cdef"
        assert await s.read(0, 2) == b"ab"
        assert await s.index.read_range(s.state, 1, 4) == b"bcde"
        assert s.storage.reads == [chunk.name]  # one whole-chunk read, then the cache
        assert s.index.cache_bytes == 6

    run(body())


# --- read-ahead -----------------------------------------------------------------------------------
def flushed_chunks(s: Segment, *contents: bytes) -> list[str]:
    """One uncached Tier-2 chunk per content, in order; their names."""
    names = []
    for data in contents:
        s.append(data)
        names.append(s.flush(cache=False).name)
    return names


async def settle(s: Segment, timeout_s: float = 5.0) -> None:
    """Wait until no chunk load is under way."""
    deadline = time.monotonic() + timeout_s
    while s.index._loading and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert not s.index._loading


def test_read_of_a_tier2_chunk_loads_the_next_chunks_ahead() -> None:
    async def body() -> None:
        s = Segment(read_ahead=True)
        names = flushed_chunks(s, b"aaaa", b"bbbb", b"cccc", b"dddd")
        s.append(b"tail")  # unflushed: read-ahead stops at the last chunk
        assert await s.read(0) == b"aaaa"
        await settle(s)
        assert s.storage.reads == names[: 1 + READ_AHEAD_CHUNKS]
        assert await s.read(4) == b"bbbb"  # from the cache; the next one is loaded ahead
        await settle(s)
        assert s.storage.reads == names  # each chunk read once
        assert await s.read(8, 100) == b"cccc" and await s.read(12, 100) == b"dddd"
        assert await s.read(16) == b"tail"
        await settle(s)
        assert s.storage.reads == names

    run(body())


def test_read_ahead_stops_at_a_quarter_of_the_cache_loading() -> None:
    async def body() -> None:
        s = Segment(cache_bytes_max=40, read_ahead=True, read_delay_s=0.1)
        names = flushed_chunks(s, b"a" * 8, b"b" * 8, b"c" * 8)
        assert await s.read(0) == b"a" * 8
        assert list(s.index._loading) == [names[1]]  # 8 bytes loading: 16 would pass 40 // 4
        await settle(s)
        assert s.storage.reads == names[:2]

    run(body())


def test_read_of_a_chunk_being_loaded_waits_for_that_load() -> None:
    async def body() -> None:
        s = Segment(read_ahead=True, read_delay_s=0.2)
        names = flushed_chunks(s, b"aaaa", b"bbbb")
        assert await s.read(0) == b"aaaa"
        assert s.index._loading  # the second chunk is being loaded ahead
        assert await s.read(4) == b"bbbb"  # waits for that load: no second read
        assert s.storage.reads == names
        # Two reads of an uncached chunk at once share one load, read-ahead or not.
        s2 = Segment(read_delay_s=0.1)
        (name,) = flushed_chunks(s2, b"abcd")
        assert await asyncio.gather(s2.read(0), s2.read(2)) == [b"abcd", b"cd"]
        assert s2.storage.reads == [name]

    run(body())


def test_read_ahead_of_a_damaged_chunk_is_dropped_and_its_read_raises() -> None:
    async def body() -> None:
        s = Segment(read_ahead=True)
        _, damaged = flushed_chunks(s, b"aaaa", b"bbbb")
        s.storage.delete(damaged)
        s.storage.create(damaged, b"bbbX")
        assert await s.read(0) == b"aaaa"  # its read-ahead fails, unseen
        await settle(s)
        assert s.index.cache_bytes == 4  # damaged bytes are never cached
        with pytest.raises(DataCorruptionError, match="fails its checksum"):
            await s.read(4)
        assert s.storage.reads == [s.storage.reads[0], damaged, damaged]  # loaded again

    run(body())


def test_chunk_evicted_while_being_loaded_is_not_cached() -> None:
    async def body() -> None:
        s = Segment(read_ahead=True, read_delay_s=0.2)
        _, second = flushed_chunks(s, b"aaaa", b"bbbb")
        assert await s.read(0) == b"aaaa"
        s.index.evict([second])  # truncated or deleted while read-ahead loads it
        await settle(s)
        assert s.index.cache_bytes == 4
        assert await s.read(4) == b"bbbb"  # still in Tier-2 here: loaded again on demand
        assert s.storage.reads.count(second) == 2

    run(body())


def test_a_cancelled_read_does_not_cancel_the_shared_load() -> None:
    async def body() -> None:
        s = Segment(read_delay_s=0.2)
        (name,) = flushed_chunks(s, b"abcd")
        first = asyncio.ensure_future(s.read(0))
        await asyncio.sleep(0.05)
        first.cancel()  # its caller went away mid-load
        assert await s.read(1) == b"bcd"
        assert s.storage.reads == [name]

    run(body())


def test_read_from_a_damaged_chunk_raises_data_corruption_naming_it() -> None:
    async def body() -> None:
        s = Segment()
        s.append(b"abcdef")
        chunk = s.flush(cache=False)
        s.storage.delete(chunk.name)
        s.storage.create(chunk.name, b"abcdeX")
        with pytest.raises(DataCorruptionError, match="fails its checksum") as raised:
            await s.read(0)
        assert raised.value.chunk == chunk.name  # type: ignore[attr-defined]
        assert s.index.cache_bytes == 0  # damaged bytes are never cached

    run(body())


def test_a_chunk_deleted_by_a_truncation_while_it_loads_is_truncated_not_damaged() -> None:
    # Found by the chaos run: a subscriber's retention cut was checked by a read whose chunk
    # retention deleted meanwhile, and the read reported the chunk as damaged.
    async def body() -> None:
        s = Segment(read_delay_s=0.2)
        first, _ = flushed_chunks(s, b"aaaa", b"bbbb")
        reading = asyncio.ensure_future(s.read(1))
        await asyncio.sleep(0.05)  # the load is under way
        s.state.start_offset = 4  # truncated past the first chunk, which goes
        s.storage.delete(first)
        with pytest.raises(SegmentTruncatedError, match="truncated at 4"):
            await reading
        # A chunk missing below the truncation point only is still damage.
        s.storage.delete(s.state.chunks.chunk_at(4).name)  # type: ignore[union-attr]
        with pytest.raises(DataCorruptionError, match="is missing"):
            await s.read(5)

    run(body())


def test_a_range_read_across_chunks_that_retention_truncates_meanwhile_is_truncated() -> None:
    # Found by the chaos run: the retained stream's subscriber met InvariantViolation("no bytes
    # readable at 116928 of chaos/retained/0.#epoch.0"): a range read spanning chunks waited
    # for one to load while retention truncated past the next, whose bytes were then neither
    # in Tier-2 nor in memory.
    async def body() -> None:
        s = Segment(read_delay_s=0.2)
        flushed_chunks(s, b"aaaa", b"bbbb", b"cccc")
        reading = asyncio.ensure_future(s.index.read_range(s.state, 1, 10))
        await asyncio.sleep(0.05)  # the first chunk's load is under way
        s.state.start_offset = 8  # retention: the first two chunks go
        s.state.chunks.truncate(8)
        with pytest.raises(SegmentTruncatedError, match="truncated at 8"):
            await reading

    run(body())


def test_cache_is_bounded_and_evicts_the_least_recently_used_chunk() -> None:
    async def body() -> None:
        s = Segment(cache_bytes_max=10)
        chunks = []
        for data in (b"aaaa", b"bbbb", b"cccc"):
            s.append(data)
            chunks.append(s.flush(cache=False).name)
        await s.read(0)
        await s.read(4)
        assert s.index.cache_bytes == 8
        await s.read(1)  # a hit: the first chunk is now the most recently used
        await s.read(8)  # over the bound: the second chunk leaves
        assert s.index.cache_bytes == 8
        assert s.storage.reads == chunks
        assert await s.read(0) == b"aaaa" and await s.read(8) == b"cccc"
        assert s.storage.reads == chunks  # both still cached
        assert await s.read(4) == b"bbbb"
        assert s.storage.reads == [*chunks, chunks[1]]

    run(body())


def test_cache_keeps_a_single_chunk_larger_than_its_bound() -> None:
    async def body() -> None:
        s = Segment(cache_bytes_max=2)
        s.append(b"abcd")
        s.flush()
        assert s.index.cache_bytes == 4
        s.append(b"efgh")
        s.flush()
        assert s.index.cache_bytes == 4  # the older one left
        await s.read(4)
        await s.read(0)
        assert s.storage.reads == [chunk_name(SEGMENT, 0)]

    run(body())


def test_evict_drops_the_named_chunks_from_the_cache() -> None:
    async def body() -> None:
        s = Segment()
        s.append(b"abc")
        first = s.flush()
        s.append(b"defg")
        s.flush()
        assert s.index.cache_bytes == 7
        s.index.evict([first.name, "segments/unknown/0"])
        assert s.index.cache_bytes == 4
        assert await s.read(0) == b"abc"
        assert s.storage.reads == [first.name]

    run(body())


def test_remove_segment_forgets_its_unflushed_entries() -> None:
    s = Segment()
    s.append(b"abc")
    s.index.remove_segment(SEGMENT)
    with pytest.raises(KeyError):
        s.index.unflushed(SEGMENT, 10)


# --- tail reads -----------------------------------------------------------------------------------
def test_read_at_the_tail_returns_when_a_data_waiter_is_woken() -> None:
    async def body() -> None:
        s = Segment()
        s.append(b"abc")
        reading = asyncio.create_task(s.index.read(s.state, 3, 100, 10.0))
        await asyncio.sleep(0.01)
        assert not reading.done() and len(s.state.data_waiters) == 1
        s.append(b"def")  # what the durable log does for an append
        wake_all(s.state.data_waiters)
        result = await asyncio.wait_for(reading, 1.0)
        assert (result.offset, result.data, result.end_of_segment) == (3, b"def", False)

    run(body())


def test_read_at_the_tail_returns_empty_on_timeout() -> None:
    async def body() -> None:
        s = Segment()
        s.append(b"abc")
        started = time.monotonic()
        result = await s.index.read(s.state, 3, 100, 0.05)
        assert time.monotonic() - started >= 0.04
        assert (result.offset, result.data, result.end_of_segment, result.segment_length) == (
            3,
            b"",
            False,
            3,
        )

    run(body())


def test_read_at_the_tail_without_a_wait_returns_at_once() -> None:
    async def body() -> None:
        s = Segment()
        result = await s.index.read(s.state, 0, 100, 0.0)
        assert (result.data, result.end_of_segment) == (b"", False)
        assert s.state.data_waiters == []

    run(body())


def test_read_at_the_end_of_a_sealed_segment_is_end_of_segment_at_once() -> None:
    async def body() -> None:
        s = Segment()
        s.append(b"abc")
        s.state.sealed = True
        result = await asyncio.wait_for(s.index.read(s.state, 3, 100, 30.0), 1.0)
        assert (result.data, result.end_of_segment) == (b"", True)
        assert s.state.data_waiters == []

    run(body())


def test_read_at_the_tail_ends_when_the_segment_is_sealed_while_waiting() -> None:
    async def body() -> None:
        s = Segment()
        reading = asyncio.create_task(s.index.read(s.state, 0, 100, 10.0))
        await asyncio.sleep(0.01)
        s.state.sealed = True  # what the durable log does for a seal
        wake_all(s.state.data_waiters)
        result = await asyncio.wait_for(reading, 1.0)
        assert (result.data, result.end_of_segment) == (b"", True)

    run(body())


def test_read_reaching_the_end_of_a_sealed_segment_is_end_of_segment() -> None:
    async def body() -> None:
        s = Segment()
        s.append(b"abc", b"def")
        s.flush(bytes_max=3)
        s.state.sealed = True
        assert (await s.index.read(s.state, 0, 100, 0)).end_of_segment is False  # chunk end
        assert (await s.index.read(s.state, 3, 2, 0)).end_of_segment is False
        last = await s.index.read(s.state, 3, 100, 0)
        assert (last.data, last.end_of_segment) == (b"def", True)

    run(body())


def test_read_at_the_tail_leaves_no_waiter_behind_on_timeout() -> None:
    async def body() -> None:
        s = Segment()
        for _ in range(20):
            await s.index.read(s.state, 0, 100, 0.001)
        assert len(s.state.data_waiters) <= 1

    run(body())


# --- range checks ---------------------------------------------------------------------------------
def test_read_past_the_length_raises_invalid_argument() -> None:
    async def body() -> None:
        s = Segment()
        s.append(b"abc")
        with pytest.raises(InvalidArgumentError, match="past its length"):
            await s.read(4)

    run(body())


def test_read_range_outside_the_segment_raises_invalid_argument() -> None:
    async def body() -> None:
        s = Segment()
        s.append(b"abc")
        assert await s.index.read_range(s.state, 3, 0) == b""
        assert await s.index.read_range(s.state, 0, 3) == b"abc"
        for offset, length in [(0, 4), (2, 2), (4, 0)]:
            with pytest.raises(InvalidArgumentError, match="outside"):
                await s.index.read_range(s.state, offset, length)

    run(body())


def test_reads_below_the_start_offset_raise_segment_truncated() -> None:
    async def body() -> None:
        s = Segment()
        s.append(b"abcd", b"efgh")
        s.flush(bytes_max=4)
        s.state.start_offset = 2  # the chunk [0, 4) still holds the bytes from 2
        assert await s.read(2) == b"cd"
        assert await s.index.read_range(s.state, 2, 4) == b"cdef"
        with pytest.raises(SegmentTruncatedError) as raised:
            await s.read(1)
        assert raised.value.start_offset == 2  # type: ignore[attr-defined]
        with pytest.raises(SegmentTruncatedError):
            await s.index.read_range(s.state, 0, 3)
        with pytest.raises(SegmentTruncatedError):  # at the tail too, with a wait
            s.state.start_offset = 8
            await s.index.read(s.state, 7, 100, 5.0)

    run(body())
