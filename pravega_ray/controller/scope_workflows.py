"""The recursive delete of a scope, run by the request event processor (Pravega's
``DeleteScopeTask`` behind ``deleteScopeRecursive``; docs/design.md "The controller").

``Controller.delete_scope_recursive`` marks the scope record DELETING and posts a
``delete_scope`` request (key ``<scope>/``). From the mark on, every create in the scope is
refused (IllegalStateError); a create that stored its record just before the mark reads
the scope again right after and removes what it stored (``ControllerSteps.created_in_open_scope``),
so a record is never left behind in a deleted scope.

The request's handler (:meth:`ScopeWorkflows.handle`), each time it runs:

1. answers DONE if the scope is gone or not DELETING (a repeated request);
2. deletes the scope's reader groups (their state segments; they stop being subscribers
   of their streams, in whatever scope), then its key-value tables, then its state
   synchronizers (their segments);
3. asks every stream of the scope to be sealed and then deleted (one ``seal`` request
   with ``then_delete``, run by the stream's own queue of the processor, so it never runs
   beside another workflow of that stream; a stream already SEALING has its request);
4. answers WAIT while anything remains, so it runs again later (it never expires);
   once the scope is empty it deletes the scope record (the empty-scope delete, which
   refuses while anything remains) and answers DONE.

Every step is idempotent: killed anywhere, the request runs again from the start (at
least once) and ends once; a controller instance that starts posts the request again for a
scope it finds DELETING.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, Protocol

from pravega_ray.contracts.records import StreamState
from pravega_ray.controller.event_processor import DONE, WAIT
from pravega_ray.controller.stream_metadata_store import StreamMetadataStore
from pravega_ray.errors import (
    KeyValueTableNotFoundError,
    ReaderGroupNotFoundError,
    ScopeNotEmptyError,
    ScopeNotFoundError,
    StreamNotFoundError,
)

__all__ = ["ScopeContents", "ScopeWorkflows"]

log = logging.getLogger(__name__)


class ScopeContents(Protocol):
    """What the recursive delete lists and removes (the
    :class:`~pravega_ray.controller.controller.Controller` provides it)."""

    def list_streams(self, scope: str) -> list[str]: ...

    def list_key_value_tables(self, scope: str) -> list[str]: ...

    def list_reader_groups(self, scope: str) -> list[str]: ...

    def delete_reader_group(self, scope: str, group: str) -> bool: ...

    def delete_key_value_table(self, scope: str, table: str) -> bool: ...

    def list_state_synchronizers(self, scope: str) -> list[str]: ...

    def delete_state_synchronizer(self, scope: str, name: str) -> bool: ...

    def request_seal_and_delete(self, scope: str, stream: str) -> None: ...

    def delete_scope(self, scope: str) -> bool: ...


class ScopeWorkflows:
    """The handler of ``delete_scope`` requests (module docstring); ``step`` is called
    between its steps (tests kill it there)."""

    def __init__(
        self,
        store: StreamMetadataStore,
        contents: ScopeContents,
        *,
        step: Callable[[str], None] = lambda name: None,
    ) -> None:
        self._store = store
        self._contents = contents
        self._step = step

    def handle(self, scope: str, body: dict[str, Any]) -> str:
        """Run one round of the recursive delete of ``scope``; DONE or WAIT."""
        if not self._store.scope_deleting(scope):
            return DONE  # deleted already, or a request nobody marked the scope for
        try:
            for group in self._contents.list_reader_groups(scope):
                with contextlib.suppress(ReaderGroupNotFoundError):
                    self._contents.delete_reader_group(scope, group)
            self._step("reader groups deleted")
            for table in self._contents.list_key_value_tables(scope):
                with contextlib.suppress(KeyValueTableNotFoundError):
                    self._contents.delete_key_value_table(scope, table)
            self._step("key-value tables deleted")
            for name in self._contents.list_state_synchronizers(scope):
                self._contents.delete_state_synchronizer(scope, name)  # False: gone already
            self._step("state synchronizers deleted")
            streams = self._contents.list_streams(scope)
            for stream in streams:
                with contextlib.suppress(StreamNotFoundError):
                    if self._store.streams.state(scope, stream) is not StreamState.SEALING:
                        self._contents.request_seal_and_delete(scope, stream)
            self._step("streams asked to seal and delete")
            if streams:
                return WAIT
            self._contents.delete_scope(scope)
        except ScopeNotEmptyError:  # a create that raced the listing: it undoes itself
            return WAIT
        except ScopeNotFoundError:
            return DONE  # another round (a duplicate request) finished it
        log.info("controller: scope %s deleted recursively", scope)
        return DONE
