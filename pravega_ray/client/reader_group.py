"""A reader group as an object (Pravega's ``ReaderGroup``): who reads, and taking readers out.

Get one with ``cluster.reader_group(scope, name)``. Later issues add checkpoints, stream
cuts and ``reset_to`` to this class, as Pravega's ``ReaderGroup`` has them.
"""

from __future__ import annotations

from pravega_ray.client.connection import ControllerConnection
from pravega_ray.client.events import Position
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.naming import validate_name


class ReaderGroup:
    """The reader group ``scope/name``, as it exists when this object is made.

    Raises ReaderGroupNotFoundError (and ScopeNotFoundError, InvalidNameError) if it does
    not exist. If the group is deleted later, every method raises ReaderGroupNotFoundError,
    even once a group of the same name exists again (that is another group: get a new
    object for it). Outcome-unknown failures raise ControllerUnavailableError.
    """

    def __init__(self, scope: str, name: str, controller: ControllerConnection) -> None:
        validate_name("scope", scope)
        validate_name("reader group", name)
        self.scope = scope
        self.name = name
        self._controller = controller
        state = controller.get_reader_group(scope, name)  # ReaderGroupNotFoundError, ...
        self._group_id: str | None = state.get("group_id")

    def get_online_readers(self) -> list[str]:
        """Ids of the readers that are members of the group, sorted."""
        return self._controller.reader_group_online_readers(
            self.scope, self.name, group_id=self._group_id
        )

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
        (ControllerUnavailableError): check ``get_online_readers()`` and call again.
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
        return self._controller.reader_group_reader_offline(
            self.scope, self.name, reader_id, offsets, group_id=self._group_id
        )
