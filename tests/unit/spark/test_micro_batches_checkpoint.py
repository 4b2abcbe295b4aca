"""The micro-batch source's checkpoint directory and argument checks (no Ray, no Spark).

``micro_batches`` checks everything before it touches the cluster, so these pass a
stand-in cluster object that is never used; the batches themselves are tested in
tests/integration/test_spark_micro_batches.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pravega_ray as pr
from pravega_ray.errors import DataCorruptionError, InvalidArgumentError, InvalidNameError
from pravega_ray.spark.micro_batches import (
    CHECKPOINT_BATCHES_RETAINED,
    _Checkpoint,
    micro_batches,
)

pytestmark = pytest.mark.timeout(30)
STREAM = "sc/st"
NOT_USED = object()  # a cluster that must not be called


def cut(offset: int, stream: str = "st") -> pr.StreamCut:
    return pr.StreamCut("sc", stream, {0: offset, 1: 2 * offset})


def test_a_new_location_starts_at_batch_zero(tmp_path: Path) -> None:
    checkpoint = _Checkpoint(tmp_path / "cp", STREAM)
    resume = checkpoint.resume()
    assert (resume.batch_id, resume.start, resume.replay_end) == (0, None, None)
    assert json.loads((tmp_path / "cp" / "metadata").read_text())["stream"] == STREAM


def test_an_uncommitted_batch_is_replayed_with_its_cuts(tmp_path: Path) -> None:
    checkpoint = _Checkpoint(tmp_path, STREAM)
    checkpoint.write_offsets(0, cut(0), cut(10))
    checkpoint.write_commit(0)
    checkpoint.write_offsets(1, cut(10), cut(25))
    resume = _Checkpoint(tmp_path, STREAM).resume()
    assert (resume.batch_id, resume.start, resume.replay_end) == (1, cut(10), cut(25))
    checkpoint.write_commit(1)
    resume = _Checkpoint(tmp_path, STREAM).resume()
    assert (resume.batch_id, resume.start, resume.replay_end) == (2, cut(25), None)
    assert not [p for p in tmp_path.rglob(".*")]  # no tmp file left behind


def test_old_entries_beyond_the_retained_count_are_removed(tmp_path: Path) -> None:
    checkpoint = _Checkpoint(tmp_path, STREAM)
    total = CHECKPOINT_BATCHES_RETAINED + 5
    for n in range(total):
        checkpoint.write_offsets(n, cut(n), cut(n + 1))
        checkpoint.write_commit(n)
    for kind in ("offsets", "commits"):
        kept = sorted(int(p.name) for p in (tmp_path / kind).iterdir())
        assert kept == list(range(5, total))
    assert checkpoint.resume().start == cut(total)


def test_a_location_that_is_a_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(InvalidArgumentError, match="not a directory"):
        micro_batches(None, STREAM, path, cluster=NOT_USED)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        micro_batches(None, STREAM, path / "below", cluster=NOT_USED)  # type: ignore[arg-type]
    (tmp_path / "cp").mkdir()
    (tmp_path / "cp" / "offsets").write_text("x")  # a file where a directory must be
    with pytest.raises(InvalidArgumentError):
        micro_batches(None, STREAM, tmp_path / "cp", cluster=NOT_USED)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        micro_batches(None, STREAM, 42, cluster=NOT_USED)  # type: ignore[arg-type]


def test_a_checkpoint_of_another_stream_is_refused(tmp_path: Path) -> None:
    _Checkpoint(tmp_path, "sc/other")
    with pytest.raises(InvalidArgumentError, match="sc/other"):
        micro_batches(None, STREAM, tmp_path, cluster=NOT_USED)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("damage", "file"),
    [
        (lambda root: (root / "metadata").write_text("{not json"), "metadata"),
        (lambda root: (root / "metadata").write_text('{"v": 9, "stream": "sc/st"}'), "metadata"),
        (lambda root: (root / "offsets" / "1").write_text('{"v": 1}'), "offsets/1"),
        (lambda root: (root / "offsets" / "1").write_bytes(b"\xff\xfe"), "offsets/1"),
        (lambda root: (root / "offsets" / "junk").write_text("{}"), "offsets/junk"),
        (
            lambda root: (root / "offsets" / "1").write_text(
                json.dumps({"v": 1, "batch_id": 1, "start": cut(1).to_base64(), "end": "@@"})
            ),
            "offsets/1",
        ),
        (
            lambda root: (root / "offsets" / "1").write_text(
                json.dumps(
                    {
                        "v": 1,
                        "batch_id": 1,
                        "start": cut(1).to_base64(),
                        "end": cut(2, "other").to_base64(),
                    }
                )
            ),
            "offsets/1",
        ),
        (
            lambda root: (root / "offsets" / "1").write_text(
                json.dumps(
                    {"v": 1, "batch_id": 7, "start": cut(1).to_base64(), "end": cut(2).to_base64()}
                )
            ),
            "offsets/1",
        ),
    ],
)
def test_a_damaged_checkpoint_file_is_corruption_naming_it(
    tmp_path: Path, damage: object, file: str
) -> None:
    checkpoint = _Checkpoint(tmp_path, STREAM)
    checkpoint.write_offsets(0, cut(0), cut(1))
    checkpoint.write_commit(0)
    damage(tmp_path)  # type: ignore[operator]
    with pytest.raises(DataCorruptionError) as e:
        micro_batches(None, STREAM, tmp_path, cluster=NOT_USED)  # type: ignore[arg-type]
    assert str(tmp_path / file) in str(e.value)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"approx_bytes_per_trigger": 0},
        {"approx_bytes_per_trigger": -5},
        {"approx_bytes_per_trigger": float("nan")},
        {"approx_bytes_per_trigger": float("inf")},
        {"approx_bytes_per_trigger": 10.5},
        {"approx_bytes_per_trigger": True},
        {"approx_bytes_per_trigger": "1MB"},
        {"poll_interval_s": 0},
        {"poll_interval_s": float("nan")},
        {"idle_timeout_s": -1},
        {"max_batches": 0},
        {"max_batches": 1.0},
        {"start_cut": cut(0, "other")},
        {"start_cut": pr.StreamCut.UNBOUNDED},
        {"start_cut": "head"},
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(tmp_path: Path, kwargs: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(InvalidArgumentError):
        micro_batches(None, STREAM, tmp_path / "cp", cluster=NOT_USED, **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "cp").exists()  # nothing was created


@pytest.mark.parametrize("name", ["no-slash", "a/b/c", "sc/bad name", ""])
def test_a_malformed_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidNameError):
        micro_batches(None, name, tmp_path, cluster=NOT_USED)  # type: ignore[arg-type]
