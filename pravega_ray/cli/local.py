"""``pravega-ray local start|status|stop``: a local cluster that outlives the command.

``local start`` starts a Ray head (``ray start --head --block`` from this Python's bin
directory, in its own process group, logging to ``<data dir>/ray-head.log``) unless one
answers at the address already, then starts pravega-ray's detached actors on it
(``pr.start_local``). It records the head it started in ``<data dir>/cli-local.json``
(pid, address, Ray temp dir) so that ``local stop`` stops that head and no other: it
never runs ``ray stop``, which would stop every Ray on the machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import typer

from pravega_ray.cli.output import emit, note, table
from pravega_ray.cli.session import (
    ClusterUnreachableError,
    Options,
    check_reachable,
)
from pravega_ray.constants import RETENTION_BUCKETS_DEFAULT

__all__ = ["app", "ray_temp_dir"]

app = typer.Typer(help="A local cluster that outlives the command.", no_args_is_help=True)

STATE_FILE = "cli-local.json"
HEAD_LOG = "ray-head.log"
HEAD_START_TIMEOUT_S = 180.0
HEAD_START_ATTEMPTS = 2
HEAD_STOP_TIMEOUT_S = 5.0
"""SIGTERM makes Ray drain the node for up to 30 s; the actors' acknowledged data is durable
already, so after this long the head's processes get SIGKILL."""
HEAD_READY_LINE = b"Ray runtime started."
RAY_TEMP_DIR_CHARS_MAX = 40
"""Ray puts Unix sockets ~65 characters below its temp dir, and a socket path must stay
under 108 bytes: a longer data dir gets its Ray temp dir under /tmp instead."""
DEFAULT_PORT = 6379
AGENT_REGISTER_TIMEOUT_MS = 120_000
STATUS_TIMEOUT_S = 10.0

DATA_DIR_OPTION = typer.Option(
    Path("./.pravega-data"), "--data-dir", help="Where the cluster keeps its data."
)
TLS_CERT_OPTION = typer.Option(
    None,
    "--tls-cert",
    resolve_path=True,
    help="PEM certificate (chain) all three endpoints serve TLS with (with --tls-key).",
)
TLS_KEY_OPTION = typer.Option(
    None, "--tls-key", resolve_path=True, help="PEM private key of --tls-cert."
)
PASSWORD_FILE_OPTION = typer.Option(
    None,
    "--password-file",
    resolve_path=True,
    help="Users, password hashes and ACLs (Pravega's format; docs/security.md): "
    "authenticate and authorize every endpoint.",
)


def ray_temp_dir(data_dir: Path) -> Path:
    """``<data dir>/ray`` if short enough for Ray's socket paths, else a directory under
    /tmp named after the data dir (never /tmp/ray: other drivers would join this head)."""
    inside = data_dir / "ray"
    if len(str(inside)) <= RAY_TEMP_DIR_CHARS_MAX:
        return inside
    digest = hashlib.sha1(str(data_dir).encode()).hexdigest()[:10]
    return Path("/tmp") / f"pravega-ray-{digest}"


