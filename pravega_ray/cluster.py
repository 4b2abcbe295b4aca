"""Find or create pravega-ray's actors on Ray and hand out clients.

``start_local`` is the embedded default: it starts (or joins) a local Ray and
creates, in namespace ``pravega``, the detached named actors ``controller`` (and
``controller-<i>``, more instances of the controller API), ``segment-container-<i>``, the
controller's workers (``request-event-processor``, ``commit-event-processor``,
``abort-event-processor``, ``transaction-timer``, ``stream-bucket-<i>``) and
``cluster-manager`` (which owns where containers run from then on), with data under
``data_dir``. ``connect`` joins
a running cluster whose actors exist already (e.g. on a ``ray up`` cluster).
Both return a :class:`Cluster`, whose client methods come from
:class:`~pravega_ray.client.client_factory.ClientFactory`.

Data directory layout::

    <data_dir>/cluster.json      {"format": 6, "container_count": N, "tier1": URL, "tier2": URL}
    <data_dir>/tier1/container-<i>/   durable logs (default Tier-1)
    <data_dir>/tier2/            Tier-2 chunks and controller records (default Tier-2)
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import ray

from pravega_ray.client.client_factory import ClientFactory
from pravega_ray.client.connection import SegmentStoreConnection
from pravega_ray.client.controller_connection import ControllerClient
from pravega_ray.cluster_assignment import AssignmentStore, plan_assignment
from pravega_ray.constants import (
    BUCKET_PERIOD_S,
    CLUSTER_MANAGER_PERIOD_S,
    CONTROLLER_CALL_TIMEOUT_S,
    DEFAULT_CONTAINER_COUNT,
    RETENTION_BUCKETS_DEFAULT,
    RETENTION_PERIOD_S_DEFAULT,
    WATERMARK_PERIOD_S_DEFAULT,
)
from pravega_ray.contracts.arguments import check_seconds
from pravega_ray.contracts.controller_service import method_name
from pravega_ray.endpoints import EndpointConfig
from pravega_ray.errors import (
    ConfigurationError,
    ControllerUnavailableError,
    DataCorruptionError,
    IllegalStateError,
    InvalidArgumentError,
)
from pravega_ray.logging_setup import (
    ACTOR_LOG_LEVEL_VARIABLE,
    quiet_ray_data,
    quiet_ray_notices,
    quiet_requested,
    verbose_logging,
)
from pravega_ray.segmentstore.builder import default_tier_urls, parse_storage_url
from pravega_ray.timing import SYSTEM_CLOCK, Clock
from pravega_ray_actors.abort_processor_actor import AbortProcessorActor
from pravega_ray_actors.cluster_manager_actor import (
    ClusterManagerActor,
    start_container_on,
    wait_actor_gone,
)
from pravega_ray_actors.commit_processor_actor import CommitProcessorActor
from pravega_ray_actors.controller_actor import ControllerActor
from pravega_ray_actors.endpoints_actor import EndpointsActor
from pravega_ray_actors.options import (
    ABORT_PROCESSOR_NAME,
    CLUSTER_MANAGER_NAME,
    COMMIT_PROCESSOR_NAME,
    CONTROLLER_CONCURRENCY_GROUPS,
    CONTROLLER_INSTANCES_DEFAULT,
    CONTROLLER_INSTANCES_MAX,
    CONTROLLER_NAME,
    ENDPOINTS_NAME,
    NAMESPACE,
    REQUEST_PROCESSOR_NAME,
    TRANSACTION_WORKER_NAMES,
    TXN_TIMER_NAME,
    cluster_manager_options,
    container_name,
    controller_name,
    controller_options,
    controller_part_options,
    endpoints_options,
    stream_bucket_name,
)
from pravega_ray_actors.ray_calls import RayServiceInvoker, call_with_unwrap
from pravega_ray_actors.ray_metrics import install_ray_metrics
from pravega_ray_actors.request_processor_actor import RequestProcessorActor
from pravega_ray_actors.stream_bucket_actor import StreamBucketActor
from pravega_ray_actors.txn_timer_actor import TxnTimerActor

__all__ = ["Cluster", "connect", "node_environment", "start_local"]

log = logging.getLogger(__name__)

R = TypeVar("R")

RETENTION_PERIOD_S_MAX = 7 * 24 * 3600.0
"""The longest ``retention_period_s`` ``start_local`` accepts (a week)."""

CONTAINER_STARTS_AT_ONCE = 16
"""How many containers ``start_local`` creates side by side (each start waits for its
container to answer in a thread of its own)."""

DEFAULT_DATA_DIR = "./.pravega-data"
_CLUSTER_FILE = "cluster.json"
_FORMAT = 7
"""Version of the stored formats (log records, chunks, records).

