"""Append-only B+tree with progressive compaction, Pravega's attribute index (docs/btree.md).

See :mod:`pravega_ray.btree.tree` for the page layout, footer and consistency rules.
"""

from __future__ import annotations

from pravega_ray.btree.page_cache import PageCache
from pravega_ray.btree.tree import (
    CACHE_PAGES_MAX,
    KEY_BYTES,
    PAGE_BYTES_MAX,
    PAGE_BYTES_MIN,
    BTree,
    TreeStats,
)

__all__ = [
    "CACHE_PAGES_MAX",
    "KEY_BYTES",
    "PAGE_BYTES_MAX",
    "PAGE_BYTES_MIN",
    "BTree",
    "PageCache",
    "TreeStats",
]
