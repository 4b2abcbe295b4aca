"""The official client's scripts in the chaos load (chaos/official.py) are valid Python once
formatted, and carry the load's event encoding."""

from __future__ import annotations

from chaos.checker import decode
from chaos.official import (
    _ANSI,
    _TRACING_LINE,
    INFLIGHT,
    READER,
    READER_LOOK_S,
    WRITER,
    stall_lines,
)


def test_the_scripts_compile_once_formatted() -> None:
    fields = {"controller": "tcp://127.0.0.1:1", "scope": "chaos", "stream": "official"}
    writer = WRITER.format(
        **fields, keys=8, prefix="o", size=100, rate=50.0, inflight=INFLIGHT, stop="/tmp/s"
    )
    reader = READER.format(**fields, group="official", stop="/tmp/s", look_s=READER_LOOK_S)
    compile(writer, "writer", "exec")
    compile(reader, "reader", "exec")
    assert 'head = f"k {key} {seq}\\n"' in writer  # the load's keyed encoding
    read = decode("r", "s", 0, b"k o3 7\n....")
    assert (read.kind, read.ident, read.seq) == ("k", "o3", 7)


def test_the_clients_log_lines_are_told_from_the_scripts_lines() -> None:
    logged = (
        "\x1b[2mNov 29 03:52:13.057\x1b[0m \x1b[32m INFO\x1b[0m pravega_client::stream_manager: "
        'creating scope "x"'
    )
    assert _TRACING_LINE.match(_ANSI.sub("", logged))
    warned = "Nov 29 03:52:13.058  WARN pravega_controller_client: controller operation failed"
    assert _TRACING_LINE.match(warned)
    spans = (
        "\x1b[2mNov  9 03:59:51.198\x1b[0m \x1b[32m INFO\x1b[0m "
        "\x1b[1mReactor\x1b[0m\x1b[1m{\x1b[0m"
        "event_stream_writer=3a78\x1b[1m}\x1b[0m:\x1b[1msetup connection\x1b[0m: "
        "pravega_client::segment::writer: finished setting up connection"
    )
    assert _TRACING_LINE.match(_ANSI.sub("", spans))
    for ours in ("r k|o3|7", "a o3 7 0.01", "u o3 7 TxnFailedError", "done", "garbage INFO x"):
        assert not _TRACING_LINE.match(ours)


def test_a_stalled_reader_is_explained_by_its_warnings_and_its_panic() -> None:
    tail = [
        "log: Nov 29 04:33:01.000  INFO pravega_client::event::reader: slice ready",
        "log: Nov 29 04:33:02.016  WARN pravega_controller_client: get_endpoint: transport error",
        "log: Nov 29 04:34:12.384 ERROR pravega_client::event::reader: read failed",
        "stderr: thread 'tokio-runtime-worker' panicked at src/segment/reader.rs:225:30:",
        "stderr: get endpoint for async segment reader: RetryError { tries: 11 }",
        "stderr: stack backtrace:",
    ]
    assert stall_lines(tail) == [tail[1], tail[2], tail[3], tail[4]]
    assert stall_lines(tail[:1]) == []
