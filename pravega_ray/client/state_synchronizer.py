"""Shared state, read and changed by many processes (Pravega's ``StateSynchronizer``).

A :class:`StateSynchronizer` keeps one value, its *state*, under a key of a table
segment, and a local copy of it. ``get_state()`` answers the local copy (no round trip);
``fetch_updates()`` brings the copy up to date; ``update_state(fn)`` applies ``fn`` to the
latest state and stores the result *conditionally* on the version it read: if another
client stored first, it reads the new state and applies ``fn`` again, so racing updates
never lose one another (one wins, the others retry on the winner's state).

Made by ``cluster.state_synchronizer(scope, name, serializer, initial=...)``
(:func:`open_state_synchronizer`): the controller creates (or looks up) the synchronizer's
record and table segment (``controller/state_synchronizer_tasks.py``; a segment of
``_system``, ``contracts/state_synchronizer.py``), and ``initial`` is stored only if no
state exists yet (a conditional create: two first clients cannot both seed it). After
that, clients talk to the segment's container only.

Faults. A store whose outcome is unknown (the container restarted mid-call) is never
applied twice: every store writes, in the same atomic batch, a random id of the update
into a short list of the last :data:`WRITER_IDS_KEPT` writers (key ``writer``); the retry
reads the state and that list first, and if its own id is there the store landed and
``fn`` is not applied again. (An update overwritten by more than ``WRITER_IDS_KEPT`` others
before its client reads again would be applied twice; its client reads at once and then
every ``RETRY_PAUSE_S``.)

The reader group's state (``client/reader_group_synchronizer.py``) is a subclass: the same
fetch, seed and conditional-update loop, with its own encoding, without writer ids (its
changes are idempotent) and with its checkpoint acknowledgements beside the state.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Generic, TypeVar

from pravega_ray import constants
from pravega_ray.client.connection import ControllerConnection, SegmentStoreConnection
from pravega_ray.client.serializers import Serializer, check_serializer, serialized_bytes
from pravega_ray.client.table_rounds import table_rounds
from pravega_ray.contracts.segment_store import NOT_EXISTS, TableEntry, TableUpdate
from pravega_ray.contracts.state_synchronizer import STATE_KEY, WRITER_KEY
from pravega_ray.errors import (
    BadKeyVersionError,
    ClientClosedError,
    ConflictingUpdateError,
    InvalidArgumentError,
    PravegaError,
    RetriableError,
    SegmentNotFoundError,
    SegmentStoreUnavailableError,
    SerializationError,
    StateSynchronizerNotFoundError,
)
from pravega_ray.naming import validate_name
from pravega_ray.timing import DAEMON_THREADS, ThreadScheduler

__all__ = ["StateSynchronizer", "open_state_synchronizer"]

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

UPDATE_ATTEMPTS_MAX = 1000
"""Tries of one ``update_state`` (conflicts and outcome-unknown failures) before it gives up."""
RETRY_PAUSE_S = 0.1
"""Pause after an outcome-unknown failure (the container restarting)."""
CONFLICT_PAUSE_MAX_S = 0.05
"""Longest random pause after repeated conflicts (many clients updating at once)."""
CALL_TIMEOUT_S = constants.READER_GROUP_STATE_CALL_TIMEOUT_S
"""How long one container call may take before its outcome counts as unknown."""
WRITER_IDS_KEPT = 64
"""How many of the last stores' ids the ``writer`` key keeps (8 bytes each)."""
_WRITER_ID_BYTES = 8


