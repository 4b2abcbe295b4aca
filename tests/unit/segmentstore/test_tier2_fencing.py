"""A zombie container cannot write Tier-2 once a successor took over.

Both tests end the same way: a third owner, recovering from storage alone, reads every event
the successor acknowledged, byte for byte. Without the Tier-2 fence the zombie's storage
writer replaces the successor's chunk with its own shorter one and that read fails.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from pravega_ray.client.event_framing import frame_events, parse_events
from pravega_ray.contracts.attributes import AttributeUpdate, AttributeUpdateType
from pravega_ray.errors import ContainerNotReadyError, FencedError
from pravega_ray.logs.filesystem import FileSystemDurableLog
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.storage.filesystem import FileSystemChunkStorage
from tests.containers import QUIET, new_container

pytestmark = pytest.mark.timeout(120)

SEGMENT = "sc/st/0.#epoch.0"
REPO = Path(__file__).resolve().parents[3]


def _container(root: Path, **fatal: object) -> SegmentContainer:
    return new_container(
        FileSystemDurableLog(root / "tier1"),
        FileSystemChunkStorage(root / "tier2"),
        config=QUIET,
        **fatal,
    )


async def _events(container: SegmentContainer) -> list[bytes]:
    info = await container.get_info(SEGMENT)
    return [e for _, e in parse_events(await container.read_range(SEGMENT, 0, info.length))[0]]


async def _successor_writes(root: Path) -> list[bytes]:
    """Take over, append 100 more events, flush: Tier-2 then holds the successor's chunk."""
    successor = _container(root)
    writer = uuid.uuid4().bytes
    events = [f"successor-{i}".encode() for i in range(100)]
    await successor.append(SEGMENT, writer, -(2**63), 99, 100, frame_events(events))
    await successor.flush_to_storage()
    everything = await _events(successor)
    await successor.close()
    return everything


def test_zombie_in_the_same_process_cannot_replace_the_successors_chunk(tmp_path: Path) -> None:
    fatal: list[BaseException] = []

    async def scenario() -> None:
        zombie = _container(tmp_path, on_fatal=fatal.append)
        await zombie.create_segment(SEGMENT)
        writer = uuid.uuid4().bytes
        await zombie.append(SEGMENT, writer, -(2**63), 99, 100, frame_events([b"z"] * 100))
        key = b"\x07" * 16
        await zombie.update_attributes(
            SEGMENT, (AttributeUpdate(key, AttributeUpdateType.REPLACE, 1),)
        )
        acknowledged = await _successor_writes(tmp_path)
        before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "tier2").rglob("*"))
        with pytest.raises(ContainerNotReadyError, match="fenced"):
            await zombie.flush_to_storage()  # its chunk and attribute flushes: all refused
        assert isinstance(fatal[0], FencedError) and "Tier-2" in str(fatal[0])
        after = sorted(p.relative_to(tmp_path) for p in (tmp_path / "tier2").rglob("*"))
        assert after == before
        third = _container(tmp_path)
        assert await _events(third) == acknowledged
        assert await third.get_attributes(SEGMENT, [key]) == {key: 1}
        await third.close()

    asyncio.run(scenario())


def test_zombie_container_process_writing_beside_its_successor_changes_nothing(
    tmp_path: Path,
) -> None:
    go, records = tmp_path / "go", tmp_path / "records.jsonl"
    zombie = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.unit.segmentstore.zombie_container",
            str(tmp_path / "tier1"),
            str(tmp_path / "tier2"),
            SEGMENT,
            str(go),
            str(records),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert zombie.stdout is not None
        assert zombie.stdout.readline().strip() == "READY", zombie.stderr.read()  # type: ignore[union-attr]
        acknowledged = asyncio.run(_successor_writes(tmp_path))
        fenced_at = time.time()  # the successor's fence exists since before its first write
        go.touch()
        out, err = zombie.communicate(timeout=60)
    finally:
        zombie.kill()
    report = json.loads(out.strip().splitlines()[-1])
    assert report["errors"] and "fenced" in report["errors"][0], (report, err)
    assert any("Tier-2" in f for f in report["fatal"]), (report, err)
    mutations = [json.loads(line) for line in records.read_text().splitlines()]
    assert mutations, "the zombie wrote Tier-2 before the takeover (its fence)"
    assert [m for m in mutations if m["t"] > fenced_at] == []

    async def third_owner() -> None:
        third = _container(tmp_path)
        assert await _events(third) == acknowledged
        await third.close()

    asyncio.run(third_owner())
