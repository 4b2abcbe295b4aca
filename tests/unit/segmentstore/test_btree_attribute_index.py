"""BTreeAttributeIndex: the B+tree attribute index on Tier-2 chunks, against a dict model."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pravega_ray.contracts.attributes import NULL_VALUE
from pravega_ray.errors import DataCorruptionError, InvalidArgumentError, RetriableError
from pravega_ray.segmentstore.btree_attribute_index import CHUNK_PREFIX, BTreeAttributeIndex
from pravega_ray.storage.memory import InMemoryChunkStorage

SEG = "s/t/0.#epoch.0"
SMALL_PAGES = 512  # 20 entries per leaf, 13 per index page: deep trees from few keys
KEY_SPACE = 300


def key(i: int) -> bytes:
    return i.to_bytes(16, "big")


def chunks(storage: InMemoryChunkStorage, segment: str = SEG) -> list[str]:
    return storage.list(f"{CHUNK_PREFIX}{segment}/")


def chunk_bytes(storage: InMemoryChunkStorage, segment: str = SEG) -> int:
    return sum(storage.length(n) for n in chunks(storage, segment))


def apply(model: dict[bytes, int], values: dict[bytes, int]) -> None:
    for k, v in values.items():
        if v == NULL_VALUE:
            model.pop(k, None)
        else:
            model[k] = v


def check(index: BTreeAttributeIndex, storage: InMemoryChunkStorage, model: dict) -> None:
    index.verify(SEG)
    assert index.get(SEG, [key(i) for i in range(KEY_SPACE)]) == model
    assert index.stored_bytes(SEG) == chunk_bytes(storage)


batches = st.lists(
    st.dictionaries(
        st.integers(0, KEY_SPACE - 1).map(key),
        st.one_of(st.just(NULL_VALUE), st.integers(-(2**63) + 1, 2**63 - 1)),
        max_size=40,
    ),
    min_size=1,
    max_size=25,
)


@pytest.mark.timeout(60)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batches, compaction=st.booleans(), reopen_seed=st.integers(0, 2**32))
def test_random_batches_match_a_dict_model_across_reopens(
    batches: list[dict[bytes, int]], compaction: bool, reopen_seed: int
) -> None:
    storage = InMemoryChunkStorage()
    options = dict(page_bytes_max=SMALL_PAGES, compaction=compaction, cached_trees_max=2)
    index = BTreeAttributeIndex(storage, **options)
    reopen = random.Random(reopen_seed)
    model: dict[bytes, int] = {}
    for values in batches:
        index.update(SEG, values)
        apply(model, values)
        if reopen.random() < 0.3:  # a new instance on the same storage (a restart)
            index = BTreeAttributeIndex(storage, **options)
        check(index, storage, model)
    check(BTreeAttributeIndex(storage, **options), storage, model)


@pytest.mark.timeout(30)
def test_null_value_removes_and_delete_removes_every_chunk() -> None:
    storage = InMemoryChunkStorage()
    index = BTreeAttributeIndex(storage, page_bytes_max=SMALL_PAGES)
    other = "s/t/0.#epoch.0/x"  # a segment whose chunk prefix extends SEG's
    index.update(SEG, {key(i): i for i in range(100)})
    index.update(other, {key(1): 7})
    index.update(SEG, {key(1): NULL_VALUE, key(500): NULL_VALUE})
    got = index.get(SEG, [key(0), key(1), key(2), key(500)])
    assert got == {key(0): 0, key(2): 2}
    assert BTreeAttributeIndex(storage).get(SEG, [key(1), key(99)]) == {key(99): 99}
    index.update(SEG, {key(i): NULL_VALUE for i in range(100)})
    assert index.get(SEG, [key(i) for i in range(100)]) == {}
    assert index.live_bytes(SEG) == 0
    assert len(chunks(storage)) == 1 + 1  # SEG's last chunk (its footer) and other's chunk
    index.delete(SEG)
    index.delete(SEG)  # idempotent
    assert chunks(storage) == chunks(storage, other)
    assert index.get(SEG, [key(0)]) == {}
    assert BTreeAttributeIndex(storage).get(other, [key(1)]) == {key(1): 7}
    index.update(SEG, {key(3): 3})  # a deleted segment starts over at offset 0
    assert chunks(storage)[0].endswith("/" + "0" * 20)
    assert BTreeAttributeIndex(storage).get(SEG, [key(3)]) == {key(3): 3}


@pytest.mark.timeout(30)
def test_bad_keys_and_values_are_rejected_and_change_nothing() -> None:
    storage = InMemoryChunkStorage()
    index = BTreeAttributeIndex(storage)
    index.update(SEG, {key(1): 1})
    before = chunks(storage)
    with pytest.raises(InvalidArgumentError):
        index.update(SEG, {b"short": 1})
    with pytest.raises(InvalidArgumentError):
        index.update(SEG, {key(2): 2**63})
    with pytest.raises(InvalidArgumentError):
        index.get(SEG, [b"short"])
    with pytest.raises(InvalidArgumentError):
        BTreeAttributeIndex(storage, page_bytes_max=100)
    with pytest.raises(InvalidArgumentError):
        BTreeAttributeIndex(storage, cached_trees_max=0)
    assert chunks(storage) == before
    assert index.get(SEG, [key(1), key(2)]) == {key(1): 1}


@pytest.mark.timeout(30)
def test_each_batch_is_one_chunk_named_by_its_start_offset() -> None:
    storage = InMemoryChunkStorage()
    index = BTreeAttributeIndex(storage, page_bytes_max=SMALL_PAGES, compaction=False)
    index.update(SEG, {key(i): i for i in range(100)})  # several leaves and a root
    first = storage.length(chunks(storage)[0])
    index.update(SEG, {key(1): -1})  # rewrites one leaf and the root
    names = chunks(storage)
    assert [int(n.rsplit("/", 1)[1]) for n in names] == [0, first]  # contiguous
    assert index.stored_bytes(SEG) == first + storage.length(names[1])
    # A single-leaf tree only ever needs its newest chunk: the older ones are truncated.
    index.update(SEG, {key(i): NULL_VALUE for i in range(10, 100)})
    index.update(SEG, {key(2): -2})
    assert len(chunks(storage)) == 1
    assert index.get(SEG, [key(i) for i in range(4)]) == {
        key(0): 0,
        key(1): -1,
        key(2): -2,
        key(3): 3,
    }


@pytest.mark.timeout(60)
def test_head_truncation_keeps_stored_bytes_near_live_bytes_only_with_compaction() -> None:
    """A steady workload: 2,000 cold keys loaded once, 2 of 21 hot keys updated per batch."""
    hot = [key(i) for i in range(0, 2000, 97)]
    rounds = 900
    stored: dict[bool, list[int]] = {}
    for compaction in (True, False):
        rng = random.Random(7)
        storage = InMemoryChunkStorage()
        index = BTreeAttributeIndex(storage, page_bytes_max=SMALL_PAGES, compaction=compaction)
        index.update(SEG, {key(i): i for i in range(2000)})
        largest_chunk = 0
        stored[compaction] = []
        for round_ in range(rounds):
            index.update(SEG, {k: round_ for k in rng.sample(hot, 2)})
            stored[compaction].append(index.stored_bytes(SEG))
            largest_chunk = max(largest_chunk, storage.length(chunks(storage)[-1]))
        assert stored[compaction][-1] == chunk_bytes(storage)  # the chunks really are gone
        live = index.live_bytes(SEG)
        pages = index._open(SEG).tree.verify().pages
        third = rounds // 3
        steady = max(stored[compaction][third:])
        if compaction:
            assert steady <= 6 * live, (steady, live)
            assert steady <= 2 * pages * largest_chunk  # the tree's own bound (docs/btree.md)
            assert max(stored[True][2 * third :]) <= 1.1 * max(stored[True][third : 2 * third])
        else:  # the cold leaves pin the head: nothing is truncated, it only grows
            assert stored[False][-1] > 1.8 * stored[False][third]
            assert stored[False][-1] > 20 * live


@pytest.mark.timeout(30)
def test_warm_lookups_cost_at_most_one_tier2_read() -> None:
    storage = InMemoryChunkStorage()
    keys = [key(i) for i in range(20_000)]
    index = BTreeAttributeIndex(storage, page_bytes_max=SMALL_PAGES, cache_pages_max=200)
    for i in range(0, len(keys), 1000):
        index.update(SEG, {k: 1 for k in keys[i : i + 1000]})
    cold = BTreeAttributeIndex(storage, page_bytes_max=SMALL_PAGES, cache_pages_max=200)
    cold.get(SEG, keys)  # warm: every index page read once; leaves (> 200 of them) churn
    rng = random.Random(3)
    before = cold.reads
    lookups = 2000
    for k in rng.sample(keys, lookups):
        assert cold.get(SEG, [k]) == {k: 1}
    assert cold.reads - before <= lookups
    assert cold.reads - before > lookups // 2  # the leaf cache really is smaller than the tree
    fresh = BTreeAttributeIndex(storage, page_bytes_max=SMALL_PAGES)
    fresh.get(SEG, [keys[0]])
    assert fresh.reads >= 3  # footer + root + ... + leaf: a cold lookup walks the path


@pytest.mark.timeout(30)
def test_many_segments_share_one_bounded_page_cache() -> None:
    """Memory is bounded per index, not per tree; leaf traffic never evicts index pages."""
    storage = InMemoryChunkStorage()
    index = BTreeAttributeIndex(storage, page_bytes_max=SMALL_PAGES, cache_pages_max=40)
    segments = [f"s/t/{i}.#epoch.0" for i in range(12)]
    for segment in segments:
        for i in range(0, 3000, 1000):
            index.update(segment, {key(j): j for j in range(i, i + 1000)})
    index_pages, leaves = index.page_cache.sizes()
    assert index_pages <= 40 and leaves <= 40
    index.clear_cache()
    rng = random.Random(5)
    for segment in segments[:2]:  # warm the upper levels of two trees
        index.get(segment, [key(j) for j in range(0, 3000, 7)])
    for _ in range(300):  # leaf traffic on another tree
        index.get(segments[5], [key(rng.randrange(3000))])
    before = index.reads
    for _ in range(200):
        segment = rng.choice(segments[:2])
        j = rng.randrange(3000)
        assert index.get(segment, [key(j)]) == {key(j): j}
    assert index.reads - before <= 200  # at most the leaf: the index pages stayed


@pytest.mark.timeout(30)
def test_a_leftover_chunk_from_a_failed_create_is_replaced() -> None:
    class FlakyStorage(InMemoryChunkStorage):
        fail_next = False

        def create(self, name: str, data: bytes) -> None:
            if self.fail_next:
                self.fail_next = False
                super().create(name, data)  # stored, but the caller is told it failed
                raise RetriableError("timed out")
            super().create(name, data)

    storage = FlakyStorage()
    index = BTreeAttributeIndex(storage, page_bytes_max=SMALL_PAGES)
    index.update(SEG, {key(i): i for i in range(50)})
    storage.fail_next = True
    with pytest.raises(RetriableError):
        index.update(SEG, {key(1): 111})
    assert index.get(SEG, [key(1)]) == {key(1): 1}  # not applied in memory
    index.update(SEG, {key(2): 222})  # same offset: replaces the leftover
    assert index.get(SEG, [key(1), key(2)]) == {key(1): 1, key(2): 222}
    fresh = BTreeAttributeIndex(storage, page_bytes_max=SMALL_PAGES)
    fresh.verify(SEG)
    assert fresh.get(SEG, [key(1), key(2)]) == {key(1): 1, key(2): 222}
    # A crash right after a failed-but-stored create: the next open takes that whole batch.
    storage.fail_next = True
    with pytest.raises(RetriableError):
        index.update(SEG, {key(3): 333})
    assert BTreeAttributeIndex(storage).get(SEG, [key(3)]) == {key(3): 333}


@pytest.mark.timeout(30)
def test_a_torn_last_chunk_opens_the_previous_state_and_is_appended_after() -> None:
    storage = InMemoryChunkStorage()
    index = BTreeAttributeIndex(storage, page_bytes_max=SMALL_PAGES, compaction=False)
    index.update(SEG, {key(i): i for i in range(100)})
    index.update(SEG, {key(5): 55})
    last = chunks(storage)[-1]
    data = storage.read(last, 0, storage.length(last))
    storage.delete(last)
    storage.create(last, data[: len(data) // 2])  # a backend that tore the object
    reopened = BTreeAttributeIndex(storage, page_bytes_max=SMALL_PAGES, compaction=False)
    assert reopened.get(SEG, [key(5)]) == {key(5): 5}
    reopened.update(SEG, {key(6): 66})
    reopened.verify(SEG)
    again = BTreeAttributeIndex(storage)
    assert again.get(SEG, [key(5), key(6)]) == {key(5): 5, key(6): 66}


@pytest.mark.timeout(30)
def test_a_missing_middle_chunk_is_a_data_corruption_error() -> None:
    storage = InMemoryChunkStorage()
    index = BTreeAttributeIndex(storage, page_bytes_max=SMALL_PAGES, compaction=False)
    index.update(SEG, {key(i): i for i in range(200)})
    for i in range(3):
        index.update(SEG, {key(i * 50): -1})
    names = chunks(storage)
    assert len(names) >= 3
    storage.delete(names[0])  # holds live leaves: the tree needs it
    with pytest.raises(DataCorruptionError):
        BTreeAttributeIndex(storage).get(SEG, [key(i) for i in range(200)])


@pytest.mark.timeout(30)
def test_the_open_tree_cache_is_bounded_and_reopens_from_storage() -> None:
    storage = InMemoryChunkStorage()
    index = BTreeAttributeIndex(storage, cached_trees_max=3)
    segments = [f"s/t/{i}.#epoch.0" for i in range(10)]
    for n, segment in enumerate(segments):
        index.update(segment, {key(n): n})
    assert len(index._trees) == 3
    for n, segment in enumerate(segments):
        assert index.get(segment, [key(n)]) == {key(n): n}


@pytest.mark.timeout(30)
def test_a_failed_truncation_leaves_a_durable_update_and_the_next_open_finishes_it() -> None:
    class NoDeletes(InMemoryChunkStorage):
        broken = False

        def delete(self, name: str) -> None:
            if self.broken:
                raise RetriableError("delete failed")
            super().delete(name)

    storage = NoDeletes()
    index = BTreeAttributeIndex(storage, page_bytes_max=SMALL_PAGES)
    index.update(SEG, {key(1): 1})
    storage.broken = True
    with pytest.raises(RetriableError):
        index.update(SEG, {key(1): 2})  # appended, then truncation failed
    assert len(chunks(storage)) == 2
    storage.broken = False
    fresh = BTreeAttributeIndex(storage, page_bytes_max=SMALL_PAGES)
    assert fresh.get(SEG, [key(1)]) == {key(1): 2}
    assert len(chunks(storage)) == 1  # opening truncated the dead chunk


def test_a_first_update_that_only_removes_is_not_damage_once_evicted() -> None:
    """A segment whose first attribute update only removes keys has no tree; evicted from
    the open-tree cache and reopened, it is still empty, not "older than recorded"."""
    index = BTreeAttributeIndex(InMemoryChunkStorage(), cached_trees_max=1)
    key = (1).to_bytes(16, "big")
    assert index.update("a", {key: NULL_VALUE}) is None
    index.update("b", {key: 5})  # evicts a's tree
    assert index.get("a", [key]) == {}
