"""Every ``ray.remote`` option pravega-ray uses, in one place.

* Containers are **async** actors: many calls run concurrently (tail
  long-polls must not block appends), and ordering does not rely on Ray
  (docs/stack.md: async actors reorder pipelined calls); each append is conditional
  on its predecessor and waits for it inside the container.
* ``max_task_retries=0``: a call interrupted by a crash is *not* retried by
  Ray. Its outcome is unknown; the writer's setup_append protocol resolves it
  (Ray retries would break exactly-once and ordering).
* ``max_restarts=-1``: a killed container or controller instance comes back and
  recovers from durable storage in its constructor.
* ``num_cpus=0``: the actors hold no CPU reservation, so the whole system plus
  a Spark session fit on a 2-CPU machine (docs/stack.md, "Placement on 2 CPUs").
* Detached and named in namespace ``pravega``: they outlive the driver that
  created them; ``connect()`` finds them by name.
"""

from __future__ import annotations

from typing import Any

NAMESPACE = "pravega"
CONTROLLER_NAME = "controller"
CLUSTER_MANAGER_NAME = "cluster-manager"
ENDPOINTS_NAME = "endpoints"


def container_name(container_id: int) -> str:
    return f"segment-container-{container_id}"


def segment_container_options(
    container_id: int, namespace: str = NAMESPACE, node_id: str | None = None
) -> dict[str, Any]:
    """Options of container ``container_id``; ``node_id`` places it (softly) on a node.

    Soft affinity: if that node is gone when the actor (re)starts, Ray places
    it on another node, so a container survives the loss of its node.
    """
    placement: dict[str, Any] = {}
    if node_id is not None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        placement["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id, soft=True)
    return {
        **placement,
        "name": container_name(container_id),
        "namespace": namespace,
        "lifetime": "detached",
        "get_if_exists": True,
        "num_cpus": 0,
        "max_restarts": -1,
        "max_task_retries": 0,
        "max_concurrency": 1000,
    }


CONTROLLER_INSTANCES_DEFAULT = 2
"""Controller API instances ``start_local`` starts unless told otherwise."""
CONTROLLER_INSTANCES_MAX = 64
CONTROLLER_READS_GROUP = "reads"
CONTROLLER_TXNS_GROUP = "transactions"
CONTROLLER_MAX_CONCURRENCY = 16
"""Calls of the default group (creates, scales, updates, deletes) one instance runs at once."""
CONTROLLER_CONCURRENCY_GROUPS = {CONTROLLER_READS_GROUP: 16, CONTROLLER_TXNS_GROUP: 32}
"""The other concurrency groups of a controller instance (``ray.remote(concurrency_groups=)``,
which ``.options()`` does not take) and the calls each runs at once: reads (queries, pings,
``check_*``) never wait behind creates, scales or deletes (the default group), nor behind
transaction calls, whose commits may wait server-side."""


def controller_name(instance: int) -> str:
    """Instance 0 is ``controller`` (other parts look it up by that name), then
    ``controller-1``, ``controller-2``, ..."""
    return CONTROLLER_NAME if instance == 0 else f"{CONTROLLER_NAME}-{instance}"


def controller_options(namespace: str = NAMESPACE, instance: int = 0) -> dict[str, Any]:
    """Options of controller API instance ``instance``: a threaded actor (the controller core
    is thread-safe; its records change by compare-and-set only) whose calls run in the
    concurrency groups of :data:`CONTROLLER_CONCURRENCY_GROUPS` (given to ``ray.remote``)
    and the default group, :data:`CONTROLLER_MAX_CONCURRENCY` at once."""
    return {
        "name": controller_name(instance),
        "namespace": namespace,
        "lifetime": "detached",
        "get_if_exists": True,
        "num_cpus": 0,
        "max_restarts": -1,
        "max_task_retries": 0,
        "max_concurrency": CONTROLLER_MAX_CONCURRENCY,
    }


def cluster_manager_options(namespace: str = NAMESPACE) -> dict[str, Any]:
    """Options of the cluster manager (``actors/cluster_manager_actor.py``).

    Threaded (a sync actor running several calls at once): ``describe`` answers while a
    move is under way, since the manager's work runs on its own thread. No task retries:
    ``rebalance_now`` interrupted by a crash is not repeated by Ray (the restarted manager
    reconciles on its own).
    """
    return controller_part_options(CLUSTER_MANAGER_NAME, namespace)


REQUEST_PROCESSOR_NAME = "request-event-processor"
COMMIT_PROCESSOR_NAME = "commit-event-processor"
ABORT_PROCESSOR_NAME = "abort-event-processor"
TXN_TIMER_NAME = "transaction-timer"
TRANSACTION_WORKER_NAMES = (COMMIT_PROCESSOR_NAME, ABORT_PROCESSOR_NAME, TXN_TIMER_NAME)
"""The transaction actors (``actors/{commit,abort}_processor_actor.py``,
``actors/txn_timer_actor.py``), controller parts with :func:`controller_part_options`."""


def stream_bucket_name(bucket: int) -> str:
    return f"stream-bucket-{bucket}"


def controller_part_options(name: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    """Options of a controller-side worker actor (the request, commit and abort event
    processors, the transaction timer, a stream bucket, the cluster manager): detached,
    restartable, threaded (its work runs on its own threads and ``describe`` answers
    meanwhile), no task retries."""
    return {
        "name": name,
        "namespace": namespace,
        "lifetime": "detached",
        "get_if_exists": True,
        "num_cpus": 0,
        "max_restarts": -1,
        "max_task_retries": 0,
        "max_concurrency": 4,
        # The commit processor is an async actor: its commits' waiters wait side by side.
        **({"max_concurrency": 1000} if name == COMMIT_PROCESSOR_NAME else {}),
    }


def endpoints_options(namespace: str = NAMESPACE, node_id: str | None = None) -> dict[str, Any]:
    """Options of the front doors' actor (``actors/endpoints_actor.py``): a controller part
    (threaded: its gRPC server runs on threads of its own), placed softly on ``node_id``
    (the node ``start_local`` ran on: where the configured address belongs)."""
    placement: dict[str, Any] = {}
    if node_id is not None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        placement["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id, soft=True)
    return {**controller_part_options(ENDPOINTS_NAME, namespace), **placement}