2: appends carry attributes. 3: extended attributes persist in the B+tree attribute
index (``attributes-btree/`` chunks) instead of sorted batches (``attributes/``).
4: log frames checksum their header too (magic ``PRL2``), chunks carry CRCs in the
metadata, the attribute index's root is logged, Tier-2 fences (``fences/``). Format-3
data is read as it is, so upgrading 3 -> 4 only records the number.
5: segments created from now on name their Tier-2 chunks and attribute index by their
incarnation (``<segment>#incarnation.<epoch>-<n>``), so a segment deleted and created again
never shares them with its predecessor; older segments keep their names, so upgrading
4 -> 5 only records the number (a format-4 build would miss the new names: it is refused).
6: controller records in table segments of _system; 5 -> 6 migrates on the controller's first
start (``controller/table_metadata_store.open_metadata_store`` copies the ``_system/controller/``
chunks, finishing a copy cut short by a crash; the chunks stay, unread).
7: stream records name their routing rule (``key_hash``: Pravega's hash for streams created
from now on; records without it keep the legacy rule), so 6 -> 7 only records the number (a
format-6 build would route the new streams' keys by the legacy rule: it is refused).
"""


UNAVAILABLE_AVOID_S = 5.0
"""How long an instance whose call failed with an unknown outcome gets no new calls while
another instance may take them."""


class RayControllerConnection:
    """Invokes each controller call on one of the controller instances, once (a
    ``ControllerInvoker``).

    Calls are spread over ``handles`` round robin. An instance whose call failed with
    ControllerUnavailableError (died, restarting, unanswered) gets no new calls for
    ``UNAVAILABLE_AVOID_S`` while another instance is not so marked, so the caller's repeat
    (``ControllerClient`` repeats where that is safe, at once while another instance is
    left: :attr:`instance_count`) goes to another instance. Thread-safe.

    Each actor has a method per call of ``ControllerService``; the Protocol's own function
    names it. Ray's errors are unwrapped in ``actors/ray_calls.py``.
    """

    def __init__(self, handles: list[Any], *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._handles = list(handles)
        if not self._handles:
            raise InvalidArgumentError("a controller connection needs at least one instance")
        self._clock = clock
        self._lock = threading.Lock()
        self._next = 0
        self._avoid_until = [0.0] * len(self._handles)

    @property
    def instance_count(self) -> int:
        return len(self._handles)

    def _pick(self) -> int:
        with self._lock:
            now = self._clock.monotonic()
            count = len(self._handles)
            for step in range(count):
                index = (self._next + step) % count
                if self._avoid_until[index] <= now:
                    self._next = index + 1
                    return index
            index = self._next % count  # all marked: round robin anyway
            self._next = index + 1
            return index

    def invoke(self, method: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
        index = self._pick()
        remote = getattr(self._handles[index], method_name(method))
        try:
            result: R = call_with_unwrap(
                remote.remote(*args, **kwargs),
                CONTROLLER_CALL_TIMEOUT_S,
                ControllerUnavailableError,
            )
        except ControllerUnavailableError:
            with self._lock:
                self._avoid_until[index] = self._clock.monotonic() + UNAVAILABLE_AVOID_S
            raise
        return result


class Cluster(ClientFactory):
    """A running pravega-ray cluster: clients plus lifecycle (``shutdown``)."""

    def __init__(
        self,
        namespace: str,
        controller: Any,
        containers: list[Any],
        data_dir: Path | None,
        owns_ray: bool,
    ) -> None:
        self.namespace = namespace
        self.data_dir = data_dir
        self._controller_handles: list[Any] = (
            list(controller) if isinstance(controller, (list, tuple)) else [controller]
        )
        self._controller_handle = self._controller_handles[0]
        self._container_handles = containers
        self._invoker = RayServiceInvoker(containers, namespace)
        self._owns_ray = owns_ray
        self._closed = False
        super().__init__(
            ControllerClient(RayControllerConnection(self._controller_handles)),
            SegmentStoreConnection(self._invoker),
        )

    @property
    def container_count(self) -> int:
        return len(self._container_handles)

    def controller_handle(self) -> Any:
        """The handle of controller instance 0 (``controller``)."""
        return self._controller_handle

    def controller_handles(self) -> list[Any]:
        """The handles of the controller instances this client spreads its calls over."""
        return list(self._controller_handles)

    def container_handles(self) -> list[Any]:
        return list(self._container_handles)

    def container_handle(self, segment: str) -> Any:
        """The actor handle of the container owning ``segment``."""
        return self._invoker.handle(segment)

    def endpoints(self) -> dict[str, Any] | None:
        """Where Pravega's own clients reach this cluster, None if it serves no endpoints
        (``start_local(endpoints=...)``): ``{"controller": "tcp://127.0.0.1:9090",
        "rest": "http://127.0.0.1:9091/v1", "segment_store": {container id: "IP:port"},
        "config": {...}}``. Opens any wire
        gateway not open (a container that restarted opens it on first use)."""
        try:
            actor = ray.get_actor(ENDPOINTS_NAME, namespace=self.namespace)
        except ValueError:
            return None
        description = ray.get(actor.describe.remote(), timeout=CONTROLLER_CALL_TIMEOUT_S)
        wire = ray.get(actor.wire_endpoints.remote(), timeout=CONTROLLER_CALL_TIMEOUT_S)
        return {
            "controller": description["grpc"],
            "rest": description["rest"],
            "segment_store": {int(i): f"{host}:{port}" for i, (host, port) in wire.items()},
            "config": description["config"],
        }

    def shutdown(self) -> None:
        """Stop the cluster manager, the endpoints, controller instances and container
        actors; the data stays in ``data_dir``.

        The manager goes first (it would start the containers stopped here again). Each
        actor is found by name, so a container the manager moved (a new actor) stops too.
        If ``start_local`` started Ray itself, Ray is shut down too (stop a
        Spark session first: ``pravega_ray.spark.stop_spark()``).
        """
        deadline = time.monotonic() + 30
        for name in (CLUSTER_MANAGER_NAME, ENDPOINTS_NAME):
            _kill_by_name(name, self.namespace, None)
        for name in (CLUSTER_MANAGER_NAME, ENDPOINTS_NAME):
            wait_actor_gone(name, self.namespace, deadline)
        workers = _controller_worker_names(self.namespace)
        for name in workers:
            _kill_by_name(name, self.namespace, None)
        for name in workers:
            wait_actor_gone(name, self.namespace, deadline)
        instances = _controller_instance_names(self.namespace)
        ours = {controller_name(i): h for i, h in enumerate(self._controller_handles)}
        handles = [(name, ours.get(name)) for name in instances]
        handles += [(name, h) for name, h in ours.items() if name not in instances]
        handles += [(container_name(i), h) for i, h in enumerate(self._container_handles)]
        for name, handle in handles:
            _kill_by_name(name, self.namespace, handle)
        for name, _ in handles:
            wait_actor_gone(name, self.namespace, deadline)
        log.info("pravega-ray cluster in namespace %r stopped", self.namespace)
        self.close()

    def close(self) -> None:
        """Release this client; shuts Ray down only if this process started it here."""
        if self._closed:
            return
        self._closed = True
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def _record_format(path: Path, stored: dict[str, Any], data_format: int) -> dict[str, Any]:
    upgraded = {**stored, "format": data_format}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(upgraded))
    os.replace(tmp, path)
    return upgraded


def _upgrade_from_format_2(path: Path, stored: dict[str, Any], default2: str) -> dict[str, Any]:
    """Move format-2 attribute chunks into the B+tree index, then record format 3."""
    from pravega_ray.segmentstore.builder import build_chunk_storage
    from pravega_ray.segmentstore.migrations import migrate_attributes_2_to_3

    log.info("upgrading %s from data format 2 to 3 ...", path.parent)
    segments = migrate_attributes_2_to_3(build_chunk_storage(stored.get("tier2", default2)))
    log.info("upgraded %s: attributes of %d segments moved", path.parent, segments)
    return _record_format(path, stored, 3)


def _check_data_dir(
    data_dir: Path, container_count: int, tier1: str | None, tier2: str | None
) -> tuple[str, str]:
    """Create or check ``cluster.json``; returns the cluster's (tier1, tier2) URLs."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / _CLUSTER_FILE
    default1, default2 = default_tier_urls(data_dir)
    asked = {
        "tier1": str(parse_storage_url(tier1)) if tier1 else None,
        "tier2": str(parse_storage_url(tier2)) if tier2 else None,
    }
    if path.exists():
        try:
            stored = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError) as e:
            raise DataCorruptionError(f"{path} is not valid JSON: {e}", path=str(path)) from None
        if not isinstance(stored, dict):
            raise DataCorruptionError(f"{path} does not hold a JSON object", path=str(path))
        if stored.get("format") == 2:
            stored = _upgrade_from_format_2(path, stored, default2)
        if stored.get("format") == 3:
            log.info("upgrading %s from data format 3 to 4 (nothing to rewrite)", data_dir)
            stored = _record_format(path, stored, 4)
        if stored.get("format") == 4:
            log.info("upgrading %s from data format 4 to 5 (nothing to rewrite)", data_dir)
            stored = _record_format(path, stored, 5)
        if stored.get("format") == 5:
            log.info(
                "upgrading %s from data format 5 to 6: the controller copies its records into "
                "table segments when it starts",
                data_dir,
            )
            stored = _record_format(path, stored, 6)
        if stored.get("format") == 6:
            log.info("upgrading %s from data format 6 to 7 (nothing to rewrite)", data_dir)
            stored = _record_format(path, stored, 7)
        if stored.get("format") != _FORMAT:
            raise ConfigurationError(
                f"{data_dir} holds data in format {stored.get('format')}; this pravega-ray reads "
                f"format {_FORMAT}. Use the version that wrote it, or delete the directory."
            )
        stored.setdefault("tier1", default1)
        stored.setdefault("tier2", default2)
        if stored.get("container_count") != container_count:
            raise ConfigurationError(
                f"{data_dir} holds a cluster of {stored.get('container_count')} containers; "
                f"it cannot be opened with container_count={container_count} (segments are "
                f"placed by container count)"
            )
        for tier, url in asked.items():
            if url is not None and url != stored[tier]:
                raise ConfigurationError(
                    f"{data_dir} keeps its {tier} at {stored[tier]}, not {url}"
                )
        return stored["tier1"], stored["tier2"]
    tier1, tier2 = asked["tier1"] or default1, asked["tier2"] or default2
    record = {"format": _FORMAT, "container_count": container_count, "tier1": tier1, "tier2": tier2}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)
    return tier1, tier2


