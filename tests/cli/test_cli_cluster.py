"""``pravega-ray`` as a user runs it: the installed script in subprocesses, against ONE local
cluster that ``pravega-ray local start`` starts for this module (its own Ray head on a free
port, data under tmp) and ``local stop`` stops, whatever happens, so no Ray head is left
running. The subprocesses get an explicit ``--address`` and no ``RAY_ADDRESS``; the
session's in-process Ray (tests/conftest.py) is a different Ray and is not touched.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

import pravega_ray as pr

pytestmark = pytest.mark.timeout(600)  # the first test also starts the cluster

SCRIPT = Path(sys.executable).parent / "pravega-ray"
SCOPE = "clitest"
STREAM = f"{SCOPE}/events"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@dataclass
class Cli:
    """Runs the installed ``pravega-ray`` against the module's cluster."""

    address: str
    data_dir: Path
    endpoints: dict | None = None  # type: ignore[type-arg]  # where Pravega's clients connect

    def env(self) -> dict[str, str]:
        return {
            k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "PRAVEGA_RAY_ADDRESS")
        }

    def command(self, *args: object, json_output: bool = False) -> list[str]:
        flags = ["--json"] if json_output else []
        return [str(SCRIPT), "--address", self.address, *flags, *(str(a) for a in args)]

    def run(
        self,
        *args: object,
        json_output: bool = False,
        stdin: str | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args, json_output=json_output),
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
        )

    def ok(self, *args: object, stdin: str | None = None) -> dict:  # type: ignore[type-arg]
        """Run with --json; assert exit 0 and no traceback; the parsed JSON document."""
        done = self.run(*args, json_output=True, stdin=stdin)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    data_dir = tmp_path_factory.mktemp("cli")
    port = free_port()
    runner = Cli(f"127.0.0.1:{port}", data_dir)
    try:
        start = runner.run(
            "local",
            "start",
            "--data-dir",
            data_dir,
            "--port",
            port,
            "--num-cpus",
            2,
            "--containers",
            2,
            "--grpc-port",
            0,  # Pravega's 9090 and 6000 may be taken where the suite runs
            "--wire-port-base",
            0,
            json_output=True,
            timeout=420,  # seconds on an idle machine; minutes on a loaded one
        )
        assert start.returncode == 0, start.stderr + (data_dir / "ray-head.log").read_text()
        started = json.loads(start.stdout)
        assert started["address"] == runner.address and started["started_ray_head"]
        runner.endpoints = started["endpoints"]
        runner.ok("scope", "create", SCOPE)
        runner.ok("stream", "create", STREAM, "--segments", 2)
        yield runner
    finally:  # also after a failed start: stops whatever it left
        stop = runner.run("local", "stop", "--data-dir", data_dir, json_output=True, timeout=120)
    assert stop.returncode == 0, stop.stderr
    assert not (data_dir / "cli-local.json").exists()
    time.sleep(0.5)
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass  # the head that local start started is gone


def run_chains(*chains: Callable[[], None]) -> None:
    """Run independent command sequences at once (each CLI process mostly waits on Ray)."""
    with ThreadPoolExecutor(len(chains)) as pool:
        for future in [pool.submit(chain) for chain in chains]:
            future.result()


def test_admin_commands(cli: Cli) -> None:
    """local status, stream info/scale/truncate/delete, kvt, tail --timeout, exit code 1."""

    def status_and_info() -> None:
        status = cli.ok("local", "status")
        assert status["actors"] and all(status["actors"].values())
        assert "events" in status["scopes"][SCOPE]
        info = cli.ok("stream", "info", STREAM)
        assert info["state"] == "ACTIVE" and len(info["segments"]) == 2
        assert pr.StreamCut.from_base64(info["tail_cut"]).scoped_stream == STREAM
        started = time.monotonic()
        quiet = cli.run("tail", STREAM, "--timeout", 1)
        assert quiet.returncode == 0 and quiet.stdout == ""
        assert time.monotonic() - started < 60

    def reshape() -> None:
        name = f"{SCOPE}/reshaped"
        cli.ok("stream", "create", name, "--event-rate", 1000, "--segments", 1)
        scaled = cli.ok("stream", "scale", name, "--into", 3)
        assert len(scaled["segments"]) == 3 and scaled["epoch"] == 1
        cut = pr.StreamCut(SCOPE, "reshaped", dict.fromkeys(scaled["segments"], 0))
        cli.ok("stream", "truncate", name, cut.to_base64())
        assert cli.ok("stream", "delete", name, "--seal")["deleted"] is True

    def table() -> None:
        name = f"{SCOPE}/devices"
        assert cli.ok("kvt", "create", name, "--partitions", 2)["created"] is True
        assert cli.ok("kvt", "put", name, "sensor-7", "lab")["version"] >= 0
        assert cli.ok("kvt", "get", name, "sensor-7")["value"] == "lab"

    run_chains(status_and_info, reshape, table)
    refused = cli.run("scope", "delete", SCOPE)  # not empty: a pravega-ray error, exit 1
    assert refused.returncode == 1
    assert "ScopeNotEmptyError" in refused.stderr and "Traceback" not in refused.stderr


