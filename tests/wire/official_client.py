"""Pravega's official Python client (PyPI ``pravega`` 0.3.8, module ``pravega_client``, a
Rust core), installed into a venv of its own, ``.venv-pravega-client`` at the repository's
root (issue 25: "pip install pravega==0.3.8 in a separate venv"), once; scenarios run there
as scripts, in a subprocess (:func:`client_runner`). Where no wheel of the client exists for
this interpreter, :func:`install_client` skips the test, saying so; any other installation
failure fails it. Used by ``tests/wire/`` (an in-process cluster) and by
``tests/actors/test_endpoints.py`` (a cluster on Ray).
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT_VENV = ROOT / ".venv-pravega-client"
CLIENT_PACKAGE = "pravega==0.3.8"
SCRIPT_TIMEOUT_S = 120.0

RunClient = Callable[[str], str]

READ_EVENTS = """
def read_events(reader, count, timeout_s=60):
    \"\"\"The next ``count`` events of ``reader``, decoded, slice by slice.\"\"\"
    async def read():
        got = []
        while len(got) < count:
            piece = await reader.get_segment_slice_async()
            got += [event.data().decode() for event in piece]
            reader.release_segment(piece)
        return got
    return asyncio.run(asyncio.wait_for(read(), timeout_s))
"""
"""Defined in every client script (its prologue): ``read_events(reader, count)``."""


def install_client() -> Path:
    """The client venv's python, installing it first if needed (once, under a file lock,
    since the fast tier's workers start together)."""
    python = CLIENT_VENV / "bin" / "python"
    lock_path = ROOT / ".venv-pravega-client.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        probe = [str(python), "-c", "import pravega_client"]
        if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
            return python
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(CLIENT_VENV)], check=True)
        install = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--only-binary=:all:", CLIENT_PACKAGE],
            capture_output=True,
            text=True,
        )
        if install.returncode != 0:
            message = install.stdout + install.stderr
            if "No matching distribution" in message or "from versions: none" in message:
                pytest.skip(
                    f"no wheel of {CLIENT_PACKAGE} for this interpreter or platform "
                    f"(it ships cp311 manylinux_2_35 x86_64): {message.strip()[-300:]}"
                )
            raise RuntimeError(f"pip install {CLIENT_PACKAGE} failed:\n{message}")
        return python


def client_script(controller_uri: str, script: str) -> str:
    """``script`` (dedented) with ``manager`` (a ``pravega_client.StreamManager`` connected to
    ``controller_uri``, e.g. ``tcp://127.0.0.1:9090``) and ``read_events`` (READ_EVENTS)
    defined before it, ending with ``os._exit``: the client's Rust threads can outlive the
    interpreter's finalization and abort it ("PyGILState_Release: thread state must be
    current"), one run in ten under load, after the script did everything it had to."""
    prologue = (
        "import asyncio, pravega_client\n"
        f"manager = pravega_client.StreamManager({controller_uri!r})\n" + READ_EVENTS
    )
    epilogue = "\nimport os, sys\nsys.stdout.flush()\nos._exit(0)\n"
    return prologue + textwrap.dedent(script) + epilogue


def start_client(controller_uri: str, script: str) -> subprocess.Popen[str]:
    """``script`` (:func:`client_script`) running in the client's venv, its stdout and stderr
    piped as text: for a test that acts on the script's output while it runs."""
    return subprocess.Popen(
        [str(install_client()), "-c", client_script(controller_uri, script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def client_runner(client_python: Path, controller_uri: str) -> RunClient:
    """``run(script)``: run ``script`` (:func:`client_script`) in the client's venv; its
    stdout. A script that fails fails the test with its output."""

    def run(script: str) -> str:
        done = subprocess.run(
            [str(client_python), "-c", client_script(controller_uri, script)],
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT_S,
        )
        if done.returncode != 0:
            pytest.fail(f"the official client's script failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    return run
