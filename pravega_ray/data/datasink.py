"""``pr.data.write_stream``: a Ray Data datasink writing a dataset into a stream exactly once.

*design* One transaction per write task; one durable record per write (``write_log.py``)::

    driver: check arguments, stream and schema    -> typed errors, nothing written
            read the write's record               -> COMMITTED: return (nothing written)
                                                     COMMITTING: finish those commits, return
                                                     OPEN/ABORTED (a dead run): abort its
                                                     transactions, start a new run
    write task (Ray, retried if its worker dies): on its first non-empty block: begin_txn,
            record the txn id, then per block: rows -> events, write; then flush;
            returns (task index, txn id, events, bytes)
    driver pinger: every lease_s / 3 reads the record and pings every recorded transaction
            (a finished task no longer pings its own)
    on_write_complete: record COMMITTING + the returned txn ids (in task order), abort every
            other recorded txn (killed attempts), commit the returned ones in order, record
            COMMITTED
    on_write_failed: abort every recorded txn, record ABORTED

A write task whose worker dies leaves a transaction that no task returned: it is never
committed and the driver aborts it at the end of the write. The one gap: a task killed
between ``begin_txn`` and recording its id leaves an empty transaction the controller
aborts when its lease runs out (it holds no events).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pravega_ray.constants import EVENT_HEADER_BYTES, TXN_LEASE_S_MAX
from pravega_ray.contracts.arguments import check_seconds
from pravega_ray.contracts.records import StreamState
from pravega_ray.data.write_log import WriteLog, WriteRecord, WriteState, check_write_id
from pravega_ray.data.write_rows import check_schema, check_serializer_kind, events_of_table
from pravega_ray.errors import (
    IllegalStateError,
    InvalidArgumentError,
    PravegaError,
    StreamSealedError,
    TxnFailedError,
    TxnNotFoundError,
)
from pravega_ray.naming import parse_scoped_stream

if TYPE_CHECKING:
    import ray.data

    from pravega_ray.client.transactional_writer import TransactionalEventStreamWriter

__all__ = [
    "WRITE_TASK_CPUS",
    "WRITE_TASK_RETRIES_MAX",
    "WRITE_TXN_LEASE_S",
    "PartitionResult",
    "WriteRun",
    "WriteStreamResult",
    "committed_result",
    "write_partition",
    "write_stream",
]

log = logging.getLogger(__name__)

WRITE_TXN_LEASE_S = 120.0
"""Lease of a write's transactions. Write tasks ping their own while they run and the
driver pings every recorded one until the write ends, so it only matters if the driver
dies: a write resumed (same ``write_id``) later than this after the driver's last ping
finds the uncommitted transactions timed out (TxnFailedError)."""

WRITE_TASK_RETRIES_MAX = 3
"""A write task whose worker dies is run again at most this often (Ray Data's default is
unbounded)."""

WRITE_TASK_CPUS = 0.5
"""CPUs a write task holds: writing is mostly waiting on the containers. (0.25 was tried
beside a Spark executor: Ray Data's resource budget still ran one write task at a time.)"""


@dataclasses.dataclass(frozen=True)
class WriteStreamResult:
    """What :func:`write_stream` did.

    ``outcome``: ``"written"`` (this call wrote and committed), ``"already-committed"``
    (``write_id`` was committed before: nothing written) or ``"resumed"`` (a previous run
    of ``write_id`` died while committing; this call finished its commits and wrote
    nothing new). ``events``/``bytes`` (payload bytes) and ``transactions`` describe the
    committed write in every case.
    """

    write_id: str
    outcome: str
    events: int
    bytes: int
    transactions: int


@dataclasses.dataclass(frozen=True)
class PartitionResult:
    """What one write task (a Ray Data write task, a Spark partition) wrote: its index
    (commit order), its transaction (None if it had no rows), events and payload bytes."""

    task_index: int
    txn_id: str | None
    events: int
    bytes: int


class _RecordPinger:
    """Driver side: keeps every transaction the write's record lists alive until the end."""

    def __init__(
        self, writer: TransactionalEventStreamWriter[Any], write_log: WriteLog, write_id: str
    ) -> None:
        self._writer = writer
        self._log = write_log
        self._write_id = write_id
        self._seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="pravega-write-ping")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._writer.ping_interval_s):
            try:
                record = self._log.get(self._write_id)
                for txn_id in record.txns if record is not None else ():
                    if txn_id not in self._seen:
                        self._seen.add(txn_id)
                        self._writer.get_txn(uuid.UUID(txn_id))  # tracked: pinged from now on
                self._writer.ping_all()
            except PravegaError as e:  # keep trying; the commit reports a lost transaction
                log.info("write %s: ping round failed: %r", self._write_id, e)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _abort_quietly(
    writer: TransactionalEventStreamWriter[Any], txn_ids: Iterable[uuid.UUID]
) -> None:
    """Abort each transaction; one that ended already (aborted, forgotten) is skipped."""
    for txn_id in txn_ids:
        try:
            writer.get_txn(txn_id).abort()
        except (TxnFailedError, TxnNotFoundError) as e:
            log.info("abort %s: %r", txn_id, e)


