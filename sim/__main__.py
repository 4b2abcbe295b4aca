"""``python -m sim --seeds N [--start S] [--steps M] [--without KINDS] [--bug NAME]
[--no-shrink] [--shrink-runs R] [--trace-lines L]``.

Runs seeds S to S+N-1 (S defaults to a random seed, printed first so the run can be
repeated), one line per failing seed and a summary line. Exits 0 if every seed held every
invariant; otherwise 1, after shrinking the first failing seed (``sim/shrink.py``: the
fewest ``--steps`` that still fail, by bisection, then each fault kind left out in turn if
it still fails without it; at most ``--shrink-runs`` runs, 40 by default) and printing the
original violation and its step, the shrunk one and its step, the shrunk run's trace up to
its violation (``--trace-lines`` of its end) and the exact command that replays it.
``--no-shrink`` prints the original run's trace and replay command instead. Bad arguments
exit 2. ``--without`` leaves fault kinds out (comma-separated, of sim.FAULT_KINDS);
``--bug`` plants a known defect (sim.bugs.BUGS) to watch the simulation find it.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import time
from collections.abc import Sequence

import sim
from pravega_ray.errors import InvalidArgumentError
from sim.bugs import BUGS, planted
from sim.shrink import SHRINK_RUNS_MAX, Shrunk, shrink


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sim",
        description="Run seeds of the deterministic simulation of the data path; shrink the "
        "first failing seed to the shortest run that still fails, and print how to replay it.",
    )
    parser.add_argument("--seeds", type=int, required=True, help="how many seeds to run")
    parser.add_argument("--start", type=int, default=None, help="the first seed (random)")
    parser.add_argument("--steps", type=int, default=sim.DEFAULT_STEPS, help="faulty steps")
    parser.add_argument(
        "--without",
        default="",
        help=f"fault kinds to leave out, comma-separated: {', '.join(sorted(sim.FAULT_KINDS))}",
    )
    parser.add_argument("--bug", choices=BUGS, default=None, help="plant a known defect")
    parser.add_argument("--trace-lines", type=int, default=60, help="trace lines to print")
    parser.add_argument(
        "--no-shrink",
        action="store_true",
        help="print the first failing seed's own trace, not the shrunk run's",
    )
    parser.add_argument(
        "--shrink-runs",
        type=int,
        default=SHRINK_RUNS_MAX,
        help=f"runs a shrink may take (default {SHRINK_RUNS_MAX})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if isinstance(args.seeds, bool) or args.seeds < 1:
            raise InvalidArgumentError(f"--seeds must be >= 1, got {args.seeds}")
        if args.shrink_runs < 0:
            raise InvalidArgumentError(f"--shrink-runs must be >= 0, got {args.shrink_runs}")
        start = random.randrange(2**31) if args.start is None else args.start
        sim.world.check_run_arguments(start, args.steps)
        without = frozenset(k for k in args.without.split(",") if k)
        if not without <= sim.FAULT_KINDS:
            raise InvalidArgumentError(
                f"--without takes {sorted(sim.FAULT_KINDS)}, got {sorted(without)}"
            )
        config = sim.SimConfig(faults=sim.FAULT_KINDS - without)
    except InvalidArgumentError as e:
        parser.print_usage(sys.stderr)
        print(f"python -m sim: error: {e}", file=sys.stderr)
        return 2
    print(f"first seed {start}, {args.seeds} seeds, {args.steps} steps", flush=True)
    began = time.perf_counter()
    cpu_began = time.process_time()
    failures: list[sim.Result] = []
    steps = 0
    bug = planted(args.bug) if args.bug else contextlib.nullcontext()
    with bug:
        for seed in range(start, start + args.seeds):
            result = sim.run(seed, args.steps, config)
            steps += result.steps
            if not result.ok:
                failures.append(result)
                print(f"seed {seed}: step {result.violation_step}: {result.violation}", flush=True)
        elapsed = time.perf_counter() - began
        cpu = max(time.process_time() - cpu_began, 1e-9)
        print(
            f"{args.seeds - len(failures)}/{args.seeds} seeds passed, {len(failures)} failed; "
            f"{args.seeds / elapsed:.1f} seeds/s, {steps / elapsed:.0f} steps/s, "
            f"{elapsed:.1f} s ({cpu:.1f} s of CPU: {args.seeds / cpu:.1f} seeds/s)"
        )
        if not failures:
            return 0
        first = failures[0]
        if args.no_shrink:
            _print_trace(first, args.trace_lines)
            print(f"\nreplay: {_replay(first, args.steps, without, args.bug)}")
            return 1
        print(f"\nshrinking seed {first.seed} (at most {args.shrink_runs} runs)...", flush=True)
        shrunk = _shrink(first, args.steps, without, args.shrink_runs)
    _print_shrunk(first, args.steps, without, shrunk, args.trace_lines, args.bug)
    return 1


def _shrink(first: sim.Result, steps: int, without: frozenset[str], runs_max: int) -> Shrunk:
    """Shrink the failing run ``first`` (of ``steps`` steps, without ``without``)."""

    def run(steps: int, without: frozenset[str]) -> sim.Result:
        return sim.run(first.seed, steps, sim.SimConfig(faults=sim.FAULT_KINDS - without))

    return shrink(run, first, steps, without, runs_max)


def _print_shrunk(
    first: sim.Result,
    steps: int,
    without: frozenset[str],
    shrunk: Shrunk,
    lines: int,
    bug: str | None,
) -> None:
    result = shrunk.result
    left_out = ",".join(sorted(shrunk.without - without)) or "nothing more"
    print(f"shrunk in {shrunk.runs} runs: --steps {steps} -> {shrunk.steps}; left out {left_out}")
    print(f"original violation at step {first.violation_step}: {first.violation}")
    print(f"shrunk violation at step {result.violation_step}: {result.violation}")
    print(f"original run: {_replay(first, steps, without, bug)}")
    _print_trace(result, lines)
    print(f"\nreplay: {_replay(result, shrunk.steps, shrunk.without, bug)}")


def _print_trace(result: sim.Result, lines: int) -> None:
    shown = result.trace[len(result.trace) - max(lines, 0) :]
    print(f"\ntrace of seed {result.seed} ({len(result.trace)} lines, last {len(shown)}):")
    print("\n".join(shown))


def _replay(result: sim.Result, steps: int, without: frozenset[str], bug: str | None) -> str:
    """The command that replays ``result`` exactly, printing its whole trace."""
    replay = f"python -m sim --seeds 1 --start {result.seed} --steps {steps}"
    replay += f" --without {','.join(sorted(without))}" if without else ""
    replay += f" --bug {bug}" if bug else ""
    return replay + f" --no-shrink --trace-lines {len(result.trace)}"


if __name__ == "__main__":
    sys.exit(main())
