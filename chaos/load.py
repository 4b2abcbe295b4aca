"""The load of a chaos run: writers, transactional writers, a reader group and key-value
clients, each on threads of the driver, recording what the system acknowledged.

Everything goes through the public API (``docs/api.md``). Each part runs until
:meth:`Load.stop`; failures the system reports are recorded (a write whose future failed has an
unknown outcome), never raised out of a thread, so a run always reaches its checks. The
records are what :mod:`chaos.checker` judges:

* :class:`KeyedWriters`: ``writers`` writers, each owning ``keys / writers`` routing keys,
  writing ``k <key> <seq>`` events paced to ``rate`` events/s each, plus one large event
  (over 8 MiB) every ``large_every_s`` on a key of its own.
* :class:`TxnWriters`: transactional writers, each beginning a transaction of 10-200 events
  in turn: half committed, a quarter aborted, a quarter left to time out (written by a writer
  that is closed at once, so nothing pings it).
* :class:`GroupReaders`: a reader group's ``readers`` readers, with explicit checkpoints
  every ``checkpoint_every_s``; each reader closes and rejoins now and then, and
  :meth:`GroupReaders.kill` abandons one without ``close()`` (declared offline at the
  position of the last event it returned). The subscriber group of the retained stream is
  one reader of its own that never rejoins.
* :class:`KvClients`: clients making conditional updates (``replace`` at the version read) of
  counters kept as lists of update ids.
"""

from __future__ import annotations

import contextlib
import logging
import random
import sys
import threading
import time
import traceback
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pravega_ray as pr
from chaos.checker import Read, TxnOutcome, decode, encode_keyed, encode_txn
from pravega_ray.constants import MIB

logger = logging.getLogger(__name__)

SCOPE = "chaos"
KEYED_STREAM = "keyed"
KEYED_PREFIX = "w"
"""The keyed stream's writers' keys start with it (their large events' key: ``wlarge``)."""
TXN_STREAM = "txns"
GROUP = "all"
TABLE = "counters"
SCALING_STREAM = "scaling"
RETAINED_STREAM = "retained"
SUBSCRIBER_GROUP = "subscriber"
PIPELINE_STREAM = "pipeline"
SETTLE_S = 60.0
"""How long :meth:`TxnWriters.settle` waits for a transaction whose lease ran out to end."""
SETTLE_EVERY_S = 30.0
"""While the load runs, transactions are settled this often (:meth:`TxnWriters.settle`)."""
JOIN_S = 120.0
"""How long :meth:`Load.stop` waits for a part's threads."""


UNTIMED = "untimed"
"""The kind of an acknowledgement :class:`Acks` records without a latency."""


@dataclass
class Acks:
    """What writers were told, per key: acknowledged and failed (unknown) sequence numbers,
    and (monotonic time, seconds, key, sequence number) of each acknowledgement:
    ``latencies`` of the small events written one by one, ``slow`` of the others by kind
    (``"large"`` events, the rows of a ``"pipeline"`` write: the whole call, once per
    write; its other rows are ``UNTIMED``), so that the thousand rows of one pipeline
    write do not pass for a thousand slow events."""

    acked: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    unknown: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    latencies: list[tuple[float, float, str, int]] = field(default_factory=list)
    slow: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def done(
        self,
        key: str,
        seq: int,
        started: float,
        error: BaseException | None,
        kind: str = "event",
    ) -> None:
        now = time.monotonic()
        with self.lock:
            if error is None:
                self.acked[key].add(seq)
                self.unknown[key].discard(seq)  # a pipeline row: pending until its call returned
                if kind == "event":
                    self.latencies.append((now, now - started, key, seq))
                elif kind != UNTIMED:
                    self.slow[kind].append(now - started)
            else:
                self.unknown[key].add(seq)
                if str(error) != "pending":
                    self.errors[type(error).__name__] += 1