def _storage_environment(tier1: str, tier2: str) -> dict[str, Any]:
    """Actor options that hand this process's ``AWS_*`` settings to the actors, for S3 tiers.

    boto3's standard chain reads them (endpoint, credentials, region). Nothing is
    passed for directory tiers. On a ``ray up`` cluster, instance roles usually
    make this unnecessary; variables set here are visible in Ray's actor metadata.
    """
    if not any(parse_storage_url(t).scheme == "s3" for t in (tier1, tier2)):
        return {}
    env_vars = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    return {"runtime_env": {"env_vars": env_vars}} if env_vars else {}


def _start_container(
    container_id: int, namespace: str, node_id: str, tier1: str, tier2: str, env: dict[str, Any]
) -> Any:
    """Join container ``container_id`` if it runs, else create it, preferably on ``node_id``
    (see ``start_container_on``); from then on the cluster manager owns its placement."""
    try:
        return ray.get_actor(container_name(container_id), namespace=namespace)
    except ValueError:
        return start_container_on(container_id, namespace, node_id, tier1, tier2, env)


def _kill_by_name(name: str, namespace: str, fallback: Any | None) -> None:
    """Stop the actor now named ``name`` (else ``fallback``, if given) for good."""
    handle: Any
    try:
        handle = ray.get_actor(name, namespace=namespace)
    except ValueError:
        handle = fallback
    if handle is not None:
        ray.kill(handle, no_restart=True)


