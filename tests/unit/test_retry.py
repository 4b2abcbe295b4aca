"""repeat_while: how calls whose outcome is unknown are repeated (retry.py), and its users."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any

import pytest

from pravega_ray.controller.segment_helper import SegmentHelper
from pravega_ray.errors import (
    ControllerUnavailableError,
    InvalidArgumentError,
    SegmentStoreUnavailableError,
)
from pravega_ray.retry import repeat_while
from pravega_ray.timing import ManualThreadScheduler

pytestmark = pytest.mark.timeout(10)
log = logging.getLogger("test-retry")


def flaky(failures: int, error: BaseException, result: Any = "done") -> Any:
    calls = []

    def call() -> Any:
        calls.append(1)
        if len(calls) <= failures:
            raise error
        return result

    call.calls = calls  # type: ignore[attr-defined]
    return call


def test_repeat_while_returns_once_the_call_succeeds() -> None:
    call = flaky(2, ControllerUnavailableError("down"))
    scheduler = ManualThreadScheduler()
    result = repeat_while(
        ControllerUnavailableError, call, what="x", log=log, attempts_max=3,
        pause_s=0.25, scheduler=scheduler,
    )  # fmt: skip
    assert result == "done" and len(call.calls) == 3 and scheduler.slept_s == [0.25, 0.25]


def test_repeat_while_raises_the_last_error_after_attempts_max() -> None:
    call = flaky(5, ControllerUnavailableError("down"))
    with pytest.raises(ControllerUnavailableError):
        repeat_while(
            ControllerUnavailableError, call, what="x", log=log, attempts_max=3,
            pause_s=0, scheduler=ManualThreadScheduler(),
        )  # fmt: skip
    assert len(call.calls) == 3


def test_repeat_while_does_not_repeat_other_errors() -> None:
    call = flaky(5, InvalidArgumentError("bad"))
    with pytest.raises(InvalidArgumentError):
        repeat_while(
            ControllerUnavailableError, call, what="x", log=log, attempts_max=3,
            pause_s=0, scheduler=ManualThreadScheduler(),
        )  # fmt: skip
    assert len(call.calls) == 1


class RestartingClient:
    """A segment-store client whose container is down for the first ``failures`` calls."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[str] = []

    def seal(self, segment: str) -> Future[int]:
        self.calls.append(segment)
        future: Future[int] = Future()
        if len(self.calls) <= self.failures:
            future.set_exception(SegmentStoreUnavailableError("restarting"))
        else:
            future.set_result(42)
        return future


def test_segment_helper_repeats_a_call_while_its_container_restarts() -> None:
    client = RestartingClient(failures=2)
    scheduler = ManualThreadScheduler()
    helper = SegmentHelper(client, attempts_max=5, pause_s=0.5, scheduler=scheduler)  # type: ignore[arg-type]
    assert helper.seal_segment("sc/st/0.#epoch.0") == 42
    assert client.calls == ["sc/st/0.#epoch.0"] * 3
    assert scheduler.slept_s == [0.5, 0.5]  # paced through its scheduler, never really waiting


def test_segment_helper_with_one_attempt_reports_the_outage_at_once() -> None:
    client = RestartingClient(failures=1)
    helper = SegmentHelper(client, attempts_max=1)  # type: ignore[arg-type]
    with pytest.raises(SegmentStoreUnavailableError):
        helper.seal_segment("sc/st/0.#epoch.0")
    assert len(client.calls) == 1
