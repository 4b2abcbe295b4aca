"""A zombie segment container: a process that keeps writing after its successor started.

Run by the chaos run's injector (:class:`chaos.run.Injector`) as ``python -m chaos.zombie
--tier1 URL --tier2 URL --container N --segment SEGMENT --name NAME``, with the S3 endpoint
and credentials in the environment. It

1. builds container ``N`` on the cluster's own tiers, as the container actor does, and
   recovers it: it takes over the durable log and Tier-2 from the actor that runs it (as a
   container on a node thought dead would, when it comes back);
2. prints ``READY`` and from then on does what a container's parts do: appends events
   (:func:`chaos.checker.encode_zombie`, numbered from 1) to ``SEGMENT`` as a writer of its own,
   one after the other, and flushes to Tier-2. The injector kills the actor meanwhile, and
   writes ``GO`` to stdin once the actor's successor has recovered (and so fenced the zombie
   out); the zombie keeps writing for ``--write-s`` seconds after ``GO``;
3. prints one JSON line: ``acked`` and ``failed`` (the numbers of the appends begun before
   ``GO``, acknowledged or failed), ``attempts_after_go`` and ``acked_after_go`` (must be
   0), ``errors`` by type, ``fatal`` (what stopped the container).

An append acknowledged before ``GO`` was made by the owner of the time: the successor must
have recovered it, so the reader group reads it once. An append begun after ``GO`` must be
neither acknowledged nor ever read (the run's ``zombie_acked`` and ``zombie_visible``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

from chaos.checker import encode_zombie
from pravega_ray.client.event_framing import frame_events
from pravega_ray.constants import NO_EVENT_NUMBER
from pravega_ray.errors import PravegaError, RetriableError
from pravega_ray.segmentstore.builder import build_container_on
from pravega_ray.segmentstore.config import ContainerConfig

GO_WAIT_S = 300.0
RECOVERY_ATTEMPTS = 10


async def run(args: argparse.Namespace) -> dict[str, Any]:
    fatal: list[str] = []
    for attempt in range(RECOVERY_ATTEMPTS):
        container = build_container_on(
            args.tier1,
            args.tier2,
            ContainerConfig(args.container),
            on_fatal=lambda e: fatal.append(repr(e)),
        )
        try:
            container.recover()
            break
        except RetriableError:  # an S3 listing raced the live owner's writes: again
            await asyncio.sleep(0.2 * (attempt + 1))
    else:
        raise RuntimeError(f"container {args.container} did not recover")
    await container.list_segments()  # starts its log, storage writer and timers
    print("READY", flush=True)
    loop = asyncio.get_running_loop()
    go = loop.run_in_executor(None, sys.stdin.readline)
    writer = uuid.uuid4().bytes
    last = NO_EVENT_NUMBER
    acked: list[int] = []
    failed: list[int] = []
    after_go = acked_after_go = 0
    errors: Counter[str] = Counter()
    go_wait_until = time.monotonic() + GO_WAIT_S
    stop_at: float | None = None  # --write-s after GO
    seq = 0
    while time.monotonic() < (go_wait_until if stop_at is None else stop_at):
        started_after_go = go.done()
        if started_after_go and stop_at is None:
            if (await go).strip() != "GO":
                raise RuntimeError("expected GO on stdin")
            stop_at = time.monotonic() + args.write_s
        seq += 1
        after_go += started_after_go
        try:
            event = encode_zombie(args.name, seq, 100)
            await container.append(args.segment, writer, last, seq, 1, frame_events([event]))
            last = seq
            if started_after_go:
                acked_after_go += 1
            else:
                acked.append(seq)
        except PravegaError as e:
            errors[type(e).__name__] += 1
            if not started_after_go:
                failed.append(seq)
        try:
            await container.flush_to_storage()
        except PravegaError as e:
            errors[f"flush {type(e).__name__}"] += 1
        await asyncio.sleep(0.05)
    if stop_at is None:
        raise RuntimeError(f"no GO on stdin in {GO_WAIT_S}s")
    return {
        "acked": acked,
        "failed": failed,
        "attempts_after_go": after_go,
        "acked_after_go": acked_after_go,
        "errors": dict(errors),
        "fatal": fatal,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tier1", required=True)
    parser.add_argument("--tier2", required=True)
    parser.add_argument("--container", type=int, required=True)
    parser.add_argument("--segment", required=True, help="a segment the container owns")
    parser.add_argument("--name", required=True, help="the zombie's name in its events")
    parser.add_argument("--write-s", type=float, default=10.0)
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(run(args))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
