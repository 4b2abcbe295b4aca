"""``write``, ``read`` and ``tail``: events in and out of a stream, one line per event.

``write`` sends each non-blank line (UTF-8 bytes, without its line break) as one event and
ends with a line giving the count and rate. ``read`` and ``tail`` go through a reader group:
``read`` reads what is in the stream when it starts and exits; ``tail`` starts at the tail
and follows it until Ctrl-C or ``--timeout``. Without ``--group`` they use a temporary group
(``cli-<random>``) deleted at exit; with ``--group`` a named one, created if absent, whose
position persists (a later ``read --group`` goes on where this one stopped).
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import typer

from pravega_ray.cli.output import emit, emit_line, event_record, note
from pravega_ray.cli.session import Options
from pravega_ray.errors import InvalidArgumentError
from pravega_ray.naming import parse_scoped_stream, validate_name

__all__ = ["read", "tail", "write"]

READ_BATCH_EVENTS = 1000
POLL_S = 1.0


def _lines(source: IO[bytes]) -> Iterator[bytes]:
    for raw in source:
        line = raw.rstrip(b"\r\n")
        if line.strip():
            yield line


def _routing_key(line: bytes, number: int, key_field: str) -> str:
    try:
        record = json.loads(line)
    except ValueError as e:
        raise InvalidArgumentError(f"line {number} is not JSON: {e}") from None
    if not isinstance(record, dict) or key_field not in record:
        raise InvalidArgumentError(f"line {number} is not a JSON object with field {key_field!r}")
    value = record[key_field]
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


FILE_OPTION = typer.Option(
    None, "--file", "-f", exists=True, dir_okay=False, help="Read lines from FILE, not stdin."
)


def write(
    ctx: typer.Context,
    scoped_stream: str = typer.Argument(..., metavar="SCOPE/STREAM"),
    file: Path | None = FILE_OPTION,
    routing_key: str | None = typer.Option(None, "--routing-key", "-k", help="One key for all."),
    key_field: str | None = typer.Option(
        None, "--key-field", help="Lines are JSON objects; route each by this field."
    ),
) -> None:
    """Write each non-blank line of stdin (or --file) as one event to SCOPE/STREAM."""
    options: Options = ctx.obj
    if routing_key is not None and key_field is not None:
        raise typer.BadParameter("give --routing-key or --key-field, not both")
    scope, stream = parse_scoped_stream(scoped_stream)
    writer = options.cluster().create_writer(scope, stream)
    count = size = 0
    started = time.monotonic()
    source: IO[bytes] = open(file, "rb") if file is not None else sys.stdin.buffer  # noqa: SIM115
    progress = _progress(options, file)
    try:
        task = progress.add_task("writing", total=None) if progress else None
        for count, line in enumerate(_lines(source), start=1):
            key = _routing_key(line, count, key_field) if key_field else routing_key
            writer.write_event(line, routing_key=key)
            size += len(line)
            if progress is not None and task is not None and count % 100 == 0:
                progress.update(task, completed=count)
        writer.flush()
    finally:
        if progress is not None:
            progress.stop()
        if file is not None:
            source.close()
        writer.close()
    seconds = max(time.monotonic() - started, 1e-9)
    emit(
        options.json,
        {
            "stream": scoped_stream,
            "events": count,
            "bytes": size,
            "seconds": round(seconds, 3),
            "events_per_second": round(count / seconds, 1),
        },
        f"wrote {count} events ({size} bytes) to {scoped_stream} in {seconds:.2f} s "
        f"({count / seconds:.0f} events/s, {size / seconds / 1e6:.2f} MB/s)",
    )


def _progress(options: Options, file: Path | None) -> Any:
    """A rich progress display on stderr, only when stderr is a terminal (not with --json)."""
    if options.json or not sys.stderr.isatty():
        return None
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from pravega_ray.cli.output import error_console

    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description} {task.completed} events"),
        TimeElapsedColumn(),
        console=error_console,
        transient=True,
    )
    progress.start()
    return progress


def _print_events(options: Options, batch: list[Any]) -> int:
    shown = 0
    for event in batch:
        if event.is_checkpoint:
            continue
        if options.json:
            emit_line(json.dumps(event_record(event.event, event.segment, event.offset)))
        else:
            emit_line(event.event.decode("utf-8", errors="replace"))
        shown += 1
    return shown


def _reader_group(
    options: Options, scope: str, stream: str, group: str | None, at_tail: bool
) -> tuple[str, bool]:
    """Create the group to read with; returns (name, temporary)."""
    import pravega_ray as pr

    cluster = options.cluster()
    scoped = f"{scope}/{stream}"
    if group is not None:
        validate_name("reader group", group)
        config = pr.ReaderGroupConfig.for_streams(scoped)
        if not cluster.create_reader_group(scope, group, config):
            streams = cluster.reader_group(scope, group).get_config().streams
            if scoped not in streams:
                raise InvalidArgumentError(
                    f"reader group {scope}/{group} reads {', '.join(streams)}, not {scoped}"
                )
        return group, False
    name = f"cli-{uuid.uuid4().hex[:12]}"
    mgr = cluster.stream_manager()
    if at_tail:
        config = pr.ReaderGroupConfig.for_streams(
            scoped, start_cuts={scoped: mgr.get_tail_cut(scope, stream)}
        )
    else:  # what is there now: from the head to the tail as of this moment
        config = pr.ReaderGroupConfig.for_streams(
            scoped, end_cuts={scoped: mgr.get_tail_cut(scope, stream)}
        )
    cluster.create_reader_group(scope, name, config)
    return name, True


@contextlib.contextmanager
def _stop_on_ctrl_c() -> Iterator[threading.Event]:
    """An event set by the first Ctrl-C (SIGINT) while the block runs; a second one raises
    KeyboardInterrupt at once. The reading loop checks the event between reads, so a Ctrl-C
    never lands inside a client call and the reader still leaves its group cleanly. The
    handler is installed even where SIGINT was ignored (a command started in the background
    by a script): ``tail`` promises to stop at Ctrl-C. Outside the main thread (an app calling
    ``main`` from a worker thread) nothing is installed and the event is never set.
    """
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def on_sigint(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def _consume(
    options: Options,
    scoped_stream: str,
    group: str | None,
    max_events: int | None,
    timeout: float | None,
    follow: bool,
) -> int:
    """Read events of ``scoped_stream`` and print them; returns how many were printed.

    Stops after ``max_events``, at ``timeout`` seconds, or (unless ``follow``) once the
    group has nothing unread. The reader leaves the group (and a temporary group is
    deleted) however it stops, Ctrl-C included.
    """
    scope, stream = parse_scoped_stream(scoped_stream)
    cluster = options.cluster()
    name, temporary = _reader_group(options, scope, stream, group, at_tail=follow)
    deadline = None if timeout is None else time.monotonic() + timeout
    shown = 0
    interrupted = threading.Event()
    try:
        reader = cluster.create_reader(f"cli-{uuid.uuid4().hex[:12]}", scope, name)
        try:
            with _stop_on_ctrl_c() as interrupted:
                rg = cluster.reader_group(scope, name)
                if follow:
                    note(options.json, f"following {scoped_stream} (Ctrl-C to stop)")
                while not interrupted.is_set() and (max_events is None or shown < max_events):
                    wait_s = POLL_S
                    if deadline is not None:
                        wait_s = min(wait_s, deadline - time.monotonic())
                        if wait_s <= 0:
                            break
                    want = READ_BATCH_EVENTS if max_events is None else max_events - shown
                    batch = reader.read_next_events(min(want, READ_BATCH_EVENTS), timeout_s=wait_s)
                    shown += _print_events(options, batch)
                    if not batch and not follow and rg.unread_bytes() == 0:
                        break
        finally:
            reader.close()
    finally:
        if temporary:
            cluster.delete_reader_group(scope, name)
    if interrupted.is_set():
        raise KeyboardInterrupt  # after the clean-up: the command exits 130
    return shown


def read(
    ctx: typer.Context,
    scoped_stream: str = typer.Argument(..., metavar="SCOPE/STREAM"),
    group: str | None = typer.Option(None, "--group", "-g", help="Read with this reader group."),
    max_events: int | None = typer.Option(None, "--max-events", "-n", min=1),
    timeout: float = typer.Option(60.0, "--timeout", min=0.0, help="Give up after N seconds."),
) -> None:
    """Print the events of SCOPE/STREAM (one per line; JSON lines with --json) and exit."""
    options: Options = ctx.obj
    shown = _consume(options, scoped_stream, group, max_events, timeout, follow=False)
    note(options.json, f"read {shown} events from {scoped_stream}")


def tail(
    ctx: typer.Context,
    scoped_stream: str = typer.Argument(..., metavar="SCOPE/STREAM"),
    max_events: int | None = typer.Option(None, "--max-events", "-n", min=1),
    timeout: float | None = typer.Option(
        None, "--timeout", min=0.0, help="Stop after N seconds (default: at Ctrl-C)."
    ),
) -> None:
    """Follow SCOPE/STREAM from its tail, printing new events until Ctrl-C or --timeout."""
    options: Options = ctx.obj
    shown = _consume(options, scoped_stream, None, max_events, timeout, follow=True)
    note(options.json, f"read {shown} events from {scoped_stream}")
