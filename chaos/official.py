"""Pravega's official Python client in the chaos load (issue 25: "add a ``pravega_client``
writer and reader group to ``make chaos``'s load; the chaos issue's checker applies to them
too").

:class:`OfficialClients` runs two processes in the official client's venv (``pravega``
0.3.8, installed as ``tests/wire/official_client.py`` does), talking to the cluster only
through its endpoints (the controller's gRPC API and the containers' wire gateways):

* a writer of keyed events ``k <key> <seq>`` (the load's own encoding) on ``OFFICIAL_STREAM``,
  paced, ``INFLIGHT`` events in flight from one thread, then a ``flush``, whose return
  acknowledges them. Each outcome is a line on its stdout, recorded
  in the run's ``Acks``, so the main reader group (which reads this stream too) and
  :func:`chaos.checker.check_keyed` judge these events as they judge pravega-ray's own:
  none lost, none twice, each key in order;
* an official reader group of one reader on that stream, each event a line on its stdout; its
  reads are judged by the same check on their own (:meth:`OfficialClients.reads`).

Both stop when the stop file appears (the reader once it has read ``expected`` events, or
after its drain time). A process that dies, or a line that does not parse, is a failure of
the part, recorded, never raised out of a thread.

The client's own log (Rust ``tracing`` on stdout, filtered by ``RUST_LOG``: ``rust_log``,
``info`` by default) goes to ``official-writer.log`` / ``official-reader.log`` in the work
directory, stderr to ``official-*.stderr``; :meth:`OfficialClients.log_tail` gives their
last lines for a run's evidence (an official reader that stalled once, unexplained).
"""

from __future__ import annotations

import os
import re
import subprocess
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from chaos.checker import Read, decode
from chaos.load import Acks, Part

OFFICIAL_STREAM = "official"
OFFICIAL_GROUP = "official"
KEYS = 8
KEY_PREFIX = "o"
"""The official writer's keys: ``o0`` .. ``o7``."""
EVENT_BYTES = 100
INFLIGHT = 25
"""Events the official writer has in flight (``max_inflight_events``); it flushes after each
``INFLIGHT`` events, and the flush's return acknowledges them. (Its ``write_event_async``
calls awaited side by side may be stored out of order: the Python binding runs each on the
Rust runtime's thread pool; found by this load.)"""

WRITER = """
import os, sys, time
import pravega_client
manager = pravega_client.StreamManager({controller!r})
writer = manager.create_writer({scope!r}, {stream!r}, {inflight})
seqs = [0] * {keys}
n, started = 0, time.monotonic()
batch, begun = [], time.monotonic()
while not os.path.exists({stop!r}):
    k = n % {keys}
    key, seq = f"{prefix}{{k}}", seqs[k]
    head = f"k {{key}} {{seq}}\\n"
    if not batch:
        begun = time.monotonic()
    try:
        writer.write_event(head + "." * max(0, {size} - len(head)), key)
        batch.append((key, seq))
    except Exception as e:  # not queued, or an earlier event failed: outcome unknown
        print("u", key, seq, type(e).__name__, flush=True)
    seqs[k] += 1
    n += 1
    if len(batch) >= {inflight} or os.path.exists({stop!r}):
        try:
            writer.flush()  # every event written before is persisted once it returns
            took = round(time.monotonic() - begun, 4)
            for key, seq in batch:
                print("a", key, seq, took, flush=True)
        except Exception as e:  # outcome unknown: the checker allows it either way
            for key, seq in batch:
                print("u", key, seq, type(e).__name__, flush=True)
            time.sleep(1.0)
        batch = []
    ahead = started + n / {rate} - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
print("done", flush=True)
sys.stdout.flush()
os._exit(0)
"""

_TRACING_LINE = re.compile(
    r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d\.\d+ +(TRACE|DEBUG|INFO|WARN|ERROR) "
)
"""A line of the Rust client's ``tracing`` log, colours removed
(``Nov 29 03:52:13.057  INFO pravega_client::stream_manager: creating scope "x"``, or with
spans between the level and the target)."""
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

READER_LOOK_S = 2.0
"""How often the official reader looks at its stop file while a get is pending."""

READER = """
import asyncio, os, sys, time
import pravega_client
manager = pravega_client.StreamManager({controller!r})
group = manager.create_reader_group({group!r}, {scope!r}, {stream!r})
reader = group.create_reader("official-0")

async def read():
    # A pending get is kept across the looks at the stop file, never cancelled: a cancelled
    # get_segment_slice_async loses the slice it gets, and its segment with it (the reader
    # never reads that segment again).
    pending = None
    while not os.path.exists({stop!r}):
        if pending is None:
            pending = asyncio.ensure_future(reader.get_segment_slice_async())
        done, _ = await asyncio.wait({{pending}}, timeout={look_s})
        if not done:
            continue
        piece, pending = pending.result(), None
        for event in piece:
            head = bytes(event.data()).split(b"\\n", 1)[0].decode("ascii", "replace")
            print("r", head.replace(" ", "|"), flush=True)
        reader.release_segment(piece)

asyncio.run(read())
print("done", flush=True)
sys.stdout.flush()
os._exit(0)
"""


def stall_lines(tail: list[str], warnings: int = 8) -> list[str]:
    """From a process's :meth:`OfficialClients.log_tail`: its last ``warnings`` WARN or
    ERROR log lines and the head of a panic on its stderr (a panic of a segment's read task
    ends that segment's reading silently: the chaos smoke run's official reader stall)."""
    logged = [t for t in tail if t.startswith("log: ") and (" WARN " in t or " ERROR " in t)]
    stderr = [t for t in tail if t.startswith("stderr: ")]
    at = next((i for i, t in enumerate(stderr) if "panicked" in t), None)
    panic = stderr[at : at + 2] if at is not None else []
    return [t[:400] for t in logged[-warnings:] + panic]