class Part:
    """A piece of load: threads running :meth:`_run` until :meth:`stop`."""

    name = "part"

    def __init__(self, cluster: Any, seed: int) -> None:
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.failures: list[str] = []

    def spawn(self, target: Any, *args: Any) -> None:
        def guarded() -> None:
            try:
                target(*args)
            except BaseException as e:  # recorded: a run always reaches its checks
                logger.exception("%s: a thread stopped", self.name)
                self.failures.append(f"{self.name}: {type(e).__name__}: {e}")

        thread = threading.Thread(target=guarded, name=f"chaos-{self.name}", daemon=True)
        self.threads.append(thread)
        thread.start()

    def stop(self) -> None:
        self.stopping.set()
        deadline = time.monotonic() + JOIN_S
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                frame = sys._current_frames().get(thread.ident or -1)
                where = "".join(traceback.format_stack(frame)[-6:]) if frame else "?"
                self.failures.append(
                    f"{self.name}: a thread did not stop in {JOIN_S}s; it was at:\n{where}"
                )


class KeyedWriters(Part):
    name = "writers"

    def __init__(
        self,
        cluster: Any,
        seed: int,
        *,
        stream: str = KEYED_STREAM,
        prefix: str = KEYED_PREFIX,
        acks: Acks | None = None,
        writers: int = 4,
        keys: int = 64,
        rate: float | Callable[[float], float] = 200.0,
        event_bytes: int = 100,
        large_every_s: float = 5.0,
    ) -> None:
        super().__init__(cluster, seed)
        self.name = f"writers of {stream}"
        self.stream = stream
        self.acks = acks if acks is not None else Acks()
        self.written = 0
        rate_at = rate if callable(rate) else (lambda _elapsed, r=float(rate): r)
        for w in range(writers):
            owned = [f"{prefix}{w}k{k}" for k in range(w, keys, writers)]
            self.spawn(self._write, owned, rate_at, event_bytes)
        if large_every_s > 0:
            self.spawn(self._write_large, large_every_s, f"{prefix}large")

    def _write(self, keys: list[str], rate_at: Callable[[float], float], size: int) -> None:
        """Round-robin over ``keys``, ``rate_at(seconds since the start)`` events/s."""
        seqs = dict.fromkeys(keys, 0)
        with self.cluster.create_writer(SCOPE, self.stream) as writer:
            started = time.monotonic()
            due = started
            n = 0
            while not self.stopping.is_set():
                key = keys[n % len(keys)]
                self._one(writer, key, seqs[key], encode_keyed(key, seqs[key], size))
                seqs[key] += 1
                n += 1
                due += 1.0 / rate_at(time.monotonic() - started)
                ahead = due - time.monotonic()
                if ahead > 0:
                    self.stopping.wait(ahead)
            writer.flush()

    def _one(self, writer: Any, key: str, seq: int, payload: bytes, kind: str = "event") -> None:
        begun = time.monotonic()
        try:
            future = writer.write_event(payload, routing_key=key)
        except pr.PravegaError as e:  # not queued: cannot be read; counts as unknown
            self.acks.done(key, seq, begun, e, kind)
            return
        self.written += 1
        future.add_done_callback(lambda f: self.acks.done(key, seq, begun, f.exception(0), kind))

    def _write_large(self, every_s: float, key: str) -> None:
        """A large event ``every_s`` after the last one was acknowledged (or failed)."""
        seq = 0
        with self.cluster.create_writer(SCOPE, self.stream) as writer:
            while not self.stopping.wait(every_s):
                self._one(writer, key, seq, encode_keyed(key, seq, 9 * MIB), "large")
                seq += 1
                with contextlib.suppress(Exception):  # recorded by the event's future
                    writer.flush()


