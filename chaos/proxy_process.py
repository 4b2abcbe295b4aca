"""The fault-injecting S3 proxy in a process of its own, steered from the chaos driver.

Every S3 request of every container passes through the proxy; in the driver's process it
would compete for one interpreter lock with the load's threads (writers, readers, clients),
and the proxy, not the system, would set the latency. :class:`ProxyProcess` runs a
:class:`~chaos.s3_proxy.FaultyS3Proxy` in a child process (``spawn``) and offers the same
calls (``endpoint``, ``set_faults``, ``counts``), each a message over a pipe. The child dies
with the parent (it polls the pipe; a closed pipe stops it).
"""

from __future__ import annotations

import contextlib
import multiprocessing
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any

from chaos.s3_proxy import FaultyS3Proxy, ProxyFaults

CALL_TIMEOUT_S = 30.0


def _serve(upstream: str, seed: int, faults: ProxyFaults, conn: Connection) -> None:
    """The child: start the proxy, send its endpoint, then answer commands until ``stop``
    or until the parent's end of the pipe closes."""
    with FaultyS3Proxy(upstream, seed=seed, faults=faults) as proxy:
        conn.send(proxy.endpoint)
        while True:
            try:
                command, argument = conn.recv()
            except (EOFError, OSError):  # the parent is gone
                return
            if command == "stop":
                conn.send(None)
                return
            if command == "set_faults":
                proxy.set_faults(argument)
                conn.send(None)
            elif command == "counts":
                conn.send(proxy.counts())


class ProxyProcess:
    """A :class:`FaultyS3Proxy` in a child process (module docstring)."""

    def __init__(self, upstream: str, *, seed: int, faults: ProxyFaults | None = None) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_serve,
            args=(upstream, seed, faults or ProxyFaults(rate=0.0), child),
            name="chaos-s3-proxy",
            daemon=True,
        )
        self._endpoint: str | None = None

    def start(self) -> None:
        self._process.start()
        if not self._conn.poll(CALL_TIMEOUT_S):
            raise RuntimeError("the S3 proxy process did not start")
        self._endpoint = self._conn.recv()

    @property
    def endpoint(self) -> str:
        if self._endpoint is None:
            raise RuntimeError("the proxy process is not started")
        return self._endpoint

    def _call(self, command: str, argument: Any = None) -> Any:
        self._conn.send((command, argument))
        if not self._conn.poll(CALL_TIMEOUT_S):
            raise RuntimeError(f"the S3 proxy process did not answer {command!r}")
        return self._conn.recv()

    def set_faults(self, faults: ProxyFaults) -> None:
        self._call("set_faults", faults)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = self._call("counts")
        return counts

    def stop(self) -> None:
        if self._process.is_alive():
            with contextlib.suppress(RuntimeError, OSError, EOFError):
                self._call("stop")
            self._process.join(5)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(5)
        self._conn.close()

    def __enter__(self) -> ProxyProcess:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
