"""Shrinking a failing seed to the shortest run that still breaks an invariant.

A failing seed's trace runs to its first broken invariant, but most of what came before
may not matter. :func:`shrink` looks for a shorter run of the same seed that still fails
(any invariant: the violation it ends in is printed beside the original's), in at most
``runs_max`` runs, deterministically:

1. **steps**: a run of ``n`` steps is the original run cut short (``sim/world.py``), so a
   run of as many steps as the step of the violation fails the same way (when the
   violation came during the faulty phase). Bisection then finds the fewest faulty steps
   for which the seed still fails (assuming fewer steps fail less often; where that is not
   so it finds *a* short failing run, not the shortest).
2. **fault kinds**: each kind the seed injects is left out in turn (as ``--without``
   does; kinds in :data:`sim.FAULT_KINDS` order), and stays out if the seed still fails.
   A run that fails earlier without it also lowers the steps.
3. **steps again**, if anything was left out: without those faults the seed may fail
   sooner.

Each candidate is run once (a cache keeps every answer). The result is the shortest
failing run found, with the ``--steps`` and ``--without`` that replay it exactly.
"Shortest" counts faulty steps and fault kinds: what may have caused the violation. The
fault-free settling phase after them may be longer, so a shrunk trace can have more lines
than the original (whose violation came sooner, among more faults).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pravega_ray.errors import InvalidArgumentError
from sim.world import FAULT_KINDS, Result

__all__ = ["SHRINK_RUNS_MAX", "Runner", "Shrunk", "shrink"]

SHRINK_RUNS_MAX = 40
"""Runs a shrink may take, unless told otherwise (each takes what one seed takes)."""

Runner = Callable[[int, frozenset[str]], Result]
"""``run(steps, without)``: the seed's run with ``steps`` faulty steps, leaving out the
fault kinds ``without``."""

_KIND_ORDER = tuple(sorted(FAULT_KINDS))


@dataclass(frozen=True, slots=True)
class Shrunk:
    """The shortest failing run found: ``result`` (its trace, violation, step), and the
    ``steps`` and ``without`` that replay it; ``runs``: how many runs the search took."""

    result: Result
    steps: int
    without: frozenset[str]
    runs: int


def shrink(
    run: Runner,
    failed: Result,
    steps: int,
    without: frozenset[str] = frozenset(),
    runs_max: int = SHRINK_RUNS_MAX,
) -> Shrunk:
    """Shrink ``failed``, the run ``run(steps, without)`` returned (module docstring).

    ``run`` must be deterministic (the same arguments, the same result). Runs at most
    ``runs_max`` times. InvalidArgumentError if ``failed`` did not fail, or ``runs_max``
    is not an int >= 0.
    """
    if failed.ok or failed.violation_step is None:
        raise InvalidArgumentError("only a failing run can be shrunk")
    if isinstance(runs_max, bool) or not isinstance(runs_max, int) or runs_max < 0:
        raise InvalidArgumentError(f"runs_max must be an int >= 0, got {runs_max!r}")
    search = _Search(run, runs_max, steps, without, failed)
    search.bisect_steps()
    for kind in _KIND_ORDER:
        if kind in search.without or failed.faults is None:
            continue
        if kind not in failed.faults.active():
            continue  # the seed injects none: leaving it out would change nothing
        search.try_without(kind)
    if search.without != without:
        search.bisect_steps()
    best = search.best
    return Shrunk(best, search.steps, search.without, search.runs)


class _Search:
    """The state of one shrink: the best failing run so far and the runs left."""

    def __init__(
        self,
        run: Runner,
        runs_max: int,
        steps: int,
        without: frozenset[str],
        failed: Result,
    ) -> None:
        self._run = run
        self._runs_max = runs_max
        self._cache: dict[tuple[int, frozenset[str]], Result] = {(steps, without): failed}
        self.runs = 0
        self.steps = steps
        self.without = without
        self.best = failed

    def _attempt(self, steps: int, without: frozenset[str]) -> Result | None:
        """The run of ``steps`` without ``without`` (cached); None once out of runs."""
        key = (steps, without)
        if key not in self._cache:
            if self.runs >= self._runs_max:
                return None
            self.runs += 1
            self._cache[key] = self._run(steps, without)
        return self._cache[key]

    def _keep(self, steps: int, without: frozenset[str], result: Result) -> None:
        self.steps, self.without, self.best = steps, without, result

    def bisect_steps(self) -> None:
        """Find the fewest steps that still fail (with the current ``without``)."""
        step = self.best.violation_step
        assert step is not None
        if step < self.steps:  # the same run, cut at its violation
            cut = self._attempt(step, self.without)
            if cut is None:
                return
            if not cut.ok:
                self._keep(step, self.without, cut)
        low, high = 0, self.steps  # low passes (no step fails nothing), high fails
        while high - low > 1:
            middle = (low + high) // 2
            result = self._attempt(middle, self.without)
            if result is None:
                return
            if result.ok:
                low = middle
            else:
                high = middle
                self._keep(middle, self.without, result)

    def try_without(self, kind: str) -> None:
        """Leave ``kind`` out for good if the run still fails without it."""
        without = self.without | {kind}
        result = self._attempt(self.steps, without)
        if result is None or result.ok:
            return
        self._keep(self.steps, without, result)
        step = result.violation_step
        if step is not None and step < self.steps:  # it fails sooner: cut it there
            cut = self._attempt(step, without)
            if cut is not None and not cut.ok:
                self._keep(step, without, cut)