class TxnWriters(Part):
    name = "transactions"

    def __init__(
        self,
        cluster: Any,
        seed: int,
        *,
        writers: int = 2,
        every_s: float = 2.0,
        lease_s: float = 4.0,
    ) -> None:
        super().__init__(cluster, seed)
        self.outcomes: list[TxnOutcome] = []
        self.lease_s = lease_s
        self.errors: dict[str, int] = defaultdict(int)
        self.problems: list[str] = []  # contradictions settling found
        self.settled: set[str] = set()  # tags whose end the controller confirmed (or forgot)
        self.forgotten = 0
        self._ids: dict[str, uuid.UUID] = {}
        self._recorded_at: dict[str, float] = {}
        for w in range(writers):
            self.spawn(self._run, w, every_s, random.Random(self.rng.random()))
        self.spawn(self._settle_now)

    def _run(self, w: int, every_s: float, rng: random.Random) -> None:
        writer = self.cluster.create_transactional_writer(SCOPE, TXN_STREAM, lease_s=30.0)
        try:
            n = 0
            while not self.stopping.wait(every_s * rng.uniform(0.5, 1.5)):
                tag = f"w{w}t{n}"
                n += 1
                count = rng.randint(10, 200)
                fate = rng.choice(("commit", "commit", "abort", "time_out"))
                try:
                    self._one(writer, tag, count, fate)
                except pr.PravegaError as e:  # begin failed: nothing of it exists
                    self.errors[type(e).__name__] += 1
        finally:
            writer.close()

    def _one(self, writer: Any, tag: str, count: int, fate: str) -> None:
        if fate == "time_out":  # a writer of its own, closed at once: nothing pings it
            lazy = self.cluster.create_transactional_writer(SCOPE, TXN_STREAM, lease_s=self.lease_s)
            try:
                txn = lazy.begin_txn()
                self._write(txn, tag, count)
                txn.flush()
            finally:
                lazy.close()
            self._record(tag, count, "timed_out", txn.txn_id)
            return
        txn = writer.begin_txn()
        self._ids[tag] = txn.txn_id
        try:
            self._write(txn, tag, count)
            if fate == "abort":
                txn.abort()
                self._record(tag, count, "aborted", txn.txn_id)
                return
            txn.commit()
        except pr.TxnFailedError as e:  # aborted (its lease ran out, or a failed write)
            self.errors[type(e).__name__] += 1
            self._record(tag, count, "aborted", txn.txn_id)
            return
        except Exception as e:  # the outcome is not known: settled at the end
            self.errors[type(e).__name__] += 1
            self._record(tag, count, "unknown", txn.txn_id)
            return
        self._record(tag, count, "committed", txn.txn_id)

    @staticmethod
    def _write(txn: Any, tag: str, count: int) -> None:
        for i in range(count):
            txn.write_event(encode_txn(tag, i, count, 100), routing_key=f"{tag}-{i % 8}")

    def _record(self, tag: str, count: int, status: str, txn_id: uuid.UUID) -> None:
        self._ids[tag] = txn_id
        self._recorded_at[tag] = time.monotonic()
        self.outcomes.append(TxnOutcome(tag, count, status))

    def _ended_status(self, txn_id: uuid.UUID, wait_s: float) -> Any:
        """The transaction's status once it is not OPEN or COMMITTING/ABORTING, waiting up
        to ``wait_s`` (its lease ran out long ago: the timer aborts it), else the last one.

        The handle comes from a writer closed at once: a writer pings every open
        transaction it hands out (``get_txn``), and one kept asking would keep the lease of
        the transaction it waits to see time out alive for ever (run p, seed 20261131: a
        transaction "still OPEN 60 s after the load stopped")."""
        lookup = self.cluster.create_transactional_writer(SCOPE, TXN_STREAM)
        try:
            txn = lookup.get_txn(txn_id)
        finally:
            lookup.close()  # no pings: the handle still answers check_status
        deadline = time.monotonic() + wait_s
        while True:
            status = txn.check_status()
            if status in (pr.TxnStatus.COMMITTED, pr.TxnStatus.ABORTED):
                return status
            if time.monotonic() > deadline:
                return status
            time.sleep(0.5)

    def _settle_now(self) -> None:
        """Every SETTLE_EVERY_S while the load runs: settle what ended long enough ago (the
        controller forgets a completed transaction TXN_COMPLETED_KEEP_S after it ended, 10
        minutes: a run's end is too late for those of its start)."""
        while not self.stopping.wait(SETTLE_EVERY_S):
            try:
                self.settle(older_than_s=self.lease_s + SETTLE_EVERY_S, wait_s=0.0)
            except pr.PravegaError as e:  # the controller restarting: next time
                self.errors[f"settle: {type(e).__name__}"] += 1

    def settle(self, older_than_s: float = 0.0, wait_s: float = SETTLE_S) -> None:
        """Ask the controller for the status of every transaction recorded more than
        ``older_than_s`` ago whose outcome is unknown or that was left to time out, and not
        settled yet, waiting up to ``wait_s`` for each to end. Contradictions (a timed-out one
        that committed; one still open after ``wait_s``, when that is not 0) go to
        ``problems``. A transaction the controller no longer knows (TxnNotFoundError: it
        ended over 10 minutes ago) keeps its status: the checker judges it by what was
        read (``forgotten`` counts them)."""
        now = time.monotonic()
        for i, outcome in enumerate(list(self.outcomes)):
            tag = outcome.tag
            if outcome.status not in ("unknown", "timed_out") or tag in self.settled:
                continue
            if now - self._recorded_at[tag] < older_than_s:
                continue
            try:
                status = self._ended_status(self._ids[tag], wait_s)
            except pr.TxnNotFoundError:
                self.forgotten += 1
                self.settled.add(tag)
                continue
            if status is pr.TxnStatus.COMMITTED:
                if outcome.status == "timed_out":
                    self.problems.append(f"transaction {tag} left to time out committed")
                self.outcomes[i] = TxnOutcome(tag, outcome.count, "committed")
            elif status is pr.TxnStatus.ABORTED:
                if outcome.status == "unknown":
                    self.outcomes[i] = TxnOutcome(tag, outcome.count, "aborted")
            elif wait_s > 0:
                self.problems.append(
                    f"transaction {tag} ({outcome.status}) still {status.name} "
                    f"{wait_s:.0f}s after the load stopped"
                )
            else:
                continue  # not ended yet: asked again next time
            self.settled.add(tag)


