"""How the REST server calls the controller: off the event loop, bounded in number and time.

The controller object is anything with the methods of :class:`RestControllerCalls` (an
``InProcessCluster.core``; in production a ``ControllerClient`` over the Ray actor). Its
methods block (an actor round trip, a workflow step), so :class:`ControllerCalls` runs each
on a thread pool of ``workers`` threads, never on the event loop, and gives up waiting after
``call_timeout_s`` (TimeoutError; the call itself runs on, as a blocking call cannot be
interrupted, and its thread is busy until it returns).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from pravega_ray.constants import WORKFLOW_POLL_S, WORKFLOW_WAIT_S
from pravega_ray.contracts.records import EpochInfo, SegmentRange, StreamInfo
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.stream_configuration import StreamConfiguration

__all__ = ["CALL_TIMEOUT_S", "WORKERS", "ControllerCalls", "OnlineReaders", "RestControllerCalls"]

R = TypeVar("R")

WORKERS = 16
"""Controller calls under way at once; more requests wait for a thread."""
CALL_TIMEOUT_S = 60.0
"""How long a request waits for one controller call."""

OnlineReaders = Callable[[str, str], list[str]]
"""(scope, reader group) -> the ids of its online readers, sorted (blocking; e.g.
``lambda s, g: cluster.reader_group(s, g).get_online_readers()``)."""


class RestControllerCalls(Protocol):
    """The controller calls the REST API makes: the methods of
    :class:`pravega_ray.contracts.controller_service.ControllerService` of the same names,
    which document them."""

    def get_cluster_config(self) -> dict[str, Any]: ...
    def damaged_records(self) -> dict[str, str]: ...
    def create_scope(self, scope: str, request_id: str | None = None) -> bool: ...
    def list_scopes(self) -> list[str]: ...
    def delete_scope(self, scope: str) -> bool: ...
    def create_stream(
        self,
        scope: str,
        stream: str,
        config: StreamConfiguration | None,
        request_id: str | None = None,
    ) -> bool: ...
    def list_streams(self, scope: str) -> list[str]: ...
    def get_stream_info(self, scope: str, stream: str) -> StreamInfo: ...
    def get_epoch_segments(self, scope: str, stream: str, epoch: int) -> list[SegmentRange]: ...
    def get_epoch(self, scope: str, stream: str, epoch: int) -> EpochInfo: ...
    def update_stream(self, scope: str, stream: str, config: StreamConfiguration) -> bool: ...
    def check_update(self, scope: str, stream: str) -> bool: ...
    def seal_stream(self, scope: str, stream: str) -> bool: ...
    def delete_stream(self, scope: str, stream: str) -> bool: ...
    def list_reader_groups(self, scope: str) -> list[str]: ...
    def get_reader_group(self, scope: str, group: str) -> dict[str, Any]: ...
    def delete_reader_group(self, scope: str, group: str) -> bool: ...


class ControllerCalls:
    """Runs blocking calls for the event loop (module docstring).

    ``workflow_wait_s`` bounds :meth:`wait_until` (how long seal, update and delete wait
    for their workflow, as Java's controller answers only once it is done), polling every
    ``poll_s``. InvalidArgumentError for a bound that is not a positive number.
    """

    def __init__(
        self,
        controller: RestControllerCalls,
        *,
        online_readers: OnlineReaders | None = None,
        workers: int = WORKERS,
        call_timeout_s: float = CALL_TIMEOUT_S,
        workflow_wait_s: float = WORKFLOW_WAIT_S,
        poll_s: float = WORKFLOW_POLL_S,
    ) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 1024:
            raise InvalidArgumentError(f"workers must be an int in [1, 1024], got {workers!r}")
        for name, value in (
            ("call_timeout_s", call_timeout_s),
            ("workflow_wait_s", workflow_wait_s),
            ("poll_s", poll_s),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e6:
                raise InvalidArgumentError(f"{name} must be a number of seconds > 0, got {value!r}")
        self.controller = controller
        self.online_readers = online_readers
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pravega-rest")
        self._call_timeout_s = float(call_timeout_s)
        self._workflow_wait_s = float(workflow_wait_s)
        self._poll_s = float(poll_s)

    async def run(self, call: Callable[..., R], *args: Any, timeout_s: float | None = None) -> R:
        """``call(*args)`` on the pool; what it returns or raises. TimeoutError after
        ``timeout_s`` (default ``call_timeout_s``)."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, functools.partial(call, *args))
        limit = self._call_timeout_s if timeout_s is None else timeout_s
        try:
            return await asyncio.wait_for(future, limit)
        except asyncio.TimeoutError:
            name = getattr(call, "__name__", "controller call")
            raise TimeoutError(f"{name} did not answer within {limit:.0f} s") from None

    async def wait_until(self, done: Callable[[], bool], what: str) -> None:
        """Poll ``done`` (a blocking call, run on the pool) until it is True; TimeoutError
        after ``workflow_wait_s`` (the workflow still finishes). Errors of ``done`` pass."""
        deadline = time.monotonic() + self._workflow_wait_s
        while not await self.run(done):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the {what} did not finish within {self._workflow_wait_s:.0f} s; it goes on"
                )
            await asyncio.sleep(self._poll_s)

    def close(self) -> None:
        """Stop taking calls; calls under way finish on their threads. Idempotent."""
        self._executor.shutdown(wait=False, cancel_futures=True)
