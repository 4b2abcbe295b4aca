"""Error-injecting wrappers around the real backends (Pravega's TestDurableDataLog idea).

They delegate to a real implementation and fail chosen calls: before the call
(nothing happened), after it (it happened, but the caller sees an error), or
slowly. Tests use them to prove the pipeline never acknowledges what is not
durable and never loses what it acknowledged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


class InjectedFault(OSError):
    """The error the wrappers raise."""


@dataclass
class FaultPlan:
    """Which calls fail: ``fail_before``/``fail_after`` hold method names; ``delay_s`` slows all.
    ``error``: the type raised (InjectedFault, an untyped OSError, unless a test wants a
    typed one such as StorageUnavailableError)."""

    fail_before: set[str] = field(default_factory=set)
    fail_after: set[str] = field(default_factory=set)
    delay_s: float = 0.0
    calls: int = 0
    error: type[Exception] = InjectedFault

    def wrap(self, name: str, method: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.delay_s:
                time.sleep(self.delay_s)
            if name in self.fail_before:
                raise self.error(f"injected failure before {name}")
            result = method(*args, **kwargs)
            if name in self.fail_after:
                raise self.error(f"injected failure after {name} succeeded")
            return result

        return call


class FaultyChunkStorage:
    def __init__(self, inner: Any, plan: FaultPlan) -> None:
        self._inner = inner
        self.plan = plan

    @property
    def capabilities(self) -> Any:
        return self._inner.capabilities

    def __getattr__(self, name: str) -> Any:
        return self.plan.wrap(name, getattr(self._inner, name))


class FaultyDurableLog:
    def __init__(self, inner: Any, plan: FaultPlan) -> None:
        self._inner = inner
        self.plan = plan

    @property
    def epoch(self) -> int:
        return self._inner.epoch

    def __getattr__(self, name: str) -> Any:
        return self.plan.wrap(name, getattr(self._inner, name))