class GroupReaders(Part):
    """The readers of ``group``, one thread each (ids ``<prefix><i>``), and a thread
    initiating a checkpoint every ``checkpoint_every_s`` (none if 0). A reader rejoins every
    ``rejoin_every_s`` (x0.5-1.5; ``math.inf``: never). Truncated data a reader meets is
    recorded in ``truncated`` (the subscriber group raises on it)."""

    name = "readers"

    def __init__(
        self,
        cluster: Any,
        seed: int,
        *,
        group: str = GROUP,
        prefix: str = "r",
        readers: int = 4,
        checkpoint_every_s: float = 15.0,
        rejoin_every_s: float = 45.0,
    ) -> None:
        super().__init__(cluster, seed)
        self.name = f"readers of {group}"
        self.group_name = group
        self.reads: list[Read] = []
        self.truncated: list[str] = []
        self.kills_wanted: set[str] = set()
        self.kills_done: list[tuple[str, float]] = []
        self.checkpoints: list[tuple[str, float | None]] = []  # (name, seconds or None)
        self.errors: dict[str, int] = defaultdict(int)
        self.error_examples: dict[str, str] = {}  # the first of each kind, for the report
        self.draining = threading.Event()
        self.started = time.monotonic()
        self.journal: list[tuple[float, str, str]] = []  # (at, reader, what): joins, closes
        self.group = cluster.reader_group(SCOPE, group)
        self.ids = [f"{prefix}{i}" for i in range(readers)]
        for i, reader_id in enumerate(self.ids):
            self.spawn(self._read, reader_id, rejoin_every_s, random.Random(seed * 31 + i))
        if checkpoint_every_s > 0:
            self.spawn(self._checkpoint, checkpoint_every_s)

    def kill(self, pick: int) -> str:
        """Ask reader ``pick % readers`` to be abandoned after its next event."""
        reader_id = self.ids[pick % len(self.ids)]
        self.kills_wanted.add(reader_id)
        return reader_id

    def _read(self, reader_id: str, rejoin_every_s: float, rng: random.Random) -> None:
        while not self.stopping.is_set():
            reader = self._join(reader_id)
            rejoin_at = time.monotonic() + rejoin_every_s * rng.uniform(0.5, 1.5)
            last = None
            abandoned = False
            try:
                while not self.stopping.is_set():
                    if not self.draining.is_set() and time.monotonic() > rejoin_at:
                        break
                    if last is not None and reader_id in self.kills_wanted:
                        abandoned = True
                        break
                    try:
                        events = reader.read_next_events(100, timeout_s=0.5)
                    except pr.TruncatedDataError as e:  # raised once; the reader goes on
                        self.truncated.append(str(e))
                        continue
                    except pr.SerializationError as e:  # not ours: counted as altered
                        segment, offset = e.segment or "", e.offset or -1
                        data = e.data or b""
                        self.reads.append(decode(reader_id, segment, offset, data, self._at()))
                        reader.skip_event(e)
                        continue
                    except Exception as e:  # recorded; a reader out of the group rejoins
                        self.errors[type(e).__name__] += 1
                        self.error_examples.setdefault(type(e).__name__, repr(e)[-3000:])
                        self._note(reader_id, f"read failed: {e!r}"[:300])
                        if isinstance(e, (pr.ReaderNotInGroupError, pr.ClientClosedError)):
                            break
                        self.stopping.wait(0.5)
                        continue
                    at = self._at()
                    for event in events:
                        if event.checkpoint_name is None:
                            self.reads.append(
                                decode(reader_id, event.segment, event.offset, event.event, at)
                            )
                            last = event.position
                        else:
                            self._note(reader_id, f"checkpoint {event.checkpoint_name}")
            finally:
                if abandoned:  # no close(): its threads go on until the group drops it
                    self.kills_wanted.discard(reader_id)
                    self._declare_offline(reader_id, last)
                    self.kills_done.append((reader_id, time.monotonic()))
                    self._note(reader_id, f"abandoned, offline at {last}")
                else:
                    try:
                        reader.close()
                        self._note(reader_id, "closed")
                    except Exception as e:  # e.g. declared offline meanwhile
                        self.errors[f"close: {type(e).__name__}"] += 1
                        self._note(reader_id, f"close failed: {e!r}"[:300])

    def _declare_offline(self, reader_id: str, position: Any) -> None:
        """``reader_offline`` as an application must call it: an outcome-unknown failure
        (the state segment's container restarting) is checked with ``get_online_readers``
        and the call made again until it lands (its segments stay with it until then)."""
        while not self.stopping.is_set():
            try:
                self.group.reader_offline(reader_id, position)
                return
            except pr.PravegaError as e:
                self.errors[f"offline: {type(e).__name__}"] += 1
                self._note(reader_id, f"reader_offline failed: {e!r}"[:300])
            time.sleep(1.0)
            with contextlib.suppress(pr.PravegaError):  # asked again below if this fails
                if reader_id not in self.group.get_online_readers():
                    return

    def _at(self) -> float:
        """Seconds since ``started`` (the run's start): when a read or a journal line was."""
        return time.monotonic() - self.started

    def _note(self, reader_id: str, what: str) -> None:
        self.journal.append((round(self._at(), 2), reader_id, what))

    def _join(self, reader_id: str) -> Any:
        while True:
            try:
                reader = self.cluster.create_reader(reader_id, SCOPE, self.group_name)
                self._note(reader_id, "joined")
                return reader
            except pr.PravegaError as e:
                self._note(reader_id, f"join failed: {e!r}"[:300])
                self.errors[f"join: {type(e).__name__}"] += 1
                if self.stopping.wait(1.0):
                    raise

    def _checkpoint(self, every_s: float) -> None:
        n = 0
        while not self.stopping.wait(every_s):
            name = f"cp{n}"
            n += 1
            started = time.monotonic()
            try:
                self.group.initiate_checkpoint(name, timeout_s=60.0)
                self.checkpoints.append((name, time.monotonic() - started))
            except pr.PravegaError as e:
                self.errors[f"checkpoint: {type(e).__name__}"] += 1
                self.checkpoints.append((name, None))


