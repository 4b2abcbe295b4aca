"""How the CLI prints: rich tables for people, one JSON document (or JSON lines) for scripts.

Results go to stdout; progress, summaries for people and errors go to stderr, so a
script piping ``pravega-ray read`` gets only the events.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Sequence
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

__all__ = ["emit", "emit_line", "error_console", "event_record", "note", "table"]

_stdout = Console(soft_wrap=True, highlight=False)
error_console = Console(stderr=True, soft_wrap=True, highlight=False)


def emit(json_mode: bool, document: Any, human: str | Table | None = None) -> None:
    """Print a command's result: ``document`` as JSON with ``--json``, else ``human``
    (a line of text or a rich table; nothing if None)."""
    if json_mode:
        sys.stdout.write(json.dumps(document, sort_keys=True, default=str) + "\n")
        sys.stdout.flush()
    elif isinstance(human, Table):
        _stdout.print(human)
    elif human is not None:
        typer.echo(human)


def emit_line(text: str) -> None:
    """Print one line of a stream of results (read/tail) at once."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def note(json_mode: bool, text: str) -> None:
    """A line for people on stderr (none with ``--json``)."""
    if not json_mode:
        error_console.print(text, markup=False)


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    """A rich table of ``rows`` under ``columns``."""
    out = Table(title=title, title_justify="left")
    for name in columns:
        out.add_column(name)
    for row in rows:
        out.add_row(*("" if v is None else str(v) for v in row))
    return out


def event_record(payload: bytes, segment: str | None, offset: int) -> dict[str, Any]:
    """The JSON form of an event: ``event`` as text if it is UTF-8, else ``event_base64``."""
    record: dict[str, Any] = {"segment": segment, "offset": offset}
    try:
        record["event"] = payload.decode("utf-8")
    except UnicodeDecodeError:
        record["event_base64"] = base64.b64encode(payload).decode("ascii")
    return record
