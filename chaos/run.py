"""``make chaos``: the whole system under load while its parts are killed, then checked.

Starts SeaweedFS (tests/s3_server.py) behind the fault-injecting proxy of
:mod:`chaos.s3_proxy`, a 3-node local Ray (``ray.cluster_utils.Cluster``) and
``pr.start_local`` with both tiers on S3 through the proxy; runs the load of :mod:`chaos.load`
for ``--minutes`` while the proxy fails ``--s3-fault-rate`` of the requests and the faults of
:func:`chaos.schedule.build_schedule` (seeded by ``--seed``) are injected; then stops the
faults and the load, lets the reader group read everything, and checks the invariants of
:mod:`chaos.checker`. Prints a report; its last line is one JSON object (``seed``, ``seconds``,
``acked_events``, ``lost``, ``duplicated``, ``reordered``, ``torn_transactions``,
``aborted_visible``, ``faults_injected`` by kind, ...). Exits 1 when an invariant broke or a
part of the load failed, 0 otherwise. Progress goes to stderr every 30 s.

Run: ``make chaos`` (10 minutes), ``make chaos MINUTES=2``, or
``.venv/bin/python -m chaos.run --help``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import logging
import math
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pravega_ray as pr
from chaos import checker
from chaos.event_time import EventTimeLoad
from chaos.load import (
    GROUP,
    KEYED_PREFIX,
    KEYED_STREAM,
    PIPELINE_STREAM,
    RETAINED_STREAM,
    SCALING_STREAM,
    SCOPE,
    SUBSCRIBER_GROUP,
    TABLE,
    TXN_STREAM,
    Acks,
    GroupReaders,
    KeyedWriters,
    KvClients,
    Part,
    PipelineWrites,
    ScopeDeletes,
    TxnStreamScaler,
    TxnWriters,
)
from chaos.official import KEY_PREFIX as OFFICIAL_PREFIX
from chaos.official import OFFICIAL_STREAM, OfficialClients
from chaos.proxy_process import ProxyProcess
from chaos.s3_proxy import FaultKind, ProxyFaults
from chaos.schedule import (
    CONTAINER_KILL,
    NODE_ADD,
    NODE_REMOVE,
    READER_KILL,
    TIER2_OUTAGE,
    ZOMBIE,
    Fault,
    build_schedule,
    per_ten_minutes,
)
from pravega_ray.endpoints import EndpointConfig
from pravega_ray.naming import container_for_segment

logger = logging.getLogger("chaos")

CONTAINERS = 4
NODE_ARGS: dict[str, Any] = {"num_cpus": 1, "object_store_memory": 512 * 1024 * 1024}
"""Each Ray node: one CPU (Ray Data's tasks), and an object store large enough for the
load's large events and Ray Data's blocks (with Ray's small default, Ray Data waited for
object store memory for ever)."""
RECOVERY_WAIT_S = 180.0
"""How long a fault's recovery is waited for before it counts as not recovered."""
DRAIN_STALL_S = 90.0
"""After the load, the readers read until everything is read or nothing new came for this."""
S3_TIMEOUT_FAULT_S = 3.0
"""A TIMEOUT fault holds the request this long, then closes the connection unanswered. (Held
past the client's own read timeout, ``S3_READ_TIMEOUT_S``, each of these faults, one request
in 80, would stall a Tier-1 log for that long: real S3 is not that bad.)"""
FAULT_WINDOW_S = 10.0
"""Acknowledgements within this many seconds after a fault count as 'during faults'."""
T = TypeVar("T")

TIER2_OUTAGE_S = 30.0
"""How long a Tier-2 outage (every Tier-2 request answered 503) lasts; in a run shorter than
ten times this, a tenth of the run (9 s of a 90 s smoke run)."""
KILL_RETRY_S = 30.0
"""How long an actor kill that failed (the actor restarting) is tried again."""
ZOMBIE_WRITE_S = 10.0
"""How long a zombie container keeps writing after its successor recovered."""
ZOMBIE_WAIT_S = 300.0
"""A zombie process still running this long after it started is killed (an error)."""
REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ZombieSpec:
    """Where a zombie container (:mod:`chaos.zombie`) finds the cluster's tiers: their URLs
    and the environment with the S3 endpoint (SeaweedFS itself: a zombie's own requests are
    not faulted, so it always recovers) and credentials."""

    tier1: str
    tier2: str
    env: dict[str, str]


def log(started: float, text: str) -> None:
    print(f"[chaos {time.monotonic() - started:7.1f}s] {text}", file=sys.stderr, flush=True)


class Injector:
    """Applies faults to the running cluster and times each one's recovery (the killed actor,
    or every container after a node went, answering ``describe`` again)."""

    def __init__(
        self,
        cluster: Any,
        nodes: Any,
        namespace: str,
        readers: GroupReaders,
        started: float,
        zombie: ZombieSpec,
        proxy: ProxyProcess,
        faults: ProxyFaults,
        outage_s: float = TIER2_OUTAGE_S,
    ) -> None:
        self.cluster = cluster
        self.outage_s = outage_s
        self.zombie = zombie
        self.proxy = proxy
        self.faults = faults
        self.faults_on = threading.Event()  # cleared when the run stops the S3 faults
        self.faults_on.set()
        self.nodes = nodes
        self.namespace = namespace
        self.readers = readers
        self.started = started
        self.workers = [n for n in nodes.worker_nodes]
        self.applied: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._timers: list[threading.Thread] = []

    def apply(self, fault: Fault) -> None:

        record: dict[str, Any] = {"kind": fault.kind, "at_s": round(fault.at_s, 1)}
        at = time.monotonic()
        try:
            if fault.kind == CONTAINER_KILL:
                name = f"segment-container-{fault.pick % CONTAINERS}"
                record["target"] = name
                self._kill(name, record)
                self._time_recovery(record, at, [name])
            elif fault.kind.startswith("kill:"):
                name = self._pick_actor(fault.kind.removeprefix("kill:"), fault.pick)
                record["target"] = name
                self._kill(name, record)
                self._time_recovery(record, at, [name])
            elif fault.kind == NODE_REMOVE:
                self._remove_node(record, fault.pick, at)
            elif fault.kind == NODE_ADD:
                node = self.nodes.add_node(**NODE_ARGS)
                self.workers.append(node)
                record["target"] = node.node_id[:12]
                self.nodes.wait_for_nodes()
                record["recovered_s"] = round(time.monotonic() - at, 2)
            elif fault.kind == READER_KILL:
                record["target"] = self.readers.kill(fault.pick)
            elif fault.kind == ZOMBIE:
                self._start_zombie(record, fault.pick, at)
            elif fault.kind == TIER2_OUTAGE:
                self._tier2_outage(record, at)
            else:
                record["skipped"] = "unknown kind"
        except Exception as e:  # recorded: one failed injection never stops the run
            record["error"] = f"{type(e).__name__}: {e}"
        with self._lock:
            self.applied.append(record)

    def _tier2_outage(self, record: dict[str, Any], at: float) -> None:
        """Every Tier-2 request fails (503) for ``outage_s``, then the run's S3 faults come
        back (unless the run stopped them meanwhile). Tier-1 gets no fault meanwhile."""
        record["target"] = "tier2"
        outage = ProxyFaults(rate=1.0, kinds=(FaultKind.ERROR_503,), only="tier2")
        self.proxy.set_faults(outage)

        def end() -> None:
            time.sleep(self.outage_s)
            with self._lock:
                if self.faults_on.is_set():
                    self.proxy.set_faults(self.faults)
            record["recovered_s"] = round(time.monotonic() - at, 2)

        thread = threading.Thread(target=end, name="chaos-tier2-outage", daemon=True)
        self._timers.append(thread)
        thread.start()

    def stop_s3_faults(self) -> None:
        """No S3 fault from now on (an outage ending later does not bring them back)."""
        with self._lock:
            self.faults_on.clear()
            self.proxy.set_faults(ProxyFaults(rate=0.0))

    def _kill(self, name: str, record: dict[str, Any]) -> None:
        """``ray.kill`` the actor ``name`` (Ray restarts it). An actor that is restarting
        (after an earlier fault, or fenced by the zombie) may refuse to be found or killed
        for a moment: tried again for up to KILL_RETRY_S; the last error is raised."""
        import ray

        self._retrying(
            lambda: ray.kill(ray.get_actor(name, namespace=self.namespace), no_restart=False),
            record,
        )

    @staticmethod
    def _retrying(call: Callable[[], T], record: dict[str, Any]) -> T:
        """``call()``, tried again for up to KILL_RETRY_S while it raises (an actor it needs
        is restarting); the last error is raised. ``kill_retries`` in the record counts the
        failed tries, ``kill_error`` is the last one's error."""
        deadline = time.monotonic() + KILL_RETRY_S
        while True:
            try:
                return call()
            except Exception as e:
                if time.monotonic() > deadline:
                    raise
                record["kill_retries"] = record.get("kill_retries", 0) + 1
                record["kill_error"] = f"{type(e).__name__}: {e}"[:300]
                time.sleep(1.0)

    def _remove_node(self, record: dict[str, Any], pick: int, at: float) -> None:
        """Remove a worker node that holds a container (any worker if none does); once
        every container answers again, ``moved_off`` says none is on the removed node."""
        names = [f"segment-container-{i}" for i in range(CONTAINERS)]
        held = {d["node_id"] for d in self._retrying(lambda: self._describe(names), record)}
        candidates = [w for w in self.workers if w.node_id in held] or self.workers
        if not candidates:
            record["skipped"] = "no worker node left"
            return
        node = candidates[pick % len(candidates)]
        self.workers.remove(node)
        record["target"] = node.node_id[:12]
        record["held_containers"] = node.node_id in held
        self.nodes.remove_node(node)

        def moved_off() -> None:
            for _ in range(30):  # a container may be restarting again (another fault)
                try:
                    placed = self._describe(names)
                except Exception:
                    time.sleep(1.0)
                    continue
                record["moved_off"] = all(d["node_id"] != node.node_id for d in placed)
                return
            record["moved_off"] = None  # not known: the containers kept restarting

        self._time_recovery(record, at, names, then=moved_off)

    def _start_zombie(self, record: dict[str, Any], pick: int, at: float) -> None:
        """Start a zombie of the container owning one of the keyed stream's segments; once it
        took the container over, kill the actor, and once the actor's successor answers, let
        the zombie write (:mod:`chaos.zombie`). ``zombie`` in the record is its report."""
        info = self.cluster.stream_manager().get_stream_info(SCOPE, KEYED_STREAM)
        segment = info.segments[pick % len(info.segments)].name
        name = f"segment-container-{container_for_segment(segment, CONTAINERS)}"
        record["target"] = name
        record["segment"] = segment
        command = [sys.executable, "-m", "chaos.zombie", "--tier1", self.zombie.tier1]
        command += ["--tier2", self.zombie.tier2, "--container", name.rsplit("-", 1)[1]]
        record["zombie_name"] = f"zombie{len(self.applied)}"
        command += ["--segment", segment, "--name", record["zombie_name"]]
        command += ["--write-s", str(ZOMBIE_WRITE_S)]
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.zombie.env,
            cwd=REPO,
        )
        at_monotonic = time.monotonic()
        watchdog = threading.Timer(ZOMBIE_WAIT_S, process.kill)
        watchdog.daemon = True
        watchdog.start()
        # Its stderr is read all along: a full pipe would stop the zombie mid-takeover.
        stderr: collections.deque[str] = collections.deque(maxlen=200)
        drain = threading.Thread(target=stderr.extend, args=(process.stderr,), daemon=True)
        drain.start()

        def err() -> str:
            drain.join(timeout=10)
            return "".join(stderr)[-3000:]

        def play() -> None:
            import ray

            assert process.stdin is not None and process.stdout is not None
            try:
                ready = process.stdout.readline().strip()
                if ready != "READY":
                    process.kill()
                    process.wait(timeout=60)
                    raise RuntimeError(
                        f"the zombie did not start in {time.monotonic() - at_monotonic:.1f}s "
                        f"(exit {process.returncode}, stdout {ready!r}): {err()}"
                    )
                took_over = time.monotonic()
                record["took_over_s"] = round(took_over - at, 2)
                ray.kill(ray.get_actor(name, namespace=self.namespace), no_restart=False)
                if not self._wait_for([name], took_over + RECOVERY_WAIT_S):
                    raise RuntimeError(f"{name} did not come back after the zombie took over")
                record["recovered_s"] = round(time.monotonic() - took_over, 2)
                process.stdin.write("GO\n")
                process.stdin.flush()
                out = process.stdout.read()
                process.wait(timeout=ZOMBIE_WAIT_S)
                lines = out.strip().splitlines()
                if process.returncode != 0 or not lines:
                    raise RuntimeError(f"the zombie failed ({process.returncode}): {err()}")
                record["zombie"] = json.loads(lines[-1])
            except Exception as e:  # recorded with the fault
                with self._lock:
                    record["error"] = f"{type(e).__name__}: {e}"
            finally:
                watchdog.cancel()
                if process.poll() is None:
                    process.kill()

        thread = threading.Thread(target=play, daemon=True)
        self._timers.append(thread)
        thread.start()

    def _wait_for(self, names: list[str], deadline: float) -> bool:
        """Whether every actor of ``names`` answers ``describe`` before ``deadline``."""
        import ray

        pending = list(names)
        while pending and time.monotonic() < deadline:
            try:
                handle = ray.get_actor(pending[0], namespace=self.namespace)
                ray.get(handle.describe.remote(), timeout=5)
                pending.pop(0)
            except Exception:  # not back yet
                time.sleep(0.2)
        return not pending

    def _describe(self, names: list[str]) -> list[dict[str, Any]]:
        import ray

        handles = [ray.get_actor(name, namespace=self.namespace) for name in names]
        described: list[dict[str, Any]] = ray.get(
            [h.describe.remote() for h in handles], timeout=30
        )
        return described

    def _pick_actor(self, kind: str, pick: int) -> str:
        import ray

        names = sorted(
            a["name"]
            for a in ray.util.list_named_actors(all_namespaces=True)
            if a["namespace"] == self.namespace
        )
        if kind == "controller":
            chosen = [n for n in names if n == "controller" or n.startswith("controller-")]
        elif kind == "stream-bucket":
            chosen = [n for n in names if n.startswith("stream-bucket-")]
        else:
            chosen = [n for n in names if n == kind]
        if not chosen:
            raise LookupError(f"no actor of kind {kind} among {names}")
        return str(chosen[pick % len(chosen)])

    def _time_recovery(
        self, record: dict[str, Any], at: float, names: list[str], then: Any = None
    ) -> None:
        def wait() -> None:
            back = self._wait_for(names, at + RECOVERY_WAIT_S)
            with self._lock:
                record["recovered_s"] = round(time.monotonic() - at, 2) if back else None
            if then is not None and back:
                try:
                    then()
                except Exception as e:  # recorded with the fault
                    record["error"] = f"after recovery: {type(e).__name__}: {e}"

        thread = threading.Thread(target=wait, daemon=True)
        self._timers.append(thread)
        thread.start()

    def join(self) -> None:
        for thread in self._timers:
            thread.join(RECOVERY_WAIT_S + ZOMBIE_WAIT_S + 10)


