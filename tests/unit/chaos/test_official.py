"""The official client's scripts in the chaos load (chaos/official.py) are valid Python once
formatted, and carry the load's event encoding."""

from __future__ import annotations

from chaos.checker import decode
from chaos.official import INFLIGHT, READER, READER_LOOK_S, WRITER


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
