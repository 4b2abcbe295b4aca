"""``python -m sim --seeds N [--start S] [--steps M] [--without KINDS] [--bug NAME]``.

Runs seeds S to S+N-1 (S defaults to a random seed, printed first so the run can be
repeated), one line per failing seed and a summary line. Exits 0 if every seed held every
invariant; otherwise 1, after printing the first failing seed's trace up to its violation
(``--trace-lines`` of its end) and the command that replays it. Bad arguments exit 2.
``--without`` leaves fault kinds out (comma-separated, of sim.FAULT_KINDS); ``--bug``
plants a known defect (sim.bugs.BUGS) to watch the simulation find it.
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, required=True, help="how many seeds to run")
    parser.add_argument("--start", type=int, default=None, help="the first seed (random)")
    parser.add_argument("--steps", type=int, default=sim.DEFAULT_STEPS, help="faulty steps")
    parser.add_argument("--without", default="", help="fault kinds to leave out, e.g. drop_reply")
    parser.add_argument("--bug", choices=BUGS, default=None, help="plant a known defect")
    parser.add_argument("--trace-lines", type=int, default=60, help="trace lines to print")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if isinstance(args.seeds, bool) or args.seeds < 1:
            raise InvalidArgumentError(f"--seeds must be >= 1, got {args.seeds}")
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
        f"{args.seeds / elapsed:.1f} seeds/s, {steps / elapsed:.0f} steps/s, {elapsed:.1f} s "
        f"({cpu:.1f} s of CPU: {args.seeds / cpu:.1f} seeds/s)"
    )
    if not failures:
        return 0
    first = failures[0]
    shown = first.trace[len(first.trace) - max(args.trace_lines, 0) :]
    print(f"\ntrace of seed {first.seed} ({len(first.trace)} lines, last {len(shown)}):")
    print("\n".join(shown))
    replay = f"python -m sim --seeds 1 --start {first.seed} --steps {args.steps}"
    replay += f" --without {args.without}" if args.without else ""
    replay += f" --bug {args.bug}" if args.bug else ""
    print(f"\nreplay: {replay} --trace-lines {len(first.trace)}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
