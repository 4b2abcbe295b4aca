"""A deterministic simulation of pravega-ray's data path (after TigerBeetle's VOPR and
FoundationDB's simulator); how it works: :mod:`sim.world`.

:func:`run` runs one seed and returns its :class:`Result`: the same seed gives the same
trace, step for step, in any process. The stream scales through the project's real
controller (:mod:`sim.controller`). Faults (:data:`FAULT_KINDS`): crashes and restarts,
delayed and lost calls and replies, I/O errors, torn log tails (:mod:`sim.disk`), a
wall-clock jump (:mod:`sim.clock`), controller crashes and a Tier-2 outage; features drawn
alike: the recursive delete of a second scope (:mod:`sim.scope`), event time (watermarks
and a reader's time window, :mod:`sim.watermarks`), transactions (a transactional client
committing, aborting and abandoning transactions while the stream scales, the controller's
commit and abort processors, rolling commits and transaction timer,
:mod:`sim.transactions`); the invariants: :mod:`sim.invariants`.
``python -m sim --seeds N`` runs many (``sim/__main__.py``) and shrinks the first failing
seed to the shortest run that still fails (:mod:`sim.shrink`); :mod:`sim.bugs` plants
known defects to show the simulation finds them.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Iterator

from pravega_ray.errors import InvalidArgumentError
from sim.controller import controller_hooks, sequential_workflows
from sim.world import (
    DEFAULT_STEPS,
    FAULT_KINDS,
    FEATURES,
    MESSAGE_LOSS,
    Result,
    SimConfig,
    World,
    check_run_arguments,
)

__all__ = ["DEFAULT_STEPS", "FAULT_KINDS", "FEATURES", "MESSAGE_LOSS", "Result", "SimConfig", "run"]


def run(seed: int, steps: int = DEFAULT_STEPS, config: SimConfig | None = None) -> Result:
    """Run seed ``seed``: ``steps`` steps with faults, then settle and check everything.

    The result's ``violation`` is None if every invariant held; otherwise it names the
    first broken one, ``violation_step`` says at which step, and ``trace`` ends there.
    The system's own log messages are silenced during the run (the trace says what
    happened). InvalidArgumentError for a seed that is not an int >= 0, ``steps`` not an
    int >= 1, or a ``config`` that is neither None nor a SimConfig.
    """
    check_run_arguments(seed, steps)
    if config is not None and not isinstance(config, SimConfig):
        raise InvalidArgumentError(f"config must be a SimConfig or None, got {config!r}")
    with _quiet(), sequential_workflows(), controller_hooks(random.Random(f"sim-txn-ids:{seed}")):
        world = World(seed, config or SimConfig())
        try:
            return world.run(steps)
        finally:
            world.close()  # its temporary files too, if the run failed unexpectedly


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    logger = logging.getLogger("pravega_ray")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
