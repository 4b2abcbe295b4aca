"""Attribute index: where a segment's extended attributes live in Tier-2.

As in Pravega (docs/attribute-index.md): the ingestion pipeline keeps recently used
attributes in memory; the *attribute index* persists all of them in Tier-2
and serves the rest. The storage writer coalesces updates (latest value wins)
and hands them to :meth:`AttributeIndex.update` in batches; the pipeline's
prefetch reads through :meth:`AttributeIndex.get`.

The implementation is
:class:`~pravega_ray.segmentstore.btree_attribute_index.BTreeAttributeIndex`: an
append-only B+tree with progressive compaction per segment (``docs/attribute-index.md``).
An earlier stand-in (sorted batches compacted into one chunk, the approach Pravega
started with) was replaced by it in data format 3.

Contracts of every implementation:

* ``update(segment, values)`` is durable when it returns; a value equal to
  :data:`~pravega_ray.contracts.attributes.NULL_VALUE` removes its key. It returns
  the *root* of the state it made durable (an offset that only grows), or None.
* ``expect_root(segment, root)``: the container recorded (durably, in its log) that the
  index held a state with this root; opening the segment's index on an older state
  (lost or cut chunks) raises :class:`DataCorruptionError` instead of serving it.
* ``get(segment, keys)`` returns the latest durable value of each present key
  (absent keys are left out).
* ``iterate(segment, after, limit)`` returns up to ``limit`` ``(key, value)``
  pairs with ``after < key`` (all keys if ``after`` is None) in key order.
* ``delete(segment)`` removes everything of the segment (idempotent).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

__all__ = ["AttributeIndex"]


class AttributeIndex(Protocol):
    def get(self, segment: str, keys: Iterable[bytes]) -> dict[bytes, int]: ...

    def update(self, segment: str, values: dict[bytes, int]) -> int | None: ...

    def expect_root(self, segment: str, root: int) -> None: ...

    def iterate(self, segment: str, after: bytes | None, limit: int) -> list[tuple[bytes, int]]: ...

    def delete(self, segment: str) -> None: ...
