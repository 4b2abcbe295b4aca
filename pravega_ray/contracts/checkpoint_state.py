"""A reader group's checkpoints (Pravega's ``CheckpointState``). Pure logic, part of the
group's state (:mod:`reader_group_state`).

The checkpoint state machine, per checkpoint::

    created ──(every reader online at its creation passed it, left, or was declared
              offline)──> completed (kept among the last CHECKPOINTS_KEPT)
    created ──(the group was reset)──> gone (its initiator gets CheckpointFailedError)

At creation the checkpoint records where the segments nobody owns are: each unassigned
segment at its offset, and each completed segment whose key range no live segment covers
yet (a segment whose successors are held back, or one with none: the end of an end cut or
of a sealed stream) at its end offset. Then each reader online at creation records its own
position when it passes the checkpoint (its owned segments, and segments it read to the end
and has not reported, at their ends); a reader that leaves or is declared offline before
passing it records the position its segments go back at. While a reader has not passed
an outstanding checkpoint the group neither hands it segments nor takes any from it, and
it keeps the segments it finishes to itself (they stay in its position at their ends): so
the positions gathered at different moments still cover each stream's key space once.

A *silent* checkpoint (an automatic one) is the same, except that readers return no
marker for it. Every change is idempotent: passing a checkpoint twice, or one that is gone,
is a no-op.

Each checkpoint has a random ``id`` (names are reused, ids never are): a reader records
passing it as an *acknowledgement*, a key of its own in the state segment
(:func:`ack_key`), so readers passing one checkpoint never race on the one state value;
whoever sees every reader of a checkpoint acknowledged (the last reader, with its own
acknowledgement unstored) *folds* the acknowledgements into the state
(:meth:`CheckpointState.fold`, one update). Until folded, a reader that
acknowledged still counts as not passed (it is handed and takes no segments), which keeps
the cut exact whoever folds and when.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from pravega_ray.constants import CHECKPOINTS_OUTSTANDING_MAX
from pravega_ray.errors import CheckpointFailedError, InvalidArgumentError

__all__ = [
    "ACK_KEY_PREFIX",
    "CHECKPOINTS_KEPT",
    "NOTICE_KEY",
    "CheckpointState",
    "ack_key",
    "ack_key_checkpoint_id",
    "check_checkpoint_name",
]

CHECKPOINTS_KEPT = 5
"""Completed checkpoints a group keeps (the oldest is dropped first)."""

CHECKPOINT_NAME_LENGTH_MAX = 255
"""The longest checkpoint name accepted."""


NOTICE_KEY = b"notice\x00checkpoint"
"""Put (empty) in the batch that creates a checkpoint (``ReaderGroup``): readers watching the
state segment's tail sync at once when they see this key appended. Keys hold a NUL, which
a JSON value never holds raw, so the key's bytes in a read mean the key was written."""

ACK_KEY_PREFIX = b"ack\x00"
"""Keys of checkpoint acknowledgements start with this (the state's key is ``b"state"``)."""


def ack_key(checkpoint_id: str, reader_id: str) -> bytes:
    """The state segment's key of ``reader_id``'s acknowledgement of checkpoint
    ``checkpoint_id`` (an id holds no NUL, so the key parses back unambiguously)."""
    return (
        ACK_KEY_PREFIX
        + checkpoint_id.encode()
        + b"\x00"
        + reader_id.encode("utf-8", "surrogatepass")
    )


def ack_key_checkpoint_id(key: bytes) -> str | None:
    """The checkpoint id of acknowledgement key ``key``; None for any other key."""
    if not key.startswith(ACK_KEY_PREFIX):
        return None
    rest = key[len(ACK_KEY_PREFIX) :]
    end = rest.find(b"\x00")
    return None if end < 0 else rest[:end].decode("utf-8", "replace")


def check_checkpoint_name(name: object) -> str:
    """``name`` if it is a non-empty str of at most CHECKPOINT_NAME_LENGTH_MAX chars."""
    if not isinstance(name, str) or not name or len(name) > CHECKPOINT_NAME_LENGTH_MAX:
        raise InvalidArgumentError(
            f"a checkpoint name must be a non-empty str of at most "
            f"{CHECKPOINT_NAME_LENGTH_MAX} chars, got {name!r}"
        )
    return name