def _finish_commit(
    writer: TransactionalEventStreamWriter[Any], write_log: WriteLog, record: WriteRecord
) -> WriteRecord:
    """Commit a COMMITTING record's transactions in order, abort its others, record COMMITTED.

    Committing a committed transaction does nothing, so this is safe to repeat. A
    transaction to commit that is forgotten (TxnNotFoundError) completed more than
    TXN_COMPLETED_KEEP_S ago; one that is aborted (its lease ran out) raises
    TxnFailedError: that write is lost in part and the record stays COMMITTING.
    """
    commit = set(record.commit)
    _abort_quietly(writer, [uuid.UUID(t) for t in record.txns if t not in commit])
    for txn_id in record.commit_ids():
        try:
            writer.get_txn(txn_id).commit()
        except TxnNotFoundError:
            log.warning(
                "write %s: transaction %s is forgotten; taken as committed", record.write_id, txn_id
            )

    def committed(current: WriteRecord) -> WriteRecord:
        if current.run_id != record.run_id or current.state is not WriteState.COMMITTING:
            raise IllegalStateError(f"write {record.write_id!r} changed while committing")
        return current.finished(WriteState.COMMITTED)

    return write_log.update(record.write_id, committed)


def _result(record: WriteRecord, outcome: str) -> WriteStreamResult:
    return WriteStreamResult(
        record.write_id, outcome, record.events, record.bytes, len(record.commit)
    )


def write_partition(
    cluster: Any,
    scope: str,
    stream: str,
    write_id: str,
    run_id: str,
    tables: Iterable[pa.Table],
    routing_key_column: str | None,
    serializer: Any,
    lease_s: float,
    task_index: int,
) -> PartitionResult:
    """One write task: the rows of ``tables`` into one transaction of ``scope/stream``.

    On the first non-empty table: begin the transaction and record it in the write's record
    (run ``run_id``) before writing to it; then per table: rows -> events, written; at the
    end one flush (every event durable in the transaction before the result is returned).
    Commits nothing: the driver commits what the tasks return. On any error the transaction
    is aborted and the error raised. The write log's table must exist (the driver made it).
    """
    write_log = WriteLog(cluster, scope, stream, create=False)
    writer = cluster.create_transactional_writer(scope, stream, lease_s=lease_s)
    txn = None
    events = size = 0
    try:
        for table in tables:
            pending = events_of_table(table, routing_key_column, serializer)
            if not pending:
                continue
            if txn is None:
                txn = writer.begin_txn()
                write_log.add_txn(write_id, run_id, txn.txn_id)
            size += _write_batched(txn, pending)
            events += len(pending)
        if txn is not None:
            txn.flush()  # every event durable in the txn before the task returns it
    except BaseException:
        if txn is not None:
            _abort_quietly(writer, [txn.txn_id])
        raise
    finally:
        writer.close()
        write_log.close()
    return PartitionResult(task_index, None if txn is None else str(txn.txn_id), events, size)


WRITE_BATCH_BYTES = 1 << 20
"""A write task hands a transaction its rows as ``write_events`` batches of one routing key
of up to this many bytes (each payload plus its 8-byte header); a larger payload alone."""


def _write_batched(txn: Any, pending: list[tuple[str | None, bytes]]) -> int:
    """Queue ``pending`` (routing key, payload) in ``txn``: the payloads of each key in their
    order, in ``write_events`` batches (one append block each, so far fewer calls than
    events); rows without a key in batches of their own, each batch on a segment the writer
    picks. Order is kept per key, which is all a stream orders. Returns the payload bytes."""
    batches: dict[str | None, list[bytes]] = {}
    framed: dict[str | None, int] = {}
    total = 0
    for routing_key, payload in pending:
        size = len(payload) + EVENT_HEADER_BYTES
        total += len(payload)
        if size > WRITE_BATCH_BYTES:  # alone, with write_event's own checks
            if routing_key in batches:
                txn.write_events(batches.pop(routing_key), routing_key)
                framed.pop(routing_key)
            txn.write_event(payload, routing_key)
            continue
        if framed.get(routing_key, 0) + size > WRITE_BATCH_BYTES:
            txn.write_events(batches.pop(routing_key), routing_key)
            framed[routing_key] = 0
        batches.setdefault(routing_key, []).append(payload)
        framed[routing_key] = framed.get(routing_key, 0) + size
    for routing_key, batch in batches.items():
        txn.write_events(batch, routing_key)
    return total


