"""The controller's subscriber calls (Pravega's addSubscriber, updateSubscriberStreamCut,
deleteSubscriber, listSubscribers): consumption-based retention's input.

A service of :class:`~pravega_ray.controller.controller.Controller`. A *subscriber* is a
reader group whose consumption holds back retention, named by its scoped name
``"scope/group"``; it may read streams of other scopes. Each stream keeps one record,
``subscribers/<scope>/<stream>`` (``stream_records.py``), mapping each subscriber to its
``generation`` and its latest *acknowledgement cut* (none until it publishes one): only
the latest cut per subscriber is kept, and the record goes with the stream.

``generation`` (an int >= 0, the group's configuration generation) orders a group's
calls: a call naming a generation lower than the stored one comes from an older
configuration and is **refused with False**, nothing changed (not an error: a reader of
an old configuration racing a newer one is expected, not a bug). A call with a higher
generation moves the stored generation forward.

Every update is a compare-and-set of the record, so concurrent calls cannot lose each
other's subscribers; the loser gets ConflictingUpdateError (the client may repeat it:
each call is idempotent, see ``client/controller_connection.py``).
"""

from __future__ import annotations

from typing import Protocol

from pravega_ray.contracts.cut_order import Cut, Ranges, cut_le
from pravega_ray.controller.controller_steps import ControllerSteps
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore, is_int
from pravega_ray.controller.stream_records import truncated_away
from pravega_ray.errors import InvalidArgumentError, SegmentNotFoundError
from pravega_ray.naming import parse_scoped_stream, stream_segment_name
from pravega_ray.stream_cut import StreamCut

__all__ = ["SubscriberSegments", "SubscriberTasks", "subscriber_cuts"]

KIND = "subscribers"


class SubscriberSegments(Protocol):
    """The segment calls subscriber calls make (``SegmentHelper`` provides them)."""

    def check_event_boundary(self, segment: str, offset: int) -> None: ...


