"""B+tree attribute index: Pravega's attribute index behind the AttributeIndex Protocol.

Each segment's attributes live in an append-only :class:`~pravega_ray.btree.BTree`
(see ``docs/btree.md``) whose backing store is the segment's *attribute segment*.

Layout
------

The attribute segment of ``<segment>`` is a sequence of Tier-2 chunks::

    attributes-btree/<segment>/<start offset, 20 digits>

``<segment>`` is the name the container passes: the segment's storage name
(``<segment>#incarnation.<i>`` since data format 5, ``SegmentMetadata.storage_name``).
Every ``append`` the tree makes becomes one new chunk created at the attribute
segment's current length, and the tree appends exactly once per update batch (all
new pages followed by the footer), so one chunk is one batch and always ends with
that batch's footer. ``length()`` is the end of the last chunk. ``read(offset,
length)`` finds the covering chunk(s) by bisecting a sorted list of chunk start
offsets (loaded once per open tree with ``list``) and does ranged reads, spanning
chunks if it has to (a page never does: it is written by one append). Chunks are
contiguous: chunk ``i`` ends where chunk ``i + 1`` starts. A read that comes back
short inside the attribute segment raises :class:`DataCorruptionError`; bytes below
the first remaining chunk (truncated away) read as zeros, which no page or footer
parses as, so a page there also ends in :class:`DataCorruptionError`.

Head truncation
---------------

The tree reports :attr:`BTree.lowest_live_offset`: no live page lies below it.
After every update (and when a tree is opened) every chunk lying wholly below it is
deleted, lowest first, so a crash in the middle leaves a contiguous suffix. With
progressive compaction the lowest live offset keeps moving, so the bytes kept in
Tier-2 (:meth:`BTreeAttributeIndex.stored_bytes`) track the live tree instead of
everything ever appended. Truncation is per chunk (= per batch): the chunk holding
the lowest live page is kept whole.

Crash consistency
-----------------

``ChunkStorage.create`` is atomic, so a batch's chunk is either absent or complete
with its footer; ``update`` is durable when it returns. A crash before the create
loses the batch (the caller has no acknowledgement and retries it); a crash after it
but before ``update`` returns leaves a complete batch that the next ``open`` takes
as the latest state (re-applying the retried batch is harmless: latest value wins).
If a backend ever left a partial chunk, ``BTree.open`` reads the last 48 bytes, sees
no valid footer there and scans back to the last valid footer, so the partial batch
is invisible; its bytes are never referenced, the next batch is appended after them
and head truncation deletes them once the lowest live offset passes them.

A create that raises but did store its object (a timeout, say) leaves a chunk at
the offset this instance still believes is the end. The tree in memory is unchanged
when its append raises, so the next batch is appended at the same offset, meets
:class:`AlreadyExistsError`, and replaces the leftover (delete, create). The
leftover is referenced by nothing this instance will write: its batch is the one the
caller saw fail. A crash between that delete and create leaves the previous state.

Caching
-------

At most ``cached_trees_max`` open trees are kept (LRU over segments). They share
one :class:`~pravega_ray.btree.PageCache` (``cache_pages_max`` decoded index pages
and as many leaves, kept apart so leaf traffic never evicts the upper levels), so
upper levels stay warm and a warm lookup costs at most one Tier-2 read (the leaf).
Opening a tree costs one ``list`` and one read of its footer.

Contracts (the :class:`~pravega_ray.segmentstore.attribute_index.AttributeIndex`
Protocol): ``update`` is durable when it returns and a value equal to
:data:`~pravega_ray.contracts.attributes.NULL_VALUE` removes its key; ``get``
returns the latest durable value of each present key (absent keys are left out);
``iterate`` pages through the keys in order (one tree snapshot per call);
``delete`` removes every chunk of the segment (idempotent). Keys must be 16 bytes
and values signed 64-bit ints, else :class:`InvalidArgumentError` and nothing
changes. One writer per segment across processes (the container that owns it);
within a process the methods are serialized by a lock.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator

from pravega_ray.btree import KEY_BYTES, PAGE_BYTES_MAX, BTree, PageCache
from pravega_ray.btree.page_cache import LEAF_PAGES_MAX
from pravega_ray.contracts.attributes import NULL_VALUE
from pravega_ray.errors import AlreadyExistsError, DataCorruptionError, InvalidArgumentError
from pravega_ray.storage.chunk_storage import ChunkStorage

__all__ = ["CHUNK_PREFIX", "COMPACTION_RATIO", "BTreeAttributeIndex"]

CHUNK_PREFIX = "attributes-btree/"
"""*format* Every attribute-segment chunk is ``attributes-btree/<segment>/<start:020d>``."""

_OFFSET_DIGITS = 20

COMPACTION_RATIO = 1.0
"""Default compaction per batch: move lowest live pages until the bytes moved reach this
fraction of the bytes the batch itself rewrites (0: one page per batch, Pravega's rule).
At 1.0 the six 1M-attribute cells Pravega measured keep 1.0-2.8x the live tree (0: 2.0-4.7x) for
1.3-2x the Tier-2 bytes written; see ``docs/attribute-index-benchmark.md``."""
_KEY_LAST = b"\xff" * KEY_BYTES


class _AttributeSegment:
    """One segment's attribute segment (a run of contiguous chunks) and its open tree."""

    def __init__(self, owner: BTreeAttributeIndex, segment: str, expected_root: int | None) -> None:
        """Open the tree; DataCorruptionError if its newest state is older than
        ``expected_root`` (checked before anything is truncated)."""
        self._owner = owner
        self._storage = owner._storage
        self.prefix = f"{CHUNK_PREFIX}{segment}/"
        self.starts: list[int] = []
        self.end = 0
        self._load_chunks()
        self.tree = BTree.open(
            self._read,
            self._append,
            self._length,
            page_bytes_max=owner.page_bytes_max,
            compaction=owner.compaction,
            page_cache=owner.page_cache,
            compaction_ratio=owner.compaction_ratio,
        )
        found = self.tree.footer_offset
        if expected_root is not None and (found is None or found < expected_root):
            raise DataCorruptionError(
                f"attribute index of {segment}: its newest state in Tier-2 "
                f"({'none' if found is None else f'root at {found}'}) is older than the one "
                f"recorded as durable (root at {expected_root}); chunks under "
                f"{self.prefix!r} are missing or cut short",
                segment=segment,
                chunk=self.prefix,
            )
        self.truncate()

    def name(self, start: int) -> str:
        return f"{self.prefix}{start:0{_OFFSET_DIGITS}d}"

    def _load_chunks(self) -> None:
        """Find this segment's chunks; only ``<prefix><20 digits>`` names are ours."""
        starts = []
        for name in self._storage.list(self.prefix):
            rest = name[len(self.prefix) :]
            if len(rest) == _OFFSET_DIGITS and rest.isdigit():
                starts.append(int(rest))
        self.starts = sorted(starts)
        if self.starts:
            last = self.starts[-1]
            self.end = last + self._storage.length(self.name(last))

    def chunk_end(self, i: int) -> int:
        return self.starts[i + 1] if i + 1 < len(self.starts) else self.end

    # --- the tree's three functions ---------------------------------------------------------

    def _length(self) -> int:
        return self.end

    def _read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0:
            raise InvalidArgumentError("offset and length must be non-negative")
        stop = min(offset + length, self.end)
        first = self.starts[0] if self.starts else self.end
        out = bytearray(max(0, min(stop, first) - offset))  # truncated bytes read as zeros
        position = max(offset, first)
        i = bisect.bisect_right(self.starts, position) - 1
        while position < stop:
            start, chunk_end = self.starts[i], self.chunk_end(i)
            want = min(stop, chunk_end) - position
            data = self._storage.read(self.name(start), position - start, want)
            self._owner.reads += 1
            if len(data) != want:
                raise DataCorruptionError(
                    f"attribute chunk {self.name(start)!r}: read {len(data)} bytes at "
                    f"{position - start}, expected {want} (chunks not contiguous)",
                    offset=position,
                )
            out += data
            position += want
            i += 1
        return bytes(out)

    def _append(self, data: bytes) -> int:
        offset = self.end
        name = self.name(offset)
        try:
            self._storage.create(name, data)
        except AlreadyExistsError:
            # A create that raised but stored its object: unreferenced, replace it.
            self._storage.delete(name)
            self._storage.create(name, data)
        self.starts.append(offset)
        self.end = offset + len(data)
        return offset

    # --- truncation -------------------------------------------------------------------------

    def truncate(self) -> None:
        """Delete, lowest first, every chunk lying wholly below the lowest live offset."""
        lowest = self.tree.lowest_live_offset
        while len(self.starts) > 1 and self.starts[1] <= lowest:
            self._storage.delete(self.name(self.starts[0]))
            del self.starts[0]

    def stored_bytes(self) -> int:
        return self.end - self.starts[0] if self.starts else 0


@contextlib.contextmanager
def _naming(segment: str) -> Iterator[None]:
    """Make every DataCorruptionError from a segment's tree name the segment and its chunks."""
    try:
        yield
    except DataCorruptionError as e:
        if segment in str(e):
            raise
        prefix = f"{CHUNK_PREFIX}{segment}/"
        details = {"chunk": prefix, **vars(e), "segment": segment}
        raise DataCorruptionError(
            f"attribute index of {segment} (chunks under {prefix}): {e}", **details
        ) from e


class BTreeAttributeIndex:
    """The attribute index as one append-only B+tree per segment, stored as Tier-2 chunks.

    ``page_bytes_max``, ``compaction`` and ``compaction_ratio`` are passed to every
    :class:`BTree` (``COMPACTION_RATIO`` by default, see ``docs/attribute-index.md``); all
    trees share one :class:`PageCache` of ``cache_pages_max`` decoded index pages and
    as many leaves (about 100 KB each), which bounds the memory however many segments
    there are; ``cached_trees_max`` bounds the open trees (LRU). ``reads`` counts
    Tier-2 chunk reads (``ChunkStorage.read`` calls), for tests and benchmarks.
    """

    def __init__(
        self,
        storage: ChunkStorage,
        *,
        page_bytes_max: int = PAGE_BYTES_MAX,
        compaction: bool = True,
        cached_trees_max: int = 256,
        cache_pages_max: int = LEAF_PAGES_MAX,
        compaction_ratio: float = COMPACTION_RATIO,
    ) -> None:
        """Raises InvalidArgumentError if ``cached_trees_max < 1`` or ``cache_pages_max < 0``
        (page bounds: see BTree)."""
        if cached_trees_max < 1:
            raise InvalidArgumentError("cached_trees_max must be >= 1")
        self.page_cache = PageCache(cache_pages_max, cache_pages_max)
        self._storage = storage
        self.page_bytes_max = page_bytes_max
        self.compaction = compaction
        self.cached_trees_max = cached_trees_max
        self.cache_pages_max = cache_pages_max
        self.compaction_ratio = compaction_ratio
        self._trees: OrderedDict[str, _AttributeSegment] = OrderedDict()
        self._expected_roots: dict[str, int] = {}
        self._lock = threading.RLock()
        self.reads = 0
        # Fail fast on bad tree options instead of on the first segment.
        BTree.open(
            lambda o, n: b"",
            lambda d: 0,
            lambda: 0,
            page_bytes_max=page_bytes_max,
            cache_pages_max=cache_pages_max,
            compaction_ratio=compaction_ratio,
        )

    def _open(self, segment: str) -> _AttributeSegment:
        found = self._trees.get(segment)
        if found is not None:
            self._trees.move_to_end(segment)
            return found
        opened = _AttributeSegment(self, segment, self._expected_roots.get(segment))
        self._trees[segment] = opened
        while len(self._trees) > self.cached_trees_max:
            _, closed = self._trees.popitem(last=False)
            closed.tree.clear_cache()
        return opened

    def get(self, segment: str, keys: Iterable[bytes]) -> dict[bytes, int]:
        """The latest durable value of each of ``keys`` that is present (others left out)."""
        with self._lock, _naming(segment):
            return self._open(segment).tree.get_many(keys)

    def update(self, segment: str, values: dict[bytes, int]) -> int | None:
        """Apply ``values`` (``NULL_VALUE`` removes) in one batch; durable when it returns.

        Returns the offset of the tree's new footer (its root, see ``expect_root``), or
        None if ``values`` is empty. Then deletes the chunks wholly below the tree's
        lowest live offset. If the Tier-2 create raises, nothing changed in memory and
        the caller retries; if a truncation delete raises, the update is already durable
        (a retry is harmless).
        """
        with self._lock, _naming(segment):
            if not values:
                return None
            batch = {k: (None if v == NULL_VALUE else v) for k, v in values.items()}
            attribute_segment = self._open(segment)
            attribute_segment.tree.update(batch)
            root = attribute_segment.tree.footer_offset
            if root is not None:  # a first update that only removes writes no tree
                self._expected_roots[segment] = max(root, self._expected_roots.get(segment, 0))
            attribute_segment.truncate()
            return root

    def expect_root(self, segment: str, root: int) -> None:
        """Opening ``segment``'s tree on a state older than ``root`` is DataCorruptionError.

        The container calls it after recovery with the root its log recorded last. A
        tree already open was opened before the expectation and is checked now.
        """
        with self._lock:
            self._expected_roots[segment] = max(root, self._expected_roots.get(segment, 0))
            if segment in self._trees:
                self._trees.pop(segment).tree.clear_cache()  # reopened, and checked, on use

    def iterate(self, segment: str, after: bytes | None, limit: int) -> list[tuple[bytes, int]]:
        """Up to ``limit`` ``(key, value)`` pairs with ``after < key``, in key order.

        ``after=None`` starts at the first key. InvalidArgumentError for a bad
        ``after`` or a ``limit`` below 1.
        """
        if limit < 1:
            raise InvalidArgumentError("limit must be >= 1")
        start = None
        if after is not None:
            if not isinstance(after, bytes) or len(after) != KEY_BYTES:
                raise InvalidArgumentError(f"after must be {KEY_BYTES} bytes")
            if after == _KEY_LAST:
                return []
            start = (int.from_bytes(after, "big") + 1).to_bytes(KEY_BYTES, "big")
        with self._lock, _naming(segment):
            return list(itertools.islice(self._open(segment).tree.iterate(start), limit))

    def delete(self, segment: str) -> None:
        """Delete every chunk of the segment's attribute segment (idempotent)."""
        with self._lock:
            closed = self._trees.pop(segment, None)
            self._expected_roots.pop(segment, None)
            if closed is not None:
                closed.tree.clear_cache()
            prefix = f"{CHUNK_PREFIX}{segment}/"
            for name in self._storage.list(prefix):
                rest = name[len(prefix) :]
                if len(rest) == _OFFSET_DIGITS and rest.isdigit():
                    self._storage.delete(name)

    def stored_bytes(self, segment: str) -> int:
        """Bytes of the segment's remaining attribute chunks in Tier-2 (opens the tree)."""
        with self._lock:
            return self._open(segment).stored_bytes()

    def live_bytes(self, segment: str) -> int:
        """Bytes of the segment's live B+tree pages (no IO once the tree is open)."""
        with self._lock:
            return self._open(segment).tree.live_bytes()

    def verify(self, segment: str) -> None:
        """Walk and check the segment's whole tree (``BTree.verify``); for tests."""
        with self._lock:
            self._open(segment).tree.verify()

    def clear_cache(self) -> None:
        """Forget every open tree and its pages (the next calls go to Tier-2)."""
        with self._lock:
            self._trees.clear()
            self.page_cache.clear()