def _initial_placement(tier2: str, container_count: int) -> dict[int, str]:
    """Where new containers start: the cluster manager's plan from its stored map.

    The manager plans with the same function, so it finds them where it wants them and
    moves nothing at start. A damaged stored map is ignored here (the manager reports it).
    """
    from pravega_ray.segmentstore.builder import build_chunk_storage

    store = AssignmentStore(build_chunk_storage(tier2))
    try:
        stored = store.load() or {}
    except DataCorruptionError:
        stored = {}
    return plan_assignment(range(container_count), stored, _alive_node_ids())


def _create_controller_workers(
    namespace: str,
    tier1: str,
    tier2: str,
    container_count: int,
    env: dict[str, Any],
    buckets: int,
    retention_period_s: float = RETENTION_PERIOD_S_DEFAULT,
    watermark_period_s: float = WATERMARK_PERIOD_S_DEFAULT,
) -> list[Any]:
    """Join or create the request, commit and abort event processors, the transaction timer
    and the stream bucket actors; returns their handles at once (each may still be starting:
    :func:`_check_controller_workers` waits for them)."""
    args = (tier1, tier2, container_count, namespace)
    shells: list[tuple[str, Any]] = [
        (REQUEST_PROCESSOR_NAME, RequestProcessorActor),
        (COMMIT_PROCESSOR_NAME, CommitProcessorActor),
        (ABORT_PROCESSOR_NAME, AbortProcessorActor),
        (TXN_TIMER_NAME, TxnTimerActor),
    ]
    return [
        ray.remote(shell).options(**controller_part_options(name, namespace), **env).remote(*args)
        for name, shell in shells
    ] + [
        ray.remote(StreamBucketActor)
        .options(**controller_part_options(stream_bucket_name(b), namespace), **env)
        .remote(
            *args,
            b,
            buckets,
            BUCKET_PERIOD_S,
            retention_period_s,
            watermark_period_s=watermark_period_s,
        )
        for b in range(buckets)
    ]


