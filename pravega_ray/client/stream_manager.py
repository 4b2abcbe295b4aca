"""Stream manager: scopes and streams (Pravega's ``StreamManager``)."""

from __future__ import annotations

from pravega_ray.client.connection import ControllerConnection
from pravega_ray.controller.records import StreamInfo
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
        """Delete an empty scope; False if absent; ScopeNotEmptyError if it has streams."""
        return self._controller.delete_scope(scope)

    def create_stream(
        self, scope: str, stream: str, config: StreamConfiguration | None = None
    ) -> bool:
        """Create a stream; False if it exists. Raises ScopeNotFoundError, InvalidNameError."""
        return self._controller.create_stream(scope, stream, config or StreamConfiguration())

    def list_streams(self, scope: str) -> list[str]:
        return self._controller.list_streams(scope)

    def get_stream_info(self, scope: str, stream: str) -> StreamInfo:
        """State, configuration and current segments. Raises StreamNotFoundError."""
        return self._controller.get_stream_info(scope, stream)

    def seal_stream(self, scope: str, stream: str) -> bool:
        """Seal the stream: later writes fail with StreamSealedError. Idempotent."""
        return self._controller.seal_stream(scope, stream)
