"""Spark on Ray (RayDP) sessions sized and configured for pravega-ray.

RayDP runs Spark's master and executors as Ray actors, so a Spark job and the
pravega-ray containers share one Ray cluster and exchange data through Ray's
object store. Three things have to be right for that to work here (proven in
``docs/stack.md``; explained in ``docs/spark.md``):

* The JVMs RayDP starts (driver, app master, executors) run on Java 17, which
  denies reflective access to ``java.base`` unless each package is opened
  explicitly. Without the ``--add-opens`` flags the app master dies during a
  Ray <-> Spark conversion, and Ray reports a misleading "Check failed:
  objects_valid" error.
* Executors start Python workers with ``PYSPARK_PYTHON``; it must be this
  interpreter (the one with pyspark and ray installed).
* Stop Spark before Ray. RayDP's exit hook otherwise starts a fresh local Ray
  while Python exits.

If the program asked for quiet logs (:func:`~pravega_ray.logging_setup.quiet_requested`:
``configure_logging(False)``), the session starts quiet
(:func:`quiet_spark_configs`): the driver JVM logs through :data:`QUIET_LOG4J2` (warnings and
errors, minus two known startup notices), Spark draws no console progress bars, and the driver
JVM's stderr reaches this process's stderr through a relay that skips Ray's Java startup notice
(:data:`~pravega_ray.logging_setup.JAVA_STARTUP_NOTICE`). Errors always show.

Every ``init_spark`` also leaves folders named by digits in ``/tmp/ray``
(``/tmp/ray/<millis>``, copies of Ray's Java core-worker library, about 40 MB
per JVM, two JVMs per session); :func:`clean_raydp_temp_folders` removes them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pravega_ray.errors import IllegalStateError, InvalidArgumentError
from pravega_ray.logging_setup import JAVA_STARTUP_NOTICE, quiet_ray_data, quiet_requested

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "ADD_OPENS_PACKAGES",
    "EXTRA_JAVA_OPTIONS_KEYS",
    "RAYDP_NATIVE_LIBRARY_ROOT",
    "clean_raydp_temp_folders",
    "init_spark",
    "jdk17_java_options",
    "merge_spark_configs",
    "quiet_spark_configs",
    "stop_spark",
]

ADD_OPENS_PACKAGES: tuple[str, ...] = (
    "java.lang",
    "java.lang.invoke",
    "java.lang.reflect",
    "java.io",
    "java.net",
    "java.nio",
    "java.math",
    "java.text",
    "java.util",
    "java.util.concurrent",
    "java.util.concurrent.atomic",
    "jdk.internal.ref",
    "sun.nio.ch",
    "sun.nio.cs",
    "sun.security.action",
    "sun.util.calendar",
)
"""``java.base`` packages opened to unnamed modules in every RayDP JVM.

The list proven in docs/stack.md, plus ``java.lang.reflect`` and ``jdk.internal.ref``
which Spark's own launcher opens (``JavaModuleOptions``) but which RayDP's
executor and app-master launchers do not add.
"""

EXTRA_JAVA_OPTIONS_KEYS: tuple[str, ...] = (
    "spark.driver.extraJavaOptions",
    "spark.ray.raydp_app_master.extraJavaOptions",
    "spark.executor.extraJavaOptions",
)
"""The Spark configs that carry JVM options for the driver, RayDP's app master and executors."""

_DEFAULT_CONFIGS: dict[str, str] = {
    # The default of 200 shuffle partitions costs seconds per shuffle on a small
    # machine; adaptive execution coalesces from here when it can.
    "spark.sql.shuffle.partitions": "4",
    # The web UI is a thread pool and a port per session that tests never use.
    "spark.ui.enabled": "false",
    # Arrow makes toPandas / createDataFrame(pandas) columnar instead of row by row.
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}
"""Defaults suited to a small (2-core) machine; any config the caller passes wins."""


def jdk17_java_options() -> list[str]:
    """The JVM options Java 17 needs for Spark and RayDP (idempotent to add twice)."""
    return ["-XX:+IgnoreUnrecognizedVMOptions"] + [
        f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in ADD_OPENS_PACKAGES
    ]


