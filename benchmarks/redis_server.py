"""A ``redis-server`` of the benchmark's own, and RESP commands for it: the Redis baselines of
``append_throughput`` (Streams) and ``key_value_table`` (SET/GET). Importing this module starts
nothing."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REDIS_READY_TIMEOUT_S = 10.0
STOP_GRACE_S = 10.0


def redis_command(*args: bytes) -> bytes:
    """One command in RESP (an array of bulk strings)."""
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


@contextlib.contextmanager
def running_redis(binary: str, directory: Path) -> Iterator[int]:
    """Start ``redis-server`` (AOF on, fsync on every write, no RDB) on a free loopback port.

    Yields the port once it answers PING; stops it (SIGTERM, SIGKILL after STOP_GRACE_S) and
    leaves ``directory`` to the caller. Raises RuntimeError if it does not come up.
    """
    port = _free_port()
    directory.mkdir(parents=True, exist_ok=True)
    command = [
        binary,
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--dir", str(directory),
        "--appendonly", "yes",
        "--appendfsync", "always",
        "--save", "",
        "--protected-mode", "no",
        "--daemonize", "no",
        "--logfile", str(directory / "redis.log"),
    ]  # fmt: skip
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    try:
        deadline = time.monotonic() + REDIS_READY_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"redis-server exited with code {process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(redis_command(b"PING"))
                    if s.recv(64).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not answer PING in time")
            time.sleep(0.05)
        yield port
    finally:
        _stop_process(process)


def _die_with_parent() -> None:
    """Runs in a child before exec: ask Linux to SIGTERM it when this process dies."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