def p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


SCALING_TARGET_RATE = 10
"""The auto-scaled stream's target events/s per segment (its writer alternates between 5x and
half of it, a minute each, so it splits and, in longer runs, merges)."""
RETAINED_MIN_BYTES = 256 * 1024
"""The retained stream keeps at least this much; above it, what its subscriber released goes."""
RETENTION_PERIOD_S = 5.0


def endpoint_config() -> EndpointConfig:
    """The cluster's endpoints on free loopback ports, fixed for the run (the official
    client keeps its controller address, and a restarted container its gateway's port)."""
    from tests.ports import free_port_run

    return EndpointConfig(
        grpc_port=free_port_run(),
        rest_port=free_port_run(),
        wire_port_base=free_port_run(CONTAINERS),
    )


def create_objects(cluster: Any) -> None:
    mgr = cluster.stream_manager()
    mgr.create_scope(SCOPE)
    fixed = pr.ScalingPolicy.fixed
    mgr.create_stream(SCOPE, KEYED_STREAM, pr.StreamConfiguration(fixed(4)))
    mgr.create_stream(SCOPE, TXN_STREAM, pr.StreamConfiguration(fixed(2)))
    mgr.create_stream(SCOPE, PIPELINE_STREAM, pr.StreamConfiguration(fixed(2)))
    mgr.create_stream(SCOPE, OFFICIAL_STREAM, pr.StreamConfiguration(fixed(2)))
    scaling = pr.ScalingPolicy.by_event_rate(SCALING_TARGET_RATE, 2, 1)
    mgr.create_stream(SCOPE, SCALING_STREAM, pr.StreamConfiguration(scaling))
    retention = pr.RetentionPolicy.by_size(min_bytes=RETAINED_MIN_BYTES)
    mgr.create_stream(SCOPE, RETAINED_STREAM, pr.StreamConfiguration(fixed(2), retention))
    mgr.create_key_value_table(SCOPE, TABLE, partitions=2)
    streams = (KEYED_STREAM, TXN_STREAM, SCALING_STREAM, PIPELINE_STREAM, OFFICIAL_STREAM)
    config = pr.ReaderGroupConfig.for_streams(
        *(f"{SCOPE}/{name}" for name in streams), automatic_checkpoint_interval_s=10
    )
    cluster.create_reader_group(SCOPE, GROUP, config)
    subscriber = pr.ReaderGroupConfig.for_streams(
        f"{SCOPE}/{RETAINED_STREAM}",
        automatic_checkpoint_interval_s=5,
        retention_type=pr.RetentionConfigType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT,
        raise_on_truncated_data=True,
    )
    cluster.create_reader_group(SCOPE, SUBSCRIBER_GROUP, subscriber)