class SubscriberTasks:
    """Subscriber calls over the records of ``store`` (module docstring)."""

    def __init__(
        self, store: StreamMetadataStore, segments: SubscriberSegments, steps: ControllerSteps
    ) -> None:
        self._store = store
        self._segments = segments
        self._steps = steps

    def add_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        """Register reader group ``subscriber`` ("scope/group") as a subscriber of the stream.

        True if it was added or its generation moved forward; False if it is there with
        this generation already, or refused (a lower generation than stored). Raises
        StreamNotFoundError, InvalidNameError, InvalidArgumentError (generation not an
        int >= 0); nothing changed then.
        """
        self._steps.ready()
        self._subscriber_args(scope, stream, subscriber, generation)
        value, version = self._store.streams.versioned(KIND, scope, stream)
        subs = dict(value["subscribers"]) if value else {}
        entry = subs.get(subscriber)
        if entry is not None and int(entry["generation"]) >= generation:
            return False
        subs[subscriber] = {"generation": generation, "cut": entry["cut"] if entry else None}
        self._store.streams.put_versioned(KIND, scope, stream, {"subscribers": subs}, version)
        return True

    def update_subscriber_stream_cut(
        self, scope: str, stream: str, subscriber: str, generation: int, cut: StreamCut
    ) -> bool:
        """Store ``cut`` as ``subscriber``'s acknowledgement cut (it has read everything
        before it); the previous one is dropped.

        False (nothing changed) if ``subscriber`` is not a subscriber of the stream or
        ``generation`` is lower than its stored one. InvalidArgumentError (nothing
        changed) if ``cut`` is not a cut of this stream (another stream's, UNBOUNDED,
        segments that do not cover the key space once, an offset past a segment's end) or
        is behind the subscriber's stored cut anywhere in the key space; repeating the
        stored cut is fine (True). StreamNotFoundError, InvalidNameError.
        """
        self._steps.ready()
        self._subscriber_args(scope, stream, subscriber, generation)
        records = self._store.streams
        if not isinstance(cut, StreamCut) or cut.is_unbounded:
            raise InvalidArgumentError(f"cut must be a bounded StreamCut of {scope}/{stream}")
        if (cut.scope, cut.stream) != (scope, stream):
            raise InvalidArgumentError(
                f"cut is a cut of {cut.scoped_stream}, not of {scope}/{stream}"
            )
        positions = cut.positions
        records.check_cut(scope, stream, positions)
        truncation = records.truncation(scope, stream)
        head = {int(k): int(v) for k, v in truncation["cut"].items()}
        for sid, offset in positions.items():
            if truncated_away(truncation, sid) or offset < head.get(sid, 0):
                continue  # truncated away: a cut behind the head holds nothing back
            name = stream_segment_name(scope, stream, sid)
            try:  # InvalidArgumentError past the end or not at an event boundary
                self._segments.check_event_boundary(name, offset)
            except SegmentNotFoundError:
                continue  # deleted since: behind the head
        value, version = records.versioned(KIND, scope, stream)
        subs = dict(value["subscribers"]) if value else {}
        entry = subs.get(subscriber)
        if entry is None or int(entry["generation"]) > generation:
            return False
        if entry["cut"] is not None:
            stored = {int(k): int(v) for k, v in entry["cut"].items()}
            if not cut_le(stored, positions, self._ranges(scope, stream, stored, positions)):
                raise InvalidArgumentError(
                    f"the cut is behind {subscriber}'s acknowledged cut of {scope}/{stream}"
                )
        subs[subscriber] = {
            "generation": generation,
            "cut": {str(k): v for k, v in positions.items()},
        }
        records.put_versioned(KIND, scope, stream, {"subscribers": subs}, version)
        return True

    def delete_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        """Remove ``subscriber`` (and its cut) from the stream's subscribers: retention no
        longer waits for it. False if it is not one, or ``generation`` is lower than its
        stored one (nothing changed). StreamNotFoundError, InvalidNameError,
        InvalidArgumentError."""
        self._steps.ready()
        self._subscriber_args(scope, stream, subscriber, generation)
        records = self._store.streams
        value, version = records.versioned(KIND, scope, stream)
        subs = dict(value["subscribers"]) if value else {}
        entry = subs.get(subscriber)
        if entry is None or int(entry["generation"]) > generation:
            return False
        del subs[subscriber]
        records.put_versioned(KIND, scope, stream, {"subscribers": subs}, version)
        return True

    def list_subscribers(self, scope: str, stream: str) -> list[str]:
        """The stream's subscribers ("scope/group"), sorted. StreamNotFoundError."""
        self._steps.check_stream(scope, stream)
        return sorted(subscriber_cuts(self._store, scope, stream, all_subscribers=True))

    # --- helpers ---------------------------------------------------------------------------------
    def _subscriber_args(
        self, scope: str, stream: str, subscriber: object, generation: object
    ) -> None:
        self._steps.check_stream(scope, stream)
        parse_scoped_stream(subscriber)  # InvalidNameError if bad
        if not is_int(generation) or generation < 0:
            raise InvalidArgumentError(f"generation must be an int >= 0, got {generation!r}")

    def _ranges(self, scope: str, stream: str, *cuts: Cut) -> Ranges:
        out = {}
        for cut in cuts:
            for sid in cut:
                row = self._store.streams.segment_row(scope, stream, sid)
                if row is None:
                    raise InvalidArgumentError(
                        f"segment {sid} is not a segment of {scope}/{stream}"
                    )
                out[sid] = (row[0][1], row[0][2])
        return out


def subscriber_cuts(
    store: StreamMetadataStore, scope: str, stream: str, *, all_subscribers: bool = False
) -> dict[str, dict[int, int] | None]:
    """Each subscriber's acknowledgement cut (``None``: none published yet; left out unless
    ``all_subscribers``). DataCorruptionError naming the record if it is damaged."""
    value, _ = store.streams.versioned(KIND, scope, stream)
    out: dict[str, dict[int, int] | None] = {}
    for name, entry in (value["subscribers"] if value else {}).items():
        cut = entry.get("cut")
        if cut is not None:
            out[name] = {int(k): int(v) for k, v in cut.items()}
        elif all_subscribers:
            out[name] = None
    return out
