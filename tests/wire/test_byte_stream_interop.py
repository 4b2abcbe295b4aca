"""Byte streams across the two kinds of client: what Pravega's official Python client
(``pravega`` 0.3.8, through the gRPC API and the wire gateways) writes, pravega-ray's
``create_byte_reader`` reads, and what ``create_byte_writer`` writes, the official client's
byte reader reads, byte for byte."""

from __future__ import annotations

import inspect
import json
import random
import textwrap
import uuid

from pravega_ray.grpc.server import GrpcServer
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.stream_configuration import ScalingPolicy, StreamConfiguration
from tests.wire.conftest import RunClient


def _piece(i: int, size: int) -> bytes:
    """The bytes of the ``i``-th write, ``size`` long; the client's script defines the same
    function (``PIECE``): its arguments cannot carry megabytes."""
    return bytes((i * 131 + j * 7 + (j >> 8)) % 256 for j in range(size))


PIECE = inspect.getsource(_piece)


def _scope() -> str:
    return "b" + uuid.uuid4().hex[:10]


def _read_exactly(cluster: InProcessCluster, scope: str, size: int) -> tuple[bytes, int]:
    """``size`` bytes of ``scope/bytes`` from its head through ``create_byte_reader``, and
    its tail offset."""
    with cluster.create_byte_reader(scope, "bytes") as reader:
        got = bytearray()
        while len(got) < size:
            piece = reader.read(size - len(got), timeout_s=10.0)
            assert piece, f"end of stream after {len(got)} of {size} bytes"
            got += piece
        return bytes(got), reader.fetch_tail_offset()


def test_bytes_the_official_client_writes_are_read_by_create_byte_reader(
    run_client: RunClient, front_doors: tuple[InProcessCluster, GrpcServer]
) -> None:
    cluster, _ = front_doors
    scope = _scope()
    rng = random.Random(5)
    sizes = [rng.randint(1, 30_000) for _ in range(20)]
    pieces = [_piece(i, size) for i, size in enumerate(sizes)]
    script = f"""
        import json
        manager.create_scope("{scope}")
        manager.create_stream("{scope}", "bytes", 1)
        stream = manager.create_byte_stream("{scope}", "bytes")
        written = [stream.write(_piece(i, size)) for i, size in enumerate({sizes!r})]
        stream.flush()
        print(json.dumps([written, stream.current_tail_offset()]))
        """
    out = run_client(PIECE + textwrap.dedent(script))
    written, tail = json.loads(out.splitlines()[-1])
    assert written == [len(p) for p in pieces] and tail == sum(written)
    data, tail_here = _read_exactly(cluster, scope, tail)
    assert data == b"".join(pieces) and tail_here == tail
    # The stream the official client made is a byte stream to pravega-ray, so its writer
    # appends after those bytes.
    with cluster.create_byte_writer(scope, "bytes") as writer:
        writer.write(b"appended by pravega-ray")
    data, tail_here = _read_exactly(cluster, scope, tail + 23)
    assert data == b"".join(pieces) + b"appended by pravega-ray" and tail_here == tail + 23


def test_bytes_create_byte_writer_writes_are_read_by_the_official_byte_reader(
    run_client: RunClient, front_doors: tuple[InProcessCluster, GrpcServer]
) -> None:
    cluster, _ = front_doors
    scope = _scope()
    manager = cluster.stream_manager()
    manager.create_scope(scope)
    manager.create_stream(scope, "bytes", StreamConfiguration(ScalingPolicy.fixed(1)))
    rng = random.Random(6)
    pieces = [rng.randbytes(rng.randint(0, 40_000)) for _ in range(25)]
    expected = b"".join(pieces)
    with cluster.create_byte_writer(scope, "bytes") as writer:
        for piece in pieces:
            writer.write(piece)
        writer.flush()
        writer.truncate_data_before(100)
    out = run_client(
        f"""
        import json

        def read_bytes(stream, size):
            got = bytearray()
            while len(got) < size:
                piece = bytearray(size - len(got))
                got += piece[: stream.readinto(piece)]
            return bytes(got)

        stream = manager.create_byte_stream("{scope}", "bytes")
        head, tail = stream.current_head_offset(), stream.current_tail_offset()
        stream.seek(head, 0)
        rest = read_bytes(stream, tail - head)
        stream.seek(-10, 2)
        last = read_bytes(stream, 10)
        print(json.dumps([head, tail, rest.hex(), last.hex()]))
        """
    )
    head, tail, rest, last = json.loads(out.splitlines()[-1])
    assert (head, tail) == (100, len(expected))
    assert bytes.fromhex(rest) == expected[100:]
    assert bytes.fromhex(last) == expected[-10:]
