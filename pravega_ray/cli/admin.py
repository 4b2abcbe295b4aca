"""``scope``, ``stream``, ``kvt`` and ``rg`` commands: thin wrappers of the client API
(docs/api.md), each printing a table or, with ``--json``, one JSON document."""

from __future__ import annotations

from typing import Any

import typer

from pravega_ray.cli.output import emit, table
from pravega_ray.cli.session import Options
from pravega_ray.errors import InvalidArgumentError, InvalidNameError, NoSuchKeyError
from pravega_ray.naming import parse_scoped_stream, validate_name

__all__ = ["kvt_app", "rg_app", "scope_app", "stream_app"]

scope_app = typer.Typer(help="Create, list and delete scopes.", no_args_is_help=True)
stream_app = typer.Typer(
    help="Create, inspect, scale, seal, truncate, delete streams.", no_args_is_help=True
)
kvt_app = typer.Typer(help="Key-value tables (UTF-8 keys and values).", no_args_is_help=True)
rg_app = typer.Typer(help="Reader groups: list, checkpoint.", no_args_is_help=True)


def _created(json_mode: bool, kind: str, name: str, created: bool) -> None:
    verb = "created" if created else "already exists:"
    emit(json_mode, {kind: name, "created": created}, f"{verb} {kind} {name}")


# --- scope ---------------------------------------------------------------------------------------
@scope_app.command("create")
def scope_create(ctx: typer.Context, scope: str) -> None:
    """Create SCOPE (exit 0 also if it exists)."""
    options: Options = ctx.obj
    validate_name("scope", scope)
    _created(options.json, "scope", scope, options.cluster().stream_manager().create_scope(scope))


@scope_app.command("list")
def scope_list(ctx: typer.Context) -> None:
    """List the scopes."""
    options: Options = ctx.obj
    scopes = sorted(options.cluster().stream_manager().list_scopes())
    emit(options.json, {"scopes": scopes}, table(None, ["scope"], [(s,) for s in scopes]))


@scope_app.command("delete")
def scope_delete(
    ctx: typer.Context,
    scope: str,
    recursive: bool = typer.Option(False, "--recursive", "-r", help="Delete what it holds."),
) -> None:
    """Delete SCOPE (with --recursive, its streams, tables and reader groups first)."""
    options: Options = ctx.obj
    validate_name("scope", scope)
    deleted = options.cluster().stream_manager().delete_scope(scope, recursive=recursive)
    emit(
        options.json,
        {"scope": scope, "deleted": deleted},
        f"{'deleted' if deleted else 'no such'} scope {scope}",
    )


# --- stream --------------------------------------------------------------------------------------
def _configuration(
    segments: int | None,
    event_rate: int | None,
    scale_factor: int,
    retention_min_bytes: int | None,
    retention_max_bytes: int | None,
    retention_min_ms: int | None,
    retention_max_ms: int | None,
) -> Any:
    import pravega_ray as pr

    if event_rate is not None:
        scaling = pr.ScalingPolicy.by_event_rate(event_rate, scale_factor, segments or 1)
    else:
        scaling = pr.ScalingPolicy.fixed(segments or 1)
    by_size = retention_min_bytes is not None or retention_max_bytes is not None
    by_time = retention_min_ms is not None or retention_max_ms is not None
    if by_size and by_time:
        raise typer.BadParameter("retention is by size or by time, not both")
    retention = None
    if by_size:
        retention = pr.RetentionPolicy.by_size(retention_min_bytes or 0, retention_max_bytes or 0)
    elif by_time:
        retention = pr.RetentionPolicy.by_time(retention_min_ms or 0, retention_max_ms or 0)
    return pr.StreamConfiguration(scaling, retention)


