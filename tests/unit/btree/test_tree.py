"""The append-only B+tree against a dict model: splits, merges, restarts, torn tails, compaction."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pravega_ray.btree import KEY_BYTES, PAGE_BYTES_MAX, PAGE_BYTES_MIN, BTree
from pravega_ray.errors import DataCorruptionError, InvalidArgumentError

SMALL_PAGE_BYTES = 512  # a leaf holds 20 entries and an index page 13: many splits and merges
KEY_SPACE = 400


class MemoryStore:
    """An in-memory bytearray behind the tree's three functions."""

    def __init__(self, data: bytes = b"") -> None:
        self.data = bytearray(data)
        self.appends = 0

    def read(self, offset: int, length: int) -> bytes:
        assert offset >= 0 and offset + length <= len(self.data), (offset, length)
        return bytes(self.data[offset : offset + length])

    def append(self, data: bytes) -> int:
        offset = len(self.data)
        self.data.extend(data)
        self.appends += 1
        return offset

    def length(self) -> int:
        return len(self.data)

    def open(self, **options: object) -> BTree:
        return BTree.open(self.read, self.append, self.length, **options)  # type: ignore[arg-type]


def key(i: int) -> bytes:
    return i.to_bytes(KEY_BYTES, "big")


def apply(model: dict[bytes, int], batch: dict[bytes, int | None]) -> None:
    for k, v in batch.items():
        if v is None:
            model.pop(k, None)
        else:
            model[k] = v


def check(tree: BTree, model: dict[bytes, int]) -> None:
    """The tree equals the model and its structure holds (verify walks every live page)."""
    stats = tree.verify()
    assert stats.entries == len(model)
    assert list(tree.iterate()) == sorted(model.items())
    assert stats.live_bytes == tree.live_bytes()
    if model:
        assert stats.lowest_offset == tree.lowest_live_offset


values = st.integers(min_value=-(2**63), max_value=2**63 - 1)
batches = st.dictionaries(
    st.integers(0, KEY_SPACE - 1).map(key),
    st.one_of(st.none(), values, st.none()),
    min_size=0,
    max_size=60,
)


@pytest.mark.timeout(120)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch_list=st.lists(batches, min_size=1, max_size=25),
    compaction=st.booleans(),
    ratio=st.sampled_from([0.0, 0.5, 3.0]),
    restarts=st.lists(st.booleans(), min_size=25, max_size=25),
)
def test_update_matches_a_dict_model(
    batch_list: list[dict[bytes, int | None]],
    compaction: bool,
    ratio: float,
    restarts: list[bool],
) -> None:
    store = MemoryStore()
    options = {
        "page_bytes_max": SMALL_PAGE_BYTES,
        "compaction": compaction,
        "compaction_ratio": ratio,
    }
    tree = store.open(**options)
    model: dict[bytes, int] = {}
    for batch, restart in zip(batch_list, restarts, strict=False):
        tree.update(batch)
        apply(model, batch)
        if restart:
            tree = store.open(**options)
        check(tree, model)
        probes = [*batch, key(KEY_SPACE + 1)]
        for k in probes:
            assert tree.get(k) == model.get(k)
        assert tree.get_many(probes) == {k: model[k] for k in probes if k in model}


@pytest.mark.timeout(120)
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), compaction=st.booleans())
def test_update_grows_and_shrinks_to_empty(seed: int, compaction: bool) -> None:
    """Fill a tree several levels deep, then remove everything in random batches: merges."""
    rng = random.Random(seed)
    store = MemoryStore()
    tree = store.open(page_bytes_max=SMALL_PAGE_BYTES, compaction=compaction)
    model: dict[bytes, int] = {}
    keys = [key(i) for i in rng.sample(range(100_000), 600)]
    for start in range(0, len(keys), 75):
        batch: dict[bytes, int | None] = {k: rng.randrange(1000) for k in keys[start : start + 75]}
        tree.update(batch)
        apply(model, batch)
        check(tree, model)
    assert tree.verify().depth >= 3
    rng.shuffle(keys)
    while keys:
        count = rng.randint(1, 80)
        batch = dict.fromkeys(keys[:count])
        del keys[:count]
        tree.update(batch)
        apply(model, batch)
        check(tree, model)
    assert tree.verify().pages == 0
    assert tree.live_bytes() == 0
    assert tree.lowest_live_offset == tree.footer_offset
    reopened = store.open(page_bytes_max=SMALL_PAGE_BYTES)
    assert list(reopened.iterate()) == []
    reopened.update({key(7): 7})
    assert list(reopened.iterate()) == [(key(7), 7)]