class KvClients(Part):
    name = "key-values"

    def __init__(
        self, cluster: Any, seed: int, *, clients: int = 3, keys: int = 8, every_s: float = 0.5
    ) -> None:
        super().__init__(cluster, seed)
        self.keys = [f"key{k}" for k in range(keys)]
        self.acked: dict[str, list[str]] = defaultdict(list)
        self.refused: dict[str, list[str]] = defaultdict(list)
        self.unknown: dict[str, list[str]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.error_examples: dict[str, str] = {}  # the first of each kind, for the report
        table = self._table()
        for key in self.keys:
            table.put(key, [])
        for c in range(clients):
            self.spawn(self._run, c, every_s, random.Random(seed * 17 + c))

    def _table(self) -> Any:
        return self.cluster.key_value_table(
            SCOPE, TABLE, key_serializer=pr.Utf8Serializer(), value_serializer=pr.JsonSerializer()
        )

    def _run(self, c: int, every_s: float, rng: random.Random) -> None:
        table = self._table()
        n = 0
        while not self.stopping.wait(every_s):
            key = rng.choice(self.keys)
            op = f"c{c}-{n}"
            n += 1
            try:
                entry = table.get(key)
                table.replace(key, [*entry.value, op], entry.version)
            except pr.BadKeyVersionError:
                self.refused[key].append(op)
            except Exception as e:  # the outcome is not known
                self.errors[type(e).__name__] += 1
                self.error_examples.setdefault(type(e).__name__, repr(e)[-3000:])
                self.unknown[key].append(op)
            else:
                self.acked[key].append(op)

    def final(self) -> dict[str, list[str]]:
        """Each key's final value; a key that cannot be read is a failure of the part (with
        a diagnosis of its table segment, taken now, while the cluster is up) and reads as
        empty, so the check counts its acknowledged updates as lost."""
        table = self._table()
        out: dict[str, list[str]] = {}
        for key in self.keys:
            try:
                out[key] = list(table.get(key).value)
            except pr.PravegaError as e:
                self.failures.append(
                    f"{self.name}: the final read of {key} failed: {e!r}; {self._diagnose(e)}"
                )
                out[key] = []
        return out

    def _diagnose(self, error: BaseException) -> str:
        """What the damaged entry's table segment holds around the offset the error names:
        its info, the raw bytes there, and the entry offsets near it (from the start)."""
        offset = getattr(error, "offset", None)
        notes: list[str] = []
        segments = self.cluster._segments  # the harness looks inside; the API has no such call
        for partition in self._table()._partitions:
            name = partition.segment
            try:
                info = segments.get_info(name).result(30)
                notes.append(f"{name}: {info}")
                if offset is not None and 0 <= offset < info.length:
                    raw = segments.read(name, offset, 32, 0.0).result(30)
                    notes.append(f"bytes at {offset}: {raw.data[:32].hex()}")
                    boundaries, position = [], info.start_offset
                    while position < min(info.length, offset + 4096):
                        entries, position = segments.table_read_changes(
                            name, position, 65536
                        ).result(30)
                        if not entries:
                            break
                        boundaries += [e.offset for e in entries]
                    near = [b for b in boundaries if abs(b - offset) < 512]
                    notes.append(f"entry offsets near {offset}: {near}")
            except Exception as e:  # a diagnosis never stops the report
                notes.append(f"{name}: {e!r}")
        return "; ".join(notes)


class PipelineWrites(Part):
    """Every ``every_s``, ``pr.data.write_stream`` of ``rows`` rows with a ``write_id`` of its
    own, repeated with the same ``write_id`` until one call returns (a failed call's rerun is
    the pipeline's retry) and once more after that (a rerun of a finished write is a no-op).
    Write ``n``'s rows are keyed events ``p<n>``, sequence numbers in row order."""

    name = "pipeline writes"

    def __init__(
        self, cluster: Any, seed: int, acks: Acks, *, every_s: float = 60.0, rows: int = 2000
    ) -> None:
        super().__init__(cluster, seed)
        self.acks = acks
        self.results: list[tuple[str, str, int]] = []  # (write_id, outcome, events)
        self.errors: dict[str, int] = defaultdict(int)
        self.samples: dict[str, str] = {}  # an error message of each type
        if every_s > 0:
            self.spawn(self._run, every_s, rows)

    def _run(self, every_s: float, rows: int) -> None:
        import ray

        ray.data.DataContext.get_current().enable_progress_bars = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)  # its progress every 10 s
        n = 0
        first = min(every_s, 20.0)
        while not self.stopping.wait(first if n == 0 else every_s):
            key = f"p{n}"
            write_id = f"chaos-{key}"
            items = [{"event": encode_keyed(key, i, 100), "key": key} for i in range(rows)]
            begun = time.monotonic()
            for i in range(rows):  # unknown until a call returns: it may commit meanwhile
                self.acks.done(key, i, begun, RuntimeError("pending"))
            done = False
            for _attempt in range(4):  # the retry, then the rerun of a finished write
                try:
                    result = pr.data.write_stream(
                        ray.data.from_items(items, override_num_blocks=1),
                        f"{SCOPE}/{PIPELINE_STREAM}",
                        routing_key_column="key",
                        cluster=self.cluster,
                        write_id=write_id,
                        min_rows_per_write=rows,  # one block, one write task, one transaction:
                        concurrency=1,  # the cluster has 3 CPUs in all
                    )
                except Exception as e:  # a retry with the same write_id follows
                    self.errors[type(e).__name__] += 1
                    self.samples.setdefault(type(e).__name__, str(e)[:300])
                    continue
                self.results.append((write_id, str(result.outcome), result.events))
                if done:
                    break
                done = True
                for i in range(rows):
                    # The first row times the write; the others are the same call.
                    self.acks.done(key, i, begun, None, UNTIMED if i else "pipeline")
            n += 1


