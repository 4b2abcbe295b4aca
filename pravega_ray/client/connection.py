"""How the client talks to segment containers and the controller.

The client never imports Ray. It calls segment containers through a
:class:`SegmentStoreConnection` over an invoker (``pravega_ray.cluster``: Ray actor
handles; ``pravega_ray.inprocess``: containers in one process, for tests and the
simulation), and the controller through a :class:`ControllerConnection`.

Errors: futures fail with the typed errors of :mod:`pravega_ray.errors`. A dead
or restarting container surfaces as :class:`SegmentStoreUnavailableError`,
which means *outcome unknown*: the writer's conditional appends make resending
after ``setup_append`` safe.
"""

from __future__ import annotations

from typing import Any, Protocol

from pravega_ray.segmentstore.service import SegmentStoreClient, SegmentStoreService

__all__ = ["ControllerConnection", "SegmentStoreConnection", "SegmentStoreService"]


SegmentStoreConnection = SegmentStoreClient
"""Asynchronous, typed calls to whichever container owns a segment.

The segment store's service surface (:class:`SegmentStoreService`) as the client
calls it: one method per call, each returning a future; see
:class:`~pravega_ray.segmentstore.service.SegmentStoreClient`.
"""


class ControllerConnection(Protocol):
    """Synchronous calls to the controller; each mirrors ``controller.Controller``'s method.

    A call whose outcome is unknown (the controller actor died or restarted mid-call)
    raises :class:`ControllerUnavailableError`; ``RetryingControllerConnection``
    (``client/controller_connection.py``) repeats the calls that are safe to repeat.
    Creates take an optional ``request_id`` keyword so a repeated create that landed
    answers True.
    """

    def create_scope(self, scope: str, request_id: str | None = None) -> bool: ...
    def list_scopes(self) -> list[str]: ...
    def delete_scope(self, scope: str) -> bool: ...
    def create_stream(
        self, scope: str, stream: str, config: Any, request_id: str | None = None
    ) -> bool: ...
    def list_streams(self, scope: str) -> list[str]: ...
    def get_stream_info(self, scope: str, stream: str) -> Any: ...
    def seal_stream(self, scope: str, stream: str) -> bool: ...
    def get_cluster_config(self) -> dict[str, Any]: ...
    def damaged_records(self) -> dict[str, str]: ...
    def create_key_value_table(
        self, scope: str, table: str, partitions: int, request_id: str | None = None
    ) -> bool: ...
    def get_key_value_table(self, scope: str, table: str) -> Any: ...
    def get_active_key_value_table(self, scope: str, table: str) -> Any: ...
    def list_key_value_tables(self, scope: str) -> list[str]: ...
    def delete_key_value_table(self, scope: str, table: str) -> bool: ...
    def create_reader_group(
        self, scope: str, group: str, config: Any, request_id: str | None = None
    ) -> bool: ...
    def get_reader_group(self, scope: str, group: str) -> dict[str, Any]: ...
    def delete_reader_group(self, scope: str, group: str) -> bool: ...

    # Reader-group calls of readers and ReaderGroup objects. ``group_id`` is the incarnation
    # the caller joined (returned by reader_group_add_reader, or in get_reader_group's
    # answer): ReaderGroupNotFoundError once that group was deleted, even if re-created.
    def reader_group_online_readers(
        self, scope: str, group: str, group_id: str | None = None
    ) -> list[str]: ...
    def reader_group_reader_offline(
        self,
        scope: str,
        group: str,
        reader_id: str,
        offsets: dict[str, int] | None,
        group_id: str | None = None,
    ) -> bool: ...
    def reader_group_add_reader(
        self, scope: str, group: str, reader_id: str, session: str
    ) -> str: ...
    def reader_group_remove_reader(
        self,
        scope: str,
        group: str,
        reader_id: str,
        session: str,
        offsets: dict[str, int] | None,
        group_id: str | None = None,
    ) -> bool: ...
    def reader_group_sync(
        self,
        scope: str,
        group: str,
        reader_id: str,
        session: str,
        offsets: dict[str, int],
        completed: list[str],
        group_id: str | None = None,
    ) -> Any: ...
    def reader_group_release(
        self,
        scope: str,
        group: str,
        reader_id: str,
        session: str,
        segment: str,
        offset: int,
        group_id: str | None = None,
    ) -> None: ...
