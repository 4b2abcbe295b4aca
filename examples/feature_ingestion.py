"""ML feature ingestion: sensor events -> stream -> Ray Data windowed features -> feature
stream (exactly once) -> a training loop.

Run with ``make demo-features`` (or ``.venv/bin/python examples/feature_ingestion.py``;
``-v`` for Ray's, Spark's and pravega-ray's own logs). It

1. starts the embedded cluster (local Ray, data under ./.pravega-data-features),
2. writes synthetic sensor readings (JSON events, routing key = sensor) to ``sensors``
   exactly once (``pr.data.write_stream``): each sensor's temperature drifts, and its
   vibration follows the temperature,
3. reads them as a Ray Data dataset with typed columns (``pr.data.read_stream`` with
   ``pr.JsonSerializer(schema=...)``); ``map_batches`` (pyarrow, numpy) sums each block's
   readings per sensor and fixed window, and the driver combines the blocks' partials into
   each window's temperature mean, std, min and max and mean vibration (exact, no shuffle),
4. writes the feature rows to ``features`` exactly once (``pr.data.write_stream``: a
   transaction per write task, all committed at the end) as Arrow IPC record batches,
5. reads the features back (``pr.data.read_stream`` with ``pr.ArrowIpcSerializer``) and
   trains a linear model predicting a window's mean vibration from its temperature
   features by mini-batch SGD (numpy),
6. prints a table: events in, windows, features written and read back, loss before and after,
   and the end-to-end readings/s (readings written, features computed, written and read
   back; ``--readings 1000000`` for a million readings).

Each run uses a fresh scope, so it can be run again on the same data dir.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")

import numpy as np
import pyarrow as pa

import pravega_ray as pr
from pravega_ray.logging_setup import configure_logging

DATA_DIR = ".pravega-data-features"
SENSOR_SCHEMA = pa.schema(
    [
        pa.field("sensor", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("temperature", pa.float64()),
        pa.field("vibration", pa.float64()),
    ]
)
FEATURE_COLUMNS = ("temp_mean", "temp_std", "temp_min", "temp_max")
FEATURE_SCHEMA = pa.schema(
    [
        pa.field("sensor", pa.string()),
        pa.field("window", pa.int64()),
        pa.field("readings", pa.int64()),
        *(pa.field(name, pa.float64()) for name in FEATURE_COLUMNS),
        pa.field("vibration_mean", pa.float64()),
    ]
)


def step(message: str) -> None:
    print(f"[features] {message}", flush=True)


# --- 1. sensor events -------------------------------------------------------------------------
def sensor_table(sensors: int, per_sensor: int, seed: int = 7) -> pa.Table:
    """Synthetic readings (SENSOR_SCHEMA), sensor by sensor: a random-walk temperature per
    sensor; vibration follows it."""
    rng = np.random.default_rng(seed)
    parts = []
    for s in range(sensors):
        temperature = 20.0 + 5.0 * s + np.cumsum(rng.normal(0.0, 0.5, per_sensor))
        vibration = 0.3 * temperature + 0.02 * (temperature - temperature.mean()) ** 2
        vibration += rng.normal(0.0, 0.2, per_sensor)
        parts.append(
            pa.table(
                {
                    "sensor": pa.array([f"sensor-{s:02d}"] * per_sensor, pa.string()),
                    "seq": pa.array(np.arange(per_sensor), pa.int64()),
                    "temperature": temperature,
                    "vibration": vibration,
                },
                schema=SENSOR_SCHEMA,
            )
        )
    return pa.concat_tables(parts)


def sensor_readings(sensors: int, per_sensor: int, seed: int = 7) -> list[dict[str, Any]]:
    """:func:`sensor_table` as one dict per reading."""
    rows: list[dict[str, Any]] = sensor_table(sensors, per_sensor, seed).to_pylist()
    return rows


def write_readings(
    cluster: pr.Cluster, scope: str, readings: pa.Table
) -> pr.data.WriteStreamResult:
    """The readings as JSON events (routing key = sensor) into ``sensors``, exactly once: a
    Ray Data write, one transaction per write task."""
    import ray.data

    blocks = max(1, min(4, readings.num_rows // 100_000))
    size = -(-readings.num_rows // blocks)
    return pr.data.write_stream(
        ray.data.from_arrow([readings.slice(i, size) for i in range(0, readings.num_rows, size)]),
        f"{scope}/sensors",
        routing_key_column="sensor",
        serializer=pr.JsonSerializer(schema=SENSOR_SCHEMA),
        cluster=cluster,
    )


# --- 2. windowed features (Ray Data) ------------------------------------------------------------
def window_partials(batch: pa.Table, window: int) -> pa.Table:
    """``map_batches`` body: per (sensor, fixed window) of this batch, the count, sums, min and
    max that the windows' features are made of. Exact however blocks split a window: the
    driver combines the partials of every block (:func:`combine_windows`)."""
    temperature = batch.column("temperature").to_numpy()
    table = pa.table(
        {
            "sensor": batch.column("sensor"),
            "window": pa.array(batch.column("seq").to_numpy() // window, type=pa.int64()),
            "temperature": temperature,
            "temperature_squared": temperature**2,
            "vibration": batch.column("vibration"),
        }
    )
    return table.group_by(["sensor", "window"]).aggregate(
        [
            ("temperature", "count"),
            ("temperature", "sum"),
            ("temperature_squared", "sum"),
            ("temperature", "min"),
            ("temperature", "max"),
            ("vibration", "sum"),
        ]
    )


def combine_windows(partials: pa.Table) -> pa.Table:
    """The feature rows (FEATURE_SCHEMA), one per (sensor, window), from all partials."""
    whole = partials.group_by(["sensor", "window"]).aggregate(
        [
            ("temperature_count", "sum"),
            ("temperature_sum", "sum"),
            ("temperature_squared_sum", "sum"),
            ("temperature_min", "min"),
            ("temperature_max", "max"),
            ("vibration_sum", "sum"),
        ]
    )
    whole = whole.sort_by([("sensor", "ascending"), ("window", "ascending")])
    count = whole.column("temperature_count_sum").to_numpy()
    mean = whole.column("temperature_sum_sum").to_numpy() / count
    square = whole.column("temperature_squared_sum_sum").to_numpy() / count
    return pa.table(
        {
            "sensor": whole.column("sensor"),
            "window": whole.column("window"),
            "readings": pa.array(count, type=pa.int64()),
            "temp_mean": mean,
            "temp_std": np.sqrt(np.maximum(square - mean**2, 0.0)),
            "temp_min": whole.column("temperature_min_min"),
            "temp_max": whole.column("temperature_max_max"),
            "vibration_mean": whole.column("vibration_sum_sum").to_numpy() / count,
        },
        schema=FEATURE_SCHEMA,
    )


def compute_features(scope: str, window: int, cluster: pr.Cluster) -> pa.Table:
    """The feature rows of ``scope/sensors``: partials per block in Ray Data, combined here."""
    import ray

    readings = pr.data.read_stream(
        f"{scope}/sensors", serializer=pr.JsonSerializer(schema=SENSOR_SCHEMA), cluster=cluster
    )
    partials = readings.map_batches(
        window_partials, fn_args=(window,), batch_format="pyarrow", batch_size=None
    )
    return combine_windows(pa.concat_tables(ray.get(partials.to_arrow_refs())))


# --- 3. training --------------------------------------------------------------------------------
def train(
    table: pa.Table, epochs: int, seed: int = 11, learning_rate: float = 0.05
) -> tuple[float, float]:
    """Mini-batch SGD of a linear model (vibration mean ~ temperature features); MSE before
    (all weights 0) and after, on standardized features."""
    x = np.column_stack([table.column(name).to_numpy() for name in FEATURE_COLUMNS])
    x = (x - x.mean(axis=0)) / np.maximum(x.std(axis=0), 1e-9)
    y = table.column("vibration_mean").to_numpy()
    weights, bias = np.zeros(x.shape[1]), 0.0

    def loss() -> float:
        return float(np.mean((x @ weights + bias - y) ** 2))

    before = loss()
    rng = np.random.default_rng(seed)
    batch = max(1, min(32, len(y)))
    for _ in range(epochs):
        order = rng.permutation(len(y))
        for first in range(0, len(y), batch):
            rows = order[first : first + batch]
            error = x[rows] @ weights + bias - y[rows]
            weights -= learning_rate * 2.0 * x[rows].T @ error / len(rows)
            bias -= learning_rate * 2.0 * float(error.mean())
    return before, loss()


# --- the pipeline -------------------------------------------------------------------------------
def run(
    cluster: pr.Cluster,
    scope: str,
    *,
    sensors: int = 8,
    per_sensor: int = 1500,
    window: int = 50,
    epochs: int = 30,
) -> dict[str, Any]:
    """The whole pipeline on a running cluster; returns what happened (the table's rows)."""
    started = time.monotonic()
    manager = cluster.stream_manager()
    manager.create_scope(scope)
    for stream, segments in (("sensors", 3), ("features", 2)):
        manager.create_stream(
            scope, stream, pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(segments))
        )

    readings = sensor_table(sensors, per_sensor)
    step(f"writing {readings.num_rows:,} sensor readings to {scope}/sensors exactly once ...")
    ingest_started = time.monotonic()
    write_readings(cluster, scope, readings)
    phases = {"readings written": time.monotonic() - ingest_started}

    step(f"computing features over windows of {window} readings (Ray Data) ...")
    features = compute_features(scope, window, cluster)
    phases["features computed (read, map_batches)"] = time.monotonic() - ingest_started
    step(f"writing {features.num_rows} feature rows to {scope}/features exactly once ...")
    import ray.data

    written = pr.data.write_stream(
        ray.data.from_arrow(features),
        f"{scope}/features",
        routing_key_column="sensor",
        serializer=pr.ArrowIpcSerializer(FEATURE_SCHEMA),
        cluster=cluster,
    )

    phases["features written"] = time.monotonic() - ingest_started
    step("reading the features back into a training loop ...")
    back = pr.data.read_stream(
        f"{scope}/features", serializer=pr.ArrowIpcSerializer(FEATURE_SCHEMA), cluster=cluster
    )
    table = pa.concat_tables(
        [pa.Table.from_pydict(b) for b in back.iter_batches(batch_format="numpy")]
    )
    sensor_windows = zip(
        table.column("sensor").to_pylist(), table.column("window").to_pylist(), strict=True
    )
    keys = set(sensor_windows)
    expected_windows = sensors * -(-per_sensor // window)
    if len(keys) != table.num_rows or table.num_rows != expected_windows:
        raise RuntimeError(
            f"expected {expected_windows} feature rows once each, read {table.num_rows} "
            f"({len(keys)} distinct)"
        )
    ingest_s = time.monotonic() - ingest_started  # readings in -> features committed, read back
    phases["features read back"] = ingest_s
    loss_before, loss_after = train(table, epochs)
    return {
        "events in": readings.num_rows,
        "sensors": sensors,
        "windows": expected_windows,
        "feature events written (Arrow IPC batches)": written.events,
        "write transactions committed": written.transactions,
        "feature rows read back": table.num_rows,
        "readings per window": window,
        "training loss before (MSE)": round(loss_before, 4),
        "training loss after (MSE)": round(loss_after, 4),
        **{f"seconds to: {name}": round(at, 1) for name, at in phases.items()},
        "seconds": round(time.monotonic() - started, 1),
        "end-to-end readings/s (write, features, write, read back)": int(
            readings.num_rows / ingest_s
        ),
    }


def print_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="feature ingestion")
    table.add_column("what")
    table.add_column("value", justify="right")
    for name, value in summary.items():
        table.add_row(name, f"{value:,}" if isinstance(value, int) else str(value))
    Console().print(table)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="show library logs")
    parser.add_argument("--sensors", type=int, default=8)
    parser.add_argument("--readings-per-sensor", type=int, default=1500)
    parser.add_argument("--readings", type=int, help="readings in all (or per sensor, above)")
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--data-dir", default=DATA_DIR)
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    if not args.verbose:  # Ray Data's progress lines (INFO), in this program only
        import ray.data  # noqa: F401 (first: importing it sets its logger's level)

        logging.getLogger("ray.data").setLevel(logging.WARNING)

    step(f"starting the embedded cluster (local Ray, data in {args.data_dir}) ...")
    cluster = pr.start_local(args.data_dir)
    try:
        summary = run(
            cluster,
            f"features-{uuid.uuid4().hex[:8]}",
            sensors=args.sensors,
            per_sensor=(
                args.readings_per_sensor
                if args.readings is None
                else max(1, -(-args.readings // args.sensors))
            ),
            window=args.window,
        )
        print_summary(summary)
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
