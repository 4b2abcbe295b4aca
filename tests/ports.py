"""Free loopback ports for servers a test or a chaos run starts at fixed ports."""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10_000
"""Ports are drawn from ``LOWEST`` up to the start of the kernel's ephemeral range."""


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 where it cannot be read)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port_run(count: int = 1, attempts: int = 100) -> int:
    """The first of ``count`` consecutive loopback ports free now (a gateway per container
    listens on ``base + i``). RuntimeError if none is found in ``attempts`` tries.

    The ports are drawn below the kernel's ephemeral range: a port taken from that range
    (binding port 0) was also the next local port of some outgoing connection, and one
    test run lost its gateway's port so between the choice and the bind (``address already
    in use``). Another process may still bind one first: the caller binds them soon."""
    high = _ephemeral_low() - count
    for _ in range(attempts):
        base = random.randrange(LOWEST, high) if high > LOWEST else LOWEST
        try:
            for port in range(base, base + count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError(f"no run of {count} free ports found")
