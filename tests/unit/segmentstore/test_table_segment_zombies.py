"""Table segments under conditional updates from several clients while owners are replaced
(the old one sometimes left running: a zombie) and Tier-2 fails 6% of its calls, before or
after doing them: every key reads back, and holds its last acknowledged value or one whose
outcome was unknown. (Written while looking for the chaos run's unreadable key-value entry,
docs/chaos.md "Open"; it did not reproduce it.)"""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

import pytest

from pravega_ray.contracts.segment_store import TableUpdate
from pravega_ray.errors import BadKeyVersionError, DataCorruptionError, NoSuchKeyError
from pravega_ray.logs.memory import InMemoryLogStore
from pravega_ray.segmentstore.container import SegmentContainer
from pravega_ray.segmentstore.table_segment import TableSegments
from pravega_ray.storage.memory import InMemoryChunkStorage
from tests.containers import TIGHT_TABLES, new_container

pytestmark = pytest.mark.timeout(120)

SEG = "sc/_kvt.t/0.#epoch.0"
KEYS = [f"k{i}".encode() for i in range(8)]
MUTATING = ("create", "delete", "read", "concat", "append")


class FlakyStorage:
    """Memory Tier-2 whose calls fail now and then, before or after they took effect."""

    def __init__(self, rng: random.Random, rate: float = 0.03) -> None:
        self.inner = InMemoryChunkStorage()
        self._rng = rng
        self._rate = rate

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if name not in MUTATING:
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            roll = self._rng.random()
            if roll < self._rate:
                raise OSError(f"injected before {name}")
            out = method(*args, **kwargs)
            if roll > 1 - self._rate:
                raise OSError(f"injected after {name}")
            return out

        return call


def recovered(store: InMemoryLogStore, storage: Any) -> SegmentContainer:
    """A new owner, its recovery repeated until Tier-2 lets it through (as the actor's
    restarts do); damage is never retried."""
    for _ in range(100):
        try:
            return new_container(store, storage, config=TIGHT_TABLES)
        except DataCorruptionError:
            raise
        except Exception:  # an injected fault
            continue
    raise AssertionError("no recovery in 100 attempts")


@pytest.mark.parametrize("seed", range(12))
def test_owners_replaced_under_load_with_zombies_and_a_flaky_tier2_keep_every_update(
    seed: int,
) -> None:
    rng = random.Random(seed)

    async def go() -> None:
        store, storage = InMemoryLogStore(), FlakyStorage(rng)
        containers = [recovered(store, storage)]
        tables = [TableSegments(containers[0])]
        while True:
            try:
                await tables[0].create(SEG)
                for key in KEYS:
                    await tables[0].update(SEG, [TableUpdate(key, b"0", None)])
                break
            except Exception:  # an injected fault: start again on a clean pair
                store, storage = InMemoryLogStore(), FlakyStorage(rng)
                containers = [recovered(store, storage)]
                tables = [TableSegments(containers[0])]
        acked: dict[bytes, list[bytes]] = {k: [b"0"] for k in KEYS}
        unknown: dict[bytes, list[bytes]] = {k: [] for k in KEYS}
        stop = asyncio.Event()

        async def client(c: int) -> None:
            n = 0
            while not stop.is_set():
                key, n = rng.choice(KEYS), n + 1
                value = f"c{c}-{n}".encode()
                try:
                    [entry] = await tables[-1].get(SEG, [key])
                    assert entry is not None
                    await tables[-1].update(SEG, [TableUpdate(key, value, entry.version)])
                except (BadKeyVersionError, NoSuchKeyError):
                    pass
                except DataCorruptionError:
                    raise
                except Exception:  # outcome unknown: fenced, closed, an injected fault
                    unknown[key].append(value)
                else:
                    acked[key].append(value)
                await asyncio.sleep(rng.random() * 0.003)

        clients = [asyncio.ensure_future(client(c)) for c in range(3)]
        for _ in range(8):
            await asyncio.sleep(rng.random() * 0.15)
            if rng.random() < 0.5:  # else the old owner goes on: a zombie
                await containers[-1].close()
            containers.append(recovered(store, storage))
            tables.append(TableSegments(containers[-1]))
        await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(*clients)
        final = recovered(store, storage.inner)  # the end: no more faults
        got = await TableSegments(final).get(SEG, KEYS)
        for key, entry in zip(KEYS, got, strict=True):
            assert entry is not None, key
            assert entry.value in acked[key][-1:] + unknown[key], (key, entry.value)
        for container in [*containers, final]:
            with contextlib.suppress(Exception):  # fenced or failed already
                await container.close()

    asyncio.run(go())
