"""The cluster manager's plan (balanced, fewest moves, deterministic) and its stored record."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pravega_ray.cluster_assignment import (
    ASSIGNMENT_PREFIX,
    AssignmentStore,
    moves_between,
    plan_assignment,
)
from pravega_ray.errors import DataCorruptionError, InvalidArgumentError
from pravega_ray.storage.memory import InMemoryChunkStorage

pytestmark = pytest.mark.timeout(10)


def loads(assignment: dict[int, str], nodes: list[str]) -> list[int]:
    counts = Counter(assignment.values())
    return [counts[n] for n in nodes]


def round_robin(count: int, nodes: list[str]) -> dict[int, str]:
    return {c: nodes[c % len(nodes)] for c in range(count)}


def test_plan_assignment_no_change_keeps_a_balanced_map() -> None:
    current = round_robin(6, ["a", "b", "c"])
    assert plan_assignment(range(6), current, ["c", "a", "b"]) == current


def test_plan_assignment_join_moves_only_enough_to_fill_the_new_node() -> None:
    nodes = ["a", "b", "c"]
    current = round_robin(6, nodes)
    target = plan_assignment(list(range(6)), current, [*nodes, "d"])
    assert sorted(loads(target, [*nodes, "d"])) == [1, 1, 2, 2]
    # The fewest moves: the new node takes one container (loads 2,2,1,1 need just one move).
    assert moves_between(current, target) == [c for c, n in target.items() if n == "d"]
    assert len(moves_between(current, target)) == 1


def test_plan_assignment_leave_moves_only_the_lost_containers() -> None:
    nodes = ["a", "b", "c", "d"]
    current = plan_assignment(list(range(6)), {}, nodes)
    lost = [c for c, n in current.items() if n == "b"]
    target = plan_assignment(list(range(6)), current, ["a", "c", "d"])
    assert sorted(moves_between(current, target)) == sorted(lost)
    assert sorted(loads(target, ["a", "c", "d"])) == [2, 2, 2]
    assert "b" not in target.values()


def test_plan_assignment_one_node_holds_everything() -> None:
    current = round_robin(5, ["a", "b"])
    assert plan_assignment(range(5), current, ["b"]) == {c: "b" for c in range(5)}


def test_plan_assignment_more_nodes_than_containers_puts_at_most_one_per_node() -> None:
    current = {0: "a", 1: "a"}
    target = plan_assignment([0, 1], current, ["a", "b", "c", "d"])
    assert max(Counter(target.values()).values()) == 1
    assert target[0] == "a"  # one of them stays
    assert len(moves_between(current, target)) == 1


def test_plan_assignment_unbalanced_current_is_balanced_with_fewest_moves() -> None:
    current = {c: "a" for c in range(6)}
    target = plan_assignment(range(6), current, ["a", "b", "c"])
    assert loads(target, ["a", "b", "c"]) == [2, 2, 2]
    assert len(moves_between(current, target)) == 4


def test_plan_assignment_is_deterministic_whatever_the_input_order() -> None:
    rng = random.Random(7)
    nodes = [f"n{i}" for i in range(5)]
    current = {c: rng.choice([*nodes, "gone"]) for c in range(17)}
    expected = plan_assignment(list(range(17)), current, nodes)
    for _ in range(20):
        ids = list(range(17))
        rng.shuffle(ids)
        shuffled_nodes = list(nodes)
        rng.shuffle(shuffled_nodes)
        items = list(current.items())
        rng.shuffle(items)
        assert plan_assignment(ids, dict(items), shuffled_nodes) == expected


@pytest.mark.parametrize("seed", range(30))
def test_plan_assignment_random_maps_are_balanced_and_minimal(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [f"n{i}" for i in range(rng.randint(1, 6))]
    count = rng.randint(0, 20)
    current = {c: rng.choice([*nodes, "gone", "x"]) for c in range(count) if rng.random() < 0.9}
    target = plan_assignment(range(count), current, nodes)
    assert set(target) == set(range(count))
    if count:
        counts = loads(target, nodes)
        assert max(counts) - min(counts) <= 1
    # The fewest moves: a node keeps min(held, its quota); the quotas that maximize that
    # give the extra slots to the nodes holding the most.
    base, extra = divmod(count, len(nodes))
    held = sorted((sum(1 for n in current.values() if n == node) for node in nodes), reverse=True)
    kept = sum(min(h, base + (1 if i < extra else 0)) for i, h in enumerate(held))
    assert len(moves_between(current, target)) == count - kept


def test_plan_assignment_no_containers_is_an_empty_map() -> None:
    assert plan_assignment([], {}, ["a"]) == {}


@pytest.mark.parametrize(
    ("ids", "current", "nodes"),
    [
        ([0, 1], {}, []),
        ([0, 0], {}, ["a"]),
        ([-1], {}, ["a"]),
        ([True], {}, ["a"]),
        (["0"], {}, ["a"]),
        ("01", {}, ["a"]),
        ([0], {}, "a"),
        ([0], {}, [""]),
        ([0], {}, [None]),
        ([0], {0: 5}, ["a"]),
        ([0], [("a", 0)], ["a"]),
    ],
)
def test_plan_assignment_bad_input_raises_invalid_argument(ids, current, nodes) -> None:
    with pytest.raises(InvalidArgumentError):
        plan_assignment(ids, current, nodes)


def test_assignment_store_round_trips_and_keeps_one_version() -> None:
    storage = InMemoryChunkStorage()
    store = AssignmentStore(storage)
    assert store.load() is None
    assert store.store({0: "a", 1: "b"}) == 0
    assert store.store({0: "a", 1: "c"}) == 1
    assert store.load() == {0: "a", 1: "c"}
    assert storage.list(ASSIGNMENT_PREFIX) == [f"{ASSIGNMENT_PREFIX}{1:020d}"]


def test_assignment_store_crash_after_create_leaves_the_newest_version_readable() -> None:
    storage = InMemoryChunkStorage()
    store = AssignmentStore(storage)
    store.store({0: "a"})
    # A crash between "create new" and "delete old" leaves both: the newer one wins.
    old = storage.list(ASSIGNMENT_PREFIX)[0]
    data = storage.read(old, 0, storage.length(old))
    store.store({0: "b"})
    storage.create(old, data)  # the old version reappears next to the new one
    assert store.load() == {0: "b"}


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[:-3],  # cut short
        lambda raw: raw[:20] + bytes([raw[20] ^ 1]) + raw[21:],  # a flipped bit
        lambda raw: b"{}",  # no checksum header
        lambda raw: b"",  # empty
    ],
)
def test_assignment_store_damaged_record_raises_data_corruption(damage) -> None:
    storage = InMemoryChunkStorage()
    store = AssignmentStore(storage)
    store.store({0: "a", 1: "b"})
    chunk = storage.list(ASSIGNMENT_PREFIX)[0]
    raw = storage.read(chunk, 0, storage.length(chunk))
    storage.delete(chunk)
    storage.create(chunk, damage(raw))
    with pytest.raises(DataCorruptionError) as caught:
        store.load()
    assert caught.value.chunk == chunk
    # Rebuilding stores past the damaged version, which then goes.
    assert store.store({0: "c", 1: "c"}) == 1
    assert store.load() == {0: "c", 1: "c"}
    assert storage.list(ASSIGNMENT_PREFIX) == [f"{ASSIGNMENT_PREFIX}{1:020d}"]


def test_assignment_store_valid_checksum_over_a_wrong_shape_is_data_corruption() -> None:
    import zlib

    storage = InMemoryChunkStorage()
    body = b'{"assignment":{"x":"a"},"version":0}'
    storage.create(f"{ASSIGNMENT_PREFIX}{0:020d}", b"crc32:%08x\n%s" % (zlib.crc32(body), body))
    with pytest.raises(DataCorruptionError):
        AssignmentStore(storage).load()


@pytest.mark.parametrize("bad", [{-1: "a"}, {"0": "a"}, {0: ""}, {0: None}, {True: "a"}])
def test_assignment_store_bad_map_raises_and_writes_nothing(bad) -> None:
    storage = InMemoryChunkStorage()
    with pytest.raises(InvalidArgumentError):
        AssignmentStore(storage).store(bad)
    assert storage.list(ASSIGNMENT_PREFIX) == []


def test_plan_assignment_ignores_unknown_containers_and_repeated_nodes() -> None:
    current = {0: "a", 1: "b", 99: "a"}
    assert plan_assignment([0, 1], current, ["a", "b", "a"]) == {0: "a", 1: "b"}


def test_moves_between_lists_changed_and_new_containers_in_order() -> None:
    assert moves_between({0: "a", 1: "b"}, {2: "c", 1: "a", 0: "a"}) == [1, 2]
