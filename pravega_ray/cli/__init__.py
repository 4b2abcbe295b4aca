"""``pravega-ray``, the command line (docs/cli.md).

``main`` is the console script's entry. Importing this package does not import Ray:
commands that need a cluster load it when they run, so ``pravega-ray --help`` is quick.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


def main(args: Sequence[str] | None = None) -> int:
    """Run ``pravega-ray`` with ``args`` (default ``sys.argv[1:]``); returns the exit code.

    Exit codes: 0 ok, 1 a pravega-ray error, 2 usage error, 3 no cluster reachable,
    130 interrupted.
    """
    try:
        import typer

        from pravega_ray.cli.app import app

        command = typer.main.get_command(app)
        code: int = command.main(args=args, prog_name="pravega-ray", standalone_mode=False)
        return code
    except KeyboardInterrupt:
        return 130
