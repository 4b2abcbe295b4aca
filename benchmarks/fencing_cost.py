"""What Tier-2 fencing costs: chunk creates through FencedChunkStorage against the raw backend.

Every Tier-2 create or delete of a container first checks for a newer owner's fence object
(``storage/fenced.py``): a listing of the owner's fences, a directory listing on files, a LIST
on S3. This measures creates of chunks of a few sizes, raw and fenced, alternating rounds in
the same run, on the filesystem backend and on a local SeaweedFS (started here, as the tests
do; skipped with ``--no-s3``); then the check alone, and beside it the check the module did
before (one ``exists`` of the next epoch's fence: a ``stat``, a ``HEAD``).

    .venv/bin/python -m benchmarks.fencing_cost [--chunks 40] [--no-s3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks.common import percentile
from pravega_ray.storage.fenced import FencedChunkStorage
from pravega_ray.storage.filesystem import FileSystemChunkStorage

SIZES = (64 * 1024, 1 << 20, 4 << 20)
ROUNDS = 3


def _creates_ms(storage: Any, size: int, count: int) -> float:
    data = os.urandom(size)
    started = time.perf_counter()
    for _ in range(count):
        storage.create(f"bench/{uuid.uuid4().hex}", data)
    return (time.perf_counter() - started) / count * 1000


def measure(name: str, raw: Any, count: int) -> list[tuple[str, int, float, float]]:
    fenced = FencedChunkStorage(raw, "container-0")
    fenced.claim(1)
    rows = []
    for size in SIZES:
        raw_ms, fenced_ms = [], []
        for _ in range(ROUNDS):  # alternate, so drift hits both alike
            raw_ms.append(_creates_ms(raw, size, count))
            fenced_ms.append(_creates_ms(fenced, size, count))
        rows.append((name, size, percentile(raw_ms, 0.5), percentile(fenced_ms, 0.5)))
    check_ms, exists_ms = [], []
    for _ in range(ROUNDS):  # alternate, as above
        started = time.perf_counter()
        for _ in range(count * 5):
            fenced.check()
        check_ms.append((time.perf_counter() - started) / (count * 5) * 1000)
        started = time.perf_counter()
        for _ in range(count * 5):
            raw.exists("fences/container-0/00000000000000000002")
        exists_ms.append((time.perf_counter() - started) / (count * 5) * 1000)
    rows.append((name, 0, percentile(exists_ms, 0.5), percentile(check_ms, 0.5)))
    return rows


@contextmanager
def seaweedfs() -> Iterator[Any]:
    from tests.s3_server import running_s3_server

    with running_s3_server() as server:
        client = server.client()
        client.create_bucket(Bucket="fencing-bench")
        yield client


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=40, help="creates per size and round")
    parser.add_argument("--no-s3", action="store_true", help="skip SeaweedFS")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="pravega-fence-bench-") as root:
        rows += measure("files", FileSystemChunkStorage(root), args.chunks)
    if not args.no_s3:
        from pravega_ray.storage.s3 import S3ChunkStorage

        with seaweedfs() as client:
            rows += measure("s3", S3ChunkStorage("fencing-bench", "t2", client=client), args.chunks)
    print(f"{'backend':<8} {'chunk':>9} {'raw ms':>9} {'fenced ms':>10} {'overhead':>9}")
    for name, size, raw_ms, fenced_ms in rows:
        if size == 0:
            # The check: "raw" is the former one (an exists), "fenced" the listing.
            print(f"{name:<8} {'check':>9} {raw_ms:>9.3f} {fenced_ms:>10.3f} {'-':>9}")
        else:
            overhead = (fenced_ms / raw_ms - 1) * 100
            chunk = f"{size // 1024}Ki"
            print(f"{name:<8} {chunk:>9} {raw_ms:>9.2f} {fenced_ms:>10.2f} {overhead:>8.0f}%")


if __name__ == "__main__":
    main()
