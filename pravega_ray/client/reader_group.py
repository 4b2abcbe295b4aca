"""A reader group as an object (Pravega's ``ReaderGroup``): who reads, and taking readers out.

Get one with ``cluster.reader_group(scope, name)``. Later issues add checkpoints, stream
cuts and ``reset_to`` to this class, as Pravega's ``ReaderGroup`` has them.
"""

from __future__ import annotations

from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.client.events import Position
from pravega_ray.client.reader_group_synchronizer import ReaderGroupSynchronizer
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.naming import validate_name


class ReaderGroup:
    """The reader group ``scope/name``, as it exists when this object is made.

    Raises ReaderGroupNotFoundError (and ScopeNotFoundError, InvalidNameError) if it does
    not exist. If the group is deleted later, every method raises ReaderGroupNotFoundError,
    even once a group of the same name exists again (that is another group: get a new
    object for it). It reads and changes the group's state in its state segment, as the
    readers do (:mod:`reader_group_synchronizer`); a container that stays unreachable is
    SegmentStoreUnavailableError, a controller that stays unreachable when the object is
    made ControllerUnavailableError.
    """

    def __init__(
        self,
        scope: str,
        name: str,
        controller: ControllerConnection,
        segments: SegmentStoreConnection,
    ) -> None:
        validate_name("scope", scope)
        validate_name("reader group", name)
        self.scope = scope
        self.name = name
        # ReaderGroupNotFoundError, ScopeNotFoundError, DataCorruptionError, ...
        self._state = ReaderGroupSynchronizer(scope, name, controller, segments)

    def get_online_readers(self) -> list[str]:
        """Ids of the readers that are members of the group, sorted."""
        return self._state.update(lambda state: state.readers)  # a read: stores nothing

    def reader_offline(self, reader_id: str, position: Position | None = None) -> bool:
        """Declare a reader gone (its process died without ``close()``); False if not a member.

        Each segment it owns returns to the group at its offset in ``position`` (e.g. the
        ``EventRead.position`` of the last event the application finished with: later
        events are read again, by whichever reader gets the segment), else at the offset
        the reader last reported (events it returned after that are read again). Offsets
        in ``position`` of segments the reader no longer owns are ignored. Its id may then
        join again; the old reader object, if it still runs, gets ReaderNotInGroupError
        and stops. InvalidArgumentError for a bad ``reader_id`` or ``position``. Not
        repeated automatically after an outcome-unknown failure
        (SegmentStoreUnavailableError) unless the state shows it landed: check
        ``get_online_readers()`` and call again.
        """
        if not isinstance(reader_id, str) or not reader_id:
            raise InvalidArgumentError("reader_id must be a non-empty str")
        if position is not None and not isinstance(position, Position):
            raise InvalidArgumentError(
                f"position must be a Position or None, got {type(position).__name__}"
            )
        try:
            offsets = None if position is None else Position.from_dict(position.to_dict()).to_dict()
        except (TypeError, ValueError) as e:  # a tampered-with Position
            raise InvalidArgumentError(f"position does not validate: {e}") from None
        return self._state.update(
            lambda state: state.reader_offline(reader_id, offsets), repeat_unknown=False
        )
