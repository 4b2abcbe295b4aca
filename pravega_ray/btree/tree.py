"""An append-only B+tree with progressive compaction, as Pravega's attribute index (docs/btree.md).

The tree lives in a backing store it reaches through three functions only:
``read(offset, length) -> bytes``, ``append(data) -> offset`` (appends at the
end, returns where the bytes start) and ``length() -> int``. Keys are exactly
16 bytes, values are signed 64-bit integers. Nothing is ever overwritten: an
update re-appends every page it changes together with all of its ancestors,
then a footer that points at the new root.

Page layout (all integers big-endian)
-------------------------------------

Every page is a 16-byte header followed by a body of fixed-size entries::

    offset  size  field
    0       4     magic            b"BTPG"
    4       1     kind             0 = leaf, 1 = index
    5       3     reserved         zero
    8       4     entry count      n (unsigned)
    12      4     checksum         crc32 of the body (bytes 16 .. 16 + body)
    16      ...   body             n entries, sorted by key, keys strictly increasing

    leaf entry, 24 bytes:
    0       16    key
    16      8     value            signed

    index entry, 36 bytes:
    0       16    first key        lower bound of the child's keys (ignored for entry 0,
                                   whose lower bound is the parent's)
    16      8     child offset     where the child page starts
    24      4     child length     the child page's length in bytes
    28      8     lowest offset    lowest page offset anywhere in the child's subtree
                                   (the child itself included)

A page is at most ``page_bytes_max`` bytes (:data:`PAGE_BYTES_MAX`, 32 KiB, by
default), so a leaf holds at most 1364 entries and an index page 909. A page's
length is always ``16 + n * entry size``; a page is only ever read with the
length its parent (or the footer) recorded, and a mismatch, a bad magic or a
bad checksum raises :class:`~pravega_ray.errors.DataCorruptionError`.

Footer (the root pointer), 48 bytes::

    offset  size  field
    0       4     magic            b"BTFT"
    4       8     footer offset    where this footer starts (guards against look-alikes)
    12      8     root offset
    20      4     root length      0 = empty tree
    24      8     lowest live      lowest page offset reachable from the root; for an
                                   empty tree the footer's own offset
    32      8     live bytes       total length of the pages reachable from the root
    40      4     reserved         zero
    44      4     checksum         crc32 of bytes 0 .. 44

Consistency
-----------

One update batch is *one* ``append`` call carrying every new page (children
before parents, so a parent always sits at a higher offset than all of its
descendants) followed by the new footer. So the store's tail is either the
previous footer (the append did not happen), the new footer (it did), or a torn
prefix of the new append (a crash in the middle). :meth:`BTree.open` reads the
tail; if the last 48 bytes are not a valid footer whose recorded offset is its
own position, it scans backwards for the last one that is, which is the
previous batch's footer: a torn batch is invisible. Garbage left by a torn batch
is simply never referenced; the next batch appends after it. A corrupted final
footer is indistinguishable from a torn one and also opens the previous state.
An empty store is an empty tree.

Structure maintenance
---------------------

A batch is applied top-down in one pass: it is split among the children whose
key ranges it touches, each touched page is decoded into a private copy, and
after the children are done each index page rebalances them: empty children are
dropped, a child over the page size is split evenly into as many pages as
needed, and a rewritten child with fewer than a quarter of its capacity is
merged with a neighbour (then split again if the merge overflows, which
redistributes). The root grows by splitting and shrinks when it is an index page
with a single child. All leaves stay at the same depth. Pages a batch does not
actually change (for example removals of absent keys) are not rewritten.

Progressive compaction
----------------------

Every index entry records the lowest page offset in its child's subtree, so the
lowest live page is found by walking down the entries whose lowest offset equals
the subtree minimum, without extra IO. With ``compaction=True`` every update
batch also re-appends, unchanged, the lowest-offset live page that the batch
does not already rewrite, together with its ancestors. (Pravega skips the step
when the batch already rewrites the lowest page; choosing the lowest page *not*
already rewritten moves a page on every batch instead and never appends a page
twice.) The lowest offsets are recomputed from the new child offsets as pages
are written, so :attr:`BTree.lowest_live_offset` moves forward and everything
below it may be truncated from the store. Pages are immutable once written, so
an :meth:`BTree.iterate` in progress keeps reading its snapshot as long as the
store is not truncated above that snapshot's lowest offset.

Not thread-safe: one caller at a time.
"""

