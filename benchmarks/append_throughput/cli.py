"""The command line: parse the options, run every selected phase in order, print the report."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from benchmarks.append_throughput.bare_ray import ray_actor_call_rates, run_bare_ray
from benchmarks.append_throughput.model import LATENCY_RATE_EVENTS_PER_S, Latency, Report
from benchmarks.append_throughput.pravega_cases import run_pravega_tier
from benchmarks.append_throughput.raw_fsync import run_raw_fsync
from benchmarks.append_throughput.recovery import run_recovery
from benchmarks.append_throughput.redis_streams import run_redis
from benchmarks.append_throughput.report import print_report
from benchmarks.common import local_ray, log, work_dir

DEFAULT_EVENT_SIZES = (100, 10_240)
DEFAULT_SEGMENTS = (1, 16)
DEFAULT_TIER1 = ("file", "s3")
SEAWEED_BUCKET = "pravega-bench"


@contextlib.contextmanager
def s3_environment() -> Iterator[str]:
    """Start SeaweedFS (tests/s3_server.py), create the bucket, point boto3's standard chain at it
    in ``os.environ`` (Ray workers started afterwards inherit it); yields the Tier-1 URL.

    Everything is undone on exit. Raises RuntimeError if the server cannot start.
    """
    from tests.s3_server import running_s3_server

    with running_s3_server() as server:
        server.client().create_bucket(Bucket=SEAWEED_BUCKET)
        saved = {k: os.environ.get(k) for k in server.environment()}
        os.environ.update(server.environment())
        try:
            yield f"s3://{SEAWEED_BUCKET}/tier1"
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not comma-separated integers: {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"need positive integers: {text!r}")
    return values


def _tier_list(text: str) -> list[str]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not values or any(v not in ("file", "s3") for v in values):
        raise argparse.ArgumentTypeError(f"Tier-1 kinds are file and s3: {text!r}")
    return values


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Durable append throughput, ack latency and recovery time of pravega-ray "
        "(one writer), against raw fsync group commit, a bare Ray actor and Redis Streams.",
    )
    parser.add_argument(
        "--events",
        type=int,
        default=1_000_000,
        help="events per throughput run of 100-byte events; larger events get the same payload "
        "bytes (default 1M, i.e. ~100 MB per run)",
    )
    parser.add_argument(
        "--latency-seconds",
        type=float,
        default=5.0,
        help="length of each paced latency run (default 5)",
    )
    parser.add_argument(
        "--latency-rate",
        type=int,
        default=LATENCY_RATE_EVENTS_PER_S,
        help=f"events/s of the paced latency runs (default {LATENCY_RATE_EVENTS_PER_S:,})",
    )
    parser.add_argument(
        "--event-sizes",
        type=_int_list,
        default=list(DEFAULT_EVENT_SIZES),
        help="payload sizes in bytes, comma-separated (default 100,10240)",
    )
    parser.add_argument(
        "--segments",
        type=_int_list,
        default=list(DEFAULT_SEGMENTS),
        help="segments per stream, comma-separated (default 1,16)",
    )
    parser.add_argument(
        "--tier1",
        type=_tier_list,
        default=list(DEFAULT_TIER1),
        help="Tier-1 durable logs to measure: file, s3 (SeaweedFS started here); default file,s3",
    )
    parser.add_argument(
        "--containers",
        type=int,
        default=4,
        help="segment containers of the measured clusters (default 4, pravega-ray's default)",
    )
    parser.add_argument(
        "--recovery-gib",
        type=float,
        default=1.0,
        help="GiB written before the container recovery measurements; 0 skips them (default 1)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where files are written (default: a temporary directory). Everything the run "
        "writes there is removed afterwards. Use a directory on the disk you want to measure.",
    )
    parser.add_argument(
        "--actor-calls", type=int, default=5000, help="pipelined no-op actor calls (default 5000)"
    )
    parser.add_argument("--skip-pravega", action="store_true", help="measure the baselines only")
    parser.add_argument("--skip-redis", action="store_true", help="no Redis Streams baseline")
    parser.add_argument("--skip-bare-ray", action="store_true", help="no bare Ray ceiling")
    parser.add_argument(
        "--skip-write-events", action="store_true", help="no write_events (batch) rows"
    )
    args = parser.parse_args(argv)
    if args.events < 1 or args.latency_seconds <= 0 or args.actor_calls < 1:
        parser.error("--events, --latency-seconds and --actor-calls must be positive")
    if args.latency_rate < 1 or args.containers < 1 or args.recovery_gib < 0:
        parser.error("--latency-rate and --containers must be positive, --recovery-gib >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run every selected phase and print the report; returns the process exit code."""
    args = parse_args(argv)
    run_id = f"{os.getpid()}-{int(time.time())}"
    if args.data_dir is not None:
        args.data_dir.mkdir(parents=True, exist_ok=True)
    report = Report()
    exit_code = 0
    with contextlib.ExitStack() as stack:
        work = stack.enter_context(work_dir("pravega-bench-", args.data_dir))
        try:
            run_raw_fsync(report, work, args.event_sizes, args.events, args)

            redis_binary = shutil.which("redis-server")
            if args.skip_redis:
                report.notes.append("Redis Streams skipped (--skip-redis)")
            elif redis_binary is None:
                message = (
                    "Redis Streams skipped: redis-server not found (apt-get install redis-server)"
                )
                log(message)
                report.notes.append(message)
            else:
                try:
                    run_redis(report, redis_binary, work, args.event_sizes, args.events, args)
                except Exception as e:  # a baseline failing is reported, not fatal
                    log(f"redis: FAILED: {e!r}")
                    report.notes.append(f"Redis Streams failed: {e!r}")

            s3_url: str | None = None
            if "s3" in args.tier1 and not args.skip_pravega:
                try:
                    log("s3: starting SeaweedFS (tests/s3_server.py)")
                    s3_url = stack.enter_context(s3_environment())
                except Exception as e:
                    log(f"s3: FAILED to start: {e!r}")
                    report.notes.append(f"S3 Tier-1 skipped: SeaweedFS did not start: {e!r}")

            log("starting Ray: ray.init(num_cpus=2)")
            stack.enter_context(
                local_ray(num_cpus=2, namespace="pravega-bench", logging_level="WARNING")
            )

            calls = ray_actor_call_rates(pipelined_calls=args.actor_calls)
            round_trip = Latency(calls.sequential_round_trips_s, 0.0)
            report.notes.append(
                f"one sync Ray actor, no-op method: {calls.pipelined_calls_per_s:,.0f} calls/s "
                f"pipelined, round trip p50 {round_trip.p50_ms:.2f} ms / p99 "
                f"{round_trip.p99_ms:.2f} ms, 1 MiB arguments {calls.large_call_mb_per_s:,.0f} MB/s"
            )
            log(report.notes[-1])

            if not args.skip_bare_ray:
                run_bare_ray(report, work, args.event_sizes, args.events, args)

            if args.skip_pravega:
                report.notes.append("pravega-ray skipped (--skip-pravega)")
            else:
                for tier1 in args.tier1:
                    if tier1 == "s3" and s3_url is None:
                        continue
                    url = s3_url if tier1 == "s3" else None
                    try:
                        if not run_pravega_tier(report, tier1, url, work, args, run_id):
                            exit_code = 1
                    except Exception as e:
                        log(f"pravega-ray on {tier1}: FAILED: {e!r}")
                        report.notes.append(f"pravega-ray on Tier-1 {tier1} failed: {e!r}")
                        exit_code = 1
                if args.recovery_gib > 0:
                    try:
                        run_recovery(report, work, args.recovery_gib, run_id)
                    except Exception as e:
                        log(f"recovery: FAILED: {e!r}")
                        report.notes.append(f"container recovery failed: {e!r}")
                        exit_code = 1
        finally:
            log("stopping Ray and the servers started here; removing files")

    import ray

    print_report(
        report,
        args,
        f"append_throughput  {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}  "
        f"{os.cpu_count()} CPUs  Python {platform.python_version()}  Ray {ray.__version__}  "
        f"{args.containers} containers; one writer; acks mean fsynced",
    )
    return exit_code