class StateSynchronizer(Generic[T]):
    """The state of one synchronizer and this client's local copy of it.

    Thread-safe: any thread may call any method. ``fn`` of :meth:`update_state` must be a
    pure function of the state it is given (it may run several times, on fresh states),
    and nobody may mutate a state it was given or got from :meth:`get_state`.

    Made by :func:`open_state_synchronizer` (``cluster.state_synchronizer``); the
    constructor is the subclasses' (``what`` names it in errors; ``encode``/``decode``
    turn states into stored bytes and back, ``decode`` raising a typed error; ``initial``
    gives the state to seed an absent one with; ``gone`` the error for a segment that is
    gone; ``writer_ids``: track the ids of stores, see the module docstring).
    """

    def __init__(
        self,
        what: str,
        segment: str,
        segments: SegmentStoreConnection,
        *,
        encode: Callable[[T], bytes],
        decode: Callable[[bytes], T],
        initial: Callable[[], T],
        gone: Callable[[], PravegaError],
        writer_ids: bool = True,
        attempts_max: int = UPDATE_ATTEMPTS_MAX,
        scheduler: ThreadScheduler = DAEMON_THREADS,
    ) -> None:
        self.segment = segment
        self._what = what
        self._segments = segments
        self._rounds = table_rounds(segments, segment)  # shared by the process's clients
        self._encode = encode
        self._decode = decode
        self._initial = initial
        self._gone = gone
        self._writer_ids = writer_ids
        self._attempts_max = attempts_max
        self._scheduler = scheduler
        self._state: T | None = None
        self._version = NOT_EXISTS
        self._closed = False
        self._lock = threading.Lock()

    # --- the public surface ------------------------------------------------------------------
    def get_state(self) -> T:
        """The local copy of the state, as of the last fetch or update (no round trip)."""
        if self._state is None:
            self.fetch_updates()
        assert self._state is not None
        return self._state

    def fetch_updates(self) -> None:
        """Bring the local copy up to date (one container call; outcome-unknown failures are
        tried again, ``attempts_max`` calls in all).

        Raises StateSynchronizerNotFoundError (deleted), SerializationError (the stored
        state does not decode with this serializer), SegmentStoreUnavailableError (no
        answer in all the tries), ClientClosedError.
        """
        self._check_open()
        for attempt in range(self._attempts_max):
            try:
                state, version, _ = self._fetch()
            except RetriableError as e:
                if attempt + 1 >= self._attempts_max:
                    raise
                self._pause(attempt, e)
                continue
            self._keep(state, version)
            return

    def update_state(self, fn: Callable[[T], T]) -> T:
        """Store ``fn(latest state)`` conditionally on the latest state's version; the
        state stored (also the new local copy).

        On a conflict (another client stored first) the state is fetched again and ``fn``
        applied to it again, so ``fn`` may run several times and must be a pure function
        of its argument (no side effects, no mutation of it). ``fn`` returning a state
        equal to its argument (the same bytes once serialized) stores nothing. An error
        ``fn`` raises reaches the caller, nothing stored. An outcome-unknown store is
        tried again safely (module docstring: ``fn``'s result is stored once).

        Raises InvalidArgumentError (``fn`` not callable; a state whose serialized form
        is over ``TABLE_VALUE_BYTES_MAX``: nothing stored), SerializationError,
        StateSynchronizerNotFoundError, ConflictingUpdateError (``attempts_max`` tries
        lost to others), SegmentStoreUnavailableError (the last try's outcome unknown and
        not found landed), ClientClosedError.
        """
        self._check_open()
        if not callable(fn):
            raise InvalidArgumentError(f"update_state takes a function, got {type(fn).__name__}")

        def change(state: T) -> tuple[T, T]:
            new = fn(state)
            return new, new

        return self._apply(change)

    def compact(self) -> None:
        """Pravega's ``compact`` rewrites a synchronizer's history of updates so new clients
        need not read it all. Here there is no history to rewrite: the state is one value,
        each update replaces it, and the table segment's own compaction already drops
        replaced values. So ``compact`` only brings the local copy up to date (as
        :meth:`fetch_updates`, raising as it does); it stores nothing."""
        self.fetch_updates()

    def close(self) -> None:
        """Stop using the synchronizer (idempotent): later calls but :meth:`get_state` raise
        ClientClosedError. The state stays stored for the other clients."""
        self._closed = True

    def __enter__(self) -> StateSynchronizer[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StateSynchronizer({self._what}, segment={self.segment!r})"

    # --- the core, shared with the reader group's synchronizer ---------------------------
    def _fetch(self) -> tuple[T, int, bytes]:
        """The stored state, its version and the ``writer`` key's ids (b"" without writer
        ids), seeding the state first if absent. Raises as the calls do (``_errors``)."""
        keys = [STATE_KEY, WRITER_KEY] if self._writer_ids else [STATE_KEY]
        entries = self._get(keys)
        state, version = self._state_of(entries[0])
        writers = entries[1] if self._writer_ids else None
        ids = writers.value if writers is not None and writers.value else b""
        return state, version, ids

    def _state_of(self, entry: TableEntry | None) -> tuple[T, int]:
        """The state an entry of ``STATE_KEY`` holds, and its version; seeded if absent."""
        if entry is None or entry.value is None:
            return self._seed()
        return self._decode(entry.value), entry.version

    def _seed(self) -> tuple[T, int]:
        """Store the initial state, unless someone did first (then read theirs)."""
        state = self._initial()
        value = self._checked(self._encode(state))
        batch = [TableUpdate(STATE_KEY, value, NOT_EXISTS)]
        if self._writer_ids:
            batch.append(TableUpdate(WRITER_KEY, _new_writer_id()))
        try:
            result = self._call(self._segments.table_update(self.segment, batch))
        except BadKeyVersionError:  # another client seeded it: read theirs
            entry = self._get([STATE_KEY])[0]
            if entry is None or entry.value is None:  # pragma: no cover - needs a delete race
                raise ConflictingUpdateError(f"the state of {self._what} vanished") from None
            return self._decode(entry.value), entry.version
        return state, result.versions[0]

    def _apply(
        self,
        change: Callable[[T], tuple[T, R]],
        *,
        repeat_unknown: bool = True,
        also: Sequence[TableUpdate] = (),
    ) -> R:
        """Apply ``change`` (the new state and an answer) to the latest state and store the
        new state conditionally; ``change``'s answer. The loop of :meth:`update_state`:
        ``change`` may mutate the state it is given (the reader group's do). A change that
        leaves the encoded state as it was stores nothing. ``also``: updates of other keys,
        stored in the same atomic batch (not at all if the state is not stored).

        Without writer ids, an outcome-unknown store is applied again to the fresh state
        (the change must be idempotent) unless ``repeat_unknown=False``: then it is not
        tried again (unless a fresh fetch shows the same bytes stored) and the error
        reaches the caller. After ``attempts_max`` tries: the last outcome-unknown error
        if the last try failed so, else ConflictingUpdateError.
        """
        unknown: RetriableError | None = None  # the last outcome-unknown failure
        mine: dict[bytes, tuple[T, R]] = {}  # writer id -> what that store stored
        conflicts = 0
        for attempt in range(self._attempts_max):
            try:
                state, version, ids = self._fetch()
            except RetriableError as e:
                unknown = e
                self._pause(attempt, e)
                continue
            landed = next((mine[i] for i in _writer_ids(ids) if i in mine), None)
            if landed is not None:  # an outcome-unknown store of this call landed
                self._keep(state, version)  # what is stored now (ours, or newer)
                return landed[1]
            before = self._encode(state)  # before the change, which may mutate it
            new, answer = change(state)
            after = self._encode(new)
            if after == before:
                self._keep(new, version)
                return answer
            batch = [TableUpdate(STATE_KEY, self._checked(after), version)]
            if self._writer_ids:
                writer = _new_writer_id()
                mine[writer] = (new, answer)
                kept = _writer_ids(ids)[-(WRITER_IDS_KEPT - 1) :]
                batch.append(TableUpdate(WRITER_KEY, b"".join([*kept, writer])))
            batch += also
            try:
                result = self._call(self._segments.table_update(self.segment, batch))
            except BadKeyVersionError:
                unknown = None
                conflicts += 1
                if self._writer_ids and conflicts > 2:  # many at once: spread them out
                    self._scheduler.sleep(random.uniform(0, CONFLICT_PAUSE_MAX_S))
                continue  # another client stored first: apply the change to theirs
            except RetriableError as e:
                if not repeat_unknown and not self._writer_ids:
                    if self._landed(after):
                        return answer
                    raise
                unknown = e
                self._pause(attempt, e)
                continue
            self._keep(new, result.versions[0])
            return answer
        if unknown is not None:
            raise unknown
        raise ConflictingUpdateError(
            f"{self._what} could not be changed in {self._attempts_max} tries"
        )

    def _keep(self, state: T, version: int) -> None:
        """Make ``state`` (of ``version``) the local copy unless a newer one is kept
        (versions of a table key grow with each store)."""
        with self._lock:
            if version >= self._version:
                self._state, self._version = state, version

    def _checked(self, value: bytes) -> bytes:
        if len(value) > constants.TABLE_VALUE_BYTES_MAX:
            raise InvalidArgumentError(
                f"the state of {self._what} is {len(value)} bytes serialized, over the "
                f"{constants.TABLE_VALUE_BYTES_MAX} a table value may hold: nothing stored"
            )
        return value

    def _landed(self, after: bytes) -> bool:
        """Whether the stored state is the one an outcome-unknown store wrote."""
        try:
            return self._encode(self._fetch()[0]) == after
        except RetriableError:
            return False

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError(f"{self._what}: this synchronizer was closed")

    def _pause(self, attempt: int, error: Exception) -> None:
        log.info("%s: try %d failed (%r)", self._what, attempt, error)
        self._scheduler.sleep(RETRY_PAUSE_S)

    def _get(self, keys: Sequence[bytes]) -> list[TableEntry | None]:
        """``table_get`` of ``keys``, in a round with the process's other clients' reads
        (``client/table_rounds.py``: as fresh as a call of its own)."""
        with self._errors():
            return self._rounds.get(keys, CALL_TIMEOUT_S)

    def _call(self, future: Future[R]) -> R:
        with self._errors():
            return future.result(CALL_TIMEOUT_S)

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """A call's errors as callers see them: a gone segment is ``gone()``; no answer in
        time, outcome unknown."""
        try:
            yield
        except SegmentNotFoundError:
            raise self._gone() from None
        except FutureTimeoutError:
            raise SegmentStoreUnavailableError(
                f"no answer from the container of {self.segment}: outcome unknown"
            ) from None


def _new_writer_id() -> bytes:
    return os.urandom(_WRITER_ID_BYTES)


def _writer_ids(ids: bytes) -> list[bytes]:
    n = _WRITER_ID_BYTES
    return [ids[i : i + n] for i in range(0, len(ids) - n + 1, n)]


def open_state_synchronizer(
    scope: str,
    name: str,
    serializer: Serializer[T],
    controller: ControllerConnection,
    segments: SegmentStoreConnection,
    *,
    initial: T,
    attempts_max: int = UPDATE_ATTEMPTS_MAX,
    scheduler: ThreadScheduler = DAEMON_THREADS,
) -> StateSynchronizer[T]:
    """State synchronizer ``scope/name``, created if it does not exist, its state seeded
    with ``initial`` if none is stored yet (else ``initial`` is ignored), and its local
    copy fetched.

    Raises InvalidNameError (names checked first), InvalidArgumentError (serializer
    without serialize/deserialize; ``initial`` over the value limit serialized),
    SerializationError (``initial`` does not serialize; the stored state does not
    deserialize), ScopeNotFoundError, IllegalStateError (scope being deleted),
    DataCorruptionError (a damaged record), SegmentStoreUnavailableError.
    """
    validate_name("scope", scope)
    validate_name("state synchronizer", name)
    check_serializer(serializer)
    if isinstance(attempts_max, bool) or not isinstance(attempts_max, int) or attempts_max < 1:
        raise InvalidArgumentError(f"attempts_max must be an int >= 1, got {attempts_max!r}")
    what = f"state synchronizer {scope}/{name}"
    encode_initial = _encoder(serializer, what)(initial)  # fails here, before anything exists
    if len(encode_initial) > constants.TABLE_VALUE_BYTES_MAX:
        raise InvalidArgumentError(
            f"the initial state of {what} is {len(encode_initial)} bytes serialized, over "
            f"the {constants.TABLE_VALUE_BYTES_MAX} a table value may hold"
        )
    record = controller.create_state_synchronizer(scope, name)
    segment = str(record["segment"])

    def gone() -> PravegaError:
        return StateSynchronizerNotFoundError(
            f"{what} was deleted (its segment {segment} is gone)", segment=segment
        )

    sync: StateSynchronizer[T] = StateSynchronizer(
        what,
        segment,
        segments,
        encode=_encoder(serializer, what),
        decode=_decoder(serializer, what, segment),
        initial=lambda: initial,
        gone=gone,
        attempts_max=attempts_max,
        scheduler=scheduler,
    )
    sync.fetch_updates()
    return sync


def _encoder(serializer: Serializer[T], what: str) -> Callable[[T], bytes]:
    def encode(state: T) -> bytes:
        try:
            return serialized_bytes(serializer.serialize(state))
        except PravegaError:
            raise
        except Exception as e:  # a user's serializer: its error, typed
            raise SerializationError(
                f"the state of {what} does not serialize: {e!r}",
                data=None,
                segment=None,
                offset=None,
                key=None,
            ) from e

    return encode


def _decoder(serializer: Serializer[T], what: str, segment: str) -> Callable[[bytes], T]:
    def decode(value: bytes) -> T:
        try:
            return serializer.deserialize(value)
        except Exception as e:  # SerializationError too: say which synchronizer
            raise SerializationError(
                f"the stored state of {what} (in {segment}) does not deserialize with this "
                f"serializer: {e!r}",
                data=value,
                segment=segment,
                offset=None,
                key=STATE_KEY,
            ) from None

    return decode
