"""Calling actors and getting pravega-ray's typed errors back: the one place Ray errors unwrap.

Ray wraps an exception raised in an actor in ``RayTaskError``; a call to an
actor that died or is restarting fails with ``RayActorError`` (or
``ActorUnavailableError``). Callers in pravega-ray want the original typed
error, and "outcome unknown" as a :class:`RetriableError` naming the actor:
:class:`SegmentStoreUnavailableError` for containers (the default),
:class:`ControllerUnavailableError` for the controller (``unavailable=``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import ray
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayTaskError

from pravega_ray.errors import PravegaError, RetriableError, SegmentStoreUnavailableError
from pravega_ray.naming import container_for_segment

R = TypeVar("R")


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
    ref: ray.ObjectRef,
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


def future_with_unwrap(ref: ray.ObjectRef) -> Future[Any]:
    """A ``concurrent.futures.Future`` for ``ref`` that fails with typed errors.

    The returned future holds ``ref`` until it completes: a dropped ObjectRef
    may be released before its completion callback runs, and the future would
    then never complete (seen as a hung writer flush in the benchmark).
    """
    result: Future[Any] = Future()
    result._pravega_ref = ref  # type: ignore[attr-defined]

    def done(source: Future[Any]) -> None:
        error = source.exception()
        if error is None:
            result.set_result(source.result())
        else:
            result.set_exception(unwrap_ray_error(error))
        result._pravega_ref = None  # type: ignore[attr-defined]

    ref.future().add_done_callback(done)
    return result


class RayServiceInvoker:
    """Calls :class:`SegmentStoreService` methods on the container actor owning a segment.

    ``handles[i]`` is container ``i``'s actor. The method is named by the Protocol's own
    function object (``SegmentStoreService.append``), so the actor's method of the same
    name runs (tests hold the actor to the Protocol's signatures).
    """

    def __init__(self, handles: list[Any]) -> None:
        self._handles = handles

    def handle(self, segment: str) -> Any:
        return self._handles[container_for_segment(segment, len(self._handles))]

    def invoke(self, method: Callable[..., Awaitable[R]], segment: str, *args: Any) -> Future[R]:
        remote = getattr(self.handle(segment), method.__name__).remote
        return future_with_unwrap(remote(segment, *args))
