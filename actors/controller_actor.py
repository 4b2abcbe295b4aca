"""Ray shell of the controller: owns one ``Controller``; its state lives in Tier-2 records."""

from __future__ import annotations

import logging
import time
from typing import Any

import ray

from actors.options import NAMESPACE, container_name
from actors.ray_calls import call_with_unwrap
from pravega_ray.constants import CONTAINER_CALL_ATTEMPTS_MAX
from pravega_ray.controller.controller import Controller
from pravega_ray.controller.stream_metadata_store import ChunkMetadataStore
from pravega_ray.errors import RetriableError
from pravega_ray.naming import container_for_segment
from pravega_ray.segmentstore.builder import build_chunk_storage


class _RaySegmentStoreAdmin:
    def __init__(self, container_count: int, namespace: str) -> None:
        self._count = container_count
        self._namespace = namespace

    def _handle(self, segment: str) -> Any:
        return ray.get_actor(
            container_name(container_for_segment(segment, self._count)), namespace=self._namespace
        )

    def _call(self, segment: str, method: str) -> Any:
        # Containers restart on their own; wait for them rather than leave a workflow half done.
        for attempt in range(CONTAINER_CALL_ATTEMPTS_MAX):
            try:
                return call_with_unwrap(getattr(self._handle(segment), method).remote(segment))
            except RetriableError:
                if attempt == CONTAINER_CALL_ATTEMPTS_MAX - 1:
                    raise
                time.sleep(0.5)
        raise AssertionError("unreachable")

    def create_segment(self, segment: str) -> None:
        self._call(segment, "create_segment")

    def create_table_segment(self, segment: str) -> None:
        self._call(segment, "table_create")

    def seal_segment(self, segment: str) -> int:
        return self._call(segment, "seal")

    def delete_segment(self, segment: str) -> None:
        self._call(segment, "delete_segment")


class ControllerActor:
    def __init__(
        self, tier1: str, tier2: str, container_count: int, namespace: str = NAMESPACE
    ) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        self._tiers = {"tier1": tier1, "tier2": tier2}
        store = ChunkMetadataStore(build_chunk_storage(tier2))
        self._controller = Controller(
            store, _RaySegmentStoreAdmin(container_count, namespace), container_count
        )

    def describe(self) -> dict[str, object]:
        return {**self._tiers, "container_count": self._controller.container_count}

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Invoke a public ``Controller`` method by name (the client's ControllerConnection)."""
        if method.startswith("_") or not hasattr(self._controller, method):
            raise AttributeError(f"controller has no method {method!r}")
        return getattr(self._controller, method)(*args, **kwargs)