@stream_app.command("create")
def stream_create(
    ctx: typer.Context,
    scoped_stream: str = typer.Argument(..., metavar="SCOPE/STREAM"),
    segments: int | None = typer.Option(
        None, "--segments", min=1, help="Fixed segment count (with --event-rate: the minimum)."
    ),
    event_rate: int | None = typer.Option(
        None, "--event-rate", min=1, help="Scale by event rate: target events/s per segment."
    ),
    scale_factor: int = typer.Option(2, "--scale-factor", min=2, help="Split a hot segment in N."),
    retention_min_bytes: int | None = typer.Option(None, "--retention-min-bytes", min=0),
    retention_max_bytes: int | None = typer.Option(None, "--retention-max-bytes", min=0),
    retention_min_ms: int | None = typer.Option(None, "--retention-min-ms", min=0),
    retention_max_ms: int | None = typer.Option(None, "--retention-max-ms", min=0),
) -> None:
    """Create SCOPE/STREAM: fixed segments or scaling by event rate; retention by size or
    time."""
    options: Options = ctx.obj
    scope, stream = parse_scoped_stream(scoped_stream)
    config = _configuration(
        segments,
        event_rate,
        scale_factor,
        retention_min_bytes,
        retention_max_bytes,
        retention_min_ms,
        retention_max_ms,
    )
    created = options.cluster().stream_manager().create_stream(scope, stream, config)
    _created(options.json, "stream", scoped_stream, created)


@stream_app.command("list")
def stream_list(ctx: typer.Context, scope: str) -> None:
    """List the streams of SCOPE."""
    options: Options = ctx.obj
    validate_name("scope", scope)
    streams = sorted(options.cluster().stream_manager().list_streams(scope))
    emit(
        options.json,
        {"scope": scope, "streams": streams},
        table(None, ["stream"], [(s,) for s in streams]),
    )


@stream_app.command("info")
def stream_info(
    ctx: typer.Context, scoped_stream: str = typer.Argument(..., metavar="SCOPE/STREAM")
) -> None:
    """State, configuration, current segments, and the head and tail cuts (base64, for
    ``stream truncate`` and readers)."""
    options: Options = ctx.obj
    scope, stream = parse_scoped_stream(scoped_stream)
    mgr = options.cluster().stream_manager()
    info = mgr.get_stream_info(scope, stream)
    head, tail = mgr.get_head_cut(scope, stream), mgr.get_tail_cut(scope, stream)
    segments = [
        {
            "segment_id": s.segment_id,
            "key_low": s.key_low,
            "key_high": s.key_high,
            "tail_offset": tail.positions.get(s.segment_id),
        }
        for s in info.segments
    ]
    document = {
        "stream": scoped_stream,
        "state": info.state.value,
        "epoch": info.epoch,
        "configuration": info.configuration.to_dict(),
        "segments": segments,
        "head_cut": head.to_base64(),
        "tail_cut": tail.to_base64(),
    }
    if options.json:
        emit(True, document)
        return
    emit(
        False,
        None,
        f"{scoped_stream}: {info.state.value}, epoch {info.epoch}, "
        f"config {info.configuration.to_dict()}",
    )
    rows = [
        (s["segment_id"], f"[{s['key_low']:.4g}, {s['key_high']:.4g})", s["tail_offset"])
        for s in segments
    ]
    emit(False, None, table("segments", ["segment id", "key range", "tail offset"], rows))
    emit(False, None, f"head cut: {document['head_cut']}\ntail cut: {document['tail_cut']}")


SEGMENT_IDS_ARGUMENT = typer.Argument(
    None, help="Current segments to replace (neighbours); default: all of them."
)


@stream_app.command("scale")
def stream_scale(
    ctx: typer.Context,
    scoped_stream: str = typer.Argument(..., metavar="SCOPE/STREAM"),
    segment_ids: list[int] | None = SEGMENT_IDS_ARGUMENT,
    into: int = typer.Option(..., "--into", min=1, help="How many segments replace them."),
) -> None:
    """Seal SEGMENT_IDS (default: every current segment) and split their key range evenly
    into --into new segments (1 merges them)."""
    options: Options = ctx.obj
    scope, stream = parse_scoped_stream(scoped_stream)
    mgr = options.cluster().stream_manager()
    current = {s.segment_id: s for s in mgr.get_stream_info(scope, stream).segments}
    chosen = sorted(
        set(segment_ids or current), key=lambda i: current[i].key_low if i in current else -1.0
    )
    unknown = [i for i in chosen if i not in current]
    if unknown:
        raise InvalidArgumentError(
            f"segments {unknown} are not current segments of {scoped_stream}"
        )
    low, high = current[chosen[0]].key_low, current[chosen[-1]].key_high
    width = (high - low) / into
    ranges = [
        (low + i * width, high if i == into - 1 else low + (i + 1) * width) for i in range(into)
    ]
    mgr.scale_stream(scope, stream, chosen, ranges)
    info = mgr.get_stream_info(scope, stream)
    emit(
        options.json,
        {
            "stream": scoped_stream,
            "epoch": info.epoch,
            "sealed": chosen,
            "segments": [s.segment_id for s in info.segments],
        },
        f"scaled {scoped_stream} to epoch {info.epoch}: sealed {chosen}, now "
        f"{len(info.segments)} segments",
    )


