from __future__ import annotations

import pytest

from pravega_ray.errors import InvalidNameError
from pravega_ray.naming import (
    container_for_segment,
    is_transaction_segment,
    parse_scoped_stream,
    parse_segment_name,
    routing_key_hash,
    segment_id,
    stream_segment_name,
    transaction_segment_name,
    transient_segment_name,
    validate_name,
)

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize("good", ["a", "iot", "Sensors-1.v2", "x_y", "a" * 255])
def test_valid_names_pass(good: str) -> None:
    assert validate_name("stream", good) == good


@pytest.mark.parametrize("bad", ["", ".", "..", "_x", "a/b", "a b", "é", "a" * 256, "a\x00", None])
def test_invalid_names_raise(bad) -> None:
    with pytest.raises(InvalidNameError):
        validate_name("stream", bad)


def test_system_names_allowed_only_when_asked() -> None:
    assert validate_name("scope", "_system", allow_system=True) == "_system"


def test_segment_ids_and_names_round_trip() -> None:
    sid = segment_id(3, 7)
    assert sid == (3 << 32) | 7
    name = stream_segment_name("sc", "st", sid)
    assert name == "sc/st/7.#epoch.3"
    parsed = parse_segment_name(name)
    assert (parsed.scope, parsed.stream, parsed.segment_id) == ("sc", "st", sid)
    with pytest.raises(InvalidNameError):
        parse_segment_name("sc/../x/0.#epoch.0")


def test_container_placement_is_stable_and_in_range() -> None:
    names = [stream_segment_name("s", "t", segment_id(0, i)) for i in range(100)]
    ids = [container_for_segment(n, 4) for n in names]
    assert all(0 <= i < 4 for i in ids)
    assert len(set(ids)) == 4
    assert ids == [container_for_segment(n, 4) for n in names]
    # A derived segment (transaction, transient) lands with its parent.
    assert container_for_segment(names[0] + "#transaction.abc", 4) == ids[0]


def test_routing_key_hash_is_in_unit_interval_and_stable() -> None:
    values = [routing_key_hash(f"k{i}") for i in range(1000)]
    assert all(0.0 <= v < 1.0 for v in values)
    assert routing_key_hash("k1") == values[1]
    assert parse_scoped_stream("a/b") == ("a", "b")
    with pytest.raises(InvalidNameError):
        parse_scoped_stream("a/b/c")


def test_is_transaction_segment_tells_a_transaction_segment_from_the_others() -> None:
    parent = stream_segment_name("sc", "st", segment_id(0, 3))
    assert is_transaction_segment(transaction_segment_name(parent, bytes(16)))
    assert not is_transaction_segment(parent)
    assert not is_transaction_segment(transient_segment_name(parent, bytes(16)))
