"""S3 durable log: one object per record, fenced by conditional PUTs.

Object layout (``prefix`` is typically ``<root>/log/<container>``)::

    <prefix>/00000000000000000000   fence  epoch 1                 next sequence number 0
    <prefix>/00000000000000000001   data   epoch 1                 sequence number 0
    <prefix>/00000000000000000002   data   epoch 1                 sequence number 1
    <prefix>/00000000000000000003   data   epoch 1 (a zombie's)    sequence number 2
    <prefix>/00000000000000000004   claim  epoch 2
    <prefix>/00000000000000000005   fence  epoch 2                 next sequence number 3
    <prefix>/00000000000000000006   data   epoch 2                 sequence number 3
    <prefix>/truncation/<upto, 20 digits>-<cut slot, 20 digits>     empty marker

The 20-digit number in a record's key is its *slot*. Every record is written with
``If-None-Match: *``, so a slot is written once, by one writer. Data records, fences and claims
share the slot space; the *sequence numbers* handed to callers count data records only, so they
run 0, 1, 2, ... without gaps (the contract of :mod:`pravega_ray.logs.durable_data_log`). Other
keys under the prefix are ignored.

*format* A record object is ``[magic "PRS3"][kind u8][epoch u64][writer u64][number u64]
[length u32][crc32 u32][payload]``, big-endian; the CRC covers the header fields before it and
the payload. ``kind``: 0 data (``number`` = its sequence number), 1 fence (``number`` = the
sequence number of the next data record; empty), 2 claim (``number`` unused; empty). ``writer``
is a random id of the writing instance. S3 PUTs are atomic, so there are no torn objects: an
object failing these checks is corruption (or a foreign writer) and raises
:class:`DataCorruptionError`; it is never skipped, because records after it were acknowledged.

Taking over (``initialize``), and why a zombie cannot outrun it. A new owner lists the prefix,
reads back from the highest slot to the last fence or data record (for the highest epoch so far
and the next sequence number), fills any empty slot above that record with a claim (an earlier
initializer died mid-way; an empty slot *below* a fence or data record is a lost record:
DataCorruptionError), and PUTs a fence with epoch + 1 and the exact next sequence number
into the slot above the top. If that fence PUT gets 412, an older owner that is still running
(a *zombie*) wrote there first. Stepping one slot at a time could lose that race for ever (one
PUT per zombie append against a PUT and a GET per try), so the new owner *jumps*: it PUTs claims
into a window of the next 2, 4, 8, ... slots at once, which the zombie's one-at-a-time appends
cannot all take, then reads what it lost and fences the slot above the window. When the fence
lands in slot ``F``, every slot below ``F`` is occupied (by the zombie's records, whose numbers
the new owner has read, or by claims), so:

* every record any earlier owner acknowledged has a slot below ``F`` and is replayed;
* a zombie's next append targets a slot at or below ``F`` (its own records are consecutive, and
  it has nothing at ``F``), which is taken: 412, :class:`FencedError`, and it stops for good;
* the fence's number is exact, so numbering continues without gaps or reuse.

Rival initializers: each lost slot is read back; a record of a higher *rank* ``(epoch,
writer)`` than ours means a newer initializer is at work, and we raise FencedError. Equal epochs
(two that started together) are ordered by writer id, and the one that goes on raises its epoch
by one. A loser's claims from the same window may land above the winner's fence; they are dead
(their writer read the winner's fence and gave up), and the winner's appends step over them.

Appending: ``append`` PUTs the next slot. Success is durable. 412 means another record holds the
slot: a claim of lower rank is stepped over (above), anything else is a newer owner's:
FencedError, and the instance refuses later appends. Any other failure
propagates with the outcome unknown; the instance then refuses further appends with
:class:`IllegalStateError` (the container restarts and recovers). A write whose response was
lost and retried by botocore is read back and counted as stored if the slot holds our exact
bytes (see :func:`pravega_ray.storage.s3.put_if_absent`).

Replaying: ``read_all`` lists, then reads slots from the truncation cut up to the first empty
slot (nothing acknowledged can lie above one: data is written only by an owner whose fence has
every slot below it filled), a bounded number of GETs in flight. It yields data records at or
above the truncation point and checks that data numbers are consecutive, that each fence's
number is the expected one, and that no acknowledged record is missing at the start.

Truncating: ``truncate(upto)`` finds the *cut*, the first slot to keep (binary search over the
records, a few GETs; never beyond this writer's last record, so the epoch and numbering survive
truncating everything), creates the marker ``truncation/<upto>-<cut>`` (the durable step;
markers only add and readers use the highest, so the point never moves back whoever writes),
then deletes the *data* records below the cut and older markers. Deleting is garbage
collection: a crash or error part-way leaves objects ``read_all`` skips and the next
``truncate`` removes.

Fences and claims below the cut are kept, because they are what fences a zombie. A fenced
owner's next append targets the first slot above its last record, and that slot holds a claim
or the fence of the owner that took over (see "Taking over"). Deleted, the slot would be free
again, and the zombie's conditional PUT would succeed there and be acknowledged, below the
cut, where no replay reads it: lost (found by the chaos run: an append whose first attempt
timed out was retried after the new owner had truncated past its slot, and its container went
on appending into the freed slots). They are told apart by size in the listing (header-only
objects: a data record always has a payload), so keeping them costs no request; they are a
few objects per takeover. A zombie
can truncate too, but only below a checkpoint it had acknowledged (so below the new fence); if
that happens while the new owner replays, ``read_all`` raises :class:`RetriableError` and the
recovery runs again; so does ``initialize`` when a slot it found taken (or a record it reads
back) was truncated away meanwhile.

Not garbage collected, and why (issue 26). Each takeover leaves its fence, plus the claims of a
lost race (at most 2 + 4 + ... + ``CLAIM_WINDOW_SLOTS_MAX`` slots), for the life of the log.
The fence that displaced owner E sits in the slot after E's last record, the one E's next append
targets, and nothing bounds how long a zombie of E may still try that append (a paused process,
or a request retried after a timeout, as in the chaos finding above): while the slot is taken
the PUT fails, once it is free the PUT succeeds below the cut and is lost. Unlike Tier-2's
fences (``storage/fenced.py``), where a check against *any* higher fence lets the lower ones go,
the slot itself is the check here, and only E knows which slot it will write. A claim that no
owner's next append can target (one whose previous slot holds another claim of the same
writer) could go, but telling that apart costs reading the headers of both slots at every
truncation, for objects that only races create: kept.
"""

