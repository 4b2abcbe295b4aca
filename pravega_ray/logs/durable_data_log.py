"""Tier-1 durable data log: the Protocol every backend implements.

A durable log is an ordered sequence of records, each an opaque payload (one
group commit of the ingestion pipeline) with a sequence number assigned by the
log, strictly increasing from 0 without gaps.

Contracts (tests/unit/logs/test_durable_data_log_contract.py):

* ``initialize()`` makes this instance the log's only writer: it takes a new
  epoch higher than every earlier owner's, after which an older owner's
  ``append`` raises :class:`FencedError`. It returns nothing; call
  ``read_all()`` next to replay. It may itself raise :class:`FencedError` when
  a newer initializer is running (this instance must then give up). With
  ``must_exist=True`` (the caller knows an owner had the log before: its container's
  Tier-2 fences say so), a log that holds nothing at all (no record, epoch or
  truncation point: deleted, or a new Tier-1) raises :class:`DataCorruptionError`
  and creates nothing, so the loss is reported on every attempt.
* ``read_all()`` may raise :class:`RetriableError` (e.g. S3 listing raced a
  writer): recover again from ``initialize``.
* ``read_all()`` yields ``(sequence_number, payload)`` for every record ever
  acknowledged, in order. A record torn by a crash (never acknowledged) is not
  returned.
* ``append(payload)`` returns the record's sequence number once the record is
  durable (fsynced / stored). If it raises, the outcome is unknown and the
  caller must stop using this instance (the container restarts and recovers).
* ``truncate(upto_sequence)`` durably drops every record below
  ``upto_sequence``: ``read_all`` never yields them again (after a restart
  too). Sequence numbers are not reused. Truncating beyond the end raises
  :class:`IllegalStateError`.
* Backends are synchronous; the ingestion pipeline calls ``append`` from a
  worker thread, one call at a time. ``truncate`` may run in another thread
  beside an ``append`` (the container truncates while it keeps logging); it
  touches only records below the point it is given.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol


class DurableDataLog(Protocol):
    @property
    def epoch(self) -> int: ...

    def initialize(self, *, must_exist: bool = False) -> None: ...

    def read_all(self) -> Iterator[tuple[int, bytes]]: ...

    def append(self, payload: bytes) -> int: ...

    def truncate(self, upto_sequence: int) -> None: ...

    def size_bytes(self) -> int: ...

    def close(self) -> None: ...