from __future__ import annotations

import bisect
import itertools
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pravega_ray.btree.page_cache import PageCache
from pravega_ray.constants import KIB
from pravega_ray.errors import DataCorruptionError, InvalidArgumentError
from pravega_ray.invariant import invariant

__all__ = [
    "CACHE_PAGES_MAX",
    "KEY_BYTES",
    "PAGE_BYTES_MAX",
    "PAGE_BYTES_MIN",
    "BTree",
    "TreeStats",
]

PAGE_BYTES_MAX = 32 * KIB
"""*format* Largest page (32 KiB, as Pravega's). A tree may use smaller pages (tests do)."""

PAGE_BYTES_MIN = 256
"""Smallest ``page_bytes_max`` a tree accepts: an index page must hold a few entries."""

KEY_BYTES = 16
"""*format* Length of every key."""

CACHE_PAGES_MAX = 4096
"""Decoded pages kept in memory per tree by default (index pages and leaves each)."""

_VALUE_MIN, _VALUE_MAX = -(2**63), 2**63 - 1
_PAGE_MAGIC = b"BTPG"
_FOOTER_MAGIC = b"BTFT"
_KIND_LEAF, _KIND_INDEX = 0, 1
_HEADER = struct.Struct(">4sB3xII")
_LEAF_ENTRY = struct.Struct(">16sq")
_INDEX_ENTRY = struct.Struct(">16sQIQ")
_FOOTER_BODY = struct.Struct(">4sQQIQQ4x")
_FOOTER_BYTES = _FOOTER_BODY.size + 4
_SCAN_WINDOW_BYTES = 64 * KIB
_NO_KEY = bytes(KEY_BYTES)
_TREE_TOKENS = itertools.count()
_LEAF_EDITS_IN_PLACE_MAX = 64
"""A leaf batch up to this size is applied by binary search and list inserts (each O(page));
a larger one rebuilds the page from a dict and a sort (O(page log page), once)."""

ReadFunction = Callable[[int, int], bytes]
AppendFunction = Callable[[bytes], int]
LengthFunction = Callable[[], int]


@dataclass(slots=True)
class _Child:
    """An index entry; ``node`` is set while a batch rewrites the child (it is dirty)."""

    key: bytes
    offset: int
    length: int
    lowest_offset: int
    node: _Node | None = None


@dataclass
class _Node:
    """A decoded page. Pages in the cache are never mutated; batches work on copies."""

    leaf: bool
    keys: list[bytes]  # leaf keys; empty for index pages
    values: list[int]  # leaf values; empty for index pages
    children: list[_Child]  # index entries; empty for leaves
    # A leaf's encoded body (its entries, without the header) while it matches keys and
    # values, else None: a few edits splice it instead of re-encoding the whole page.
    leaf_body: bytes | None = None
    # An index page's child keys, kept only on clean (cached, never mutated) pages.
    index_keys: list[bytes] | None = None

    def count(self) -> int:
        return len(self.keys) if self.leaf else len(self.children)

    def copy(self) -> _Node:
        return _Node(
            self.leaf,
            list(self.keys),
            list(self.values),
            [_Child(c.key, c.offset, c.length, c.lowest_offset, c.node) for c in self.children],
            self.leaf_body,
        )


@dataclass(frozen=True)
class _Footer:
    footer_offset: int
    root_offset: int
    root_length: int
    lowest_live_offset: int
    live_bytes: int


@dataclass(frozen=True)
class TreeStats:
    """What :meth:`BTree.verify` found by walking every page reachable from the root."""

    pages: int
    leaves: int
    entries: int
    depth: int
    live_bytes: int
    lowest_offset: int | None
    page_bytes_largest: int


def _encode_page(node: _Node) -> bytes:
    if node.leaf:
        body = node.leaf_body
        if body is None:
            body = b"".join(map(_LEAF_ENTRY.pack, node.keys, node.values))
        invariant(len(body) == len(node.keys) * _LEAF_ENTRY.size, "stale leaf body")
        kind = _KIND_LEAF
    else:
        invariant(all(c.node is None for c in node.children), "encoding a page with dirty children")
        body = b"".join(
            _INDEX_ENTRY.pack(c.key, c.offset, c.length, c.lowest_offset) for c in node.children
        )
        kind = _KIND_INDEX
    return _HEADER.pack(_PAGE_MAGIC, kind, node.count(), zlib.crc32(body)) + body