def _check_controller_workers(
    descriptions: list[dict[str, Any]], namespace: str, tier1: str, tier2: str, buckets: int
) -> None:
    """ConfigurationError if a controller worker that already ran serves other storage or
    another bucket count."""
    for description in descriptions:
        if (description["tier1"], description["tier2"]) != (tier1, tier2):
            raise ConfigurationError(
                f"controller workers on {description['tier1']} / {description['tier2']} "
                f"already run in namespace {namespace!r}; shut them down first"
            )
        if description.get("buckets", buckets) != buckets:
            raise ConfigurationError(
                f"the running cluster has {description['buckets']} stream buckets, not "
                f"{buckets}: the bucket count is fixed for a cluster's life"
            )


def _controller_instance_names(namespace: str) -> list[str]:
    """The names of the controller instances running in ``namespace`` (``controller``,
    ``controller-1``, ... up to the first name no actor has)."""
    names: list[str] = []
    for instance in range(CONTROLLER_INSTANCES_MAX):
        try:
            ray.get_actor(controller_name(instance), namespace=namespace)
        except ValueError:
            break
        names.append(controller_name(instance))
    return names


def _start_controller_instances(
    namespace: str,
    tier1: str,
    tier2: str,
    container_count: int,
    env: dict[str, Any],
    instances: int,
) -> list[Any]:
    """Join or create controller instances ``0 .. instances-1`` (any more that run stay)."""
    remote: Any = ray.remote  # its overloads do not list concurrency_groups
    shell = remote(concurrency_groups=CONTROLLER_CONCURRENCY_GROUPS)(ControllerActor)
    return [
        shell.options(**controller_options(namespace, i), **env).remote(
            tier1, tier2, container_count, namespace, i
        )
        for i in range(instances)
    ]


def _describe_any(controllers: list[Any]) -> dict[str, Any]:
    """The description of the first controller instance that answers; the last one's
    ControllerUnavailableError if none does."""
    for i, controller in enumerate(controllers):
        try:
            description: dict[str, Any] = call_with_unwrap(
                controller.describe.remote(), CONTROLLER_CALL_TIMEOUT_S, ControllerUnavailableError
            )
            return description
        except ControllerUnavailableError:
            if i == len(controllers) - 1:
                raise
    raise AssertionError("unreachable: a cluster has at least one controller instance")


def _controller_worker_names(namespace: str) -> list[str]:
    """The request, commit and abort event processors, the transaction timer and every
    stream bucket actor running in ``namespace``."""
    names = [REQUEST_PROCESSOR_NAME, *TRANSACTION_WORKER_NAMES]
    for bucket in range(64):
        try:
            ray.get_actor(stream_bucket_name(bucket), namespace=namespace)
        except ValueError:
            break
        names.append(stream_bucket_name(bucket))
    return names


def _create_cluster_manager(
    namespace: str, tier1: str, tier2: str, container_count: int, env: dict[str, Any]
) -> Any:
    """Join or create the cluster manager; returns its handle at once."""
    return (
        ray.remote(ClusterManagerActor)
        .options(**cluster_manager_options(namespace), **env)
        .remote(tier1, tier2, container_count, namespace, CLUSTER_MANAGER_PERIOD_S, env)
    )


def _check_cluster_manager(
    description: dict[str, Any], namespace: str, tier1: str, tier2: str, container_count: int
) -> None:
    """ConfigurationError if a cluster manager that already ran serves other storage."""
    if (description["tier1"], description["tier2"], description["container_count"]) != (
        tier1,
        tier2,
        container_count,
    ):
        raise ConfigurationError(
            f"a cluster manager for {description['tier1']} / {description['tier2']} "
            f"({description['container_count']} containers) already runs in namespace "
            f"{namespace!r}; shut it down or use another namespace"
        )


