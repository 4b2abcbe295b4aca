"""In-memory durable log for unit tests and the in-process cluster.

:class:`InMemoryLogStore` plays the part of the disk: it outlives
:class:`InMemoryDurableLog` instances, so a test can "restart" a container by
building a new log on the same store, and fencing works as on the filesystem.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from pravega_ray.errors import DataCorruptionError, FencedError, IllegalStateError


class InMemoryLogStore:
    def __init__(self) -> None:
        self.records: dict[int, bytes] = {}
        self.next_sequence = 0
        self.epoch = 0
        self.lock = threading.Lock()

    def size_bytes(self) -> int:
        with self.lock:
            return sum(len(r) for r in self.records.values())


class InMemoryDurableLog:
    def __init__(self, store: InMemoryLogStore) -> None:
        self._store = store
        self._epoch = 0

    @property
    def epoch(self) -> int:
        return self._epoch

    def initialize(self, *, must_exist: bool = False) -> None:
        with self._store.lock:
            if must_exist and self._store.epoch == 0:
                raise DataCorruptionError(
                    "in-memory durable log: empty, but it must exist (an owner had it): "
                    "it was lost with every record it held"
                )
            self._store.epoch += 1
            self._epoch = self._store.epoch

    def read_all(self) -> Iterator[tuple[int, bytes]]:
        with self._store.lock:
            records = sorted(self._store.records.items())
        yield from records

    def append(self, payload: bytes) -> int:
        if self._epoch == 0:
            raise IllegalStateError("durable log is not initialized")
        with self._store.lock:
            if self._store.epoch != self._epoch:
                raise FencedError(f"log taken over by epoch {self._store.epoch}")
            sequence = self._store.next_sequence
            self._store.records[sequence] = bytes(payload)
            self._store.next_sequence += 1
            return sequence

    def truncate(self, upto_sequence: int) -> None:
        with self._store.lock:
            if upto_sequence > self._store.next_sequence:
                raise IllegalStateError("cannot truncate beyond the end of the log")
            for sequence in [s for s in self._store.records if s < upto_sequence]:
                del self._store.records[sequence]

    def size_bytes(self) -> int:
        return self._store.size_bytes()

    def close(self) -> None:
        pass