from __future__ import annotations

import collections
import functools
import logging
import secrets
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from botocore.exceptions import BotoCoreError, ClientError

from pravega_ray.constants import LOG_FRAME_BYTES_MAX
from pravega_ray.errors import (
    DataCorruptionError,
    FencedError,
    IllegalStateError,
    InvalidArgumentError,
    PravegaError,
    RetriableError,
)
from pravega_ray.invariant import invariant
from pravega_ray.storage.chunk_storage import validate_chunk_name
from pravega_ray.storage.s3 import (
    S3_LIST_PAGE_KEYS_MAX,
    S3Client,
    default_s3_client,
    get_object_bytes,
    put_if_absent,
)

log = logging.getLogger(__name__)

_MAGIC = b"PRS3"
_HEADER = struct.Struct(">4sBQQQII")
_CRC_COVERED = struct.Struct(">4sBQQQI")  # the header up to the CRC
_DATA, _FENCE, _CLAIM = 0, 1, 2
_DIGITS = 20
_TRUNCATION = "truncation/"

TAKEOVER_ROUNDS_MAX = 16
"""Fence attempts ``initialize`` makes before giving up (each loss means a writer moved first)."""

CLAIM_WINDOW_SLOTS_MAX = 64
"""Largest window of slots claimed at once after a lost fence (2, 4, 8, ... up to this)."""

APPEND_SKIPS_MAX = 4 * CLAIM_WINDOW_SLOTS_MAX
"""Dead claims (of initializers that lost to this owner) one append steps over at most."""

READ_AHEAD_OBJECTS = 16
"""GETs ``read_all`` keeps in flight while replaying."""

DELETE_BATCH_KEYS_MAX = 1000
"""Keys per DeleteObjects request (S3's own maximum)."""


@dataclass(frozen=True, slots=True)
class _Record:
    slot: int
    kind: int
    epoch: int
    writer: int
    number: int
    payload: bytes

    @property
    def rank(self) -> tuple[int, int]:
        """Which of two initializers is newer: higher epoch, then higher writer id."""
        return (self.epoch, self.writer)

    @property
    def next_number(self) -> int | None:
        """The sequence number of the first data record after this one (None for a claim)."""
        if self.kind == _DATA:
            return self.number + 1
        return self.number if self.kind == _FENCE else None


