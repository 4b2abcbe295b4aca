"""What every controller-side actor builds the same way: its segment helper and metadata store.

The controller API actor, the request event processor and the stream bucket actors each
reach the segment containers by name (``segment-container-<i>`` in their namespace, looked
up again when the cluster manager moves one) and share the controller's records, kept in
table segments of ``_system`` (``controller/table_metadata_store.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.controller.table_metadata_store import TableMetadataStore, open_metadata_store
from pravega_ray.segmentstore.builder import build_chunk_storage
from pravega_ray_actors.options import container_name
from pravega_ray_actors.ray_calls import RayServiceInvoker, lookup


@dataclass(frozen=True, slots=True)
class ControllerParts:
    segments: SegmentHelper
    metadata: TableMetadataStore


def controller_parts(
    tier2: str, container_count: int, namespace: str, *, watch: bool = False
) -> ControllerParts:
    """Look the containers up by name and open the controller's metadata store (``watch``:
    holding leases on its table segments, for the actors that serve most reads: the
    controller API instances and the commit processor)."""
    handles = [lookup(container_name(i), namespace) for i in range(container_count)]
    invoker = RayServiceInvoker(handles, namespace)
    segments = SegmentHelper(SegmentStoreClient(invoker), container_count=container_count)
    metadata = open_metadata_store(
        SegmentStoreClient(invoker), build_chunk_storage(tier2), watch=watch
    )
    return ControllerParts(segments, metadata)
