"""Ray shell of the transaction timer (``transaction-timer``).

One detached named actor runs the transaction timer
(``controller/transaction_timer.transaction_timer``): every ``TXN_TIMER_PERIOD_S`` it
finds the open transactions whose lease (or maximum execution time) ran out and aborts
them, and forgets completed transactions older than ``TXN_COMPLETED_KEEP_S``. It holds no
state but what is stored, so killed at any moment (Ray restarts it, ``max_restarts=-1``)
the next period does the work again; aborting a transaction twice is the same as once.
"""

from __future__ import annotations

import os

from pravega_ray.controller.transaction_timer import transaction_timer
from pravega_ray_actors.controller_parts import controller_parts
from pravega_ray_actors.ray_metrics import setup_actor_process


class TxnTimerActor:
    """Runs the transaction timer; see the module docstring."""

    def __init__(self, tier1: str, tier2: str, container_count: int, namespace: str) -> None:
        setup_actor_process()
        self._tiers = {"tier1": tier1, "tier2": tier2}
        parts = controller_parts(tier2, container_count, namespace)
        self._timer = transaction_timer(parts.metadata, parts.segments)
        self._timer.start()

    def run_once(self) -> int:
        """One pass now (tests); returns what the timer's ``run_once`` returns."""
        return int(self._timer.run_once())

    def describe(self) -> dict[str, object]:
        return {**self._tiers, "pid": os.getpid()}
