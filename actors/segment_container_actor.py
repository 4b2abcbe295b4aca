"""Ray shell of a segment container: owns one ``SegmentContainer``, recovers it in ``__init__``.

It implements the segment store's service surface
(:class:`~pravega_ray.contracts.segment_store_service.SegmentStoreService`): each method forwards
to the container (``tests/unit/segmentstore/test_service_surface.py`` holds them to the
Protocol's signatures), plus ``describe``.

If the container's durable log fails (I/O error, fenced by a newer owner) the
process exits at once, so Ray restarts the actor and the constructor recovers
from the log: in-flight callers see ``RayActorError`` (outcome unknown), which
the writer resolves with ``setup_append``.

If recovery finds the stored data damaged (DataCorruptionError), restarting cannot help:
the actor stays up and every call raises that error, naming what is damaged, while the
other containers serve as usual.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Sequence

import ray

from pravega_ray.constants import CONTAINER_RECOVERY_ATTEMPTS_MAX
from pravega_ray.contracts.attributes import NULL_VALUE, AttributeUpdate
from pravega_ray.contracts.segment_store import (
    AppendResult,
    ReadResult,
    SegmentInfo,
    SegmentRole,
    SegmentTraffic,
    TableEntry,
    TableUpdate,
    TableUpdateResult,
)
from pravega_ray.endpoints import EndpointConfig, wire_port_for
from pravega_ray.errors import (
    ContainerNotReadyError,
    DataCorruptionError,
    PravegaError,
)
from pravega_ray.naming import container_for_segment
from pravega_ray.segmentstore.builder import build_container_on
from pravega_ray.segmentstore.config import ContainerConfig
from pravega_ray.wire.gateway import GatewayConfig, WireGateway
from pravega_ray_actors.ray_metrics import setup_actor_process
from pravega_ray_actors.scale_reporter import RayScaleReporter

log = logging.getLogger(__name__)


def _exit_for_restart(error: BaseException) -> None:
    log.error("segment container stopping for restart: %r", error)
    os._exit(1)


class SegmentContainerActor:
    def __init__(self, tier1: str, tier2: str, container_id: int) -> None:
        setup_actor_process()
        self._tiers = {"tier1": tier1, "tier2": tier2}
        self._container_id = container_id
        self._gateway: WireGateway | None = None  # Pravega's wire protocol, once asked
        self._gateway_port = 0
        self._gateway_config: tuple[EndpointConfig, int] | None = None
        self._gateway_lock = asyncio.Lock()
        started = time.monotonic()
        for attempt in range(CONTAINER_RECOVERY_ATTEMPTS_MAX):
            self._container = build_container_on(
                tier1,
                tier2,
                ContainerConfig(container_id),
                on_fatal=_exit_for_restart,
                scale_reporter=RayScaleReporter(),
            )
            try:
                built = time.monotonic()
                stats = self._container.recover()
                log.info(
                    "container %d ready in %.2fs (attempt %d; storage opened in %.2fs, "
                    "log replayed in %.2fs)",
                    container_id,
                    time.monotonic() - started,
                    attempt + 1,
                    built - started,
                    stats.seconds,
                )
                break
            except DataCorruptionError as e:  # kept: each call raises it (see the docstring)
                log.error("container %d cannot recover: %s", container_id, e)
                break
            except Exception as e:
                # An S3 listing raced a writer (RetriableError), or storage failed for now: an
                # S3 server throttling (botocore's SlowDown, found by the chaos run), a network
                # or disk error. Recovery is tried again: a constructor that raises leaves an
                # actor Ray never restarts, so the container would be gone for good.
                log.warning("container %d recovery attempt %d: %r", container_id, attempt, e)
                time.sleep(min(5.0, 0.2 * (attempt + 1)))
        else:
            raise ContainerNotReadyError(f"container {container_id} could not recover")

    async def wire_endpoint(
        self, container_count: int, config: dict[str, object]
    ) -> tuple[str, int]:
        """The ``(host, port)`` where this container serves Pravega's wire protocol, opening
        its gateway first if it is not open (``pravega_ray/endpoints.py``; ``config`` is an
        ``EndpointConfig.to_dict()``; another one than the gateway was opened with opens it
        again). Segments it does not own (of ``container_count``) are answered WRONG_HOST.
        With the config's TLS files the gateway speaks TLS; with its password file it checks
        every request's delegation token, signed with the secret every endpoint derives
        from the same files (docs/security.md). ``host`` is what clients are given
        (``EndpointConfig.client_host``: the published host; with TLS ``localhost`` on
        loopback or this node's name on a wildcard host; else the IP). The gateway lives
        as long as this actor process: the ``endpoints`` actor asks every container every
        second, so a restarted container opens it again at once, on the same port unless
        the config's ``wire_port_base`` is 0. ConfigurationError if a file of the config
        cannot be read here; OSError (after one retry a second later, for a predecessor's
        socket still closing) if the port cannot be bound."""
        async with self._gateway_lock:  # calls of an async actor run side by side
            current = self._gateway_config
            if (
                self._gateway is not None
                and current is not None
                and (current[0].to_dict(), current[1]) == (config, container_count)
            ):
                endpoint = current[0]  # asked every second: the files are not read again
            else:
                endpoint = EndpointConfig(**config)  # type: ignore[arg-type]
                if self._gateway is not None:
                    await self._gateway.stop()  # configured otherwise since: open it again
                    self._gateway = None
                self._gateway = await self._open_gateway(endpoint, container_count)
                self._gateway_config = (endpoint, container_count)
        host, node_name = endpoint.host, None
        if endpoint.binds_everywhere:
            host, node_name = ray.util.get_node_ip_address(), socket.getfqdn()
        return endpoint.client_host(host, node_name), self._gateway_port

    async def _open_gateway(self, endpoint: EndpointConfig, container_count: int) -> WireGateway:
        port = wire_port_for(endpoint, self._container_id, container_count)
        me = self._container_id
        tls_files = endpoint.tls_files()
        access = endpoint.access_control()

        def owns(segment: str) -> bool:
            return container_for_segment(segment, container_count) == me

        for attempt in range(2):
            gateway = WireGateway(
                self._container,
                owns=owns,
                config=GatewayConfig(host=endpoint.host, port=port),
                tls=tls_files.server_context() if tls_files is not None else None,
                tokens=access.tokens if access is not None else None,
            )
            try:
                self._gateway_port = await gateway.start()
                return gateway
            except OSError as e:
                if attempt:
                    raise
                log.warning("container %d: wire port %d: %r; trying again", me, port, e)
                await asyncio.sleep(1.0)
        raise AssertionError("unreachable")

    async def describe(self) -> dict[str, object]:
        """Identity, used by ``start_local`` to refuse joining a cluster on other storage."""
        return {
            **self._tiers,
            "container_id": self._container_id,
            "pid": os.getpid(),
            "node_id": ray.get_runtime_context().get_node_id(),
        }

    # --- SegmentStoreService: segments ---------------------------------------------------------
    async def create_segment(self, segment: str, role: SegmentRole = SegmentRole.NORMAL) -> None:
        await self._container.create_segment(segment, role)

    async def setup_append(self, segment: str, writer_id: bytes) -> int:
        return await self._container.setup_append(segment, writer_id)

    async def append(
        self,
        segment: str,
        writer_id: bytes,
        expected_last_event_number: int,
        last_event_number: int,
        event_count: int,
        data: bytes,
    ) -> AppendResult:
        return await self._container.append(
            segment, writer_id, expected_last_event_number, last_event_number, event_count, data
        )

    async def append_conditional(
        self,
        segment: str,
        data: bytes,
        attribute_updates: tuple[AttributeUpdate, ...] = (),
        expected_offset: int | None = None,
        event_count: int = 0,
    ) -> AppendResult:
        return await self._container.append_conditional(
            segment, data, attribute_updates, expected_offset, event_count
        )

    async def read(self, segment: str, offset: int, max_bytes: int, wait_s: float) -> ReadResult:
        return await self._container.read(segment, offset, max_bytes, wait_s)

    async def read_range(self, segment: str, offset: int, length: int) -> bytes:
        return await self._container.read_range(segment, offset, length)

    async def get_info(self, segment: str) -> SegmentInfo:
        return await self._container.get_info(segment)

    async def get_offset_at_time(self, segment: str, time_ms: int) -> int:
        return await self._container.get_offset_at_time(segment, time_ms)

    async def check_event_boundary(self, segment: str, offset: int) -> None:
        await self._container.check_event_boundary(segment, offset)

    async def locate_offset(self, segment: str, offset: int) -> int:
        return await self._container.locate_offset(segment, offset)

    async def seal(self, segment: str) -> int:
        return await self._container.seal(segment)

    async def truncate(self, segment: str, offset: int) -> None:
        await self._container.truncate(segment, offset)

    async def create_transient_segment(self, parent: str) -> str:
        return await self._container.create_transient_segment(parent)

    async def merge(
        self, target: str, source: str, attributes: tuple[AttributeUpdate, ...] = ()
    ) -> int:
        return await self._container.merge(target, source, attributes)

    async def delete_segment(self, segment: str) -> None:
        await self._container.delete_segment(segment)

    async def seal_and_merge(
        self, target: str, sources: Sequence[str], more: Sequence[tuple[str, Sequence[str]]] = ()
    ) -> list[PravegaError | None]:
        return await self._container.seal_and_merge(target, sources, more)

    # --- SegmentStoreService: attributes -------------------------------------------------------
    async def get_attributes(self, segment: str, keys: list[bytes]) -> dict[bytes, int]:
        return await self._container.get_attributes(segment, keys)

    async def update_attributes(self, segment: str, updates: tuple[AttributeUpdate, ...]) -> None:
        await self._container.update_attributes(segment, updates)

    async def iterate_attributes(
        self, segment: str, after: bytes | None, limit: int
    ) -> tuple[list[tuple[bytes, int]], bytes | None]:
        return await self._container.iterate_attributes(segment, after, limit)

    # --- SegmentStoreService: table segments ---------------------------------------------------
    async def table_create(self, segment: str) -> None:
        await self._container.table_create(segment)

    async def table_update(
        self,
        segment: str,
        updates: Sequence[TableUpdate],
        client_id: bytes | None = None,
        client_last: int = NULL_VALUE,
        watcher: bytes | None = None,
    ) -> TableUpdateResult:
        return await self._container.table_update(segment, updates, client_id, client_last, watcher)

    async def table_get(self, segment: str, keys: Sequence[bytes]) -> list[TableEntry | None]:
        return await self._container.table_get(segment, keys)

    async def table_iterate(
        self,
        segment: str,
        cursor: bytes | None,
        limit: int,
        with_values: bool = True,
        key_prefix: bytes | None = None,
    ) -> tuple[list[TableEntry], bytes | None]:
        return await self._container.table_iterate(segment, cursor, limit, with_values, key_prefix)

    async def table_read_changes(
        self, segment: str, from_offset: int, max_bytes: int
    ) -> tuple[list[TableEntry], int]:
        return await self._container.table_read_changes(segment, from_offset, max_bytes)

    async def table_changes(
        self, segment: str, from_offset: int | None, max_bytes: int
    ) -> tuple[list[TableEntry], int, int]:
        return await self._container.table_changes(segment, from_offset, max_bytes)

    async def table_watch(
        self, segment: str, holder: bytes, from_offset: int | None, wait_s: float, max_bytes: int
    ) -> tuple[list[TableEntry], int, int, float]:
        return await self._container.table_watch(segment, holder, from_offset, wait_s, max_bytes)

    async def table_unwatch(self, segment: str, holder: bytes) -> None:
        await self._container.table_unwatch(segment, holder)

    # --- SegmentStoreService: the whole container ----------------------------------------------
    async def list_segments(self) -> list[str]:
        return await self._container.list_segments()

    async def flush_to_storage(self) -> None:
        await self._container.flush_to_storage()

    async def checkpoint(self) -> int:
        return await self._container.checkpoint()

    async def get_traffic(self) -> list[SegmentTraffic]:
        return await self._container.get_traffic()
