"""Ray shell of the controller: owns one ``Controller``; its state lives in Tier-2 records."""

from __future__ import annotations

import logging
from typing import Any

import ray

from actors.options import NAMESPACE, container_name
from actors.ray_calls import RayServiceInvoker
from pravega_ray.controller.controller import Controller
from pravega_ray.controller.metadata_store import MetadataStore
from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.segmentstore.builder import build_chunk_storage
from pravega_ray.segmentstore.service import SegmentStoreClient


class ControllerActor:
    def __init__(
        self, tier1: str, tier2: str, container_count: int, namespace: str = NAMESPACE
    ) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        self._tiers = {"tier1": tier1, "tier2": tier2}
        store = MetadataStore(build_chunk_storage(tier2))
        containers = [
            ray.get_actor(container_name(i), namespace=namespace) for i in range(container_count)
        ]
        segments = SegmentHelper(SegmentStoreClient(RayServiceInvoker(containers)))
        self._controller = Controller(store, segments, container_count)

    def describe(self) -> dict[str, object]:
        return {**self._tiers, "container_count": self._controller.container_count}

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Invoke a public ``Controller`` method by name (the client's ControllerConnection)."""
        if method.startswith("_") or not hasattr(self._controller, method):
            raise AttributeError(f"controller has no method {method!r}")
        return getattr(self._controller, method)(*args, **kwargs)