@pytest.mark.timeout(60)
@settings(max_examples=100, deadline=None)
@given(
    content=st.dictionaries(st.integers(0, 300).map(key), values, max_size=200),
    low=st.one_of(st.none(), st.integers(0, 310).map(key)),
    high=st.one_of(st.none(), st.integers(0, 310).map(key)),
)
def test_iterate_returns_the_range_in_key_order(
    content: dict[bytes, int], low: bytes | None, high: bytes | None
) -> None:
    store = MemoryStore()
    tree = store.open(page_bytes_max=SMALL_PAGE_BYTES)
    items = list(content.items())
    for start in range(0, len(items), 30):  # several batches so leftmost keys go stale
        tree.update(dict(items[start : start + 30]))
    expected = [
        (k, v)
        for k, v in sorted(content.items())
        if (low is None or k >= low) and (high is None or k < high)
    ]
    assert list(tree.iterate(low, high)) == expected


@pytest.mark.timeout(60)
def test_iterate_finds_keys_below_the_first_separator() -> None:
    """Keys inserted below every existing key land in the leftmost page and stay reachable."""
    store = MemoryStore()
    tree = store.open(page_bytes_max=SMALL_PAGE_BYTES)
    tree.update({key(i): i for i in range(1000, 1200)})
    tree.update({key(i): i for i in range(0, 50)})
    model = {key(i): i for i in [*range(0, 50), *range(1000, 1200)]}
    check(tree, model)
    assert list(tree.iterate(key(10), key(1005))) == [
        (key(i), i) for i in [*range(10, 50), *range(1000, 1005)]
    ]
    assert tree.get(key(0)) == 0


@pytest.mark.timeout(60)
def test_open_empty_store_is_an_empty_tree() -> None:
    store = MemoryStore()
    tree = store.open()
    assert tree.get(key(1)) is None
    assert tree.get_many([key(1), key(2)]) == {}
    assert list(tree.iterate()) == []
    assert tree.lowest_live_offset == 0
    assert tree.live_bytes() == 0
    assert tree.footer_offset is None
    tree.update({})
    tree.update({key(1): None})  # removing from an empty tree writes nothing
    assert store.length() == 0
    assert tree.verify().pages == 0


@pytest.mark.timeout(60)
def test_update_that_changes_nothing_appends_nothing_without_compaction() -> None:
    store = MemoryStore()
    tree = store.open(page_bytes_max=SMALL_PAGE_BYTES, compaction=False)
    tree.update({key(i): i for i in range(100)})
    length = store.length()
    tree.update({key(5): 5, key(500): None})  # same value, absent key
    assert store.length() == length


@pytest.mark.timeout(60)
def test_pages_of_maximum_size() -> None:
    """A full leaf is 16 + 1364 * 24 bytes; one more entry splits it; pages never exceed max."""
    store = MemoryStore()
    tree = store.open()
    capacity = (PAGE_BYTES_MAX - 16) // 24
    tree.update({key(i): i for i in range(capacity)})
    stats = tree.verify()
    assert (stats.pages, stats.depth, stats.page_bytes_largest) == (1, 1, 16 + capacity * 24)
    tree.update({key(capacity): capacity})
    stats = tree.verify()
    assert (stats.leaves, stats.depth) == (2, 2)
    # A single batch far over one page splits into many full-ish pages at once.
    tree.update({key(i): -i for i in range(capacity, 20 * capacity)})
    stats = tree.verify()
    assert stats.entries == 20 * capacity
    assert stats.page_bytes_largest <= PAGE_BYTES_MAX
    assert stats.leaves >= 20
    reopened = store.open()
    assert reopened.get(key(19 * capacity)) == -19 * capacity
    assert reopened.get(key(3)) == 3


