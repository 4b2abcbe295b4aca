"""Pravega's official Python client (``pravega`` 0.3.8) against pravega-ray, unchanged:
scopes and streams through the gRPC API, events both ways through the wire gateways."""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import textwrap
import threading
import time
import uuid
from pathlib import Path

from chaos.official import OFFICIAL_GROUP, OFFICIAL_STREAM, READER
from pravega_ray.grpc.server import GrpcServer
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.stream_configuration import ReaderGroupConfig, ScalingPolicy, StreamConfiguration
from tests.wire.conftest import RunClient


def _scope() -> str:
    return "w" + uuid.uuid4().hex[:10]


def test_scopes_and_streams_through_the_grpc_api(run_client: RunClient) -> None:
    scope = _scope()
    out = run_client(
        f"""
        import json
        print(json.dumps([
            manager.create_scope("{scope}"),
            manager.create_scope("{scope}"),
            manager.create_stream("{scope}", "s", 2),
            manager.create_stream("{scope}", "s", 2),
            "{scope}" in manager.list_scope(),
            manager.list_stream("{scope}"),
            manager.get_stream_tags("{scope}", "s"),
            manager.seal_stream("{scope}", "s"),
            manager.delete_stream("{scope}", "s"),
            manager.list_stream("{scope}"),
            manager.delete_scope("{scope}"),
        ]))
        """
    )
    created, again, stream, stream_again, listed, streams, tags, sealed, deleted, left, gone = (
        json.loads(out.splitlines()[-1])
    )
    assert (created, again, stream, stream_again) == (True, False, True, False)
    assert listed and [s.split("/")[-1] for s in streams] == ["s"]
    assert tags == []
    assert (sealed, deleted, left, gone) == (True, True, [], True)


def test_events_the_official_writer_wrote_are_read_by_pravega_ray_byte_for_byte(
    run_client: RunClient, front_doors: tuple[InProcessCluster, GrpcServer]
) -> None:
    cluster, _ = front_doors
    scope = _scope()
    big = "x" * 100_000
    run_client(
        f"""
        manager.create_scope("{scope}")
        manager.create_stream("{scope}", "s", 1)
        writer = manager.create_writer("{scope}", "s")
        for i in range(300):
            writer.write_event(f"event-{{i}}", "key")
        writer.write_event("{big}", "key")
        writer.flush()
        """
    )
    cluster.create_reader_group(scope, "g", ReaderGroupConfig(streams=(f"{scope}/s",)))
    reader = cluster.create_reader("r", scope, "g")
    got: list[bytes] = []
    while len(got) < 301:
        event = reader.read_next_event(10.0)
        assert event is not None and event.event is not None, f"only {len(got)} of 301 read"
        got.append(event.event)
    assert got == [f"event-{i}".encode() for i in range(300)] + [big.encode()]
    reader.close()


def test_events_pravega_ray_wrote_are_read_by_an_official_reader_group(
    run_client: RunClient, front_doors: tuple[InProcessCluster, GrpcServer]
) -> None:
    cluster, _ = front_doors
    scope = _scope()
    cluster.stream_manager().create_scope(scope)
    cluster.stream_manager().create_stream(scope, "s")
    payloads = [f"from-pravega-ray-{i}".encode() for i in range(50)]
    with cluster.create_writer(scope, "s") as writer:
        for payload in payloads:
            writer.write_event(payload, routing_key="key")
        writer.flush()
    out = run_client(
        f"""
        import json
        group = manager.create_reader_group("g", "{scope}", "s")
        reader = group.create_reader("r")

        print(json.dumps(read_events(reader, {len(payloads)})))
        """
    )
    assert json.loads(out.splitlines()[-1]) == [p.decode() for p in payloads]