class OfficialClients(Part):
    """The official client's writer and reader group; see the module docstring."""

    name = "official client"

    def __init__(
        self,
        cluster: Any,
        seed: int,
        *,
        controller: str,
        scope: str,
        acks: Acks,
        work_dir: Path,
        rate: float = 50.0,
        rust_log: str = "info",
    ) -> None:
        super().__init__(cluster, seed)
        from tests.wire.official_client import install_client

        self.acks = acks
        self.started = time.monotonic()
        self._reads: list[Read] = []
        self._stop_writer = work_dir / "official-writer.stop"
        self._stop_reader = work_dir / "official-reader.stop"
        python = str(install_client())
        fields = {"controller": controller, "scope": scope, "stream": OFFICIAL_STREAM}
        writer = WRITER.format(
            **fields,
            keys=KEYS,
            prefix=KEY_PREFIX,
            size=EVENT_BYTES,
            rate=rate,
            inflight=INFLIGHT,
            stop=str(self._stop_writer),
        )
        reader = READER.format(
            **fields, group=OFFICIAL_GROUP, stop=str(self._stop_reader), look_s=READER_LOOK_S
        )
        self.work_dir = work_dir
        self._processes = []
        for which, script in (("writer", writer), ("reader", reader)):
            with open(work_dir / f"official-{which}.stderr", "w") as stderr:
                self._processes.append(
                    subprocess.Popen(
                        [python, "-c", textwrap.dedent(script)],
                        stdout=subprocess.PIPE,
                        stderr=stderr,
                        text=True,
                        env={**os.environ, "RUST_LOG": rust_log},
                    )
                )
        self._pending: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()
        self.spawn(self._follow_writer, self._processes[0])
        self.spawn(self._follow_reader, self._processes[1])

    def _follow_writer(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            parts = line.split()
            if parts[:1] == ["a"] and len(parts) == 4:
                took = float(parts[3])
                self.acks.done(parts[1], int(parts[2]), time.monotonic() - took, None)
            elif parts[:1] == ["u"] and len(parts) >= 3:
                self.acks.done(parts[1], int(parts[2]), time.monotonic(), OSError(line))
            elif parts != ["done"] and not self._logged("writer", line):
                self.failures.append(f"official writer: unexpected line {line!r}")
        self._check_exit("writer", process)

    def _follow_reader(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            parts = line.split()
            if parts[:1] == ["r"] and len(parts) == 2:
                payload = parts[1].replace("|", " ").encode() + b"\n"
                at = time.monotonic() - self.started
                with self._lock:
                    self._reads.append(decode("official-0", OFFICIAL_STREAM, -1, payload, at))
            elif parts != ["done"] and not self._logged("reader", line):
                self.failures.append(f"official reader: unexpected line {line!r}")
        self._check_exit("reader", process)

    def _logged(self, which: str, line: str) -> bool:
        """Write ``line`` to the process's log file if it is a line of the client's log."""
        plain = _ANSI.sub("", line)
        if not _TRACING_LINE.match(plain):
            return False
        with open(self.work_dir / f"official-{which}.log", "a") as log_file:
            log_file.write(plain)
        return True

    def log_tail(self, which: str, lines: int = 200) -> list[str]:
        """The last ``lines`` lines of the ``"writer"``'s or ``"reader"``'s log and stderr."""
        tail: list[str] = []
        for suffix in ("log", "stderr"):
            path = self.work_dir / f"official-{which}.{suffix}"
            if path.exists():
                with open(path, errors="replace") as f:
                    tail += [f"{suffix}: {text.rstrip()}" for text in f.readlines()[-lines:]]
        return tail

    def why_stalled(self) -> list[str]:
        """:func:`stall_lines` of the official reader's log and stderr."""
        return stall_lines(self.log_tail("reader", 5000))

    def _check_exit(self, which: str, process: subprocess.Popen[str]) -> None:
        code = process.wait()
        if code != 0:
            error = "\n".join(self.log_tail(which, 20))[-2000:]
            self.failures.append(f"official {which} exited with {code}: {error}")

    def reads(self) -> list[Read]:
        """The official reader group's reads so far, in the order it returned them."""
        with self._lock:
            return list(self._reads)

    def stop_writing(self) -> None:
        """Ask the writer to stop (its last event settles first); wait for it."""
        self._stop_writer.touch()
        self._wait(self._processes[0])

    def drain(self, expected: int, stall_s: float) -> bool:
        """Let the official reader read until it has ``expected`` distinct keyed events or
        nothing new came for ``stall_s``; then stop it. True if it got them all."""
        last, changed = -1, time.monotonic()
        got = 0
        while True:
            reads = self.reads()
            got = len({(r.ident, r.seq) for r in reads if r.kind == "k"})
            if got >= expected:
                break
            if len(reads) != last:
                last, changed = len(reads), time.monotonic()
            elif time.monotonic() - changed > stall_s:
                break
            time.sleep(1.0)
        self._stop_reader.touch()
        self._wait(self._processes[1])
        return got >= expected

    def _wait(self, process: subprocess.Popen[str]) -> None:
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            self.failures.append("an official client process did not stop in 60 s")

    def stop(self) -> None:
        self._stop_writer.touch()
        self._stop_reader.touch()
        for process in self._processes:
            if process.poll() is None:
                self._wait(process)
        super().stop()
