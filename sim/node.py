"""One simulated segment-store process: a container on its own :class:`SimLoop`.

A :class:`Node` owns the disks that outlive its process (a :class:`~sim.disk.LogDisk`
holding Tier-1: the project's file-system durable log in a directory, or its in-memory
log; Tier-2 is the cluster's shared ``InMemoryChunkStorage``) and, while it is up, a
container built by the project's builder (``build_container``, so fenced Tier-2 and the
B+tree attribute index as in production) on a fresh loop.

* :meth:`Node.start` builds and recovers a new container from those disks (a restart);
  recovery is synchronous, as in the actor shell.
* :meth:`Node.serve` runs a delivered call as a task on the node's loop; its answer is
  queued on the network once the task finishes.
* :meth:`Node.crash` kills the process: its loop is never stepped again (no ``finally``
  runs, as in a killed process; its log file is closed, as the kernel does), each call it
  was serving is answered with SegmentStoreUnavailableError (the connection broke:
  outcome unknown), and each blocking call still pending (a log append, a chunk write)
  either lands or is lost, as the seed says: an append that lands was never acknowledged
  to the container (a complete but unacknowledged record at the log's tail). The
  ``torn_tail`` fault is a crash in the middle of a log append's write: part of its
  frame reached the disk (:meth:`sim.disk.LogDisk.write_torn`).

The loop and container of a crashed incarnation are kept (``graveyard``) until the run
ends, so the garbage collector never runs their coroutines' cleanup mid-run.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, cast

from pravega_ray.errors import ContainerNotReadyError, SegmentStoreUnavailableError
from pravega_ray.logs.durable_data_log import DurableDataLog
from pravega_ray.logs.filesystem import FileSystemDurableLog
from pravega_ray.logs.memory import InMemoryDurableLog
from pravega_ray.segmentstore.builder import build_container
from pravega_ray.segmentstore.config import ContainerConfig
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.storage.chunk_storage import ChunkStorage
from pravega_ray.timing import ManualClock
from sim.disk import LogDisk
from sim.loop import SimLoop
from sim.network import Call, Network

__all__ = ["Io", "Node"]


def _coroutine_of(handle: asyncio.Handle) -> Any:
    """The coroutine of a task a ready handle would start or resume (None otherwise)."""
    task = getattr(getattr(handle, "_callback", None), "__self__", None)
    return task.get_coro() if isinstance(task, asyncio.Task) else None


def _target(function: Callable[..., Any]) -> Callable[..., Any]:
    """The function a blocking call runs: ``asyncio.to_thread`` hands the executor a
    ``partial(context.run, function, *args)``, which this unwraps."""
    if (
        isinstance(function, functools.partial)
        and isinstance(getattr(function.func, "__self__", None), contextvars.Context)
        and function.args
    ):
        return cast(Callable[..., Any], function.args[0])
    return function


def _kind(function: Callable[..., Any]) -> str:
    """``log-append``, ``chunk-create`` or the name of the function a blocking call runs."""
    target = _target(function)
    name = getattr(target, "__name__", "call")
    owner = getattr(target, "__self__", None)
    if name == "append" and isinstance(owner, (FileSystemDurableLog, InMemoryDurableLog)):
        return "log-append"
    if name == "create" and owner is not None and "ChunkStorage" in type(owner).__name__:
        return "chunk-create"
    return name


@dataclass(slots=True)
class Io:
    """A blocking call of the container (``run_in_executor``), not run yet. ``kind``:
    ``log-append``, ``chunk-create`` or the called function's name (trace and faults)."""

    function: Callable[..., Any]
    args: tuple[Any, ...]
    future: asyncio.Future[Any]
    due: float  # it may complete from then on (virtual seconds)
    kind: str = field(init=False)

    tier2: bool = field(init=False)  # a call of the Tier-2 chunk storage

    def __post_init__(self) -> None:
        self.kind = _kind(self.function)
        owner = getattr(_target(self.function), "__self__", None)
        self.tier2 = owner is not None and "ChunkStorage" in type(owner).__name__

    def run(self, error: BaseException | None = None) -> None:
        """Run the call (or fail it with ``error``) and complete its future."""
        if error is None:
            try:
                result = self.function(*self.args)
            except Exception as e:  # the container's to handle, as from a thread
                error = e
        if self.future.cancelled():
            return
        if error is None:
            self.future.set_result(result)
        else:
            self.future.set_exception(error)


@dataclass
class _Incarnation:
    loop: SimLoop
    container: SegmentContainer
    log: DurableDataLog