def _state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def _load_state(data_dir: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(_state_path(data_dir).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _ray_env(node_variables: dict[str, str]) -> dict[str, str]:
    """The environment of ``ray start``: this one, plus ``node_variables``
    (``pravega_ray.cluster.node_environment``) and longer startup waits, unless set."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # The raylet waits a bounded time for its dashboard agent and aborts after; on a
    # loaded machine the agent takes longer than the defaults (30 s).
    env.setdefault("RAY_agent_register_timeout_ms", str(AGENT_REGISTER_TIMEOUT_MS))
    env.setdefault("RAY_raylet_start_wait_time_s", str(AGENT_REGISTER_TIMEOUT_MS // 1000))
    for key, value in node_variables.items():
        env.setdefault(key, value)
    return env


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        port: int = probe.getsockname()[1]
        return port


def _start_head(data_dir: Path, port: int, num_cpus: int | None, containers: int) -> dict[str, Any]:
    """Start a Ray head on 127.0.0.1:``port``, set up for a cluster of ``containers``
    containers; returns its recorded state. Raises ClusterUnreachableError if it did not come
    up."""
    from pravega_ray.cluster import node_environment

    node_variables = node_environment(containers, RETENTION_BUCKETS_DEFAULT, num_cpus)
    ray_bin = Path(sys.executable).parent / "ray"
    temp_dir = ray_temp_dir(data_dir)
    temp_dir.mkdir(parents=True, exist_ok=True)
    command = [
        str(ray_bin),
        "start",
        "--head",
        "--block",
        f"--port={port}",
        "--node-ip-address=127.0.0.1",
        f"--temp-dir={temp_dir}",
        "--include-dashboard=false",
        # Not the fixed default (52365): another Ray on this machine may hold it.
        f"--dashboard-agent-listen-port={_free_port()}",
        "--disable-usage-stats",
    ]
    if num_cpus is not None:
        command.append(f"--num-cpus={num_cpus}")
    log_path = data_dir / HEAD_LOG
    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=_ray_env(node_variables),
            start_new_session=True,  # its own process group: `local stop` stops exactly it
        )
    address = f"127.0.0.1:{port}"
    state = {"pid": process.pid, "address": address, "temp_dir": str(temp_dir)}
    _state_path(data_dir).write_text(json.dumps(state))
    deadline = time.monotonic() + HEAD_START_TIMEOUT_S
    try:
        while not _head_ready(log_path, address):
            if process.poll() is not None:
                raise _HeadExitedError(f"the Ray head exited while starting; see {log_path}")
            if time.monotonic() > deadline:
                raise ClusterUnreachableError(
                    f"the Ray head did not start at {address}; see {log_path}"
                )
            time.sleep(0.3)
    except BaseException:  # Ctrl-C included: leave no head behind
        _stop_head(state, spawned_here=True)
        _state_path(data_dir).unlink(missing_ok=True)
        raise
    return state


class _HeadExitedError(ClusterUnreachableError):
    """``ray start`` exited before its node was up (e.g. Ray's own 30 s wait for the raylet
    ran out on a loaded machine)."""


def _start_head_with_retry(
    data_dir: Path, port: int, num_cpus: int | None, containers: int, json_mode: bool
) -> dict[str, Any]:
    """:func:`_start_head`, once more if ``ray start`` itself gave up (not after our own
    timeout): a loaded machine makes Ray's fixed startup waits run out now and then."""
    for attempt in range(1, HEAD_START_ATTEMPTS + 1):
        try:
            return _start_head(data_dir, port, num_cpus, containers)
        except _HeadExitedError as e:
            if attempt == HEAD_START_ATTEMPTS:
                raise
            note(json_mode, f"{e}; trying once more")
    raise AssertionError("unreachable")


def _head_ready(log_path: Path, address: str) -> bool:
    """True once ``ray start`` said the node runs (its raylet registered) and the GCS port
    answers; joining earlier can time out while a loaded machine still starts the node."""
    try:
        started = HEAD_READY_LINE in log_path.read_bytes()
    except OSError:
        return False
    return started and check_reachable(address, timeout_s=1.0)


def _is_our_head(pid: int, address: str) -> bool:
    """True if ``pid`` still runs the ``ray start`` this CLI recorded (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    port = address.rpartition(":")[2]
    return "start" in cmdline and f"--port={port}" in cmdline


def _stop_head(state: dict[str, Any], spawned_here: bool = False) -> bool:
    """Stop the recorded head: SIGTERM to its process group, then SIGKILL to the group and
    to every process it spawned (Ray's workers run in sessions of their own). True if it
    ran. ``spawned_here``: this process started it (its pid cannot have been reused, even
    if ``ray start`` itself already exited)."""
    pid, address = state.get("pid"), state.get("address", "")
    if not isinstance(pid, int):
        return False
    if not spawned_here and not _is_our_head(pid, str(address)):
        return False
    spawned = _descendants(pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + HEAD_STOP_TIMEOUT_S
    while time.monotonic() < deadline and _alive(pid, spawned):
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    for child in spawned:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and _alive(pid, spawned):
        time.sleep(0.1)
    return True


def _process_table() -> list[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every process, from /proc."""
    table = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()  # after "pid (comm)": state ppid pgrp ...
        table.append((int(entry.name), int(fields[1]), int(fields[2])))
    return table


def _descendants(pgid: int) -> set[int]:
    """Every process in group ``pgid`` and every process they spawned, transitively."""
    table = _process_table()
    found = {pid for pid, _, group in table if group == pgid}
    grew = True
    while grew:
        more = {pid for pid, parent, _ in table if parent in found and pid not in found}
        found |= more
        grew = bool(more)
    return found


def _alive(pgid: int, pids: set[int]) -> bool:
    """Whether any of ``pids`` (or the group's leader) still runs (zombies do not count:
    the leader is reaped here if this process is its parent, as after a failed start)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pgid, os.WNOHANG)
    for pid in pids | {pgid}:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z":
            return True
    return False


@app.command("start")
def start(
    ctx: typer.Context,
    data_dir: Path = DATA_DIR_OPTION,
    containers: int = typer.Option(4, "--containers", min=1, max=1024, help="Segment containers."),
    port: int = typer.Option(DEFAULT_PORT, "--port", min=1, max=65535, help="Ray head port."),
    num_cpus: int | None = typer.Option(None, "--num-cpus", min=1, help="CPUs of the Ray head."),
    controllers: int = typer.Option(
        2, "--controllers", min=1, max=64, help="Controller API instances."
    ),
    endpoints: bool = typer.Option(
        True,
        "--endpoints/--no-endpoints",
        help="Serve Pravega's controller gRPC API and wire protocol, for Pravega's own clients.",
    ),
    bind: str = typer.Option("127.0.0.1", "--bind", help="The IP address the endpoints listen on."),
    grpc_port: int = typer.Option(
        9090, "--grpc-port", min=0, max=65535, help="The controller gRPC API's port."
    ),
    rest_port: int = typer.Option(
        9091, "--rest-port", min=0, max=65535, help="The controller REST API's port."
    ),
    wire_port_base: int = typer.Option(
        6000,
        "--wire-port-base",
        min=0,
        max=65535,
        help="Container i's wire protocol listens on this port + i (0: any free port).",
    ),
    insecure: bool = typer.Option(
        False,
        "--insecure",
        help="Allow --bind other than loopback without TLS and authentication.",
    ),
    tls_cert: Path | None = TLS_CERT_OPTION,
    tls_key: Path | None = TLS_KEY_OPTION,
    password_file: Path | None = PASSWORD_FILE_OPTION,
    published_host: str | None = typer.Option(
        None,
        "--published-host",
        help="The host name clients are given for the endpoints (the TLS certificate's "
        "name; default with TLS on loopback: localhost).",
    ),
) -> None:
    """Start a local cluster (a Ray head unless one answers at --address) and print its
    address, and where Pravega's own clients reach it (--no-endpoints: nowhere)."""
    options: Options = ctx.obj
    import pravega_ray as pr
    from pravega_ray.endpoints import EndpointConfig

    endpoint_config = (
        EndpointConfig(
            bind,
            grpc_port,
            rest_port,
            wire_port_base,
            insecure_ok=insecure,
            tls_cert_file=str(tls_cert) if tls_cert is not None else None,
            tls_key_file=str(tls_key) if tls_key is not None else None,
            password_file=str(password_file) if password_file is not None else None,
            published_host=published_host,
        )
        if endpoints
        else False
    )

    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    address = options.address if options.address != "auto" else f"127.0.0.1:{port}"
    head: dict[str, Any] | None = None
    if not check_reachable(address):
        if ":" in address:
            port = int(address.rpartition(":")[2])
        head = _start_head_with_retry(data_dir, port, num_cpus, containers, options.json)
        address = head["address"]
    try:
        options.join_ray(address)
        cluster = pr.start_local(
            data_dir,
            containers,
            namespace=options.namespace,
            controller_instances=controllers,
            endpoints=endpoint_config,
        )
        served = cluster.endpoints()
        cluster.close()
    except BaseException:
        if head is not None:
            _stop_head(head)
            _state_path(data_dir).unlink(missing_ok=True)
        raise
    document = {
        "address": address,
        "namespace": options.namespace,
        "data_dir": str(data_dir),
        "containers": containers,
        "controllers": controllers,
        "started_ray_head": head is not None,
        "endpoints": served,
    }
    pravega = (
        f"\nPravega's clients: controller {served['controller']}, REST {served['rest']}"
        if served is not None
        else ""
    )
    emit(
        options.json,
        document,
        f"pravega-ray is running at {address} (namespace {options.namespace}, data in "
        f"{data_dir}).\nUse: pravega-ray --address {address} ...   or   "
        f"export PRAVEGA_RAY_ADDRESS={address}{pravega}",
    )


@app.command("status")
def status(ctx: typer.Context) -> None:
    """Show whether the controller and containers are alive, and the scopes and streams."""
    options: Options = ctx.obj
    import ray

    from pravega_ray_actors.options import controller_name

    cluster = options.cluster()
    handles = [(controller_name(i), h) for i, h in enumerate(cluster.controller_handles())] + [
        (f"segment-container-{i}", h) for i, h in enumerate(cluster.container_handles())
    ]
    refs = [handle.describe.remote() for _, handle in handles]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=STATUS_TIMEOUT_S)
    alive: dict[str, bool] = {}
    for (name, _), ref in zip(handles, refs, strict=True):
        try:
            alive[name] = ref in ready and ray.get(ref) is not None
        except Exception:  # the actor died or raised: it does not answer
            alive[name] = False
    mgr = cluster.stream_manager()
    scopes = {scope: mgr.list_streams(scope) for scope in mgr.list_scopes()}
    served = cluster.endpoints()
    document = {
        "address": options.address,
        "namespace": options.namespace,
        "actors": alive,
        "scopes": scopes,
        "endpoints": served,
    }
    rows = [(name, "alive" if ok else "DOWN") for name, ok in alive.items()]
    if served is not None:
        rows.append(("endpoints", f"controller {served['controller']}, REST {served['rest']}"))
    emit(options.json, document, table(f"cluster at {options.address}", ["actor", "state"], rows))
    if not options.json:
        emit(
            False,
            None,
            table("scopes", ["scope", "streams"], [(s, ", ".join(t)) for s, t in scopes.items()]),
        )


@app.command("stop")
def stop(ctx: typer.Context, data_dir: Path = DATA_DIR_OPTION) -> None:
    """Stop pravega-ray's actors and the Ray head ``local start`` started (data stays)."""
    options: Options = ctx.obj
    data_dir = data_dir.resolve()
    state = _load_state(data_dir)
    if state is not None and options.address == "auto":
        options.address = str(state.get("address", "auto"))
    address = options.address
    stopped_head = False
    pid = state.get("pid") if state is not None else None
    if state is not None and isinstance(pid, int) and _is_our_head(pid, str(state.get("address"))):
        # Our own head: stopping it stops every actor on it. Everything acknowledged is
        # in the durable logs already, so the next `local start` recovers all of it.
        stopped_head = _stop_head(state)
    else:
        # A head someone else runs (or ours died): stop only pravega-ray's actors.
        try:
            options.cluster().shutdown()
        except ClusterUnreachableError:
            if state is None:
                raise
            note(options.json, f"nothing answers at {address} any more")
        options.close()
    if state is not None:
        _state_path(data_dir).unlink(missing_ok=True)
    emit(
        options.json,
        {"address": address, "stopped_ray_head": stopped_head},
        f"stopped pravega-ray at {address}"
        + (" and its Ray head" if stopped_head else "")
        + f" (data stays in {data_dir})",
    )
