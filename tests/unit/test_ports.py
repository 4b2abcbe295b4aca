"""tests/ports.py: a run of free loopback ports below the kernel's ephemeral range."""

from __future__ import annotations

import socket

from tests.ports import _ephemeral_low, free_port_run


def test_a_run_of_free_ports_below_the_ephemeral_range() -> None:
    for count in (1, 4):
        base = free_port_run(count)
        assert base >= 10_000
        assert base + count <= _ephemeral_low()
        for port in range(base, base + count):
            with socket.socket() as server:
                server.bind(("127.0.0.1", port))
