"""configure_logging: the one switch for quiet program logs, and what Ray and Spark read of it
(the end-to-end check runs a program: tests/actors/test_metrics_export.py)."""

from __future__ import annotations

import logging
import os
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