class WriteRun:
    """The driver's side of one run of an exactly-once write (Ray Data or Spark).

    :meth:`begin` checks the write's record: a committed write id returns its result, one
    that died committing is finished; otherwise a new OPEN run starts and a pinger keeps
    every transaction the record lists alive. The caller then runs :func:`write_partition`
    for each task (with :attr:`write_id`, :attr:`run_id`) and ends with :meth:`commit`
    (the tasks' results; one per task index) or :meth:`abort`, then :meth:`close`.
    """

    def __init__(
        self,
        writer: TransactionalEventStreamWriter[Any],
        write_log: WriteLog,
        write_id: str,
        run_id: str,
        given_id: bool,
    ) -> None:
        self.write_id = write_id
        self.run_id = run_id
        self._writer = writer
        self._log = write_log
        self._given_id = given_id
        self._pinger = _RecordPinger(writer, write_log, write_id)

    @staticmethod
    def begin(
        cluster: Any, scope: str, stream: str, write_id: str | None, lease_s: float
    ) -> WriteRun | WriteStreamResult:
        """A new run of ``write_id`` (a random id if None), or the result of a write id
        committed before (``already-committed``) or finished now (``resumed``).
        IllegalStateError if another driver runs the same write id. First runs one step of
        the write log's expiry (``write_log.py``, *retention*): a write id whose record
        expired (finished over ``WRITE_LOG_RETENTION_S`` ago) writes again."""
        the_id = write_id if write_id is not None else f"auto-{uuid.uuid4().hex}"
        write_log = WriteLog(cluster, scope, stream)
        _expire_quietly(write_log)
        writer = cluster.create_transactional_writer(scope, stream, lease_s=lease_s)
        try:
            previous = write_log.get(the_id)
            if previous is not None and previous.state is WriteState.COMMITTED:
                result = _result(previous, "already-committed")
            elif previous is not None and previous.state is WriteState.COMMITTING:
                result = _result(_finish_commit(writer, write_log, previous), "resumed")
            else:
                if previous is not None:  # OPEN (its driver died) or ABORTED: start over
                    _abort_quietly(writer, previous.txn_ids())
                run = write_log.start(the_id, previous)
                return WriteRun(writer, write_log, the_id, run.run_id, write_id is not None)
        except BaseException:
            writer.close()
            write_log.close()
            raise
        writer.close()
        write_log.close()
        return result

    def commit(self, returns: Iterable[PartitionResult]) -> WriteStreamResult:
        """Record COMMITTING with the returned transactions (in task order; a task index
        returned twice keeps its first, the other transaction is aborted as a killed
        attempt's), commit them, record COMMITTED. A random write id's record is removed."""
        self._pinger.stop()
        by_task: dict[int, PartitionResult] = {}
        for r in returns:
            by_task.setdefault(r.task_index, r)
        chosen = [by_task[i] for i in sorted(by_task)]
        commit = tuple(r.txn_id for r in chosen if r.txn_id is not None)

        def intent(current: WriteRecord) -> WriteRecord:
            if current.run_id != self.run_id or current.state is not WriteState.OPEN:
                raise IllegalStateError(f"write {self.write_id!r} was taken over by another run")
            return dataclasses.replace(
                current,
                state=WriteState.COMMITTING,
                commit=commit,
                events=sum(r.events for r in chosen),
                bytes=sum(r.bytes for r in chosen),
            )

        record = self._log.update(self.write_id, intent)
        done = _finish_commit(self._writer, self._log, record)
        if not self._given_id:
            _remove_quietly(self._log, self.write_id)
        return _result(done, "written")

    def abort(self, error: BaseException) -> None:
        """After a failed write: abort every recorded transaction and record ABORTED (a
        random write id's record is removed). Leaves a COMMITTING record alone (a resumed
        write finishes it). Never raises: cleanup errors are logged."""
        self._pinger.stop()
        try:
            record = self._log.get(self.write_id)
            if record is None or record.run_id != self.run_id:
                return
            if record.state is WriteState.COMMITTING:
                return  # the commit intent stands: a resumed write finishes it
            _abort_quietly(self._writer, record.txn_ids())

            def aborted(current: WriteRecord) -> WriteRecord:
                if current.run_id != self.run_id or current.state is not WriteState.OPEN:
                    raise IllegalStateError(f"write {self.write_id!r} changed")
                return current.finished(WriteState.ABORTED)

            self._log.update(self.write_id, aborted)
            if not self._given_id:
                _remove_quietly(self._log, self.write_id)
        except PravegaError as e:  # the write's own error matters more
            log.warning("write %s: cleanup after %r failed: %r", self.write_id, error, e)

    def close(self) -> None:
        self._pinger.stop()
        self._writer.close()
        self._log.close()


