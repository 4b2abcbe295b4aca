"""Quiet logs for programs built on pravega-ray (the demo, the examples, the CLI).

:func:`configure_logging` is called once at a program's start, before Ray or Spark
starts. Unless ``verbose``, only the program's own lines and real warnings and errors
reach the terminal: the startup noise of Ray, Spark and the JVM is lowered by
configuration (log levels) where a setting reaches it, and otherwise skipped line by line
by exact patterns, each named here with its reason; never by discarding errors. See
``docs/operations.md``.

Who reads the choice (:func:`verbose_logging`):

* this module: the root logger's level (INFO or WARNING) and one handler on stderr;
  unless verbose, Ray Data's progress bars off (``RAY_DATA_DISABLE_PROGRESS_BARS``, read when
  Ray Data is imported) and two known notices in the lines Ray forwards from its workers
  skipped (:data:`FORWARDED_NOTICES`, through ``RAY_DEDUP_LOGS_SKIP_REGEX``, read when Ray is
  imported);
* ``pravega_ray.cluster`` (``start_local``/``connect``): Ray's driver log level
  (``ray.init(logging_level=...)``); in the job's runtime environment, the level of every
  pravega-ray actor (:data:`ACTOR_LOG_LEVEL_VARIABLE`); Ray's startup notices
  (:func:`quiet_ray_notices`); Ray Data's console log level and execution banners
  (:func:`quiet_ray_data`);
* ``pravega_ray.spark.init_spark``: the log4j configuration of Spark's driver JVM, Spark's
  console progress bars, the driver JVM's stderr relayed without :data:`JAVA_STARTUP_NOTICE`.

The node ``start_local`` starts is set up so that Ray's worker-count warning does not count
pravega-ray's own actors (``pravega_ray.cluster.node_environment``), verbose or not.

Errors always show: a worker's or actor's ERROR lines still reach the driver's terminal
(Ray forwards them), and a raised error prints its traceback as usual.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = [
    "ACTOR_LOG_LEVEL_VARIABLE",
    "FORWARDED_NOTICES",
    "JAVA_STARTUP_NOTICE",
    "RAYDP_DEPRECATION_NOTICE",
    "configure_logging",
    "quiet_ray_data",
    "quiet_ray_notices",
    "quiet_requested",
    "verbose_logging",
]

ACTOR_LOG_LEVEL_VARIABLE = "PRAVEGA_RAY_LOG_LEVEL"
"""Environment variable with the log level of pravega-ray's actors (``INFO`` if unset)."""

JAVA_STARTUP_NOTICE = (
    r",\d{3} I \d+ \d+\] gcs_client\.cc:\d+: "
    r"GcsClient has no Cluster ID set, and won't fetch from GCS\.$"
)
"""The INFO line (a regular expression) that Ray's Java runtime prints twice in every JVM
that joins Ray: RayDP's app master, the Spark driver and each executor. Ray's C++ core logs it
while it reads its connection settings (``ToGcsClientOptions`` in the JNI library), before
the core worker starts logging: its level is then the built-in INFO, which neither
``RAY_BACKEND_LOG_LEVEL`` (read only once the core worker starts logging, and itself
announced on stderr) nor a JVM or Spark setting changes. So a quiet program skips exactly
this line: forwarded by Ray (:data:`FORWARDED_NOTICES`) and from the Spark driver JVM's
stderr (``pravega_ray.spark.init_spark``). Ray's WARNING and ERROR lines never match."""

RAYDP_DEPRECATION_NOTICE = (
    r"DeprecationWarning: `ray\.worker\.global_worker` is a private attribute and access "
    r"will be removed"
)
"""Ray's notice (a regular expression) when RayDP's master actor reads Ray's private
``ray.worker.global_worker`` (``RayDPSparkMaster.get_ray_address``, which RayDP's
``ray_dataset_to_spark_dataframe`` calls for the Arrow blocks ``pravega_ray.spark.read_stream``
hands it). The call is RayDP's to change; doing the conversion without it would need Ray's
private core-worker API instead. Hidden as :class:`_HideDeprecationNotices` hides the
driver's own such notices."""

FORWARDED_NOTICES = (JAVA_STARTUP_NOTICE, RAYDP_DEPRECATION_NOTICE)
"""Lines from Ray's workers that a quiet program does not print: the driver skips them
through Ray's ``RAY_DEDUP_LOGS_SKIP_REGEX``, read when Ray is imported (and applied only while
Ray deduplicates logs: ``RAY_DEDUP_LOGS=0`` prints them again). Ray's own files keep them."""

_SKIP_VARIABLE = "RAY_DEDUP_LOGS_SKIP_REGEX"

