"""Durable append throughput, ack latency and recovery time of pravega-ray, with baselines.

One writer appends events that count only once durable (fsynced). The matrix (each part
selectable, see ``--help``): event sizes (100 B, 10 KiB), segments per stream (1, 16),
Tier-1 durable log (filesystem, S3 on a local SeaweedFS), and the writer call (``write_event``
per event, or ``write_events`` batches). Baselines measured in the same run, on the same disk,
with the same framed events (8-byte header + payload, pravega-ray's format):

- ``raw append+fsync``: the floor set by this disk and plain Python. A loop frames events into
  groups of up to 1 MiB, one ``write`` + ``fsync`` per group. Latency: a pacing thread enqueues,
  a commit thread writes + fsyncs whatever is queued (group commit).
- ``bare Ray ceiling``: one sync Ray actor (``num_cpus=0``) whose only method appends a block
  to a file and fsyncs; the driver frames events into 1 MiB blocks and keeps 16 calls in flight.
  Latency: whatever is batched is sent at each burst when fewer than 4 calls are in flight.
- ``redis streams``: ``redis-server`` started here (``appendonly yes``, ``appendfsync always``,
  so a reply means fsynced), one connection, pipelined ``XADD`` of the same payloads in raw RESP.
  Skipped with a message when ``redis-server`` is not installed.

Columns: events/s and MB/s (payload bytes, 10^6 per second) of a throughput run (write N events
then wait for every ack); ack latency p50/p99 of a paced run at ``--latency-rate`` events/s (a
burst every 1 ms on an absolute schedule; latency from just before the event is handed over to
its ack callback). A latency run that cannot keep up (events handed over at under 95% of the
rate, acks over its second half at under 90% of it, or a second's worth unacknowledged) is marked
``!``: its latencies are those of a growing queue.

pravega-ray runs one cluster per Tier-1 (``--containers`` containers, Tier-2 always on the
filesystem, so only Tier-1 differs), one stream per case, one routing key per segment (events
round robin over them). Between cases every container is flushed to Tier-2, so a case does not pay
for the previous one's backlog. A table of CPU use (driver, containers, raylet + GCS, SeaweedFS,
everything else) is printed for the throughput runs; "everything else" well above zero means
another job disturbed the run.

Also measured: container recovery time (kill the container actor, time until it answers again)
after writing ``--recovery-gib`` GiB, with Tier-2 working (the container checkpoints and
truncates its log) and with Tier-2 unavailable (nothing can be truncated: the log holds it all).

Run: ``make bench`` or ``.venv/bin/python -m benchmarks.append_throughput --help`` from the
repository root. The modules, one job each: ``model`` (constants and results), ``pacing``
(payloads and the paced schedule), the baselines ``raw_fsync``, ``redis_streams`` and
``bare_ray``, ``pravega_cases`` (pravega-ray's matrix), ``cpu`` (CPU accounting), ``recovery``
(container restarts), ``report`` (tables and targets) and ``cli`` (options and the run).
Importing any of them starts nothing; the baseline functions take small counts for quick
checks.
"""
