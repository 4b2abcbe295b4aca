from __future__ import annotations

import pytest

from pravega_ray.errors import DataCorruptionError
from pravega_ray.segmentstore import operations as ops

pytestmark = pytest.mark.timeout(10)


def test_operations_round_trip_through_a_log_record() -> None:
    batch = [
        ops.CreateSegment("s/t/0.#epoch.0", 123),
        ops.Append("s/t/0.#epoch.0", 0, b"\x00\x01data", b"w" * 16, 41, 3),
        ops.Append("s/t/0.#epoch.0", 7, b"more", None, -5, 1),
        ops.ChunkAdded("s/t/0.#epoch.0", "segments/s/t/0.#epoch.0/0", 0, 11),
        ops.Seal("s/t/0.#epoch.0", 11),
    ]
    assert list(ops.decode(ops.encode(batch))) == batch


def test_truncated_record_is_detected() -> None:
    raw = ops.encode([ops.Append("s/t/0.#epoch.0", 0, b"x" * 100, None, 0, 1)])
    with pytest.raises(DataCorruptionError):
        list(ops.decode(raw[:-1]))
