"""A reader group as an object (Pravega's ``ReaderGroup``): who reads, and taking readers out.

Get one with ``cluster.reader_group(scope, name)``. Later issues add checkpoints, stream
cuts and ``reset_to`` to this class (ARCHITECTURE.md section 5 names them).
"""

from __future__ import annotations

from pravega_ray.client.connection import ControllerConnection
from pravega_ray.client.events import Position
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.naming import validate_name


class ReaderGroup:
    """The reader group ``scope/name``. Raises ReaderGroupNotFoundError if it does not exist."""

    def __init__(self, scope: str, name: str, controller: ControllerConnection) -> None:
        validate_name("scope", scope)
        validate_name("reader group", name)
        self.scope = scope
        self.name = name
        self._controller = controller
        controller.get_reader_group(scope, name)  # ReaderGroupNotFoundError, ScopeNotFoundError

    def get_online_readers(self) -> list[str]:
        """Ids of the readers that are members of the group, sorted."""
        return self._controller.reader_group_online_readers(self.scope, self.name)

    def reader_offline(self, reader_id: str, position: Position | None = None) -> bool:
        """Declare a reader gone (its process died without ``close()``); False if not a member.

        Its segments return to the group at ``position`` (what the reader last returned,
        e.g. saved by the application from ``EventRead.position``), else at the offsets it
        last reported (events after them may be read again). Its id may then join again;
        the old reader object, if it still runs, gets ReaderNotInGroupError. Not repeated
        automatically after an outcome-unknown failure (ControllerUnavailableError).
        """
        if not isinstance(reader_id, str) or not reader_id:
            raise InvalidArgumentError("reader_id must be a non-empty str")
        if position is not None and not isinstance(position, Position):
            raise InvalidArgumentError(
                f"position must be a Position or None, got {type(position).__name__}"
            )
        offsets = None if position is None else position.to_dict()
        return self._controller.reader_group_reader_offline(
            self.scope, self.name, reader_id, offsets
        )