def test_transactions_of_the_official_client_commit_whole_and_abort_to_nothing(
    run_client: RunClient, front_doors: tuple[InProcessCluster, GrpcServer]
) -> None:
    cluster, _ = front_doors
    scope = _scope()
    out = run_client(
        f"""
        import json
        manager.create_scope("{scope}")
        manager.create_stream("{scope}", "s", 2)
        writer = manager.create_transaction_writer("{scope}", "s", 1)
        kept = writer.begin_txn()
        for i in range(20):
            kept.write_event(f"kept-{{i}}", "key")
        dropped = writer.begin_txn()
        dropped.write_event("dropped", "key")
        dropped.abort()
        kept.commit()
        again = writer.get_txn(kept.get_txn_id())
        refused = []
        for late in (lambda: kept.write_event("late", "key"), kept.commit, dropped.commit):
            try:
                late()
                refused.append(False)
            except Exception:  # the client's TxnFailed: the transaction is not open
                refused.append(True)
        print(json.dumps([kept.is_open(), dropped.is_open(), again.is_open(), refused]))
        """
    )
    assert json.loads(out.splitlines()[-1]) == [False, False, False, [True, True, True]]
    cluster.create_reader_group(scope, "g", ReaderGroupConfig(streams=(f"{scope}/s",)))
    reader = cluster.create_reader("r", scope, "g")
    got: list[bytes] = []
    while (event := reader.read_next_event(3.0)) is not None and event.event is not None:
        got.append(event.event)
    reader.close()
    assert got == [f"kept-{i}".encode() for i in range(20)]


def test_a_byte_stream_of_the_official_client_writes_seeks_reads_and_truncates(
    run_client: RunClient,
) -> None:
    scope = _scope()
    out = run_client(
        f"""
        import json
        manager.create_scope("{scope}")
        manager.create_stream("{scope}", "bytes", 1)
        stream = manager.create_byte_stream("{scope}", "bytes")
        written = [stream.write(b"hello "), stream.write(b"world")]
        stream.flush()
        tail = stream.current_tail_offset()
        stream.seek(6, 0)
        buffer = bytearray(5)
        read = stream.readinto(buffer)
        stream.seek(0, 0)
        whole = bytearray()
        while len(whole) < 11:
            piece = bytearray(11 - len(whole))
            whole += piece[: stream.readinto(piece)]
        stream.truncate(6)
        head = stream.current_head_offset()
        print(json.dumps([written, tail, read, buffer.decode(), whole.decode(), head]))
        """
    )
    assert json.loads(out.splitlines()[-1]) == [[6, 5], 11, 5, "world", "hello world", 6]


def test_two_official_readers_share_a_stream_each_event_once(
    run_client: RunClient, front_doors: tuple[InProcessCluster, GrpcServer]
) -> None:
    cluster, _ = front_doors
    scope = _scope()
    cluster.stream_manager().create_scope(scope)
    cluster.stream_manager().create_stream(scope, "s", StreamConfiguration(ScalingPolicy.fixed(4)))
    expected = [f"k{k}:{i}" for k in range(8) for i in range(25)]
    with cluster.create_writer(scope, "s") as writer:
        for event in expected:
            writer.write_event(event.encode(), routing_key=event.split(":")[0])
        writer.flush()
    out = run_client(
        f"""
        import json
        group = manager.create_reader_group("g", "{scope}", "s")
        readers = [group.create_reader("r1"), group.create_reader("r2")]

        async def read(reader, got):
            pending = None  # never cancelled: a cancelled get loses its slice's segment
            while sum(len(g) for g in shared) < {len(expected)}:
                if pending is None:
                    pending = asyncio.ensure_future(reader.get_segment_slice_async())
                done, _ = await asyncio.wait({{pending}}, timeout=2)
                if not done:
                    continue
                piece, pending = pending.result(), None
                got += [event.data().decode() for event in piece]
                reader.release_segment(piece)

        shared = [[], []]

        async def main():
            await asyncio.wait_for(
                asyncio.gather(*(read(r, g) for r, g in zip(readers, shared))), 60
            )

        asyncio.run(main())
        print(json.dumps(shared))
        """
    )
    first, second = json.loads(out.splitlines()[-1])
    assert sorted(first + second) == sorted(expected)  # each event once
    for events in (first, second):  # per key in order, whichever reader had the key
        for k in range(8):
            mine = [int(e.split(":")[1]) for e in events if e.startswith(f"k{k}:")]
            assert mine == sorted(mine)


