"""Calling actors and getting pravega-ray's typed errors back: the one place Ray errors unwrap.

Ray wraps an exception raised in an actor in ``RayTaskError``; a call to an
actor that died or is restarting fails with ``RayActorError`` (or
``ActorUnavailableError``). Callers in pravega-ray want the original typed
error, and "outcome unknown" as a :class:`RetriableError` naming the actor:
:class:`SegmentStoreUnavailableError` for containers (the default),
:class:`ControllerUnavailableError` for the controller (``unavailable=``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import ray
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayTaskError

from pravega_ray.errors import PravegaError, RetriableError, SegmentStoreUnavailableError
from pravega_ray.naming import container_for_segment
from pravega_ray_actors.options import container_name

R = TypeVar("R")

log = logging.getLogger(__name__)

LOOKUP_WAIT_S = 300.0
"""How long an actor starting up waits for a container's name to be registered again."""


def lookup(name: str, namespace: str, wait_s: float = LOOKUP_WAIT_S) -> ray.actor.ActorHandle[Any]:
    """The actor registered as ``name``, waiting while it is not (the cluster manager moving a
    container kills it and creates it again under its name). An actor's ``__init__`` must
    not fail on that: Ray does not restart an actor whose creation raised, so a controller
    actor restarted during a move was gone for good (found by the chaos run: the transaction
    timer, killed while a container moved, never came back)."""
    deadline = time.monotonic() + wait_s
    pause_s = 0.1
    while True:
        try:
            return ray.get_actor(name, namespace=namespace)
        except ValueError:
            if time.monotonic() >= deadline:
                raise
            log.info("actor %s not registered (moving?); looking again in %.1f s", name, pause_s)
            time.sleep(pause_s)
            pause_s = min(2 * pause_s, 5.0)


def unwrap_ray_error(
    error: BaseException, unavailable: type[RetriableError] = SegmentStoreUnavailableError
) -> BaseException:
    """The typed error behind a Ray error; a dead or restarting actor is ``unavailable``."""
    if isinstance(error, RayTaskError):
        cause = getattr(error, "cause", None)
        if isinstance(cause, PravegaError):
            return cause
        if isinstance(cause, (RayActorError, ActorUnavailableError)):
            return unavailable(str(cause))
    if isinstance(error, (RayActorError, ActorUnavailableError)):
        return unavailable(f"actor unavailable, outcome unknown: {error}")
    if isinstance(error, GetTimeoutError):
        return unavailable(f"actor call unanswered, outcome unknown: {error}")
    return error


def call_with_unwrap(
    ref: ray.ObjectRef[Any],
    timeout: float | None = None,
    unavailable: type[RetriableError] = SegmentStoreUnavailableError,
) -> Any:
    """``ray.get(ref)`` raising pravega-ray's typed errors (``unavailable``: outcome unknown)."""
    try:
        return ray.get(ref, timeout=timeout)
    except BaseException as e:
        unwrapped = unwrap_ray_error(e, unavailable)
        if unwrapped is e:
            raise
        raise unwrapped from None


def _actor_died(error: BaseException) -> bool:
    """Whether ``error`` says the called actor died (directly or as a task's cause)."""
    if isinstance(error, RayTaskError):
        error = getattr(error, "cause", None) or error
    return isinstance(error, RayActorError)


class _RefFuture(Future[Any]):
    """A future holding the ObjectRef it waits for until it completes."""

    _pravega_ref: ray.ObjectRef[Any] | None


def future_with_unwrap(
    ref: ray.ObjectRef[Any], on_actor_died: Callable[[], None] | None = None
) -> Future[Any]:
    """A ``concurrent.futures.Future`` for ``ref`` that fails with typed errors.

    The returned future holds ``ref`` until it completes: a dropped ObjectRef
    may be released before its completion callback runs, and the future would
    then never complete (seen as a hung writer flush in the benchmark).
    ``on_actor_died`` runs (on Ray's callback thread, so it must be quick and make no
    Ray calls) before the future fails, if the call failed because its actor died.
    """
    result = _RefFuture()
    result._pravega_ref = ref

    def done(source: Future[Any]) -> None:
        error = source.exception()
        if error is None:
            result.set_result(source.result())
        else:
            if on_actor_died is not None and _actor_died(error):
                on_actor_died()
            result.set_exception(unwrap_ray_error(error))
        result._pravega_ref = None

    ref.future().add_done_callback(done)
    return result


class RayServiceInvoker:
    """Calls :class:`SegmentStoreService` methods on the container actor owning a segment.

    ``handles[i]`` is container ``i``'s actor (the list is updated in place when a handle is
    replaced, so its owner sees the current handles). The method is named by the Protocol's
    own function object (``SegmentStoreService.append``), so the actor's method of the same
    name runs (tests hold the actor to the Protocol's signatures).

    A container moved by the cluster manager is a new actor under the same name
    (``segment-container-<i>`` in ``namespace``; None: this process's Ray namespace), and
    the old handle is dead for good. So a call that fails because its actor died marks that
    handle, and the next call to the container looks the name up again first: once per
    failed call, never retrying the call itself (its outcome is unknown; it fails with
    ``SegmentStoreUnavailableError`` and the caller's protocol resolves it). While the name
    is free (mid-move) the old handle stays, its calls fail fast, and the next one looks
    again.
    """

    def __init__(self, handles: list[Any], namespace: str | None = None) -> None:
        self._handles = handles
        self._namespace = namespace
        self._lock = threading.Lock()
        self._dead: dict[int, Any] = {}
        """Container index -> the handle a call found dead (replaced on the next call)."""

    def handle(self, segment: str) -> Any:
        """The current handle of the container owning ``segment`` (looked up again by name
        if a call found the previous one dead)."""
        return self._current(container_for_segment(segment, len(self._handles)))

    def invoke(self, method: Callable[..., Awaitable[R]], segment: str, *args: Any) -> Future[R]:
        index = container_for_segment(segment, len(self._handles))
        handle = self._current(index)
        remote = getattr(handle, method.__name__).remote
        return future_with_unwrap(
            remote(segment, *args), on_actor_died=lambda: self._mark_dead(index, handle)
        )

    def _mark_dead(self, index: int, handle: Any) -> None:
        with self._lock:
            if self._handles[index] is handle:
                self._dead[index] = handle

    def _current(self, index: int) -> Any:
        with self._lock:
            dead = self._dead.get(index)
            if dead is None:
                return self._handles[index]
        namespace = self._namespace or ray.get_runtime_context().namespace
        try:
            fresh = ray.get_actor(container_name(index), namespace=namespace)
        except ValueError:
            return dead  # no actor of that name now (mid-move): its calls fail fast
        with self._lock:
            if self._dead.get(index) is dead:
                del self._dead[index]
                self._handles[index] = fresh
            return self._handles[index]