def _decode_page(data: bytes, offset: int, length: int) -> _Node:
    if len(data) != length or length < _HEADER.size:
        raise DataCorruptionError(
            f"B+tree page at {offset}: read {len(data)} bytes, expected {length}", offset=offset
        )
    magic, kind, count, crc = _HEADER.unpack_from(data)
    body = data[_HEADER.size :]
    if magic != _PAGE_MAGIC or kind not in (_KIND_LEAF, _KIND_INDEX):
        raise DataCorruptionError(f"B+tree page at {offset}: bad magic or kind", offset=offset)
    entry = _LEAF_ENTRY if kind == _KIND_LEAF else _INDEX_ENTRY
    if len(body) != count * entry.size:
        raise DataCorruptionError(f"B+tree page at {offset}: bad entry count", offset=offset)
    if zlib.crc32(body) != crc:
        raise DataCorruptionError(f"B+tree page at {offset}: checksum mismatch", offset=offset)
    if kind == _KIND_LEAF:
        pairs = list(_LEAF_ENTRY.iter_unpack(body))
        return _Node(True, [k for k, _ in pairs], [v for _, v in pairs], [], body)
    children = [_Child(k, o, n, low) for k, o, n, low in _INDEX_ENTRY.iter_unpack(body)]
    return _Node(False, [], [], children, None, [c.key for c in children])


def _encode_footer(footer: _Footer) -> bytes:
    body = _FOOTER_BODY.pack(
        _FOOTER_MAGIC,
        footer.footer_offset,
        footer.root_offset,
        footer.root_length,
        footer.lowest_live_offset,
        footer.live_bytes,
    )
    return body + struct.pack(">I", zlib.crc32(body))


def _decode_footer(data: bytes, position: int) -> _Footer | None:
    """The footer in ``data`` (exactly one footer's bytes) at store offset ``position``, or None."""
    if len(data) != _FOOTER_BYTES:
        return None
    body = data[: _FOOTER_BODY.size]
    (crc,) = struct.unpack_from(">I", data, _FOOTER_BODY.size)
    if zlib.crc32(body) != crc:
        return None
    magic, own, root_offset, root_length, lowest, live = _FOOTER_BODY.unpack(body)
    if magic != _FOOTER_MAGIC or own != position:
        return None
    return _Footer(own, root_offset, root_length, lowest, live)


def _check_key(key: object, what: str = "key") -> bytes:
    if not isinstance(key, bytes) or len(key) != KEY_BYTES:
        raise InvalidArgumentError(f"{what} must be {KEY_BYTES} bytes, got {key!r}")
    return key


