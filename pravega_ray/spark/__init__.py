"""The Spark bridge: Spark on Ray through RayDP, and streams as Spark DataFrames.

Start Ray (or ``pravega_ray.start_local``) first, then :func:`init_spark`;
:func:`read_stream` turns a stream into a DataFrame with the columns of
Pravega's Spark connector; :func:`micro_batches` iterates it in batches with stream
cuts as checkpointed offsets; :func:`write_stream` writes a DataFrame into a stream
exactly once (through ``pr.data.write_stream``). Stop with :func:`stop_spark` *before*
``ray.shutdown()``, then :func:`clean_raydp_temp_folders`. See ``docs/spark.md``.
"""

from __future__ import annotations

from pravega_ray.spark.micro_batches import micro_batches
from pravega_ray.spark.session import clean_raydp_temp_folders, init_spark, stop_spark
from pravega_ray.spark.stream_reader import read_stream
from pravega_ray.spark.stream_writer import write_stream

__all__ = [
    "clean_raydp_temp_folders",
    "init_spark",
    "micro_batches",
    "read_stream",
    "stop_spark",
    "write_stream",
]