@stream_app.command("seal")
def stream_seal(
    ctx: typer.Context, scoped_stream: str = typer.Argument(..., metavar="SCOPE/STREAM")
) -> None:
    """Seal SCOPE/STREAM: no more writes."""
    options: Options = ctx.obj
    scope, stream = parse_scoped_stream(scoped_stream)
    sealed = options.cluster().stream_manager().seal_stream(scope, stream)
    emit(options.json, {"stream": scoped_stream, "sealed": sealed}, f"sealed {scoped_stream}")


@stream_app.command("delete")
def stream_delete(
    ctx: typer.Context,
    scoped_stream: str = typer.Argument(..., metavar="SCOPE/STREAM"),
    seal: bool = typer.Option(False, "--seal", help="Seal it first (a stream must be sealed)."),
) -> None:
    """Delete a sealed SCOPE/STREAM and all its segments."""
    options: Options = ctx.obj
    scope, stream = parse_scoped_stream(scoped_stream)
    mgr = options.cluster().stream_manager()
    if seal:
        mgr.seal_stream(scope, stream)
    deleted = mgr.delete_stream(scope, stream)
    emit(
        options.json,
        {"stream": scoped_stream, "deleted": deleted},
        f"{'deleted' if deleted else 'no such'} stream {scoped_stream}",
    )


@stream_app.command("truncate")
def stream_truncate(
    ctx: typer.Context,
    scoped_stream: str = typer.Argument(..., metavar="SCOPE/STREAM"),
    cut: str = typer.Argument(..., help="A stream cut in base64 (from `stream info`)."),
) -> None:
    """Truncate SCOPE/STREAM at CUT: everything before it is deleted."""
    import pravega_ray as pr

    options: Options = ctx.obj
    scope, stream = parse_scoped_stream(scoped_stream)
    stream_cut = pr.StreamCut.from_base64(cut)
    options.cluster().stream_manager().truncate_stream(scope, stream, stream_cut)
    emit(options.json, {"stream": scoped_stream, "truncated_at": cut}, f"truncated {scoped_stream}")


# --- key-value tables ----------------------------------------------------------------------------
def _table_client(options: Options, scoped_table: str) -> Any:
    import pravega_ray as pr

    scope, table_name = parse_scoped_stream(scoped_table)
    return options.cluster().key_value_table(
        scope, table_name, key_serializer=pr.Utf8Serializer(), value_serializer=pr.Utf8Serializer()
    )


@kvt_app.command("create")
def kvt_create(
    ctx: typer.Context,
    scoped_table: str = typer.Argument(..., metavar="SCOPE/TABLE"),
    partitions: int = typer.Option(4, "--partitions", min=1, max=1024),
    primary_key_length: int | None = typer.Option(
        None, "--primary-key-length", help="key families: bytes of a key's primary key"
    ),
    secondary_key_length: int | None = typer.Option(
        None, "--secondary-key-length", help="key families: bytes of its secondary key"
    ),
) -> None:
    """Create the key-value table SCOPE/TABLE."""
    options: Options = ctx.obj
    scope, name = parse_scoped_stream(scoped_table)
    created = (
        options.cluster()
        .stream_manager()
        .create_key_value_table(scope, name, partitions, primary_key_length, secondary_key_length)
    )
    _created(options.json, "table", scoped_table, created)


