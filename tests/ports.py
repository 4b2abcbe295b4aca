"""Free loopback ports for servers a test or a chaos run starts at fixed ports."""

from __future__ import annotations

import socket


def free_port_run(count: int = 1, attempts: int = 100) -> int:
    """The first of ``count`` consecutive loopback ports free now (a gateway per container
    listens on ``base + i``). RuntimeError if none is found in ``attempts`` tries. Another
    process may take one before it is bound: the caller binds them soon."""
    for _ in range(attempts):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if base + count > 65536:
            continue
        try:
            for port in range(base, base + count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError(f"no run of {count} free ports found")