class TxnStreamScaler(Part):
    """Scales the transactions' stream every ``every_s``: splits its first segment, or
    merges its first two back once it has ``segments_max``, so open transactions keep
    meeting scales and commit by rolling (docs/design.md "The controller", Transactions).
    A scale refused while a rolling commit holds the stream is tried at the next turn."""

    name = "transaction stream scales"

    def __init__(
        self, cluster: Any, seed: int, *, every_s: float = 20.0, segments_max: int = 4
    ) -> None:
        super().__init__(cluster, seed)
        self.scales = 0
        self.refused = 0
        self.errors: dict[str, int] = defaultdict(int)
        if every_s > 0:
            self.spawn(self._run, every_s, segments_max)

    def _run(self, every_s: float, segments_max: int) -> None:
        mgr = self.cluster.stream_manager()
        while not self.stopping.wait(every_s * self.rng.uniform(0.5, 1.5)):
            try:
                segments = mgr.get_stream_info(SCOPE, TXN_STREAM).segments
                first = segments[0]
                if len(segments) >= segments_max:
                    second = segments[1]
                    sealed, ranges = [first, second], [(first.key_low, second.key_high)]
                else:
                    mid = (first.key_low + first.key_high) / 2
                    sealed, ranges = [first], [(first.key_low, mid), (mid, first.key_high)]
                mgr.scale_stream(
                    SCOPE, TXN_STREAM, [s.segment_id for s in sealed], ranges, timeout_s=90
                )
                self.scales += 1
            except pr.ScaleConflictError:
                self.refused += 1  # a rolling commit (or its own earlier scale) holds it
            except Exception as e:  # an actor killed mid-call: the next turn
                self.errors[type(e).__name__] += 1


