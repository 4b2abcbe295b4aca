"""examples/feature_ingestion.py, small, on the session's cluster (its ``run`` takes a cluster,
so the test starts no Ray of its own)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pytest

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "feature_ingestion.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("feature_ingestion_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Not put in sys.modules: Ray's workers cannot import it, so its map functions must be
    # pickled by value, as they are when the example runs as a script (``__main__``).
    spec.loader.exec_module(module)
    return module


def test_window_features_match_a_plain_computation() -> None:
    example = load_example()
    rows = example.sensor_readings(sensors=1, per_sensor=120)
    table = pa.Table.from_pylist(rows, schema=example.SENSOR_SCHEMA)
    # Blocks that split windows anywhere: the combined features are the same.
    partials = pa.concat_tables(
        [
            example.window_partials(table.slice(a, b - a), 50)
            for a, b in ((0, 33), (33, 107), (107, 120))
        ]
    )
    out = example.combine_windows(partials)
    assert out.schema == example.FEATURE_SCHEMA
    assert out.column("window").to_pylist() == [0, 1, 2]
    assert out.column("readings").to_pylist() == [50, 50, 20]
    temperatures = [r["temperature"] for r in rows]
    for w, first in enumerate((0, 50, 100)):
        chunk = temperatures[first : first + 50]
        mean = sum(chunk) / len(chunk)
        assert out.column("temp_mean")[w].as_py() == pytest.approx(mean)
        assert out.column("temp_min")[w].as_py() == min(chunk)
        assert out.column("temp_max")[w].as_py() == max(chunk)
        std = (sum((t - mean) ** 2 for t in chunk) / len(chunk)) ** 0.5
        assert out.column("temp_std")[w].as_py() == pytest.approx(std, rel=1e-6)


def test_feature_ingestion_example_runs_end_to_end(cluster, unique_name, capsys) -> None:  # type: ignore[no-untyped-def]
    example = load_example()
    summary = example.run(cluster, unique_name, sensors=3, per_sensor=200, window=50, epochs=20)

    assert summary["events in"] == 600
    assert summary["windows"] == summary["feature rows read back"] == 3 * 4  # once each
    assert summary["feature events written (Arrow IPC batches)"] >= 1
    assert summary["write transactions committed"] >= 1
    assert summary["training loss after (MSE)"] < summary["training loss before (MSE)"]
    example.print_summary(summary)
    assert "feature rows read back" in capsys.readouterr().out
