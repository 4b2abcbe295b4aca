"""Quiet logs for programs built on pravega-ray (the demo, the examples, the CLI).

:func:`configure_logging` is called once at a program's start, before Ray or Spark
starts. Unless ``verbose``, only the program's own lines and real warnings and errors
reach the terminal: the startup noise of Ray, Spark and the JVM is lowered by
configuration (log levels), never by discarding errors. See ``docs/operations.md``.
"""

from __future__ import annotations

import logging

__all__ = ["configure_logging", "verbose_logging"]

_verbose = False


def configure_logging(verbose: bool = False) -> None:
    """Set the log levels of this process: WARNING for libraries unless ``verbose``.

    Idempotent; the last call wins. Ray and Spark started later in this process read
    the choice (:func:`verbose_logging`).
    """
    global _verbose
    _verbose = bool(verbose)
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(logging.INFO if verbose else logging.WARNING)


def verbose_logging() -> bool:
    """True if :func:`configure_logging` asked for verbose logs."""
    return _verbose
