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

import pytest

os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """A real local Ray shared by every test that needs one; shut down at the end."""
    import ray

    from pravega_ray.spark.session import clean_raydp_temp_folders

    if not ray.is_initialized():
        ray.init(
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
