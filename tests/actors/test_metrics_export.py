"""pravega-ray's metrics read back from Ray's Prometheus export on the session's cluster:
write and read events, then scrape each node's ``/metrics`` until they appear."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest

import pravega_ray as pr

pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]

EVENTS = 300
SCRAPE_WAIT_S = 45.0
"""Ray's workers report to the metrics agent every ``metrics_report_interval_ms`` (10 s)."""

_SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape() -> Samples:
    """Every sample of every alive node's export, by metric name (``ray_`` prefix and a
    counter's ``_total`` suffix removed)."""
    import ray

    samples: Samples = defaultdict(list)
    for node in ray.nodes():
        if not node.get("Alive") or not node.get("MetricsExportPort"):
            continue
        url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
        try:
            text = urllib.request.urlopen(url, timeout=5).read().decode()
        except OSError:
            continue  # the agent is starting: the next poll tries again
        for line in text.splitlines():
            match = _SAMPLE.match(line)
            if match is None or not match[1].startswith("ray_pravega_"):
                continue
            name = match[1].removeprefix("ray_")
            labels = dict(_LABEL.findall(match[2] or ""))
            samples[name].append((labels, float(match[3])))
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` (counters: ``name_total``) with all of ``labels``."""
    found = samples.get(f"{name}_total") or samples.get(name, [])
    return sum(v for ls, v in found if all(ls.get(k) == x for k, x in labels.items()))


def test_metrics_of_writes_reads_and_workflows_reach_the_prometheus_export(
    cluster: pr.Cluster, unique_name: str
) -> None:
    scope, stream, group = unique_name, "metered", "lag"
    manager = cluster.stream_manager()
    manager.create_scope(scope)
    manager.create_stream(scope, stream, pr.StreamConfiguration(pr.ScalingPolicy.fixed(2)))
    with cluster.create_writer(scope, stream, pr.JsonSerializer()) as writer:
        for i in range(EVENTS):
            writer.write_event({"i": i}, routing_key=f"k{i % 7}")
        writer.flush()
    cluster.create_reader_group(scope, group, pr.ReaderGroupConfig.for_streams(f"{scope}/{stream}"))
    unread = cluster.reader_group(scope, group).unread_bytes()  # the driver records the lag
    assert unread > 0
    read = 0
    with cluster.create_reader("r", scope, group, pr.JsonSerializer()) as reader:
        while read < EVENTS and reader.read_next_event(timeout_s=10.0) is not None:
            read += 1
    assert read == EVENTS
    manager.seal_stream(scope, stream)  # a workflow of the request event processor

    wanted = {
        "appended": lambda s: (
            total(s, "pravega_segmentstore_appended_events", scope=scope, stream=stream) >= EVENTS
        ),
        "bytes": lambda s: (
            total(s, "pravega_segmentstore_appended_bytes", stream=stream)
            >= EVENTS * len('{"i": 0}')
        ),
        "latency": lambda s: total(s, "pravega_segmentstore_append_latency_seconds_count") >= 1,
        "group commits": lambda s: total(s, "pravega_durable_log_group_commit_events_count") >= 1,
        "lag": lambda s: (
            total(s, "pravega_reader_group_unread_bytes", scope=scope, group=group) == unread
        ),
        "cache": lambda s: (
            total(s, "pravega_read_cache_hits") + total(s, "pravega_read_cache_misses") >= 1
        ),
        "log size": lambda s: "pravega_durable_log_bytes" in s,
        "seal": lambda s: (
            total(s, "pravega_controller_workflows", workflow="seal", outcome="done") >= 1
        ),
    }
    deadline = time.monotonic() + SCRAPE_WAIT_S
    missing = list(wanted)
    while missing:
        samples = scrape()
        missing = [name for name, check in wanted.items() if not check(samples)]
        if not missing:
            break
        assert time.monotonic() < deadline, f"not exported within {SCRAPE_WAIT_S} s: {missing}"
        time.sleep(1.0)
    histogram = samples["pravega_segmentstore_append_latency_seconds_bucket"]
    assert {ls.get("le") for ls, _ in histogram} >= {"0.001", "+Inf"}
    assert all(v >= 0 for _, v in samples["pravega_durable_log_bytes"])


def test_a_quiet_program_prints_its_own_lines_and_every_error(ray_session: None) -> None:
    """``configure_logging(False)``, then Ray joined as ``start_local`` joins it (the
    session's Ray, as a second driver): no INFO lines from Ray or the actors, while an
    actor's ERROR line, a failed call and a raised error all show."""
    import ray

    scenario = Path(__file__).with_name("logging_scenario.py")
    root = scenario.parents[2]
    address = ray.get_runtime_context().gcs_address
    env = {**os.environ, "RAY_ADDRESS": address, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, str(scenario)],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        cwd=root,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "[scenario] ray started" in out and "[scenario] caught ValueError" in out, out
    assert "actor error line" in out, out
    assert "RuntimeError: the program's own error" in out and "Traceback" in out, out
    assert "actor info line" not in out, out
    assert " INFO " not in out, out


SPARK_SCENARIO_TIMEOUT_S = 600
"""A cluster of 14 actors, a Spark session and its first job: about a minute on an idle 2-core
machine, several on a loaded one."""

ERROR_LINE = re.compile(r",\d{3} [EC] \d+ \d+\]|error", re.IGNORECASE)
"""A line reporting an error: Ray's C++ ERROR or FATAL lines, anything naming an error (Ray's
error messages, tracebacks' last lines, log lines at ERROR)."""


@pytest.mark.spark
@pytest.mark.timeout(SPARK_SCENARIO_TIMEOUT_S + 30)
def test_a_quiet_program_with_spark_prints_only_its_own_lines_and_errors(
    tmp_path: Path,
) -> None:
    """The demo's Spark step in a quiet program with a cluster of its own (a subprocess, as
    ``make demo`` runs it): each line is the program's own, the Spark driver JVM's error line,
    the program's traceback, or an error Ray reports (a loaded machine makes some). It used to
    print Ray's worker-count warnings, Ray's Java startup notice from each JVM RayDP starts and
    a DeprecationWarning from RayDP's master actor too (docs/operations.md, "Logs")."""
    scenario = Path(__file__).with_name("spark_logging_scenario.py")
    root = scenario.parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # as `make demo`
    # Only so that a loaded machine does not abort Ray's start (as the CLI does): no output.
    # RAY_ADDRESS=local: a Ray of its own, even if a head left running on the machine is
    # what `ray.init()` would otherwise join.
    env.update(PYTHONPATH=str(root), RAY_agent_register_timeout_ms="120000", RAY_ADDRESS="local")
    done = subprocess.run(
        [sys.executable, str(scenario), str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=SPARK_SCENARIO_TIMEOUT_S,
        env=env,
        cwd=tmp_path,
    )
    report = f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 1, report
    own = [line for line in done.stdout.splitlines() if line.startswith("[spark-scenario] ")]
    assert own == [
        "[spark-scenario] cluster started",
        "[spark-scenario] wrote 100 events",
        "[spark-scenario] spark started",
        "[spark-scenario] spark read 100 events",
    ], report
    err = done.stderr.splitlines()
    assert "ERROR: the driver JVM's own error line" in err, report
    traceback_at = err.index("Traceback (most recent call last):")
    assert err[-1] == "RuntimeError: the program's own error", report
    others = [
        line
        for line in done.stdout.splitlines() + err[:traceback_at]
        if line.strip() and not line.startswith("[spark-scenario] ")
    ]
    assert [line for line in others if not ERROR_LINE.search(line)] == [], report