def test_local_start_serves_pravega_s_own_clients(cli: Cli) -> None:
    """``local start`` serves Pravega's endpoints by default: the official client (``pravega``
    0.3.8) lists the scope and stream made with the CLI, writes, and the CLI reads it back."""
    from tests.wire.official_client import client_runner, install_client

    assert cli.endpoints is not None and sorted(cli.endpoints["segment_store"]) == ["0", "1"]
    run = client_runner(install_client(), cli.endpoints["controller"])
    out = run(
        f"""
        import json
        manager.create_stream("{SCOPE}", "official", 1)
        writer = manager.create_writer("{SCOPE}", "official")
        for i in range(5):
            writer.write_event(f"hello-{{i}}", "key")
        writer.flush()
        print(json.dumps(["{SCOPE}" in manager.list_scope(), manager.list_stream("{SCOPE}")]))
        """
    )
    listed, streams = json.loads(out.splitlines()[-1])
    assert listed and sorted(s.split("/")[-1] for s in streams) == ["events", "official"]
    read = cli.run("read", f"{SCOPE}/official", "--max-events", 5, "--timeout", 30)
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == [f"hello-{i}" for i in range(5)]


def test_write_n_lines_then_read_exactly_n(cli: Cli, tmp_path: Path) -> None:
    lines = [json.dumps({"id": f"k{i % 7}", "n": i}) for i in range(300)]
    source = tmp_path / "events.jsonl"
    source.write_text("\n".join(lines) + "\n\n")  # the blank line is skipped
    wrote = cli.ok("write", STREAM, "--file", source, "--key-field", "id")
    assert wrote["events"] == 300
    reads: dict[str, subprocess.CompletedProcess[str]] = {}

    def read_all() -> None:
        reads["all"] = cli.run("read", STREAM, json_output=True)

    def read_some_with_a_group() -> None:
        reads["g1"] = cli.run(
            "read", STREAM, "--group", "g1", "--max-events", 120, json_output=True
        )

    run_chains(read_all, read_some_with_a_group)
    assert reads["all"].returncode == 0, reads["all"].stderr
    events = [json.loads(line)["event"] for line in reads["all"].stdout.splitlines()]
    assert sorted(events) == sorted(lines)
    by_key: dict[str, list[int]] = {}
    for event in map(json.loads, events):
        by_key.setdefault(event["id"], []).append(event["n"])
    assert all(ns == sorted(ns) for ns in by_key.values())  # order per routing key
    assert reads["g1"].returncode == 0 and len(reads["g1"].stdout.splitlines()) == 120

    found: dict[str, dict] = {}  # type: ignore[type-arg]

    def list_groups() -> None:
        found["list"] = cli.ok("rg", "list", SCOPE)

    def checkpoint() -> None:
        found["checkpoint"] = cli.ok("rg", "checkpoint", f"{SCOPE}/g1", "--name", "cp1")

    run_chains(list_groups, checkpoint)
    groups = found["list"]["groups"]
    assert [g["group"] for g in groups] == ["g1"]  # temporary groups are deleted
    cut = pr.StreamCut.from_base64(found["checkpoint"]["cuts"][STREAM])
    assert cut.scoped_stream == STREAM


def test_tail_follows_new_events_until_interrupted(cli: Cli) -> None:
    tail = subprocess.Popen(
        cli.command("tail", STREAM, "--timeout", 90),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli.env(),
        # As a script's background job gets it: SIGINT ignored. tail still stops at Ctrl-C.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert tail.stderr is not None and tail.stdout is not None
        ready = [tail.stderr.readline() for _ in range(1)]
        while "following" not in ready[-1] and ready[-1] and len(ready) < 20:
            ready.append(tail.stderr.readline())
        assert "following" in ready[-1], ready
        assert len(ready) == 1, f"noise on stderr: {ready[:-1]}"
        cli.ok("write", STREAM, "--routing-key", "t", stdin="t1\nt2\nt3\n")
        assert [tail.stdout.readline() for _ in range(3)] == ["t1\n", "t2\n", "t3\n"]
        tail.send_signal(signal.SIGINT)
        assert tail.wait(timeout=60) == 130  # within a poll (1 s), then the clean-up
        assert "Traceback" not in tail.stderr.read()
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()