@kvt_app.command("put")
def kvt_put(
    ctx: typer.Context,
    scoped_table: str = typer.Argument(..., metavar="SCOPE/TABLE"),
    key: str = typer.Argument(...),
    value: str = typer.Argument(...),
) -> None:
    """Set KEY to VALUE; prints the new version."""
    options: Options = ctx.obj
    kvt = _table_client(options, scoped_table)
    try:
        version = kvt.put(key, value)
    finally:
        kvt.close()
    emit(
        options.json,
        {"table": scoped_table, "key": key, "version": version},
        f"{key} = {value} (version {version})",
    )


@kvt_app.command("get")
def kvt_get(
    ctx: typer.Context,
    scoped_table: str = typer.Argument(..., metavar="SCOPE/TABLE"),
    key: str = typer.Argument(...),
) -> None:
    """Print KEY's value (exit 1, NoSuchKeyError, if absent)."""
    options: Options = ctx.obj
    kvt = _table_client(options, scoped_table)
    try:
        entry = kvt.get(key)
    finally:
        kvt.close()
    if entry is None:
        raise NoSuchKeyError(f"no key {key!r} in {scoped_table}", key=key)
    emit(
        options.json,
        {"table": scoped_table, "key": key, "value": entry.value, "version": entry.version},
        entry.value,
    )


@kvt_app.command("list")
def kvt_list(
    ctx: typer.Context, target: str = typer.Argument(..., metavar="SCOPE | SCOPE/TABLE")
) -> None:
    """List the tables of SCOPE, or the entries of SCOPE/TABLE."""
    options: Options = ctx.obj
    if "/" not in target:
        validate_name("scope", target)
        tables = sorted(options.cluster().stream_manager().list_key_value_tables(target))
        emit(
            options.json,
            {"scope": target, "tables": tables},
            table(None, ["table"], [(t,) for t in tables]),
        )
        return
    kvt = _table_client(options, target)
    try:
        entries = sorted((e.key, e.value, e.version) for e in kvt.iter_entries())
    finally:
        kvt.close()
    emit(
        options.json,
        {"table": target, "entries": [{"key": k, "value": v, "version": n} for k, v, n in entries]},
        table(None, ["key", "value", "version"], entries),
    )


# --- reader groups -------------------------------------------------------------------------------
@rg_app.command("list")
def rg_list(ctx: typer.Context, scope: str) -> None:
    """List the reader groups of SCOPE with their streams and online readers."""
    options: Options = ctx.obj
    validate_name("scope", scope)
    cluster = options.cluster()
    # The stream manager has no list of reader groups; the controller client does.
    names = sorted(cluster.stream_manager().list_reader_groups(scope))
    groups = []
    for name in names:
        group = cluster.reader_group(scope, name)
        groups.append(
            {
                "group": name,
                "streams": list(group.get_config().streams),
                "online_readers": sorted(group.get_online_readers()),
            }
        )
    emit(
        options.json,
        {"scope": scope, "groups": groups},
        table(
            None,
            ["group", "streams", "online readers"],
            [(g["group"], ", ".join(g["streams"]), ", ".join(g["online_readers"])) for g in groups],
        ),
    )


@rg_app.command("checkpoint")
def rg_checkpoint(
    ctx: typer.Context,
    scoped_group: str = typer.Argument(..., metavar="SCOPE/GROUP"),
    name: str | None = typer.Option(None, "--name", help="Checkpoint name (default: cli-<time>)."),
    timeout: float = typer.Option(30.0, "--timeout", min=0.0, help="Seconds to wait for readers."),
) -> None:
    """Checkpoint SCOPE/GROUP (waits until its online readers pass it) and print its cuts."""
    import time

    options: Options = ctx.obj
    try:
        scope, group_name = parse_scoped_stream(scoped_group)
    except InvalidNameError:
        raise InvalidNameError(f"expected 'scope/group', got {scoped_group!r}") from None
    group = options.cluster().reader_group(scope, group_name)
    checkpoint = group.initiate_checkpoint(name or f"cli-{time.time_ns()}", timeout_s=timeout)
    cuts = {s: c.to_base64() for s, c in sorted(checkpoint.cuts.items())}
    emit(
        options.json,
        {"group": scoped_group, "checkpoint": checkpoint.name, "cuts": cuts},
        f"checkpoint {checkpoint.name} of {scoped_group}\n"
        + "\n".join(f"{s}: {c}" for s, c in cuts.items()),
    )