def _datasink_class() -> type:
    from ray.data import Datasink
    from ray.data.block import BlockAccessor

    class _StreamDatasink(Datasink[PartitionResult]):
        """Write tasks' side of :func:`write_stream`. Pickled to the tasks without its
        driver-only part (the transactional writer, write log and result)."""

        def __init__(
            self,
            namespace: str,
            scope: str,
            stream: str,
            write_id: str,
            run_id: str,
            routing_key_column: str | None,
            serializer: Any,
            lease_s: float,
            min_rows: int | None,
        ) -> None:
            self._namespace = namespace
            self._scope = scope
            self._stream = stream
            self._write_id = write_id
            self._run_id = run_id
            self._key_column = routing_key_column
            self._serializer = serializer
            self._lease_s = lease_s
            self._min_rows = min_rows
            self._driver: WriteRun | None = None
            self.result: WriteStreamResult | None = None

        def __getstate__(self) -> dict[str, Any]:
            state = dict(self.__dict__)
            state["_driver"] = None
            return state

        def get_name(self) -> str:
            return "PravegaStream"

        @property
        def min_rows_per_write(self) -> int | None:
            return self._min_rows

        # --- write task ------------------------------------------------------------------
        def write(self, blocks: Iterable[Any], ctx: Any) -> PartitionResult:
            from pravega_ray.cluster import connect

            cluster = connect(namespace=self._namespace)
            return write_partition(
                cluster,
                self._scope,
                self._stream,
                self._write_id,
                self._run_id,
                (BlockAccessor.for_block(block).to_arrow() for block in blocks),
                self._key_column,
                self._serializer,
                self._lease_s,
                int(ctx.task_idx),
            )

        # --- driver ------------------------------------------------------------------------
        def on_write_complete(self, write_result: Any) -> None:
            assert self._driver is not None, "on_write_complete runs on the driver"
            self.result = self._driver.commit(write_result.write_returns)

        def on_write_failed(self, error: Exception) -> None:
            if self._driver is not None:
                self._driver.abort(error)

    return _StreamDatasink


def _check_stream(cluster: Any, scope: str, stream: str) -> None:
    info = cluster.stream_manager().get_stream_info(scope, stream)
    if info.state in (StreamState.SEALED, StreamState.SEALING):
        raise StreamSealedError(f"{scope}/{stream} is sealed: it takes no writes")