@dataclass
class Node:
    """Container ``container_id``'s process; see the module docstring."""

    container_id: int
    config: ContainerConfig
    storage: ChunkStorage
    clock: ManualClock
    network: Network
    errors: list[str]
    io_latency: Callable[[], float]
    disk: LogDisk
    ios: list[Io] = field(default_factory=list)
    serving: dict[int, Call] = field(default_factory=dict)
    graveyard: list[_Incarnation] = field(default_factory=list)
    current: _Incarnation | None = None
    restart_at: float | None = None  # when a crashed node comes back
    failed: BaseException | None = None  # its durable log failed (on_fatal): crash it
    incarnations: int = 0

    @property
    def up(self) -> bool:
        return self.current is not None

    @property
    def loop(self) -> SimLoop:
        assert self.current is not None
        return self.current.loop

    @property
    def container(self) -> SegmentContainer:
        assert self.current is not None
        return self.current.container

    def compaction_rounds(self) -> int:
        """Table compaction rounds of this node's containers: the crashed ones and this."""
        incarnations = [*self.graveyard, *([self.current] if self.current else [])]
        return sum(i.container.table_compactor.rounds for i in incarnations)

    def start(self) -> None:
        """Build a container on a new loop and recover it from this node's disks.

        Raises what recovery raises (DataCorruptionError: the simulator reports it).
        """
        loop = SimLoop(self.clock, self._submit_io, self.errors)
        self.failed = None
        log = self.disk.open_log()
        container = build_container(
            self.config, log, self.storage, clock=self.clock, on_fatal=self._fatal
        )
        self.current = _Incarnation(loop, container, log)
        self.restart_at = None
        self.incarnations += 1
        asyncio.events._set_running_loop(loop)
        try:
            container.recover()
        finally:
            asyncio.events._set_running_loop(None)

    def _fatal(self, error: BaseException) -> None:
        self.failed = error

    def _submit_io(
        self, function: Callable[..., Any], args: tuple[Any, ...], future: asyncio.Future[Any]
    ) -> None:
        self.ios.append(Io(function, args, future, self.clock.monotonic() + self.io_latency()))

    def serve(self, call: Call) -> None:
        """Start ``call`` on this node's container (a down node answers at once)."""
        if self.current is None:
            error = SegmentStoreUnavailableError(f"container {self.container_id} is down")
            self.network.reply(call, None, error)
            return
        self.serving[call.number] = call
        self.loop.create_task(self._serve(call))

    async def _serve(self, call: Call) -> None:
        container = self.container
        try:
            result = await getattr(container, call.method)(call.segment, *call.args)
        except ContainerNotReadyError as e:  # a stopped container looks like a dead actor
            self._answer(call, None, SegmentStoreUnavailableError(str(e)))
        except Exception as e:
            self._answer(call, None, e)
        else:
            self._answer(call, result, None)

    def _answer(self, call: Call, result: Any, error: BaseException | None) -> None:
        if self.serving.pop(call.number, None) is not None:
            self.network.reply(call, result, error)

    def dispose(self) -> None:
        """The run is over: close every incarnation's coroutines and loop, quietly.

        A coroutine left suspended would be closed by the garbage collector at some later
        time, running its cleanup then (and printing what fails in it)."""
        incarnations = [*self.graveyard, *([self.current] if self.current else [])]
        for incarnation in incarnations:
            loop = incarnation.loop
            for handle in list(loop.ready):
                coroutine = _coroutine_of(handle)
                if coroutine is not None:
                    coroutine.close()
            for task in asyncio.all_tasks(loop):
                coroutine = task.get_coro()
                if isinstance(coroutine, Coroutine):
                    with contextlib.suppress(Exception):  # cleanup of a finished run
                        coroutine.close()
            loop.close()
            incarnation.log.close()
        self.graveyard.clear()
        self.current = None

    def crash(self, rng: random.Random, restart_in_s: float, tear: Io | None = None) -> list[str]:
        """Kill the process (module docstring); it restarts ``restart_in_s`` later.

        ``tear``: a pending log append the crash cuts in the middle of its write (the
        ``torn_tail`` fault: part of its record reaches the disk). Returns what happened
        to each pending blocking call (for the trace).
        """
        fates: list[str] = []
        for io in self.ios:
            if io is tear:
                how = self.disk.write_torn(io.function, io.args, rng)
                fates.append(f"{io.kind} {how or 'lost'}")
            elif rng.random() < 0.5:
                io.run()  # it reached the disk before the process died; nobody hears of it
                fates.append(f"{io.kind} lands")
            else:
                fates.append(f"{io.kind} lost")
        self.ios.clear()
        for call in self.serving.values():
            lost = SegmentStoreUnavailableError(f"container {self.container_id} crashed")
            self.network.reply(call, None, lost)
        self.serving.clear()
        if self.current is not None:
            self.current.log.close()  # the kernel closes a dead process's files
            self.graveyard.append(self.current)
        self.current = None
        self.restart_at = self.clock.monotonic() + restart_in_s
        return fates
