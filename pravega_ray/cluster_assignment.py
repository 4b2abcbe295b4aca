"""Which Ray node each segment container runs on: the plan and its durable record.

The cluster manager (``actors/cluster_manager_actor.py``) owns the container-to-node map.
This module is its logic without Ray, so it is tested with plain values and memory storage:

* :func:`plan_assignment` turns (containers, current map, alive nodes) into the target map:
  balanced (node loads differ by at most one container) with the fewest moves, and
  deterministic (the same inputs give the same map, whatever their order).
* :class:`AssignmentStore` keeps the map durably in Tier-2 chunk storage as a checksummed
  JSON chunk, so a restarted manager knows where every container should be, and finishes a
  move its predecessor started.

Stored form (one chunk per version, ``_system/cluster/assignment/<version, 20 digits>``)::

    crc32:<8 hex digits>\\n{"assignment": {"<container id>": "<node id>", ...}, "version": N}

Chunks are immutable, so "replace" is: create version ``N + 1`` (a crash before it leaves
version ``N``, whole), then delete the older versions. The highest version is the map.
"""

from __future__ import annotations

import json
import logging
import string
import zlib
from collections.abc import Iterable, Mapping, Sequence

from pravega_ray.errors import DataCorruptionError, InvalidArgumentError
from pravega_ray.invariant import invariant
from pravega_ray.storage.chunk_storage import ChunkStorage

__all__ = [
    "ASSIGNMENT_PREFIX",
    "AssignmentStore",
    "moves_between",
    "plan_assignment",
]

log = logging.getLogger(__name__)

ASSIGNMENT_PREFIX = "_system/cluster/assignment/"
"""*format* Chunk prefix of the stored container-to-node map's versions."""

_CHECKSUM_TAG = b"crc32:"
_CHECKSUM_HEADER_BYTES = len(_CHECKSUM_TAG) + 8 + 1  # tag, 8 hex digits, newline
_HEX_DIGITS = frozenset(string.hexdigits.encode())
_VERSION_DIGITS = 20


def _check_inputs(
    container_ids: Sequence[int], current: Mapping[int, str], nodes: Iterable[str]
) -> tuple[list[int], list[str]]:
    """Validated, sorted containers and nodes; InvalidArgumentError for anything else."""
    if isinstance(container_ids, (str, bytes)) or not isinstance(container_ids, Sequence):
        raise InvalidArgumentError("container_ids must be a sequence of container ids")
    containers = list(container_ids)
    for c in containers:
        if not isinstance(c, int) or isinstance(c, bool) or c < 0:
            raise InvalidArgumentError(f"a container id must be an int >= 0, got {c!r}")
    if len(set(containers)) != len(containers):
        raise InvalidArgumentError("container_ids holds a container twice")
    if isinstance(nodes, (str, bytes)):
        raise InvalidArgumentError("nodes must be an iterable of node ids, not one string")
    alive = sorted(set(nodes))
    if not alive:
        raise InvalidArgumentError("there must be at least one alive node to place containers")
    for n in alive:
        if not isinstance(n, str) or not n:
            raise InvalidArgumentError(f"a node id must be a non-empty str, got {n!r}")
    if not isinstance(current, Mapping):
        raise InvalidArgumentError("current must map container ids to node ids")
    for c, n in current.items():
        if not isinstance(c, int) or isinstance(c, bool) or not isinstance(n, str):
            raise InvalidArgumentError(f"current maps container ids to node ids, not {c!r}: {n!r}")
    return sorted(containers), alive


def plan_assignment(
    container_ids: Sequence[int], current: Mapping[int, str], nodes: Iterable[str]
) -> dict[int, str]:
    """The target map of ``container_ids`` over the alive ``nodes``.

    Contract: every container is on an alive node; node loads differ by at most one
    container (so with more nodes than containers, no node holds two); among such maps, the
    one that keeps the most containers where ``current`` has them (the fewest moves). A
    container missing from ``current``, or mapped to a node not in ``nodes``, must be placed.
    Deterministic: ties are broken by node id and container id, never by input order.
    ``current`` entries for containers not in ``container_ids`` are ignored.

    Raises InvalidArgumentError for ids that are not ints >= 0, duplicates, no nodes, or
    node ids that are not non-empty strings.
    """
    containers, alive = _check_inputs(container_ids, current, nodes)
    alive_set = set(alive)
    base, extra = divmod(len(containers), len(alive))
    held: dict[str, list[int]] = {n: [] for n in alive}
    for c in containers:
        node = current.get(c)
        if node in alive_set:
            held[node].append(c)
    # Exactly ``extra`` nodes may hold base + 1. Giving those slots to the nodes holding the
    # most keeps the most containers in place (a node keeps min(held, quota)).
    by_load = sorted(alive, key=lambda n: (-len(held[n]), n))
    quota = {n: base + (1 if i < extra else 0) for i, n in enumerate(by_load)}
    target: dict[int, str] = {}
    load: dict[str, int] = {}
    unplaced: list[int] = []
    for node in alive:
        keep = held[node][: quota[node]]  # held lists are in container id order
        target.update((c, node) for c in keep)
        load[node] = len(keep)
        unplaced.extend(held[node][quota[node] :])
    unplaced.extend(c for c in containers if current.get(c) not in alive_set)
    for c in sorted(unplaced):
        node = min((n for n in alive if load[n] < quota[n]), key=lambda n: (load[n], n))
        target[c] = node
        load[node] += 1
    invariant(set(target) == set(containers), "every container is placed once")
    invariant(max(load.values()) - min(load.values()) <= 1, "node loads differ by at most one")
    return dict(sorted(target.items()))


