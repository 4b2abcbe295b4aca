"""Where a state synchronizer keeps its state (both the controller and the client import this).

A state synchronizer ``scope/name`` (``client/state_synchronizer.py``, Pravega's
``StateSynchronizer``) keeps one value, its state, under :data:`STATE_KEY` of a table
segment of the ``_system`` scope that the controller creates with its record
(``controller/state_synchronizer_tasks.py``). The segment's name is derived from the
validated scope and name and the incarnation's id (:func:`state_synchronizer_segment`):
a fixed-length ``_SYNC<id><digest>`` stream name of ``_system``, so it never collides with
a user's stream (no leading ``_``), a key-value table (``_kvt.``), a reader group's state
segment (``_RG``) or a system stream, and a synchronizer re-created under a deleted one's
name never finds the old state.
"""

from __future__ import annotations

import re

from pravega_ray.constants import SYSTEM_SCOPE
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.naming import segment_id, stable_hash64, stream_segment_name, validate_name

__all__ = ["STATE_KEY", "WRITER_KEY", "check_sync_id", "state_synchronizer_segment"]

STATE_KEY = b"state"
"""The key of the state (the serializer's bytes)."""

WRITER_KEY = b"writer"
"""The key of the id of the update that stored the current state, written in the same
atomic batch as the state: it tells a client whose store's outcome is unknown whether its
own store landed (``StateSynchronizer.update_state`` never applies a function twice)."""

_SYNC_ID_RE = re.compile(r"[0-9a-f]{1,32}")


def check_sync_id(sync_id: object) -> str:
    """``sync_id`` if it is an incarnation id (1 to 32 lowercase hex digits), else
    InvalidArgumentError."""
    if not isinstance(sync_id, str) or not _SYNC_ID_RE.fullmatch(sync_id):
        raise InvalidArgumentError(f"a state synchronizer id is 1-32 hex digits, got {sync_id!r}")
    return sync_id


def state_synchronizer_segment(scope: str, name: str, sync_id: str) -> str:
    """The table segment of incarnation ``sync_id`` of state synchronizer ``scope/name``.

    Raises InvalidNameError for a bad scope or name, InvalidArgumentError for a bad id.
    """
    validate_name("scope", scope)
    validate_name("state synchronizer", name)
    check_sync_id(sync_id)
    digest = f"{stable_hash64(f'{scope}/{name}/{sync_id}'):016x}"
    return stream_segment_name(SYSTEM_SCOPE, f"_SYNC{sync_id}{digest}", segment_id(0, 0))
