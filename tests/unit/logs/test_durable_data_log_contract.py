"""The DurableDataLog contract, run against every backend; plus filesystem and S3 specifics.

The S3 runs (marker ``s3``) use a real SeaweedFS server (tests/s3_server.py) and a fresh bucket
per test; faults are injected through botocore's own event hooks on a real client.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError

from pravega_ray.errors import (
    DataCorruptionError,
    FencedError,
    IllegalStateError,
    InvalidArgumentError,
    RetriableError,
)
from pravega_ray.logs.filesystem import FileSystemDurableLog
from pravega_ray.logs.memory import InMemoryDurableLog, InMemoryLogStore
from pravega_ray.logs.s3 import _CLAIM, _FENCE, READ_AHEAD_OBJECTS, S3DurableLog, _encode

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=["memory", "filesystem", pytest.param("s3", marks=pytest.mark.s3)])
def make_log(request, tmp_path: Path):
    """A factory of log instances sharing one backing store (a 'restart' is a new instance)."""
    if request.param == "memory":
        store = InMemoryLogStore()
        return lambda: InMemoryDurableLog(store)
    if request.param == "filesystem":
        return lambda: FileSystemDurableLog(tmp_path / "log")
    client, bucket = request.getfixturevalue("s3_bucket")
    return lambda: S3DurableLog(bucket, "log/0", client=client)


def test_append_returns_consecutive_sequence_numbers_and_replays_in_order(make_log) -> None:
    log = make_log()
    log.initialize()
    assert list(log.read_all()) == []
    assert [log.append(f"r{i}".encode()) for i in range(5)] == [0, 1, 2, 3, 4]
    log.close()
    again = make_log()
    again.initialize()
    assert list(again.read_all()) == [(i, f"r{i}".encode()) for i in range(5)]
    assert again.append(b"r5") == 5
    assert [p for _, p in again.read_all()][-1] == b"r5"


def test_an_empty_log_that_must_exist_is_corruption_and_nothing_is_created(make_log) -> None:
    # The container knows from Tier-2's fences that an owner had the log: empty means lost.
    for _ in range(2):
        with pytest.raises(DataCorruptionError, match="must exist"):
            make_log().initialize(must_exist=True)
    log = make_log()
    log.initialize()  # nothing was created: this is still a new log, epoch 1
    assert log.epoch == 1
    log.append(b"r0")
    log.close()
    again = make_log()
    again.initialize(must_exist=True)
    assert [p for _, p in again.read_all()] == [b"r0"]


def test_append_before_initialize_is_an_illegal_state(make_log) -> None:
    with pytest.raises(IllegalStateError):
        make_log().append(b"x")


def test_new_owner_fences_the_old_one_and_keeps_its_acknowledged_records(make_log) -> None:
    old = make_log()
    old.initialize()
    old.append(b"acked-by-old")
    new = make_log()
    new.initialize()
    assert new.epoch > old.epoch
    with pytest.raises(FencedError):
        old.append(b"zombie write")
    assert [p for _, p in new.read_all()] == [b"acked-by-old"]
    new.append(b"by-new")
    assert [p for _, p in new.read_all()] == [b"acked-by-old", b"by-new"]


def test_a_fenced_owner_stays_fenced_after_the_new_owner_truncated_past_it(make_log) -> None:
    """The chaos run's loss: the new owner truncated past the slots of the takeover, and the
    old owner's next append (its first attempt had timed out) landed in a freed slot below the
    truncation point, was acknowledged, and was never replayed."""
    old = make_log()
    old.initialize()
    old.append(b"acked-by-old")
    new = make_log()
    new.initialize()
    assert [p for _, p in new.read_all()] == [b"acked-by-old"]
    for i in range(5):
        new.append(f"by-new-{i}".encode())
    new.truncate(5)  # past the old owner's record and the takeover
    for _ in range(3):  # a zombie keeps trying
        with pytest.raises(FencedError):
            old.append(b"zombie write")
    assert [p for _, p in new.read_all()] == [b"by-new-4"]
    again = make_log()
    again.initialize()
    assert [(s, p) for s, p in again.read_all()] == [(5, b"by-new-4")]


def test_filesystem_log_ignores_a_torn_tail(tmp_path: Path) -> None:
    log = FileSystemDurableLog(tmp_path)
    log.initialize()
    log.append(b"complete")
    log.append(b"also complete")
    log.close()
    data_file = sorted(tmp_path.glob("log-*.dat"))[-1]
    raw = data_file.read_bytes()
    data_file.write_bytes(raw[:-3])  # a crash mid-write of the last record
    recovered = FileSystemDurableLog(tmp_path)
    recovered.initialize()
    assert [p for _, p in recovered.read_all()] == [b"complete"]
    assert recovered.append(b"next") == 1
    assert [p for _, p in recovered.read_all()] == [b"complete", b"next"]


def test_truncate_drops_records_below_the_point_durably(make_log) -> None:
    log = make_log()
    log.initialize()
    for i in range(10):
        log.append(f"r{i}".encode())
    log.truncate(6)
    assert [s for s, _ in log.read_all()] == [6, 7, 8, 9]
    log.truncate(3)  # going back is a no-op
    assert [s for s, _ in log.read_all()] == [6, 7, 8, 9]
    assert log.append(b"r10") == 10
    log.close()
    again = make_log()
    again.initialize()
    assert [s for s, _ in again.read_all()] == [6, 7, 8, 9, 10]
    assert again.append(b"r11") == 11
    with pytest.raises(IllegalStateError):
        again.truncate(100)


def test_filesystem_log_rotates_files_and_truncation_deletes_whole_ones(tmp_path: Path) -> None:
    log = FileSystemDurableLog(tmp_path, file_bytes_max=100)
    log.initialize()
    for i in range(20):
        log.append(bytes(60) + str(i).encode())
    files_before = len(list(tmp_path.glob("log-*.dat")))
    assert files_before >= 10
    size_before = log.size_bytes()
    log.truncate(15)
    assert len(list(tmp_path.glob("log-*.dat"))) < files_before
    assert log.size_bytes() < size_before
    assert [s for s, _ in log.read_all()] == list(range(15, 20))


# --- S3 specifics -------------------------------------------------------------------------


def _keys(client, bucket: str) -> list[str]:
    return [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", ())]


def _cut_the_wire(**_kwargs) -> None:
    """A botocore before-send hook: the request never reaches the server (retried, then raised)."""
    raise ConnectionClosedError(endpoint_url="s3://test")


@pytest.mark.s3
def test_s3_zombie_appending_during_takeover_is_fenced_and_loses_nothing(s3_bucket) -> None:
    client, bucket = s3_bucket
    old = S3DurableLog(bucket, "log/0", client=client)
    old.initialize()
    acked_by_old: list[bytes] = []
    outcome: list[BaseException] = []

    def zombie() -> None:
        try:
            for i in range(10_000):  # bounded; fenced long before
                payload = f"old-{i}".encode()
                assert old.append(payload) == len(acked_by_old)
                acked_by_old.append(payload)
        except BaseException as e:
            outcome.append(e)

    thread = threading.Thread(target=zombie)
    thread.start()
    deadline = time.monotonic() + 10
    while len(acked_by_old) < 5 and time.monotonic() < deadline:
        time.sleep(0.005)
    new = S3DurableLog(bucket, "log/0", client=client)
    new.initialize()  # races the zombie's appends
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], FencedError), outcome
    with pytest.raises(FencedError):
        old.append(b"still a zombie")
    acked_by_new = [b"new-0", b"new-1"]
    numbers = [new.append(p) for p in acked_by_new]
    assert numbers == [len(acked_by_old), len(acked_by_old) + 1]
    replayed = list(new.read_all())
    assert replayed == list(enumerate(acked_by_old + acked_by_new))
    assert new.epoch == old.epoch + 1


@pytest.mark.s3
def test_s3_each_initialize_fences_every_earlier_owner(s3_bucket) -> None:
    client, bucket = s3_bucket
    logs = [S3DurableLog(bucket, "log/0", client=client) for _ in range(3)]
    logs[0].initialize()
    assert logs[0].append(b"a") == 0
    logs[1].initialize()
    logs[2].initialize()
    assert [log.epoch for log in logs] == [1, 2, 3]
    for zombie in logs[:2]:
        with pytest.raises(FencedError):
            zombie.append(b"zombie")
    assert logs[2].append(b"c") == 1
    assert list(logs[2].read_all()) == [(0, b"a"), (1, b"c")]
    # Objects: fence, a, fence, fence, c. Keys are 20-digit slots under the prefix.
    assert _keys(client, bucket) == [f"log/0/{slot:020d}" for slot in range(5)]


@pytest.mark.s3
def test_s3_rival_initializers_beside_a_zombie_leave_exactly_one_owner(s3_bucket) -> None:
    client, bucket = s3_bucket
    old = S3DurableLog(bucket, "log/0", client=client)
    old.initialize()
    acked_by_old: list[bytes] = []

    def zombie() -> None:
        with pytest.raises(FencedError):
            for i in range(10_000):
                old.append(f"old-{i}".encode())
                acked_by_old.append(f"old-{i}".encode())

    rivals = [S3DurableLog(bucket, "log/0", client=client) for _ in range(3)]
    outcomes: list[BaseException | None] = [None] * len(rivals)

    def take_over(i: int) -> None:
        try:
            rivals[i].initialize()
        except FencedError as e:  # a newer rival was seen: a correct way to lose
            outcomes[i] = e

    appender = threading.Thread(target=zombie)
    appender.start()
    deadline = time.monotonic() + 10
    while len(acked_by_old) < 3 and time.monotonic() < deadline:
        time.sleep(0.002)
    threads = [threading.Thread(target=take_over, args=(i,)) for i in range(len(rivals))]
    for t in threads:
        t.start()
    for t in [*threads, appender]:
        t.join(timeout=20)
    initialized = [r for r, o in zip(rivals, outcomes, strict=True) if o is None]
    owners = []
    for rival in initialized:
        try:
            rival.append(b"by-the-owner")
            owners.append(rival)
        except FencedError:
            pass
    assert len(owners) == 1
    owner = owners[0]
    assert owner.epoch == max(r.epoch for r in initialized)
    for rival in initialized:
        if rival is not owner:
            with pytest.raises(FencedError):
                rival.append(b"late")
    assert list(owner.read_all()) == list(enumerate([*acked_by_old, b"by-the-owner"]))


@pytest.mark.s3
def test_s3_initialize_that_loses_the_fence_slot_jumps_ahead(s3_bucket) -> None:
    """A stale listing (or a zombie's write landing first) costs the new owner a window."""
    client, bucket = s3_bucket
    old = S3DurableLog(bucket, "log/0", client=client)
    old.initialize()
    old.append(b"a")
    new = S3DurableLog(bucket, "log/0", client=client)
    real_list = new._list

    def stale_listing():
        listing = real_list()
        listing.slots.discard(max(listing.slots))  # misses the zombie's newest record
        return listing

    new._list = stale_listing
    new.initialize()
    new._list = real_list
    assert new.epoch == 2
    with pytest.raises(FencedError):
        old.append(b"zombie")
    assert new.append(b"b") == 1
    assert list(new.read_all()) == [(0, b"a"), (1, b"b")]
    # fence, a, claim, claim, fence, b
    assert len(_keys(client, bucket)) == 6


@pytest.mark.s3
def test_s3_a_fence_that_lands_in_a_slot_truncation_freed_voids_the_takeover(s3_bucket) -> None:
    """The chaos smoke run's loss: a new owner chose its fence slot from a listing, and its PUT
    reached S3 only after the zombie had filled that slot and the next ones and truncated past
    them: the fence landed in the freed slot, below the cut, and fenced nothing."""
    client, bucket = s3_bucket
    old = S3DurableLog(bucket, "log/0", client=client)
    old.initialize()
    for i in range(6):
        old.append(f"r{i}".encode())
    new = S3DurableLog(bucket, "log/0", client=client)
    stale = new._list()  # the new owner lists now (top: slot 6)...
    for i in range(6, 10):  # ...then the zombie goes on and truncates past that top
        old.append(f"r{i}".encode())
    old.truncate(9)
    real_list = new._list
    calls = iter([stale])
    new._list = lambda: next(calls, None) or real_list()
    with pytest.raises(RetriableError, match="below the truncation cut"):
        new.initialize()  # its fence lands in slot 7, freed
    again = S3DurableLog(bucket, "log/0", client=client)
    again.initialize()
    assert list(again.read_all()) == [(9, b"r9")]
    with pytest.raises(FencedError):
        old.append(b"zombie")
    assert again.append(b"r10") == 10
    assert list(again.read_all()) == [(9, b"r9"), (10, b"r10")]


@pytest.mark.s3
def test_s3_initialize_fills_slots_a_dead_initializer_left_empty(s3_bucket) -> None:
    client, bucket = s3_bucket
    old = S3DurableLog(bucket, "log/0", client=client)
    old.initialize()
    old.append(b"a")
    # An initializer that died mid-window: it claimed slot 4 but not 2 and 3.
    claim = _encode(_CLAIM, 2, 12345, 0, b"")
    client.put_object(Bucket=bucket, Key=f"log/0/{4:020d}", Body=claim)
    new = S3DurableLog(bucket, "log/0", client=client)
    new.initialize()
    with pytest.raises(FencedError):
        old.append(b"zombie")  # slot 2 is filled now
    assert new.epoch == 3  # above the dead initializer's 2
    assert new.append(b"b") == 1
    assert list(new.read_all()) == [(0, b"a"), (1, b"b")]


@pytest.mark.s3
def test_s3_fence_above_an_empty_slot_means_a_lost_record(s3_bucket) -> None:
    client, bucket = s3_bucket
    log = S3DurableLog(bucket, "log/0", client=client)
    log.initialize()
    log.append(b"a")
    fence = _encode(_FENCE, 2, 12345, 1, b"")
    client.put_object(Bucket=bucket, Key=f"log/0/{3:020d}", Body=fence)
    with pytest.raises(DataCorruptionError, match="slot 2 is missing"):
        list(log.read_all())
    with pytest.raises(DataCorruptionError, match="slot 2 is missing"):
        S3DurableLog(bucket, "log/0", client=client).initialize()


@pytest.mark.s3
def test_s3_pages_through_a_log_of_many_objects(s3_bucket) -> None:
    client, bucket = s3_bucket
    log = S3DurableLog(bucket, "log/0", client=client, list_page_size=2)
    log.initialize()
    payloads = [f"r{i}".encode() for i in range(9)]
    assert [log.append(p) for p in payloads] == list(range(9))
    again = S3DurableLog(bucket, "log/0", client=client, list_page_size=2)
    again.initialize()
    assert list(again.read_all()) == list(enumerate(payloads))
    assert again.append(b"next") == 9


@pytest.mark.s3
def test_s3_sibling_prefixes_are_separate_logs(s3_bucket) -> None:
    client, bucket = s3_bucket
    one = S3DurableLog(bucket, "log/1", client=client)
    ten = S3DurableLog(bucket, "log/10/", client=client)
    one.initialize()
    ten.initialize()
    one.append(b"one")
    ten.append(b"ten")
    assert list(one.read_all()) == [(0, b"one")]
    assert list(ten.read_all()) == [(0, b"ten")]
    assert one.epoch == ten.epoch == 1


@pytest.mark.s3
@pytest.mark.parametrize("garbage", [b"", b"PRS3 not a record", b"x" * 100])
def test_s3_garbage_object_is_corruption_not_a_torn_tail(s3_bucket, garbage: bytes) -> None:
    client, bucket = s3_bucket
    log = S3DurableLog(bucket, "log/0", client=client)
    log.initialize()
    log.append(b"acked")
    client.put_object(Bucket=bucket, Key=f"log/0/{2:020d}", Body=garbage)
    with pytest.raises(DataCorruptionError):
        list(log.read_all())
    with pytest.raises(DataCorruptionError):
        S3DurableLog(bucket, "log/0", client=client).initialize()


@pytest.mark.s3
def test_s3_flipped_byte_fails_the_checksum(s3_bucket) -> None:
    client, bucket = s3_bucket
    log = S3DurableLog(bucket, "log/0", client=client)
    log.initialize()
    log.append(b"payload")
    key = f"log/0/{1:020d}"
    body = bytearray(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    body[-1] ^= 0x01
    client.delete_object(Bucket=bucket, Key=key)
    client.put_object(Bucket=bucket, Key=key, Body=bytes(body))
    with pytest.raises(DataCorruptionError, match="checksum"):
        list(log.read_all())


@pytest.mark.s3
def test_s3_gap_not_explained_by_truncation_is_corruption(s3_bucket) -> None:
    client, bucket = s3_bucket
    log = S3DurableLog(bucket, "log/0", client=client)
    log.initialize()
    for p in [b"a", b"b", b"c"]:
        log.append(p)
    client.delete_object(Bucket=bucket, Key=f"log/0/{2:020d}")  # someone removed acked "b"
    with pytest.raises(DataCorruptionError, match="slot 2 is missing"):
        list(log.read_all())
    with pytest.raises(DataCorruptionError, match="slot 2 is missing"):
        S3DurableLog(bucket, "log/0", client=client).initialize()


@pytest.mark.s3
def test_s3_truncating_everything_keeps_the_epoch_and_the_numbering(s3_bucket) -> None:
    client, bucket = s3_bucket
    log = S3DurableLog(bucket, "log/0", client=client)
    log.initialize()
    for i in range(6):
        log.append(f"r{i}".encode())
    size_before = log.size_bytes()
    log.truncate(6)
    assert list(log.read_all()) == []
    assert log.size_bytes() < size_before
    # Left: the first owner's fence (truncation keeps fences and claims: they fence zombies),
    # the last record object and the marker.
    assert _keys(client, bucket) == [
        f"log/0/{0:020d}",
        f"log/0/{6:020d}",
        f"log/0/truncation/{6:020d}-{6:020d}",
    ]
    again = S3DurableLog(bucket, "log/0", client=client)
    again.initialize()
    assert again.epoch == 2
    assert list(again.read_all()) == []
    assert again.append(b"r6") == 6
    assert list(again.read_all()) == [(6, b"r6")]
    with pytest.raises(FencedError):
        log.append(b"zombie")


@pytest.mark.s3
def test_s3_interrupted_truncation_is_invisible_and_finished_later(s3_bucket) -> None:
    client, bucket = s3_bucket
    log = S3DurableLog(bucket, "log/0", client=client)
    log.initialize()
    for i in range(10):
        log.append(f"r{i}".encode())

    client.meta.events.register_first("before-send.s3.DeleteObjects", _cut_the_wire)
    log.truncate(4)  # the marker is written; the deletes fail (logged)
    client.meta.events.unregister("before-send.s3.DeleteObjects", _cut_the_wire)
    assert len(_keys(client, bucket)) == 12  # fence + 10 records + marker: nothing deleted
    # Part of the deletes happened, out of order, then a crash.
    for slot in (1, 3):
        client.delete_object(Bucket=bucket, Key=f"log/0/{slot:020d}")
    assert [n for n, _ in log.read_all()] == list(range(4, 10))
    again = S3DurableLog(bucket, "log/0", client=client)
    again.initialize()
    assert [n for n, _ in again.read_all()] == list(range(4, 10))
    again.truncate(4)  # the same point again finishes the job
    # Record 4 is in slot 5; the fence in slot 0 stays (truncation keeps fences and claims).
    assert _keys(client, bucket)[:2] == [f"log/0/{0:020d}", f"log/0/{5:020d}"]
    again.truncate(7)
    assert [n for n, _ in again.read_all()] == [7, 8, 9]
    assert _keys(client, bucket)[-1] == f"log/0/truncation/{7:020d}-{8:020d}"
    assert again.append(b"r10") == 10


@pytest.mark.s3
def test_s3_truncation_by_a_zombie_during_replay_asks_for_a_new_replay(s3_bucket) -> None:
    client, bucket = s3_bucket
    old = S3DurableLog(bucket, "log/0", client=client)
    old.initialize()
    count = 2 * READ_AHEAD_OBJECTS + 4
    for i in range(count):
        old.append(f"r{i}".encode())
    new = S3DurableLog(bucket, "log/0", client=client)
    new.initialize()
    replay = new.read_all()
    assert next(replay) == (0, b"r0")  # listed; the first READ_AHEAD_OBJECTS are in flight
    old.truncate(count - 2)  # the zombie truncates below its last acknowledged checkpoint
    with pytest.raises(RetriableError, match="replay again"):
        list(replay)
    assert [n for n, _ in new.read_all()] == [count - 2, count - 1]


class _ZombieBetweenPutAndRead:
    """A real S3 client whose first conditional PUT runs ``before`` first and, when refused
    (412), ``after`` before the refusal reaches the caller: a zombie acting in the gap."""

    def __init__(self, client: Any, before: Any, after: Any) -> None:
        self._client, self._before, self._after = client, before, after
        self._fired = False

    def put_object(self, **kwargs: Any) -> Any:
        if self._fired or "IfNoneMatch" not in kwargs:
            return self._client.put_object(**kwargs)
        self._fired = True
        self._before()
        try:
            return self._client.put_object(**kwargs)
        except ClientError:
            self._after()
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.s3
def test_s3_zombie_truncating_the_slot_that_refused_the_new_fence_asks_to_retry(
    s3_bucket,
) -> None:
    # Found by the chaos run: a zombie's append took the new owner's fence slot, then the
    # zombie's checkpoint truncated it before the new owner read who held it, and the takeover
    # called the log damaged for good (the container never started again).
    client, bucket = s3_bucket
    old = S3DurableLog(bucket, "log/0", client=client)
    old.initialize()
    for i in range(4):
        old.append(f"r{i}".encode())

    def zombie_truncates() -> None:
        old.append(b"r5")
        old.truncate(6)  # everything: the cut is its last record, above the fence slot

    hooked = _ZombieBetweenPutAndRead(client, lambda: old.append(b"r4"), zombie_truncates)
    new = S3DurableLog(bucket, "log/0", client=hooked)
    with pytest.raises(RetriableError, match="truncated by another owner"):
        new.initialize()
    again = S3DurableLog(bucket, "log/0", client=client)
    again.initialize()  # the recovery's next attempt
    assert list(again.read_all()) == []  # all truncated, by an owner that had checkpointed
    assert again.append(b"new") == 6  # the numbering goes on
    with pytest.raises(FencedError):
        old.append(b"still a zombie")


@pytest.mark.s3
def test_s3_foreign_keys_under_the_prefix_are_ignored(s3_bucket) -> None:
    client, bucket = s3_bucket
    client.put_object(Bucket=bucket, Key="log/0/README", Body=b"not a record")
    log = S3DurableLog(bucket, "log/0", client=client)
    log.initialize()
    assert log.append(b"a") == 0
    assert list(log.read_all()) == [(0, b"a")]


@pytest.mark.s3
def test_s3_append_whose_response_was_lost_is_acknowledged_once(s3_bucket) -> None:
    client, bucket = s3_bucket
    log = S3DurableLog(bucket, "log/0", client=client)
    log.initialize()
    forced: list[int] = []

    def needs_retry(attempts: int, **_kwargs) -> float | None:
        if not forced and attempts == 1:
            forced.append(attempts)
            return 0.0  # retry although attempt 1 stored the record: a lost response
        return None

    client.meta.events.register_first("needs-retry.s3.PutObject", needs_retry)
    assert log.append(b"a") == 0
    assert forced
    assert log.append(b"b") == 1
    assert list(log.read_all()) == [(0, b"a"), (1, b"b")]


@pytest.mark.s3
def test_s3_append_with_unknown_outcome_refuses_later_appends(s3_bucket) -> None:
    client, bucket = s3_bucket
    log = S3DurableLog(bucket, "log/0", client=client)
    log.initialize()
    log.append(b"a")

    client.meta.events.register_first("before-send.s3.PutObject", _cut_the_wire)
    with pytest.raises(ConnectionClosedError):
        log.append(b"lost?")
    client.meta.events.unregister("before-send.s3.PutObject", _cut_the_wire)
    with pytest.raises(IllegalStateError, match="unknown outcome"):
        log.append(b"b")
    recovered = S3DurableLog(bucket, "log/0", client=client)
    recovered.initialize()
    assert list(recovered.read_all()) == [(0, b"a")]
    assert recovered.append(b"b") == 1


def test_s3_log_rejects_bad_arguments() -> None:
    with pytest.raises(InvalidArgumentError):
        S3DurableLog("", "log/0", client=object())
    for bad in ["", "/abs", "../up", "a//b"]:
        with pytest.raises(InvalidArgumentError):
            S3DurableLog("bucket", bad, client=object())
    with pytest.raises(InvalidArgumentError):
        S3DurableLog("bucket", "log/0", client=object(), list_page_size=5000)