def moves_between(current: Mapping[int, str], target: Mapping[int, str]) -> list[int]:
    """Containers (in id order) that ``target`` places elsewhere than ``current`` does."""
    return sorted(c for c, node in target.items() if current.get(c) != node)


def _encode(assignment: Mapping[int, str], version: int) -> bytes:
    record = {"assignment": {str(c): n for c, n in sorted(assignment.items())}, "version": version}
    body = json.dumps(record, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return b"%s%08x\n%s" % (_CHECKSUM_TAG, zlib.crc32(body), body)


def _damaged(chunk: str, reason: str) -> DataCorruptionError:
    return DataCorruptionError(
        f"the stored container assignment {chunk!r} is damaged: {reason}", chunk=chunk
    )


def _decode(chunk: str, raw: bytes) -> dict[int, str]:
    """The map stored as ``raw``; DataCorruptionError naming ``chunk`` if any check fails."""
    header, body = raw[:_CHECKSUM_HEADER_BYTES], raw[_CHECKSUM_HEADER_BYTES:]
    digits = header[len(_CHECKSUM_TAG) : -1]
    if (
        not header.startswith(_CHECKSUM_TAG)
        or not header.endswith(b"\n")
        or len(digits) != 8
        or not set(digits) <= _HEX_DIGITS
    ):
        raise _damaged(chunk, "malformed checksum header")
    if zlib.crc32(body) != int(digits, 16):
        raise _damaged(chunk, "checksum mismatch (cut short or changed)")
    try:
        record = json.loads(body)
        stored = record["assignment"]
        assignment = {int(c): n for c, n in stored.items()}
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise _damaged(chunk, f"not an assignment record ({e!r})") from None
    if not all(isinstance(n, str) and n for n in assignment.values()):
        raise _damaged(chunk, "a node id is not a non-empty string")
    return dict(sorted(assignment.items()))


class AssignmentStore:
    """The container-to-node map in Tier-2 (see the module docstring for the stored form).

    Not thread-safe: the cluster manager serializes its calls. One manager writes it at a
    time (the manager is a single named actor).
    """

    def __init__(self, storage: ChunkStorage, prefix: str = ASSIGNMENT_PREFIX) -> None:
        self._storage = storage
        self._prefix = prefix

    def _versions(self) -> list[str]:
        """Chunks of the stored versions, oldest first (names sort by their padded number)."""
        return [
            name
            for name in self._storage.list(self._prefix)
            if name[len(self._prefix) :].isdigit() and "/" not in name[len(self._prefix) :]
        ]

    def load(self) -> dict[int, str] | None:
        """The stored map, or None if none was ever stored.

        Raises DataCorruptionError (attribute ``chunk``) if the latest version fails its
        checksum or does not parse; the caller rebuilds the map and :meth:`store` writes
        a new version past the damaged one (which it then deletes).
        """
        versions = self._versions()
        if not versions:
            return None
        chunk = versions[-1]
        return _decode(chunk, self._storage.read(chunk, 0, self._storage.length(chunk)))

    def store(self, assignment: Mapping[int, str]) -> int:
        """Durably store ``assignment`` as the next version; returns that version.

        When it returns, :meth:`load` (here or after any crash) gives ``assignment``.
        Raises InvalidArgumentError for a map that is not container id -> node id (nothing
        is written), and AlreadyExistsError if another writer created the same version
        meanwhile (only one manager should run; its next pass re-reads and stores again).
        """
        for c, n in assignment.items():
            if not isinstance(c, int) or isinstance(c, bool) or c < 0:
                raise InvalidArgumentError(f"a container id must be an int >= 0, got {c!r}")
            if not isinstance(n, str) or not n:
                raise InvalidArgumentError(f"a node id must be a non-empty str, got {n!r}")
        versions = self._versions()
        version = int(versions[-1][len(self._prefix) :]) + 1 if versions else 0
        chunk = f"{self._prefix}{version:0{_VERSION_DIGITS}d}"
        self._storage.create(chunk, _encode(assignment, version))
        for old in versions:
            self._storage.delete(old)
        return version