def _check_options(lease_s: object, min_rows_per_write: object, concurrency: object) -> float:
    lease = check_seconds("lease_s", lease_s, TXN_LEASE_S_MAX, positive=True)
    for name, value in (("min_rows_per_write", min_rows_per_write), ("concurrency", concurrency)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise InvalidArgumentError(f"{name} must be an int >= 1 or None, got {value!r}")
    return lease


def _task_error(error: BaseException) -> BaseException:
    """The pravega-ray error at the root of a failed write task, else ``error`` itself."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, PravegaError):
            return current
        cause = getattr(current, "cause", None)
        current = (
            cause
            if isinstance(cause, BaseException)
            else (current.__cause__ or current.__context__)
        )
    return error


def write_stream(
    ds: ray.data.Dataset,
    scoped_stream: str,
    routing_key_column: str | None = None,
    serializer: Any = None,
    *,
    cluster: Any = None,
    write_id: str | None = None,
    lease_s: float = WRITE_TXN_LEASE_S,
    min_rows_per_write: int | None = None,
    concurrency: int | None = None,
) -> WriteStreamResult:
    """Write the rows of ``ds`` into ``scoped_stream`` exactly once; see docs/pipelines.md.

    Rows -> events: ``serializer`` None: column ``event`` (binary or string, UTF-8) is the
    payload; a table serializer (``arrow_schema``/``encode_table``): its events for each
    routing key's rows; any other serializer: ``serialize(row)`` per row, the row a dict
    without the routing key column. ``routing_key_column``: the events' routing keys (string
    or integer column, as str); a null key means no key (the event goes to any segment).
    Events of one key keep the dataset's order.

    Exactly once: one transaction per write task, all committed after every task
    succeeded (in task order), all aborted if one failed; a task retried after its worker
    died leaves its first attempt's transaction uncommitted, and it is aborted before this
    returns. ``write_id`` makes the call idempotent: once committed, a call with the same id
    writes nothing; one that died committing is finished by the next. Without it a
    random id is used and its record removed at the end. ``lease_s``: the transactions'
    lease (see WRITE_TXN_LEASE_S); ``min_rows_per_write``: rows per write task (fewer,
    larger transactions); ``concurrency``: write tasks at once.

    Raises, before anything is written: InvalidNameError, InvalidArgumentError (arguments,
    a missing column, a column of the wrong type), ScopeNotFoundError, StreamNotFoundError,
    StreamSealedError, IllegalStateError (Ray not initialized, another driver running the
    same write id). From the write tasks, with nothing visible: InvalidArgumentError (a
    null event), EventTooLargeError (an event over MAX_EVENT_SIZE_BYTES, 8 MiB: large
    events are not supported in transactions), SerializationError, or the task's error.
    """
    scope, stream = parse_scoped_stream(scoped_stream)
    if routing_key_column is not None and not isinstance(routing_key_column, str):
        raise InvalidArgumentError(
            f"routing_key_column must be a str or None, got {routing_key_column!r}"
        )
    check_serializer_kind(serializer)
    given_id = check_write_id(write_id)
    lease = _check_options(lease_s, min_rows_per_write, concurrency)
    import ray
    import ray.data

    if not isinstance(ds, ray.data.Dataset):
        raise InvalidArgumentError(f"ds must be a ray.data.Dataset, got {type(ds).__name__}")
    if not ray.is_initialized():
        raise IllegalStateError("Ray is not initialized: call pr.start_local() or pr.connect()")
    if cluster is None:
        from pravega_ray.cluster import connect

        cluster = connect()
    _check_stream(cluster, scope, stream)
    schema = ds.schema(fetch_if_missing=True)
    if schema is not None:
        check_schema(_arrow_schema(schema), routing_key_column, serializer)

    run = WriteRun.begin(cluster, scope, stream, given_id, lease)
    if isinstance(run, WriteStreamResult):
        return run
    try:
        sink = _datasink_class()(
            cluster.namespace,
            scope,
            stream,
            run.write_id,
            run.run_id,
            routing_key_column,
            serializer,
            lease,
            min_rows_per_write,
        )
        sink._driver = run
        try:
            ds.write_datasink(
                sink,
                ray_remote_args={
                    "num_cpus": WRITE_TASK_CPUS,
                    "max_retries": WRITE_TASK_RETRIES_MAX,
                },
                concurrency=concurrency,
            )
        except Exception as e:
            root = _task_error(e)
            if root is e:
                raise
            raise root from e
        result: WriteStreamResult | None = sink.result
        if result is None:  # pragma: no cover - Ray Data always calls on_write_complete
            raise IllegalStateError(f"write {run.write_id!r}: the sink was never completed")
        return result
    finally:
        run.close()


def committed_result(
    scoped_stream: str, write_id: str, *, cluster: Any = None
) -> WriteStreamResult | None:
    """The result of write ``write_id`` of ``scoped_stream`` if it is committed, else None
    (no record, or one still open, committing or aborted)."""
    scope, stream = parse_scoped_stream(scoped_stream)
    check_write_id(write_id)
    if cluster is None:
        from pravega_ray.cluster import connect

        cluster = connect()
    write_log = WriteLog(cluster, scope, stream)
    try:
        record = write_log.get(write_id)
    finally:
        write_log.close()
    if record is None or record.state is not WriteState.COMMITTED:
        return None
    return _result(record, "already-committed")


def _expire_quietly(write_log: WriteLog) -> None:
    """One step of the write log's expiry (``write_log.py``, *retention*), before the write
    reads its own record; a failure only delays it."""
    try:
        removed = write_log.expire()
    except PravegaError as e:
        log.info("write log of %s: expiry step failed: %r", write_log.scope, e)
        return
    if removed:
        log.info("write log of %s: %d finished write records expired", write_log.scope, removed)


def _remove_quietly(write_log: WriteLog, write_id: str) -> None:
    try:
        write_log.remove(write_id)
    except PravegaError as e:
        log.info("write %s: removing its record failed: %r", write_id, e)


def _arrow_schema(schema: Any) -> pa.Schema:
    """A Ray Data schema as an Arrow schema (Ray's ``Schema`` wraps one in ``base_schema``)."""
    base = getattr(schema, "base_schema", schema)
    if isinstance(base, pa.Schema):
        return base
    raise InvalidArgumentError(f"the dataset's blocks are not Arrow tables ({schema!r})")
