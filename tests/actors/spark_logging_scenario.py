"""A program run by tests/actors/test_metrics_export.py in a subprocess: the demo's Spark step,
quiet.

Calls ``configure_logging`` (verbose with ``-v``), starts its own cluster as the demo does
(``start_local`` with the default containers and stream buckets, data in ``argv[1]``), writes
100 events, then does what examples/quickstart.py does with Spark: ``init_spark`` and a read of
the stream into a DataFrame. The Spark driver JVM then writes an error line to its stderr, and
after stopping Spark and the cluster the program raises an error. Quiet, the terminal shows
the program's ``[spark-scenario]`` lines, the JVM's error line and the traceback, and no line
of Ray, RayDP or Spark unless it reports an error.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")

import pravega_ray as pr
from pravega_ray.logging_setup import configure_logging

EVENTS = 100


def say(message: str) -> None:
    print(f"[spark-scenario] {message}", flush=True)


def main() -> None:
    configure_logging("-v" in sys.argv)
    cluster = pr.start_local(sys.argv[1])
    spark = None
    try:
        say("cluster started")
        manager = cluster.stream_manager()
        manager.create_scope("scenario")
        config = pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(1))
        manager.create_stream("scenario", "readings", config)
        with cluster.create_writer("scenario", "readings", serializer=pr.JsonSerializer()) as w:
            for i in range(EVENTS):
                w.write_event({"seq": i}, routing_key=f"k{i % 10}")
        say(f"wrote {EVENTS} events")
        spark = pr.spark.init_spark(app_name="pravega-ray-spark-scenario")
        say("spark started")
        count = pr.spark.read_stream(spark, "scenario/readings").count()
        say(f"spark read {count} events")
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        jvm.java.lang.System.err.println("ERROR: the driver JVM's own error line")
    finally:
        if spark is not None:
            pr.spark.stop_spark()
        cluster.shutdown()
        pr.spark.clean_raydp_temp_folders()
    raise RuntimeError("the program's own error")


if __name__ == "__main__":
    main()
