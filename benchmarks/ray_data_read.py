"""Ray Data read throughput (docs/benchmarks.md): ``pr.data.read_stream`` against
``ray.data.from_arrow`` of the same bytes, timed in the same run.

For each event size (``--event-bytes``, 100 B and 1 KiB): ``--events`` events (the 1 KiB run
writes a tenth as many) go to a stream of ``--segments`` segments (16 routing keys). The same
rows are collected once into one Arrow table in the driver (not timed). Then, alternating,
``--repeats`` times each (the table shows the median; the first call of each is a warm-up):

- ``read_stream``: ``pr.data.read_stream("scope/stream")`` consumed with
  ``iter_batches(batch_format="pyarrow")`` (rows counted): segment reads from the container
  actors, frame parsing, Arrow blocks, delivery to the driver;
- ``from_arrow``: ``ray.data.from_arrow(table)`` consumed the same way (the table is put into
  the object store inside the timing): the cost of Ray Data itself on the same bytes.

MB/s counts the events' payload bytes (1 MB = 10^6 B). The machine is shared and small
(2 cores): numbers are noisy, read the ratio.

Run: ``make bench-ray-data`` or ``.venv/bin/python -m benchmarks.ray_data_read --help``.
"""

from __future__ import annotations

import uuid
from typing import Any

import pravega_ray as pr
from benchmarks.common import local_cluster, local_ray, log, percentile, print_table, work_dir
from benchmarks.connector_reads import bench_arguments, same_rows, timed, write_events


def consume(dataset: Any) -> int:
    return sum(b.num_rows for b in dataset.iter_batches(batch_format="pyarrow", batch_size=None))


def main() -> None:
    args, sizes = bench_arguments(__doc__.split("\n\n")[0], 500_000)

    from pravega_ray.logging_setup import configure_logging

    configure_logging()
    with (
        work_dir("bench-ray-data-") as data_dir,
        local_ray(num_cpus=2, namespace=f"bench-{uuid.uuid4().hex[:8]}"),
    ):
        import ray

        ray.data.DataContext.get_current().enable_progress_bars = False
        with local_cluster(data_dir, 4) as cluster:
            rows = measure(cluster, args, sizes)
    print_table(
        "pr.data.read_stream vs ray.data.from_arrow(same rows), iter_batches to the driver",
        ["event B", "events", "path", "seconds", "MB/s", "rows/s"],
        [row + [None] * (6 - len(row)) for row in rows],
    )


def measure(cluster: Any, args: Any, sizes: list[int]) -> list[list[object]]:
    """The table's rows: per event size, the median of each path and their ratio."""
    import ray

    rows: list[list[object]] = []
    mgr = cluster.stream_manager()
    mgr.create_scope("bench")
    for size in sizes:
        count = args.events if size <= 100 else max(1, args.events // 10)
        stream = f"read{size}"
        config = pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(args.segments))
        mgr.create_stream("bench", stream, config)
        log(f"writing {count} events of {size} B")
        write_events(cluster, "bench", stream, count, size)
        table = same_rows(cluster, f"bench/{stream}")
        payload_mb = count * size / 1e6

        def read(stream: str = stream) -> int:
            return consume(pr.data.read_stream(f"bench/{stream}", cluster=cluster))

        def baseline(table: Any = table) -> int:
            return consume(ray.data.from_arrow(table))

        log(f"timing {count} events of {size} B")
        timed(read, count)
        timed(baseline, count)
        reads, bases = [], []
        for _ in range(args.repeats):
            reads.append(timed(read, count))
            bases.append(timed(baseline, count))
        for name, seconds in (
            ("read_stream", percentile(reads, 0.5)),
            ("from_arrow", percentile(bases, 0.5)),
        ):
            rows.append([size, count, name, seconds, payload_mb / seconds, count / seconds])
        rows.append(["", "", "ratio", percentile(reads, 0.5) / percentile(bases, 0.5)])
    return rows


if __name__ == "__main__":
    main()