@pytest.mark.timeout(120)
@settings(max_examples=100, deadline=None)
@given(
    batch_list=st.lists(batches, min_size=1, max_size=12),
    cut=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
    compaction=st.booleans(),
)
def test_open_ignores_a_torn_tail(
    batch_list: list[dict[bytes, int | None]], cut: float, compaction: bool
) -> None:
    """Truncating the store anywhere inside the last batch's append reopens the previous state."""
    store = MemoryStore()
    options = {"page_bytes_max": SMALL_PAGE_BYTES, "compaction": compaction}
    tree = store.open(**options)
    model: dict[bytes, int] = {}
    for batch in batch_list[:-1]:
        tree.update(batch)
        apply(model, batch)
    before = store.length()
    tree.update(batch_list[-1])
    after = store.length()
    if after == before:
        return  # the last batch appended nothing
    torn = MemoryStore(bytes(store.data[: before + int(cut * (after - before))]))
    reopened = torn.open(**options)
    check(reopened, model)
    # The tree keeps working after the garbage, and the garbage stays unreferenced.
    reopened.update(batch_list[-1])
    apply(model, batch_list[-1])
    check(torn.open(**options), model)


@pytest.mark.timeout(60)
def test_append_failure_leaves_the_tree_unchanged() -> None:
    store = MemoryStore()
    tree = store.open(page_bytes_max=SMALL_PAGE_BYTES)
    tree.update({key(i): i for i in range(100)})

    def failing_append(data: bytes) -> int:
        store.data.extend(data[: len(data) // 2])
        raise OSError("disk gone")

    broken = BTree.open(store.read, failing_append, store.length, page_bytes_max=SMALL_PAGE_BYTES)
    with pytest.raises(OSError):
        broken.update({key(i): -i for i in range(50)})
    assert broken.get(key(3)) == 3
    check(broken, {key(i): i for i in range(100)})
    check(store.open(page_bytes_max=SMALL_PAGE_BYTES), {key(i): i for i in range(100)})


@pytest.mark.timeout(60)
def test_corrupted_page_raises_data_corruption() -> None:
    store = MemoryStore()
    tree = store.open(page_bytes_max=SMALL_PAGE_BYTES, compaction=False)
    tree.update({key(i): i for i in range(100)})
    store.data[20] ^= 0xFF  # inside the body of the first page written (a leaf)
    fresh = store.open(page_bytes_max=SMALL_PAGE_BYTES)
    with pytest.raises(DataCorruptionError):
        list(fresh.iterate())
    with pytest.raises(DataCorruptionError):
        fresh.verify()


@pytest.mark.timeout(60)
def test_corrupted_footer_opens_the_previous_footer() -> None:
    store = MemoryStore()
    tree = store.open(page_bytes_max=SMALL_PAGE_BYTES)
    tree.update({key(1): 1})
    tree.update({key(2): 2})
    store.data[-1] ^= 0xFF
    assert list(store.open(page_bytes_max=SMALL_PAGE_BYTES).iterate()) == [(key(1), 1)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "batch",
    [
        {b"short": 1},
        {bytes(17): 1},
        {"x" * 16: 1},
        {key(1): True},
        {key(1): 2**63},
        {key(1): -(2**63) - 1},
        {key(1): 1.5},
        {key(1): 1, key(2): "2"},
    ],
)
def test_update_rejects_bad_keys_and_values(batch: dict) -> None:  # type: ignore[type-arg]
    store = MemoryStore()
    tree = store.open()
    tree.update({key(9): 9})
    length = store.length()
    with pytest.raises(InvalidArgumentError):
        tree.update(batch)
    assert store.length() == length
    assert list(tree.iterate()) == [(key(9), 9)]


@pytest.mark.timeout(60)
def test_bad_arguments_raise_invalid_argument() -> None:
    store = MemoryStore()
    with pytest.raises(InvalidArgumentError):
        store.open(page_bytes_max=PAGE_BYTES_MIN - 1)
    with pytest.raises(InvalidArgumentError):
        store.open(page_bytes_max=PAGE_BYTES_MAX + 1)
    for ratio in (-0.5, float("nan")):
        with pytest.raises(InvalidArgumentError):
            store.open(compaction_ratio=ratio)
    tree = store.open()
    with pytest.raises(InvalidArgumentError):
        tree.get(b"x")
    with pytest.raises(InvalidArgumentError):
        tree.iterate(from_key=b"x")
    with pytest.raises(InvalidArgumentError):
        tree.update([(key(1), 1)])  # type: ignore[arg-type]
    extremes = {key(1): -(2**63), key(2): 2**63 - 1}
    tree.update(extremes)
    assert tree.get_many(extremes) == extremes


def steady_updates(
    compaction: bool, batches_count: int, compaction_ratio: float = 0.0
) -> tuple[MemoryStore, BTree, list[int], int]:
    """Load 2000 keys, then update 10 random hot keys per batch; return the lowest offsets seen.

    Only keys 1000..1199 are updated, so without compaction the cold pages loaded first
    stay live forever and pin the start of the store.
    """
    rng = random.Random(42)
    store = MemoryStore()
    tree = store.open(
        page_bytes_max=SMALL_PAGE_BYTES, compaction=compaction, compaction_ratio=compaction_ratio
    )
    model: dict[bytes, int] = {}
    for start in range(0, 2000, 200):
        batch: dict[bytes, int | None] = {key(i): i for i in range(start, start + 200)}
        tree.update(batch)
        apply(model, batch)
    lowest = []
    appended_max = 0
    for n in range(batches_count):
        batch = {key(rng.randrange(1000, 1200)): n for _ in range(10)}
        before = store.length()
        tree.update(batch)
        appended_max = max(appended_max, store.length() - before)
        apply(model, batch)
        stats = tree.verify()  # every live page at or above lowest_live_offset
        assert stats.lowest_offset == tree.lowest_live_offset
        lowest.append(tree.lowest_live_offset)
    check(tree, model)
    return store, tree, lowest, appended_max


@pytest.mark.timeout(120)
def test_compaction_moves_the_lowest_live_offset_forward() -> None:
    store, tree, lowest, appended_max = steady_updates(compaction=True, batches_count=600)
    assert lowest == sorted(lowest)  # never moves back
    assert lowest[-1] > lowest[len(lowest) // 2] > lowest[0] > 0
    # Each batch moves the lowest live page, so within about one batch per live page every
    # page written before is moved or dead: what cannot be truncated stays bounded by that.
    retained = store.length() - tree.lowest_live_offset
    pages = tree.verify().pages
    assert retained <= 2 * pages * appended_max, (retained, pages, appended_max)
    assert tree.live_bytes() <= 2 * 2000 * 24  # pages stay reasonably full: 24 bytes per entry
    # The tree needs nothing below lowest_live_offset: zero it and read everything back.
    truncated = MemoryStore(bytes(store.length()))
    truncated.data[tree.lowest_live_offset :] = store.data[tree.lowest_live_offset :]
    reopened = truncated.open(page_bytes_max=SMALL_PAGE_BYTES)
    assert list(reopened.iterate()) == list(tree.iterate())
    reopened.verify()

    plain_store, plain_tree, plain_lowest, _ = steady_updates(compaction=False, batches_count=600)
    plain_retained = plain_store.length() - plain_tree.lowest_live_offset
    assert plain_lowest[-1] == plain_lowest[0] == 0  # cold pages pin the start of the store
    assert retained * 4 < plain_retained, (retained, plain_retained)


@pytest.mark.timeout(120)
def test_a_higher_compaction_ratio_keeps_less_behind_the_tail() -> None:
    """Moving more pages per batch (checked after every batch by steady_updates) keeps less."""
    retained = {}
    for ratio in (0.0, 1.0):
        store, tree, lowest, _ = steady_updates(True, 300, compaction_ratio=ratio)
        assert lowest == sorted(lowest)
        retained[ratio] = store.length() - tree.lowest_live_offset
    assert retained[1.0] * 1.5 < retained[0.0], retained


@pytest.mark.timeout(60)
def test_compaction_skips_pages_the_batch_rewrites_and_moves_untouched_ones() -> None:
    """Sorted inserts never touch the first leaf again: only compaction moves it."""
    for compaction in (False, True):
        store = MemoryStore()
        tree = store.open(page_bytes_max=SMALL_PAGE_BYTES, compaction=compaction)
        tree.update({key(i): i for i in range(40)})  # two leaves under a root
        first_lowest = tree.lowest_live_offset
        for start in range(40, 400, 5):
            tree.update({key(i): i for i in range(start, start + 5)})
            tree.verify()
        if compaction:
            assert tree.lowest_live_offset > store.length() // 2
        else:
            assert tree.lowest_live_offset == first_lowest == 0


@pytest.mark.timeout(60)
def test_small_cache_still_reads_correctly() -> None:
    store = MemoryStore()
    tree = store.open(page_bytes_max=SMALL_PAGE_BYTES, cache_pages_max=0)
    model = {key(i): i * 3 for i in range(500)}
    tree.update(dict(model))
    tree.update({key(i): None for i in range(0, 500, 3)})
    apply(model, {key(i): None for i in range(0, 500, 3)})
    check(tree, model)
    tree.clear_cache()
    assert tree.get(key(4)) == 12


@pytest.mark.timeout(60)
def test_open_scans_back_past_a_large_torn_tail() -> None:
    """A torn batch far larger than the scan window (64 KiB) still reopens the previous state."""
    store = MemoryStore()
    tree = store.open()
    tree.update({key(i): i for i in range(10)})
    before = store.length()
    tree.update({key(i): -i for i in range(10, 20_000)})  # about 500 KiB in one append
    torn = MemoryStore(bytes(store.data[: store.length() - 100]))
    assert torn.length() - before > 4 * 64 * 1024
    check(torn.open(), {key(i): i for i in range(10)})
    only_garbage = MemoryStore(bytes(store.data[before : store.length() - 100]))
    assert list(only_garbage.open().iterate()) == []  # no footer at all: an empty tree


@pytest.mark.timeout(60)
@pytest.mark.parametrize("damage", ["magic", "short read", "count"])
def test_damaged_page_raises_data_corruption(damage: str) -> None:
    store = MemoryStore()
    tree = store.open(page_bytes_max=SMALL_PAGE_BYTES, compaction=False)
    tree.update({key(i): i for i in range(5)})  # one leaf at offset 0, then the footer
    read = store.read
    if damage == "magic":
        store.data[0:4] = b"XXXX"
    elif damage == "count":
        store.data[8:12] = (6).to_bytes(4, "big")
    else:

        def read(offset: int, length: int) -> bytes:  # the leaf comes back one byte short
            data = store.read(offset, length)
            return data[:-1] if offset == 0 else data

    fresh = BTree.open(read, store.append, store.length, page_bytes_max=SMALL_PAGE_BYTES)
    with pytest.raises(DataCorruptionError):
        fresh.get(key(1))


@pytest.mark.timeout(60)
def test_verify_catches_a_stale_lowest_offset() -> None:
    """verify() is not vacuous: a root whose entry misstates its subtree's lowest offset fails."""
    from pravega_ray.btree.tree import _decode_page, _encode_footer, _encode_page, _Footer
    from pravega_ray.invariant import InvariantViolation

    store = MemoryStore()
    tree = store.open(page_bytes_max=SMALL_PAGE_BYTES, compaction=False)
    tree.update({key(i): i for i in range(100)})
    footer = tree._footer
    assert footer is not None
    root = _decode_page(store.read(footer.root_offset, footer.root_length), 0, footer.root_length)
    root.children[1].lowest_offset += 1
    offset = store.append(_encode_page(root))
    store.append(
        _encode_footer(
            _Footer(store.length(), offset, footer.root_length, footer.lowest_live_offset, 0)
        )
    )
    broken = store.open(page_bytes_max=SMALL_PAGE_BYTES)
    with pytest.raises(InvariantViolation, match="stale lowest offset"):
        broken.verify()