@dataclass
class CheckpointState:
    """Outstanding checkpoints in creation order, and the last few completed ones."""

    outstanding: list[dict[str, Any]] = field(default_factory=list)
    """Each ``{"name", "id", "silent", "readers_left": [ids], "positions": {segment: offset}}``."""
    completed: list[dict[str, Any]] = field(default_factory=list)
    """Each ``{"name", "positions": {segment: offset}}``, oldest first."""
    last_created_ms: int = 0
    """When the last checkpoint was created (wall clock): automatic checkpoints count from it."""

    def create(
        self,
        name: str,
        silent: bool,
        readers: list[str],
        positions: dict[str, int],
        now_ms: int,
        checkpoint_id: str | None = None,
    ) -> None:
        """Start checkpoint ``name`` (id ``checkpoint_id``, default a random one) for
        ``readers`` with the unowned ``positions``.

        CheckpointFailedError if the name is in use (outstanding or among the kept completed
        ones) or CHECKPOINTS_OUTSTANDING_MAX are under way already.
        """
        if self.find(name) is not None or self.get_completed(name) is not None:
            raise CheckpointFailedError(f"checkpoint name {name!r} is in use", name=name)
        if len(self.outstanding) >= CHECKPOINTS_OUTSTANDING_MAX:
            raise CheckpointFailedError(
                f"{len(self.outstanding)} checkpoints are under way already "
                f"(at most {CHECKPOINTS_OUTSTANDING_MAX})",
                name=name,
            )
        self.outstanding.append(
            {
                "name": name,
                "id": checkpoint_id or uuid.uuid4().hex,
                "silent": bool(silent),
                "readers_left": sorted(readers),
                "positions": dict(positions),
            }
        )
        self.last_created_ms = now_ms
        self._complete_done()

    def find(self, name: str) -> dict[str, Any] | None:
        for checkpoint in self.outstanding:
            if checkpoint["name"] == name:
                return checkpoint
        return None

    def get_completed(self, name: str) -> dict[str, Any] | None:
        for checkpoint in self.completed:
            if checkpoint["name"] == name:
                return checkpoint
        return None

    def pending_for(
        self, reader_id: str, acknowledged: frozenset[str] = frozenset()
    ) -> dict[str, Any] | None:
        """The oldest outstanding checkpoint ``reader_id`` has not passed, if any, leaving
        out those whose ids are in ``acknowledged`` (acknowledged, not yet folded)."""
        for checkpoint in self.outstanding:
            if reader_id in checkpoint["readers_left"] and checkpoint["id"] not in acknowledged:
                return checkpoint
        return None

    def acks_wanted(self) -> list[tuple[str, str]]:
        """``(checkpoint id, reader id)`` of every reader an outstanding checkpoint waits for."""
        return [(c["id"], r) for c in self.outstanding for r in c["readers_left"]]

    def ready(self, acked: set[tuple[str, str]]) -> bool:
        """Whether some outstanding checkpoint has every reader it waits for in ``acked``
        (``(checkpoint id, reader id)`` pairs): folding them completes it."""
        return any(all((c["id"], r) in acked for r in c["readers_left"]) for c in self.outstanding)

    def fold(self, acks: dict[tuple[str, str], dict[str, int]]) -> list[str]:
        """Each reader passed each checkpoint (by id) at the positions ``acks`` gives; the
        names of the checkpoints this completed. Acknowledgements of checkpoints gone, or
        of readers passed or gone, are ignored (the caller checked sessions)."""
        done: list[str] = []
        for checkpoint in list(self.outstanding):
            for reader_id in list(checkpoint["readers_left"]):
                positions = acks.get((checkpoint["id"], reader_id))
                if positions is not None:
                    done += self.reader_passed(reader_id, checkpoint["name"], positions)
        return done

    def reader_passed(self, reader_id: str, name: str, positions: dict[str, int]) -> list[str]:
        """``reader_id`` passed checkpoint ``name`` at ``positions``; the names of the
        checkpoints this completed (a no-op, [], for a checkpoint gone or passed)."""
        checkpoint = self.find(name)
        if checkpoint is None or reader_id not in checkpoint["readers_left"]:
            return []
        checkpoint["readers_left"].remove(reader_id)
        checkpoint["positions"].update(positions)
        return self._complete_done()

    def reader_gone(self, reader_id: str, positions: dict[str, int]) -> list[str]:
        """``reader_id`` left (or was declared offline) with its segments at ``positions``:
        it counts as having passed every checkpoint it had not; the checkpoints completed."""
        for checkpoint in self.outstanding:
            if reader_id in checkpoint["readers_left"]:
                checkpoint["readers_left"].remove(reader_id)
                checkpoint["positions"].update(positions)
        return self._complete_done()

    def _complete_done(self) -> list[str]:
        done = [c for c in self.outstanding if not c["readers_left"]]
        for checkpoint in done:
            self.outstanding.remove(checkpoint)
            self.completed.append(
                {"name": checkpoint["name"], "positions": checkpoint["positions"]}
            )
        del self.completed[: max(0, len(self.completed) - CHECKPOINTS_KEPT)]
        return [c["name"] for c in done]

    def reset(self) -> None:
        """The group was reset: outstanding checkpoints are dropped (they fail)."""
        self.outstanding.clear()

    def to_dict(self) -> dict[str, Any]:
        return {
            "outstanding": self.outstanding,
            "completed": self.completed,
            "last_created_ms": self.last_created_ms,
        }

    @classmethod
    def from_dict(cls, data: object) -> CheckpointState:
        """What ``to_dict`` gave (None: none yet); ValueError for a malformed value."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise ValueError("checkpoints must be a dict")
        outstanding = data.get("outstanding", [])
        completed = data.get("completed", [])
        last = data.get("last_created_ms", 0)
        if not isinstance(outstanding, list) or not isinstance(completed, list):
            raise ValueError("checkpoint lists must be lists")
        if isinstance(last, bool) or not isinstance(last, int):
            raise ValueError("last_created_ms must be an int")
        for c in outstanding + completed:
            if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                raise ValueError("a checkpoint must be a dict with a name")
            if not isinstance(c.get("positions"), dict):
                raise ValueError("a checkpoint's positions must be a dict")
        for c in outstanding:
            if not isinstance(c.get("readers_left"), list):
                raise ValueError("an outstanding checkpoint needs readers_left")
        return cls(
            [
                {
                    "name": c["name"],
                    # Records from before ids: one derived from the name (no NUL in it).
                    "id": str(c.get("id") or "~" + c["name"].replace("\x00", "")),
                    "silent": bool(c.get("silent", False)),
                    "readers_left": [str(r) for r in c["readers_left"]],
                    "positions": {str(k): int(v) for k, v in c["positions"].items()},
                }
                for c in outstanding
            ],
            [
                {
                    "name": c["name"],
                    "positions": {str(k): int(v) for k, v in c["positions"].items()},
                }
                for c in completed
            ],
            last,
        )
