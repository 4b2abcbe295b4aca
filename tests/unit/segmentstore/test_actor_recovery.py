"""The container actor's constructor tries recovery again when storage fails for now (an S3
server throttling, found by the chaos run): a constructor that raises leaves an actor Ray
never restarts, so one SlowDown answer made a container disappear for good."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

import pravega_ray_actors.segment_container_actor as module
from pravega_ray.errors import ContainerNotReadyError, DataCorruptionError

pytestmark = pytest.mark.timeout(30)


class Recovering:
    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures

    def recover(self) -> Any:
        if self.failures:
            raise self.failures.pop(0)

        class Stats:
            seconds = 0.0

        return Stats()


def slow_down() -> ClientError:
    return ClientError(
        {"Error": {"Code": "SlowDown", "Message": "Please reduce your request rate."}},
        "ListObjectsV2",
    )


def build(monkeypatch: pytest.MonkeyPatch, failures: list[BaseException]) -> list[Recovering]:
    built: list[Recovering] = []

    def build_container_on(*args: Any, **kwargs: Any) -> Recovering:
        built.append(Recovering(failures))
        return built[-1]

    monkeypatch.setattr(module, "setup_actor_process", lambda: None)
    monkeypatch.setattr(module, "build_container_on", build_container_on)
    monkeypatch.setattr(module, "RayScaleReporter", lambda: None)
    monkeypatch.setattr(module.time, "sleep", lambda s: None)
    return built


def test_throttled_or_failing_storage_is_tried_again_until_recovery_succeeds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built = build(monkeypatch, [slow_down(), OSError("disk"), slow_down()])
    actor = module.SegmentContainerActor.__new__(module.SegmentContainerActor)
    module.SegmentContainerActor.__init__(actor, "file:///t1", "file:///t2", 0)
    assert len(built) == 4  # three failed attempts, then recovered


def test_storage_failing_every_attempt_still_ends_in_a_typed_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    build(monkeypatch, [slow_down() for _ in range(module.CONTAINER_RECOVERY_ATTEMPTS_MAX)])
    actor = module.SegmentContainerActor.__new__(module.SegmentContainerActor)
    with pytest.raises(ContainerNotReadyError):
        module.SegmentContainerActor.__init__(actor, "file:///t1", "file:///t2", 0)


def test_damaged_data_is_not_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    built = build(monkeypatch, [DataCorruptionError("chunk x damaged")])
    actor = module.SegmentContainerActor.__new__(module.SegmentContainerActor)
    module.SegmentContainerActor.__init__(actor, "file:///t1", "file:///t2", 0)
    assert len(built) == 1  # kept: every call raises it (the module docstring)