def _start_containers(
    namespace: str, placement: dict[int, str], tier1: str, tier2: str, env: dict[str, Any]
) -> list[Any]:
    """Join or create every container, each preferably on its node in ``placement``, side by
    side (each waits until its container answered): a container's start is mostly its worker
    process's, and a machine starts several of those at once about as fast as one."""
    count = len(placement)
    with ThreadPoolExecutor(
        max_workers=min(count, CONTAINER_STARTS_AT_ONCE), thread_name_prefix="container-start"
    ) as pool:
        starts = [
            pool.submit(_start_container, i, namespace, placement[i], tier1, tier2, env)
            for i in range(count)
        ]
        return [start.result() for start in starts]


def _endpoint_config(endpoints: object) -> EndpointConfig | None:
    """``start_local``'s ``endpoints`` as a config (None: no endpoints)."""
    if endpoints is False:
        return None
    if endpoints is True:
        return EndpointConfig()
    if isinstance(endpoints, EndpointConfig):
        return endpoints
    raise InvalidArgumentError(f"endpoints must be a bool or an EndpointConfig, got {endpoints!r}")


def _start_endpoints(
    namespace: str, container_count: int, config: EndpointConfig, env: dict[str, Any]
) -> None:
    """Join or create the ``endpoints`` actor (gRPC API) and open every container's wire
    gateway; ConfigurationError if one runs with another config or a port cannot be bound."""
    actor: Any = (
        ray.remote(EndpointsActor)
        .options(**endpoints_options(namespace, ray.get_runtime_context().get_node_id()), **env)
        .remote(container_count, namespace, config.to_dict())
    )
    try:
        description = ray.get(actor.describe.remote())
    except ray.exceptions.RayActorError as e:
        ray.kill(actor, no_restart=True)
        raise ConfigurationError(f"the endpoints could not start: {e}") from e
    if description["config"] != config.to_dict():
        raise ConfigurationError(
            f"endpoints with {description['config']} already run in namespace {namespace!r}; "
            "shut the cluster down to change them"
        )
    try:
        wire = ray.get(actor.wire_endpoints.remote())
    except ray.exceptions.RayError as e:
        raise ConfigurationError(f"a container's wire gateway could not start: {e}") from e
    log.info(
        "pravega-ray endpoints: controller gRPC %s, segment store %s",
        description["grpc"],
        ", ".join(f"{host}:{port}" for host, port in wire.values()),
    )


def _alive_node_ids() -> list[str]:
    """Alive Ray nodes, in a stable order; containers are spread over them round robin."""
    return sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))


RAY_WORKER_WARNING_MULTIPLE = 4
"""Ray warns ("N PYTHON worker processes have been started on node ... which is Kx the maximum
expected startup concurrency") once a node's Python workers, less its I/O workers, reach this
multiple of the node's worker startup concurrency (raylet ``WorkerPool::WarnAboutSize``)."""

LONG_LIVED_ACTORS = (
    CONTROLLER_NAME,
    controller_name(1),
    CLUSTER_MANAGER_NAME,
    REQUEST_PROCESSOR_NAME,
    *TRANSACTION_WORKER_NAMES,
)
"""The actors ``start_local`` starts by default besides the containers and the stream buckets
(two controller instances)."""


def node_environment(
    container_count: int,
    retention_buckets: int,
    num_cpus: int | None = None,
    controller_instances: int = CONTROLLER_INSTANCES_DEFAULT,
) -> dict[str, str]:
    """Ray settings for a node that Ray starts to host a pravega-ray cluster: ``RAY_<config>``
    variables the raylet reads when it starts (``ray.init`` or ``ray start`` passes its own
    environment on). ``num_cpus`` is the node's CPU count if not all of this machine's.

    * ``prestart_worker_first_driver=0``. Ray starts one idle Python worker per CPU for the
      first driver, outside the job's runtime environment. Every actor and task of a
      pravega-ray program runs in that environment (it carries the actors' log level), so
      those workers never run anything: off, none are started, and ``ray.init`` does not
      wait for them.
    * ``worker_maximum_startup_concurrency``: Ray's default is the CPU count, and Ray warns
      once a node runs :data:`RAY_WORKER_WARNING_MULTIPLE` times that many Python workers:
      meant for task workers piling up (tasks blocked in ``ray.get``), it also counts
      pravega-ray's long-lived actors, which hold no CPU (4 containers, 4 stream buckets and
      7 others by default, two of them controller instances, ``controller_instances``).
      On 2 CPUs the demo crossed it as the cluster started and again in its Spark step.
      Here it is the CPU count plus a quarter of the actors, rounded up (6 on 2 CPUs with
      the defaults): the actors alone no longer count towards the warning,
      which keeps its meaning for task workers, and Ray may start that many workers at once.

    Both are Ray's defaults otherwise; a variable the user set is left as it is.
    """
    extra_controllers = controller_instances - CONTROLLER_INSTANCES_DEFAULT
    actors = container_count + retention_buckets + len(LONG_LIVED_ACTORS) + extra_controllers
    cpus = os.cpu_count() or 1
    if num_cpus is not None:
        cpus = max(1, min(cpus, num_cpus))
    concurrency = cpus + math.ceil(actors / RAY_WORKER_WARNING_MULTIPLE)
    return {
        "RAY_prestart_worker_first_driver": "0",
        "RAY_worker_maximum_startup_concurrency": str(concurrency),
    }