def merge_spark_configs(configs: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the Spark configs ``init_spark`` passes to RayDP.

    Starts from small-machine defaults, applies ``configs`` over them (the
    caller wins), then makes sure each of :data:`EXTRA_JAVA_OPTIONS_KEYS`
    contains every option of :func:`jdk17_java_options`: options the caller
    already gave for a key are kept, in order and first, and the missing JDK 17
    options are appended. ``configs`` is not modified (RayDP mutates the dict it
    is given, so a fresh one is returned). Raises :class:`InvalidArgumentError`
    if a key or value is not a string.
    """
    merged = dict(_DEFAULT_CONFIGS)
    for key, value in (configs or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgumentError(f"Spark configs must map str to str, got {key!r}: {value!r}")
        merged[key] = value
    required = jdk17_java_options()
    for key in EXTRA_JAVA_OPTIONS_KEYS:
        options = shlex.split(merged.get(key, ""))
        options += [option for option in required if option not in options]
        merged[key] = shlex.join(options)
    return merged


QUIET_LOG4J2 = """\
# pravega-ray's quiet log4j2 configuration of Spark's driver JVM (verbose_logging() off).
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
# "Your hostname resolves to a loopback address" at every start.
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
# "Unable to load native-hadoop library": Spark uses its Java implementations.
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
"""
"""Warnings and errors of every logger, except two notices every start prints."""


def quiet_spark_configs() -> dict[str, str]:
    """The Spark configs of a quiet session: :data:`QUIET_LOG4J2` for the driver JVM (written
    to a file in the temp folder) and no console progress bars."""
    path = os.path.join(tempfile.gettempdir(), f"pravega-ray-log4j2-{os.getuid()}.properties")
    # Written once: later sessions find it unchanged (or another process just wrote it).
    with contextlib.suppress(OSError), open(path) as existing:
        if existing.read() == QUIET_LOG4J2:
            return _quiet_configs(path)
    staging = f"{path}.{os.getpid()}"
    with open(staging, "w") as f:
        f.write(QUIET_LOG4J2)
    os.replace(staging, path)
    return _quiet_configs(path)


def _quiet_configs(path: str) -> dict[str, str]:
    # RayDP puts -Dlog4j2.configurationFile=<this> last on the driver JVM's command line
    # (after spark.driver.extraJavaOptions), so this is the key that decides.
    return {"spark.log4j.config.file.name": f"file:{path}", "spark.ui.showConsoleProgress": "false"}


def init_spark(
    app_name: str = "pravega-ray",
    num_executors: int = 1,
    executor_cores: int = 1,
    executor_memory: str = "1GB",
    configs: dict[str, str] | None = None,
) -> SparkSession:
    """Start Spark on the running Ray through RayDP and return its session.

    Ray must already be initialized in this process (``ray.init`` or
    ``pravega_ray.start_local``); otherwise :class:`IllegalStateError` is raised
    and nothing is started (RayDP itself would silently start a second, local
    Ray). Sets ``PYSPARK_PYTHON`` to this interpreter so executors can run
    Python, and passes :func:`merge_spark_configs` of ``configs``.

    The defaults (one executor with one core and 1 GB) leave the second CPU of
    a 2-core machine to Ray tasks and pravega-ray's actors. Each executor holds
    ``executor_cores`` Ray CPUs for its life: the cluster needs that many free.

    Only one RayDP session can exist per process: raises
    :class:`IllegalStateError` if one is running (call :func:`stop_spark` first).
    Startup takes 10-15 s here; the first job another 9-12 s.

    Quiet if the program asked for it (the module docstring); ``configs`` the caller gives
    win over the quiet ones (JVM options are merged).
    """
    import ray

    if not ray.is_initialized():
        raise IllegalStateError(
            "Ray is not initialized: call ray.init(...) or pravega_ray.start_local() "
            "before init_spark()"
        )
    if num_executors < 1 or executor_cores < 1:
        raise InvalidArgumentError(
            f"num_executors and executor_cores must be >= 1, got "
            f"{num_executors} and {executor_cores}"
        )
    quiet = quiet_requested()
    if quiet:
        configs = _merged_options(quiet_spark_configs(), configs or {})
    merged = merge_spark_configs(configs)
    os.environ["PYSPARK_PYTHON"] = sys.executable

    import raydp
    import raydp.context

    if getattr(raydp.context, "_global_spark_context", None) is not None:
        raise IllegalStateError("a RayDP Spark session is running: call stop_spark() first")
    with _driver_stderr_relayed() if quiet else contextlib.nullcontext():
        session: SparkSession = raydp.init_spark(
            app_name=app_name,
            num_executors=num_executors,
            executor_cores=executor_cores,
            executor_memory=executor_memory,
            configs=merged,
        )
    quiet_ray_data()  # RayDP imported Ray Data
    return session


_JAVA_STARTUP_LINE = re.compile(JAVA_STARTUP_NOTICE.encode())


@contextlib.contextmanager
def _driver_stderr_relayed() -> Iterator[None]:
    """Inside the block, the Spark driver JVM that pyspark launches (if it launches one) gets
    a pipe as its stderr, which a thread copies to this process's stderr line by line for the
    JVM's life, except Ray's Java startup notice (:data:`JAVA_STARTUP_NOTICE`), which the JVM
    prints when RayDP connects it to Ray.

    pyspark's ``launch_gateway`` takes ``popen_kwargs`` for this ("capturing stdout/stderr")
    and keeps the process as ``gateway.proc``, but ``SparkContext`` calls it without any: the
    block passes them by standing in for ``pyspark.context.launch_gateway`` meanwhile. A JVM
    launched before (a session stopped and started again reuses it) keeps its stderr.
    """
    import pyspark.context

    # pyspark's type hints do not name launch_gateway among the module's exports.
    context: Any = pyspark.context
    launch: Callable[..., Any] = context.launch_gateway

    def launch_relayed(conf: Any = None, popen_kwargs: dict[str, Any] | None = None) -> Any:
        gateway = launch(conf, {**(popen_kwargs or {}), "stderr": subprocess.PIPE})
        process = getattr(gateway, "proc", None)
        if process is not None and process.stderr is not None:
            threading.Thread(
                target=_relay_lines,
                args=(process.stderr,),
                name="pravega-ray-spark-driver-stderr",
                daemon=True,
            ).start()
        return gateway

    context.launch_gateway = launch_relayed
    try:
        yield
    finally:
        context.launch_gateway = launch


def _relay_lines(source: Iterator[bytes]) -> None:
    """Copy ``source`` to this process's stderr, without :data:`JAVA_STARTUP_NOTICE` lines,
    until it ends. Keeps reading if stderr fails, so the JVM never blocks on a full pipe."""
    for line in source:
        if _JAVA_STARTUP_LINE.search(line):
            continue
        try:
            sys.stderr.write(line.decode(errors="replace"))
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):
            pass  # stderr closed or gone (None at exit): drop the line, keep draining


def _merged_options(base: dict[str, str], configs: Mapping[str, str]) -> dict[str, str]:
    """``configs`` over ``base``; for JVM option keys, ``base``'s options then the caller's."""
    merged = {**base, **configs}
    for key in EXTRA_JAVA_OPTIONS_KEYS:
        if key in base and key in configs and isinstance(configs[key], str):
            merged[key] = f"{base[key]} {configs[key]}"
    return merged


def stop_spark() -> None:
    """Stop the RayDP Spark session of this process, if any.

    Safe to call twice or when no session was started. Call it before
    ``ray.shutdown()``: RayDP's own exit hook would otherwise start a new
    local Ray while Python exits.
    """
    if "raydp" not in sys.modules:
        return  # Nothing can have been started without importing RayDP.
    import raydp

    raydp.stop_spark()


RAYDP_NATIVE_LIBRARY_ROOT = Path("/tmp/ray")
"""Where Ray's Java runtime copies its native libraries, one ``<millis>/`` folder per JVM.

Hard-coded in ``io.ray.runtime.RayNativeRuntime`` as ``"/tmp/ray/" +
System.currentTimeMillis()``: neither ``RAY_TMPDIR``, ``TMPDIR`` nor Ray's
``_temp_dir`` moves it. Each RayDP JVM that joins Ray (app master, executors)
makes one, about 40 MB.
"""


def clean_raydp_temp_folders(root: Path | str | None = None) -> list[Path]:
    """Remove the ``<digits>/`` folders RayDP leaves under Ray's temp folder.

    ``root`` defaults to :data:`RAYDP_NATIVE_LIBRARY_ROOT` (``/tmp/ray``). Only direct children
    whose whole name is ASCII digits and that are real directories (not
    symlinks) are removed; ``session_*`` folders and anything else are never
    touched. Returns the removed paths. A folder that disappears concurrently
    or cannot be removed is skipped. Call it after Spark has stopped: a
    running JVM may still use its folder.
    """
    folder = Path(root) if root is not None else RAYDP_NATIVE_LIBRARY_ROOT
    removed: list[Path] = []
    try:
        children = list(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for child in children:
        name = child.name
        if not (name.isascii() and name.isdigit()):
            continue
        if child.is_symlink() or not child.is_dir():
            continue
        shutil.rmtree(child, ignore_errors=True)
        if not child.exists():
            removed.append(child)
    return removed
