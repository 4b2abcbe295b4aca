"""Hands out clients bound to one cluster's controller and containers.

``pravega_ray.cluster.Cluster`` (Ray) and ``pravega_ray.inprocess.InProcessCluster``
(one process, for tests) both extend this, so every client
works the same on either.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pravega_ray.client.batch_client import BatchClient
from pravega_ray.client.byte_stream import ByteStreamReader, ByteStreamWriter
from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.client.key_value_table import KeyValueTable
from pravega_ray.client.reader import EventStreamReader
from pravega_ray.client.reader_group import ReaderGroup
from pravega_ray.client.serializers import BytesSerializer, Serializer
from pravega_ray.client.state_synchronizer import StateSynchronizer, open_state_synchronizer
from pravega_ray.client.stream_manager import StreamManager
from pravega_ray.client.transactional_writer import TransactionalEventStreamWriter
from pravega_ray.client.writer import EventStreamWriter
from pravega_ray.client.writer_config import WriterConfig
from pravega_ray.constants import TXN_LEASE_S_DEFAULT
from pravega_ray.naming import validate_name, validate_stream_name
from pravega_ray.stream_configuration import ReaderGroupConfig

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


class ClientFactory:
    def __init__(self, controller: ControllerConnection, segments: SegmentStoreConnection) -> None:
        self._controller = controller
        self._segments = segments

    def stream_manager(self) -> StreamManager:
        return StreamManager(self._controller, segments=self._segments)

    def batch_client(self) -> BatchClient:
        """A batch client: a stream's segment ranges between cuts, each readable on its own."""
        return BatchClient(self._controller, self._segments)

    # --- byte streams -------------------------------------------------------------------------
    def create_byte_writer(self, scope: str, stream: str) -> ByteStreamWriter:
        """A writer of raw bytes at the end of byte stream ``scope/stream`` (a stream fixed at
        one segment); see :class:`~pravega_ray.client.byte_stream.ByteStreamWriter`."""
        return ByteStreamWriter(scope, stream, self._controller, self._segments)

    def create_byte_reader(self, scope: str, stream: str) -> ByteStreamReader:
        """A reader of byte stream ``scope/stream``'s raw bytes, from its head; see
        :class:`~pravega_ray.client.byte_stream.ByteStreamReader`."""
        return ByteStreamReader(scope, stream, self._controller, self._segments)

    def create_writer(
        self,
        scope: str,
        stream: str,
        serializer: Serializer[T] | None = None,
        config: WriterConfig | None = None,
    ) -> EventStreamWriter[Any]:
        """A writer for ``scope/stream``. Raises StreamNotFoundError, StreamSealedError."""
        validate_stream_name(scope, stream)
        return EventStreamWriter(
            scope,
            stream,
            BytesSerializer() if serializer is None else serializer,
            self._controller,
            self._segments,
            config,
        )

    def create_transactional_writer(
        self,
        scope: str,
        stream: str,
        serializer: Serializer[T] | None = None,
        lease_s: float = TXN_LEASE_S_DEFAULT,
        config: WriterConfig | None = None,
        *,
        ping_interval_s: float | None = None,
    ) -> TransactionalEventStreamWriter[Any]:
        """A transactional writer for ``scope/stream``: ``begin_txn()``, ``get_txn(txn_id)``.

        Each transaction's lease is ``lease_s`` seconds, renewed by the writer's pings;
        ``config`` tunes the event writer of each transaction; pings go every
        ``ping_interval_s`` (default ``lease_s / 3``). Raises InvalidNameError,
        InvalidArgumentError (serializer, lease, config). The stream is looked up by the
        first ``begin_txn`` (StreamNotFoundError, StreamSealedError there).
        """
        return TransactionalEventStreamWriter(
            scope,
            stream,
            BytesSerializer() if serializer is None else serializer,
            self._controller,
            self._segments,
            lease_s,
            config,
            ping_interval_s=ping_interval_s,
        )

    def create_reader_group(self, scope: str, group: str, config: ReaderGroupConfig) -> bool:
        """Create a reader group reading ``config.streams`` from their start cuts (else their
        heads) up to their end cuts (else for ever); False if it exists. A group whose
        ``retention_type`` is not NONE becomes a subscriber of each stream.

        Raises ScopeNotFoundError, StreamNotFoundError, InvalidNameError,
        InvalidArgumentError (config not a ReaderGroupConfig, a cut not of its stream, a
        start cut behind the stream's head, an end cut before a start cut).
        """
        return self._controller.create_reader_group(scope, group, config)

    def delete_reader_group(self, scope: str, group: str) -> bool:
        """Delete the group; False if it does not exist. Its readers then get
        ReaderNotInGroupError or ReaderGroupNotFoundError. A subscriber group stops being
        a subscriber of its streams."""
        return self._controller.delete_reader_group(scope, group)

    def reader_group(self, scope: str, group: str) -> ReaderGroup:
        """The reader group ``scope/group`` (online readers, reader_offline, checkpoints,
        stream cuts, reset_to, unread bytes, retention cuts).

        Raises ReaderGroupNotFoundError, ScopeNotFoundError, InvalidNameError.
        """
        return ReaderGroup(scope, group, self._controller, self._segments)

    def create_reader(
        self, reader_id: str, scope: str, group: str, serializer: Serializer[T] | None = None
    ) -> EventStreamReader[Any]:
        """A reader joining ``scope/group``.

        Raises ReaderGroupNotFoundError, ScopeNotFoundError, ReaderAlreadyExistsError
        (a reader with that id is a member: declare it offline first), InvalidNameError,
        InvalidArgumentError (reader id, serializer).
        """
        validate_name("scope", scope)
        validate_name("reader group", group)
        return EventStreamReader(
            reader_id,
            scope,
            group,
            BytesSerializer() if serializer is None else serializer,
            self._controller,
            self._segments,
        )

    # --- state synchronizers ----------------------------------------------------------------------
    def state_synchronizer(
        self, scope: str, name: str, serializer: Serializer[T], *, initial: T
    ) -> StateSynchronizer[T]:
        """State synchronizer ``scope/name`` (Pravega's ``StateSynchronizer``): created if it
        does not exist, its state seeded with ``initial`` if none is stored yet (else
        ``initial`` is ignored), its local copy fetched. See
        :class:`~pravega_ray.client.state_synchronizer.StateSynchronizer`.

        Raises InvalidNameError, InvalidArgumentError (serializer; ``initial`` over the
        table value limit serialized), SerializationError, ScopeNotFoundError,
        IllegalStateError (scope being deleted), SegmentStoreUnavailableError.
        """
        return open_state_synchronizer(
            scope, name, serializer, self._controller, self._segments, initial=initial
        )

    def list_state_synchronizers(self, scope: str) -> list[str]:
        """The state synchronizers of ``scope``, sorted. Raises ScopeNotFoundError."""
        return self._controller.list_state_synchronizers(scope)

    def delete_state_synchronizer(self, scope: str, name: str) -> bool:
        """Delete the synchronizer and its state; False if it does not exist. Its clients'
        next calls that reach the state raise StateSynchronizerNotFoundError. Not repeated
        on ControllerUnavailableError (the caller knows whether to try again)."""
        return self._controller.delete_state_synchronizer(scope, name)

    def key_value_table(
        self,
        scope: str,
        table: str,
        key_serializer: Serializer[K] | None = None,
        value_serializer: Serializer[V] | None = None,
    ) -> KeyValueTable[Any, Any]:
        """A client of key-value table ``scope/table`` (create it with the stream manager).

        Keys and values are bytes unless serializers say otherwise. Raises
        KeyValueTableNotFoundError, and IllegalStateError while it is being
        created or deleted.
        """
        info = self._controller.get_active_key_value_table(scope, table)
        return KeyValueTable(info, self._segments, key_serializer, value_serializer)
