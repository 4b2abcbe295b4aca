"""Reads and unconditional writes of one table segment sent in rounds by the threads of one
process (client/table_rounds.py), on an in-process cluster.

A gate in front of the cluster's invoker holds ``table_get`` / ``table_update`` calls of
the segment until the test opens it, so a round can be kept in flight while other callers
arrive; it counts the calls that reach the container.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from pravega_ray import constants
from pravega_ray.client.table_rounds import TableRounds, table_rounds
from pravega_ray.contracts.segment_store import NOT_EXISTS, TableUpdate
from pravega_ray.contracts.segment_store_service import SegmentStoreClient
from pravega_ray.errors import InvalidArgumentError, SegmentNotFoundError
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(60)

SEGMENT = "_system/_RGrounds/0.#epoch.0"


class Gate:
    """An invoker over ``cluster``: table calls of SEGMENT wait while ``held[name]`` is
    set (``arrived[name]`` is set when one waits), and are counted."""

    def __init__(self, cluster: InProcessCluster) -> None:
        self._cluster = cluster
        self.calls: Counter[str] = Counter()
        self.keys: list[list[bytes]] = []
        self.held: dict[str, threading.Event] = {}
        self.interrupt: set[int] = set()  # numbers of calls (1: the first) that are interrupted
        self.arrived: dict[str, threading.Event] = {}
        self._pool = ThreadPoolExecutor(8)

    def hold(self, name: str) -> None:
        self.held[name] = threading.Event()
        self.arrived[name] = threading.Event()

    def open(self, name: str) -> None:
        self.held.pop(name).set()

    def invoke(self, method: Callable[..., Any], segment: str, *args: Any) -> Future[Any]:
        name = method.__name__
        if segment != SEGMENT or name not in ("table_get", "table_update"):
            return self._cluster.invoke(method, segment, *args)
        self.calls[name] += 1
        self.keys.append([k if isinstance(k, bytes) else k.key for k in args[0]])
        if len(self.keys) in self.interrupt:
            interrupted: Future[Any] = Future()
            interrupted.set_exception(KeyboardInterrupt())
            return interrupted
        held = self.held.get(name)
        if held is None:
            return self._cluster.invoke(method, segment, *args)
        self.arrived[name].set()

        def later() -> Any:
            held.wait(30)
            return self._cluster.invoke(method, segment, *args).result(30)

        return self._pool.submit(later)


@pytest.fixture
def cluster() -> Iterator[InProcessCluster]:
    c = InProcessCluster(container_count=1)
    c.segments.table_create(SEGMENT).result(10)
    yield c
    c.shutdown()


@pytest.fixture
def gate(cluster: InProcessCluster) -> Gate:
    return Gate(cluster)


def _rounds(gate: Gate) -> TableRounds:
    return TableRounds(SegmentStoreClient(gate), SEGMENT)


def _value(entry: Any) -> bytes | None:
    return None if entry is None else entry.value


def _started(pool: ThreadPoolExecutor, fn: Callable[[], Any], n: int) -> list[Future[Any]]:
    return [pool.submit(fn) for _ in range(n)]


def test_callers_arriving_while_a_read_is_in_flight_share_the_next_round(
    cluster: InProcessCluster, gate: Gate
) -> None:
    cluster.segments.table_update(
        SEGMENT, [TableUpdate(b"a", b"1"), TableUpdate(b"b", b"2")]
    ).result(10)
    rounds = _rounds(gate)
    gate.hold("table_get")
    with ThreadPoolExecutor(16) as pool:
        first = pool.submit(rounds.get, [b"a"], 30)
        assert gate.arrived["table_get"].wait(10)
        waiting = [pool.submit(rounds.get, [b"a", b"b", b"c"][: n % 3 + 1], 30) for n in range(12)]
        time.sleep(0.2)  # all twelve joined the pending round
        assert gate.calls["table_get"] == 1
        gate.open("table_get")
        assert [_value(e) for e in first.result(10)] == [b"1"]
        for n, future in enumerate(waiting):
            assert [_value(e) for e in future.result(10)] == [b"1", b"2", None][: n % 3 + 1]
    assert gate.calls["table_get"] == 2  # the one held, and one for all twelve
    assert sorted(gate.keys[-1]) == [b"a", b"b", b"c"]  # in the order the callers joined


def test_a_read_that_begins_after_a_write_completed_sees_it_though_a_round_was_in_flight(
    cluster: InProcessCluster, gate: Gate
) -> None:
    """Joining the round in flight would answer from before the write: a caller waits for
    a round sent after it called."""
    cluster.segments.table_update(SEGMENT, [TableUpdate(b"a", b"old")]).result(10)
    rounds = _rounds(gate)
    gate.hold("table_get")
    with ThreadPoolExecutor(2) as pool:
        early = pool.submit(rounds.get, [b"a"], 30)
        assert gate.arrived["table_get"].wait(10)
        cluster.segments.table_update(SEGMENT, [TableUpdate(b"a", b"new")]).result(10)
        late = pool.submit(rounds.get, [b"a"], 30)
        time.sleep(0.1)
        gate.open("table_get")
        assert _value(late.result(10)[0]) == b"new"
        assert _value(early.result(10)[0]) in (b"old", b"new")  # either: it overlapped


def test_puts_arriving_together_are_stored_in_one_batch_and_the_later_callers_value_wins(
    cluster: InProcessCluster, gate: Gate
) -> None:
    rounds = _rounds(gate)
    gate.hold("table_update")
    with ThreadPoolExecutor(16) as pool:
        first = pool.submit(rounds.put, [TableUpdate(b"x", b"0")], 30)
        assert gate.arrived["table_update"].wait(10)
        puts = []
        for n in range(10):
            puts.append(pool.submit(rounds.put, [TableUpdate(f"k{n}".encode(), b"v")], 30))
        time.sleep(0.2)
        last = pool.submit(rounds.put, [TableUpdate(b"k3", None)], 30)  # removes k3 after its put
        time.sleep(0.2)
        gate.open("table_update")
        for future in [first, *puts, last]:
            assert future.result(10) is None
    assert gate.calls["table_update"] == 2
    entries = cluster.segments.table_get(SEGMENT, [f"k{n}".encode() for n in range(10)]).result(10)
    assert [_value(e) for e in entries] == [None if n == 3 else b"v" for n in range(10)]


def test_a_rounds_error_reaches_every_caller_of_the_round(
    cluster: InProcessCluster, gate: Gate
) -> None:
    rounds = _rounds(gate)
    gate.hold("table_get")
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(rounds.get, [b"a"], 30)
        assert gate.arrived["table_get"].wait(10)
        cluster.segments.delete_segment(SEGMENT).result(10)
        waiting = [pool.submit(rounds.get, [b"a"], 30) for _ in range(5)]
        time.sleep(0.2)
        gate.open("table_get")
        for future in [first, *waiting]:
            with pytest.raises(SegmentNotFoundError):
                future.result(10)
    assert gate.calls["table_get"] == 2


def test_a_round_without_an_answer_in_time_fails_every_caller_with_a_timeout(
    gate: Gate,
) -> None:
    rounds = _rounds(gate)
    gate.hold("table_update")
    with ThreadPoolExecutor(4) as pool:
        futures = [
            pool.submit(rounds.put, [TableUpdate(f"t{n}".encode(), b"v")], 0.5) for n in range(4)
        ]
        for future in futures:
            with pytest.raises(TimeoutError):
                future.result(10)
        gate.open("table_update")
    # Nothing is left in flight: the next callers are served.
    rounds.put([TableUpdate(b"after", b"v")], 10)
    assert _value(rounds.get([b"after"], 10)[0]) == b"v"


def test_an_interrupted_sender_alone_gets_the_interrupt_the_others_an_unknown_outcome(
    gate: Gate,
) -> None:
    """A KeyboardInterrupt in the thread that sends a round is that thread's: the other
    callers of the round get TimeoutError (outcome unknown), not the interrupt."""
    rounds = _rounds(gate)
    gate.hold("table_get")
    gate.interrupt.add(2)  # the second round
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(rounds.get, [b"a"], 30)
        assert gate.arrived["table_get"].wait(10)
        second = [pool.submit(rounds.get, [b"a"], 30) for _ in range(4)]
        time.sleep(0.2)
        gate.open("table_get")
        assert first.result(10) == [None]
        errors = [type(future.exception(10)) for future in second]
    assert sorted(e.__name__ for e in errors) == ["KeyboardInterrupt"] + ["TimeoutError"] * 3
    assert rounds.get([b"a"], 10) == [None]  # and the rounds go on


def test_conditional_updates_and_a_key_twice_in_one_call_are_refused_unsent(gate: Gate) -> None:
    rounds = _rounds(gate)
    for bad in (
        [TableUpdate(b"a", b"v", NOT_EXISTS)],
        [TableUpdate(b"a", b"v", 3)],
        [TableUpdate(b"a", b"v"), TableUpdate(b"a", None)],
        [TableUpdate(b"", b"v")],
        [TableUpdate(b"a", "text")],  # type: ignore[arg-type]
        [TableUpdate(b"a", b"x" * (constants.TABLE_VALUE_BYTES_MAX + 1))],
        [(b"a", b"v")],  # type: ignore[list-item]
    ):
        with pytest.raises(InvalidArgumentError):
            rounds.put(bad, 10)
    assert gate.calls["table_update"] == 0


def test_a_bad_key_fails_its_own_call_never_the_rounds_other_callers(
    cluster: InProcessCluster, gate: Gate
) -> None:
    cluster.segments.table_update(SEGMENT, [TableUpdate(b"a", b"1")]).result(10)
    rounds = _rounds(gate)
    gate.hold("table_get")
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(rounds.get, [b"a"], 30)
        assert gate.arrived["table_get"].wait(10)
        good = [pool.submit(rounds.get, [b"a"], 30) for _ in range(3)]
        time.sleep(0.1)
        for bad in ([b""], ["a"], [b"k" * (constants.TABLE_KEY_BYTES_MAX + 1)], [None]):
            with pytest.raises(InvalidArgumentError):
                rounds.get(bad, 10)  # type: ignore[arg-type]
        gate.open("table_get")
        for future in [first, *good]:
            assert [_value(e) for e in future.result(10)] == [b"1"]
    assert gate.calls["table_get"] == 2


def test_a_caller_whose_keys_do_not_fit_in_the_pending_round_calls_alone(
    cluster: InProcessCluster, gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(constants, "TABLE_GET_KEYS_MAX", 4)
    rounds = _rounds(gate)
    gate.hold("table_get")
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(rounds.get, [b"a"], 30)
        assert gate.arrived["table_get"].wait(10)
        pending = pool.submit(rounds.get, [b"a", b"b", b"c"], 30)
        time.sleep(0.1)
        alone = pool.submit(rounds.get, [b"d", b"e"], 30)  # 3 + 2 keys > 4
        time.sleep(0.1)
        gate.open("table_get")
        for future in (first, pending, alone):
            assert all(e is None for e in future.result(10))
    assert sorted(map(sorted, gate.keys)) == sorted([[b"a"], [b"a", b"b", b"c"], [b"d", b"e"]])


def test_a_write_round_counts_its_size_as_the_container_does_headers_included(
    gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counting keys and values only, three puts of 31 bytes fit in 100 bytes; as entries
    (a 14-byte header each, ``table_update_bytes``) the third does not, and goes alone."""
    monkeypatch.setattr(constants, "TABLE_BATCH_BYTES_MAX", 100)
    rounds = _rounds(gate)
    gate.hold("table_update")
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(rounds.put, [TableUpdate(b"f", b"v")], 30)
        assert gate.arrived["table_update"].wait(10)
        pending = []
        for key in (b"a", b"b"):
            pending.append(pool.submit(rounds.put, [TableUpdate(key, b"x" * 30)], 30))
            time.sleep(0.1)
        alone = pool.submit(rounds.put, [TableUpdate(b"c", b"x" * 30)], 30)
        time.sleep(0.1)
        gate.open("table_update")
        for future in (first, *pending, alone):
            assert future.result(10) is None
    assert sorted(map(sorted, gate.keys)) == sorted([[b"f"], [b"a", b"b"], [b"c"]])


