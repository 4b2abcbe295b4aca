"""configure_logging: the one switch for quiet program logs, and what Ray and Spark read of it
(the end-to-end check runs a program: tests/actors/test_metrics_export.py)."""

from __future__ import annotations

import io
import logging
import math
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pravega_ray import logging_setup
from pravega_ray.spark import session

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(autouse=True)
def restore(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts unconfigured and leaves the process as it found it."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    monkeypatch.setattr(logging_setup, "_verbose", False)
    monkeypatch.setattr(logging_setup, "_configured", False)
    monkeypatch.setattr(logging_setup, "_handler", None)
    monkeypatch.delenv("RAY_DATA_DISABLE_PROGRESS_BARS", raising=False)
    monkeypatch.delenv("RAY_DEDUP_LOGS_SKIP_REGEX", raising=False)
    yield
    root.setLevel(level)
    root.handlers[:] = handlers


def test_quiet_by_default_only_once_a_program_asks() -> None:
    assert not logging_setup.quiet_requested() and not logging_setup.verbose_logging()
    logging_setup.configure_logging(False)
    assert logging_setup.quiet_requested()
    assert logging.getLogger().level == logging.WARNING
    assert os.environ["RAY_DATA_DISABLE_PROGRESS_BARS"] == "1"
    logging_setup.configure_logging(True)  # the last call wins
    assert logging_setup.verbose_logging() and not logging_setup.quiet_requested()
    assert logging.getLogger().level == logging.INFO


def test_configure_logging_adds_at_most_one_handler() -> None:
    root = logging.getLogger()
    root.handlers[:] = []
    for verbose in (False, True, False):
        logging_setup.configure_logging(verbose)
    assert len(root.handlers) == 1


def test_ray_deprecation_notices_are_hidden_only_when_quiet() -> None:
    logging_setup.quiet_ray_notices()
    (hide,) = [
        f
        for f in logging.getLogger("ray").filters
        if isinstance(f, logging_setup._HideDeprecationNotices)
    ]

    def record(message: str, level: int = logging.WARNING) -> logging.LogRecord:
        return logging.LogRecord("ray", level, __file__, 1, message, None, None)

    notice = record("DeprecationWarning: `ray.worker.global_worker` is a private attribute")
    assert hide.filter(notice)  # nobody asked for quiet logs
    logging_setup.configure_logging(False)
    assert not hide.filter(notice)
    assert hide.filter(record("a real warning")) and hide.filter(record("x", logging.ERROR))
    logging_setup.quiet_ray_notices()
    token = "ray._private.authentication.authentication_token_setup"
    assert logging.getLogger(token).level == logging.ERROR
    logging_setup.configure_logging(True)
    logging_setup.quiet_ray_notices()
    assert hide.filter(notice) and logging.getLogger(token).level == logging.NOTSET


def test_quiet_spark_configs_keep_the_callers_options_and_the_jdk17_flags() -> None:
    quiet = session.quiet_spark_configs()
    path = quiet["spark.log4j.config.file.name"].removeprefix("file:")
    assert Path(path).read_text() == session.QUIET_LOG4J2
    assert session.quiet_spark_configs() == quiet  # written once, found again
    mine = {"spark.driver.extraJavaOptions": "-Dmine=1", "spark.ui.showConsoleProgress": "true"}
    merged = session.merge_spark_configs(session._merged_options(quiet, mine))
    options = merged["spark.driver.extraJavaOptions"].split()
    assert options[0] == "-Dmine=1"
    assert "--add-opens=java.base/java.lang=ALL-UNNAMED" in options
    assert merged["spark.ui.showConsoleProgress"] == "true"  # the caller wins
    assert merged["spark.log4j.config.file.name"] == f"file:{path}"


# Lines as `make demo` once printed them (Ray's prefixes are added by the driver).
JAVA_NOTICE = (
    "[2026-11-26 09:18:39,945 I 18592 18636] gcs_client.cc:96: "
    "GcsClient has no Cluster ID set, and won't fetch from GCS."
)
RAYDP_NOTICE = (
    "DeprecationWarning: `ray.worker.global_worker` is a private attribute and access will be "
    "removed in a future Ray version."
)


def test_quiet_programs_skip_exactly_the_two_known_forwarded_notices() -> None:
    logging_setup.configure_logging(False)
    skip = re.compile(os.environ["RAY_DEDUP_LOGS_SKIP_REGEX"])
    assert skip.search(JAVA_NOTICE) and skip.search(RAYDP_NOTICE)
    for line in (
        JAVA_NOTICE.replace(" I ", " W "),  # the same text at WARNING shows
        JAVA_NOTICE.replace(" I ", " E "),
        "[2026-11-26 09:18:39,945 E 18592 18636] gcs_client.cc:120: Failed to get cluster ID",
        "DeprecationWarning: `ray.worker.other` is a private attribute and access will be removed",
        "ERROR scenario: GcsClient has no Cluster ID set, and won't fetch from GCS. (an echo)",
    ):
        assert not skip.search(line), line
    logging_setup.configure_logging(True)
    assert "RAY_DEDUP_LOGS_SKIP_REGEX" not in os.environ


def test_a_users_own_skip_pattern_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_DEDUP_LOGS_SKIP_REGEX", "my noise")
    logging_setup.configure_logging(False)
    logging_setup.configure_logging(False)  # idempotent
    skip = re.compile(os.environ["RAY_DEDUP_LOGS_SKIP_REGEX"])
    assert skip.search("my noise") and skip.search(JAVA_NOTICE)
    assert os.environ["RAY_DEDUP_LOGS_SKIP_REGEX"].count("gcs_client") == 1
    logging_setup.configure_logging(True)
    assert os.environ["RAY_DEDUP_LOGS_SKIP_REGEX"] == "my noise"


def test_the_spark_driver_jvms_stderr_is_relayed_without_the_java_notice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``init_spark`` launches the driver JVM through pyspark's ``launch_gateway`` inside
    ``_driver_stderr_relayed``: here a stand-in launch runs a process that writes the notice
    between two real lines, with the ``popen_kwargs`` the block passes."""
    import pyspark.context

    script = (
        "import sys; "
        f"sys.stderr.write('a warning before\\n' + {JAVA_NOTICE!r} + '\\nan ERROR after\\n')"
    )
    launched: list[subprocess.Popen[bytes]] = []

    class Gateway:
        proc: subprocess.Popen[bytes]

    def launch_gateway(conf: object = None, popen_kwargs: dict | None = None) -> Gateway:
        gateway = Gateway()
        gateway.proc = subprocess.Popen([sys.executable, "-c", script], **(popen_kwargs or {}))
        launched.append(gateway.proc)
        return gateway

    monkeypatch.setattr(pyspark.context, "launch_gateway", launch_gateway)
    relayed = io.StringIO()
    monkeypatch.setattr(sys, "stderr", relayed)
    with session._driver_stderr_relayed():
        pyspark.context.launch_gateway(None)
    assert pyspark.context.launch_gateway is launch_gateway  # restored
    (process,) = launched
    assert process.wait(timeout=10) == 0
    for thread in threading.enumerate():
        if thread.name == "pravega-ray-spark-driver-stderr":
            thread.join(timeout=10)
    assert relayed.getvalue() == "a warning before\nan ERROR after\n"


def test_the_node_start_local_starts_does_not_count_the_actors_as_task_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pravega_ray import cluster

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    variables = cluster.node_environment(container_count=4, retention_buckets=4)
    actors = 4 + 4 + len(cluster.LONG_LIVED_ACTORS)
    assert actors == 15  # the demo's cluster (two controller instances)
    assert variables == {
        "RAY_prestart_worker_first_driver": "0",
        "RAY_worker_maximum_startup_concurrency": str(2 + math.ceil(actors / 4)),
    }
    # Ray's warning: (Python workers - 8 I/O) >= 4 x concurrency. The actors plus Ray's
    # default allowance of 4 task workers per CPU stay under it.
    assert actors + 4 * 2 < 4 * int(variables["RAY_worker_maximum_startup_concurrency"])
    one_cpu = cluster.node_environment(1, 1, num_cpus=1)
    assert one_cpu["RAY_worker_maximum_startup_concurrency"] == str(1 + math.ceil(9 / 4))

    concurrency, prestart = sorted(variables, reverse=True)  # Ray's names: RAY_<config>
    monkeypatch.setenv(concurrency, "3")
    monkeypatch.delenv(prestart, raising=False)
    with cluster._environment_while(variables):
        assert os.environ[concurrency] == "3"  # the user's
        assert os.environ[prestart] == "0"
    assert prestart not in os.environ and os.environ[concurrency] == "3"
