"""The ``pravega-ray`` command: global options, command groups and exit codes.

Exit codes (docs/cli.md): 0 ok; 1 a pravega-ray error (its class and message on stderr);
2 a usage error; 3 no cluster reachable; 130 interrupted (Ctrl-C). No Python traceback is
printed unless ``-v``.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from pravega_ray.cli.output import error_console
from pravega_ray.cli.session import ClusterUnreachableError, Options, prepare_ray_environment

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_NO_CLUSTER",
    "EXIT_OK",
    "EXIT_PRAVEGA_ERROR",
    "EXIT_USAGE",
    "app",
]

EXIT_OK = 0
EXIT_PRAVEGA_ERROR = 1
EXIT_USAGE = 2
EXIT_NO_CLUSTER = 3
EXIT_INTERRUPTED = 130


def _verbose_asked(args: Sequence[str] | None) -> bool:
    """Whether ``-v``/``--verbose`` is among the arguments (also before parsing succeeded)."""
    given = sys.argv[1:] if args is None else args
    return any(a in ("-v", "--verbose") for a in given)


class PravegaGroup(TyperGroup):
    """The root command: runs a command and turns what it raised into an exit code.

    Both the console script and typer's ``CliRunner`` go through :meth:`main`, so tests
    see the exit codes a user sees.
    """

    def main(  # type: ignore[override]  # click overloads main on standalone_mode; one body here
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        from typer._click import exceptions as click_exceptions
        from typer.exceptions import Abort

        from pravega_ray.errors import PravegaError

        verbose = _verbose_asked(args)
        code = EXIT_OK
        try:
            result = super().main(
                args=args,
                prog_name=prog_name or "pravega-ray",
                complete_var=complete_var,
                standalone_mode=False,
                **extra,
            )
            if isinstance(result, int) and not isinstance(result, bool):
                code = result  # an Exit(code): --help's 0, or Ctrl-C's 130 (typer's own)
                if code == EXIT_INTERRUPTED:
                    error_console.print("interrupted", markup=False)
        except click_exceptions.UsageError as e:
            e.show(file=sys.stderr)
            code = EXIT_USAGE
        except click_exceptions.ClickException as e:
            e.show(file=sys.stderr)
            code = e.exit_code
        except KeyboardInterrupt:
            error_console.print("interrupted", markup=False)
            code = EXIT_INTERRUPTED
        except Abort:  # end of input where a prompt wanted more
            error_console.print("aborted", markup=False)
            code = EXIT_PRAVEGA_ERROR
        except ClusterUnreachableError as e:
            _report(e, verbose, "no cluster reachable")
            code = EXIT_NO_CLUSTER
        except PravegaError as e:
            _report(e, verbose, type(e).__name__)
            code = EXIT_PRAVEGA_ERROR
        except Exception as e:
            # Not one of ours (e.g. an actor died): still no traceback unless -v.
            _report(e, verbose, type(e).__name__)
            code = EXIT_PRAVEGA_ERROR
        if standalone_mode:
            sys.exit(code)
        return code


def _report(error: BaseException, verbose: bool, label: str) -> None:
    if verbose:
        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
    message = str(error) or type(error).__name__
    error_console.print(f"error: {label}: {message}", markup=False)


app = typer.Typer(
    cls=PravegaGroup,
    name="pravega-ray",
    help="Manage and use a pravega-ray cluster: scopes, streams, events, tables, reader groups.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _global_options(
    ctx: typer.Context,
    address: str = typer.Option(
        "auto",
        "--address",
        envvar="PRAVEGA_RAY_ADDRESS",
        help="Ray address of the cluster (host:port, or auto).",
    ),
    namespace: str = typer.Option("pravega", "--namespace", help="Ray namespace of the cluster."),
    json_output: bool = typer.Option(False, "--json", help="Machine output: JSON (lines)."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Show logs and tracebacks."),
) -> None:
    """Global options, given before the command (``pravega-ray --json stream list iot``)."""
    from pravega_ray.logging_setup import configure_logging

    configure_logging(verbose)
    prepare_ray_environment()
    options = Options(address=address, namespace=namespace, json=json_output, verbose=verbose)
    ctx.obj = options
    ctx.call_on_close(options.close)


def _register() -> None:
    from pravega_ray.cli import admin, events, local

    app.add_typer(local.app, name="local")
    app.add_typer(admin.scope_app, name="scope")
    app.add_typer(admin.stream_app, name="stream")
    app.add_typer(admin.kvt_app, name="kvt")
    app.add_typer(admin.rg_app, name="rg")
    app.command("write")(events.write)
    app.command("read")(events.read)
    app.command("tail")(events.tail)


_register()