class ScopeDeletes(Part):
    """Every ``every_s``, a scope of its own (``chaos-del-<n>``) filled with a stream holding
    events, a key-value table and a reader group, then ``delete_scope(recursive=True)``
    while a thread keeps creating streams in it. Checked at once (``problems``): the call
    ends, the scope is gone, and each racing create either succeeded before the delete
    (and went with the scope) or was refused (IllegalStateError, ScopeNotFoundError)."""

    name = "scope deletes"

    def __init__(self, cluster: Any, seed: int, *, every_s: float = 45.0) -> None:
        super().__init__(cluster, seed)
        self.deleted = 0
        self.refused_creates = 0
        self.problems: list[str] = []
        self.errors: dict[str, int] = defaultdict(int)
        if every_s > 0:
            self.spawn(self._run, every_s)

    def _run(self, every_s: float) -> None:
        n = 0
        while not self.stopping.wait(every_s * self.rng.uniform(0.5, 1.5)):
            scope = f"chaos-del-{n}"
            n += 1
            try:
                self._fill(scope)
            except Exception as e:  # an actor killed mid-call: delete what there is
                self.errors[f"fill {type(e).__name__}"] += 1
            racing = threading.Event()
            racer = threading.Thread(target=self._create_racing, args=(scope, racing))
            racer.start()
            try:
                for _attempt in range(5):  # a repeat of a call whose outcome is unknown
                    try:
                        self.cluster.stream_manager().delete_scope(
                            scope, recursive=True, timeout_s=120
                        )
                        break
                    except (pr.RetriableError, TimeoutError) as e:
                        # TimeoutError: not done in 120 s, it goes on (containers down for a
                        # minute and more, run q): asking again waits for the same delete.
                        self.errors[f"delete {type(e).__name__}"] += 1
                else:
                    self.problems.append(f"the recursive delete of {scope} never returned")
                    continue
                if scope in self.cluster.stream_manager().list_scopes():
                    self.problems.append(f"scope {scope} still listed after its delete")
                else:
                    self.deleted += 1
            except Exception as e:
                self.problems.append(f"the recursive delete of {scope}: {type(e).__name__}: {e}")
            finally:
                racing.set()
                racer.join(60)

    def _fill(self, scope: str) -> None:
        mgr = self.cluster.stream_manager()
        mgr.create_scope(scope)
        mgr.create_stream(scope, "s", pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
        mgr.create_key_value_table(scope, "t", 1)
        group = pr.ReaderGroupConfig.for_streams(f"{scope}/s")
        self.cluster.create_reader_group(scope, "g", group)
        with self.cluster.create_writer(scope, "s", pr.BytesSerializer()) as writer:
            for i in range(20):
                writer.write_event(b"x" * 100, routing_key=str(i))

    def _create_racing(self, scope: str, stop: threading.Event) -> None:
        mgr = self.cluster.stream_manager()
        i = 0
        while not stop.is_set():
            try:
                mgr.create_stream(scope, f"late{i}", None)
            except (pr.IllegalStateError, pr.ScopeNotFoundError):
                self.refused_creates += 1
                return  # the delete began: every later create is refused too
            except Exception as e:
                self.errors[f"create {type(e).__name__}"] += 1
            i += 1
            stop.wait(0.05)