def test_tags_the_official_client_sets_are_the_streams_own(
    run_client: RunClient, front_doors: tuple[InProcessCluster, GrpcServer]
) -> None:
    """Stream tags through the gRPC API land in the stream's configuration: pravega-ray's
    own API sees and finds them, and the client reads back what pravega-ray set."""
    cluster, _ = front_doors
    scope = _scope()
    out = run_client(
        f"""
        import json
        manager.create_scope("{scope}")
        fixed = pravega_client.StreamScalingPolicy.fixed_scaling_policy(1)
        none = pravega_client.StreamRetentionPolicy.none()
        manager.create_stream_with_policy("{scope}", "a", fixed, none, ["t1", "t2"])
        manager.create_stream_with_policy("{scope}", "b", fixed, none, ["t2"])
        manager.update_stream_with_policy("{scope}", "b", fixed, none, ["t2", "t3"])
        print(json.dumps([manager.get_stream_tags("{scope}", s) for s in ("a", "b")]))
        """
    )
    assert json.loads(out.splitlines()[-1]) == [["t1", "t2"], ["t2", "t3"]]
    manager = cluster.stream_manager()
    assert manager.get_stream_info(scope, "a").configuration.tags == ("t1", "t2")
    assert manager.list_streams(scope, tag="t2") == ["a", "b"]
    assert manager.list_streams(scope, tag="t3") == ["b"]
    manager.create_stream(scope, "c", StreamConfiguration(tags=("mine",)))
    out = run_client(f'print(manager.get_stream_tags("{scope}", "c"))')
    assert out.splitlines()[-1] == "['mine']"


def test_an_official_reader_group_from_the_tail_reads_only_what_came_after_it(
    run_client: RunClient, front_doors: tuple[InProcessCluster, GrpcServer]
) -> None:
    cluster, _ = front_doors
    scope = _scope()
    cluster.stream_manager().create_scope(scope)
    cluster.stream_manager().create_stream(scope, "s")
    with cluster.create_writer(scope, "s") as writer:
        for i in range(10):
            writer.write_event(f"before-{i}".encode(), routing_key="key")
        writer.flush()
    out = run_client(
        f"""
        import json
        group = manager.create_reader_group("g", "{scope}", "s", True)
        reader = group.create_reader("r")
        writer = manager.create_writer("{scope}", "s")
        for i in range(5):
            writer.write_event(f"after-{{i}}", "key")
        writer.flush()

        print(json.dumps(read_events(reader, 5)))
        """
    )
    assert json.loads(out.splitlines()[-1]) == [f"after-{i}" for i in range(5)]


def test_an_official_reader_group_from_a_stream_cut_of_another_reads_from_there(
    run_client: RunClient, front_doors: tuple[InProcessCluster, GrpcServer]
) -> None:
    cluster, _ = front_doors
    scope = _scope()
    cluster.stream_manager().create_scope(scope)
    cluster.stream_manager().create_stream(scope, "s")
    with cluster.create_writer(scope, "s") as writer:
        for i in range(10):
            writer.write_event(f"first-{i}".encode(), routing_key="key")
        writer.flush()
    out = run_client(
        f"""
        import json
        first = manager.create_reader_group("g1", "{scope}", "s")
        reader = first.create_reader("r")

        seen = read_events(reader, 10)
        reader.reader_offline()  # its position goes into the group's state
        cut = first.get_streamcut()
        writer = manager.create_writer("{scope}", "s")
        for i in range(5):
            writer.write_event(f"second-{{i}}", "key")
        writer.flush()
        second = manager.create_reader_group("g2", "{scope}", "s", False, cut)
        later = read_events(second.create_reader("r"), 5)
        print(json.dumps([seen, later, list(cut.get_segment_offset_map().values())]))
        """
    )
    seen, later, offsets = json.loads(out.splitlines()[-1])
    assert seen == [f"first-{i}" for i in range(10)]
    assert later == [f"second-{i}" for i in range(5)]
    assert offsets == [sum(8 + len(f"first-{i}") for i in range(10))]  # past the first ten