_FORMAT = "%(levelname)s %(name)s: %(message)s"
_verbose = False
_configured = False
_handler: logging.Handler | None = None


def configure_logging(verbose: bool = False) -> None:
    """Set the log levels of this process: WARNING for libraries unless ``verbose``.

    Idempotent; the last call wins. Ray and Spark started later in this process read
    the choice (:func:`verbose_logging`). Adds one stderr handler to the root logger
    (once, whatever the number of calls) unless the root logger has one already.
    """
    global _verbose, _configured, _handler
    _verbose = bool(verbose)
    _configured = True
    root = logging.getLogger()
    if _handler is None and not root.handlers:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter(_FORMAT))
        root.addHandler(_handler)
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    if not verbose:
        # Read by Ray Data when it is imported (its DataContext default); a user's own
        # setting of the variable wins.
        os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")
    _skip_forwarded_notices(not verbose)
    quiet_ray_data()


def _skip_forwarded_notices(skip: bool) -> None:
    """Add :data:`FORWARDED_NOTICES` to ``RAY_DEDUP_LOGS_SKIP_REGEX`` (after the user's own
    pattern, if any) or take them out again."""
    ours = "|".join(f"(?:{notice})" for notice in FORWARDED_NOTICES)
    current = os.environ.get(_SKIP_VARIABLE)
    own = current
    if current == ours:
        own = None
    elif current is not None and current.endswith(f"|{ours}"):
        own = current.removesuffix(f"|{ours}")
    wanted = own if not skip else ours if own is None else f"{own}|{ours}"
    if wanted is None:
        os.environ.pop(_SKIP_VARIABLE, None)
    else:
        os.environ[_SKIP_VARIABLE] = wanted


def verbose_logging() -> bool:
    """True if :func:`configure_logging` asked for verbose logs."""
    return _verbose


def quiet_requested() -> bool:
    """True if :func:`configure_logging` was called without ``verbose``: then Ray, Ray Data,
    Spark and the actors started later are configured quiet. A library user who never calls
    it keeps every library's own defaults (Ray's driver logger is at WARNING either way)."""
    return _configured and not _verbose


_RAY_NOTICES = ("ray._private.authentication.authentication_token_setup",)
"""Ray loggers whose every-start notices a quiet program lowers to ERROR: "Token
authentication is enabled for this Ray cluster" (Ray's default since 2.5x, not a problem)."""


class _HideDeprecationNotices(logging.Filter):
    """Ray's "DeprecationWarning: `ray.worker.x` is a private attribute" lines, caused by a
    library using Ray's private names (RayDP does): hidden in a quiet program, as Python hides
    DeprecationWarnings outside ``__main__`` by default."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (quiet_requested() and str(record.msg).startswith("DeprecationWarning: `ray."))


def quiet_ray_notices() -> None:
    """Lower Ray's startup notices in this process if :func:`quiet_requested` (else restore
    them). Called by ``start_local``/``connect`` before ``ray.init``; never imports Ray."""
    level = logging.ERROR if quiet_requested() else logging.NOTSET
    for name in _RAY_NOTICES:
        logging.getLogger(name).setLevel(level)
    ray_logger = logging.getLogger("ray")
    if not any(isinstance(f, _HideDeprecationNotices) for f in ray_logger.filters):
        ray_logger.addFilter(_HideDeprecationNotices())


def quiet_ray_data() -> None:
    """Apply the choice to Ray Data in this process.

    Quiet: no progress bars (nor the notice that they are off), no "Starting execution of
    Dataset" banners, and Ray Data's console handler at WARNING (its log file,
    ``ray-data.log`` in Ray's session folder, keeps everything). Called by
    :func:`configure_logging`, by ``start_local``/``connect`` and by ``init_spark``. Does
    nothing unless :func:`configure_logging` was called, so a library user's own logging
    setup is left alone. Never imports Ray.
    """
    if not _configured:
        return  # a library user's own setup stays as it is
    # Progress notices ("Progress bars disabled. To enable, ..."), by their logger's level.
    progress_level = logging.NOTSET if _verbose else logging.ERROR
    logging.getLogger("ray.data._internal.progress").setLevel(progress_level)
    data = sys.modules.get("ray.data")
    if data is None:
        return  # not imported: RAY_DATA_DISABLE_PROGRESS_BARS does it at the import
    level = logging.INFO if _verbose else logging.WARNING
    for handler in logging.getLogger("ray.data").handlers:
        # The console handler (a StreamHandler); the session-file handler keeps its level.
        if isinstance(handler, logging.StreamHandler) and not isinstance(
            handler, logging.FileHandler
        ):
            handler.setLevel(level)
    context = data.DataContext.get_current()
    context.enable_progress_bars = _verbose
    context.print_on_execution_start = _verbose