@dataclass(slots=True)
class _Listing:
    """What one listing of the prefix shows."""

    slots: set[int] = field(default_factory=set)
    # Header-only objects: fences and claims (kept by truncation: module docstring).
    bare: set[int] = field(default_factory=set)
    markers: list[tuple[int, int]] = field(default_factory=list)  # (upto, cut slot)
    size_bytes: int = 0

    @property
    def truncation(self) -> tuple[int, int]:
        """(truncation point, cut slot): the highest point, its lowest cut; (0, 0) if none."""
        if not self.markers:
            return (0, 0)
        upto = max(m[0] for m in self.markers)
        return (upto, min(cut for point, cut in self.markers if point == upto))

    @property
    def top(self) -> int:
        return max(self.slots, default=-1)


def _parse_number(text: str) -> int | None:
    return int(text) if len(text) == _DIGITS and text.isascii() and text.isdigit() else None


def _encode(kind: int, epoch: int, writer: int, number: int, payload: bytes) -> bytes:
    covered = _CRC_COVERED.pack(_MAGIC, kind, epoch, writer, number, len(payload))
    crc = zlib.crc32(payload, zlib.crc32(covered))
    return covered + struct.pack(">I", crc) + payload


def _decode(slot: int, key: str, body: bytes) -> _Record:
    if len(body) < _HEADER.size:
        raise DataCorruptionError(f"log object {key!r}: {len(body)} bytes, shorter than a header")
    magic, kind, epoch, writer, number, length, crc = _HEADER.unpack_from(body)
    if magic != _MAGIC:
        raise DataCorruptionError(f"log object {key!r}: bad magic {magic!r}")
    if len(body) != _HEADER.size + length:
        raise DataCorruptionError(
            f"log object {key!r}: header says {length} payload bytes, object has "
            f"{len(body) - _HEADER.size}"
        )
    payload = body[_HEADER.size :]
    if zlib.crc32(payload, zlib.crc32(body[: _CRC_COVERED.size])) != crc:
        raise DataCorruptionError(f"log object {key!r}: checksum mismatch")
    if kind not in (_DATA, _FENCE, _CLAIM) or (kind != _DATA and length):
        raise DataCorruptionError(f"log object {key!r}: bad record kind {kind} / length {length}")
    if epoch == 0:
        raise DataCorruptionError(f"log object {key!r}: epoch 0 is never written")
    return _Record(slot, kind, epoch, writer, number, payload)


class _Vanished(Exception):
    """A listed record object was gone when read."""


