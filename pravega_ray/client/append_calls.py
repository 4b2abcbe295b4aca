"""A writer's appends of one pump round, one call per container.

A writer of a stream with many segments sends, at a light load, a small block to each of
many segments every round: one Ray call each, and each call costs the writer, Ray and the
container far more than its few events (at 10,000 events/s over 16 segments the calls
outran the machine and acks waited for hundreds of milliseconds). :func:`send_appends`
carries a round's appends to segments of one container in one ``append_many`` call and
hands back one future per append, answered exactly as its own ``append`` call would be: the
block's result or typed error, or, if the call itself fails (the container died: outcome
unknown), that error for every block of it. So the writer's protocol (conditional appends,
reconnects, resends) is unchanged.

Only an invoker that can tell which container serves a segment (``owner_of``; the Ray and
in-process invokers) gets grouped calls; with any other (the simulation's network) each
append is its own call, as it is through a connection whose ``append`` is its own (a test's
interposer sees every append).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from pravega_ray.contracts.segment_store import AppendResult
from pravega_ray.contracts.segment_store_service import AppendArgs, SegmentStoreClient
from pravega_ray.errors import SegmentStoreUnavailableError

__all__ = ["grouping", "send_appends"]


def grouping(connection: SegmentStoreClient) -> Callable[[str], int] | None:
    """The container of a segment (``owner_of``) if ``connection`` groups appends by it,
    else None (module docstring)."""
    owner_of = getattr(getattr(connection, "invoker", None), "owner_of", None)
    if (
        owner_of is None
        or getattr(type(connection), "append", None) is not SegmentStoreClient.append
    ):
        return None
    return owner_of  # type: ignore[no-any-return]


def send_appends(
    connection: SegmentStoreClient, appends: Sequence[AppendArgs]
) -> list[Future[AppendResult]]:
    """Send ``appends`` (``append``'s arguments each); one future per append, in order.

    Appends to segments of one container go in one ``append_many`` call, in the order
    given (so blocks of one segment keep theirs); a container with one append gets a plain
    ``append``.
    """
    owner_of = grouping(connection)
    if owner_of is None or len(appends) < 2:
        return [connection.append(*args) for args in appends]
    groups: dict[int, list[int]] = {}
    for i, args in enumerate(appends):
        groups.setdefault(owner_of(args[0]), []).append(i)
    futures: list[Future[AppendResult] | None] = [None] * len(appends)
    for indexes in groups.values():
        if len(indexes) == 1:
            futures[indexes[0]] = connection.append(*appends[indexes[0]])
            continue
        mine: list[Future[AppendResult]] = [Future() for _ in indexes]
        for i, future in zip(indexes, mine, strict=True):
            futures[i] = future
        call = connection.append_many(appends[indexes[0]][0], [appends[i] for i in indexes])
        call.add_done_callback(functools.partial(_answer, futures=mine))
    return [f for f in futures if f is not None]


def _answer(call: Future[Any], futures: list[Future[AppendResult]]) -> None:
    """Complete each append's future from the ``append_many`` call's answer."""
    error = call.exception()
    if error is not None:
        for future in futures:
            future.set_exception(error)
        return
    answers = call.result()
    if not isinstance(answers, list) or len(answers) != len(futures):
        # Defense in depth: an answer that does not match is an unknown outcome for all.
        mismatch = SegmentStoreUnavailableError(
            f"append_many answered {type(answers).__name__} for {len(futures)} appends"
        )
        for future in futures:
            future.set_exception(mismatch)
        return
    for future, answer in zip(futures, answers, strict=True):
        if isinstance(answer, BaseException):
            future.set_exception(answer)
        else:
            future.set_result(answer)
