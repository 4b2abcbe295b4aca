"""In-memory durable log for unit tests and the simulation.

:class:`InMemoryLogStore` plays the part of the disk: it outlives
:class:`InMemoryDurableLog` instances, so a test can "restart" a container by
building a new log on the same store, and fencing works as on the filesystem.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from pravega_ray.errors import FencedError, IllegalStateError


class InMemoryLogStore:
    def __init__(self) -> None:
        self.records: list[bytes] = []
        self.epoch = 0
        self.lock = threading.Lock()


class InMemoryDurableLog:
    def __init__(self, store: InMemoryLogStore) -> None:
        self._store = store
        self._epoch = 0

    @property
    def epoch(self) -> int:
        return self._epoch

    def initialize(self) -> None:
        with self._store.lock:
            self._store.epoch += 1
            self._epoch = self._store.epoch

    def read_all(self) -> Iterator[tuple[int, bytes]]:
        with self._store.lock:
            records = list(self._store.records)
        yield from enumerate(records)

    def append(self, payload: bytes) -> int:
        if self._epoch == 0:
            raise IllegalStateError("durable log is not initialized")
        with self._store.lock:
            if self._store.epoch != self._epoch:
                raise FencedError(f"log taken over by epoch {self._store.epoch}")
            self._store.records.append(bytes(payload))
            return len(self._store.records) - 1

    def close(self) -> None:
        pass
