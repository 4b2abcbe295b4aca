"""Stream manager: scopes and streams (Pravega's ``StreamManager``)."""

from __future__ import annotations

from pravega_ray.client.connection import ControllerConnection
from pravega_ray.constants import KVT_PARTITIONS_DEFAULT
from pravega_ray.controller.records import KeyValueTableInfo, StreamInfo
from pravega_ray.stream_configuration import StreamConfiguration


class StreamManager:
    def __init__(self, controller: ControllerConnection) -> None:
        self._controller = controller

    def create_scope(self, scope: str) -> bool:
        """Create a scope; False if it exists. Raises InvalidNameError for a bad name."""
        return self._controller.create_scope(scope)

    def list_scopes(self) -> list[str]:
        return self._controller.list_scopes()

    def delete_scope(self, scope: str) -> bool:
        """Delete an empty scope; False if absent.

        ScopeNotEmptyError while it has streams, key-value tables or reader groups.
        """
        return self._controller.delete_scope(scope)

    def create_stream(
        self, scope: str, stream: str, config: StreamConfiguration | None = None
    ) -> bool:
        """Create a stream; False if it exists.

        Raises ScopeNotFoundError, InvalidNameError, InvalidArgumentError (config is not a
        StreamConfiguration); nothing is created then.
        """
        config = StreamConfiguration() if config is None else config
        return self._controller.create_stream(scope, stream, config)

    def list_streams(self, scope: str) -> list[str]:
        return self._controller.list_streams(scope)

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        """State, configuration and current segments. Raises StreamNotFoundError."""
        return self._controller.get_stream_info(scope, stream)

    def seal_stream(self, scope: str, stream: str) -> bool:
        """Seal the stream: later writes fail with StreamSealedError. Idempotent."""
        return self._controller.seal_stream(scope, stream)

    def create_key_value_table(
        self, scope: str, table: str, partitions: int = KVT_PARTITIONS_DEFAULT
    ) -> bool:
        """Create a key-value table of ``partitions`` table segments; False if it exists.

        Raises ScopeNotFoundError, InvalidNameError, InvalidArgumentError (partitions
        outside [1, 1024]). The partition count is fixed for the table's life.
        """
        return self._controller.create_key_value_table(scope, table, partitions)

    def get_key_value_table_info(self, scope: str, table: str) -> KeyValueTableInfo:
        """Partitions and segments. Raises KeyValueTableNotFoundError."""
        return self._controller.get_key_value_table(scope, table)

    def list_key_value_tables(self, scope: str) -> list[str]:
        return self._controller.list_key_value_tables(scope)

    def delete_key_value_table(self, scope: str, table: str) -> bool:
        """Delete the table and all its data; False if it does not exist."""
        return self._controller.delete_key_value_table(scope, table)
