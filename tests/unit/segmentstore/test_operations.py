from __future__ import annotations

import pytest

from pravega_ray.errors import DataCorruptionError
from pravega_ray.segmentstore import operations as ops

pytestmark = pytest.mark.timeout(10)


def test_operations_round_trip_through_a_log_record() -> None:
    batch = [
        ops.CreateSegment("s/t/0.#epoch.0", 123),
        ops.Append("s/t/0.#epoch.0", 0, b"\x00\x01data", ((b"w" * 16, 41),), 3),
        ops.Append("s/t/0.#epoch.0", 7, b"more", (), 1),
        ops.Append("s/t/0.#epoch.0", 11, b"", ((b"a" * 16, -5), (b"b" * 16, 2**63 - 1)), 0),
        ops.UpdateAttributes("s/t/0.#epoch.0", ((b"k" * 16, 7),)),
        ops.TruncateSegment("s/t/0.#epoch.0", 4),
        ops.ChunkAdded("s/t/0.#epoch.0", "segments/s/t/0.#epoch.0/0", 0, 11),
        ops.ChunkAdded("s/t/0.#epoch.0", "segments/s/t/0.#epoch.0/11", 11, 4, 0xFFFFFFFF),
        ops.AttributeIndexUpdated("s/t/0.#epoch.0", 123_456),
        ops.Seal("s/t/0.#epoch.0", 11),
        ops.DeleteSegment("s/t/0.#epoch.0"),
        ops.CreateSegment("s/t/0.#epoch.0#transient." + "a" * 32, 5, "transient"),
        ops.MergeSegment("s/t/0.#epoch.0", "s/t/0.#epoch.0#transient." + "a" * 32, 11, 3, b"abc"),
        ops.MergeSegment("s/t/0.#epoch.0", "s/t/0.#epoch.0#transaction." + "b" * 32, 14, 9, None),
    ]
    assert list(ops.decode(ops.encode(batch))) == batch


def test_truncated_record_is_detected() -> None:
    raw = ops.encode([ops.Append("s/t/0.#epoch.0", 0, b"x" * 100, (), 1)])
    with pytest.raises(DataCorruptionError):
        list(ops.decode(raw[:-1]))


def test_a_malformed_record_is_data_corruption_not_a_crash() -> None:
    raw = ops.encode([ops.Append("s/t/0.#epoch.0", 0, b"x" * 10, ((b"k" * 16, 1),), 1)])
    broken = raw[:17] + b"\x00\x09" + raw[19:]  # an attribute count the body cannot hold
    with pytest.raises(DataCorruptionError):
        list(ops.decode(broken))