def test_table_update_bytes_is_the_size_of_the_entry_the_container_appends() -> None:
    from pravega_ray.contracts.segment_store import TABLE_ENTRY_HEADER_BYTES, table_update_bytes
    from pravega_ray.segmentstore.table_segment import HEADER_BYTES, encode_entry

    assert TABLE_ENTRY_HEADER_BYTES == HEADER_BYTES
    for update in (TableUpdate(b"k", b"value"), TableUpdate(b"key" * 9, None)):
        assert table_update_bytes(update) == len(encode_entry(update.key, update.value))


def test_callers_through_one_connection_share_the_rounds_of_a_segment(
    cluster: InProcessCluster,
) -> None:
    one, other = cluster.segments, cluster.segments
    assert table_rounds(one, SEGMENT) is table_rounds(one, SEGMENT)
    assert table_rounds(one, SEGMENT) is not table_rounds(one, SEGMENT + "x")
    assert table_rounds(one, SEGMENT) is not table_rounds(other, SEGMENT)


def test_many_threads_reading_and_writing_at_once_each_get_their_own_answer(
    cluster: InProcessCluster, gate: Gate
) -> None:
    """Forty threads, each storing its own key then reading it back through the rounds:
    every read sees its thread's write (fresh), in fewer calls than callers."""
    rounds = _rounds(gate)

    def one(n: int) -> bytes | None:
        key = f"own{n}".encode()
        for round_no in range(5):
            rounds.put([TableUpdate(key, f"{n}:{round_no}".encode())], 30)
            got = _value(rounds.get([key, b"shared"], 30)[0])
            assert got == f"{n}:{round_no}".encode()
        return got

    with ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(one, range(40)))
    assert answers == [f"{n}:4".encode() for n in range(40)]
    assert gate.calls["table_get"] + gate.calls["table_update"] < 400
