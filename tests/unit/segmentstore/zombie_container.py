"""A segment container process that keeps running after a successor took its place.

Run by ``test_tier2_fencing.py`` as ``python -m tests.unit.segmentstore.zombie_container
TIER1 TIER2 SEGMENT GO_FILE RECORDS_FILE``. It recovers container 0 on the two directories,
appends 100 events to SEGMENT without flushing them to Tier-2, prints ``READY``, waits for
GO_FILE to appear (the test has started a successor by then), and then keeps trying to flush
and append, as a zombie's storage writer would, until the container stops. Every Tier-2
create or delete that actually reached the directory is appended to RECORDS_FILE as a JSON
line with its wall-clock time. The last line printed is a JSON report.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from pravega_ray.client.event_framing import frame_events
from pravega_ray.constants import NO_EVENT_NUMBER
from pravega_ray.contracts.attributes import AttributeUpdate, AttributeUpdateType
from pravega_ray.errors import PravegaError
from pravega_ray.logs.filesystem import FileSystemDurableLog
from pravega_ray.storage.filesystem import FileSystemChunkStorage
from tests.containers import QUIET, new_container


class RecordingChunkStorage:
    """Delegates to a real storage and records each create/delete that reached it."""

    def __init__(self, inner: FileSystemChunkStorage, records: Path) -> None:
        self._inner = inner
        self._records = records
        self.capabilities = inner.capabilities

    def _record(self, op: str, name: str) -> None:
        with open(self._records, "a") as f:
            f.write(json.dumps({"t": time.time(), "op": op, "name": name}) + "\n")

    def create(self, name: str, data: bytes) -> None:
        self._record("create", name)
        self._inner.create(name, data)

    def delete(self, name: str) -> None:
        self._record("delete", name)
        self._inner.delete(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def run(tier1: Path, tier2: Path, segment: str, go: Path, records: Path) -> dict[str, Any]:
    fatal: list[BaseException] = []
    container = new_container(
        FileSystemDurableLog(tier1),
        RecordingChunkStorage(FileSystemChunkStorage(tier2), records),
        config=QUIET,
        on_fatal=fatal.append,
    )
    writer = uuid.uuid4().bytes
    await container.create_segment(segment)
    events = [f"zombie-{i}".encode() for i in range(100)]
    await container.append(segment, writer, NO_EVENT_NUMBER, 99, 100, frame_events(events))
    key = b"\x07" * 16
    update = AttributeUpdate(key, AttributeUpdateType.REPLACE, 1)
    await container.update_attributes(segment, (update,))
    print("READY", flush=True)
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    errors = []
    last = 99
    for _ in range(50):  # a zombie keeps going until something stops it
        try:
            await container.flush_to_storage()
        except PravegaError as e:
            errors.append(repr(e))
            break
        try:
            await container.append(segment, writer, last, last + 1, 1, frame_events([b"late"]))
            last += 1
        except PravegaError as e:
            errors.append(repr(e))
            break
        await asyncio.sleep(0.01)
    return {"errors": errors, "fatal": [repr(e) for e in fatal]}


def main() -> None:
    tier1, tier2, segment, go, records = sys.argv[1:6]
    report = asyncio.run(run(Path(tier1), Path(tier2), segment, Path(go), Path(records)))
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
