"""The seeded fault schedule of a chaos run: which fault, at which second, on which target.

:func:`build_schedule` is a pure function of the seed, the run's length and the fault counts:
the same arguments give the same schedule, so a failing run is replayed with its seed (the
load's timing still varies; the faults, their order and their times do not). Every kind in
the counts appears at least once however short the run; the faults are spread over the run
between a quiet start and a quiet end (``lead_s`` each), each at a random point of its own
slot, so two faults are never closer than ``min_gap_s``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from pravega_ray.errors import InvalidArgumentError

CONTAINER_KILL = "container_kill"
NODE_REMOVE = "node_remove"
NODE_ADD = "node_add"
READER_KILL = "reader_kill"
ZOMBIE = "zombie"
"""A container taken over by a zombie process, then restarted: the zombie keeps writing."""
TIER2_OUTAGE = "tier2_outage"
"""Every request to Tier-2 fails (503) for ``chaos.run.TIER2_OUTAGE_S``: Tier-1 holds what
is acknowledged meanwhile, and the storage writers flush it once Tier-2 is back."""
CONTROLLER_ACTORS = (
    "controller",  # an API instance (named controller or controller-<i>)
    "request-event-processor",
    "commit-event-processor",
    "abort-event-processor",
    "transaction-timer",
    "stream-bucket",  # one of stream-bucket-<i>
    "cluster-manager",
    "endpoints",  # the gRPC and REST APIs Pravega's own clients use
)
"""Controller actor kinds; a fault on one is ``kill:<kind>``."""


def per_ten_minutes(seconds: float) -> dict[str, int]:
    """The issue's fault counts for a run of ``seconds``: 20 container kills and 5 kills of
    each controller actor per 10 minutes, a node removed and one added, a zombie container, a
    Tier-2 outage, a reader killed every three minutes; at least one of each however short."""
    scale = seconds / 600.0

    def at_least_one(per_ten: float) -> int:
        return max(1, math.ceil(per_ten * scale))

    counts = {
        CONTAINER_KILL: at_least_one(20),
        NODE_REMOVE: 1,
        NODE_ADD: 1,
        ZOMBIE: 1,
        TIER2_OUTAGE: 1,
    }
    counts[READER_KILL] = at_least_one(3.3)
    for actor in CONTROLLER_ACTORS:
        counts[f"kill:{actor}"] = at_least_one(5)
    return counts


@dataclass(frozen=True)
class Fault:
    """One fault: ``kind`` at ``at_s`` seconds into the load; ``pick`` chooses the target
    among the candidates of that kind at that moment (``pick % len(candidates)``)."""

    at_s: float
    kind: str
    pick: int


def build_schedule(
    seed: int,
    seconds: float,
    counts: Mapping[str, int],
    *,
    lead_s: float = 10.0,
    min_gap_s: float = 1.0,
) -> list[Fault]:
    """The faults of a run, in time order (module docstring). InvalidArgumentError when the
    counts do not fit: each fault needs a slot of at least ``min_gap_s``."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise InvalidArgumentError("seed must be an int")
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise InvalidArgumentError("seconds must be a finite number > 0")
    if any(not isinstance(n, int) or n < 0 for n in counts.values()):
        raise InvalidArgumentError("fault counts must be ints >= 0")
    kinds = [kind for kind in sorted(counts) for _ in range(counts[kind])]
    span = seconds - 2 * lead_s
    if kinds and span / len(kinds) < min_gap_s:
        raise InvalidArgumentError(
            f"{len(kinds)} faults do not fit in {seconds}s with {lead_s}s quiet at each end "
            f"and {min_gap_s}s between faults"
        )
    rng = random.Random(seed)
    rng.shuffle(kinds)
    # A node is removed before one is added back: swap them if the shuffle put them the
    # other way round (the add then restores the cluster's size for the rest of the run).
    if NODE_REMOVE in kinds and NODE_ADD in kinds:
        remove, add = kinds.index(NODE_REMOVE), kinds.index(NODE_ADD)
        if add < remove:
            kinds[add], kinds[remove] = kinds[remove], kinds[add]
    slot = span / len(kinds) if kinds else 0.0
    slack = max(0.0, slot - min_gap_s)
    return [
        Fault(
            at_s=lead_s + i * slot + rng.uniform(0, slack), kind=kind, pick=rng.randrange(1 << 16)
        )
        for i, kind in enumerate(kinds)
    ]