def test_a_hundred_megabytes_of_100_kb_events_go_through_both_ways(
    run_client: RunClient, front_doors: tuple[InProcessCluster, GrpcServer]
) -> None:
    """WIRE.md's test_largeEvents shape, at the issue's size: 1,000 events of 100 KB
    (100 MB) written by the official writer, read back whole and in order by its reader
    group and by pravega-ray's reader (each event names its number and carries a digest)."""
    cluster, _ = front_doors
    scope = _scope()
    out = run_client(
        f"""
        import hashlib, json
        manager.create_scope("{scope}")
        manager.create_stream("{scope}", "s", 1)
        writer = manager.create_writer("{scope}", "s")
        for i in range(1000):
            body = (f"{{i:06d}}" * 16_700)[:100_000]
            writer.write_event(body, "key")
        writer.flush()
        group = manager.create_reader_group("g", "{scope}", "s")
        reader = group.create_reader("r")
        got = read_events(reader, 1000, timeout_s=300)
        ok = [e == (f"{{i:06d}}" * 16_700)[:100_000] for i, e in enumerate(got)]
        print(json.dumps([len(got), sum(ok), sum(len(e) for e in got)]))
        """
    )
    assert json.loads(out.splitlines()[-1]) == [1000, 1000, 100_000_000]
    cluster.create_reader_group(scope, "ours", ReaderGroupConfig(streams=(f"{scope}/s",)))
    reader = cluster.create_reader("r", scope, "ours")
    try:
        for i in range(1000):
            event = reader.read_next_event(30.0)
            assert event is not None and event.event == (f"{i:06d}" * 16_700)[:100_000].encode()
    finally:
        reader.close()


def test_the_chaos_load_s_official_reader_keeps_its_segments_across_idle_waits(
    client_python: Path, front_doors: tuple[InProcessCluster, GrpcServer], tmp_path: Path
) -> None:
    """The official reader of ``make chaos`` looks at its stop file every 2 s. It used to do so
    by cancelling its pending ``get_segment_slice_async``, which loses the slice that call
    gets, and with it the segment: the reader never read that segment again (the 10-minute
    run's stall, about 300 events per key short, after its segments' containers restarted and
    a get outlasted the 2 s). Its pending get now survives the looks. Here the looks come every
    0.2 s, so gets outlast them as a restarting container's do."""
    cluster, server = front_doors
    scope = _scope()
    cluster.stream_manager().create_scope(scope)
    config = StreamConfiguration(ScalingPolicy.fixed(2))
    cluster.stream_manager().create_stream(scope, OFFICIAL_STREAM, config)
    stop = tmp_path / "stop"
    script = READER.format(
        controller=f"tcp://127.0.0.1:{server.port}",
        scope=scope,
        stream=OFFICIAL_STREAM,
        group=OFFICIAL_GROUP,
        stop=str(stop),
        look_s=0.2,
    )
    process = subprocess.Popen(
        [str(client_python), "-c", textwrap.dedent(script)], stdout=subprocess.PIPE, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    threading.Thread(target=lambda: [lines.put(x) for x in process.stdout], daemon=True).start()
    try:
        time.sleep(3.0)  # looks at the stop file while the first gets are pending
        expected = [f"k|o{i % 4}|{i}" for i in range(20)]
        with cluster.create_writer(scope, OFFICIAL_STREAM) as writer:
            for i in range(20):
                writer.write_event(f"k o{i % 4} {i}\n".encode(), routing_key=f"o{i % 4}")
            writer.flush()
        got: list[str] = []
        deadline = time.monotonic() + 60
        while len(got) < len(expected) and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                got.append(lines.get(timeout=1.0).split()[1])
        assert sorted(got) == sorted(expected)
    finally:
        stop.touch()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