def scaling_rate(elapsed_s: float) -> float:
    """The auto-scaled stream's writer: 5x its target for a minute, then half for a minute."""
    high = int(elapsed_s // 60) % 2 == 0
    return SCALING_TARGET_RATE * (5.0 if high else 0.5)


def drain(
    readers: GroupReaders,
    acks: Acks,
    txns: TxnWriters,
    subscriber: GroupReaders,
    retained: Acks,
    started: float,
) -> bool:
    """Let the readers read until every acknowledged event and every committed transaction
    was read (by the group, and the retained stream's by its subscriber), or nothing new came
    for DRAIN_STALL_S; True if everything expected was read."""
    expected_keyed = sum(len(s) for s in acks.acked.values())
    expected_retained = sum(len(s) for s in retained.acked.values())
    expected_txn = sum(o.count for o in txns.outcomes if o.status == "committed")
    committed = {o.tag for o in txns.outcomes if o.status == "committed"}
    readers.draining.set()
    last_count, last_change = -1, time.monotonic()
    while True:
        reads = list(readers.reads)
        keyed = {(r.ident, r.seq) for r in reads if r.kind == "k"}
        txn_read = len({(r.ident, r.seq) for r in reads if r.kind == "t" and r.ident in committed})
        got_retained = len({(r.ident, r.seq) for r in subscriber.reads if r.kind == "k"})
        if (
            len(keyed) >= expected_keyed
            and txn_read >= expected_txn
            and got_retained >= expected_retained
        ):
            return True
        count = len(reads) + len(subscriber.reads)
        if count != last_count:
            last_count, last_change = count, time.monotonic()
        elif time.monotonic() - last_change > DRAIN_STALL_S:
            log(
                started,
                f"drain stalled: {len(keyed)}/{expected_keyed} keyed, "
                f"{txn_read}/{expected_txn} committed transactional, "
                f"{got_retained}/{expected_retained} retained events read",
            )
            return False
        time.sleep(1.0)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import ray
    from ray.cluster_utils import Cluster

    from tests.s3_server import running_s3_server

    started = time.monotonic()
    seconds = args.minutes * 60.0
    counts = per_ten_minutes(seconds) if not args.no_faults else {}
    schedule = build_schedule(args.seed, seconds, counts)
    log(started, f"seed {args.seed}: {len(schedule)} faults over {seconds:.0f}s")
    namespace = "chaos-" + uuid.uuid4().hex[:6]
    data_dir = Path(tempfile.mkdtemp(prefix="pravega-chaos-"))
    with running_s3_server() as s3:
        bucket = "chaos-" + uuid.uuid4().hex[:8]
        s3.client().create_bucket(Bucket=bucket)
        faults = ProxyFaults(rate=args.s3_fault_rate, timeout_s=S3_TIMEOUT_FAULT_S)
        with ProxyProcess(s3.endpoint_url, seed=args.seed) as proxy:
            os.environ.update(s3.environment())
            os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
            nodes = Cluster(
                initialize_head=True,
                head_node_args={**NODE_ARGS, "include_dashboard": False},
            )
            for _ in range(2):
                nodes.add_node(**NODE_ARGS)
            nodes.wait_for_nodes()
            ray.init(
                address=nodes.address,
                namespace=namespace,
                logging_level=logging.WARNING,
                log_to_driver=args.verbose,
            )
            cluster = None
            try:
                log(started, "starting the cluster: 4 containers, both tiers on S3 via the proxy")
                cluster = pr.start_local(
                    data_dir=data_dir,
                    container_count=CONTAINERS,
                    tier1=f"s3://{bucket}/tier1",  # the zombie's ZombieSpec below names both
                    tier2=f"s3://{bucket}/tier2",
                    namespace=namespace,
                    retention_period_s=RETENTION_PERIOD_S,
                    endpoints=endpoint_config(),
                )
                log(started, "cluster started; creating the streams, tables and groups")
                create_objects(cluster)
                log(started, "objects created; starting the load")
                zombie = ZombieSpec(
                    f"s3://{bucket}/tier1",
                    f"s3://{bucket}/tier2",
                    {**os.environ, "AWS_ENDPOINT_URL": s3.endpoint_url},
                )
                result = load_and_check(
                    args, cluster, nodes, namespace, proxy, faults, schedule, started, zombie
                )
                if not result["ok"]:
                    keep_bucket(s3.client(), bucket, args.seed, started)
            finally:
                log(started, "shutting down")
                try:
                    if cluster is not None:
                        cluster.shutdown()
                except Exception as e:  # best effort: the processes go with Ray below
                    log(started, f"shutdown: {type(e).__name__}: {e}")
                ray.shutdown()
                nodes.shutdown()
    return result


def keep_bucket(client: Any, bucket: str, seed: int, started: float) -> None:
    """Copy every object of the run's bucket (both tiers) under the temporary directory, for
    a post-mortem of a failed run once SeaweedFS is gone; the path is logged."""
    where = Path(tempfile.gettempdir()) / f"pravega-chaos-{seed}-{int(time.time())}-bucket"
    count = 0
    failed: list[str] = []
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                key = item["Key"]
                try:
                    target = where / key
                    target.parent.mkdir(parents=True, exist_ok=True)
                    client.download_file(bucket, key, str(target))
                except Exception:  # e.g. a key that is also another key's folder: flattened
                    try:
                        flat = where / "_flattened" / key.replace("/", "%2F")
                        flat.parent.mkdir(parents=True, exist_ok=True)
                        client.download_file(bucket, key, str(flat))
                    except Exception as e:
                        failed.append(f"{key}: {e!r}")
                        continue
                count += 1
        log(started, f"the bucket's {count} objects kept in {where}; {len(failed)} failed")
        for failure in failed[:5]:
            log(started, f"  not kept: {failure}")
    except Exception as e:  # the report stands without it
        log(started, f"keeping the bucket failed after {count} objects: {e!r}")


def load_and_check(
    args: argparse.Namespace,
    cluster: Any,
    nodes: Any,
    namespace: str,
    proxy: ProxyProcess,
    faults: ProxyFaults,
    schedule: list[Fault],
    run_started: float,
    zombie: ZombieSpec,
) -> dict[str, Any]:
    """Run the load under the faults, stop both, read everything back and check it."""
    started = time.monotonic()  # fault times count from here
    seed = args.seed
    writers = KeyedWriters(cluster, seed, rate=args.rate, large_every_s=args.large_every_s)
    scaling = KeyedWriters(
        cluster,
        seed + 4,
        stream=SCALING_STREAM,
        prefix="a",
        acks=writers.acks,
        writers=1,
        keys=16,
        rate=scaling_rate,
        large_every_s=0,
    )
    retained_acks = Acks()
    retained = KeyedWriters(
        cluster,
        seed + 5,
        stream=RETAINED_STREAM,
        prefix="r",
        acks=retained_acks,
        writers=1,
        keys=8,
        rate=args.rate,
        event_bytes=1000,
        large_every_s=0,
    )
    pipeline = PipelineWrites(
        cluster, seed + 6, writers.acks, every_s=args.pipeline_every_s, rows=1000
    )
    txns = TxnWriters(cluster, seed + 1)
    described = cluster.endpoints()
    official = OfficialClients(
        cluster,
        seed + 8,
        controller=described["controller"],
        scope=SCOPE,
        acks=writers.acks,
        work_dir=Path(tempfile.mkdtemp(prefix="pravega-chaos-official-")),
    )
    readers = GroupReaders(cluster, seed + 2)
    subscriber = GroupReaders(
        cluster,
        seed + 7,
        group=SUBSCRIBER_GROUP,
        prefix="s",
        readers=1,
        checkpoint_every_s=0,  # its automatic checkpoints release what it read
        rejoin_every_s=math.inf,
    )
    readers.started = subscriber.started = started  # their reads' times count from here too
    kv = KvClients(cluster, seed + 3)
    outage_s = min(TIER2_OUTAGE_S, args.minutes * 6.0)  # a tenth of the run at most
    injector = Injector(
        cluster, nodes, namespace, readers, started, zombie, proxy, faults, outage_s
    )
    txn_scales = TxnStreamScaler(cluster, seed + 9)
    scope_deletes = ScopeDeletes(cluster, seed + 10)
    event_time = EventTimeLoad(cluster, seed + 11)
    parts: list[Part] = [
        event_time,
        writers,
        scaling,
        retained,
        pipeline,
        txns,
        kv,
        official,
        readers,
        subscriber,
        txn_scales,
        scope_deletes,
    ]
    try:
        seconds = args.minutes * 60.0
        proxy.set_faults(faults)
        log(run_started, f"load running; S3 faults on {faults.rate:.0%} of requests")
        next_progress = started + 30

        def wait_until(moment: float) -> None:  # with a progress line every 30 s
            nonlocal next_progress
            while time.monotonic() < moment:
                time.sleep(0.05)
                if time.monotonic() > next_progress:
                    next_progress += 30
                    progress(run_started, writers, readers, injector)

        for fault in schedule:
            wait_until(started + fault.at_s)
            injector.apply(fault)
        wait_until(started + seconds)
        injector.stop_s3_faults()
        log(run_started, "faults stopped; stopping the load")
        injector.join()
        official.stop_writing()
        stopping = (writers, scaling, retained, pipeline, txn_scales, scope_deletes, txns, kv)
        for told in stopping:  # all told at once: each ends the call it is in side by side
            told.stopping.set()
        for part in (*stopping, event_time):
            part.stop()
            log(run_started, f"{part.name} stopped")
        log(run_started, event_time.summary())
        time.sleep(txns.lease_s + 5)  # transactions left to time out are aborted by now
        txns.settle()
        log(run_started, f"transactions settled ({txns.forgotten} ended too long ago to ask)")
        log(run_started, "reading everything back")
        drained = drain(readers, writers.acks, txns, subscriber, retained_acks, run_started)
        official_expected = sum(
            len(s) for k, s in writers.acks.acked.items() if k.startswith(OFFICIAL_PREFIX)
        )
        official_drained = official.drain(official_expected, DRAIN_STALL_S)
        log(run_started, f"the official reader group read {len(official.reads()):,} events")
        readers.stop()
        subscriber.stop()
        official.stop()
        extra = Extra(cluster, retained_acks, subscriber, pipeline, [scaling, retained])
        extra.official, extra.official_drained = official, official_drained
        extra.txn_scales, extra.scope_deletes = txn_scales, scope_deletes
        extra.event_time = event_time
        return report(
            args, proxy, writers, txns, readers, kv, injector, drained, txns.problems, extra
        )
    except BaseException:
        for each in parts:  # no thread may call Ray once the run shuts it down
            each.stopping.set()
        for each in parts:
            for thread in each.threads:
                thread.join(10.0)
        raise


class Extra:
    """The parts the report reads besides the main ones: the retained stream's writer acks
    and its subscriber, the pipeline writes, more writers, and the streams' final state."""

    def __init__(
        self,
        cluster: Any,
        retained: Acks,
        subscriber: GroupReaders,
        pipeline: PipelineWrites,
        writers: list[KeyedWriters],
    ) -> None:
        self.retained = retained
        self.subscriber = subscriber
        self.pipeline = pipeline
        self.writers = writers
        self.official: OfficialClients | None = None
        self.official_drained = True
        self.txn_scales: TxnStreamScaler | None = None
        self.scope_deletes: ScopeDeletes | None = None
        self.event_time: EventTimeLoad | None = None
        mgr = cluster.stream_manager()
        self.txn_epoch = mgr.get_stream_info(SCOPE, TXN_STREAM).epoch
        info = mgr.get_stream_info(SCOPE, SCALING_STREAM)
        self.scaling_epoch, self.scaling_segments = info.epoch, len(info.segments)
        head = mgr.get_head_cut(SCOPE, RETAINED_STREAM)
        self.retained_truncated_bytes = sum(head.positions.values())


def progress(
    started: float, writers: KeyedWriters, readers: GroupReaders, injector: Injector
) -> None:
    acked = sum(len(s) for s in writers.acks.acked.values())
    log(
        started,
        f"{acked:,} events acknowledged, {len(readers.reads):,} read, "
        f"{len(injector.applied)} faults injected",
    )


def report(
    args: argparse.Namespace,
    proxy: ProxyProcess,
    writers: KeyedWriters,
    txns: TxnWriters,
    readers: GroupReaders,
    kv: KvClients,
    injector: Injector,
    drained: bool,
    settle_problems: list[str],
    extra: Extra,
) -> dict[str, Any]:
    reads = list(readers.reads)
    keyed = checker.check_keyed(writers.acks.acked, writers.acks.unknown, reads)
    kept = checker.check_keyed(extra.retained.acked, extra.retained.unknown, extra.subscriber.reads)
    by_segment: dict[str, list[checker.Read]] = defaultdict(list)
    for read in reads:
        if read.kind == "t":
            by_segment[read.segment].append(read)
    txn = checker.check_transactions(txns.outcomes, reads, by_segment)
    kvv = checker.check_key_values(kv.acked, kv.refused, kv.final())
    altered = sum(1 for r in reads if r.kind == "?")
    zombies = [a for a in injector.applied if a["kind"] == ZOMBIE]
    zombie = checker.check_keyed(
        {a["zombie_name"]: a["zombie"]["acked"] for a in zombies if "zombie" in a},
        {a["zombie_name"]: a["zombie"]["failed"] for a in zombies if "zombie" in a},
        [dataclasses.replace(r, kind="k") for r in reads if r.kind == "z"],
    )
    zombie_acked = sum(a["zombie"]["acked_after_go"] for a in zombies if "zombie" in a)
    theirs = extra.official
    official = checker.check_keyed(
        {k: v for k, v in writers.acks.acked.items() if k.startswith(OFFICIAL_PREFIX)},
        {k: v for k, v in writers.acks.unknown.items() if k.startswith(OFFICIAL_PREFIX)},
        theirs.reads() if theirs is not None else [],
    )
    faults: Counter[str] = Counter(a["kind"] for a in injector.applied if "error" not in a)
    for kind, count in proxy.counts().items():
        if kind != "requests" and count:
            faults[f"s3_{kind}"] += count
    # A write is 'during a fault' if it began between a fault and FAULT_WINDOW_S after the
    # faulted part recovered.
    windows = [
        (a["at_s"], a["at_s"] + (a.get("recovered_s") or 0.0) + FAULT_WINDOW_S)
        for a in injector.applied
    ]
    during = [
        lat
        for t, lat, _, _ in writers.acks.latencies
        if any(lo <= t - lat - injector.started <= hi for lo, hi in windows)
    ]
    everything = [lat for _, lat, _, _ in writers.acks.latencies]
    failures = writers.failures + txns.failures + readers.failures + kv.failures
    failures += extra.subscriber.failures + extra.pipeline.failures
    for other in (extra.txn_scales, extra.scope_deletes):
        if other is not None:
            failures += other.failures
    if extra.scope_deletes is not None:
        failures += extra.scope_deletes.problems
    if extra.event_time is not None:
        failures += extra.event_time.failures + extra.event_time.problems
    for part in extra.writers:
        failures += part.failures
    if theirs is not None:
        failures += theirs.failures
    problems = list(settle_problems) + failures
    if not drained:
        problems.append("the readers did not read everything back")
    if not extra.official_drained:
        problems.append("the official reader group did not read everything back")
        if theirs is not None:  # why, in the report itself: CI keeps no evidence file
            problems += [f"official reader: {line}" for line in theirs.why_stalled()]
    for a in injector.applied:
        if a["kind"] == NODE_REMOVE and a.get("moved_off") is False:
            problems.append(f"a container stayed on the removed node: {a}")
        if a.get("recovered_s", 0.0) is None:
            problems.append(f"not recovered in {RECOVERY_WAIT_S:.0f}s: {a}")
    recoveries: dict[str, list[float | None]] = defaultdict(list)
    for a in injector.applied:
        if "recovered_s" in a:
            recoveries[a["kind"]].append(a["recovered_s"])

    print(f"chaos run: seed {args.seed}, {args.minutes * 60:.0f}s of load")
    print(
        f"  keyed events: {keyed.acked:,} acknowledged, {keyed.read:,} read; "
        f"{sum(len(s) for s in writers.acks.unknown.values())} with an unknown outcome "
        f"{dict(writers.acks.errors)}"
    )
    large = f"{KEYED_PREFIX}large"
    print(
        f"  large events (9 MiB): {len(writers.acks.acked.get(large, ()))} acknowledged, "
        f"{len(writers.acks.unknown.get(large, ()))} unknown, "
        f"{sum(1 for r in reads if r.kind == 'k' and r.ident == large)} read; "
        f"took {_spread(writers.acks.slow.get('large', []))}"
    )
    print(
        f"  transactions: {txn.committed} committed, {txn.aborted} aborted, "
        f"{txn.timed_out} timed out, {txn.unknown} unknown ({txns.forgotten} ended too long "
        f"ago for the controller to say); errors {dict(txns.errors)}"
    )
    print(
        f"  key-value updates: {kvv.acked_updates} acknowledged on {kvv.keys} keys; "
        f"{sum(len(v) for v in kv.refused.values())} refused; errors {dict(kv.errors)}"
    )
    good = [c for c in readers.checkpoints if c[1] is not None]
    print(
        f"  reader group: {len(reads):,} events read, {len(good)}/{len(readers.checkpoints)} "
        f"checkpoints completed, {len(readers.kills_done)} readers killed; "
        f"errors {dict(readers.errors)}"
    )
    print(f"  faults injected: {dict(sorted(faults.items()))}")
    for kind, times in sorted(recoveries.items()):
        done = [t for t in times if t is not None]
        worst = f"{max(done):.1f}s" if done else "-"
        print(f"  recovery {kind}: {len(done)}/{len(times)} recovered, worst {worst}")
    for a in injector.applied:
        if "error" in a or "skipped" in a:
            print(f"  fault not injected: {a}")
    for a in zombies:
        z = a.get("zombie")
        if z is None:  # started but no report: its events cannot be judged
            if "zombie_name" in a:
                problems.append(f"a zombie did not report: {a}")
            continue
        print(
            f"  zombie of {a['target']}: {len(z['acked'])} appends acknowledged while it owned "
            f"the container, {len(z['failed'])} failed; {z['attempts_after_go']} begun after "
            f"its successor recovered, {z['acked_after_go']} of them acknowledged; "
            f"refused with {z['errors']}; stopped by {z['fatal'][:1]}"
        )
    print(
        f"  zombie events: {zombie.read} read, {zombie.lost} acknowledged but lost, "
        f"{zombie.phantom} begun after the takeover but visible"
    )
    print(
        f"  auto-scaled stream: epoch {extra.scaling_epoch}, {extra.scaling_segments} segments "
        f"at the end"
    )
    if extra.txn_scales is not None:
        t = extra.txn_scales
        rolls = max(0, extra.txn_epoch - t.scales) // 2  # each scale adds one epoch, a roll two
        print(
            f"  transaction stream: {t.scales} scales ({t.refused} refused while a rolling "
            f"commit held it), epoch {extra.txn_epoch}: about {rolls} rolling commits; "
            f"errors {dict(t.errors)}"
        )
    if extra.scope_deletes is not None:
        d = extra.scope_deletes
        print(
            f"  recursive scope deletes: {d.deleted} done, {d.refused_creates} racing creates "
            f"refused, {len(d.problems)} problems; errors {dict(d.errors)}"
        )
    print(
        f"  retained stream: {kept.acked:,} acknowledged, {kept.read:,} read by its subscriber; "
        f"{extra.retained_truncated_bytes:,} bytes truncated by retention; "
        f"{len(extra.subscriber.truncated)} truncations of unreleased data; "
        f"errors {dict(extra.subscriber.errors)}"
    )
    print(
        f"  pipeline writes: {extra.pipeline.results}; errors {dict(extra.pipeline.errors)} "
        f"{extra.pipeline.samples}; took {_spread(writers.acks.slow.get('pipeline', []))}"
    )
    examples_of: list[tuple[str, dict[str, str]]] = [
        (p.name, p.error_examples) for p in (readers, extra.subscriber)
    ] + [(kv.name, kv.error_examples)]
    for name, first in examples_of:
        for kind, example in sorted(first.items()):
            print(f"  {name}: first {kind}: {example}")
    mine = sum(1 for r in reads if r.kind == "k" and r.ident.startswith(OFFICIAL_PREFIX))
    print(
        f"  official client (pravega 0.3.8, through the gRPC API and wire gateways): "
        f"{official.acked:,} events acknowledged to its writer, {official.read:,} read by its "
        f"reader group, {mine:,} by pravega-ray's group"
    )
    p99_all, p99_during = p99(everything), p99(during)
    print(
        f"  ack latency p99 (small events): {_ms(p99_all)} overall, {_ms(p99_during)} for "
        f"writes begun between a fault and {FAULT_WINDOW_S:.0f}s after its recovery"
    )
    for line in slowest_acks(writers.acks.latencies, reads, injector):
        print(f"  slow: {line}")
    examples = keyed.examples + kept.examples + zombie.examples + txn.examples + kvv.examples
    examples += [f"official reader group: {e}" for e in official.examples]
    for line in examples + problems:
        print(f"  ! {line}")
    result = {
        "seed": args.seed,
        "seconds": round(args.minutes * 60, 1),
        "acked_events": keyed.acked + kept.acked,
        "lost": keyed.lost + kept.lost + zombie.lost + official.lost,
        "duplicated": keyed.duplicated
        + kept.duplicated
        + txn.duplicated
        + zombie.duplicated
        + official.duplicated,
        "reordered": keyed.reordered + kept.reordered + zombie.reordered + official.reordered,
        "phantom": keyed.phantom + kept.phantom + txn.phantom + altered + official.phantom,
        "official_client_acked": official.acked,
        "truncated_unreleased": len(extra.subscriber.truncated),
        "retained_truncated_bytes": extra.retained_truncated_bytes,
        "scaling_epoch": extra.scaling_epoch,
        "pipeline_writes": sum(1 for r in extra.pipeline.results if r[1] == "written"),
        "torn_transactions": txn.torn_transactions,
        "aborted_visible": txn.aborted_visible,
        "zombie_acked": zombie_acked,
        "zombie_visible": zombie.phantom,
        "kv_lost": kvv.kv_lost,
        "kv_phantom": kvv.kv_phantom,
        "committed_transactions": txn.committed,
        "containers_moved_off_removed_nodes": sum(
            1 for a in injector.applied if a.get("held_containers") and a.get("moved_off")
        ),
        "faults_injected": dict(sorted(faults.items())),
        "ack_p99_ms": _round_ms(p99_all),
        "ack_p99_during_faults_ms": _round_ms(p99_during),
        "problems": len(problems),
    }
    broken = [k for k in BROKEN_IF_NONZERO if result[k]]
    result["ok"] = not broken
    print("  invariants: " + ("all held" if not broken else "BROKEN: " + ", ".join(broken)))
    if broken:
        dump = Path(tempfile.gettempdir()) / f"pravega-chaos-{args.seed}-{int(time.time())}.json"
        evidence = {
            "result": result,
            "faults": injector.applied,
            "journal": readers.journal,
            "reads": [dataclasses.astuple(r) for r in reads],
            "acked": {k: sorted(v) for k, v in writers.acks.acked.items()},
            "unknown": {k: sorted(v) for k, v in writers.acks.unknown.items()},
        }
        if theirs is not None:  # the official reader group: its reads and its client's log
            evidence["official_reads"] = [dataclasses.astuple(r) for r in theirs.reads()]
            evidence["official_reader_log"] = theirs.log_tail("reader", 2000)
            evidence["official_writer_log"] = theirs.log_tail("writer", 500)
        dump.write_text(json.dumps(evidence))
        print(f"  evidence (every read, fault and reader join/close): {dump}")
    return result


BROKEN_IF_NONZERO = (
    "lost",
    "duplicated",
    "reordered",
    "phantom",
    "torn_transactions",
    "aborted_visible",
    "zombie_acked",
    "zombie_visible",
    "truncated_unreleased",
    "kv_lost",
    "kv_phantom",
    "problems",
)


def slowest_acks(
    latencies: list[tuple[float, float, str, int]],
    reads: list[checker.Read],
    injector: Injector,
    count: int = 3,
) -> list[str]:
    """The ``count`` slowest acknowledgements of small events, at most one per minute of the
    run, each with the segment and container it was read from and the faults injected from
    a minute before it began until it was acknowledged (S3 faults are everywhere: not
    listed)."""
    segment_of = {(r.ident, r.seq): r.segment for r in reads if r.kind == "k"}
    picked: list[tuple[float, float, str, int]] = []
    for at, took, key, seq in sorted(latencies, key=lambda a: -a[1]):
        begun = at - took - injector.started
        if all(abs(begun - other[0]) >= 60.0 for other in picked):
            picked.append((begun, took, key, seq))
            if len(picked) == count:
                break
    lines = []
    for begun, took, key, seq in picked:
        segment = segment_of.get((key, seq))
        where = (
            f"{segment}, container {container_for_segment(segment, CONTAINERS)}"
            if segment is not None
            else "never read"
        )
        around = [
            f"{a['kind']} {a.get('target', '')} at {a['at_s']}s"
            + (f" (back in {a['recovered_s']}s)" if "recovered_s" in a else "")
            for a in injector.applied
            if begun - 60.0 <= a["at_s"] <= begun + took
        ]
        lines.append(
            f"{took:.1f}s for {key}:{seq} ({where}), begun at {begun:.1f}s; "
            f"faults: {'; '.join(around) or 'none'}"
        )
    return lines


def _spread(seconds: list[float]) -> str:
    """Median and longest of some durations, for the report."""
    if not seconds:
        return "-"
    ordered = sorted(seconds)
    return f"median {ordered[len(ordered) // 2]:.1f}s, longest {ordered[-1]:.1f}s"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def _round_ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the load")
    parser.add_argument(
        "--seed", type=int, default=None, help="replays a schedule (default: random)"
    )
    parser.add_argument("--s3-fault-rate", type=float, default=0.05)
    parser.add_argument("--rate", type=float, default=25.0, help="events/s of each writer")
    parser.add_argument(
        "--pipeline-every-s",
        type=float,
        default=60.0,
        help="seconds between pr.data.write_stream calls (0: none)",
    )
    parser.add_argument(
        "--large-every-s", type=float, default=5.0, help="seconds between large events (0: none)"
    )
    parser.add_argument(
        "--no-faults", action="store_true", help="the same load without faults (a baseline)"
    )
    parser.add_argument("--verbose", action="store_true", help="show the actors' logs")
    args = parser.parse_args(argv)
    if args.no_faults:
        args.s3_fault_rate = 0.0
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    logging.basicConfig(level=logging.WARNING)
    result = run(args)
    print(json.dumps(result, sort_keys=True))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
