"""Spark for the integration tests: one RayDP session on the shared local Ray.

``spark`` depends on ``ray_session`` (tests/conftest.py), so pytest tears it
down first: Spark stops before Ray shuts down, which is the order RayDP needs
(the other way round its exit hook starts a new local Ray). ``ray_session``
then removes the ``/tmp/ray/<digits>`` folders the session's JVMs left behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark(ray_session: None) -> Iterator[SparkSession]:
    """A RayDP Spark session (1 executor, 1 core, 1 GB) shared by the whole run."""
    from pravega_ray.spark import init_spark, stop_spark

    session = init_spark(app_name="pravega-ray-tests")
    try:
        yield session
    finally:
        stop_spark()