@contextlib.contextmanager
def _environment_while(variables: dict[str, str]) -> Iterator[None]:
    """``variables`` in this process's environment (those the user set win) inside the
    block only: the processes started meanwhile inherit them, this process keeps its own."""
    added = {k: v for k, v in variables.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def _init_ray(
    address: str | None, namespace: str, node_variables: dict[str, str] | None = None
) -> bool:
    """Start or join Ray; True if this call initialized it. Either way this process's
    metrics go to Ray from now on (``actors/ray_metrics.py``). ``node_variables``
    (:func:`node_environment`) reach the node Ray starts if ``address`` is None and none
    runs yet (RAY_ADDRESS unset or ``local``).

    Logs (pravega_ray/logging_setup.py): Ray's driver logger at WARNING (INFO if
    verbose). If the program asked for quiet logs (``configure_logging(False)``), the job's
    runtime environment sets pravega-ray's actors to WARNING, and Ray's startup notices and Ray
    Data's banners are lowered. Warnings and errors of every actor still reach this terminal
    (``log_to_driver`` stays on).
    """
    if ray.is_initialized():
        install_ray_metrics()
        return False
    os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
    actor_level = "WARNING" if quiet_requested() else "INFO"
    quiet_ray_notices()
    with _environment_while(node_variables if address is None and node_variables else {}):
        ray.init(
            address=address,
            namespace=namespace,
            include_dashboard=False,
            logging_level=logging.INFO if verbose_logging() else logging.WARNING,
            runtime_env={"env_vars": {ACTOR_LOG_LEVEL_VARIABLE: actor_level}},
        )
    quiet_ray_data()
    install_ray_metrics()
    return True


def start_local(
    data_dir: str | os.PathLike[str] | None = None,
    container_count: int = DEFAULT_CONTAINER_COUNT,
    *,
    tier1: str | None = None,
    tier2: str | None = None,
    namespace: str = NAMESPACE,
    retention_buckets: int = RETENTION_BUCKETS_DEFAULT,
    retention_period_s: float = RETENTION_PERIOD_S_DEFAULT,
    controller_instances: int = CONTROLLER_INSTANCES_DEFAULT,
    endpoints: bool | EndpointConfig = False,
    watermark_period_s: float = WATERMARK_PERIOD_S_DEFAULT,
) -> Cluster:
    """Start (or rejoin) an embedded cluster on a local Ray.

    Creates the detached actors ``segment-container-<i>``, ``controller`` (the API) and
    ``controller-<i>`` (``controller_instances`` instances of the API in all, an int in
    [1, 64]; each serves any call, and the client spreads its calls over them and moves on
    from one that died),
    ``request-event-processor`` (stream workflows), ``commit-event-processor`` and
    ``abort-event-processor`` (transaction commits and aborts), ``transaction-timer``
    (aborts transactions whose lease ran out), ``stream-bucket-<i>`` (periodic
    per-stream work, ``retention_buckets`` of them, each running the retention cycle of its
    streams every ``retention_period_s``, a finite number of seconds in (0, 1 week], and
    the watermark workflow every ``watermark_period_s``, in (0, 1 week]) and
    ``cluster-manager``, and with ``endpoints`` (True: Pravega's ports on 127.0.0.1; or an
    :class:`~pravega_ray.endpoints.EndpointConfig`) ``endpoints``, serving Pravega's
    controller gRPC API, and each container's wire gateway, for Pravega's own clients
    (``cluster.endpoints()`` says where), in
    ``namespace`` unless they run already (then they are joined, after checking they
    serve the same storage). Every scope, stream and event is
    recovered from storage. ``tier1`` (durable logs) and ``tier2`` (chunks,
    controller records) are ``file:///path`` or ``s3://bucket/prefix`` URLs;
    both default to directories under ``data_dir`` (default
    ``./.pravega-data``), which also keeps ``cluster.json``. Raises
    ConfigurationError if ``data_dir`` was created with another container
    count or other tiers, or the running actors serve other storage.
    """
    if not isinstance(container_count, int) or not 1 <= container_count <= 1024:
        raise InvalidArgumentError("container_count must be an int in [1, 1024]")
    if isinstance(retention_buckets, bool) or not isinstance(retention_buckets, int):
        raise InvalidArgumentError("retention_buckets must be an int in [1, 64]")
    if not 1 <= retention_buckets <= 64:
        raise InvalidArgumentError("retention_buckets must be an int in [1, 64]")
    if isinstance(controller_instances, bool) or not isinstance(controller_instances, int):
        raise InvalidArgumentError(
            f"controller_instances must be an int in [1, {CONTROLLER_INSTANCES_MAX}]"
        )
    if not 1 <= controller_instances <= CONTROLLER_INSTANCES_MAX:
        raise InvalidArgumentError(
            f"controller_instances must be an int in [1, {CONTROLLER_INSTANCES_MAX}]"
        )
    retention_period_s = check_seconds(
        "retention_period_s", retention_period_s, RETENTION_PERIOD_S_MAX, positive=True
    )
    watermark_period_s = check_seconds(
        "watermark_period_s", watermark_period_s, RETENTION_PERIOD_S_MAX, positive=True
    )
    endpoint_config = _endpoint_config(endpoints)
    path = Path(data_dir if data_dir is not None else DEFAULT_DATA_DIR).resolve()
    tier1_url, tier2_url = _check_data_dir(path, container_count, tier1, tier2)
    node_variables = node_environment(
        container_count, retention_buckets, controller_instances=controller_instances
    )
    owns_ray = _init_ray(None, namespace, node_variables)
    started = time.monotonic()
    placement = _initial_placement(tier2_url, container_count)
    env = _storage_environment(tier1_url, tier2_url)
    containers = _start_containers(namespace, placement, tier1_url, tier2_url, env)
    # Every other actor at once: each looks the containers up and opens the metadata store on
    # its own (a concurrent migration of old records is safe), so none waits for another.
    controllers = _start_controller_instances(
        namespace, tier1_url, tier2_url, container_count, env, controller_instances
    )
    workers = _create_controller_workers(
        namespace,
        tier1_url,
        tier2_url,
        container_count,
        env,
        retention_buckets,
        retention_period_s,
        watermark_period_s,
    )
    manager = _create_cluster_manager(namespace, tier1_url, tier2_url, container_count, env)
    # Every describe is sent before the first wait, so the actors start side by side.
    asked = [[h.describe.remote() for h in group] for group in (containers, controllers, workers)]
    manager_asked = manager.describe.remote()
    containers_described, controllers_described, workers_described = map(ray.get, asked)
    for description in containers_described + controllers_described:
        if (description["tier1"], description["tier2"]) != (tier1_url, tier2_url):
            raise ConfigurationError(
                f"a pravega-ray cluster on {description['tier1']} / {description['tier2']} "
                f"already runs in namespace {namespace!r}; shut it down or use another namespace"
            )
    if any(d["container_count"] != container_count for d in controllers_described):
        raise ConfigurationError("the running controller has a different container count")
    _check_controller_workers(workers_described, namespace, tier1_url, tier2_url, retention_buckets)
    _check_cluster_manager(ray.get(manager_asked), namespace, tier1_url, tier2_url, container_count)
    if endpoint_config is not None:
        _start_endpoints(namespace, container_count, endpoint_config, env)
    log.info(
        "pravega-ray: %d containers ready in %.1fs (tier1 %s, tier2 %s)",
        container_count,
        time.monotonic() - started,
        tier1_url,
        tier2_url,
    )
    return Cluster(namespace, controllers, containers, path, owns_ray)


def connect(address: str = "auto", *, namespace: str = NAMESPACE) -> Cluster:
    """Join a running cluster (``ray up`` or ``start_local`` elsewhere) by its actor names.

    Inside a process where Ray is initialized already, ``address`` is ignored. The client
    spreads its controller calls over every controller instance running then.
    Raises IllegalStateError if no pravega-ray controller runs in ``namespace``.
    """
    owns_ray = _init_ray(address, namespace)
    names = _controller_instance_names(namespace)
    if not names:
        raise IllegalStateError(
            f"no pravega-ray cluster runs in Ray namespace {namespace!r}; "
            "start one with pravega_ray.start_local()"
        )
    controllers = [ray.get_actor(name, namespace=namespace) for name in names]
    description = _describe_any(controllers)
    containers = [
        ray.get_actor(container_name(i), namespace=namespace)
        for i in range(description["container_count"])
    ]
    return Cluster(namespace, controllers, containers, None, owns_ray)
