"""Micro-batches of a stream as Spark DataFrames, with stream cuts as offsets.

The shape of Pravega's Spark connector's micro-batch source (Spark's
``MicroBatchStream``): each trigger plans a batch ``[start cut, end cut)``, the caller
processes the batch's DataFrame, and the batch counts as done once the caller asks for
the next one. A restarted job resumes from ``checkpoint_location``.

*format* of ``checkpoint_location`` (a directory; Spark's layout, JSON bodies)::

    metadata             {"v": 1, "stream": "scope/stream"}   written on first start
    offsets/<batch_id>   {"v": 1, "batch_id": n, "start": <cut>, "end": <cut>}
    commits/<batch_id>   {"v": 1, "batch_id": n}

Cuts are ``StreamCut.to_base64()`` strings. Every file is written atomically (a hidden
``.<name>.tmp`` beside it, fsync, rename, fsync of the directory), so a crash leaves the old
file or the new one, never half of one. ``offsets/<n>`` is written *before* batch ``n`` is
yielded and ``commits/<n>`` when the caller resumes the iterator after it. On a start the
newest ``offsets`` entry without a ``commits`` entry is yielded again with the same batch id
and exactly the same cuts (the same rows); otherwise batch ids go on from the newest one,
starting at the newest committed end cut. Only the newest ``CHECKPOINT_BATCHES_RETAINED``
entries of each kind are kept.

*sizing* ``approx_bytes_per_trigger`` None: a batch runs up to the tail cut at its trigger.
Otherwise ``BatchClient.next_stream_cut`` (Pravega's ``getNextStreamCut``) picks the end: at
least ``approx_bytes_per_trigger`` bytes (event frames, 8 bytes of header each, included) when
the stream holds that many, and at most one more event per segment of the cut (each
segment's share ends at the first event boundary at or after it, which the segment store's
``locate_offset`` finds exactly through the sparse boundary index). A batch reaching a scale
event stops at the sealed segments' ends; the next batch goes on in their successors.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pravega_ray.errors import DataCorruptionError, InvalidArgumentError
from pravega_ray.naming import parse_scoped_stream
from pravega_ray.stream_cut import StreamCut

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["CHECKPOINT_BATCHES_RETAINED", "CHECKPOINT_FORMAT_VERSION", "micro_batches"]

CHECKPOINT_FORMAT_VERSION = 1
"""Version of the checkpoint files this module writes (and the only one it reads)."""
CHECKPOINT_BATCHES_RETAINED = 100
"""``offsets`` and ``commits`` entries kept (Spark's ``minBatchesToRetain`` default)."""
POLL_INTERVAL_S_DEFAULT = 1.0
"""Pause between looks for new data when a trigger finds none."""


@dataclass(frozen=True, slots=True)
class _Resume:
    """Where a start goes on: the next batch id and its start cut, or a batch to replay."""

    batch_id: int
    start: StreamCut | None  # None: the first start, at start_cut or the head
    replay_end: StreamCut | None  # set: batch ``batch_id`` is yielded again up to here


def _write_atomically(path: Path, body: dict[str, Any]) -> None:
    """Write ``body`` as JSON to ``path``: tmp file, fsync, rename, fsync of the directory."""
    tmp = path.with_name(f".{path.name}.tmp")
    data = json.dumps(body, sort_keys=True).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _read_json(path: Path) -> dict[str, Any]:
    """A checkpoint file's body; DataCorruptionError naming the file if it is not one."""
    try:
        body = json.loads(path.read_bytes())
    except (OSError, ValueError, UnicodeError) as e:
        raise DataCorruptionError(f"checkpoint file {path} is damaged: {e}") from None
    if not isinstance(body, dict) or body.get("v") != CHECKPOINT_FORMAT_VERSION:
        raise DataCorruptionError(
            f"checkpoint file {path} is damaged: not a version {CHECKPOINT_FORMAT_VERSION} body"
        )
    return body


def _batch_ids(directory: Path) -> list[int]:
    """The batch ids of ``directory``'s entries, ascending; hidden (tmp) files are skipped."""
    ids = []
    for entry in directory.iterdir():
        if entry.name.startswith("."):
            continue
        if not entry.name.isdigit() or not entry.is_file():
            raise DataCorruptionError(f"checkpoint file {entry} is damaged: not a batch entry")
        ids.append(int(entry.name))
    return sorted(ids)


def _read_cut(path: Path, body: dict[str, Any], key: str, scoped_stream: str) -> StreamCut:
    try:
        cut = StreamCut.from_base64(body[key])
    except (KeyError, InvalidArgumentError) as e:
        raise DataCorruptionError(f"checkpoint file {path} is damaged: {key}: {e}") from None
    if cut.is_unbounded or cut.scoped_stream != scoped_stream:
        raise DataCorruptionError(
            f"checkpoint file {path} is damaged: its {key} cut is not of {scoped_stream}"
        )
    return cut


class _Checkpoint:
    """The checkpoint directory of one stream's micro-batches (see the module docstring)."""

    def __init__(self, location: str | os.PathLike[str], scoped_stream: str) -> None:
        if not isinstance(location, str | os.PathLike):
            raise InvalidArgumentError(
                f"checkpoint_location must be a path, got {type(location).__name__}"
            )
        self.root = Path(location)
        self.scoped_stream = scoped_stream
        if self.root.exists() and not self.root.is_dir():
            raise InvalidArgumentError(f"checkpoint_location {self.root} is not a directory")
        self.offsets = self.root / "offsets"
        self.commits = self.root / "commits"
        try:
            for directory in (self.root, self.offsets, self.commits):
                directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a file on the way, no permission
            raise InvalidArgumentError(
                f"checkpoint_location {self.root} cannot be used as a directory: {e}"
            ) from None
        metadata = self.root / "metadata"
        if metadata.exists():
            recorded = _read_json(metadata).get("stream")
            if not isinstance(recorded, str):
                raise DataCorruptionError(f"checkpoint file {metadata} is damaged: no stream")
            if recorded != scoped_stream:
                raise InvalidArgumentError(
                    f"checkpoint_location {self.root} holds the offsets of {recorded}, "
                    f"not of {scoped_stream}"
                )
        else:
            _write_atomically(metadata, {"v": CHECKPOINT_FORMAT_VERSION, "stream": scoped_stream})

    def resume(self) -> _Resume:
        """Where to go on (reads every entry it relies on; DataCorruptionError if damaged)."""
        offsets, commits = _batch_ids(self.offsets), set(_batch_ids(self.commits))
        if not offsets:
            return _Resume(0, None, None)
        last = offsets[-1]
        path = self.offsets / str(last)
        body = _read_json(path)
        if body.get("batch_id") != last:
            raise DataCorruptionError(f"checkpoint file {path} is damaged: wrong batch_id")
        start = _read_cut(path, body, "start", self.scoped_stream)
        end = _read_cut(path, body, "end", self.scoped_stream)
        if last in commits:
            return _Resume(last + 1, end, None)
        return _Resume(last, start, end)

    def write_offsets(self, batch_id: int, start: StreamCut, end: StreamCut) -> None:
        body = {
            "v": CHECKPOINT_FORMAT_VERSION,
            "batch_id": batch_id,
            "start": start.to_base64(),
            "end": end.to_base64(),
        }
        _write_atomically(self.offsets / str(batch_id), body)

    def write_commit(self, batch_id: int) -> None:
        _write_atomically(
            self.commits / str(batch_id), {"v": CHECKPOINT_FORMAT_VERSION, "batch_id": batch_id}
        )
        oldest_kept = batch_id - CHECKPOINT_BATCHES_RETAINED + 1
        for directory in (self.offsets, self.commits):
            for old in _batch_ids(directory):
                if old >= oldest_kept:
                    break
                (directory / str(old)).unlink(missing_ok=True)


def _check_positive_number(name: str, value: object, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InvalidArgumentError(f"{name} must be a number > 0, got {value!r}")


def micro_batches(
    spark: SparkSession,
    scoped_stream: str,
    checkpoint_location: str | os.PathLike[str],
    approx_bytes_per_trigger: int | None = None,
    *,
    cluster: Any = None,
    start_cut: StreamCut | None = None,
    poll_interval_s: float = POLL_INTERVAL_S_DEFAULT,
    idle_timeout_s: float | None = None,
    max_batches: int | None = None,
    with_time_window: bool = False,
) -> Iterator[tuple[Any, ...]]:
    """Iterate ``(batch_id, DataFrame)`` over ``scoped_stream``, resumable from a checkpoint.

    Each DataFrame is ``pr.spark.read_stream(spark, scoped_stream, start, end)`` of the
    batch's cuts (the connector's columns). Batch ids count from 0; batches cover every
    event after the first start exactly once, across scale events. ``offsets/<id>`` is
    stored before a batch is yielded and ``commits/<id>`` when the iterator is resumed after
    it, so a job that stops (or dies) while processing batch ``n`` gets batch ``n`` again,
    the same rows under the same id, from a new iterator on the same location: with an
    exactly-once sink keyed by the batch id (or a transaction per batch), end-to-end exactly
    once. Closing the iterator (``break``) does not commit the batch in hand.

    ``approx_bytes_per_trigger``: the size of a batch (see the module docstring for the
    slack); None: up to the tail at each trigger. ``start_cut``: where the first start
    begins (default: the head); ignored once the checkpoint holds offsets. When a trigger
    finds no new data the iterator waits, looking again every ``poll_interval_s``; it ends
    after ``idle_timeout_s`` seconds without new data (None: never) or once it has yielded
    ``max_batches`` batches (a replayed batch counts). With ``with_time_window`` it yields
    ``(batch_id, DataFrame, TimeWindow)``: the batch's end in event time
    (``BatchClient.time_window`` of its end cut): every later batch holds only events of
    time >= ``lower_ms`` (writers noting times honestly), so event-time windows ending at
    or below it can close once this batch is processed.

    Checked before anything is yielded: InvalidNameError (malformed name);
    InvalidArgumentError (``checkpoint_location`` a file, or holding another stream's
    offsets; ``approx_bytes_per_trigger``, ``poll_interval_s``, ``idle_timeout_s`` not a
    number > 0 or not finite; ``max_batches`` not an int >= 1; ``start_cut`` not a cut of
    this stream); DataCorruptionError naming the file for a damaged checkpoint file.
    While iterating: as :func:`pravega_ray.spark.read_stream`. One iterator at a time per
    location: two jobs sharing one would both plan (and write) the same batch ids.
    """
    scope, stream = parse_scoped_stream(scoped_stream)
    scoped = f"{scope}/{stream}"
    _check_positive_number("approx_bytes_per_trigger", approx_bytes_per_trigger, allow_none=True)
    if approx_bytes_per_trigger is not None and not isinstance(approx_bytes_per_trigger, int):
        raise InvalidArgumentError(
            f"approx_bytes_per_trigger must be an int, got {approx_bytes_per_trigger!r}"
        )
    _check_positive_number("poll_interval_s", poll_interval_s, allow_none=False)
    _check_positive_number("idle_timeout_s", idle_timeout_s, allow_none=True)
    if max_batches is not None and (
        isinstance(max_batches, bool) or not isinstance(max_batches, int) or max_batches < 1
    ):
        raise InvalidArgumentError(f"max_batches must be an int >= 1, got {max_batches!r}")
    if not isinstance(with_time_window, bool):
        raise InvalidArgumentError(f"with_time_window must be a bool, got {with_time_window!r}")
    if start_cut is not None and (
        not isinstance(start_cut, StreamCut)
        or start_cut.is_unbounded
        or start_cut.scoped_stream != scoped
    ):
        raise InvalidArgumentError(f"start_cut must be a StreamCut of {scoped} or None")
    checkpoint = _Checkpoint(checkpoint_location, scoped)
    resume = checkpoint.resume()
    if cluster is None:
        from pravega_ray.cluster import connect

        cluster = connect()
    return _batches(
        spark,
        cluster,
        checkpoint,
        resume,
        approx_bytes_per_trigger,
        start_cut,
        poll_interval_s,
        idle_timeout_s,
        max_batches,
        with_time_window,
    )


def _batches(
    spark: SparkSession,
    cluster: Any,
    checkpoint: _Checkpoint,
    resume: _Resume,
    approx_bytes: int | None,
    start_cut: StreamCut | None,
    poll_interval_s: float,
    idle_timeout_s: float | None,
    max_batches: int | None,
    with_time_window: bool = False,
) -> Iterator[tuple[Any, ...]]:
    """The iterator :func:`micro_batches` returns."""
    from pravega_ray.spark.stream_reader import read_stream

    scoped = checkpoint.scoped_stream
    scope, stream = parse_scoped_stream(scoped)
    batch_client = cluster.batch_client()
    manager = cluster.stream_manager()
    batch_id = resume.batch_id
    start = resume.start or start_cut or manager.get_head_cut(scope, stream)
    end = resume.replay_end
    yielded = 0
    idle_since = time.monotonic()
    while max_batches is None or yielded < max_batches:
        if end is None:  # a new trigger
            if approx_bytes is None:
                candidate = manager.get_tail_cut(scope, stream)
            else:
                candidate = batch_client.next_stream_cut(start, approx_bytes)
            ranges = batch_client.segment_ranges(scope, stream, start, candidate)
            if not any(r.length for r in ranges):
                if idle_timeout_s is not None and time.monotonic() - idle_since >= idle_timeout_s:
                    return
                time.sleep(poll_interval_s)
                continue
            end = candidate
            checkpoint.write_offsets(batch_id, start, end)
        frame = read_stream(spark, scoped, start, end, cluster=cluster)
        if with_time_window:
            yield batch_id, frame, batch_client.time_window(end)
        else:
            yield batch_id, frame
        checkpoint.write_commit(batch_id)
        yielded += 1
        batch_id, start, end = batch_id + 1, end, None
        idle_since = time.monotonic()
