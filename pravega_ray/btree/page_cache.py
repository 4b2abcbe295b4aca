"""A bounded cache of decoded B+tree pages, shareable by many trees.

Pravega's design of the attribute index (docs/attribute-index.md) says: "Caching nodes
dramatically reduces the need to read at arbitrary offsets from Tier 2, especially for
the higher-level nodes." Index pages and
leaves are kept in two LRU lists with separate bounds, so a stream of leaf
reads never pushes out the upper levels: with the index pages resident, a warm
lookup costs at most one read (its leaf). One cache can serve every tree of a
segment container (entries are keyed by tree and page offset), which bounds the
container's memory however many segments have attributes. A decoded full leaf
takes about 100 KB of Python objects; an index page about as much.

Not thread-safe: callers serialize (the attribute index holds a lock).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from pravega_ray.errors import InvalidArgumentError

__all__ = ["INDEX_PAGES_MAX", "LEAF_PAGES_MAX", "PageCache"]

INDEX_PAGES_MAX = 1024
"""Index pages kept by default (the second level of a tree of up to ~10^9 entries fits)."""

LEAF_PAGES_MAX = 1024
"""Leaves kept by default (about 100 MB of decoded leaves)."""


class PageCache:
    """LRU of decoded pages keyed by ``(tree, offset)``; index pages and leaves bounded apart."""

    def __init__(
        self, index_pages_max: int = INDEX_PAGES_MAX, leaf_pages_max: int = LEAF_PAGES_MAX
    ) -> None:
        """InvalidArgumentError if a bound is negative (0 disables that part of the cache)."""
        if index_pages_max < 0 or leaf_pages_max < 0:
            raise InvalidArgumentError("page cache bounds must be >= 0")
        self.index_pages_max = index_pages_max
        self.leaf_pages_max = leaf_pages_max
        self._index: OrderedDict[tuple[int, int], Any] = OrderedDict()
        self._leaves: OrderedDict[tuple[int, int], Any] = OrderedDict()

    def get(self, tree: int, offset: int) -> Any | None:
        """The page of ``tree`` at ``offset`` (marked recently used), or None."""
        key = (tree, offset)
        for pages in (self._index, self._leaves):
            node = pages.get(key)
            if node is not None:
                pages.move_to_end(key)
                return node
        return None

    def put(self, tree: int, offset: int, node: Any, *, leaf: bool) -> None:
        """Keep ``node``, evicting the least recently used pages of its kind beyond the bound."""
        pages, bound = (
            (self._leaves, self.leaf_pages_max) if leaf else (self._index, self.index_pages_max)
        )
        key = (tree, offset)
        pages[key] = node
        pages.move_to_end(key)
        while len(pages) > bound:
            pages.popitem(last=False)

    def discard(self, tree: int, offset: int) -> None:
        """Forget one page (a page no longer live)."""
        self._index.pop((tree, offset), None)
        self._leaves.pop((tree, offset), None)

    def clear(self, tree: int | None = None) -> None:
        """Forget every page of ``tree``, or every page when ``tree`` is None."""
        for pages in (self._index, self._leaves):
            if tree is None:
                pages.clear()
            else:
                for key in [k for k in pages if k[0] == tree]:
                    del pages[key]

    def sizes(self) -> tuple[int, int]:
        """(index pages, leaves) currently kept."""
        return len(self._index), len(self._leaves)
