"""Ray shell of the cluster manager: owns the container-to-node map and moves containers.

One detached named actor (``cluster-manager``, options in ``actors/options.py``). Its
work runs on a thread of its own, every ``period_s`` (``CLUSTER_MANAGER_PERIOD_S``):

1. Look at the alive Ray nodes (one that just joined counts from the next pass on) and ask
   every container where it runs (``describe``).
2. When the node set changed (or on start, or when asked by :meth:`rebalance_now`), plan
   the target map with :func:`~pravega_ray.cluster_assignment.plan_assignment` (balanced,
   fewest moves) from the current map, where a container whose mapped node is gone counts
   as being where Ray restarted it. A changed map is stored durably *before* anything
   moves.
3. Move, one at a time, each container not running where the map says: stop it on its node
   (``ray.kill(no_restart=True)``, then wait until its name is free) and create it again
   with node affinity to its new node. The new actor recovers from its durable log, and
   recovery fences the log (its epoch), so the old process could not write even if it
   lingered.

A move interrupted by the manager's own death is finished by its successor: the stored map
says where each container belongs, and step 3 on start moves or creates every container not
running there. A damaged stored map is logged as DataCorruptionError and rebuilt from where
the containers run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError

from pravega_ray.cluster_assignment import AssignmentStore, plan_assignment
from pravega_ray.constants import (
    CLUSTER_MANAGER_CALL_TIMEOUT_S,
    CLUSTER_MANAGER_PERIOD_S,
    CLUSTER_MANAGER_RETRY_PERIODS,
    CONTAINER_PLACEMENT_ATTEMPTS_MAX,
)
from pravega_ray.errors import ContainerNotReadyError, DataCorruptionError, InvalidArgumentError
from pravega_ray.segmentstore.builder import build_chunk_storage
from pravega_ray_actors.options import container_name, segment_container_options
from pravega_ray_actors.ray_metrics import setup_actor_process
from pravega_ray_actors.segment_container_actor import SegmentContainerActor

log = logging.getLogger(__name__)

_ABSENT = "absent"
"""Placement of a container no actor of that name runs for (stopped, never started)."""


def alive_node_ids() -> list[str]:
    """Alive Ray nodes, in a stable (sorted) order."""
    return sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))


def wait_actor_gone(name: str, namespace: str, deadline: float) -> bool:
    """Wait until no actor is named ``name``; False if it still was at ``deadline``."""
    while True:
        try:
            ray.get_actor(name, namespace=namespace)
        except ValueError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


PLACEMENT_WAIT_S = 10.0
"""How long :func:`placed_node` waits for Ray to place a new actor before giving up."""


def placed_node(handle: Any, wait_s: float = PLACEMENT_WAIT_S) -> str | None:
    """The node Ray placed the actor of ``handle`` on, read from the GCS actor table as soon
    as it is placed (before its constructor, a container's recovery, ends); None if it was
    not placed within ``wait_s`` or the table cannot be read (the caller asks the actor)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:  # Ray 2.60's GCS actor table (no dashboard needed)
            entry = ray._private.state.actors(handle._actor_id.hex())
        except Exception as e:  # its layout is Ray's: never let it stop a placement
            log.debug("cannot read where actor %r runs: %r", handle, e)
            return None
        node = (entry.get("Address") or {}).get("NodeID") if isinstance(entry, dict) else None
        if node and set(str(node)) != {"f"}:  # all f: the nil id, not placed yet
            return str(node)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def start_container_on(
    container_id: int,
    namespace: str,
    node_id: str,
    tier1: str,
    tier2: str,
    env: dict[str, Any],
    timeout_s: float | None = None,
) -> Any:
    """Create container ``container_id`` (its name must be free), preferably on ``node_id``.

    Soft node affinity lets a restart after a node loss go elsewhere, but Ray 2.60 does
    not always honour it on first placement (seen on a 3-node ``cluster_utils`` cluster),
    so a new container found on another node is re-created, at most
    ``CONTAINER_PLACEMENT_ATTEMPTS_MAX`` times; after that it stays where it is. Where Ray
    put it is read as soon as it is placed (:func:`placed_node`), so a misplaced attempt is
    stopped before its recovery, not after: one costs a fraction of a second, not a
    recovery. Returns once the container answered (recovered), with its handle.
    ``timeout_s`` bounds each wait (None: no bound): GetTimeoutError if a new container did
    not answer in time, ContainerNotReadyError if a stopped one's name did not free.
    """
    name = container_name(container_id)
    actor = ray.remote(SegmentContainerActor)
    options = {**segment_container_options(container_id, namespace, node_id), **env}
    for attempt in range(CONTAINER_PLACEMENT_ATTEMPTS_MAX):
        last = attempt == CONTAINER_PLACEMENT_ATTEMPTS_MAX - 1
        handle: Any = actor.options(**options).remote(tier1, tier2, container_id)
        early = None if last else placed_node(handle)
        if early is None or early == node_id:
            placed = ray.get(handle.describe.remote(), timeout=timeout_s)
            if placed["node_id"] == node_id or last:
                return handle
        else:
            log.info(
                "container %d placed on %s, not %s: placed again", container_id, early, node_id
            )
        ray.kill(handle, no_restart=True)
        if not wait_actor_gone(name, namespace, time.monotonic() + (timeout_s or 30.0)):
            raise ContainerNotReadyError(f"{name} was stopped but its name did not free")
    raise AssertionError("unreachable")


class ClusterManagerActor:
    """Owns where each segment container runs; see the module docstring.

    ``container_env`` holds the extra actor options containers are created with (e.g. the
    ``runtime_env`` carrying S3 settings), the same ``start_local`` uses.
    """

    def __init__(
        self,
        tier1: str,
        tier2: str,
        container_count: int,
        namespace: str,
        period_s: float = CLUSTER_MANAGER_PERIOD_S,
        container_env: dict[str, Any] | None = None,
    ) -> None:
        setup_actor_process()
        if not isinstance(container_count, int) or container_count < 1:
            raise InvalidArgumentError("container_count must be an int >= 1")
        if not isinstance(period_s, (int, float)) or not 0 < period_s <= 3600:
            raise InvalidArgumentError("period_s must be a number in (0, 3600]")
        self._tiers = {"tier1": tier1, "tier2": tier2}
        self._containers = list(range(container_count))
        self._namespace = namespace
        self._period_s = float(period_s)
        self._env = dict(container_env or {})
        self._store = AssignmentStore(build_chunk_storage(tier2))
        self._state = threading.Lock()  # guards the fields describe() reads
        self._pass_lock = threading.Lock()  # one pass (and so one move) at a time
        self._assignment: dict[int, str] = {}
        self._stored = False  # False until the map was loaded or stored this incarnation
        self._damage: str | None = None
        self._moves = 0
        self._moving: dict[str, Any] | None = None
        self._nodes: list[str] = []
        self._alive_before: set[str] = set()
        self._passes = 0
        self._last_error: str | None = None
        self._retry_after: dict[int, tuple[int, float]] = {}
        """Container -> (failed moves in a row, monotonic time before which none is tried)."""
        self._handles: dict[int, Any] = {}
        try:
            stored = self._store.load()
        except DataCorruptionError as e:
            log.error("cluster manager: %s; rebuilding the map from the live containers", e)
            self._damage = str(e)
            stored = None
        if stored is not None:
            self._assignment = {c: n for c, n in stored.items() if c in set(self._containers)}
            self._stored = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cluster-manager", daemon=True)
        self._thread.start()

    # --- surface ---------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The map and progress: ``assignment`` {container id: node id}, ``moves`` (done by
        this incarnation), ``moving`` (the move under way or None), ``nodes`` (alive at the
        last pass), ``passes``, ``damaged`` (why the stored map was rebuilt, or None),
        ``last_error``, ``period_s``, ``pid`` (changes when Ray restarts the manager) and the
        tiers. Answers while a move runs."""
        with self._state:
            return {
                **self._tiers,
                "container_count": len(self._containers),
                "assignment": dict(self._assignment),
                "moves": self._moves,
                "moving": dict(self._moving) if self._moving else None,
                "nodes": list(self._nodes),
                "passes": self._passes,
                "damaged": self._damage,
                "last_error": self._last_error,
                "period_s": self._period_s,
                "pid": os.getpid(),
            }

    def rebalance_now(self) -> dict[str, Any]:
        """Run one full pass now (re-plan and move what must move), then :meth:`describe`.

        Waits for a pass under way to end first. Failed moves are retried at once here.
        """
        with self._pass_lock:
            self._retry_after.clear()
            self._pass(replan=True)
        return self.describe()

    def stop(self) -> None:
        """End the loop after the pass under way (``Cluster.shutdown`` kills the actor after)."""
        self._stop.set()

    # --- the loop --------------------------------------------------------------------------------
    def _run(self) -> None:
        replan = True  # on start: reconcile with the stored map (finishes an interrupted move)
        while not self._stop.is_set():
            try:
                with self._pass_lock:
                    self._pass(replan)
                replan = False
            except Exception as e:  # keep managing: the next pass starts from what is observed
                log.exception("cluster manager pass failed")
                with self._state:
                    self._last_error = repr(e)
            self._stop.wait(self._period_s)

    def _pass(self, replan: bool) -> None:
        """Under the pass lock: plan if needed, store the map, then move what must move."""
        alive = alive_node_ids()
        # A node that just joined is used from the next pass on: Ray's scheduler learns of a
        # node after its node table does, and until then node affinity to it falls back to
        # another node. The first pass of an incarnation uses every alive node.
        nodes = [n for n in alive if n in self._alive_before or self._passes == 0]
        self._alive_before = set(alive)
        if not nodes:
            return
        placement = self._observe()
        with self._state:
            changed = nodes != self._nodes
            self._nodes = nodes
        if replan or changed or not self._stored:
            self._plan(nodes, placement)
        with self._state:  # counted once the map is set: describe() never shows a pass, no map
            self._passes += 1
        for c in self._containers:
            target = self._assignment[c]
            where = placement.get(c)
            if where is None or where == target or target not in nodes:
                continue  # unknown (still recovering): looked at again next pass
            if where != _ABSENT and time.monotonic() < self._retry_after.get(c, (0, 0.0))[1]:
                continue  # a stopped container is created at once; a running one waits
            try:
                self._move(c, target, where)
                self._retry_after.pop(c, None)
            except (ContainerNotReadyError, RayError) as e:
                log.warning("cluster manager: moving container %d to %s failed: %r", c, target, e)
                failures = self._retry_after.get(c, (0, 0.0))[0] + 1
                wait_s = CLUSTER_MANAGER_RETRY_PERIODS * self._period_s * 2 ** min(failures, 5)
                self._retry_after[c] = (failures, time.monotonic() + wait_s)
                with self._state:
                    self._last_error = repr(e)
            finally:
                with self._state:
                    self._moving = None

    def _plan(self, nodes: list[str], placement: dict[int, str | None]) -> None:
        """Compute the target map; store it (before any move) if it differs from the stored one."""
        alive = set(nodes)
        current = {c: n for c, n in self._assignment.items() if n in alive}
        for c in self._containers:
            where = placement.get(c)
            if c not in current and where is not None and where in alive:
                current[c] = where  # its node is gone and Ray restarted it there: a free move
        target = plan_assignment(self._containers, current, nodes)
        if target != self._assignment or not self._stored:
            self._store.store(target)
            self._stored = True
            moved = sum(1 for c, n in target.items() if placement.get(c) != n)
            log.info(
                "cluster manager: nodes %s; new map stored, %d containers to move", nodes, moved
            )
        with self._state:
            self._assignment = target

    def _observe(self) -> dict[int, str | None]:
        """Where each container runs: a node id, ``_ABSENT`` (no such actor), or None (no
        answer in time, e.g. recovering; not moved this pass)."""
        refs: dict[int, Any] = {}
        placement: dict[int, str | None] = {}
        for c in self._containers:
            handle = self._handle(c)
            if handle is None:
                placement[c] = _ABSENT
            else:
                refs[c] = handle.describe.remote()
        if refs:
            ray.wait(list(refs.values()), num_returns=len(refs), timeout=self._period_s * 5)
        for c, ref in refs.items():
            try:
                placement[c] = ray.get(ref, timeout=0)["node_id"]
            except GetTimeoutError:
                placement[c] = None
            except RayError:  # that actor died: is another one running under its name?
                self._handles.pop(c, None)
                placement[c] = _ABSENT if self._handle(c) is None else None
        return placement

    def _handle(self, container_id: int) -> Any | None:
        handle = self._handles.get(container_id)
        if handle is None:
            try:
                handle = ray.get_actor(container_name(container_id), namespace=self._namespace)
            except ValueError:
                return None
            self._handles[container_id] = handle
        return handle

    def _move(self, container_id: int, node_id: str, where: str) -> None:
        """Stop container ``container_id`` (if it runs) and create it again on ``node_id``."""
        name = container_name(container_id)
        with self._state:
            self._moving = {"container": container_id, "from": where, "to": node_id}
        log.info("cluster manager: moving container %d from %s to %s", container_id, where, node_id)
        started = time.monotonic()
        self._handles.pop(container_id, None)
        # Not running: a move stopped it and its manager died before creating it again.
        with contextlib.suppress(ValueError):
            ray.kill(ray.get_actor(name, namespace=self._namespace), no_restart=True)
        if not wait_actor_gone(name, self._namespace, started + CLUSTER_MANAGER_CALL_TIMEOUT_S):
            raise ContainerNotReadyError(f"{name} was stopped but its name did not free")
        handle = start_container_on(
            container_id,
            self._namespace,
            node_id,
            self._tiers["tier1"],
            self._tiers["tier2"],
            self._env,
            CLUSTER_MANAGER_CALL_TIMEOUT_S,
        )
        self._handles[container_id] = handle
        with self._state:
            self._moves += 1
        placed = ray.get(handle.describe.remote(), timeout=CLUSTER_MANAGER_CALL_TIMEOUT_S)
        if placed["node_id"] != node_id:
            # Ray kept placing it elsewhere; it serves there. Trying again at once would stop
            # it every period, so the failure backs off (see _pass).
            raise ContainerNotReadyError(f"{name} started on {placed['node_id']}, not {node_id}")
        log.info(
            "cluster manager: container %d now on %s (%.1fs)",
            container_id,
            node_id,
            time.monotonic() - started,
        )