class S3DurableLog:
    """DurableDataLog on S3 objects (see the module docstring for layout and protocol).

    One caller at a time for ``initialize`` / ``append`` / ``read_all``, as the DurableDataLog
    contract says; ``truncate`` may run beside an ``append`` (the container does that): it
    reads this writer's position once and touches only slots below it.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str,
        client: S3Client | None = None,
        *,
        list_page_size: int = S3_LIST_PAGE_KEYS_MAX,
    ) -> None:
        """``prefix``: a chunk-name-like path (one trailing "/" allowed); the log owns it.

        No request is made here.
        """
        if not isinstance(bucket, str) or not bucket:
            raise InvalidArgumentError(f"bucket must be a non-empty str, got {bucket!r}")
        if not isinstance(prefix, str):
            raise InvalidArgumentError(f"prefix must be a str, got {prefix!r}")
        if not 1 <= list_page_size <= S3_LIST_PAGE_KEYS_MAX:
            raise InvalidArgumentError(
                f"list_page_size must be in 1..{S3_LIST_PAGE_KEYS_MAX}, got {list_page_size}"
            )
        self._bucket = bucket
        self._root = validate_chunk_name(prefix.removesuffix("/")) + "/"
        self._own_client = client is None
        self._client = client if client is not None else default_s3_client()
        self._list_page_size = list_page_size
        self._writer = secrets.randbits(63)
        self._epoch = 0
        # (next slot, next sequence number), replaced as one value so truncate reads a pair.
        self._next = (0, 0)
        # Set once an append fails: what every later append raises.
        self._refusal: Callable[[], PravegaError] | None = None

    @property
    def epoch(self) -> int:
        return self._epoch

    # --- keys, listing, reading ----------------------------------------------------------------
    def _where(self) -> str:
        return f"log s3://{self._bucket}/{self._root}"

    def _key(self, slot: int) -> str:
        return f"{self._root}{slot:0{_DIGITS}d}"

    def _marker_key(self, upto: int, cut: int) -> str:
        return f"{self._root}{_TRUNCATION}{upto:0{_DIGITS}d}-{cut:0{_DIGITS}d}"

    def _list(self) -> _Listing:
        listing = _Listing()
        paginator = self._client.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=self._bucket,
            Prefix=self._root,
            PaginationConfig={"PageSize": self._list_page_size},
        )
        for page in pages:
            for entry in page.get("Contents", ()):
                tail = entry["Key"][len(self._root) :]
                if (slot := _parse_number(tail)) is not None:
                    listing.slots.add(slot)
                    if int(entry.get("Size", -1)) == _HEADER.size:
                        listing.bare.add(slot)
                elif tail.startswith(_TRUNCATION):
                    upto, _, cut = tail[len(_TRUNCATION) :].partition("-")
                    point, cut_slot = _parse_number(upto), _parse_number(cut)
                    if point is None or cut_slot is None:
                        continue
                    listing.markers.append((point, cut_slot))
                else:
                    continue
                listing.size_bytes += int(entry.get("Size", 0))
        return listing

    def _read(self, slot: int) -> _Record:
        key = self._key(slot)
        body = get_object_bytes(self._client, self._bucket, key)
        if body is None:
            raise _Vanished(key)
        return _decode(slot, key, body)

    def _read_present(self, slot: int) -> _Record:
        """A record the listing showed (or a 412 proved): vanishing means someone deleted it.

        Another owner's truncation may have, meanwhile: a zombie truncates below a checkpoint
        it acknowledged, which can lie above slots a new owner is still reading while it
        takes over (found by the chaos run: the zombie's records took the new owner's fence
        slot, then its checkpoint truncated them). Then the slot now lies below the cut and
        this raises RetriableError (take over, or truncate, again); otherwise a record was
        lost: DataCorruptionError.
        """
        try:
            return self._read(slot)
        except _Vanished:
            if slot < self._list().truncation[1]:
                raise RetriableError(
                    f"{self._where()}: slot {slot} was truncated by another owner meanwhile; "
                    "try again"
                ) from None
            raise DataCorruptionError(
                f"log object {self._key(slot)!r} vanished (deleted by someone else?)"
            ) from None

    def _last_exact(
        self, top: int, floor: int, known: dict[int, _Record]
    ) -> tuple[_Record | None, int]:
        """Walk down from ``top`` to the first data record or fence at or above ``floor``.

        Returns (that record, or None if only claims and empty slots were found; the highest
        epoch seen on the way). Empty slots are skipped.
        """
        highest_epoch = 0
        for slot in range(top, floor - 1, -1):
            record = known.get(slot)
            if record is None:
                try:
                    record = known[slot] = self._read(slot)
                except _Vanished:
                    continue
            highest_epoch = max(highest_epoch, record.epoch)
            if record.next_number is not None:
                return record, highest_epoch
        return None, highest_epoch

    def _landed(self, slot: int, known: dict[int, _Record]) -> bool:
        """Whether a slot the listing showed empty holds a record now (a writer raced it)."""
        if slot in known:
            return True
        try:
            known[slot] = self._read(slot)
        except _Vanished:
            return False
        return True

    def _missing(self, hole: int, above: int) -> DataCorruptionError:
        # Data and fences are written only with every slot below them filled, and only slots
        # below the truncation cut are ever deleted: a hole under one lost a record.
        return DataCorruptionError(
            f"{self._where()}: slot {hole} is missing below the record in slot {above}; "
            "acknowledged records may be lost"
        )

    # --- initialize ----------------------------------------------------------------------------
    def initialize(self, *, must_exist: bool = False) -> None:
        """Take a new epoch above every earlier owner's and fence them (module docstring)."""
        listing = self._list()
        if must_exist and not listing.slots and not listing.markers:
            raise DataCorruptionError(
                f"{self._where()}: no record, fence or truncation marker, but the log must "
                "exist (an owner had it): it was lost with every record it held"
            )
        truncation, cut = listing.truncation
        top = listing.top
        if listing.markers and cut not in listing.slots:
            # The cut slot is never deleted (only slots below it are).
            raise DataCorruptionError(f"{self._where()}: the cut slot {cut} is missing")
        known: dict[int, _Record] = {}
        exact, highest_epoch = self._last_exact(top, cut, known)
        epoch = highest_epoch + 1
        floor = cut if exact is None else exact.slot
        for slot in range(cut, floor):
            if slot not in listing.slots and not self._landed(slot, known):
                raise self._missing(slot, floor)
        # Slots above it that an initializer left empty (it died mid-way): fill them, so
        # nothing can land there later.
        holes = [s for s in range(floor, top + 1) if s not in listing.slots and s not in known]
        epoch = self._claim(holes, epoch, known)
        next_free = top + 1
        window = 2
        for _round in range(TAKEOVER_ROUNDS_MAX):
            # Every slot below next_free is occupied now, and every one we lost has been read.
            exact, _ = self._last_exact(next_free - 1, cut, known)
            number = truncation if exact is None else exact.next_number
            invariant(number is not None, "data records and fences have a next number")
            assert number is not None  # (for the type checker: the invariant holds)
            if number < truncation:
                raise DataCorruptionError(
                    f"{self._where()}: truncated at {truncation}, beyond its end {number}"
                )
            fence = _encode(_FENCE, epoch, self._writer, number, b"")
            if put_if_absent(self._client, self._bucket, self._key(next_free), fence):
                self._check_fence_landed(next_free)
                self._epoch = epoch
                self._next = (next_free + 1, number)
                self._refusal = None
                # For post-mortems of takeovers (a few lines per container restart).
                log.info(
                    "%s: taken over at epoch %d (writer %x): fence in slot %d, next number %d",
                    self._where(),
                    epoch,
                    self._writer,
                    next_free,
                    number,
                )
                return
            epoch = self._learn(self._read_present(next_free), epoch, known)
            # A zombie (or an older rival) took the slot: jump ahead with a window of claims.
            first = next_free + 1
            epoch = self._claim(list(range(first, first + window)), epoch, known)
            next_free = first + window
            window = min(2 * window, CLAIM_WINDOW_SLOTS_MAX)
        raise RetriableError(
            f"{self._where()}: lost the fence slot {TAKEOVER_ROUNDS_MAX} times; retry initialize"
        )

    def _check_fence_landed(self, slot: int) -> None:
        """RetriableError if our fence in ``slot`` landed where it fences nothing.

        The fence's slot was chosen from a listing; its PUT may reach S3 much later (delayed,
        retried). Meanwhile a zombie may have filled that slot and the ones above, and
        truncated below them, which frees the slot again: the fence then succeeds below the
        cut, under the zombie's newer records, and fences nothing (found by the chaos smoke
        run: two successors took the same epoch, and acknowledged data was lost). A fence
        below the cut, or with a data record or fence above it, voids the takeover: the
        caller initializes again, from a fresh listing. Claims above it are a rival's, dead
        or newer (the latter fences our first append).
        """
        listing = self._list()
        if listing.truncation[1] > slot:
            raise RetriableError(
                f"{self._where()}: our fence in slot {slot} landed below the truncation cut "
                f"{listing.truncation[1]} (the slot was freed meanwhile); initialize again"
            )
        for above in sorted(s for s in listing.slots if s > slot):
            try:
                record = self._read(above)
            except _Vanished:
                continue
            if record.kind != _CLAIM:
                raise RetriableError(
                    f"{self._where()}: our fence in slot {slot} landed under a newer record in "
                    f"slot {above} (the slot was freed meanwhile); initialize again"
                )

    def _learn(self, record: _Record, epoch: int, known: dict[int, _Record]) -> int:
        """Note a record that took a slot we wanted; return our (maybe raised) epoch."""
        known[record.slot] = record
        if record.rank > (epoch, self._writer):
            raise FencedError(
                f"{self._where()}: a newer owner (epoch {record.epoch}) is taking over "
                f"(slot {record.slot})"
            )
        # Same epoch, lower writer id: an initializer that started with us; we go on as the
        # newer one, so our fence must carry a higher epoch than anything it wrote.
        return max(epoch, record.epoch + 1)

    def _claim(self, slots: list[int], epoch: int, known: dict[int, _Record]) -> int:
        """PUT claims into ``slots`` at once; read what we lost; return our epoch."""
        if not slots:
            return epoch
        body = _encode(_CLAIM, epoch, self._writer, 0, b"")
        with ThreadPoolExecutor(
            max_workers=min(len(slots), READ_AHEAD_OBJECTS), thread_name_prefix="s3-log-claim"
        ) as executor:
            won = list(
                executor.map(
                    lambda s: put_if_absent(self._client, self._bucket, self._key(s), body), slots
                )
            )
            lost = [s for s, w in zip(slots, won, strict=True) if not w]
            records = list(executor.map(self._read_present, lost))
        for slot, w in zip(slots, won, strict=True):
            if w:
                known[slot] = _Record(slot, _CLAIM, epoch, self._writer, 0, b"")
        for record in records:
            epoch = self._learn(record, epoch, known)
        return epoch

    # --- read_all ------------------------------------------------------------------------------
    def read_all(self) -> Iterator[tuple[int, bytes]]:
        """Every data record at or above the truncation point, in order (module docstring)."""
        listing = self._list()
        truncation, cut = listing.truncation
        stop = cut
        while stop in listing.slots:
            stop += 1
        if listing.markers and cut not in listing.slots:
            # The cut slot is never deleted (only slots below it are).
            raise DataCorruptionError(
                f"{self._where()}: the cut slot {cut} of truncation point {truncation} is missing"
            )
        if stop <= listing.top:
            # Above an empty slot there may be claims of an initializer that died, never a
            # data record or fence.
            exact, _ = self._last_exact(listing.top, stop + 1, {})
            if exact is not None:
                if self._landed(stop, {}):
                    raise RetriableError(
                        f"{self._where()}: another writer is active (slot {stop} was just "
                        "written); replay again"
                    )
                raise self._missing(stop, exact.slot)
        expected = -1
        records = self._fetch(range(cut, stop))
        while True:
            try:
                record = next(records)
            except StopIteration:
                return
            except _Vanished as e:
                if self._list().truncation[0] > max(expected, truncation):
                    raise RetriableError(
                        f"{self._where()}: truncated by another owner during the replay; "
                        "replay again"
                    ) from None
                raise DataCorruptionError(
                    f"log object {e} vanished (deleted by someone else?)"
                ) from None
            if record.kind == _CLAIM:
                continue
            where = f"log object {self._key(record.slot)!r}"
            if expected < 0:
                if record.number > truncation:
                    raise DataCorruptionError(
                        f"{where}: starts at sequence number {record.number}, but only records "
                        f"below {truncation} were truncated: records are missing"
                    )
                expected = record.number
            if record.number != expected:
                raise DataCorruptionError(
                    f"{where}: sequence number {record.number} where {expected} was expected"
                )
            if record.kind == _DATA:
                expected += 1
                if record.number >= truncation:
                    yield record.number, record.payload

    def _fetch(self, slots: Iterable[int]) -> Iterator[_Record]:
        """Records of ``slots`` in order, with up to READ_AHEAD_OBJECTS GETs in flight."""
        pending: collections.deque[Future[_Record]] = collections.deque()
        executor = ThreadPoolExecutor(
            max_workers=READ_AHEAD_OBJECTS, thread_name_prefix="s3-log-read"
        )
        try:
            upcoming = iter(slots)
            for slot in upcoming:
                pending.append(executor.submit(self._read, slot))
                if len(pending) >= READ_AHEAD_OBJECTS:
                    break
            while pending:
                record = pending.popleft().result()
                for slot in upcoming:
                    pending.append(executor.submit(self._read, slot))
                    break
                yield record
        finally:
            # Also runs when the caller stops iterating early: no thread outlives the read.
            executor.shutdown(wait=True, cancel_futures=True)

    # --- append --------------------------------------------------------------------------------
    def append(self, payload: bytes) -> int:
        """Durably append one record; return its sequence number (module docstring)."""
        if self._refusal is not None:
            raise self._refusal()
        if self._epoch == 0:
            raise IllegalStateError("durable log is not initialized")
        if len(payload) > LOG_FRAME_BYTES_MAX:
            raise IllegalStateError(f"log record of {len(payload)} bytes exceeds the limit")
        slot, number = self._next
        body = _encode(_DATA, self._epoch, self._writer, number, bytes(payload))
        for _skip in range(APPEND_SKIPS_MAX + 1):
            key = self._key(slot)
            try:
                if put_if_absent(self._client, self._bucket, key, body):
                    self._next = (slot + 1, number + 1)
                    return number
                taken = self._read_present(slot)
            except BaseException:
                self._refusal = functools.partial(
                    IllegalStateError,
                    f"an earlier append to {key!r} failed with an unknown outcome; "
                    "reinitialize the log",
                )
                raise
            if taken.kind != _CLAIM or taken.rank > (self._epoch, self._writer):
                log.warning(
                    "%s: slot %d holds a %s of epoch %d (writer %x): epoch %d (writer %x) is "
                    "fenced",
                    self._where(),
                    slot,
                    ("data record", "fence", "claim")[taken.kind],
                    taken.epoch,
                    taken.writer,
                    self._epoch,
                    self._writer,
                )
                break
            log.info("%s: stepping over a dead claim in slot %d", self._where(), slot)
            # A claim of an older initializer that lost to us: it saw our fence below this
            # slot and gave up, so the slot is dead. Step over it.
            slot += 1
        self._refusal = functools.partial(
            FencedError, f"log slot {key!r} is taken: a newer owner fenced epoch {self._epoch}"
        )
        raise self._refusal()

    # --- truncate ------------------------------------------------------------------------------
    def truncate(self, upto_sequence: int) -> None:
        """Durably drop every record below ``upto_sequence`` (module docstring).

        Idempotent; a point below the current one changes nothing, the current one again
        finishes the deletes of an interrupted truncation. Raises IllegalStateError beyond the
        end, or what a failed append raised once this instance stopped appending.
        """
        if self._refusal is not None:
            raise self._refusal()
        next_slot, next_number = self._next
        if upto_sequence > next_number:
            raise IllegalStateError("cannot truncate beyond the end of the log")
        listing = self._list()
        truncation, cut = listing.truncation
        if upto_sequence < truncation or upto_sequence <= 0:
            return
        if upto_sequence > truncation:
            cut = self._find_cut(upto_sequence, cut, next_slot - 1)
            # The durable step: from here on read_all skips everything below the point.
            put_if_absent(self._client, self._bucket, self._marker_key(upto_sequence, cut), b"")
        # Data records only: a fence or claim below the cut still fences a zombie there.
        doomed = [self._key(s) for s in sorted(listing.slots - listing.bare) if s < cut]
        doomed += [self._marker_key(p, c) for p, c in listing.markers if p < upto_sequence]
        self._delete(doomed)

    def _find_cut(self, upto: int, low: int, last: int) -> int:
        """The lowest slot to keep: below it every record is below ``upto``; at most ``last``.

        ``g(slot)`` = the next sequence number after the first data record or fence at or
        after ``slot``; it never decreases, so binary search finds the first slot with
        ``g > upto``. Claims have no number and are stepped over (there are few).
        """
        invariant(last >= low, f"truncate before this writer's first slot ({last} < {low})")

        def g(slot: int) -> int:
            for s in range(slot, last + 1):
                number = self._read_present(s).next_number
                if number is not None:
                    return number
            invariant(False, f"slot {last}, this writer's last, holds no fence or data")
            return 0

        high = last
        while low < high:
            middle = (low + high) // 2
            if g(middle) <= upto:
                low = middle + 1
            else:
                high = middle
        return low

    def _delete(self, keys: list[str]) -> None:
        """Best-effort DeleteObjects; failures are logged, and the next truncate retries them."""
        for start in range(0, len(keys), DELETE_BATCH_KEYS_MAX):
            batch = keys[start : start + DELETE_BATCH_KEYS_MAX]
            try:
                response = self._client.delete_objects(
                    Bucket=self._bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                )
            except (ClientError, BotoCoreError) as e:
                log.warning("%s: deleting %d objects failed: %r", self._where(), len(batch), e)
                return
            if errors := response.get("Errors"):
                log.warning("%s: %d objects not deleted: %s", self._where(), len(errors), errors)
                return

    # --- the rest ------------------------------------------------------------------------------
    def size_bytes(self) -> int:
        """Bytes the log's objects hold (including truncated objects not deleted yet)."""
        return self._list().size_bytes

    def close(self) -> None:
        """Refuse further appends; close the client if this instance built it."""
        self._epoch = 0
        self._refusal = None
        if self._own_client:
            self._client.close()