class BTree:
    """An append-only B+tree of 16-byte keys and signed 64-bit values.

    Constructing a tree opens it: the last valid footer in the store is its
    root (see the module docstring); an empty store is an empty tree. A store
    that is written by two trees at once is corrupted; use one tree per store.
    """

    def __init__(
        self,
        read: ReadFunction,
        append: AppendFunction,
        length: LengthFunction,
        *,
        page_bytes_max: int = PAGE_BYTES_MAX,
        compaction: bool = True,
        cache_pages_max: int = CACHE_PAGES_MAX,
        page_cache: PageCache | None = None,
        compaction_ratio: float = 0.0,
    ) -> None:
        """Open the tree stored behind ``read``/``append``/``length``.

        Decoded pages are kept in ``page_cache`` (shared with other trees), or in
        a cache of its own holding ``cache_pages_max`` index pages and as many
        leaves. With compaction, every batch moves the lowest live page, then
        further lowest pages while the bytes moved are below ``compaction_ratio``
        times the bytes the batch itself replaces (0: one page, Pravega's rule).
        Raises :class:`InvalidArgumentError` if ``page_bytes_max`` is outside
        ``[PAGE_BYTES_MIN, PAGE_BYTES_MAX]``, ``cache_pages_max`` or
        ``compaction_ratio`` is negative; reading the store may raise whatever
        ``read`` raises.
        """
        if not PAGE_BYTES_MIN <= page_bytes_max <= PAGE_BYTES_MAX:
            raise InvalidArgumentError(
                f"page_bytes_max must be in [{PAGE_BYTES_MIN}, {PAGE_BYTES_MAX}]"
            )
        if cache_pages_max < 0:
            raise InvalidArgumentError("cache_pages_max must be >= 0")
        if not compaction_ratio >= 0:
            raise InvalidArgumentError("compaction_ratio must be >= 0")
        self._compaction_ratio = float(compaction_ratio)
        self._read = read
        self._append = append
        self._length = length
        self._page_bytes_max = page_bytes_max
        self._compaction = compaction
        self._leaf_capacity = (page_bytes_max - _HEADER.size) // _LEAF_ENTRY.size
        self._index_capacity = (page_bytes_max - _HEADER.size) // _INDEX_ENTRY.size
        self._cache = (
            page_cache if page_cache is not None else PageCache(cache_pages_max, cache_pages_max)
        )
        self._cache_token = next(_TREE_TOKENS)  # this tree's pages in a shared cache
        self._freed_bytes = 0  # bytes of live pages the current batch replaces or drops
        self._freed_offsets: set[int] = set()  # their offsets: dropped from the cache once written
        self._footer = self._find_footer()

    @classmethod
    def open(
        cls, read: ReadFunction, append: AppendFunction, length: LengthFunction, **options: Any
    ) -> BTree:
        """Open the tree in a store: the constructor under the common spelling, same options."""
        return cls(read, append, length, **options)

    # --- Properties -----------------------------------------------------------------------

    @property
    def page_bytes_max(self) -> int:
        return self._page_bytes_max

    @property
    def compaction(self) -> bool:
        return self._compaction

    @property
    def lowest_live_offset(self) -> int:
        """Lowest store offset the live tree still needs; everything below may be truncated.

        0 for a store with no footer yet; the last footer's offset for an empty tree.
        """
        return self._footer.lowest_live_offset if self._footer is not None else 0

    @property
    def footer_offset(self) -> int | None:
        """Where the current footer starts, or None if the store holds none."""
        return self._footer.footer_offset if self._footer is not None else None

    def live_bytes(self) -> int:
        """Total length of the pages reachable from the root (kept in the footer, no IO)."""
        return self._footer.live_bytes if self._footer is not None else 0

    # --- Reads ----------------------------------------------------------------------------

    def get(self, key: bytes) -> int | None:
        """The value of ``key``, or None if absent. Raises InvalidArgumentError for a bad key."""
        _check_key(key)
        footer = self._footer
        if footer is None or footer.root_length == 0:
            return None
        node = self._page(footer.root_offset, footer.root_length)
        while not node.leaf:
            child = node.children[self._child_index(node, key)]
            node = self._page(child.offset, child.length)
        i = bisect.bisect_left(node.keys, key)
        if i < len(node.keys) and node.keys[i] == key:
            return node.values[i]
        return None

    def get_many(self, keys: Iterable[bytes]) -> dict[bytes, int]:
        """Values of those ``keys`` that are present (absent keys are left out)."""
        keys = [_check_key(k) for k in keys]
        out: dict[bytes, int] = {}
        for key in keys:
            value = self.get(key)
            if value is not None:
                out[key] = value
        return out

    def iterate(
        self, from_key: bytes | None = None, to_key: bytes | None = None
    ) -> Iterator[tuple[bytes, int]]:
        """Yield ``(key, value)`` in key order for ``from_key <= key < to_key``.

        Either bound may be None (unbounded). The iteration reads the tree as it
        was when the first item was asked for; later updates are not seen.
        """
        if from_key is not None:
            _check_key(from_key, "from_key")
        if to_key is not None:
            _check_key(to_key, "to_key")
        return self._iterate(from_key, to_key)

    def _iterate(self, low: bytes | None, high: bytes | None) -> Iterator[tuple[bytes, int]]:
        footer = self._footer
        if footer is None or footer.root_length == 0:
            return
        if low is not None and high is not None and high <= low:
            return
        yield from self._iterate_page(footer.root_offset, footer.root_length, low, high)

    def _iterate_page(
        self, offset: int, length: int, low: bytes | None, high: bytes | None
    ) -> Iterator[tuple[bytes, int]]:
        node = self._page(offset, length)
        if node.leaf:
            start = 0 if low is None else bisect.bisect_left(node.keys, low)
            end = len(node.keys) if high is None else bisect.bisect_left(node.keys, high)
            for i in range(start, end):
                yield node.keys[i], node.values[i]
            return
        keys = [c.key for c in node.children]
        start = 0 if low is None else self._child_index(node, low)
        # Entry 0's key is not a lower bound (the parent's is), so child 0 is always a candidate.
        end = len(keys) if high is None else max(start + 1, bisect.bisect_left(keys, high, 1))
        for child in node.children[start:end]:
            yield from self._iterate_page(child.offset, child.length, low, high)

    @staticmethod
    def _child_index(node: _Node, key: bytes) -> int:
        keys = node.index_keys
        if keys is None:
            keys = [c.key for c in node.children]
        return max(bisect.bisect_right(keys, key) - 1, 0)

    # --- Updates --------------------------------------------------------------------------

    def update(self, batch: Mapping[bytes, int | None]) -> None:
        """Apply ``batch`` (key -> new value, None = remove) atomically and durably.

        Everything is validated first: a bad key (not 16 bytes) or value (not an
        int in the signed 64-bit range, or a bool) raises InvalidArgumentError and
        changes nothing. When ``update`` returns, the new pages and footer are in
        one completed ``append``. If ``append`` raises, the tree in memory is
        unchanged and the store may hold a torn tail, which :meth:`open` ignores.
        An empty batch, or one that changes nothing with compaction off, appends
        nothing.
        """
        changes = self._validate(batch)
        if not changes:
            return
        self._freed_bytes = 0
        self._freed_offsets.clear()
        root, changed = self._apply_to_root(changes)
        if self._compaction and root is not None:
            own = self._freed_bytes  # what the batch itself replaces
            while True:  # the lowest page, then more while under the compaction ratio
                before = self._freed_bytes
                self._compact(root)
                moved = self._freed_bytes - own
                if self._freed_bytes == before or moved >= own * self._compaction_ratio:
                    break
        if not changed and (root is None or root.node is None):
            invariant(self._freed_bytes == 0, "nothing to write after freeing pages")
            return  # nothing changed and nothing to compact
        self._write(root)

    @staticmethod
    def _validate(batch: Mapping[bytes, int | None]) -> list[tuple[bytes, int | None]]:
        if not isinstance(batch, Mapping):
            raise InvalidArgumentError("batch must be a mapping of key -> value or None")
        for key, value in batch.items():
            _check_key(key)
            if value is None:
                continue
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or not _VALUE_MIN <= value <= _VALUE_MAX
            ):
                raise InvalidArgumentError(f"value must be a signed 64-bit int, got {value!r}")
        return sorted(batch.items())

    def _apply_to_root(self, changes: list[tuple[bytes, int | None]]) -> tuple[_Child | None, bool]:
        """Apply ``changes``; return the new root reference (None = empty) and if it changed.

        A rewritten root is dirty (``node`` set); an unchanged one is clean.
        """
        footer = self._footer
        if footer is None or footer.root_length == 0:
            inserts = [(k, v) for k, v in changes if v is not None]
            if not inserts:
                return None, False
            node = _Node(True, [k for k, _ in inserts], [v for _, v in inserts], [])
            root = _Child(_NO_KEY, 0, 0, 0, node)
        else:
            root = _Child(
                _NO_KEY, footer.root_offset, footer.root_length, footer.lowest_live_offset
            )
            if not self._apply(self._load_dirty(root), changes):
                self._revert(root)
                return root, False
        while root.node is not None:
            node = root.node
            count = node.count()
            if count == 0:
                return None, True
            if count > self._capacity(node.leaf):
                parts = self._split(node)
                children = [_Child(key, 0, 0, 0, part) for key, part in parts]
                root = _Child(_NO_KEY, 0, 0, 0, _Node(False, [], [], children))
            elif not node.leaf and count == 1:
                root = node.children[0]
            else:
                break
        return root, True

    def _apply(self, node: _Node, changes: list[tuple[bytes, int | None]]) -> bool:
        """Apply sorted ``changes`` to the dirty ``node``; return whether anything changed."""
        if node.leaf:
            if len(changes) <= _LEAF_EDITS_IN_PLACE_MAX:
                return self._apply_to_leaf_in_place(node, changes)
            values = dict(zip(node.keys, node.values, strict=True))
            changed = False
            for key, value in changes:
                if value is None:
                    if key in values:
                        del values[key]
                        changed = True
                elif values.get(key) != value:
                    values[key] = value
                    changed = True
            if changed:
                items = sorted(values.items())
                node.keys = [k for k, _ in items]
                node.values = [v for _, v in items]
                node.leaf_body = None
            return changed
        groups: dict[int, list[tuple[bytes, int | None]]] = {}
        child_keys = [c.key for c in node.children]
        for key, value in changes:
            index = max(bisect.bisect_right(child_keys, key) - 1, 0)
            groups.setdefault(index, []).append((key, value))
        changed = False
        for index, group in groups.items():
            child = node.children[index]
            if self._apply(self._load_dirty(child), group):
                changed = True
            else:
                self._revert(child)
        if changed:
            self._rebalance(node)
        return changed

    @staticmethod
    def _apply_to_leaf_in_place(node: _Node, changes: list[tuple[bytes, int | None]]) -> bool:
        """Apply a few sorted ``changes`` to the dirty leaf ``node`` by binary search.

        The leaf's encoded body, if known, is spliced along: ``pieces`` collects the old
        body's unchanged runs and the new entries; ``shift`` is inserts minus removals so
        far, so position ``i`` in the edited lists is entry ``i - shift`` of the old body.
        """
        keys, values = node.keys, node.values
        body = node.leaf_body
        size = _LEAF_ENTRY.size
        pieces: list[bytes | memoryview] = []
        view = memoryview(body) if body is not None else None
        done = 0  # old body entries already copied to pieces (or dropped)
        shift = 0
        changed = False
        low = 0  # changes are sorted, so each one lies at or after the previous position
        for key, value in changes:
            i = bisect.bisect_left(keys, key, low)
            old = i - shift
            if i < len(keys) and keys[i] == key:
                if value is None:
                    del keys[i]
                    del values[i]
                    if view is not None:
                        pieces.append(view[done * size : old * size])
                        done = old + 1
                    shift -= 1
                    changed = True
                elif values[i] != value:
                    values[i] = value
                    if view is not None:
                        pieces.append(view[done * size : old * size])
                        pieces.append(_LEAF_ENTRY.pack(key, value))
                        done = old + 1
                    changed = True
            elif value is not None:
                keys.insert(i, key)
                values.insert(i, value)
                if view is not None:
                    pieces.append(view[done * size : old * size])
                    pieces.append(_LEAF_ENTRY.pack(key, value))
                    done = old
                shift += 1
                changed = True
            low = i
        if changed and view is not None:
            pieces.append(view[done * size :])
            node.leaf_body = b"".join(pieces)
        return changed

    def _rebalance(self, node: _Node) -> None:
        """Drop empty, split over-full and merge under-full dirty children of ``node``."""
        # Empty pages go first, so a merge never meets one. Dropping entry i widens entry
        # i - 1's key range (or, for i = 0, the new first entry's, whose key is ignored).
        children = node.children
        children[:] = [c for c in children if c.node is None or c.node.count() > 0]
        i = 0
        while i < len(children):
            child = children[i]
            if child.node is None:
                i += 1
                continue
            count = child.node.count()
            capacity = self._capacity(child.node.leaf)
            invariant(count > 0, "empty child left after dropping empty children")
            if count > capacity:
                parts = self._split(child.node)
                child.node = parts[0][1]
                children[i + 1 : i + 1] = [_Child(k, 0, 0, 0, part) for k, part in parts[1:]]
                i += len(parts)
            elif count < max(1, capacity // 4) and len(children) > 1:
                left = i if i + 1 < len(children) else i - 1
                self._merge(children, left)
                i = left  # look again: the merged page may overflow
            else:
                i += 1

    def _merge(self, children: list[_Child], left: int) -> None:
        """Merge ``children[left + 1]`` into ``children[left]`` (both become dirty)."""
        left_child, right_child = children[left], children[left + 1]
        left_node = self._load_dirty(left_child)
        right_node = self._load_dirty(right_child)
        invariant(left_node.leaf == right_node.leaf, "merging pages of different levels")
        if left_node.leaf:
            left_node.keys += right_node.keys
            left_node.values += right_node.values
            left_node.leaf_body = None
        else:
            # The right page's first entry had the parent's separator as its lower bound.
            right_node.children[0].key = right_child.key
            left_node.children += right_node.children
        del children[left + 1]

    def _split(self, node: _Node) -> list[tuple[bytes, _Node]]:
        """Split an over-full ``node`` evenly into pages that fit; return (first key, page)."""
        count = node.count()
        capacity = self._capacity(node.leaf)
        parts = -(-count // capacity)
        invariant(parts >= 2, "splitting a page that fits")
        bounds = [count * p // parts for p in range(parts + 1)]
        out = []
        for start, end in itertools.pairwise(bounds):
            if node.leaf:
                part = _Node(True, node.keys[start:end], node.values[start:end], [])
                out.append((part.keys[0], part))
            else:
                part = _Node(False, [], [], node.children[start:end])
                out.append((part.children[0].key, part))
        invariant(all(p.count() <= capacity for _, p in out), "split part over capacity")
        return out

    def _capacity(self, leaf: bool) -> int:
        return self._leaf_capacity if leaf else self._index_capacity

    def _load_dirty(self, child: _Child) -> _Node:
        """Make ``child`` dirty (to be rewritten) and return its private, mutable copy."""
        if child.node is None:
            child.node = self._page(child.offset, child.length).copy()
            self._freed_bytes += child.length
            self._freed_offsets.add(child.offset)
        return child.node

    def _revert(self, child: _Child) -> None:
        """Undo :meth:`_load_dirty` for an unchanged child (and its unchanged subtree)."""
        invariant(child.node is not None, "reverting a clean child")
        child.node = None
        self._freed_bytes -= child.length
        self._freed_offsets.discard(child.offset)

    # --- Progressive compaction -----------------------------------------------------------

    def _compact(self, root: _Child) -> None:
        """Make the lowest-offset live page that is not yet dirty dirty, with its ancestors."""
        found = self._lowest_clean(root)
        if found is None:
            return
        target, lowest = found
        node = self._load_dirty(target)
        while target.offset != lowest:
            invariant(not node.leaf, "lowest offset points below a leaf")
            matches = [c for c in node.children if c.lowest_offset == lowest]
            invariant(len(matches) == 1, "lowest offset not found in exactly one child")
            target = matches[0]
            node = self._load_dirty(target)

    def _lowest_clean(self, ref: _Child) -> tuple[_Child, int] | None:
        """The clean entry under ``ref`` whose subtree holds the lowest offset, and that offset."""
        if ref.node is None:
            return ref, ref.lowest_offset
        if ref.node.leaf:
            return None
        best: tuple[_Child, int] | None = None
        for child in ref.node.children:
            found = self._lowest_clean(child)
            if found is not None and (best is None or found[1] < best[1]):
                best = found
        return best

    # --- Writing --------------------------------------------------------------------------

    def _write(self, root: _Child | None) -> None:
        """Append every dirty page (children first) and a new footer in one append."""
        base = self._length()
        buffer = bytearray()
        written: list[tuple[int, _Node]] = []

        def emit(child: _Child) -> None:
            node = child.node
            invariant(node is not None, "emitting a clean page")
            assert node is not None  # for the type checker; invariant() above stays on
            if not node.leaf:
                for grandchild in node.children:
                    if grandchild.node is not None:
                        emit(grandchild)
            data = _encode_page(node)
            invariant(len(data) <= self._page_bytes_max, "page over page_bytes_max")
            if node.leaf and node.leaf_body is None:
                node.leaf_body = data[_HEADER.size :]
            elif not node.leaf:
                node.index_keys = [c.key for c in node.children]
            offset = base + len(buffer)
            buffer.extend(data)
            lowest = offset
            if not node.leaf:
                invariant(node.children, "writing an empty index page")
                lowest = min(lowest, *(c.lowest_offset for c in node.children))
            child.offset, child.length, child.lowest_offset, child.node = (
                offset,
                len(data),
                lowest,
                None,
            )
            written.append((offset, node))

        if root is not None and root.node is not None:
            emit(root)
        live_before = self._footer.live_bytes if self._footer is not None else 0
        live = live_before - self._freed_bytes + len(buffer)
        footer_offset = base + len(buffer)
        if root is None:
            invariant(live == 0, "empty tree with live bytes")
            footer = _Footer(footer_offset, 0, 0, footer_offset, 0)
        else:
            invariant(live > 0, "non-empty tree without live bytes")
            footer = _Footer(footer_offset, root.offset, root.length, root.lowest_offset, live)
        buffer.extend(_encode_footer(footer))
        offset = self._append(bytes(buffer))
        invariant(offset == base, "append did not start at the store's length")
        self._footer = footer
        # The replaced versions are no longer live: keep the cache for pages that are (a
        # reader of an older snapshot still finds them in the store, until it is truncated).
        for page_offset in self._freed_offsets:
            self._cache.discard(self._cache_token, page_offset)
        self._freed_offsets.clear()
        for page_offset, node in written:
            self._cache_put(page_offset, node)

    # --- Pages and footers ----------------------------------------------------------------

    def _page(self, offset: int, length: int) -> _Node:
        """The decoded page at ``offset`` (shared: callers must not mutate it)."""
        cached: _Node | None = self._cache.get(self._cache_token, offset)
        if cached is not None:
            return cached
        node = _decode_page(self._read(offset, length), offset, length)
        self._cache_put(offset, node)
        return node

    def _cache_put(self, offset: int, node: _Node) -> None:
        self._cache.put(self._cache_token, offset, node, leaf=node.leaf)

    def clear_cache(self) -> None:
        """Forget every decoded page of this tree (the next reads go to the store)."""
        self._cache.clear(self._cache_token)

    def _find_footer(self) -> _Footer | None:
        """The last valid footer in the store, scanning back past a torn tail; None if none."""
        end = self._length()
        if end < _FOOTER_BYTES:
            return None
        footer = _decode_footer(self._read(end - _FOOTER_BYTES, _FOOTER_BYTES), end - _FOOTER_BYTES)
        if footer is not None:
            return footer
        window = _SCAN_WINDOW_BYTES
        while True:
            start = max(0, end - window)
            data = bytes(self._read(start, end - start))
            position = len(data)
            while True:
                position = data.rfind(_FOOTER_MAGIC, 0, position)
                if position < 0:
                    break
                candidate = data[position : position + _FOOTER_BYTES]
                footer = _decode_footer(candidate, start + position)
                if footer is not None:
                    return footer
            if start == 0:
                return None
            window *= 2

    # --- Checking -------------------------------------------------------------------------

    def verify(self) -> TreeStats:
        """Walk every live page and check the whole structure; return what was found.

        Checks: checksums, page sizes, strictly increasing keys inside each
        page's bounds, uniform leaf depth, no empty non-root pages, every
        recorded lowest offset equal to its subtree's real minimum, parents at
        higher offsets than their children, every page at or above
        :attr:`lowest_live_offset`, and the footer's live bytes. Raises
        :class:`~pravega_ray.invariant.InvariantViolation` (or DataCorruptionError)
        on the first failure.
        """
        footer = self._footer
        if footer is None or footer.root_length == 0:
            return TreeStats(0, 0, 0, 0, 0, None, 0)
        totals = {"pages": 0, "leaves": 0, "entries": 0, "bytes": 0, "largest": 0}
        depths: set[int] = set()

        def walk(
            offset: int, length: int, low: bytes | None, high: bytes | None, depth: int
        ) -> int:
            invariant(offset >= footer.lowest_live_offset, "page below lowest_live_offset")
            invariant(length <= self._page_bytes_max, "page over page_bytes_max")
            node = _decode_page(self._read(offset, length), offset, length)
            totals["pages"] += 1
            totals["bytes"] += length
            totals["largest"] = max(totals["largest"], length)
            if node.leaf:
                keys = node.keys
                depths.add(depth)
                totals["leaves"] += 1
                totals["entries"] += len(keys)
            else:
                keys = [c.key for c in node.children][1:]
            invariant(node.count() > 0, "empty page")
            invariant(all(a < b for a, b in itertools.pairwise(keys)), "keys not increasing")
            if keys:
                invariant(low is None or keys[0] >= low, "key below the page's lower bound")
                invariant(high is None or keys[-1] < high, "key above the page's upper bound")
            if node.leaf:
                return offset
            invariant(depth > 0 or len(node.children) >= 2, "index root with one child")
            lowest = offset
            for i, child in enumerate(node.children):
                invariant(child.offset < offset, "child not below its parent")
                child_low = low if i == 0 else child.key
                child_high = node.children[i + 1].key if i + 1 < len(node.children) else high
                child_lowest = walk(child.offset, child.length, child_low, child_high, depth + 1)
                invariant(child_lowest == child.lowest_offset, "stale lowest offset in entry")
                lowest = min(lowest, child_lowest)
            return lowest

        lowest = walk(footer.root_offset, footer.root_length, None, None, 0)
        invariant(lowest == footer.lowest_live_offset, "footer lowest offset is stale")
        invariant(len(depths) == 1, "leaves at different depths")
        invariant(totals["bytes"] == footer.live_bytes, "footer live bytes disagree")
        invariant(footer.footer_offset > footer.root_offset, "footer below its root")
        return TreeStats(
            pages=totals["pages"],
            leaves=totals["leaves"],
            entries=totals["entries"],
            depth=depths.pop() + 1,
            live_bytes=totals["bytes"],
            lowest_offset=lowest,
            page_bytes_largest=totals["largest"],
        )
